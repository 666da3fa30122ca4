"""SW101: a configured action is missing from the log."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..model import actions
from ..model.plan_view import VIEWS
from . import CheckContext, Finding, Rule, register
from ..engine.compare import describe, near_source

if TYPE_CHECKING:
    from ..engine.compare import Expected


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
    #: every path's comparison (``compare.Comparison``: patterns on LayerSetting, module paths on ``apply_ac``)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        comp, runlog = ctx.comparison, ctx.runlog
        if comp is None or runlog is None:      # (a comparison is made of a runlog: both or neither)
            return
        # per rank; with ranks that each log only their own pipeline stage, all ranks together (rank None)
        for diff in comp.judged():
            if not diff.has_strategy_lines:
                continue            # no strategy lines at all: SW106 / SW108 say why, once
            rank_log = runlog.ranks[diff.rank] if diff.rank is not None else None
            for e in diff.missing:
                if not comp.missing_differs(e):
                    continue        # matched nothing anywhere and nothing says it should: SW104
                what = describe(e.action, e.op)
                pat = f" (pattern '{e.pattern}')" if e.pattern and e.op != e.pattern else ""
                yield self.finding(
                    f"{what}{pat} is configured but the log has no "
                    f"line for it",
                    rank=diff.rank, layer=e.layer, op=e.op or e.action,
                    expected=_expected(e), actual="(not logged)",
                    source=near_source(diff, e.layer, rank_log))


def _expected(e: "Expected") -> object:
    if e.action in actions.SWAP_ACTIONS:
        return e.value
    return e.op or e.action
