"""SW110 / SW111: what the compiled graph shows about recompute and offload (needs ``--ir``)."""
from __future__ import annotations

from typing import Any, Iterable, List

from . import CheckContext, Finding, Rule, register


def evidence(ir: Any) -> List[Any]:
    """``ctx.ir`` as a list of per-rank :class:`swapwatch.parsers.ir.IREvidence`."""
    if ir is None:
        return []
    if hasattr(ir, "ranks") and isinstance(ir.ranks, dict):
        return list(ir)
    return list(ir) if isinstance(ir, (list, tuple)) else [ir]


@register
class IRRecomputeNotEffective(Rule):
    """Recompute was asked for, but the compiled graph recomputes nothing there.

    **What it means.** The IR dump after MindSpore's ``add_recomputation`` pass has nodes marked
    for recompute (``recompute: Bool(1)``) but no recomputed clone (``duplicated: Bool(1)``) for
    them: a ``Primitive.recompute()`` mark on an op with no clone of that op at that place, or a
    layer whose cells were ``Cell.recompute()``-ed with not one clone. When the plan asked for a
    full recompute of a layer, a layer with no clones is reported too.

    **Why it matters.** MindSpore silently drops an op-level recompute whose consumers on the way
    to the backward pass are not recomputed too (on the tiny Llama, ``feed_forward.mul`` +
    ``feed_forward.w1.activation.silu`` alone give 0 clones: the ``reshape`` in ``w2`` keeps the
    activation alive). The log line ``Set select recompute ...`` is printed anyway, and the memory
    stays the same.

    **How to fix it.** Recompute the path to the consumer too, or the whole sub-cell::

        recompute_config:
          select_recompute:
            'feed_forward\\.mul': True
            'feed_forward\\.w1\\.activation\\.silu': True
            'feed_forward\\.w2\\.reshape': True      # the consumer of mul
        # or recompute the cell:  'feed_forward': True
    """

    code = "SW110"
    severity = "error"
    title = "recompute marked but not effective in the compiled graph"
    needs = "ir"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        full_layers = [lp.layer for lp in (plan.layers if plan is not None else []) if lp.full_recompute]
        for ev in evidence(ctx.ir):
            for (layer, path, op), n in ev.ineffective_prim_marks():
                where = ev.op_path((layer, path, op))
                yield self.finding(
                    f"{where} is marked for recompute ({n} node(s)) but the compiled graph has no "
                    f"recomputed {op} there: MindSpore dropped the recompute because its consumers "
                    "are not recomputed", rank=ev.rank, layer=layer, op=where, expected="recomputed",
                    actual="0 clones", source=ev.sources.get((layer, path, op)))
            for layer in ev.ineffective_cell_layers():
                yield self.finding("the layer has cells in a recompute scope but no recomputed node",
                                   rank=ev.rank, layer=layer, expected="recomputed", actual="0 clones")
            if ev.files and any("add_recomputation" in f for f in ev.files):
                for layer in full_layers:
                    if ev.clone_count(layer) == 0 and layer not in ev.ineffective_cell_layers():
                        yield self.finding("the layer is planned for full recompute but the compiled "
                                           "graph recomputes nothing in it", rank=ev.rank, layer=layer,
                                           expected="full recompute", actual="0 clones")


@register
class IROffloadOutsideLazyInline(Rule):
    """Offload (swap) is marked in the compiled graph but cannot take effect there.

    **What it means.** Nodes carry ``offload: Bool(1)`` with their ``backward_prefetch``, but
    MindSpore inserted no ``MoveTo`` node: the marks sit outside a ``lazy_inline`` cell, where
    offload is a no-op (MindSpore also logs ``Offload does not take effect outside the scope of the
    lazy_inline Cell`` once per node).

    **Why it matters.** The ``Set layer swap`` / ``Set op_swap`` lines are printed, but no
    activation leaves device memory.

    **How to fix it.** Swap needs graph mode on Ascend with ``@lazy_inline`` decoder layers; without
    pipeline parallel set ``ENABLE_LAZY_INLINE_NO_PIPELINE=1`` (SW302) and::

        context:
          memory_optimize_level: O0
    """

    code = "SW111"
    severity = "warning"
    title = "offload marked outside a lazy_inline cell (no MoveTo in the compiled graph)"
    needs = "ir"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        from ..parsers.ir import offload_ignored

        for ev in evidence(ctx.ir):
            for layer, text, prefetches in offload_ignored(ev):
                # a mark outside the decoder layers has no layer field: the text says where
                yield self.finding(text if layer is not None else f"outside the decoder layers: {text}",
                                   rank=ev.rank, layer=layer, actual="no MoveTo",
                                   expected=f"MoveTo (backward_prefetch {', '.join(prefetches)})")
