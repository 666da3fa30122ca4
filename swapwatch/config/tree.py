"""The merged YAML tree (``pretrained_model_dir/config.json`` under ``model.model_config``) ->
:class:`TrainingConfig`: the keys found where MindFormers puts them, the geometry checked."""
from __future__ import annotations

import difflib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import ConfigError
from .load import _kind, _short, command_scope, nearest, parse_yaml, per_command, read_config_text, read_yaml
from .training import (INT32_MAX, MAX_LAYERS, MCORE_SWAP_KEYS, RECOMPUTE_DEFAULTS, RENAMED_KEYS, SWAP_DEFAULTS,
                       TrainingConfig)
from .validate import validate


# ---------------------------------------------------------------------------------------------
# Public constructors
# ---------------------------------------------------------------------------------------------

def load_config(path: str, num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
                pp_interleave_num: Optional[int] = None, offset: Any = None,
                pipeline_interleave: Optional[bool] = None, check_rules: bool = True, *,
                text: Optional[str] = None) -> TrainingConfig:
    """Load a MindFormers training YAML (a whole file or a fragment) into a validated config.

    The keyword arguments override the YAML (for fragments that lack the model or parallel
    sections). Raises :class:`ConfigError` (exit 2) with file, line and key path. ``text``: the
    YAML as text, standing at ``path`` (its directory resolves ``pretrained_model_dir``), e.g. the
    copy ``plan`` writes, checked from its text with no temporary file.
    """
    key = None
    try:
        if command_scope():
            # within a command one TrainingConfig per document: explain, the rules, the memory model
            # and plan's writer take the same object (nothing mutates a config loaded from a file)
            key = (path, read_config_text(path) if text is None else text, check_rules,
                   repr((num_layers, pipeline_stage, pp_interleave_num, offset, pipeline_interleave)))
            if key in _CONFIGS:
                return _CONFIGS[key]
        data, lines = read_yaml(path) if text is None else parse_yaml(text, path)
        if not isinstance(data, dict):
            raise ConfigError(f"expected a mapping of config sections at the top level, got {_kind(data)}",
                              file=path, line=1)
    except ConfigError:
        if text is None:
            from ..file_kind import reject_log_as_config

            reject_log_as_config(path)      # a worker log given as the config: name the command meant
        raise
    cfg = _from_tree(data, lines, path, dict(num_layers=num_layers, pipeline_stage=pipeline_stage,
                                             pp_interleave_num=pp_interleave_num, offset=offset,
                                             pipeline_interleave=pipeline_interleave), check_rules)
    if key is not None:
        _CONFIGS[key] = cfg
    return cfg


#: The configs loaded by this command (see :func:`load_config`), cleared with the reads.
_CONFIGS: Dict[Tuple[str, str, bool, str], TrainingConfig] = per_command({})


def config_from_dicts(recompute_config: Optional[Mapping[str, Any]] = None,
                      swap_config: Optional[Mapping[str, Any]] = None,
                      parallel_config: Optional[Mapping[str, Any]] = None, *,
                      num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
                      pp_interleave_num: Optional[int] = None, offset: Any = None,
                      pipeline_interleave: Optional[bool] = None,
                      geometry: Optional[Mapping[str, Any]] = None,
                      context: Optional[Mapping[str, Any]] = None,
                      source: Optional[str] = None, check_rules: bool = True) -> TrainingConfig:
    """Build a config from plain dicts, e.g. the log's ``initial ... from dict`` lines.

    ``geometry`` may carry the log's parsed ``num_layers per stage`` (``layer_list``) and
    ``Pipeline id list`` (``pp_ids``): the layer split is then taken as logged, and the layer
    count, stage count and interleave follow from it unless given explicitly. The pre-release key
    names ``select_recompute_off`` / ``select_comm_recompute_off`` are read as the exclude keys.
    """
    tree: Dict[str, Any] = {}
    for name, section in (("recompute_config", recompute_config), ("swap_config", swap_config),
                          ("parallel_config", parallel_config), ("context", context)):
        if section is not None and not isinstance(section, Mapping):
            # a damaged log line can parse as a list or a string
            raise ConfigError(f"the logged {name} is not a mapping: {_short(section)}", file=source,
                              key=name)
    if recompute_config is not None:
        rc = dict(recompute_config)
        for old, new in RENAMED_KEYS.items():
            if old in rc and new not in rc:
                rc[new] = rc.pop(old)
        tree["recompute_config"] = rc
    if swap_config is not None:
        sc = dict(swap_config)
        # an mcore log converts swap keys to TransformerConfig names
        for old, new in (("cpu_offloading", "swap"), ("cpu_offloading_num_layers", "layer_swap")):
            if old in sc and new not in sc:
                sc[new] = sc.pop(old)
        tree["swap_config"] = sc
    if parallel_config is not None:
        pc = dict(parallel_config)
        if isinstance(pc.get("recompute"), dict):
            # the log's parallel_config repr nests the recompute config; recompute_config wins
            nested = pc.pop("recompute")
            tree.setdefault("recompute_config", nested)
        tree["parallel_config"] = pc
    if context:
        tree["context"] = dict(context)
    layer_list = None
    if geometry:
        layer_list = _logged_layer_list(geometry, source)
        pp_ids = geometry.get("pp_ids")
        if num_layers is None:
            num_layers = len(pp_ids) if pp_ids else int(sum(sum(r) for r in layer_list))
        if pipeline_stage is None:
            pipeline_stage = len(layer_list[0])
        if pp_interleave_num is None:
            pp_interleave_num = len(layer_list)
        if pipeline_interleave is None:
            pipeline_interleave = len(layer_list) > 1
    cfg = _from_tree(tree, {}, source, dict(num_layers=num_layers, pipeline_stage=pipeline_stage,
                                             pp_interleave_num=pp_interleave_num, offset=offset,
                                             pipeline_interleave=pipeline_interleave), check_rules)
    cfg.layer_list = layer_list
    return cfg


def _logged_layer_list(geometry: Mapping[str, Any], source: Optional[str]) -> List[List[int]]:
    ll: Any = geometry.get("layer_list")
    try:
        rows = [[int(x) for x in row] for row in ll]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"the logged 'num_layers per stage' value {ll!r} is not a V x P table",
                          file=source) from None
    return rows


# ---------------------------------------------------------------------------------------------
# Finding keys and validating
# ---------------------------------------------------------------------------------------------

def _from_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
               overrides: Dict[str, Any], check_rules: bool) -> TrainingConfig:
    def err(key: str, message: str) -> ConfigError:
        return ConfigError(message, file=source, line=nearest(lines, key), key=key)

    model = _section(data, "model", err)
    model_config = _section(model, "model_config", err, prefix="model.") if model else {}
    hf, hf_path = _pretrained_config(data, source)
    yaml_mc_keys = set(model_config)
    if hf:
        # MindFormers merges the HF config.json under the YAML's model_config (the YAML wins):
        # models/build_config.py:merge_model_config
        model_config = {**hf, **model_config}
        data = dict(data, model=dict(model, model_config=model_config))
    parallel_config = _section(data, "parallel_config", err)
    parallel = _section(data, "parallel", err)
    pipeline_config = _section(parallel, "pipeline_config", err, prefix="parallel.") if parallel else {}
    context = _section(data, "context", err)

    # MindFormers' template validation comes first: unknown keys are the likeliest typo
    recompute, given_r = _template(data, "recompute_config", RECOMPUTE_DEFAULTS, err)
    if isinstance(parallel_config.get("recompute"), dict) and "recompute_config" not in data:
        recompute, given_r = _template({"recompute_config": parallel_config["recompute"]},
                                       "recompute_config", RECOMPUTE_DEFAULTS, err)
    swap, given_s = _template(data, "swap_config", SWAP_DEFAULTS, err)
    mcore = data.get("use_legacy") is False
    ignored_swap = ignored_prefetch = None
    if mcore:
        ignored_swap = {k: data["swap_config"][k] for k in given_s} if given_s else None
        swap, given_s, ignored_prefetch = _mcore_swap(model_config, err)

    # -- geometry -------------------------------------------------------------------------
    mc = "model.model_config"
    n_key = f"{mc}.num_layers" if "num_layers" in model_config or "num_hidden_layers" not in model_config \
        else f"{mc}.num_hidden_layers"
    num_layers = overrides["num_layers"]
    n_src = "--num-layers"
    if num_layers is None:
        num_layers = model_config.get("num_layers", model_config.get("num_hidden_layers"))
        n_src = n_key
    if num_layers is None:
        from ..file_kind import reject_foreign_yaml

        reject_foreign_yaml(data, source)         # a k8s manifest, an mkdocs.yml: not a fragment
        hint = " (this YAML takes it from pretrained_model_dir's config.json, which swapwatch does not " \
               "read)" if data.get("pretrained_model_dir") else ""
        # only explain takes --num-layers (for a fragment): the hint says so instead of offering it here
        raise ConfigError(f"the layer count is unknown{hint}: set model.model_config.num_layers in the YAML "
                          "(explain also takes --num-layers N for a fragment)", file=source, key=f"{mc}.num_layers")
    num_layers = _positive_int(num_layers, n_src, err, limit=MAX_LAYERS, why=_LAYERS_WHY)
    mtp_depth = 0
    if overrides["num_layers"] is None and model_config.get("mtp_depth") not in (None, 0) and not mcore:
        # DeepSeek-style models hand num_layers + mtp_depth to LayerSetting (train/finetune)
        mtp_depth = _nonneg_int(model_config["mtp_depth"], f"{mc}.mtp_depth", err)
        num_layers = _positive_int(num_layers + mtp_depth, f"{mc}.mtp_depth", err, limit=MAX_LAYERS,
                                   why=_LAYERS_WHY + " (num_layers + mtp_depth)")

    def overridden(name: str, section: Dict[str, Any], key: str) -> Tuple[int, str]:
        """The command-line override of ``name`` when given, else the YAML's ``key`` (default 1), checked;
        with the name an error about it goes by (the option or the key path)."""
        flag = "--" + name.replace("_", "-")
        if overrides[name] is None:
            return _positive_int(section.get(name, 1), key, err, limit=INT32_MAX), key
        return _positive_int(overrides[name], flag, err, limit=INT32_MAX), flag

    pipeline_stage, p_key = overridden("pipeline_stage", parallel_config, "parallel_config.pipeline_stage")
    pp_int, v_key = overridden("pp_interleave_num", model_config, f"{mc}.pp_interleave_num")

    pipeline_interleave = overrides["pipeline_interleave"]
    if pipeline_interleave is None:
        pipeline_interleave = pipeline_config.get("pipeline_interleave", False)
        if not isinstance(pipeline_interleave, bool):
            raise err("parallel.pipeline_config.pipeline_interleave",
                      f"expected True or False, got {_kind(pipeline_interleave)} {pipeline_interleave!r}")
    if overrides["pipeline_interleave"] is None and overrides["pp_interleave_num"] is not None \
            and pp_int > 1 and "pipeline_interleave" not in pipeline_config:
        # --pp-interleave-num on a fragment means "the run has pipeline_interleave on"
        pipeline_interleave = True

    _check_chunks(num_layers, pipeline_stage, pp_int if pipeline_interleave else 1,
                  v_key if pipeline_interleave and pp_int > 1 else p_key, err)

    offset = overrides["offset"]
    o_key = "--offset"
    if offset is None:
        offset = model_config.get("offset", 0)
        o_key = f"{mc}.offset"
    _check_offset_type(offset, o_key, err)

    scheduler = pipeline_config.get("pipeline_scheduler")
    if scheduler == "zero_bubble_v":
        raise err("parallel.pipeline_config.pipeline_scheduler",
                  "pipeline_scheduler 'zero_bubble_v' reverses the second interleave's layer split; "
                  "swapwatch does not model it yet")

    # -- strategy sections ------------------------------------------------------------------
    parallel_recompute = None
    if "recompute" in parallel_config:
        pr = parallel_config["recompute"]
        if isinstance(pr, bool):
            parallel_recompute = pr
        elif not isinstance(pr, dict):
            raise err("parallel_config.recompute",
                      f"expected True/False (the legacy shortcut) or a recompute_config mapping, got {_kind(pr)}")

    ctx: Dict[str, Any] = {k: context[k] for k in ("mode", "memory_optimize_level", "device_target") if k in context}
    jit = context.get("jit_config")
    if isinstance(jit, dict) and "jit_level" in jit:
        ctx["jit_level"] = jit["jit_level"]

    cfg = TrainingConfig(recompute_config=recompute, swap_config=swap, num_layers=num_layers,
                         pipeline_stage=pipeline_stage, pp_interleave_num=pp_int,
                         pipeline_interleave=pipeline_interleave, offset=offset,
                         parallel_recompute=parallel_recompute, context=ctx,
                         pipeline_scheduler=scheduler, mtp_depth=mtp_depth, source=source,
                         lines=dict(lines), given={"recompute_config": given_r, "swap_config": given_s},
                         mcore=mcore, ignored_swap_config=ignored_swap,
                         ignored_default_prefetch=ignored_prefetch)
    cfg.tree, cfg.hf_source = data, hf_path
    cfg.hf_keys = frozenset(k for k in hf if k not in yaml_mc_keys) if hf else frozenset()
    from ..families import detect

    def where_key(key: str) -> Optional[str]:
        leaf = key.rsplit(".", 1)[-1]
        if hf and key.startswith("model.model_config.") and leaf not in yaml_mc_keys and leaf in hf:
            return hf_path                # the value came from pretrained_model_dir/config.json
        return cfg.where(key)

    cfg.family = detect(data, where_key)
    if mcore and recompute.get("recompute_slice_activation") is True:
        raise err("recompute_config.recompute_slice_activation",
                  "recompute_slice_activation is not supported in Mcore (use_legacy: False); "
                  "MindFormers' TransformerConfig rejects it")
    validate(cfg, check_rules=check_rules)
    return cfg


def _mcore_swap(model_config: Dict[str, Any], err) -> Tuple[Dict[str, Any], List[str], Any]:
    """The swap config mcore LayerSetting really gets (``parallel_core/training_graph/transformer/
    utils.py:LayerSetting.__init__``): ``TransformerSwapConfig(swap=cpu_offloading,
    layer_swap=cpu_offloading_num_layers, op_swap=op_swap)`` from ``model.model_config``, where
    ``swap`` / ``layer_swap`` are accepted aliases (``parallel_core/transformer_config_utils.py``
    COMMON_CONFIG_MAPPING). ``default_prefetch`` is converted but never passed on, so the default
    strategy always uses prefetch 1. Returns (swap config, keys given, ignored default_prefetch)."""
    mc = "model.model_config"
    out = dict(SWAP_DEFAULTS)
    given: List[str] = []
    for name, alias, meaning in MCORE_SWAP_KEYS:
        present = [k for k in (name, alias) if k and k in model_config]
        if len(present) == 2 and model_config[present[0]] != model_config[present[1]]:
            raise err(f"{mc}.{present[1]}", f"{present[1]} and {present[0]} are aliases of one TransformerConfig "
                                            f"key and disagree ({model_config[present[1]]!r} vs "
                                            f"{model_config[present[0]]!r}); MindFormers refuses the config")
        if present and model_config[present[0]] is not None:
            out[meaning] = model_config[present[0]]
            given.append(meaning)
    if out["swap"] is None:
        out["swap"] = False
    return out, given, model_config.get("default_prefetch")


def _pretrained_config(data: Dict[str, Any], source: Optional[str]) -> Tuple[Dict[str, Any], Optional[str]]:
    """(``pretrained_model_dir/config.json``, its path) when the YAML names such a directory and it
    is there (finetune YAMLs take the model's sizes and type from it); ({}, None) otherwise."""
    import os

    pdir = data.get("pretrained_model_dir")
    if not isinstance(pdir, str) or not pdir:
        return {}, None
    if not os.path.isabs(pdir) and source:
        pdir = os.path.join(os.path.dirname(os.path.abspath(source)), pdir) if not os.path.isdir(pdir) else pdir
    path = os.path.join(pdir, "config.json")
    if not os.path.isfile(path):
        return {}, None
    from .. import json_input

    hf = json_input.read(path, "config.json")     # bounded (size, depth): a bad one is one line
    return (hf, path) if isinstance(hf, dict) else ({}, None)


def _section(data: Any, name: str, err, prefix: str = "") -> Dict[str, Any]:
    value = data.get(name) if isinstance(data, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise err(f"{prefix}{name}", f"expected a mapping, got {_kind(value)}")
    return value


def _template(data: Dict[str, Any], name: str, defaults: Dict[str, Any], err) -> Tuple[Dict[str, Any], List[str]]:
    """MindFormers' template step: None/empty -> defaults; unknown keys are rejected."""
    value = data.get(name)
    if value is None:
        return dict(defaults), []
    if not isinstance(value, dict):
        raise err(name, f"expected a mapping of {name} keys, got {_kind(value)}")
    for key in value:
        if key not in defaults:
            raise err(f"{name}.{key}", _unknown_key_message(key, defaults))
    out = dict(defaults)
    out.update(value)
    return out, list(value)


def _unknown_key_message(key: Any, known: Iterable[str]) -> str:
    if key in RENAMED_KEYS:
        return f"unknown key; it was renamed to '{RENAMED_KEYS[key]}' before any release"
    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    return f"unknown key (MindFormers rejects it); known keys: {', '.join(known)}"


_LAYERS_WHY = f"swapwatch plans at most {MAX_LAYERS} layers (one entry per layer; real models have ~100)"


def _positive_int(value: Any, key: str, err, limit: Optional[int] = None, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise err(key, f"expected a positive integer, got {_kind(value)} {_short(value)}")
    if value < 1:
        raise err(key, f"expected a positive integer, got {value}")
    if limit is not None and value > limit:
        raise err(key, f"{_short(value)} is too large: " +
                  (why or f"MindFormers keeps it in an int32 array (at most {limit})"))
    return value


def _check_chunks(num_layers: int, stages: int, interleave: int, key: str, err) -> None:
    """MindFormers' ``_check_inputs``: every chunk but the first and the last needs a layer, so
    more than ``num_layers + 2`` chunks can never be split (checked here, before any table of
    ``stages x interleave`` entries is built: 10**9 stages would otherwise exhaust memory)."""
    chunks = stages * interleave
    if chunks > 2 and chunks - 2 > num_layers:
        raise err(key, f"{stages} pipeline stage(s) x {interleave} interleave(s) = {chunks} chunks for "
                       f"{num_layers} layer(s): MindFormers needs at least one layer in every chunk but "
                       f"the first and the last")


def _nonneg_int(value: Any, key: str, err) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise err(key, f"expected a non-negative integer, got {value!r}")
    return value


def _check_offset_type(offset: Any, key: str, err) -> None:
    """An int, a list of ints, or a list of equally long lists of ints (what np.array accepts)."""
    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    def check_range(values: List[int]) -> None:
        for x in values:
            if not -INT32_MAX - 1 <= x <= INT32_MAX:
                raise err(key, f"offset {_short(x)} does not fit MindFormers' int32 offset array")

    if is_int(offset):
        return check_range([offset])
    if isinstance(offset, list) and all(is_int(x) for x in offset):
        return check_range(offset)
    if isinstance(offset, list) and offset and all(isinstance(r, list) and all(is_int(x) for x in r) for r in offset):
        if len({len(r) for r in offset}) == 1:
            return check_range([x for r in offset for x in r])
        raise err(key, f"the rows of a 2-D offset must be equally long, got {_short(offset)}")
    raise err(key, f"expected an int, a list of ints (one per stage) or a list of such lists "
                   f"(one per interleave), got {_short(offset)}")
