"""A PyNative (r2.x) training YAML -> :class:`PynativeConfig`: the three strategy sections and the model shape.

MindFormers 2.1.0 loads the top-level ``recompute`` / ``recompute_comm`` / ``swap`` sections into
``mindformers/pynative/config/config.py:RecomputeConfig`` / ``RecomputeCommConfig`` / ``SwapConfig``
(``BaseConfig.from_dict``): unknown keys are refused (``Unknown configuration keys for RecomputeConfig:
[...]``), each field is type-checked, and ``RecomputeConfig.__post_init__`` refuses a mode other than
``'None'``/``'full'``/``'select'``. Those refusals happen when the YAML is loaded, so explain gives them with
MindFormers' text (exit 2). Everything ``apply_ac`` checks later lives in :mod:`swapwatch.pynative.validate`.

The model shape comes from the HF-style ``model`` section the PyNative models read (``num_hidden_layers``,
``num_nextn_predict_layers`` for MTP, ``first_k_dense_replace`` for DeepSeek's dense layers, ``model_type``);
``parallelism.pipeline_parallel`` decides whether swap is allowed at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..config import mapping, nearest, read_yaml
from ..errors import ConfigError, InputError
from .layer_spec import Refusal

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


def refuse_unmodelled(path: str, command: str) -> None:
    """``estimate`` / ``plan`` model the static paths' LayerSetting only: on a PyNative YAML they
    would stop at "layer count unknown" (the static loader looks for ``model.model_config``), which
    blames the YAML. Say instead, at the section that makes it PyNative, that the command does not
    model this path yet. A YAML that does not parse is left to the command's own loader."""
    try:
        data, lines = read_yaml(path)
    except InputError:
        return
    if detect_path(data) != "pynative":
        return
    key = next((k for k in (*PYNATIVE_SECTIONS, *TRAINCONFIG_ONLY) if k in data), None)
    raise ConfigError(f"a PyNative (r2.x) YAML: {command} does not model the PyNative path yet "
                      f"(`swapwatch explain {path}` shows its per-layer strategy)",
                      file=path, line=lines.get(key) if key else None, key=key)


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
        raise ConfigError("the layer count is unknown: set model.num_hidden_layers in the YAML or pass "
                          "--num-layers", file=source, line=lines.get("model"), key="model.num_hidden_layers")
    mtp = model.get("num_nextn_predict_layers", model.get("mtp_num_layers", 0)) or 0
    if not isinstance(mtp, int) or isinstance(mtp, bool) or mtp < 0:
        raise ConfigError(f"expected a non-negative int, got {mtp!r}", file=source,
                          line=lines.get("model.num_nextn_predict_layers"), key="model.num_nextn_predict_layers")
    par = mapping(data.get("parallelism"))
    pp = par.get("pipeline_parallel", 1)
    if not isinstance(pp, int) or isinstance(pp, bool) or pp < 1:
        raise ConfigError(f"expected a positive int, got {pp!r}", file=source,
                          line=lines.get("parallelism.pipeline_parallel"), key="parallelism.pipeline_parallel")
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
                          ignored_static_keys=ignored, source=source, lines=dict(lines))


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
