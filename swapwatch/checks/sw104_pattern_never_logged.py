"""SW104 (run time): a configured pattern matched nothing in any rank's log."""
from __future__ import annotations

from typing import Iterable, List

from ..model import actions
from ..model.plan_view import VIEWS
from . import CheckContext, Finding, Rule, register
from ..text import ranges


@register
class PatternNeverLogged(Rule):
    """A configured pattern matched nothing on any layer of any rank: a silent no-op.

    **What it means.** The plan applies this pattern on some layers, yet no rank logged a single
    path it matches for that action. MindFormers logs nothing at all for a pattern that matches
    no cell or primitive, so a typo (``'attention\\.flash attention'``), a pattern written for
    another model (``feed_forward\\.w1\\...`` on a ``qkv_concat: True`` model whose cells are
    ``w_gate_hidden``), or an exclude / comm pattern that names a *cell* (they only take
    primitives) looks exactly like this. At config time (``swapwatch explain``) the same code is
    decided from the model layout; with logs, the logs decide, so other model families are
    judged by what they really logged.

    **Why it matters.** You believe an activation is recomputed or swapped and it is not: the
    memory you planned for is not saved.

    **How to fix it.** Write the path as the model names it (``swapwatch explain`` shows what
    each pattern reaches on the Llama layout; the log's ``Set ...`` lines show real names)::

        recompute_config:
          select_recompute:
            'attention\\.flash_attention': True     # was 'attention\\.flash attention'
    """

    code = "SW104"
    severity = "warning"
    title = "a configured pattern matched nothing on any layer (silent no-op)"
    needs = "run"
    #: every path's comparison: a pattern no rank's lines match (LayerSetting), or the path's own notice that
    #: one matched no module (``apply_ac``'s WARNING)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        comp = ctx.comparison
        if comp is None:
            return
        # what the log says itself: MindFormers' "did not match any module" WARNING, per rank (with ranks that
        # each log their own pipeline stage, not a stage's warning for a pattern that matches on another stage)
        for rank, diff in sorted(comp.ranks.items()):
            for n in comp.no_match(diff):
                yield self.finding(f"{n.data['label']} pattern '{n.data['pattern']}' did not match any module "
                                   "(MindFormers' warning): nothing applied for it", rank=rank, op=n.data["pattern"],
                                   source=n.source)
        if not any(d.has_strategy_lines or d.notices.no_match for d in comp.ranks.values()):
            # no rank logged a strategy line: the logs cannot tell, the plan still can (the
            # config-time variant), so verify keeps the config finding explain gives
            from . import VARIANTS

            config_time = VARIANTS.get(self.code, {}).get("config")
            if config_time is not None:
                yield from config_time.check(ctx)
            return
        cfg = ctx.static_config
        done = set()
        for layer in sorted(comp.expected):
            for e in comp.expected[layer]:
                key = (e.action, e.pattern)
                if e.pattern is None or e.literal or not e.logged or key in done:
                    continue
                done.add(key)
                if key in comp.seen_anywhere:
                    continue
                if comp.layout_trusted and key in comp.layout_matches:
                    continue        # the layout says it must log: the missing lines are SW101
                dflt = comp.defaulted.get(e.action, ())
                if e.pattern in dflt and any((e.action, d) in comp.seen_anywhere for d in dflt):
                    continue        # MindFormers' defaults span layer kinds: others of them applied
                layers = [lay for lay in sorted(comp.expected)
                          if any((x.action, x.pattern) == key for x in comp.expected[lay])]
                # the place is said once: one layer in ``layer`` (the renderer puts it in front),
                # several in the text
                one = len(layers) == 1
                on = "" if one else f" on {_layers(layers)}"
                hint = comp.hint(e.action, e.pattern, layers[0])
                yield self.finding(
                    f"{actions.LABEL[e.action]} pattern '{e.pattern}' is applied{on} "
                    f"but no rank logged any path it matches: it does nothing{hint}",
                    layer=layers[0] if one else None, op=e.pattern,
                    expected=f"a matching path on {_layers(layers)}",
                    actual="(no matching path logged)",
                    source=cfg.pattern_where(e.action, e.pattern) if cfg is not None else None)


def _layers(layers: List[int]) -> str:
    """``layer 3`` / ``layers 0-3, 8``."""
    return ("layer " if len(layers) == 1 else "layers ") + ranges(layers, 6)
