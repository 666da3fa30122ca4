"""The swap config normalised as MindFormers' ``TransformerSwapConfig`` does, once (computed by
``validate`` and kept on the config as ``TrainingConfig.swap_strategy``)."""
from __future__ import annotations

import difflib
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence

from ..errors import ConfigError


# ---------------------------------------------------------------------------------------------
# TransformerSwapConfig normalisation (built even when swap is off): done once, in validate(), and
# stored on the config (TrainingConfig.swap_strategy); the engine takes it from there
# ---------------------------------------------------------------------------------------------

#: The default swap strategy's op pattern (used when neither layer_swap nor op_swap is given).
DEFAULT_OP_SWAP = r".*\.flash_attention"


class SwapStrategy(NamedTuple):
    """The swap config as MindFormers' ``TransformerSwapConfig`` (modules/transformer/transformer.py)
    leaves it: ``layer_swap`` a list of ``{backward_prefetch, layers}``, ``op_swap`` those grouped by
    op pattern."""

    layer_swap: List[Dict[str, Any]]
    op_swap: Dict[str, List[Dict[str, Any]]]


def normalize_swap_config(swap_config: Mapping[str, Any], cfg: Any = None) -> SwapStrategy:
    """``(layer_swap, op_swap)`` as MindFormers' ``TransformerSwapConfig`` leaves them.

    Default strategy when both are None: no layer swap, ``.*\\.flash_attention`` on every layer with
    ``default_prefetch``. A dict becomes a one-item list. op_swap entries are regrouped by op
    name (a list ``op_name`` fans out). A group (or the layer_swap list) that has ``layers: True``
    collapses to that one entry with the first prefetch; mixing ``layers: True`` with a different
    prefetch is an error.
    """
    err = cfg.error if cfg is not None else (lambda key, message: ConfigError(message, key=key))
    ls_raw, os_raw = swap_config.get("layer_swap"), swap_config.get("op_swap")
    if ls_raw is None and os_raw is None:
        return SwapStrategy([], {DEFAULT_OP_SWAP: [{"backward_prefetch": swap_config.get("default_prefetch", 1),
                                                    "layers": True}]})
    layer_swap: List[Dict[str, Any]] = []
    if ls_raw is not None:
        if not isinstance(ls_raw, (list, dict)):
            raise err("swap_config.layer_swap", f"must be a list of {{backward_prefetch, layers}} entries "
                                                f"(or one such mapping), got {ls_raw!r}")
        items = [ls_raw] if isinstance(ls_raw, dict) else list(ls_raw)
        keys = [f"swap_config.layer_swap[{i}]" for i in range(len(items))] if isinstance(ls_raw, list) \
            else ["swap_config.layer_swap"]
        if _consistent(items, keys, "layer_swap", err):
            layer_swap = [{"backward_prefetch": items[0]["backward_prefetch"], "layers": True}]
        else:
            layer_swap = items
    op_swap: Dict[str, List[Dict[str, Any]]] = {}
    if os_raw is not None:
        if not isinstance(os_raw, (list, dict)):
            raise err("swap_config.op_swap", f"must be a list of {{op_name, backward_prefetch, layers}} "
                                             f"entries (or one such mapping), got {os_raw!r}")
        items = [os_raw] if isinstance(os_raw, dict) else list(os_raw)
        keyof: Dict[str, List[str]] = {}
        for i, item in enumerate(items):
            key = f"swap_config.op_swap[{i}]" if isinstance(os_raw, list) else "swap_config.op_swap"
            if not isinstance(item, dict):
                raise err(key, f"each op_swap entry must be a mapping with op_name, backward_prefetch "
                               f"and layers, got {item!r}")
            if "op_name" not in item:
                raise err(key, "op_swap entry has no op_name" + _did_you_mean(item, "op_name"))
            names = item["op_name"]
            if isinstance(names, (list, tuple)):
                if not all(isinstance(n, str) for n in names):
                    raise err(f"{key}.op_name", f"every op_name in the list must be a string, got {names!r}")
            elif not isinstance(names, str):
                raise err(f"{key}.op_name", f"op_name must be a pattern string or a list of them, got {names!r}")
            for name in ([names] if isinstance(names, str) else names):
                op_swap.setdefault(name, []).append(
                    {"layers": item.get("layers"), "backward_prefetch": item.get("backward_prefetch")})
                keyof.setdefault(name, []).append(key)
        for name, group in op_swap.items():
            if _consistent(group, keyof[name], f"op_swap: {name}", err):
                op_swap[name] = [{"backward_prefetch": group[0]["backward_prefetch"], "layers": True}]
    return SwapStrategy(layer_swap, op_swap)


def _consistent(items: List[Any], keys: List[str], mode: str, err) -> bool:
    """MindFormers' consistency walk; True when some entry has ``layers: True`` (-> collapse)."""
    prev = None
    any_true = False
    differs = False
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise err(keys[i], f"each {mode.split(':')[0]} entry must be a mapping with backward_prefetch and "
                               f"layers, got {item!r}")
        if prev is not None and prev != item.get("backward_prefetch"):
            differs = True
        layers = item.get("layers")
        if not isinstance(layers, (list, tuple, bool)):
            hint = _did_you_mean(item, "layers") if "layers" not in item else ""
            raise err(f"{keys[i]}.layers", f"{mode}: layers must be True/False or a list of layer ids, "
                                           f"got {layers!r}{hint}")
        if isinstance(layers, (list, tuple)) and not (_ints(layers) or all(
                isinstance(x, (list, tuple)) and _ints(x) for x in layers)):
            raise err(f"{keys[i]}.layers", f"{mode}: layers must be a list of integer layer ids, got {layers!r}")
        if isinstance(layers, bool) and layers:
            any_true = True
        if differs and any_true:
            raise err(keys[i], f"{mode}: entry {i} makes the prefetch inconsistent: when one entry has "
                               f"'layers: True' every entry must use the same backward_prefetch "
                               f"(MindFormers: Invalid {mode} configuration at index {i})")
        if "backward_prefetch" not in item:
            raise err(keys[i], f"{mode}: entry has no backward_prefetch" + _did_you_mean(item, "backward_prefetch"))
        prev = item["backward_prefetch"]
    return any_true


def _ints(seq: Sequence[Any]) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in seq)


def _did_you_mean(item: Dict[str, Any], wanted: str) -> str:
    close = difflib.get_close_matches(wanted, [str(k) for k in item], n=1, cutoff=0.6)
    return f" (is '{close[0]}' a misspelling of '{wanted}'?)" if close else ""
