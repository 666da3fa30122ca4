"""What MindFormers' PyNative ``apply_ac`` refuses, in its order and with its messages.

``activation_checkpoint.py:apply_ac``: nothing at all when no strategy is enabled; then (a) swap with
``pipeline_parallel > 1``; (b) ``_validate_recompute_config`` (structure, then specs: select specs only when
``full_recompute_layer`` is empty, the quirk SW503 reports), (c) comm structure and specs, (d) ``exclude_op``
(always, even with mode ``None``); recompute is then applied and logged; only then (e) ``_validate_swap_config``
(prefetch bound, structure, specs with the prefetch bound). :func:`validate` returns the normalized copies of
the sections (MindFormers writes normalized specs back into the lists) and raises :class:`Refusal`, whose
``stage`` says whether recompute had already been applied (its lines logged) when the refusal came.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Tuple

from .config import PynativeConfig
from .layer_spec import RECOMPUTE_TAG, SWAP_TAG, Refusal, validate_specs


def enabled(cfg: PynativeConfig) -> Tuple[bool, bool, bool]:
    """(recompute, comm, swap) as ``apply_ac`` decides them."""
    return cfg.recompute["mode"] != "None", bool(cfg.recompute_comm["enable"]), bool(cfg.swap["enable"])


def _module_dict(value: Any, pfx: str, what: str = "module path", kind: str = "module path") -> None:
    if not isinstance(value, dict):
        raise Refusal(f"{pfx} must be a dict ({kind} -> list of layer ranges), got {type(value).__name__}",
                      RECOMPUTE_TAG, exc="TypeError")
    for key, ranges in value.items():
        if not isinstance(key, str) or not key.strip():
            raise Refusal(f"{pfx}: invalid {what} key {key!r}", RECOMPUTE_TAG)
        if not isinstance(ranges, (list, tuple)):
            raise Refusal(f"{pfx}[{key!r}]: value must be a list or tuple of layer ranges, "
                          f"got {type(ranges).__name__}", RECOMPUTE_TAG, exc="TypeError")


def validate_recompute(cfg: PynativeConfig, warn: Callable[[], None] = lambda: None
                       ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Steps (b)-(d): normalized (recompute, recompute_comm) copies, or :class:`Refusal`.

    ``warn`` is called where MindFormers logs its "exclude_op has no effect" WARNING (mode ``None``).
    """
    rc, comm = copy.deepcopy(cfg.recompute), copy.deepcopy(cfg.recompute_comm)
    total = cfg.total_layers
    need_rc, need_comm, _ = enabled(cfg)
    if need_rc:
        if rc["select_module"] is not None:
            _module_dict(rc["select_module"], "TrainConfig.recompute.select_module")
        if rc["mode"] == "full" and not rc["full_recompute_layer"]:
            raise Refusal("TrainConfig.recompute: mode is 'full' but full_recompute_layer is missing or empty",
                          RECOMPUTE_TAG)
        if rc["mode"] == "select" and not rc["select_module"]:
            raise Refusal("TrainConfig.recompute: mode is 'select' but select_module is missing or empty",
                          RECOMPUTE_TAG)
        pfx = "TrainConfig.recompute_config.recompute"
        if rc["full_recompute_layer"]:
            rc["full_recompute_layer"] = validate_specs(rc["full_recompute_layer"], f"{pfx}.full_recompute_layer",
                                                        total)
        elif rc["mode"] == "select":
            for key in rc["select_module"]:
                rc["select_module"][key] = validate_specs(rc["select_module"][key], f"{pfx}.select_module[{key!r}]",
                                                          total)
    if need_comm:
        if comm["select_module"] is not None:
            _module_dict(comm["select_module"], "TrainConfig.recompute_comm.select_module", "comm op path",
                         "comm op path")
        if not comm["select_module"]:
            raise Refusal("TrainConfig.recompute_comm: enable is True but select_module is missing or empty",
                          RECOMPUTE_TAG)
        for key in comm["select_module"]:
            comm["select_module"][key] = validate_specs(
                comm["select_module"][key], f"TrainConfig.recompute_config.recompute_comm.select_module[{key!r}]",
                total)
    if rc["exclude_op"] is not None:
        if not need_rc and rc["exclude_op"]:
            warn()
        _module_dict(rc["exclude_op"], "TrainConfig.recompute.exclude_op")
        for key in rc["exclude_op"]:
            rc["exclude_op"][key] = validate_specs(rc["exclude_op"][key], f"TrainConfig.recompute.exclude_op[{key!r}]",
                                                   total)
    return rc, comm


def validate_swap(cfg: PynativeConfig) -> Dict[str, Any]:
    """Step (e): the normalized swap copy, or :class:`Refusal` (``_validate_swap_structure`` + ``_layers``)."""
    sc = copy.deepcopy(cfg.swap)
    total = cfg.total_layers
    pfx = "TrainConfig.swap_config"
    prefetch = sc["default_prefetch"]
    if prefetch >= total or prefetch < 1:
        raise Refusal(f"{pfx}.default_prefetch: value {prefetch} out of range [1, {total - 1}]", SWAP_TAG)
    for name, needs in (("layer_swap", ("layers",)), ("op_swap", ("op_name", "layers"))):
        items = sc[name]
        if items is None:
            continue
        if not isinstance(items, list):
            raise Refusal(f"{pfx}.{name} must be a list, got {type(items).__name__}", SWAP_TAG, exc="TypeError")
        for idx, item in enumerate(items):
            label = f"{pfx}.{name}[{idx}]"
            if not isinstance(item, dict):
                raise Refusal(f"{label} must be a dict, got {type(item).__name__}", exc="TypeError")
            if any(k not in item for k in needs):
                what = "'layers'" if name == "layer_swap" else "'op_name' and 'layers'"
                raise Refusal(f"{label}: each entry must include {what}, got {item!r}")
            if name == "op_swap" and (not isinstance(item["op_name"], str) or not item["op_name"].strip()):
                raise Refusal(f"{label}.op_name must be a non-empty str, got {item['op_name']!r}")
            if not isinstance(item["layers"], (list, tuple)):
                raise Refusal(f"{label}.layers: expected list/tuple of layer ids or ranges like ['5'], ['0-19'], "
                              f"got {type(item['layers']).__name__}: {item['layers']!r}", exc="TypeError")
    for name in ("layer_swap", "op_swap"):
        for idx, item in enumerate(sc[name] or []):
            item["layers"] = validate_specs(item["layers"], f"{pfx}.{name}[{idx}].layers", total, prefetch)
    return sc


def pp_refusal(cfg: PynativeConfig) -> None:
    """Step (a): swap with pipeline parallel, checked before anything else."""
    if cfg.pipeline_parallel > 1 and cfg.swap["enable"]:
        raise Refusal("swap is not supported with pipeline parallel", SWAP_TAG)
