"""Which MindFormers model family a YAML trains, and which layer tree each layer has.

Why this exists: what a recompute / swap pattern reaches depends on the layer's real cell tree,
and MindFormers 2.1.0 builds very different layers per family and code path (legacy
``LLamaDecodeLayer`` with or without ``qkv_concat``, ``ChatGLM2Block``; mcore ``TransformerLayer``
with dense MLP or MoE, DeepSeek-V3's MLA + shared experts, and the MTP layer of
``MultiTokenPredictionBlock``). A model's layers may differ (DeepSeek-V3: dense below
``first_k_dense_replace``, MoE above, one MTP layer), so the plan resolves every layer on its own
tree. The trees are data extracted from the real classes (``swapwatch/models``).

:class:`ModelFamily` is what the :class:`~swapwatch.strategy.Plan` carries: the family's name,
where that choice came from, the MindFormers classes its layouts were extracted from, its layer
kinds with their trees, preset and shared primitives, its flows (SW202), and a memoised
"what does this pattern reach on this kind of layer".
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import patterns
from .models import families as _stems, family_data, load_flows, load_layer_info, load_layout

#: The family used when a YAML names no model at all (a fragment): the example model's tree.
DEFAULT_FAMILY = "tinyllama"

#: legacy ``model.arch.type`` -> family base name (structural flags pick the variant)
LEGACY_ARCH = {
    "LlamaForCausalLM": "llama",
    "ChatGLM2ForConditionalGeneration": "glm4",
    "ChatGLM3ForConditionalGeneration": "glm4",
    "ChatGLM4ForConditionalGeneration": "glm4",
    "GLM4ForCausalLM": "glm4",
}
#: mcore ``model_type`` / ``architectures`` -> family
MCORE_TYPES = {
    "qwen3": "qwen3", "Qwen3ForCausalLM": "qwen3",
    "qwen3_moe": "qwen3_moe", "Qwen3MoeForCausalLM": "qwen3_moe",
    "deepseek_v3": "deepseek_v3", "DeepseekV3ForCausalLM": "deepseek_v3",
    "telechat3": "telechat3", "Telechat3ForCausalLM": "telechat3", "TeleChat3ForCausalLM": "telechat3",
}

#: Structural defaults of the mcore config classes, used when the YAML leaves the key out
#: (``models/deepseek3/configuration_deepseek_v3.py:DeepseekV3Config.__init__``:
#: ``first_k_dense_replace=3``, ``num_nextn_predict_layers=1``).
MCORE_DEFAULTS = {"deepseek_v3": {"first_k_dense_replace": 3, "mtp_layers": 1}}


@dataclass
class ModelFamily:
    """One model family as the plan uses it (see the module docstring).

    ``name`` is a file stem of ``swapwatch/models`` (``llama_qkv_concat``, ``deepseek_v3`` ...), or
    for an unknown family the name the YAML gave with ``known`` False: then no pattern can be
    resolved (SW307), and every walk reaches nothing.
    """

    name: str
    origin: str = "default"
    known: bool = True
    #: DeepSeek-style: layers below this id are dense, the rest MoE (0: every layer is MoE)
    first_k_dense_replace: Optional[int] = None
    #: MTP layers (MultiTokenPredictionBlock): each is set again as layer num_layers - 1
    mtp_layers: int = 0
    _walks: Dict[Tuple[str, str, str], patterns.WalkResult] = field(default_factory=dict, repr=False)

    # -- what the data says -------------------------------------------------------------
    @property
    def data(self) -> Dict[str, Any]:
        return family_data(self.name) if self.known else {"layouts": {}}

    @property
    def kinds(self) -> List[str]:
        return list(self.data["layouts"])

    @property
    def path(self) -> str:
        """``legacy`` or ``mcore`` (``example`` for the example model)."""
        return self.data.get("path", "example")

    @property
    def classes(self) -> List[str]:
        """The MindFormers classes the layouts come from: the model, then each layer class."""
        out = [self.data.get("model_class", "")] if self.data.get("model_class") else []
        for entry in self.data["layouts"].values():
            if entry.get("class") and entry["class"] not in out:
                out.append(entry["class"])
        return out

    def key(self, kind: str) -> str:
        return f"{self.name}:{kind}"

    # -- which tree each layer has ----------------------------------------------------------
    def kind_of(self, layer: int) -> Optional[str]:
        """The layer kind of decoder layer ``layer`` (None for an unknown family)."""
        kinds = [k for k in self.kinds if k != "mtp"]
        if not kinds:
            return None
        if "dense" in kinds and "moe" in kinds:
            k = self.first_k_dense_replace or 0
            return "dense" if layer < k else "moe"
        return kinds[0]

    def layout_key(self, layer: int, mtp: bool = False) -> Optional[str]:
        """The layout key of a decoder layer, or of the MTP layer (``mtp=True``)."""
        if not self.known:
            return None
        if mtp:
            return self.key("mtp") if "mtp" in self.kinds else None
        kind = self.kind_of(layer)
        return self.key(kind) if kind else None

    # -- what patterns reach ----------------------------------------------------------------
    def walk(self, key: Optional[str], pattern: str, mode: str) -> patterns.WalkResult:
        """Memoised :func:`patterns.walk_layout` on one layer kind (an empty result when the
        family is unknown: nothing can be resolved)."""
        if key is None:
            return patterns.WalkResult()
        k = (key, pattern, mode)
        hit = self._walks.get(k)
        if hit is None:
            hit = self._walks[k] = _walk(key, pattern, mode)
        return hit

    def layout(self, key: Optional[str]) -> Any:
        return load_layout(key) if key else None

    def flows(self, key: str) -> Dict[str, List[str]]:
        return load_flows(key)

    def preset(self, key: Optional[str]) -> Dict[str, Dict[str, bool]]:
        return load_layer_info(key)["preset"] if key else {}

    def shared(self, key: Optional[str]) -> List[str]:
        return load_layer_info(key)["shared"] if key else []

    def describe(self) -> str:
        """``qwen3_moe (mcore; model.model_config.model_type qwen3_moe at x.yaml:12)``."""
        if not self.known:
            return f"{self.name} (UNKNOWN: {self.origin}; patterns not resolved)"
        return f"{self.name} ({self.path}; {self.origin})"


@functools.lru_cache(maxsize=4096)
def _walk(key: str, pattern: str, mode: str) -> patterns.WalkResult:
    return patterns.walk_layout(load_layout(key), pattern, mode)


def known_families() -> List[str]:
    return _stems()


def family_table() -> str:
    """``swapwatch families``: one row per family: path, layer kinds with their classes, how the
    YAML names it."""
    names: Dict[str, List[str]] = {}
    for value, fam in list(LEGACY_ARCH.items()) + list(MCORE_TYPES.items()):
        names.setdefault(fam, []).append(value)
    rows = [("family", "path", "MindFormers classes (model; layer kinds)", "named in the YAML by")]
    for name in known_families():
        data = family_data(name)
        kinds = "; ".join(f"{k}: {v.get('class') or '?'}" for k, v in data["layouts"].items())
        model = data.get("model_class") or "swapwatch.examples.tinyllama"
        if name.startswith("llama"):
            flags = {"qkv_concat": False, **(data.get("set") or {})}
            by = "model.arch.type LlamaForCausalLM, " + ", ".join(f"{k}: {v}" for k, v in flags.items())
        elif name == DEFAULT_FAMILY:
            by = "(default when the YAML names no model)"
        else:
            by = ", ".join(names.get(name, []))
        rows.append((name, data.get("path", "example"), f"{model}; {kinds}", by))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:3])) + "  " + r[3])
    out.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(rows[0][3]))
    return "\n".join(out) + "\n\nLayer trees: swapwatch/models/<family>.yaml, extracted from MindFormers " \
        "2.1.0 by tools/extract_layouts.py.\n"


def from_name(name: str, origin: str = "--model") -> ModelFamily:
    """The family ``name`` (``--model``); an unknown name is bad input (exit 2)."""
    from .errors import InputError

    base, _, _ = name.partition(":")
    if base not in _stems():
        raise InputError(f"--model: unknown model family {name!r} (known: {', '.join(_stems())}; "
                         f"`swapwatch families` lists them)")
    return ModelFamily(base, origin=origin)


def detect(data: Mapping[str, Any], where: Any = None) -> ModelFamily:
    """The family a training YAML's data names, with its structural flags.

    ``where(key)`` gives ``file:line`` of a key path (for the explain header). Legacy path:
    ``model.arch.type`` (+ ``qkv_concat`` / ``qkv_has_bias`` for the Llama variants); mcore
    (``use_legacy: False``): ``model.model_config.model_type``, else ``architectures``.
    """
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    mc = model.get("model_config") if isinstance(model.get("model_config"), dict) else {}
    arch = model.get("arch") if isinstance(model.get("arch"), dict) else {}
    loc = (lambda key: f" at {where(key)}" if where and where(key) else "")
    mcore = data.get("use_legacy") is False
    fam: Optional[ModelFamily] = None
    if mcore:
        mtype = mc.get("model_type")
        archs = mc.get("architectures")
        arch0 = archs[0] if isinstance(archs, list) and archs else archs if isinstance(archs, str) else None
        for value, key in ((mtype, "model.model_config.model_type"), (arch0, "model.model_config.architectures")):
            if isinstance(value, str) and value:
                origin = f"use_legacy: False, {key} {value}{loc(key)}"
                name = MCORE_TYPES.get(value)
                fam = ModelFamily(name, origin=origin) if name else ModelFamily(value, origin=origin, known=False)
                break
        if fam is None:
            return ModelFamily("mcore model", origin="use_legacy: False but model.model_config has no "
                                                    "model_type / architectures", known=False)
        defaults = MCORE_DEFAULTS.get(fam.name, {})
        # the aliases TransformerConfig accepts for the MTP depth (transformer_config_utils.py)
        mtp = next((mc[k] for k in ("mtp_num_layers", "mtp_depth", "num_nextn_predict_layers") if k in mc),
                   defaults.get("mtp_layers", 0))
        fam.mtp_layers = mtp if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0 else 0
        if fam.mtp_layers and "mtp" not in fam.kinds:
            fam.mtp_layers = 0            # the family has no MTP block
        fk = mc.get("first_k_dense_replace", defaults.get("first_k_dense_replace"))
        fam.first_k_dense_replace = fk if isinstance(fk, int) and not isinstance(fk, bool) else None
        return fam
    atype = arch.get("type")
    if isinstance(atype, str) and atype:
        origin = f"model.arch.type {atype}{loc('model.arch.type')}"
        base = LEGACY_ARCH.get(atype)
        if base is None:
            return ModelFamily(atype, origin=origin, known=False)
        if base == "llama":
            concat, bias = mc.get("qkv_concat") is True, mc.get("qkv_has_bias") is True
            base = "llama" + ("_qkv_concat" if concat else "") + ("_qkv_bias" if bias and not concat else "") + \
                ("_bias" if bias and concat else "")
            flags = [f"qkv_concat {concat}"] + ([f"qkv_has_bias {bias}"] if bias else [])
            origin += f", {', '.join(flags)}"
        return ModelFamily(base, origin=origin)
    ctype = mc.get("type")
    if isinstance(ctype, str) and ctype:
        return ModelFamily(ctype, origin=f"model.model_config.type {ctype}{loc('model.model_config.type')} "
                                         f"without model.arch.type", known=False)
    return ModelFamily(DEFAULT_FAMILY, origin="default: the YAML names no model (--model to choose)")
