"""SW211: a select recompute set that MindSpore will drop whole (it frees nothing), before launch."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, select_sets, where


@register
class SelectFreesNothing(Rule):
    """The select recompute set of a layer frees no memory: MindSpore drops every mark.

    **What it means.** MindSpore recomputes a marked primitive only when every forward consumer of
    its output is marked too; otherwise the output stays alive for that consumer and the mark is
    dropped, and a dropped op in turn voids the ops feeding it. On the layer's tensor table
    (``swapwatch/memory/<family>.yaml``) nothing of this set survives: MindFormers' default select
    set (``feed_forward.mul`` + ``feed_forward.w1.activation.silu`` on the plain legacy Llama layer;
    ``mlp.mul`` + ``mlp.activation_func.silu`` on mcore) is such a set, because the product goes to an
    unmarked op whose backward needs nothing of it (legacy: ``w2``'s reshape; DryRun L1 of the
    Llama-3.1-70B cut peaks at 8485 MiB with and without it). Not on the fine-grain interleaved layer
    (``fine_grain_interleave`` > 1), whose ``w2`` reads the product itself: there MindSpore recomputes
    the set (docs/estimate.md "Fine-grain interleave"). A cell the layer never calls marks nothing
    either: the fine-grain interleaved layer uses its ``attention`` cell through its methods
    (``models/llama/llama_interleave.py:LLamaDecodeLayerInterleave``), so ``'attention'`` frees nothing
    there (DryRun L1: the same peak with and without it). The compiled graph confirms it as SW110 (``--ir``).

    **Why it matters.** The log still prints ``Set select recompute ...`` and explain shows the
    patterns applied, but the peak is what it would be without them; ``swapwatch estimate`` values
    the set at 0 bytes.

    **How to fix it.** Mark the consumer's cell too, or the whole MLP cell (a cell keeps only its
    own output, so everything inside it is recomputed); ``swapwatch estimate`` credits both::

        recompute_config:
          select_recompute:
            'feed_forward\\.mul': True
            'feed_forward\\.w1\\.activation\\.silu': True
            'feed_forward\\.w2': True            # the consumer of mul
        # or the cell:  'feed_forward': True    (mcore: 'mlp')
    """

    code = "SW211"
    severity = "warning"
    title = "a select recompute set frees nothing (MindSpore drops its marks)"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        if plan is None:
            return
        from ..memory.tensor_table import frees_nothing, never_called

        for (key, pats), layers in select_sets(plan).items():
            reached = frees_nothing(cfg, key, pats)
            if not reached:
                continue
            from ..text import ranges

            # each pattern as the YAML has it, single-quoted (a ' doubled), so it can be copied back:
            # repr() doubled every backslash ('feed_forward\\.mul'), which is another regex in a YAML
            shown = ", ".join("'" + p.replace("'", "''") + "'" for p in pats)
            uncalled = never_called(cfg, key, pats)
            ops = reached - uncalled
            why = [f"the layer never calls the {', '.join(sorted(uncalled))} cell (it calls the cell's methods), so "
                   "its recompute marks nothing"] if uncalled else []
            if ops:
                why.append(f"each reached op ({', '.join(sorted(ops))}) feeds an op outside the set, so MindSpore "
                           "drops every mark")
            yield self.finding(
                f"select_recompute {shown} frees nothing on layer(s) {ranges(layers, sep=',')}: " + "; ".join(why),
                layer=layers[0], op=", ".join(pats), source=where(cfg, "recompute_config.select_recompute"),
                expected="memory freed", actual="0 bytes (marks dropped)")
