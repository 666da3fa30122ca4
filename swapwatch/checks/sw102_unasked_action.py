"""SW102: the log shows an action the config does not ask for."""
from __future__ import annotations

from typing import Iterable

from ..model import actions
from ..model.plan_view import VIEWS
from . import CheckContext, Finding, Rule, register
from ..engine.compare import describe


@register
class UnaskedAction(Rule):
    """The log shows an action at a layer where the config does not ask for it.

    **What it means.** A ``Set full recompute`` / ``Set select ... recompute`` / ``Set layer
    swap`` / ``Set op_swap`` line names a layer (or an op path) that no applied pattern of the
    config covers at that layer. Typical causes: the run used another config (a different
    ``recompute`` count, another pipeline split so layers moved between stages, swap mode on or
    off — swap turns per-stage *counts* into layer *ids*), or the config you verify against is
    not the one deployed.

    **Why it matters.** Recomputation and swap cost step time; an unasked full recompute can make
    a run 30 % slower, an unasked swap can starve host bandwidth. And it means the config you
    are reading is not the one that ran.

    **How to fix it.** Verify against the config the job really used (``swapwatch verify LOGS``
    without ``--config`` uses the config printed in the log). Remember that in swap mode lists
    are layer ids::

        swap_config: {swap: True}
        recompute_config:
          recompute: [0, 1]      # layers 0 and 1, not "0 layers in stage 0, 1 in stage 1"
    """

    code = "SW102"
    severity = "error"
    title = "action in the log that the config does not ask for"
    needs = "run"
    #: every path's comparison (``compare.Comparison``: patterns on LayerSetting, module paths on ``apply_ac``)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        comp = ctx.comparison
        if comp is None:
            return
        for rank, diff in sorted(comp.ranks.items()):
            yield from self._past_ceiling(ctx, rank)
            for s in diff.extra:
                what = describe(s.action, s.path)
                value = f" (value {s.value})" if s.action in actions.SWAP_ACTIONS and s.value is not None else ""
                yield self.finding(
                    f"the log shows {what}{value}, which the config "
                    f"does not apply at this layer",
                    rank=rank, layer=s.layer, op=s.path or s.action,
                    expected="(not configured)",
                    actual=s.value if s.action in actions.SWAP_ACTIONS else (s.path or s.action),
                    source=s.source)

    def _past_ceiling(self, ctx: CheckContext, rank: int) -> Iterable[Finding]:
        """Strategy lines for layer ids no config swapwatch reads can have (the parsers count them
        instead of keeping one event each: ``parsers.reader.LAYER_CEILING``): one finding for all."""
        rank_log = ctx.runlog.ranks.get(rank) if ctx.runlog is not None else None
        # the notice tally is read from a packed rank's summary; asking its events unpacked every
        # rank that has any notice (offload warnings: all of them), 1.3 s of the parent at 10,000 ranks
        if rank_log is None or not rank_log.notices("past_layer_ceiling").n:
            return
        for n in rank_log.of("notice"):
            if n.what == "past_layer_ceiling":                               # type: ignore[attr-defined]
                d = n.data                                                   # type: ignore[attr-defined]
                yield self.finding(
                    f"the log shows {d['count']:,} strategy line(s) for layers {d['first_layer']}-{d['last_layer']}, "
                    f"past any layer count (swapwatch reads configs of at most {d['ceiling']:,} layers): the "
                    "config applies nothing there; counted, not compared one by one",
                    rank=rank, expected="(no such layer)", actual=f"{d['count']:,} line(s)", source=n.source)
