"""SW104 (run time): a configured pattern matched nothing in any rank's log."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional

from .. import actions
from ..plan_view import APPLY_AC, LAYER_SETTING
from . import ApplyAcComparison, CheckContext, Finding, Rule, register
from ..text import ranges
from ._config_ctx import config_of, pattern_where

if TYPE_CHECKING:
    from ..plan import Plan


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
    #: both views: verify's comparison of either path (``compare.Comparison`` or, on ``apply_ac``,
    #: ``pynative.verify.PynativeComparison``) is read here, and nowhere else
    views = (LAYER_SETTING, APPLY_AC)

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.view == APPLY_AC:
            pcomp = ctx.pynative_comparison
            if pcomp is not None:
                yield from self._apply_ac(pcomp)
            return
        comp = ctx.static_comparison
        if comp is None:
            return
        if not any(d.has_strategy_lines for d in comp.ranks.values()):
            # no rank logged a strategy line: the logs cannot tell, the layout still can (the
            # config-time variant), so verify keeps the config finding explain gives
            from . import VARIANTS

            config_time = VARIANTS.get(self.code, {}).get("config")
            if config_time is not None:
                yield from config_time.check(ctx)
            return
        plan = ctx.static_plan
        done = set()
        for layer in sorted(comp.expected):
            for e in comp.expected[layer]:
                key = (e.action, e.pattern)
                if e.pattern is None or not e.logged or key in done:
                    continue
                done.add(key)
                if key in comp.seen_anywhere:
                    continue
                if comp.layout_trusted and key in comp.layout_matches:
                    continue        # the layout says it must log: the missing lines are SW101
                dflt = (plan.defaulted if plan is not None else {}).get(e.action, ())
                if e.pattern in dflt and any((e.action, d) in comp.seen_anywhere for d in dflt):
                    continue        # MindFormers' defaults span layer kinds: others of them applied
                layers = [lay for lay in sorted(comp.expected)
                          if any((x.action, x.pattern) == key for x in comp.expected[lay])]
                # the place is said once: one layer in ``layer`` (the renderer puts it in front),
                # several in the text
                one = len(layers) == 1
                on = "" if one else f" on {_layers(layers)}"
                hint = _suggest(plan, e.action, e.pattern, layers[0])
                yield self.finding(
                    f"{actions.LABEL[e.action]} pattern '{e.pattern}' is applied{on} "
                    f"but no rank logged any path it matches: it does nothing{hint}",
                    layer=layers[0] if one else None, op=e.pattern,
                    expected=f"a matching path on {_layers(layers)}",
                    actual="(no matching path logged)",
                    source=pattern_where(config_of(ctx), e.action, e.pattern))

    def _apply_ac(self, comp: "ApplyAcComparison") -> Iterable[Finding]:
        """``apply_ac`` says it itself: its "did not match any module" WARNING, per rank (with pipeline parallel,
        not a stage's warning for a pattern that matches on another stage)."""
        for rank in sorted(comp.ranks):
            for n in comp.no_match_notices(rank):
                yield self.finding(f"{n.data['label']} pattern '{n.data['pattern']}' did not match any module "
                                   "(MindFormers' warning): nothing applied for it", rank=rank, op=n.data["pattern"],
                                   source=n.source)


def _layers(layers: List[int]) -> str:
    """``layer 3`` / ``layers 0-3, 8``."""
    return ("layer " if len(layers) == 1 else "layers ") + ranges(layers, 6)


def _suggest(plan: Optional["Plan"], action: str, pattern: str, layer: int) -> str:
    """The config-time rule's did-you-mean (a close name, or the other code path's name) when the
    plan's family has a tree to check it on; empty otherwise."""
    from .sw104_pattern_no_match_config import nearest_path, other_path_name

    fam = plan.family if plan is not None else None
    if plan is None or fam is None or not fam.known:
        return ""
    try:
        near = nearest_path(fam.layout(plan.layout_key(layer)), pattern)
        if near and near != pattern:
            return f" (did you mean '{near}'?)"
        other = other_path_name(plan.walker(layer), pattern, actions.WALK_MODE[action], fam.path)
    except Exception:       # noqa: BLE001 - a suggestion is a courtesy, never a failure
        return ""
    return f" ({other})" if other else ""
