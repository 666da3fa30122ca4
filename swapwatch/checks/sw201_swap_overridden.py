"""SW201: a swap that recompute voids on the same layer (same op, or the whole layer)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where


@register
class SwapOverridden(Rule):
    """A swap is configured where the same op, or the whole layer, is also recomputed.

    **What it means.** MindFormers applies both: it logs ``Set layer swap`` / ``Set op_swap`` for
    the layer and also recomputes it. But an activation that is recomputed is never kept for the
    backward pass, so there is nothing to offload: *when recompute and swap are both on,
    recompute wins* (MindFormers' SWAP documentation). This rule fires per layer for every swap
    in ``swap_overridden`` of ``swapwatch explain``: a layer swap or op swap on a fully recomputed
    layer (swap mode ``recompute: True`` or a listed layer id), an op swap whose op (or a cell
    containing it) is select-recomputed, and the part of a layer swap that a select pattern
    recomputes. MindFormers' only hint is a WARNING ("... is enabled swap do not work!").

    **Why it matters.** You pay the host-device copies and the extra configuration, and save no
    device memory; the memory plan you made for the swapped layers is wrong.

    **How to fix it.** Decide per layer: either recompute it or swap it. For example, recompute
    layers 0-1 and swap flash attention only on the others::

        recompute_config:
          recompute: [0, 1]                 # swap mode: layer ids
        swap_config:
          swap: True
          op_swap:
            - op_name: '.*\\.flash_attention'
              backward_prefetch: 1
              layers: [2, 3]                # not 0, 1
    """

    code = "SW201"
    severity = "error"
    title = "swap overridden: the same op, or the whole layer, is also recomputed"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if plan is None or not plan.swap:
            return
        cfg = config_of(ctx)
        for lp in plan.layers:
            if not lp.swap_overridden:
                continue
            parts = []
            for o in lp.swap_overridden:
                if o.scope == "layer":
                    parts.append(f"layer swap (prefetch {lp.layer_swap}): {o.why}")
                elif o.scope == "part":
                    parts.append(f"part of the layer swap: {o.why}")
                else:
                    parts.append(f"op swap '{o.pattern}' (prefetch {lp.op_swap.get(str(o.pattern))}): {o.why}")
            key = f"swap_config.{lp.swap_overridden[0].action}"
            source = (where(cfg, key) or where(cfg, "swap_config")) if cfg is not None else None
            yield self.finding("swap has no effect: " + "; ".join(parts),
                               layer=lp.layer, op=", ".join(o.entry for o in lp.swap_overridden), source=source,
                               expected="swap takes effect", actual="voided by recompute")
