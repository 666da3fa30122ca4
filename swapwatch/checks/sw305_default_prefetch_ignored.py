"""SW305: default_prefetch set together with layer_swap / op_swap (it is then unused)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, was_given, where


@register
class DefaultPrefetchIgnored(Rule):
    """``default_prefetch`` is ignored because ``layer_swap`` or ``op_swap`` is set.

    **What it means.** ``default_prefetch`` is only the prefetch of MindFormers' *default* swap
    strategy (flash attention on every layer), which is used when neither ``layer_swap`` nor
    ``op_swap`` is given. As soon as one of them is set, each entry's own ``backward_prefetch``
    counts and ``default_prefetch`` does nothing (and the default flash-attention swap is gone).

    **Why it matters.** A tuning change to ``default_prefetch`` has no effect; and the flash
    attention swap you may have relied on is no longer there.

    **How to fix it.** Put the prefetch on the entries (add the flash attention entry back if you
    want it)::

        swap_config:
          swap: True
          op_swap:
            - {op_name: '.*\\.flash_attention', backward_prefetch: 10, layers: True}
    """

    code = "SW305"
    severity = "warning"
    title = "default_prefetch is ignored because layer_swap or op_swap is set"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        if plan is None or cfg is None or not plan.swap:
            return
        sc = cfg.swap_config or {}
        if sc.get("layer_swap") is None and sc.get("op_swap") is None:
            return
        if not (was_given(cfg, "swap_config", "default_prefetch") or sc.get("default_prefetch", 1) != 1):
            return
        given = [k for k in ("layer_swap", "op_swap") if sc.get(k) is not None]
        which = f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} set"
        yield self.finding(f"swap_config.default_prefetch ({sc.get('default_prefetch')!r}) is ignored because "
                           f"{which}", source=where(cfg, "swap_config.default_prefetch"),
                           expected="used", actual="ignored")
