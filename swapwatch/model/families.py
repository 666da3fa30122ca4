"""Which MindFormers model family a YAML trains, and which layer tree each layer has.

Why this exists: what a recompute / swap pattern reaches depends on the layer's real cell tree,
and MindFormers 2.1.0 builds very different layers per family and code path (legacy
``LLamaDecodeLayer`` with or without ``qkv_concat``, ``ChatGLM2Block``; mcore ``TransformerLayer``
with dense MLP or MoE, DeepSeek-V3's MLA + shared experts, and the MTP layer of
``MultiTokenPredictionBlock``). A model's layers may differ (DeepSeek-V3: dense below
``first_k_dense_replace``, MoE above, one MTP layer), so the plan resolves every layer on its own
tree. The trees are data extracted from the real classes (``swapwatch/layouts``).

:class:`ModelFamily` is what the :class:`~swapwatch.engine.strategy.Plan` carries: the family's name,
where that choice came from, the MindFormers classes its layouts were extracted from, its layer
kinds with their trees, preset and shared primitives, its flows (SW202), and a memoised
"what does this pattern reach on this kind of layer".
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Mapping, Optional, Set, Tuple, cast

from . import patterns
from ..config.load import mapping
from ..text import wrap_items, write_table
from ..layouts import families as _stems, family_data, family_words, load_flows, load_layer_info, load_layout

if TYPE_CHECKING:
    from ..parsers.model import FormativeEvent, RankLog

#: The family used when a YAML names no model at all (a fragment): the example model's tree.
DEFAULT_FAMILY = "tinyllama"
#: ``swapwatch families`` fits a terminal this wide.
FAMILY_TABLE_WIDTH = 100

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

#: The r2.x PyNative trainer's model paths of a family (``swapwatch/layouts/pynative/layer_paths.json``, the lists
#: ``activation_checkpoint.py:_get_modules_and_ops_list`` returns): the collected model's key there, and the
#: collected layer id that stands for each layer kind (DeepSeek-V3 was collected with layer 0 dense, 1-3 MoE and
#: the MTP layer as id 4)
PYNATIVE_PATHS: Dict[str, Tuple[str, Dict[str, str]]] = {
    "qwen3": ("qwen3", {"dense": "0"}),
    "deepseek_v3": ("deepseek_v3_mtp", {"dense": "0", "moe": "1", "mtp": "4"}),
    "tinyllama": ("tinyllama", {"dense": "0"}),
}
#: what a PyNative YAML's ``model.model_type`` (or ``--model``) may call a family with PyNative paths
PYNATIVE_NAMES = {"qwen3": "qwen3", "deepseek_v3": "deepseek_v3", "deepseek_v3_mtp": "deepseek_v3",
                  "tinyllama": "tinyllama"}

#: Structural defaults of the mcore config classes, used when the YAML leaves the key out
#: (``models/deepseek3/configuration_deepseek_v3.py:DeepseekV3Config.__init__``:
#: ``first_k_dense_replace=3``, ``num_nextn_predict_layers=1``).
MCORE_DEFAULTS = {"deepseek_v3": {"first_k_dense_replace": 3, "mtp_layers": 1},
                  "deepseek_v3_no_q_lora": {"first_k_dense_replace": 3, "mtp_layers": 1}}


@dataclass
class ModelFamily:
    """One model family as the plan uses it (see the module docstring).

    ``name`` is a file stem of ``swapwatch/layouts`` (``llama_qkv_concat``, ``deepseek_v3`` ...), or
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

    def key(self, kind: str) -> str:
        return f"{self.name}:{kind}"

    @property
    def pynative_paths(self) -> Optional[Tuple[str, Dict[str, str]]]:
        """Where this family's PyNative module paths are (:data:`PYNATIVE_PATHS`), None when none were collected."""
        return PYNATIVE_PATHS.get(self.name) if self.known else None

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
        return _walk(key, pattern, mode)

    def targets(self, key: Optional[str], pattern: str, mode: str) -> Tuple[str, ...]:
        """The paths ``pattern`` reaches on one layer kind in ``mode`` (``swap`` / ``recompute``);
        empty for a pattern the tree refuses or an unknown family."""
        try:
            return tuple(t.path for t in self.walk(key, pattern, mode).targets)
        except patterns.PatternError:
            return ()

    def paths(self) -> FrozenSet[str]:
        """Every path (cell or prim) of the family's layer trees, every kind (dense, MoE, MTP);
        empty for an unknown family."""
        return layout_paths(self.name) if self.known else frozenset()

    def layout(self, key: Optional[str]) -> Any:
        return load_layout(key) if key else None

    def flows(self, key: str) -> Dict[str, List[str]]:
        return load_flows(key)

    def preset(self, key: Optional[str], select_recompute: bool = False) -> Dict[str, Dict[str, bool]]:
        """Primitives (and cells) the layer marks itself when built; with ``select_recompute`` set
        (any truthy value) some layers mark more (legacy LLamaAttention without flash attention
        recomputes its core ops: ``models/llama/llama_transformer.py:LLamaAttention.__init__``)."""
        if not key:
            return {}
        info = load_layer_info(key)
        out = dict(info["preset"])
        if select_recompute:
            out.update(info["preset_if_select_recompute"])
        return out

    def shared(self, key: Optional[str]) -> List[str]:
        return load_layer_info(key)["shared"] if key else []

    def describe(self) -> str:
        """``qwen3_moe (mcore; model.model_config.model_type qwen3_moe at x.yaml:12)``."""
        if not self.known:
            return f"{self.name} (UNKNOWN: {self.origin}; patterns not resolved)"
        return f"{self.name} ({self.path}; {self.origin})"


def interleaved_layer(fgi: object, tp: object, mcore: bool, arch: object) -> int:
    """The fine-grain interleave MindFormers builds: ``fine_grain_interleave`` when it makes the legacy
    Llama model build ``models/llama/llama_interleave.py:LLamaDecodeLayerInterleave``
    (``models/llama/llama.py:LlamaModel`` when ``models/utils.py:check_fine_grain_interleave_valid``
    holds: more than 1 part and model_parallel > 1), else 1 (the plain layer, and every other path)."""
    ok = isinstance(fgi, int) and isinstance(tp, int) and fgi > 1 and tp > 1
    return fgi if ok and not mcore and arch == "LlamaForCausalLM" else 1  # type: ignore[return-value]


def tree_fine_grain(tree: Mapping[str, Any]) -> int:
    """:func:`interleaved_layer` of a merged config tree as written (no value checked: a config read
    back from a log, or one whose keys ``spec`` would refuse, is the plain layer here)."""
    model = mapping(tree.get("model"))
    return interleaved_layer(mapping(model.get("model_config")).get("fine_grain_interleave"),
                             mapping(tree.get("parallel_config")).get("model_parallel", 1),
                             tree.get("use_legacy") is False, mapping(model.get("arch")).get("type"))


@functools.lru_cache(maxsize=1 << 16)
def _walk(key: str, pattern: str, mode: str) -> patterns.WalkResult:
    """The memo behind :meth:`ModelFamily.walk`: a layout key's tree is immutable data, so one
    walk per (tree, pattern, mode) serves every plan, layer and rule. Large enough for a config of
    tens of thousands of patterns (4,096 thrashed at 20,000: every layer walked again)."""
    return patterns.walk_layout(load_layout(key), pattern, mode)


@functools.lru_cache(maxsize=64)
def layout_paths(family: str) -> FrozenSet[str]:
    """Every path of a family's layer trees (``name``: every kind; ``name:kind``: that kind's): the
    memo behind :meth:`ModelFamily.paths`, beside :func:`_walk` (immutable data, one place)."""
    if ":" in family:
        return frozenset(p for p, _ in load_layout(family).paths())
    out: Set[str] = set()
    for kind in family_data(family)["layouts"]:
        out |= {p for p, _ in load_layout(f"{family}:{kind}").paths()}
    return frozenset(out)


def default_family(origin: str = "default: the YAML names no model (--model to choose)") -> ModelFamily:
    """The family a plan uses when nothing names one: the one place that decides it
    (:data:`DEFAULT_FAMILY`, the tiny Llama of ``swapwatch/examples``)."""
    return ModelFamily(DEFAULT_FAMILY, origin=origin)


def known_families() -> List[str]:
    return _stems()


def pynative_family(name: object) -> Optional[ModelFamily]:
    """The family a PyNative YAML's ``model.model_type`` (or ``--model``) names, when it has PyNative paths
    (:data:`PYNATIVE_NAMES`); None otherwise."""
    base = PYNATIVE_NAMES.get(str(name).lower()) if name is not None else None
    return ModelFamily(base, origin=f"model_type {name}") if base else None


def family_table() -> str:
    """``swapwatch families``: one row per family: path, layer kinds with their classes, how the
    YAML names it."""
    names: Dict[str, List[str]] = {}
    for value, fam in list(LEGACY_ARCH.items()) + list(MCORE_TYPES.items()):
        names.setdefault(fam, []).append(value)
    rows: List[List[Any]] = []
    for name in known_families():
        data = family_data(name)
        kinds = [f"{k}: {v.get('class') or '?'}" for k, v in data["layouts"].items()]
        model = data.get("model_class") or "swapwatch.examples.tinyllama"
        if name.startswith("llama"):
            flags = {"qkv_concat": False, **(data.get("set") or {})}
            by = "model.arch.type LlamaForCausalLM, " + ", ".join(f"{k}: {v}" for k, v in flags.items())
        elif name == "deepseek_v3_no_q_lora":
            by = "deepseek_v3 / DeepseekV3ForCausalLM, with q_lora_rank: null"
        elif name == DEFAULT_FAMILY:
            by = "(default when the YAML names no model)"
        else:
            by = ", ".join(names.get(name, []))
        rows.append([name, data.get("path", "example"), [model] + kinds, by.split(", ")])
    # the last column wraps between items, the classes first, then the YAML's names, so that the
    # table fits FAMILY_TABLE_WIDTH columns (issue 23.4: one line per family was 268 wide)
    width = FAMILY_TABLE_WIDTH - sum(max(len(r[i]) for r in rows) + 2 for i in (0, 1))
    rows = [[r[0], r[1], wrap_items(r[2], width, "; ", "  ") + wrap_items(["named by: " + r[3][0]] + r[3][1:],
                                                                         width, ", ", "  ")]
            for r in rows]
    out = write_table(["family", "path", "MindFormers classes (model; layer kinds), YAML names"], rows)
    return "\n".join(out) + "\n\nLayer trees: swapwatch/layouts/<family>.yaml, extracted from MindFormers " \
        "2.1.0\nby tools/extract_layouts.py.\n"


def check_code_path(family: ModelFamily, mcore: bool, option: str = "--model") -> None:
    """Refuse a family of the other code path (issue 21.9: never apply a tree of the other path):
    ``--model deepseek_v3`` on a legacy-path YAML would resolve its patterns on mcore cells the
    legacy model does not build. Exit 2, one line."""
    from ..errors import InputError

    if family.known and family.path in ("mcore", "legacy") and (family.path == "mcore") != mcore:
        here = "mcore (use_legacy: False)" if mcore else "legacy (no use_legacy: False)"
        article = "an" if family.path == "mcore" else "a"
        raise InputError(f"{option} {family.name}: {article} {family.path}-path family, but the YAML is on "
                         f"the {here} path, whose layers are other cells; "
                         + ("pick an mcore family (`swapwatch families`)" if mcore else
                            "set use_legacy: False if the run uses the mcore model"))


def from_name(name: str, origin: str = "--model") -> ModelFamily:
    """The family ``name`` (``--model``); an unknown name is bad input (exit 2)."""
    from ..errors import InputError

    base, _, _ = name.partition(":")
    if base not in _stems():
        raise InputError(f"--model: unknown model family {name!r} (known: {', '.join(_stems())}; "
                         f"`swapwatch families` lists them)")
    return ModelFamily(base, origin=origin)


def _mcore_family(value: Any) -> Optional[str]:
    """The mcore family a class name names: a ``model_type`` / ``architectures`` value, or its
    config class (``DeepseekV3Config`` -> ``DeepseekV3ForCausalLM``)."""
    if not isinstance(value, str) or not value:
        return None
    return MCORE_TYPES.get(value) or (MCORE_TYPES.get(value[:-len("Config")] + "ForCausalLM")
                                      if value.endswith("Config") else None)


def _named_elsewhere(arch_type: Any, config_type: Any) -> Optional[Tuple[str, str, str]]:
    """(value, key, family) when an mcore YAML without ``model_type`` names a known family in
    ``model.arch.type`` / ``model.model_config.type`` (issue 21.9: say what to add, never guess)."""
    for value, key in ((arch_type, "model.arch.type"), (config_type, "model.model_config.type")):
        name = _mcore_family(value)
        if name is not None:
            return str(value), key, name
    return None


def _mcore_only(value: str) -> str:
    """Why a legacy-path class that names an mcore family is not resolved (issue 21.9): the
    family's tree is the mcore model's (``parallel_core``), the legacy research model is another
    tree, and a tree of the other path is never applied."""
    name = _mcore_family(value)
    if name is None:
        return ""
    return (f" on the legacy path (no use_legacy: False): swapwatch has {name}'s layer tree for the mcore path "
            f"only (use_legacy: False, model.model_config.model_type {name}); the legacy {value} builds "
            f"other cells, so no tree is applied. If the run uses the mcore model, set use_legacy: False and "
            f"model_type: {name}")


def detect(data: Mapping[str, Any], where: Any = None) -> ModelFamily:
    """The family a training YAML's data names, with its structural flags.

    ``where(key)`` gives ``file:line`` of a key path (for the explain header). Legacy path:
    ``model.arch.type`` (+ ``qkv_concat`` / ``qkv_has_bias`` for the Llama variants); mcore
    (``use_legacy: False``): ``model.model_config.model_type``, else ``architectures``.
    """
    model = mapping(data.get("model"))
    mc = mapping(model.get("model_config"))
    arch = mapping(model.get("arch"))

    def loc(key: str) -> str:
        return f" at {where(key)}" if where and where(key) else ""

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
                if name == "deepseek_v3" and "q_lora_rank" in mc and mc["q_lora_rank"] is None:
                    # MLA without the query LoRA: one linear_q_proj (TransformerConfig q_lora_rank None)
                    name, origin = "deepseek_v3_no_q_lora", origin + ", q_lora_rank null"
                fam = ModelFamily(name, origin=origin) if name else ModelFamily(value, origin=origin, known=False)
                break
        if fam is None:
            why = " (they come from pretrained_model_dir's config.json, which swapwatch does not read; " \
                  "--model to choose)" if data.get("pretrained_model_dir") else ""
            hint = _named_elsewhere(arch.get("type"), mc.get("type"))
            if hint is not None:
                value, key, name = hint
                why += (f"; {key} {value}{loc(key)} names {name}, but the mcore path picks the model by "
                        f"model_type: add model.model_config.model_type: {name}, or pass --model {name}")
            return ModelFamily("mcore model", origin="use_legacy: False but model.model_config has no "
                                                    f"model_type / architectures{why}", known=False)
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
            return ModelFamily(atype, origin=origin + _mcore_only(atype), known=False)
        if base == "llama":
            concat, bias = mc.get("qkv_concat") is True, mc.get("qkv_has_bias") is True
            base = "llama" + ("_qkv_concat" if concat else "") + ("_qkv_bias" if bias and not concat else "") + \
                ("_bias" if bias and concat else "")
            flags = [f"qkv_concat {concat}"] + ([f"qkv_has_bias {bias}"] if bias else [])
            if mc.get("use_flash_attention") is False:
                # LLamaDecodeLayer without flash attention has no attention.flash_attention cell
                base += "_noflash"
                flags.append("use_flash_attention False")
            origin += f", {', '.join(flags)}"
        return ModelFamily(base, origin=origin)
    ctype = mc.get("type")
    if isinstance(ctype, str) and ctype:
        return ModelFamily(ctype, origin=f"model.model_config.type {ctype}{loc('model.model_config.type')} "
                                         f"without model.arch.type" + _mcore_only(ctype), known=False)
    return default_family()


# ---------------------------------------------------------------------------------------------
# The family of a log (verify without --config)
# ---------------------------------------------------------------------------------------------

#: When several families fit a log equally well, the first of these wins (the most common).
LOG_PREFERENCE = ("qwen3", "qwen3_moe", "deepseek_v3", "telechat3", "llama", "llama_qkv_concat_bias",
                  "llama_qkv_concat", "llama_qkv_bias", "glm4", "deepseek_v3_no_q_lora")


def from_log(rank_log: "RankLog") -> Optional[ModelFamily]:
    """The family a worker log was made by, as far as its own lines tell.

    Candidates: every family whose trees hold all paths the log's ``Set ...`` lines name, with an
    MTP block exactly when the log has a second LayerSetting block, on the mcore path when the
    Formative select patterns are mcore's defaults. Among them, the one that best explains the
    log: fewest Formative patterns that would reach something there but were never logged, or
    were logged but reach nothing there (so a ``qkv_concat`` Llama log, whose ``feed_forward\\.w1``
    patterns log nothing, is read on the fused tree). None when nothing fits, or when the log names
    no path (and is not recognisably mcore): then nothing says which tree it was."""
    from .patterns import logged_path_matches

    logged = {path for a in rank_log.actions for path, _ in a.items() if path}
    formative = rank_log.formative()
    swap_mode = "layer swap" in formative or "op swap" in formative
    pats: List[Tuple[str, str]] = []
    for key, mode in (("select_recompute", "recompute"), ("select_comm_recompute", "comm"),
                      ("op swap", "swap")):
        value = formative.get(key)
        if isinstance(value, dict):
            # only patterns applied on some layer are evidence (a pattern on no layer logs nothing)
            pats.extend((p, mode) for p, v in value.items() if _applied(v, swap_mode))
    sel = formative.get("select_recompute")
    mcore_hint = isinstance(sel, dict) and any(p.startswith("mlp\\.shared_experts") for p in sel)
    mtp = rank_log.layer_settings > 1          # a second block: MTP, on mcore
    if not logged and not (mcore_hint or mtp):
        return None                 # no evidence: the log reads as before (the default tree)
    scored = []
    words = {w for path in logged for w in re.findall(r"\w+", path)}
    order = list(LOG_PREFERENCE) + [n for n in known_families() if n not in LOG_PREFERENCE]
    for name in order:
        if name == DEFAULT_FAMILY or name not in known_families():
            continue
        if not words <= family_words(name):
            continue                # a logged path is not in this family (its file is not parsed)
        fam = ModelFamily(name, origin="")
        if mtp != ("mtp" in fam.kinds) or (mcore_hint and fam.path != "mcore"):
            continue
        paths = set()
        for kind in fam.kinds:
            paths |= {p for p, _ in load_layout(fam.key(kind)).paths()}
        if not logged <= paths:
            continue
        score = 0
        for pat, mode in pats:
            reaches = any(fam.walk(fam.key(kind), pat, mode).matched for kind in fam.kinds)
            seen = any(logged_path_matches(pat, path) for path in logged)
            score += reaches != seen
        scored.append((score, name))
    if not scored:
        return None
    best = min(score for score, _ in scored)
    names = [n for score, n in scored if score == best]
    src = rank_log.files[0] if rank_log.files else "the log"
    fam = ModelFamily(names[0], origin=f"read from {src} (its logged paths and patterns" +
                      (f"; {', '.join(names[1:])} fit as well)" if len(names) > 1 else ")"))
    fam.mtp_layers = 1 if mtp else 0
    return fam


def _applied(value: Any, swap_mode: bool) -> bool:
    """Does a Formative value apply its pattern on any layer? Swap mode: True or a non-empty list
    of layer ids (op swap: entries with such ``layers``); otherwise a count table with a count > 0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return _applied(value.get("layers"), True)
    if isinstance(value, (list, tuple)):
        if swap_mode and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
            return True
        return any(_applied(x, swap_mode) for x in value)
    if isinstance(value, (int, float)):
        return value > 0
    return False


def apply_log_family(config: Any, rank_log: "RankLog") -> None:
    """Give a config rebuilt from a log (``initial ... from dict``) the family the log shows, and on
    the mcore path the swap LayerSetting really used: the top-level swap_config a log prints is
    the one mcore ignores, while its ``Formative layer swap`` / ``op swap`` lines carry the real one."""
    fam = from_log(rank_log)
    if fam is None:
        return
    config.family = fam
    if fam.path != "mcore":
        return
    if fam.name in MCORE_DEFAULTS:
        fk = _dense_layers_from_log(rank_log) if fam.name.startswith("deepseek_v3") else None
        if fk is None:
            fk = MCORE_DEFAULTS[fam.name].get("first_k_dense_replace")
            fam.origin += f"; first_k_dense_replace guessed: {fk}, the config class default (no logged " \
                          f"path tells dense from MoE layers; --config gives the real one)"
        fam.first_k_dense_replace = fk
    config.mcore = True
    top = {k: v for k, v in config.swap_config.items() if v is not None}
    config.ignored_swap_config = top if top.get("swap") else None
    f = rank_log.formative()
    # the model_config swap keys a finding names on mcore point to the Formative line of their value
    first: Dict[str, str] = {}
    for e in rank_log.of("formative"):              # a kind is one event class
        if e.source:
            first.setdefault(cast("FormativeEvent", e).key, e.source)
    for key, line in (("cpu_offloading", first.get("layer swap") or first.get("op swap")),
                      ("cpu_offloading_num_layers", first.get("layer swap")), ("op_swap", first.get("op swap"))):
        if line:
            config.key_sources[f"model.model_config.{key}"] = line
    if "layer swap" in f or "op swap" in f:
        op_swap = [dict(e, op_name=name) for name, entries in (f.get("op swap") or {}).items() for e in entries]
        config.swap_config = {"swap": True, "layer_swap": f.get("layer swap") or None,
                              "op_swap": op_swap or None, "default_prefetch": 1}
    else:
        config.swap_config = {"swap": False, "layer_swap": None, "op_swap": None, "default_prefetch": 1}


def _dense_layers_from_log(rank_log: "RankLog") -> Optional[int]:
    """DeepSeek-V3's first_k_dense_replace as the log shows it: the first layer whose lines name
    a path only MoE layers have (None: the log cannot tell, the config class default applies)."""
    moe_only = {p for p, _ in load_layout("deepseek_v3:moe").paths()} - \
        {p for p, _ in load_layout("deepseek_v3:dense").paths()}
    dense_only = {p for p, _ in load_layout("deepseek_v3:dense").paths()} - \
        {p for p, _ in load_layout("deepseek_v3:moe").paths()}
    first_moe, last_dense = None, None
    for a in rank_log.actions:
        for path, _ in a.items():
            if path in moe_only and (first_moe is None or a.layer < first_moe):
                first_moe = a.layer
            if path in dense_only and (last_dense is None or a.layer > last_dense):
                last_dense = a.layer
    if first_moe is not None:
        return first_moe if last_dense is None or last_dense < first_moe else None
    return None if last_dense is None else last_dense + 1
