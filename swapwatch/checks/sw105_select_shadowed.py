"""SW105: select / comm recompute that can never apply because its layers are fully recomputed."""
from __future__ import annotations

from typing import Any, Iterable, Set, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where
from ..layer_table import ranges

#: (Formative key, LayerPlan attribute) of the two keys a full recompute shadows.
SHADOWED_KEYS = (("select_recompute", "select_recompute"),
                 ("select_comm_recompute", "select_comm_recompute"))


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
        plan = ctx.plan
        if plan is None or not any(lp.full_recompute for lp in plan.layers):
            return
        full = {lp.layer for lp in plan.layers if lp.full_recompute}
        formative = getattr(plan, "formative", None) or {}
        for key, attr in SHADOWED_KEYS:
            table = formative.get(key) or {}
            if not isinstance(table, dict):
                continue
            applied: Set[str] = {p for lp in plan.layers for p in (getattr(lp, attr) or [])}
            for pattern, value in table.items():
                if pattern in applied or not _targets_something(value, plan.swap, len(plan.layers), full):
                    continue
                label = key.replace("_", " ")
                yield self.finding(
                    f"{label} pattern '{pattern}' targets only fully recomputed layers "
                    f"({_describe(value, plan.swap)}); MindFormers never applies it",
                    op=pattern, source=where(config_of(ctx), f"recompute_config.{key}.{pattern}"),
                    expected="applied on at least one layer",
                    actual="shadowed by full recompute on every targeted layer")


def _targets_something(value: Any, swap: bool, num_layers: int, full: Set[int]) -> bool:
    """Does the Formative value select any layer? Swap mode: True or layer ids; otherwise
    per-chunk counts (any count > 0). Swap-mode ids outside the model select nothing."""
    if swap:
        if value is True:
            return True
        ids = _flat(value)
        return bool(ids) and all(i in full for i in ids) and all(0 <= i < num_layers for i in ids)
    return any(v > 0 for v in _flat(value))


def _flat(value: Any) -> Tuple[int, ...]:
    if isinstance(value, bool):
        return (int(value),)
    if isinstance(value, (int, float)):
        return (int(value),)
    if hasattr(value, "tolist"):
        return _flat(value.tolist())
    if isinstance(value, (list, tuple)):
        return tuple(x for v in value for x in _flat(v))
    return ()


def _describe(value: Any, swap: bool) -> str:
    """The layers a swap-mode value selects, as a set (``[2, 2, 2, 2]`` selects layer 2 only)."""
    if swap:
        ids = sorted(set(_flat(value)))
        return f"layer{'s' if len(ids) > 1 else ''} {ranges(ids)}"
    return f"per-chunk counts {value}"
