"""What MindFormers rejects before LayerSetting: the config classes' constructors and the
train-path ``check_rules`` (tools/check_rules.py)."""
from __future__ import annotations

from typing import Any, Dict

from .load import _short
from .swap import normalize_swap_config
from .training import INT64_MAX, RECOMPUTE_BOOL_KEYS, SWAP_DEFAULTS, TrainingConfig, op_swap_key


# ---------------------------------------------------------------------------------------------
# What MindFormers rejects before LayerSetting: config classes and the train-path check_rules
# ---------------------------------------------------------------------------------------------

def validate(cfg: TrainingConfig, check_rules: bool = True) -> None:
    """Raise ConfigError for what MindFormers' config classes and ``check_rules`` reject."""
    rc, sc = cfg.recompute_config, cfg.swap_config
    for key in RECOMPUTE_BOOL_KEYS:
        if not isinstance(rc.get(key), bool):
            raise cfg.error(f"recompute_config.{key}", f"must be True or False, got {rc.get(key)!r}")
    if not isinstance(sc.get("swap"), bool):
        raise cfg.error("swap_config.swap", f"must be True or False, got {sc.get('swap')!r}")
    if cfg.parallel_recompute is not None and sc["swap"]:
        raise cfg.error("parallel_config.recompute",
                        "a plain-bool parallel_config.recompute cannot be combined with swap: MindFormers' "
                        "swap/recompute conflict check needs a recompute_config (it crashes with "
                        "AttributeError); move the setting to recompute_config.recompute")
    # TransformerSwapConfig is built even when swap is off, so its errors always apply; the result
    # is kept on the config for the engine
    layer_swap, op_swap = cfg.swap_strategy
    if cfg.mcore:
        # check_rules only sees the top-level swap_config (ignored by mcore LayerSetting): with
        # cpu_offloading on, the recompute lists still get the per-stage length rule, and a
        # model-level backward_prefetch 'Auto' passes (tools/check_rules.py:_check_recompute)
        sc = dict(SWAP_DEFAULTS, **(cfg.ignored_swap_config or {}))
        if not isinstance(sc.get("swap"), bool):
            raise cfg.error("swap_config.swap", f"must be True or False, got {sc.get('swap')!r}")
        layer_swap, op_swap = normalize_swap_config(sc, cfg)
    if not check_rules:
        return
    if not sc["swap"]:
        for key in ("recompute", "select_recompute", "select_comm_recompute"):
            value = rc[key]
            if isinstance(value, list) and len(value) > cfg.pipeline_stage and \
                    all(isinstance(n, int) for n in value):
                raise cfg.error(f"recompute_config.{key}",
                                f"has {len(value)} per-stage counts but there are only "
                                f"{cfg.pipeline_stage} pipeline stage(s); MindFormers rejects a list longer "
                                f"than pipeline_stage")
        return
    for key in ("recompute", "select_recompute", "select_comm_recompute"):
        _rule_layer_ids(cfg, rc[key], f"recompute_config.{key}")
    dp = sc["default_prefetch"]
    if not isinstance(dp, int) or dp < 1:
        raise cfg.error("swap_config.default_prefetch",
                        f"must be an integer >= 1 when swap is on, got {_short(dp)}")
    if dp > INT64_MAX:
        raise cfg.error("swap_config.default_prefetch", _PREFETCH_TOO_LARGE.format(_short(dp)))
    if sc.get("layer_swap") is not None and not isinstance(sc["layer_swap"], (list, dict)):
        raise cfg.error("swap_config.layer_swap", "must be a list of {backward_prefetch, layers} entries")
    for i, item in enumerate(layer_swap):
        _rule_swap_entry(cfg, item, f"swap_config.layer_swap[{i}]" if isinstance(sc.get("layer_swap"), list)
                         else "swap_config.layer_swap", "layer_swap")
    for name, entries in op_swap.items():
        for item in entries:
            _rule_swap_entry(cfg, item, op_swap_key(sc, name), f"op_swap({name})")


def _rule_layer_ids(cfg: TrainingConfig, value: Any, key: str) -> None:
    """Under swap, recompute values are layer ids: a bool, a list of ints, or {pattern: [ints]}."""
    if isinstance(value, bool):
        return
    if isinstance(value, (list, tuple)):
        for obj in value:
            if not isinstance(obj, int):
                raise cfg.error(key, f"with swap on this is a list of layer ids, so every item must be an "
                                     f"integer; got {obj!r}")
        return
    if isinstance(value, dict):
        for pattern, ids in value.items():
            if not isinstance(pattern, str):
                raise cfg.error(key, f"pattern {pattern!r} must be a string")
            if not isinstance(ids, list):
                raise cfg.error(f"{key}.{pattern}",
                                f"with swap on each pattern needs a list of layer ids, got {ids!r} "
                                f"(MindFormers' check_rules: layer info must be list when enabling swap)")
        return
    raise cfg.error(key, f"with swap on this must be a bool, a list of layer ids or a "
                         f"{{pattern: [layer ids]}} mapping, got {value!r}")


def _rule_swap_entry(cfg: TrainingConfig, item: Dict[str, Any], key: str, label: str) -> None:
    layers = item.get("layers")
    if isinstance(layers, (list, tuple)):
        for obj in layers:
            if not isinstance(obj, int):
                raise cfg.error(f"{key}.layers", f"{label}: layers must be a flat list of layer ids, got {layers!r}")
    p = item.get("backward_prefetch")
    if not isinstance(p, int) or p < 1:
        raise cfg.error(f"{key}.backward_prefetch",
                        f"{label}: backward_prefetch in swap_config must be an integer >= 1, got {_short(p)}"
                        + (" (MindFormers' check_rules rejects 'Auto' in swap_config; only models that read "
                           "their swap settings from model.model_config take it there)" if p == "Auto" else ""))
    if p > INT64_MAX:
        raise cfg.error(f"{key}.backward_prefetch", f"{label}: " + _PREFETCH_TOO_LARGE.format(_short(p)))


_PREFETCH_TOO_LARGE = "backward_prefetch {} is too large: MindSpore stores it as a C++ long (at most 2**63-1)"
