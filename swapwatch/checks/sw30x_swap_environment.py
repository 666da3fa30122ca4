"""SW301-SW303: what the swap feature needs from the run environment (context and env vars)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where

if TYPE_CHECKING:
    from ..model.plan import Plan


def _swap_plan(ctx: CheckContext) -> Optional["Plan"]:
    """The LayerSetting plan when it swaps (these rules are about what swap needs), else None."""
    plan = ctx.static_plan
    return plan if plan is not None and plan.swap else None


def _swap_on(ctx: CheckContext) -> bool:
    return _swap_plan(ctx) is not None


def _context(ctx: CheckContext) -> dict:
    cfg = config_of(ctx)
    return dict((cfg.context if cfg is not None else None) or {})


@register
class SwapNeedsO0(Rule):
    """Swap needs ``context.memory_optimize_level: O0``.

    **What it means.** MindFormers' SWAP documentation: fine-grained activation swap is not
    supported together with SOMAS, the static memory planner that ``memory_optimize_level: O1``
    turns on. The YAML sets another level.

    **Why it matters.** The offload attributes are set (the log shows ``Set op_swap ...``), but
    the memory plan does not honour them: no memory is saved, or the job fails at compile time.

    **How to fix it.**::

        context:
          memory_optimize_level: "O0"
    """

    code = "SW301"
    severity = "error"
    title = "swap needs context.memory_optimize_level: O0"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if not _swap_on(ctx):
            return
        level = _context(ctx).get("memory_optimize_level")
        if level is not None and str(level).upper() != "O0":
            yield self.finding(f"swap is on but context.memory_optimize_level is {level!r}; swap needs 'O0'",
                               source=where(config_of(ctx), "context.memory_optimize_level"),
                               expected="O0", actual=str(level))


@register
class SwapNeedsLazyInline(Rule):
    """Swap without pipeline parallel needs ``ENABLE_LAZY_INLINE_NO_PIPELINE=1``.

    **What it means.** With ``parallel_config.pipeline_stage: 1`` MindSpore only keeps each layer
    as a separate (lazy-inlined) subgraph, which the swap pass works on, when this environment
    variable is set. It is decided from the environment you pass (``swapwatch explain --env
    KEY=VAL``, or the environment ``swapwatch run`` records); without environment information the
    rule stays silent.

    **Why it matters.** The swap attributes are set but have no effect on the compiled graph.

    **How to fix it.** Export it for every worker (msrun passes the environment on)::

        export ENABLE_LAZY_INLINE_NO_PIPELINE=1
    """

    code = "SW302"
    severity = "error"
    title = "swap without pipeline parallel needs ENABLE_LAZY_INLINE_NO_PIPELINE=1"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = _swap_plan(ctx)
        if plan is None or not ctx.env:
            return
        if plan.geometry.pipeline_stage > 1:
            return
        value = ctx.env.get("ENABLE_LAZY_INLINE_NO_PIPELINE")
        if str(value).strip() != "1":
            yield self.finding("swap is on without pipeline parallel (pipeline_stage 1) but "
                               f"ENABLE_LAZY_INLINE_NO_PIPELINE is {'unset' if value is None else repr(value)}; "
                               "set it to 1", source=where(config_of(ctx), "swap_config.swap"),
                               expected="ENABLE_LAZY_INLINE_NO_PIPELINE=1",
                               actual="unset" if value is None else str(value))


def _is_graph(mode: Any) -> bool:
    if mode is None:
        return True
    if isinstance(mode, int) and not isinstance(mode, bool):
        return mode == 0
    return str(mode).strip().upper() in ("0", "GRAPH_MODE", "GRAPH")


@register
class SwapOnlyAscendGraph(Rule):
    """Swap only takes effect on Ascend, in graph mode, at jit level O0 or O1.

    **What it means.** The YAML's ``context`` says ``device_target`` is not ``Ascend``, or
    ``mode`` is not graph mode (0), or ``jit_config.jit_level`` is ``O2``. MindSpore accepts the
    offload calls there and ignores them (on CPU it warns once).

    **Why it matters.** The log still shows ``Set layer swap`` / ``Set op_swap`` lines, which
    look like success.

    **How to fix it.** Run the swap experiment where it works::

        context:
          mode: 0                 # GRAPH_MODE
          device_target: "Ascend"
          jit_config:
            jit_level: "O0"
    """

    code = "SW303"
    severity = "warning"
    title = "swap only takes effect on Ascend in graph mode (O0/O1)"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if not _swap_on(ctx):
            return
        c = _context(ctx)
        cfg = config_of(ctx)
        target = c.get("device_target")
        if target is not None and str(target).lower() != "ascend":
            yield self.finding(f"swap is on but context.device_target is {target!r}: offload only works on Ascend",
                               source=where(cfg, "context.device_target"), expected="Ascend", actual=str(target))
        if not _is_graph(c.get("mode")):
            yield self.finding(f"swap is on but context.mode is {c.get('mode')!r}: offload only works in graph mode",
                               source=where(cfg, "context.mode"), expected="0 (GRAPH_MODE)", actual=str(c.get("mode")))
        jit = c.get("jit_level")
        if jit is not None and str(jit).upper() == "O2":
            yield self.finding("swap is on but context.jit_config.jit_level is 'O2': offload works at O0/O1 only",
                               source=where(cfg, "context.jit_config.jit_level"), expected="O0 or O1", actual="O2")
