"""SW306 / SW308: swap settings the mcore path (``use_legacy: False``) never hands to LayerSetting."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where


@register
class McoreSwapConfigIgnored(Rule):
    """A top-level ``swap_config`` has no effect on ``use_legacy: False`` models.

    **What it means.** On the mcore path MindFormers' ``LayerSetting`` builds its swap config
    from ``model.model_config``: ``cpu_offloading`` (alias ``swap``), ``cpu_offloading_num_layers``
    (alias ``layer_swap``) and ``op_swap``. The top-level ``swap_config`` is still validated and
    logged (``initial swap_config from dict: ...``), but nothing reads it afterwards: nothing is
    offloaded, and the recompute lists keep their non-swap meaning (counts per stage, not layer ids).

    **Why it matters.** A config copied from the legacy docs runs without any swap and without any
    error; the memory it was meant to save is not saved.

    **How to fix it.** Move the keys into ``model.model_config``::

        model:
          model_config:
            cpu_offloading: True
            cpu_offloading_num_layers: [{backward_prefetch: 1, layers: [0, 1]}]
            op_swap: [{op_name: 'self_attention\\.core_attention', backward_prefetch: 1, layers: True}]
    """

    code = "SW306"
    severity = "error"
    title = "top-level swap_config is ignored on use_legacy: False models"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        cfg = config_of(ctx)
        ignored = cfg.ignored_swap_config if cfg is not None else None
        if cfg is None or not cfg.mcore or not ignored or ignored.get("swap") is not True:
            return                  # nothing asked for swap there (swap: False does nothing anyway)
        yield self.finding(f"swap_config has no effect on use_legacy: False models; set cpu_offloading / "
                           f"cpu_offloading_num_layers / op_swap in model.model_config (ignored: "
                           f"{', '.join(f'{k}={v!r}' for k, v in ignored.items())})",
                           source=where(cfg, "swap_config"), expected="swap keys in model.model_config",
                           actual="top-level swap_config")


@register
class McoreDefaultPrefetchIgnored(Rule):
    """``default_prefetch`` in ``model.model_config`` is ignored on the mcore path.

    **What it means.** The mcore ``TransformerConfig`` converts ``default_prefetch``, but
    ``LayerSetting`` builds ``TransformerSwapConfig(swap=cpu_offloading,
    layer_swap=cpu_offloading_num_layers, op_swap=op_swap)`` without it, so the default swap
    strategy (``.*\\.flash_attention`` on every layer) always uses prefetch 1.

    **Why it matters.** Tuning ``default_prefetch`` changes nothing. (On mcore layers the
    default pattern reaches nothing either: flash attention sits at
    ``self_attention.core_attention.flash_attention``; SW104 says so.)

    **How to fix it.** Give an explicit op swap with its own prefetch::

        model:
          model_config:
            op_swap: [{op_name: 'self_attention\\.core_attention', backward_prefetch: 2, layers: True}]
    """

    code = "SW308"
    severity = "warning"
    title = "default_prefetch is ignored on use_legacy: False models"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        cfg = config_of(ctx)
        value = cfg.ignored_default_prefetch if cfg is not None else None
        if cfg is None or not cfg.mcore or value is None:
            return
        yield self.finding(f"model.model_config.default_prefetch ({value!r}) never reaches LayerSetting on "
                           f"use_legacy: False models: the default swap strategy uses prefetch 1",
                           source=where(cfg, "model.model_config.default_prefetch"), expected="used",
                           actual="ignored")
