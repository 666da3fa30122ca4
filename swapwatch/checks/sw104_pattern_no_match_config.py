"""SW104 (config time): a pattern that reaches nothing on the model layout, before launch."""
from __future__ import annotations

from typing import Iterable

from ..model.plan_view import VIEWS
from . import CheckContext, Finding, Rule, register


@register
class PatternMatchesNothing(Rule):
    """A configured pattern matches nothing on the model's layer: a silent no-op.

    **What it means.** ``swapwatch explain`` walks every applied pattern over the model family's
    layer tree (``--model``, default Llama; ``swapwatch/layouts/<family>.yaml``) exactly as
    MindFormers' LayerSetting does, segment by segment. This pattern reaches no primitive and no
    cell, or (for exclude and comm patterns, which only take primitives) only cells. MindFormers
    would print nothing for it, and the training would run without the recompute or swap you
    configured. Typical causes: a typo (``'attention\\.flash attention'``), names of another model
    variant (``feed_forward\\.w1`` on a ``qkv_concat: True`` model, whose cells are
    ``w_gate_hidden``), or a missing ``\\.`` between segments. With run logs, ``verify`` decides the
    same code from what really was logged.

    **Why it matters.** The memory you planned for is not saved, and nothing says so.

    **How to fix it.** Use the names the model has (``swapwatch explain`` prints what each
    pattern reaches)::

        recompute_config:
          select_recompute:
            'attention\\.flash_attention': True      # was 'attention\\.flash attention'
    """

    code = "SW104"
    severity = "warning"
    title = "a configured pattern matched nothing on any layer (silent no-op)"
    needs = "config"
    #: every path's plan: each knows which of its patterns reach nothing (``PlanView.unmatched``: the LayerSetting
    #: walk of each layer kind's tree, ``apply_ac``'s regex expansion over each layer's paths)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.plan is None:
            return
        for m in ctx.plan.unmatched(ctx.config):
            yield self.finding(m.message, layer=m.layer, op=m.op, source=m.source, expected=m.expected,
                               actual=m.actual)
