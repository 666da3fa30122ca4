"""SW209: one layer in two layer_swap entries, or one op on one layer in two op_swap entries."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from ..text import ranges
from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, swap_key, where

if TYPE_CHECKING:
    from ..config import TrainingConfig


def _layers(entry: Dict[str, Any], num_layers: int) -> List[int]:
    """The layer ids a Formative swap entry names (``layers: True`` is every layer)."""
    ids = entry.get("layers")
    if ids is True:
        return list(range(num_layers))
    return [i for i in ids if isinstance(i, int)] if isinstance(ids, list) else []


def shadowed(entries: List[Dict[str, Any]], num_layers: int) -> List[Tuple[int, int, List[int]]]:
    """(earlier entry, later entry, layers) for every later entry that names layers an earlier one
    already names. MindFormers takes the first entry that lists a layer and stops looking
    (``LayerSetting._set_layer_swap`` / ``_set_op_swap``: ``break`` after the first match)."""
    first: Dict[int, int] = {}
    out: Dict[Tuple[int, int], List[int]] = {}
    for j, entry in enumerate(entries):
        for layer in _layers(entry, num_layers):
            if layer in first:
                out.setdefault((first[layer], j), []).append(layer)
            else:
                first[layer] = j
    return [(i, j, sorted(ls)) for (i, j), ls in sorted(out.items())]


def _op_indices(cfg: Optional["TrainingConfig"], op: str) -> List[int]:
    """Indices of the YAML's op_swap entries that name ``op`` (MindFormers groups them by op
    name in that order: ``TransformerSwapConfig.op_swap_to_dict``)."""
    raw = ((cfg.swap_config if cfg is not None else None) or {}).get("op_swap")
    raw = [raw] if isinstance(raw, dict) else raw
    if not isinstance(raw, list):
        return []
    out = []
    for i, item in enumerate(raw):
        names = item.get("op_name") if isinstance(item, dict) else None
        if names == op or (isinstance(names, (list, tuple)) and op in names):
            out.append(i)
    return out


@register
class SwapEntryShadowed(Rule):
    """A layer is named by two ``layer_swap`` entries (or one op on one layer by two ``op_swap``
    entries): only the first applies there.

    **What it means.** For each layer, MindFormers' ``LayerSetting._set_layer_swap`` walks the
    ``layer_swap`` entries in order and stops at the first one that lists the layer;
    ``_set_op_swap`` does the same per op name over the ``op_swap`` entries naming that op. A later
    entry that lists the same layer is dropped on that layer, without a warning: its
    ``backward_prefetch`` is never used there (verified on real MindFormers 2.1.0 models, legacy
    and mcore: the offloaded primitives carry the first entry's prefetch,
    ``tests/test_oracle_swap_traps.py``).

    **Why it matters.** A prefetch tuned on the second entry silently does nothing on the shared
    layers; the log shows the first entry's value, which is easy to misread as the config's.

    **How to fix it.** List every layer in one entry only::

        swap_config:
          swap: True
          layer_swap:
            - {backward_prefetch: 2, layers: [0, 1]}
            - {backward_prefetch: 3, layers: [2]}
    """

    code = "SW209"
    severity = "warning"
    title = "a layer is in two swap entries: only the first applies there"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan, cfg = ctx.static_plan, config_of(ctx)
        if plan is None or not plan.swap or not plan.formative:
            return
        formative = plan.formative
        n = len(plan.layers)
        for i, j, layers in shadowed(formative.get("layer_swap") or [], n):
            entries = formative["layer_swap"]
            yield self._finding(cfg, f"layer_swap[{j}]", f"layer_swap[{i}]", "layer_swap", None, layers,
                                entries[i].get("backward_prefetch"), entries[j].get("backward_prefetch"))
        for op, entries in (formative.get("op_swap") or {}).items():
            keys = [f"op_swap[{k}]" for k in _op_indices(cfg, op)]
            for i, j, layers in shadowed(entries, n):
                yield self._finding(cfg, keys[j] if j < len(keys) else "op_swap",
                                    keys[i] if i < len(keys) else "op_swap", "op_swap", op, layers,
                                    entries[i].get("backward_prefetch"), entries[j].get("backward_prefetch"))

    def _finding(self, cfg: Optional["TrainingConfig"], later: str, earlier: str, kind: str, op: Optional[str],
                 layers: List[int], kept: Any, dropped: Any) -> Finding:
        later, earlier = f"swap_config.{later}", f"swap_config.{earlier}"
        what = f"{swap_key(cfg, later)}" + (f" ('{op}')" if op else "")
        effect = (f"its backward_prefetch {dropped!r} is not used there (MindFormers applies "
                  f"{swap_key(cfg, earlier)}'s {kept!r})" if dropped != kept
                  else f"it is redundant there ({swap_key(cfg, earlier)} has the same prefetch {kept!r})")
        # one layer is in ``layer`` (the renderer puts it in front), several in the text
        names = f"names layers {ranges(layers)}" if len(layers) > 1 else "names this layer too"
        return self.finding(f"{what} {names}, already swapped by "
                            f"{swap_key(cfg, earlier)}: {effect}",
                            layer=layers[0] if len(layers) == 1 else None, op=op or kind,
                            source=where(cfg, later), expected=kept, actual=dropped)
