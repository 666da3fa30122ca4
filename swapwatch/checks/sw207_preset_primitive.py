"""SW207: a select pattern reaches a primitive preset at construction or shared by all layers."""
from __future__ import annotations

from typing import Dict, Iterable, List, Set, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where

#: the select keys whose walk calls ``Primitive.recompute`` (comm keys only add a prim attribute)
RECOMPUTE_CALLS = ("select_recompute", "select_recompute_exclude")


@register
class PresetPrimitive(Rule):
    """A select pattern reaches a primitive that is preset or shared: the network build crashes.

    **What it means.** MindSpore 2.10 lets ``Primitive.recompute`` be called once per primitive:
    the first call stores ``recompute`` in the instance and so hides the method. Some layers set
    it themselves when they are built (the MoE experts' ``swiglu`` is recomputed at construction,
    the router's ``topk`` is pinned off, Llama's norm ``cast`` is recomputed), and some primitives
    are one object shared by every layer (the MoE router's ``gating_activation``). A
    ``select_recompute`` (or ``select_recompute_exclude``) pattern that reaches such a primitive
    makes MindFormers' ``LayerSetting`` call ``recompute`` again, and the build stops with
    ``TypeError: <Model>: 'bool' object is not callable``: at the first layer for a preset
    primitive, at the second layer for a shared one. The layer trees and their preset and shared
    primitives come from the real classes (``swapwatch/layouts/<family>.yaml``, ``swapwatch
    families``).

    **Why it matters.** The job dies while the network is built, after the launch and data
    loading, with an error that names neither the pattern nor the primitive.

    **How to fix it.** Narrow the pattern so it leaves that primitive alone (``swapwatch explain``
    lists what each pattern reaches on every layer kind)::

        recompute_config:
          select_recompute:
            'mlp\\.shared_experts\\.activation_func\\.silu': True   # not 'mlp\\..*\\.swiglu'
    """

    code = "SW207"
    severity = "error"
    title = "a select pattern reaches a preset or shared primitive (the build crashes)"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        fam = plan.family if plan is not None else None
        if plan is None or fam is None or not fam.known or plan.legacy_recompute is not None:
            return
        from ..engine.strategy import WALK_MODE, all_layer_plans

        rc = (cfg.recompute_config if cfg is not None else None) or {}
        select_set = bool(rc.get("select_recompute"))     # the layer's constructor reads it as a bool
        done: Set[Tuple[str, str, str]] = set()
        shared_hits: Dict[Tuple[str, str, str], List[int]] = {}
        for lp, mtp in all_layer_plans(plan):
            key = plan.layout_key(lp.layer, mtp)
            if key is None:
                continue                      # no tree for this layer kind: no preset, nothing shared
            preset, shared = fam.preset(key, select_set), set(fam.shared(key))
            on = " on the MTP layer" if mtp else ""
            for sel in RECOMPUTE_CALLS:
                for pat in getattr(lp, sel):
                    for t in fam.walk(key, pat, WALK_MODE[sel]).targets:
                        if t.kind != "prim":
                            continue
                        if t.path in preset and (sel, pat, t.path) not in done:
                            done.add((sel, pat, t.path))
                            state = "recomputed" if preset[t.path].get("recompute") else "pinned not to recompute"
                            yield self.finding(
                                f"{sel} '{pat}'{on} reaches the primitive {t.path}, which the "
                                f"{key.split(':')[1]} layer already {state} when it was built; MindSpore allows "
                                f"Primitive.recompute once, so the build crashes (TypeError: 'bool' object is "
                                f"not callable)", layer=lp.layer, op=t.path,
                                source=where(cfg, f"recompute_config.{sel}"),
                                expected="a primitive not preset", actual=f"preset recompute={preset[t.path]}")
                        if t.path in shared:
                            shared_hits.setdefault((sel, pat, t.path), []).append(lp.layer)
        for (sel, pat, path), layers in shared_hits.items():
            if len(layers) < 2:
                continue                      # set once: no second call on the shared object
            yield self.finding(
                f"{sel} '{pat}' reaches the primitive {path}, one object shared by every "
                f"layer; it was already set at layer {layers[0]}, so the build crashes here (TypeError: "
                f"'bool' object is not callable)", layer=layers[1], op=path,
                source=where(cfg, f"recompute_config.{sel}"),
                expected="a primitive of the layer's own", actual="shared by all layers")
