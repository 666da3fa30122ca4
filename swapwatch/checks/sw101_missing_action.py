"""SW101: a configured action is missing from the log."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

from .. import actions
from ..plan_view import APPLY_AC, LAYER_SETTING
from . import ApplyAcComparison, ApplyAcPair, CheckContext, Finding, Rule, register
from ..compare import describe, near_source

if TYPE_CHECKING:
    from ..compare import Expected


@register
class MissingAction(Rule):
    """A configured action is missing from a rank's log.

    **What it means.** The config (through MindFormers' own per-layer rules, see ``swapwatch
    explain``) applies something at a layer — a full recompute, a select / comm recompute or
    exclude pattern, a layer swap or an op swap — but the rank's log has no line that shows it.
    A pattern counts as shown when any path in that layer's ``Set ...`` line for the action
    matches it segment by segment, so MindFormers' habit of logging only the last of several
    sibling matches does not cause this finding, and neither do actions MindFormers applies
    without a line (``recompute: True`` in swap mode) or layers a truncated log never reached
    (that is SW106). A pattern that no rank logged anywhere is SW104 instead, unless the model
    layout shows it must match.

    **Why it matters.** The run did not do what the YAML says: either it ran with another
    config than the one you think (check SW107), the model's cell names differ on this layer,
    or the log was edited or filtered.

    **How to fix it.** Compare ``swapwatch explain CONFIG`` with the log's ``Set ...`` lines for
    the layer named. If the run really used another config, verify against that one. If the
    pattern does not reach the op on this model, fix the pattern, e.g.::

        recompute_config:
          select_recompute:
            'feed_forward\\.w1\\.activation\\.silu': True   # not 'feed_forward\\.activation\\.silu'
    """

    code = "SW101"
    severity = "error"
    title = "configured action missing from the log"
    needs = "run"
    #: both views: verify's comparison of either path (``compare.Comparison`` or, on ``apply_ac``,
    #: ``pynative.verify.PynativeComparison``) is read here, and nowhere else
    views = (LAYER_SETTING, APPLY_AC)

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.view == APPLY_AC:
            pcomp = ctx.pynative_comparison
            if pcomp is not None:
                yield from self._apply_ac(pcomp)
            return
        comp, runlog = ctx.static_comparison, ctx.runlog
        if comp is None or runlog is None:      # (a comparison is made of a runlog: both or neither)
            return
        for rank, diff in comp.ranks.items():
            if not diff.has_strategy_lines:
                continue            # no strategy lines at all: SW106 / SW108 say why, once
            rank_log = runlog.ranks[rank]
            for e in diff.missing:
                if not comp.missing_differs(e):
                    continue        # matched nothing anywhere and nothing says it should: SW104
                what = describe(e.action, e.op)
                pat = f" (pattern '{e.pattern}')" if e.pattern and e.op != e.pattern else ""
                yield self.finding(
                    f"{what}{pat} is configured but the log has no "
                    f"line for it",
                    rank=rank, layer=e.layer, op=e.op or e.action,
                    expected=_expected(e), actual="(not logged)",
                    source=near_source(diff, e.layer, rank_log))


    def _apply_ac(self, comp: "ApplyAcComparison") -> Iterable[Finding]:
        """``apply_ac``: an expected ``Set ...`` line, path or map entry the log lacks. With pipeline parallel each
        stage logs its own layers, so missing is decided on the union of the ranks (rank None)."""
        pipeline = comp.pipeline
        sides: List[Tuple[Optional[int], List[ApplyAcPair]]]
        sides = [] if pipeline else [(rank, comp.pairs(rank)) for rank in sorted(comp.ranks) if comp.compared(rank)]
        if pipeline:
            sides.append((None, comp.union_pairs()))
        for rank, pairs in sides:
            for key, e, g, where in pairs:
                layer, action = key
                if e is None:
                    continue
                if g is None:
                    yield self.finding(f"expected {comp.line_text(key, e)} is not in the log", rank=rank, layer=layer,
                                       op=action, expected=e, actual=None)
                    continue
                lost = [p for p in e if p not in g]
                if e != g and lost:
                    yield self.finding(f"{action}: {', '.join(lost)} expected but not logged "
                                       f"(log: {', '.join(g) or '-'})",
                                       rank=rank, layer=layer, op=action, expected=e, actual=g, source=where)


def _expected(e: "Expected") -> object:
    if e.action in actions.SWAP_ACTIONS:
        return e.value
    return e.op or e.action
