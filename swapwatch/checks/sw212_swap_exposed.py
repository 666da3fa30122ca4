"""SW212: a swap whose copies its backward_prefetch cannot hide behind compute (the step waits)."""
from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, layer_swap_where, pattern_where


@register
class SwapExposed(Rule):
    """A swap moves more than its ``backward_prefetch`` gives the host link time for: kernels wait.

    **What it means.** MindSpore copies an offloaded activation to host right after the op that
    makes it, and makes the compute stream wait for that copy ``3 x backward_prefetch`` places
    later (where it frees the device memory); in backward it starts the copy back after the kernel
    ``backward_prefetch + 1`` places before the first op that reads it. ``backward_prefetch``
    counts **kernels**, not layers (a legacy Llama layer's backward is about 60 of them). When the
    copies take longer than the compute of those kernels, the step waits (docs/plan.md, "Swap";
    docs/mindspore-facts.md §7). swapwatch times the copies at the host bandwidth (the 910B default,
    30 GB/s a direction, assumed; ``plan`` / ``estimate --host-bandwidth`` set another) and the
    kernels by their FLOPs at the device's achieved throughput (200 TFLOP/s assumed), on the layer's
    tensor table (``explain --host-bandwidth`` sets the link too); the finding names the bytes, both
    times, the wait and a prefetch that hides it.

    **Why it matters.** The memory is saved, but every micro-batch pays the wait: a swap meant to
    beat recompute can cost more than recomputing. (Nothing in the logs says so: the ``Set ...
    swap`` lines look the same.)

    **How to fix it.** Give the swap the prefetch the finding names, or swap less (fewer layers, a
    smaller op); with ``swapwatch plan --allow-swap`` the planner chooses the prefetch itself::

        swap_config:
          swap: True
          layer_swap:
            - {backward_prefetch: 64, layers: [0, 4, 8]}   # was 2: about one layer's backward ahead
    """

    code = "SW212"
    severity = "warning"
    title = "a swap's backward_prefetch cannot hide its copies (the step waits)"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        if plan is None or cfg is None or not plan.swap:
            return
        from ..errors import InputError
        from ..memory import swap_cost
        from ..memory.model import check_family, estimate_plan, layer_families, memory_family
        from ..memory.spec import spec_from_config
        from ..text import fmt_size, ranges

        try:
            check_family(plan)
            spec = spec_from_config(cfg)
            est = estimate_plan(cfg.source or "<config>", cfg, plan, spec, link=ctx.link)
        except (InputError, ValueError, KeyError, ZeroDivisionError):
            return          # no sizes, or a family without a tensor table: nothing to time
        if not est.swaps or est.link is None:
            return
        link = est.link
        tables, _ = layer_families(spec, plan, memory_family(spec, plan))
        progs: Dict[int, Tuple[List[Tuple[int, swap_cost.LayerProgram]], List[swap_cost.SwapItem]]] = {}
        for stage, prog, items in swap_cost.chunks(plan.layers, tables, plan.geometry):
            progs.setdefault(stage, (prog, items))
        for stage, sw in sorted(est.swaps.items()):
            groups: Dict[Tuple[str, int], List[swap_cost.SwapCost]] = {}
            for c in sw.costs:
                if not c.hides:
                    groups.setdefault((c.what, c.prefetch), []).append(c)
            for (what, prefetch), costs in groups.items():
                layers = [c.layer for c in costs]
                worst = max(costs, key=lambda c: c.exposed_seconds)
                fix = ""
                if stage in progs:
                    prog, items = progs[stage]
                    which = [k for k, it in enumerate(items) if it.layer in layers and it.what == what]
                    p = swap_cost.prefetch_that_hides(prog, items, which, link) if which else None
                    fix = (f"; a backward_prefetch of {p} hides it" if p is not None else
                           "; no backward_prefetch up to 256 hides it: swap fewer layers or a smaller op")
                kind = "layer swap" if what == "layer" else f"op swap '{what}'"
                step = sum(c.exposed_seconds for c in costs) * spec.micro_batch_num
                msg = (f"{kind} (backward_prefetch {prefetch}) on layer(s) {ranges(layers, sep=',')} of stage "
                       f"{stage} moves {fmt_size(worst.bytes)} per micro-batch: {worst.d2h_seconds * 1e3:.3g} ms out "
                       f"and {worst.h2d_seconds * 1e3:.3g} ms back at {link.d2h / 1e9:.3g} / {link.h2d / 1e9:.3g} "
                       f"GB/s, behind {worst.forward_window_seconds * 1e3:.3g} ms of forward and "
                       f"{worst.backward_window_seconds * 1e3:.3g} ms of backward compute ({link.flops / 1e12:.3g} "
                       f"TFLOP/s): kernels wait {worst.exposed_seconds * 1e3:.3g} ms per micro-batch, "
                       f"{step * 1e3:.3g} ms per step (bandwidth {link.bandwidth_from}){fix}")
                src = layer_swap_where(cfg, layers[0]) if what == "layer" else pattern_where(cfg, "op_swap", what)
                yield self.finding(msg, layer=layers[0], op=what, source=src,
                                   expected="the copies hidden behind compute",
                                   actual=f"{worst.exposed_seconds * 1e3:.3g} ms waited per micro-batch")
