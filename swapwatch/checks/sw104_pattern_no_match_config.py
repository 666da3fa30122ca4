"""SW104 (config time): a pattern that reaches nothing on the model layout, before launch."""
from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Set

from ..plan_view import APPLY_AC, LAYER_SETTING
from . import CheckContext, Finding, Rule, register
from ..text import ranges
from ._config_ctx import config_of, pattern_where
from .. import actions, strategy

if TYPE_CHECKING:
    from ..plan import Plan, Walker
    from ..pynative.resolve import PynativePlan

ACTIONS = actions.PATTERN_ACTIONS


@register
class PatternMatchesNothing(Rule):
    """A configured pattern matches nothing on the model's layer: a silent no-op.

    **What it means.** ``swapwatch explain`` walks every applied pattern over the model family's
    layer tree (``--model``, default Llama; ``swapwatch/layouts/<family>.yaml``) exactly as
    MindFormers' LayerSetting does, segment by segment. This pattern reaches no primitive and no
    cell, or (for exclude and comm patterns, which only take primitives) only cells. MindFormers
    would print nothing for it, and the training would run without the recompute or swap you
    configured. Typical causes: a typo (``'attention\\.flash attention'``), names of another model
    variant (``feed_forward\\.w1`` on a ``qkv_concat: True`` model, whose cells are
    ``w_gate_hidden``), or a missing ``\\.`` between segments. With run logs, ``verify`` decides the
    same code from what really was logged.

    **Why it matters.** The memory you planned for is not saved, and nothing says so.

    **How to fix it.** Use the names the model has (``swapwatch explain`` prints what each
    pattern reaches)::

        recompute_config:
          select_recompute:
            'attention\\.flash_attention': True      # was 'attention\\.flash attention'
    """

    code = "SW104"
    severity = "warning"
    title = "a configured pattern matched nothing on any layer (silent no-op)"
    needs = "config"
    #: both views: on ``apply_ac`` the resolution already knows which regexes matched no path of their layers
    views = (LAYER_SETTING, APPLY_AC)

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.view == APPLY_AC:
            yield from self._apply_ac(ctx.pynative_plan)
            return
        plan = ctx.static_plan
        if plan is None:
            return
        fam = plan.fam
        if not fam.known:
            return                        # unknown family: nothing to resolve against (SW307)
        cfg = config_of(ctx)
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
                results = [plan.walker(i)(pat, strategy.WALK_MODE[action]) for i in _one_per_kind(plan, layers)]
                if any(r.targets for r in results):
                    continue
                dflt = plan.defaulted.get(action, ())
                if pat in dflt and any(plan.walker(i)(d, strategy.WALK_MODE[action]).targets
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
                            plan.walker(layers[0]), pat, strategy.WALK_MODE[action], fam.path)
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
                yield self.finding(f"{action} pattern '{pat}'{on} matches nothing: {why}",
                                   layer=layers[0] if one else None, op=pat,
                                   source=pattern_where(cfg, action, pat),
                                   expected="a primitive or cell it reaches", actual="no match")

    #: ``apply_ac``'s map label -> the YAML key its regex comes from
    SECTION = {"select_module": "recompute.select_module", "exclude_op": "recompute.exclude_op",
               "comm_select_module": "recompute_comm.select_module", "op_swap": "swap.op_swap"}

    def _apply_ac(self, plan: "PynativePlan") -> Iterable[Finding]:
        """``apply_ac`` (``_expand_select_module``): a regex that matched no path of any of its layers; MindFormers
        only warns."""
        for label, key in plan.no_match:
            section = self.SECTION[label]
            yield self.finding(f"{section} pattern '{key}' matches no module or op of its layers (regex fullmatch "
                               f"on each layer's paths); MindFormers logs a warning and applies nothing for it",
                               op=key, source=plan.config.where(section))


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


def other_path_name(walker: "Walker", pattern: str, mode: str, path: Optional[str]) -> Optional[str]:
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


def _one_per_kind(plan: "Plan", layers: List[int]) -> List[int]:
    """One layer of each layout kind among ``layers`` (walks are per kind, not per layer)."""
    seen: Set[Optional[str]] = set()
    out: List[int] = []
    for i in layers:
        k = plan.layout_key(i)
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


