"""SW202: a swapped op whose consumer is recomputed (the swap cannot help)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, layer_swap_where, pattern_where
from ..model import patterns

if TYPE_CHECKING:
    from ..model.families import ModelFamily
    from ..model.plan import LayerPlan, Prefetch

WHOLE_LAYER = "(whole layer)"


@register
class ConsumerRecomputed(Rule):
    """A swapped activation feeds an op that is recomputed, so the swap saves nothing.

    **What it means.** MindFormers' documentation *Fine-Grained Activations SWAP*
    (``docs/mindformers/docs/source_en/function/fine_grained_activations_swap.md`` in the
    MindSpore docs repository), section "Used together with Recomputation", point 2: "For any
    operator with SWAP enabled, if its output is used by an operator with recomputation enabled,
    then SWAP for that operator will not take effect." (Point 1 is SW201: an op both recomputed
    and swapped is recomputed, not swapped.)

    This rule follows the model family's producer -> consumer data (``flows`` in
    ``swapwatch/layouts/<family>.yaml``: flash_attention -> wo, w1 -> activation -> mul, w3 -> mul,
    mul -> w2, the norms -> their projections, w2 -> the next layer's attention_norm) for every op a
    swap reaches (an ``op_swap`` cell covers every op inside it; a ``layer_swap`` covers the whole
    layer) and reports the ones whose consumer is recomputed: by ``select_recompute`` on the same
    layer, or because the consuming layer is fully recomputed (the last op of a swapped layer
    feeds the next layer on the same pipeline stage; the last layer of a stage feeds the Send to
    the next stage, which nothing recomputes). An op that is itself recomputed is SW201, not this rule.

    **Why it matters.** Host-device copies cost bandwidth and can stall the step; here they buy
    no memory.

    **How to fix it.** Swap a different op, or stop recomputing the consumer on those layers::

        swap_config:
          swap: True
          op_swap:
            - {op_name: 'feed_forward\\.w3', backward_prefetch: 1, layers: [2, 3]}
        recompute_config:
          select_recompute:
            'feed_forward\\.mul': [0, 1]      # not on 2, 3, where w3 (mul's input) is swapped
    """

    code = "SW202"
    severity = "error"
    title = "swap ineffective: the swapped op's consumer is recomputed"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if plan is None or not plan.swap:
            return
        layers = {lp.layer: lp for lp in plan.layers}
        # each layer on its own tree (dense / MoE): the plan's per-layer layout key
        fam = plan.fam                    # every layout question through the plan's family object
        keys = {i: plan.layout_key(i) for i in layers}
        recomputed = {i: _recompute_targets(lp, fam, keys[i]) for i, lp in layers.items()}
        graphs: Dict[str, _Graph] = {}    # one per layer kind (dense, MoE) of this plan
        for i, lp in sorted(layers.items()):
            key = keys[i]
            if key is None:
                continue                  # unknown family: nothing to resolve (SW307)
            self.family = key
            graph = graphs.get(key) or graphs.setdefault(key, _Graph(fam.flows(key)))
            swaps: List[Tuple[str, "Prefetch", FrozenSet[str]]] = []
            # a swap recompute already voids (SW201: the same op or the whole layer) is not
            # also a swap whose consumer is recomputed
            voided = {o.pattern for o in lp.swap_overridden if o.scope == "op"}
            if lp.layer_swap is not None and not lp.layer_swap_voided:
                swaps.append((WHOLE_LAYER, lp.layer_swap, graph.nodes))
            for pat, prefetch in (lp.op_swap or {}).items():
                if pat in voided:
                    continue
                members: Set[str] = set()
                for target in fam.targets(key, pat, "swap"):
                    members |= graph.members(target)
                swaps.append((pat, prefetch, frozenset(members)))
            for what, prefetch, covered in swaps:
                pairs = []
                for x in sorted(covered):
                    if graph.recomputed(x, lp, recomputed[i]):
                        continue                      # the op itself is recomputed: SW201
                    for c in graph.flows.get(x, ()):
                        if graph.recomputed(c, lp, recomputed[i]):
                            pairs.append(f"{x} -> {c}")
                    if x in graph.sinks and i + 1 in layers and layers[i + 1].stage == lp.stage:
                        nxt = layers[i + 1]
                        for c in sorted(graph.sources):
                            if graph.recomputed(c, nxt, recomputed[i + 1]):
                                pairs.append(f"{x} -> layer {i + 1} {c}")
                if pairs:
                    shown = "; ".join(pairs[:6]) + (f"; ... ({len(pairs)} in all)" if len(pairs) > 6 else "")
                    kind = "layer swap" if what == WHOLE_LAYER else f"op swap '{what}'"
                    yield self.finding(
                        f"{kind} (prefetch {prefetch}) offloads activations whose "
                        f"consumer is recomputed, so the swap saves nothing: {shown}",
                        layer=i, op=what, expected="consumer kept (not recomputed)",
                        actual=f"recomputed consumer: {pairs[0].split(' -> ', 1)[1]}",
                        source=(layer_swap_where(config_of(ctx), i) if what == WHOLE_LAYER
                                else pattern_where(config_of(ctx), "op_swap", what)))


class _Graph:
    """The family's producer -> consumer flows, with containment questions answered."""

    def __init__(self, flows: Dict[str, List[str]]):
        self.flows: Dict[str, List[str]] = {k: list(v or []) for k, v in flows.items()}
        consumers = {c for cs in self.flows.values() for c in cs}
        self.nodes: FrozenSet[str] = frozenset(set(self.flows) | consumers)
        self.sinks = frozenset(n for n in self.nodes if not self.flows.get(n))
        self.sources = frozenset(n for n in self.nodes if n not in consumers)

    def owner(self, path: str) -> Optional[str]:
        """The most specific flow node that contains ``path`` (a prim or cell of the layer)."""
        best = None
        for n in self.nodes:
            if patterns.under(path, n) and (best is None or len(n) > len(best)):
                best = n
        return best

    def members(self, target: str) -> Set[str]:
        """The flow nodes a swap of ``target`` covers: every node inside it, else its owner."""
        inside = {n for n in self.nodes if patterns.under(n, target)}
        if inside:
            return inside
        own = self.owner(target)
        return {own} if own else set()

    def recomputed(self, node: str, lp: "LayerPlan", targets: FrozenSet[str]) -> bool:
        """Is ``node`` recomputed on the layer of ``lp``: full recompute, or a select-recompute
        target that contains the node or lies in the node's own ops (not in a sub-node)."""
        if lp.full_recompute:
            return True
        return any(patterns.under(node, t) or (patterns.under(t, node) and self.owner(t) == node)
                   for t in targets)


def _recompute_targets(lp: "LayerPlan", fam: "ModelFamily", key: Optional[str]) -> FrozenSet[str]:
    """Everything select_recompute reaches on this layer (all matches, not only the logged one); nothing
    without a layout key (an unknown family: SW307)."""
    if not key:
        return frozenset()
    out: Set[str] = set()
    for pat in lp.select_recompute or []:
        out.update(fam.targets(key, pat, "recompute"))
    return frozenset(out)
