"""SW208: layer_swap / op_swap entries while swap itself is off (MindFormers ignores them silently)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, swap_key, was_given, where


@register
class SwapEntriesUnused(Rule):
    """``layer_swap`` / ``op_swap`` are set but swap itself is off: nothing is offloaded.

    **What it means.** MindFormers' ``LayerSetting`` reads the swap entries only when swap is on
    (``swap_config.swap: True`` on the legacy path; ``model.model_config.swap`` or its alias
    ``cpu_offloading`` on the mcore path, ``use_legacy: False``): ``__init__`` formats them and
    ``set_swap`` applies them under ``if self.swap.swap``. With swap off they are parsed and then
    dropped: no ``Formative layer swap`` / ``op swap`` line, no ``Set ... swap`` line, no warning,
    and no cell or primitive is marked for offload (verified on real MindFormers 2.1.0 models,
    legacy and mcore, by ``tests/test_oracle_swap_traps.py``). The recompute keys keep their
    non-swap meaning (counts per stage, not layer ids).

    **Why it matters.** The activations you meant to move to host memory stay on the device; the
    run looks fine until it runs out of memory, or its peak is simply higher than planned.

    **How to fix it.** Turn swap on (and check what the recompute lists now mean: with swap on
    they are layer ids, see SW204), or delete the entries if swap is meant to stay off::

        swap_config:
          swap: True
          layer_swap:
            - {backward_prefetch: 2, layers: [0, 1]}
    """

    code = "SW208"
    severity = "warning"
    title = "layer_swap / op_swap are set but swap is off: they are ignored"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        cfg = config_of(ctx)
        sc = cfg.swap_config if cfg is not None else None
        if not isinstance(sc, dict) or sc.get("swap") is True:
            return
        given = [k for k in ("layer_swap", "op_swap") if sc.get(k) not in (None, [], {})]
        if not given:
            return
        switch = swap_key(cfg, "swap_config.swap")
        state = f"{switch} is {sc.get('swap')!r}" if was_given(cfg, "swap_config", "swap") \
            else f"{switch} is not set (False)"
        names = " and ".join(swap_key(cfg, f"swap_config.{k}") for k in given)
        yield self.finding(f"{names} {'are' if len(given) > 1 else 'is'} ignored: {state}, so MindFormers "
                           f"offloads nothing and says nothing", op=", ".join(given),
                           source=where(cfg, f"swap_config.{given[0]}"), expected="swap on", actual=sc.get("swap"))
