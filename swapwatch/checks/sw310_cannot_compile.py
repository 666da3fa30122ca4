"""SW310: select recompute MindSpore cannot compile on that layer (the job dies in graph compile)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, select_sets, where


@register
class CannotCompile(Rule):
    """A select recompute pattern marks a whole cell MindSpore cannot compile recomputed on that layer.

    **What it means.** On the fine-grain interleaved Llama layer (legacy path, ``fine_grain_interleave``
    > 1 with ``model_parallel`` > 1: ``models/llama/llama_interleave.py``), marking the whole
    ``feed_forward`` cell for select recompute makes MindSpore 2.10's graph compile fail: the pass
    ``MicroInterleavedOrderControl`` orders the layer's communication against its interleaved parts,
    and with the MLP cell recomputed that order has a cycle ("Graph cycle exists", a RuntimeError from
    ``TopoSort``). DryRun L1 of a Llama2-70B cut shows it with the cell on a single layer. The cells are
    listed per family in its tensor table (``uncompilable_select`` in
    ``swapwatch/memory/<family>.yaml``); ``swapwatch plan`` never writes them.

    **Why it matters.** The job fails on every rank during compile, after the cluster slot is
    allocated and the network built, with a framework traceback that names neither the key nor the
    layer.

    **How to fix it.** Recompute the whole layer instead (full recompute compiles), or mark the MLP's
    primitives rather than the cell (MindFormers' default set compiles and, on this layer, frees the
    SiLU-Mul product); ``swapwatch plan`` finds the cheapest of these that fits::

        recompute_config:
          recompute: [1, 0]                 # the layer instead of its feed_forward cell
          select_recompute:
            'feed_forward\\.mul': True
            'feed_forward\\.w1\\.activation\\.silu': True
    """

    code = "SW310"
    severity = "error"
    title = "MindSpore cannot compile this select recompute on that layer"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        if plan is None:
            return
        from ..memory.tensor_table import cannot_compile
        from ..text import ranges

        for (key, pats), layers in select_sets(plan).items():
            cells = cannot_compile(cfg, key, pats)
            if not cells:
                continue
            yield self.finding(
                f"select_recompute marks the whole {', '.join(sorted(cells))} cell on layer(s) "
                f"{ranges(layers, sep=',')} of the fine-grain interleaved layer: MindSpore fails to compile "
                "it (\"Graph cycle exists\", pass MicroInterleavedOrderControl)",
                layer=layers[0], op=", ".join(pats), source=where(cfg, "recompute_config.select_recompute"),
                expected="a graph MindSpore compiles", actual="compile fails (graph cycle)")
