"""Configured patterns that reach nothing on a LayerSetting plan's layer trees, and the did-you-mean for them.

SW104 says so before launch (from the plan's trees: :func:`no_match`, what ``Plan.unmatched`` answers) and after
it (from the logs; :func:`suggest` adds the hint). Kept out of the rule modules so that both SW104 variants and
the plan read one copy (a rule module is never a library).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Set

from ..model import actions
from ..text import ranges

if TYPE_CHECKING:
    from ..config import TrainingConfig
    from ..model.families import ModelFamily
    from ..model.patterns import WalkResult

Walker = Callable[[str, str], "WalkResult"]


class TreePlan(Protocol):
    """What this module reads of a LayerSetting plan (``plan.Plan``), typed without importing it (the plan's view
    calls this module)."""

    @property
    def model(self) -> str: ...

    @property
    def defaulted(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def layers(self) -> Sequence[Any]: ...

    @property
    def family(self) -> Optional["ModelFamily"]: ...

    @property
    def fam(self) -> "ModelFamily": ...

    def walker(self, layer: int, mtp: bool = False) -> Walker: ...

    def layout_key(self, layer: int, mtp: bool = False) -> Optional[str]: ...

ACTIONS = actions.PATTERN_ACTIONS
WALK_MODE = actions.WALK_MODE


@dataclass(frozen=True)
class NoMatch:
    """A configured pattern that reaches nothing, as a plan of either path says it (``PlanView.unmatched``):
    what SW104 reports before launch, in the plan's words, and where the pattern is."""

    message: str
    op: str
    source: Optional[str]
    layer: Optional[int] = None
    expected: Optional[str] = None
    actual: Optional[str] = None
    #: the strategy key the pattern is under (``select_recompute`` ...): what a plan drops it from
    action: str = ""


def no_match(plan: TreePlan, cfg: Optional["TrainingConfig"]) -> List[NoMatch]:
    """Every applied pattern of ``plan`` that reaches nothing on any layer kind it is applied on (``cfg``: the
    config that locates it, when there is one)."""
    out: List[NoMatch] = []
    fam = plan.fam
    if not fam.known:
        return out                    # unknown family: nothing to resolve against (SW307)
    suggested = 0                     # "did you mean" for the first MAX_SUGGESTIONS (nearest_path)
    for action in ACTIONS:
        layers_of: Dict[str, List[int]] = {}
        for lp in plan.layers:
            pats = lp.op_swap if action == "op_swap" else getattr(lp, action)
            for pat in pats:
                layers_of.setdefault(pat, []).append(lp.layer)
        for pat, layers in layers_of.items():
            # every layer kind the pattern is applied on (dense, MoE): silent only if it
            # reaches nothing on any of them
            results = [plan.walker(i)(pat, WALK_MODE[action]) for i in _one_per_kind(plan, layers)]
            if any(r.targets for r in results):
                continue
            dflt = plan.defaulted.get(action, ())
            if pat in dflt and any(plan.walker(i)(d, WALK_MODE[action]).targets
                                   for d in dflt for i in _one_per_kind(plan, layers)):
                continue        # MindFormers' defaults span layer kinds: others of them apply
            skipped = [c for r in results for c in r.skipped_cells]
            if skipped:
                why = (f"it only reaches cell(s) {', '.join(dict.fromkeys(skipped))}, and "
                       f"{action.replace('_', ' ')} only acts on primitives")
            else:
                why = f"nothing in the {plan.model} layer is named like that"
                suggested += 1
                near = other = None
                if suggested <= MAX_SUGGESTIONS:
                    near = nearest_path(fam.layout(plan.layout_key(layers[0])), pat)
                    if near == pat:
                        near = None
                    other = None if near else other_path_name(
                        plan.walker(layers[0]), pat, WALK_MODE[action], fam.path)
                if near:
                    why += f" (did you mean '{near}'?)"
                elif other:
                    why += f" ({other})"
            if action == "op_swap" and pat in dflt:
                why = (f"it is MindFormers' default op swap (swap on, no layer_swap / op_swap given), "
                       f"and {why}: nothing is offloaded")
            # the place is said once: one layer in ``layer`` (the renderer puts it in front),
            # several in the text
            one = len(layers) == 1
            on = "" if one else f" (applied on layers {ranges(layers, 6)})"
            out.append(NoMatch(f"{action} pattern '{pat}'{on} matches nothing: {why}",
                               layer=layers[0] if one else None, op=pat,
                               source=cfg.pattern_where(action, pat) if cfg is not None else None,
                               expected="a primitive or cell it reaches", actual="no match", action=action))
    return out


#: Patterns of one config that get a "did you mean": each suggestion compares the pattern with every
#: path of the layer (difflib); thousands of patterns that match nothing are no typos, and 20,000
#: of them spent most of explain's time here (docs/reliability.md: near-linear, in seconds).
MAX_SUGGESTIONS = 100
#: Regex syntax besides the ``\.`` separator: such a pattern is not a misspelt path, so no suggestion.
_REGEX_META = re.compile(r"[*+?()\[\]{}|^$\\]")
_ANY_PREFIX = ".*\\."


def nearest_path(layout: Any, pattern: str) -> Optional[str]:
    r"""The layout path closest to a pattern that matches nothing, written as a pattern
    (``attention\.flash_atention`` -> ``attention\.flash_attention``), or None when nothing is
    close or the pattern is a real regex. A leading ``.*\.`` is kept and the rest compared with
    path endings."""
    prefix, rest = (_ANY_PREFIX, pattern[len(_ANY_PREFIX):]) if pattern.startswith(_ANY_PREFIX) else ("", pattern)
    text = rest.replace("\\.", ".")
    if not text or _REGEX_META.search(text):
        return None
    paths = [p for p, _ in layout.paths()]
    if prefix:
        paths = sorted({".".join(p.split(".")[i:]) for p in paths for i in range(len(p.split(".")))})
    close = difflib.get_close_matches(text, paths, n=1, cutoff=0.8)
    return prefix + close[0].replace(".", "\\.") if close else None


#: Legacy (``use_legacy: True``, ``swapwatch/layouts/llama.yaml``) cell names and their mcore
#: (``parallel_core``, ``swapwatch/layouts/qwen3.yaml``) counterparts, most specific first: a pattern
#: written for one path matches nothing on the other, silently (issue 21.8).
LEGACY_TO_MCORE = (
    ("attention.flash_attention", "self_attention.core_attention.flash_attention"),
    ("attention.flash_attention", "self_attention.core_attention"),
    ("flash_attention", "self_attention.core_attention"),
    ("feed_forward.w1.activation", "mlp.activation_func"),
    ("feed_forward.w1", "mlp.linear_fc1"),
    ("feed_forward.w3", "mlp.linear_fc1"),
    ("feed_forward.w2", "mlp.linear_fc2"),
    ("feed_forward", "mlp"),
    ("attention.wo", "self_attention.linear_proj"),
    ("attention.w_qkv", "self_attention.linear_qkv"),
    ("attention.wq", "self_attention.linear_qkv"),
    ("attention_norm", "input_layernorm"),
    ("ffn_norm", "pre_mlp_layernorm"),
    ("attention", "self_attention"),
)


def other_path_name(walker: Walker, pattern: str, mode: str, path: Optional[str]) -> Optional[str]:
    r"""For a pattern that reaches nothing, its name on this code path when it is written in the
    other one's words (``feed_forward\.mul`` on an mcore model: ``did you mean 'mlp\.mul' (the
    mcore name)?``), checked by walking the rewritten pattern on the layer; None when no rewrite
    reaches anything."""
    text = pattern.replace("\\.", ".")
    pairs = LEGACY_TO_MCORE if path == "mcore" else tuple((b, a) for a, b in LEGACY_TO_MCORE)
    word = "mcore" if path == "mcore" else "legacy"
    for old, new in pairs:
        if old not in text:
            continue
        if text.startswith(".*.") and new.startswith("self_attention.") and old == "flash_attention":
            cand = new                          # '.*\.flash_attention' -> the attention cell itself
        else:
            cand = text.replace(old, new, 1)
        cand_pat = (".*\\." + cand[3:].replace(".", "\\.")) if cand.startswith(".*.") else cand.replace(".", "\\.")
        try:
            if walker(cand_pat, mode).targets:
                return f"did you mean '{cand_pat}'? the {word} path's name"
        except Exception:       # noqa: BLE001 - a rewrite that is no valid pattern suggests nothing
            continue
    return None


def _one_per_kind(plan: TreePlan, layers: List[int]) -> List[int]:
    """One layer of each layout kind among ``layers`` (walks are per kind, not per layer)."""
    seen: Set[Optional[str]] = set()
    out: List[int] = []
    for i in layers:
        k = plan.layout_key(i)
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


def suggest(plan: Optional[TreePlan], action: str, pattern: str, layer: int) -> str:
    """The config-time rule's did-you-mean (a close name, or the other code path's name) when the
    plan's family has a tree to check it on; empty otherwise."""
    fam = plan.family if plan is not None else None
    if plan is None or fam is None or not fam.known:
        return ""
    try:
        near = nearest_path(fam.layout(plan.layout_key(layer)), pattern)
        if near and near != pattern:
            return f" (did you mean '{near}'?)"
        other = other_path_name(plan.walker(layer), pattern, actions.WALK_MODE[action], fam.path)
    except Exception:       # noqa: BLE001 - a suggestion is a courtesy, never a failure
        return ""
    return f" ({other})" if other else ""
