"""A PyNative (r2.x) training YAML -> :class:`PynativeConfig`: the three strategy sections and the model shape.

MindFormers 2.1.0 loads the top-level ``recompute`` / ``recompute_comm`` / ``swap`` sections into
``mindformers/pynative/config/config.py:RecomputeConfig`` / ``RecomputeCommConfig`` / ``SwapConfig``
(``BaseConfig.from_dict``): unknown keys are refused (``Unknown configuration keys for RecomputeConfig:
[...]``), each field is type-checked, and ``RecomputeConfig.__post_init__`` refuses a mode other than
``'None'``/``'full'``/``'select'``. Those refusals happen when the YAML is loaded, so explain gives them with
MindFormers' text (exit 2). Everything ``apply_ac`` checks later lives in :mod:`swapwatch.pynative.validate`.

The model shape comes from the HF-style ``model`` section the PyNative models read (``num_hidden_layers``,
``num_nextn_predict_layers`` for MTP, ``first_k_dense_replace`` for DeepSeek's dense layers, ``model_type``);
``parallelism.pipeline_parallel`` decides whether swap is allowed at all, and with
``pipeline_parallel_interleave_num`` / ``pipeline_parallel_layers_per_stage`` which stage holds each layer
(:func:`stage_split`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..config import mapping, nearest, read_yaml
from ..errors import ConfigError
from .layer_spec import Refusal

if TYPE_CHECKING:
    from ..plan import Geometry

#: Field defaults of the three config classes (``config.py:RecomputeConfig`` etc.).
RECOMPUTE_FIELDS = {"mode": "None", "full_recompute_layer": None, "select_module": None, "exclude_op": None}
COMM_FIELDS = {"enable": False, "select_module": None}
SWAP_FIELDS = {"enable": False, "default_prefetch": 1, "layer_swap": None, "op_swap": None}
SECTIONS: Dict[str, Tuple[str, Dict[str, Any]]] = {"recompute": ("RecomputeConfig", RECOMPUTE_FIELDS),
            "recompute_comm": ("RecomputeCommConfig", COMM_FIELDS),
            "swap": ("SwapConfig", SWAP_FIELDS)}
#: The PyNative strategy sections; their presence at the top level is what makes a YAML a PyNative one.
PYNATIVE_SECTIONS = tuple(SECTIONS)
#: Sections only ``TrainConfig`` has (a PyNative YAML without any strategy section still has these).
TRAINCONFIG_ONLY = ("parallelism", "training", "lr_scheduler", "train_dataset", "monitor")
#: Static-path strategy keys that a PyNative run ignores (``TrainConfig.allow_extra`` keeps them silently).
STATIC_KEYS = ("recompute_config", "swap_config", "parallel_config.recompute", "model.model_config")
MODES = ("None", "full", "select")


@dataclass
class PynativeConfig:
    recompute: Dict[str, Any]
    recompute_comm: Dict[str, Any]
    swap: Dict[str, Any]
    num_layers: int
    #: the layer-path family: ``--model``, else the YAML's ``model.model_type``, else the default family
    #: (decided in :func:`from_tree` through ``families.default_family``, as a static plan's ``Plan.fam``)
    family: str
    mtp_layers: int = 0
    pipeline_parallel: int = 1
    first_k_dense: int = 0
    #: parallel degrees as given (to tell whether the YAML needs more than one card)
    degrees: Dict[str, Any] = field(default_factory=dict)
    #: static-path keys present in the YAML (ignored by this path)
    ignored_static_keys: List[str] = field(default_factory=list)
    source: Optional[str] = None
    lines: Dict[str, int] = field(default_factory=dict)
    #: which stage and chunk holds each decoder layer (:func:`stage_split`); None only for a config built by
    #: hand, taken as one stage
    stages: Optional["Geometry"] = None

    def stage_of(self, layer: int) -> Tuple[int, int]:
        """``(stage, chunk)`` of global layer id ``layer``: the decoder layers where :func:`stage_split` puts
        them, the MTP layers on the last virtual stage (``StageModelBuilder.build_stages`` builds the MTP
        block with ``post_process``, on the last virtual stage only)."""
        geo = self.stages
        if geo is None:
            return 0, 0
        if layer >= self.num_layers:
            return geo.pipeline_stage - 1, geo.pp_interleave_num - 1
        return geo.pp_ids[layer], geo.interleave_ids[layer]

    @property
    def total_layers(self) -> int:
        """``apply_ac``'s ``total_num_layers``: decoder layers + MTP layers (the validation bound)."""
        return self.num_layers + self.mtp_layers

    def line(self, key: str) -> Optional[int]:
        return nearest(self.lines, key)

    def where(self, key: str) -> str:
        ln = self.line(key)
        return f"{self.source}:{ln}" if self.source and ln else (self.source or key)


def detect_path(data: Any) -> str:
    """``'pynative'``, ``'mcore'`` (static, ``use_legacy: False``) or ``'legacy'`` (static) for a YAML tree.

    A top-level ``recompute`` / ``recompute_comm`` / ``swap`` section, or a TrainConfig-only section
    (``parallelism``, ``training`` ...) without the static ``model.model_config``, means the PyNative trainer.
    """
    if not isinstance(data, dict):
        return "legacy"
    model = data.get("model")
    has_model_config = isinstance(model, dict) and "model_config" in model
    if any(k in data for k in PYNATIVE_SECTIONS):
        return "pynative"
    if any(k in data for k in TRAINCONFIG_ONLY) and not has_model_config and "recompute_config" not in data \
            and "swap_config" not in data and "parallel_config" not in data:
        return "pynative"
    return "mcore" if data.get("use_legacy") is False else "legacy"


PATH_NAMES = {"pynative": "PyNative (r2.x: recompute / recompute_comm / swap, applied by apply_ac)",
              "mcore": "static graph, mcore (use_legacy: False)",
              "legacy": "static graph, legacy (recompute_config / swap_config)"}


def _check_field(cls: str, key: str, value: Any, where) -> None:
    """``BaseConfig.validate`` -> ``utils.py:check_type`` for the fields the strategy sections declare."""
    name = f"{cls}.{key}"
    if key == "mode":
        if value not in MODES:                 # __post_init__ runs before the type check
            raise Refusal(f"RecomputeConfig.mode must be 'None', 'full', or 'select', got {value}", **where)
    elif key == "enable":
        if not isinstance(value, bool):
            raise Refusal(f"Expected bool for '{name}', got {type(value).__name__} ({value})", exc="TypeError",
                          **where)
    elif key == "default_prefetch":
        if value is None:
            raise Refusal(f"Field '{name}' cannot be None", exc="TypeError", **where)
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refusal(f"Expected int for '{name}', got {type(value).__name__} ({value})", exc="TypeError",
                          **where)


def from_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
              num_layers: Optional[int] = None, family: Optional[str] = None) -> PynativeConfig:
    """Build the config from a parsed YAML tree (see :func:`load`); ``family`` is ``--model``."""
    from ..families import default_family
    from .layer_paths import check_model_option

    check_model_option(family)
    secs: Dict[str, Dict[str, Any]] = {}
    for sec, (cls, defaults) in SECTIONS.items():
        raw = data.get(sec)
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise Refusal(f"Expected dict for {cls}, got {type(raw)}", exc="TypeError", file=source,
                          line=lines.get(sec), key=sec)
        extra = [k for k in raw if k not in defaults]
        if extra:
            raise Refusal(f"Unknown configuration keys for {cls}: {extra}", file=source,
                          line=lines.get(f"{sec}.{extra[0]}"), key=f"{sec}.{extra[0]}")
        merged = dict(defaults)
        merged.update(raw)
        for key in raw:
            _check_field(cls, key, raw[key], dict(file=source, line=lines.get(f"{sec}.{key}"), key=f"{sec}.{key}"))
        secs[sec] = merged

    model = mapping(data.get("model"))
    n = num_layers
    if n is None:
        mc = mapping(model.get("model_config"))
        n = model.get("num_hidden_layers", model.get("num_layers", mc.get("num_layers")))
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError("the layer count is unknown: set model.num_hidden_layers in the YAML (explain also "
                          "takes --num-layers N)", file=source, line=lines.get("model"), key="model.num_hidden_layers")
    mtp = model.get("num_nextn_predict_layers", model.get("mtp_num_layers", 0)) or 0
    if not isinstance(mtp, int) or isinstance(mtp, bool) or mtp < 0:
        raise ConfigError(f"expected a non-negative int, got {mtp!r}", file=source,
                          line=lines.get("model.num_nextn_predict_layers"), key="model.num_nextn_predict_layers")
    par = mapping(data.get("parallelism"))
    pp = par.get("pipeline_parallel", 1)
    if not isinstance(pp, int) or isinstance(pp, bool) or pp < 1:
        raise ConfigError(f"expected a positive int, got {pp!r}", file=source,
                          line=lines.get("parallelism.pipeline_parallel"), key="parallelism.pipeline_parallel")
    stages = stage_split(n, par, source, lines)
    named = family or model.get("model_type")
    fk = model.get("first_k_dense_replace")
    if fk is None:      # models/deepseek3/configuration_deepseek_v3.py:DeepseekV3Config.__init__ default
        fk = 3 if str(named).lower().startswith("deepseek") else 0
    degrees: Dict[str, Any] = {k: par[k] for k in ("data_parallel_shard", "tensor_parallel", "context_parallel",
                                                    "pipeline_parallel", "expert_parallel") if k in par}
    ignored = [k for k in STATIC_KEYS if _has(data, k)]
    return PynativeConfig(recompute=secs["recompute"], recompute_comm=secs["recompute_comm"], swap=secs["swap"],
                          num_layers=n, mtp_layers=mtp, pipeline_parallel=pp,
                          family=named or default_family().name, first_k_dense=int(fk), degrees=degrees,
                          ignored_static_keys=ignored, source=source, lines=dict(lines), stages=stages)


def stage_split(num_layers: int, par: Dict[str, Any], source: Optional[str] = None,
                lines: Optional[Dict[str, int]] = None) -> "Geometry":
    """Which pipeline stage and chunk holds each decoder layer, as MindFormers 2.1.0's r2.x trainer places them:
    the one split PyNative explain / diff (``PynativePlan.stage_of``) and the sizing (``sizing.estimate_pynative``)
    read.

    ``pynative/base_models/gpt/parallelize.py:apply_pp`` builds one model per virtual stage
    ``v = chunk * pipeline_parallel + pp_rank`` (``pynative/distributed/pipeline_parallel.py:
    StageModelBuilder._get_local_stage_indices``) over the layers ``PpLayerSetting.get_layer_range(v)``:

    * ``pipeline_parallel_layers_per_stage: auto`` (the default): ``num_layers / (pp * interleave)``
      consecutive layers per virtual stage; ``PpLayerSetting._compute_auto`` raises ValueError when that does
      not divide (refused here with its text);
    * a list of one string per pp rank, ``'start-end'`` per chunk, chunks comma-separated
      (``PpLayerSetting._init_explicit``, whose ValueErrors are refused with their text). MindFormers does not
      check that the ranges cover the layers once each, in stage order; a split that does not is refused here
      (the stage of a layer would not be one).

    Without pipeline parallel (``apply_pp`` is not called) every layer is on stage 0."""
    from ..strategy import _split
    import numpy as np

    lines = lines or {}
    pp = par.get("pipeline_parallel", 1)
    pp = pp if isinstance(pp, int) and not isinstance(pp, bool) and pp > 1 else 1
    if pp == 1:
        return _split(num_layers, 1, 1, np.zeros((1, 1), np.int32), np.array([[num_layers]], np.int32))
    key_v, key_l = "parallelism.pipeline_parallel_interleave_num", "parallelism.pipeline_parallel_layers_per_stage"
    v_num = par.get("pipeline_parallel_interleave_num", 1)
    if not isinstance(v_num, int) or isinstance(v_num, bool) or v_num < 1:
        raise ConfigError(f"expected a positive int, got {v_num!r}", file=source, line=lines.get(key_v), key=key_v)
    total = pp * v_num
    per = par.get("pipeline_parallel_layers_per_stage", "auto")
    counts = np.zeros((v_num, pp), np.int32)
    if per == "auto":
        if num_layers % total:
            raise Refusal(f"Number of layers ({num_layers}) is not divisible by total stages ({total})."
                          "Please configure the model distribution via 'pipeline_parallel_layers_per_stage'.",
                          file=source, line=lines.get("parallelism.pipeline_parallel"),
                          key="parallelism.pipeline_parallel")
        counts[:, :] = num_layers // total
    else:
        where = dict(file=source, line=nearest(lines, key_l), key=key_l)
        if not isinstance(per, list) or not all(isinstance(x, str) for x in per):
            raise ConfigError("expected 'auto' or a list of 'start-end' strings (one per pipeline stage, chunks "
                              f"comma-separated; PpLayerSetting._init_explicit splits each), got {per!r}", **where)
        if len(per) != pp:
            raise Refusal(f"The length of 'pipeline_parallel_layers_per_stage' ({len(per)}) must equal "
                          f"'pipeline_parallel' ({pp}), but got {len(per)} entries for {pp} PP ranks.", **where)
        ranges: Dict[int, Tuple[int, int]] = {}
        for rank, text in enumerate(per):
            chunks = text.split(",")
            if len(chunks) != v_num:
                raise Refusal(f"PP rank {rank} has {len(chunks)} chunk(s) in 'pipeline_parallel_layers_per_stage' "
                              f"(got '{text}'), but 'pipeline_parallel_interleave_num' is {v_num}. Each PP rank "
                              f"must have exactly {v_num} comma-separated chunk(s).", **where)
            for chunk, r in enumerate(chunks):
                ids = r.strip().split("-")
                if len(ids) > 2:
                    raise Refusal(f"Invalid layer range format: {r}. Expected format is 'start-end' or "
                                  "'single_layer'.", **where)
                try:
                    lo, hi = int(ids[0]), int(ids[-1])
                except ValueError:
                    raise Refusal(f"Invalid layer range format: {r}. Layer IDs must be integers, got "
                                  f"'{ids[0]}' and '{ids[-1]}'", **where) from None
                if lo > hi:
                    raise Refusal(f"Invalid layer range format: {r}. layer_start must be less than or equal to "
                                  "layer_end.", **where)
                ranges[chunk * pp + rank] = (lo, hi)
        nxt = 0
        for vs in range(total):
            lo, hi = ranges[vs]
            if lo != nxt or (vs == total - 1 and hi != num_layers - 1):
                raise ConfigError(f"pipeline_parallel_layers_per_stage does not give layers 0-{num_layers - 1} "
                                  f"one stage each, in stage order: virtual stage {vs} (pp rank {vs % pp}, chunk "
                                  f"{vs // pp}) holds {lo}-{hi}", **where)
            counts[vs // pp, vs % pp] = hi - lo + 1
            nxt = hi + 1
    return _split(num_layers, pp, v_num, np.zeros((1, pp), np.int32), counts)


def load(path: str, num_layers: Optional[int] = None, family: Optional[str] = None) -> PynativeConfig:
    """Load a PyNative training YAML. Raises ConfigError / :class:`Refusal` (exit 2) with file:line and key."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of config sections at the top level", file=path, line=1)
    return from_tree(data, lines, path, num_layers=num_layers, family=family)


def _has(data: Dict[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
