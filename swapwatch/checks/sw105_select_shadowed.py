"""SW105: select / comm recompute that can never apply because its layers are fully recomputed."""
from __future__ import annotations

from typing import Dict, Iterable, List, Set

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where
from ..text import ranges

#: The two keys a full recompute shadows (Formative key = LayerPlan attribute).
SHADOWED_KEYS = ("select_recompute", "select_comm_recompute")


@register
class SelectShadowed(Rule):
    """Select or comm recompute is configured only on layers that are fully recomputed.

    **What it means.** MindFormers applies ``select_recompute`` and ``select_comm_recompute`` to
    a layer only when that layer is *not* fully recomputed (the full recompute already covers
    every op). A pattern whose every targeted layer falls inside the full-recompute window is
    therefore never applied and never logged. The documented 48-layer example has one:
    ``'feed_forward\\.w3\\.matmul': [2,1,0,0,0]`` targets layers 0, 4 and 24, all of which
    ``recompute: [[2,1,0,0,0],[1,0,0,0,0]]`` recomputes in full. (Patterns that are shadowed on
    some layers but apply on others are fine and not reported.)

    **Why it matters.** The key is dead configuration: it looks like a tuning decision but does
    nothing, and a later change of ``recompute`` silently brings it to life.

    **How to fix it.** Drop the pattern, or aim it at layers outside the full-recompute window::

        recompute_config:
          recompute: [[2,1,0,0,0],[1,0,0,0,0]]
          select_recompute:
            'feed_forward\\.w3\\.matmul': [3,2,0,0,0]    # reaches past the fully recomputed layers
    """

    code = "SW105"
    severity = "warning"
    title = "select / comm recompute configured only where layers are fully recomputed"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if plan is None:
            return
        formative = plan.formative or {}
        for key in SHADOWED_KEYS:
            # the engine records, per layer, the patterns full recompute shadows there
            # (LayerPlan.select_shadowed); reported: those applied on no layer at all
            applied: Set[str] = {p for lp in plan.layers for p in getattr(lp, key)}
            where_shadowed: Dict[str, List[int]] = {}
            for lp in plan.layers:
                for pattern in lp.select_shadowed.get(key, ()):
                    where_shadowed.setdefault(pattern, []).append(lp.layer)
            for pattern, layers in where_shadowed.items():
                if pattern in applied:
                    continue
                label = key.replace("_", " ")
                # swap on: the value lists layer ids, so say which; off: per-chunk counts, as written
                what = (f"layer{'s' if len(layers) > 1 else ''} {ranges(layers)}" if plan.swap
                        else f"per-chunk counts {(formative.get(key) or {}).get(pattern)}")
                yield self.finding(
                    f"{label} pattern '{pattern}' targets only fully recomputed layers "
                    f"({what}); MindFormers never applies it",
                    op=pattern, source=where(config_of(ctx), f"recompute_config.{key}.{pattern}"),
                    expected="applied on at least one layer",
                    actual="shadowed by full recompute on every targeted layer")
