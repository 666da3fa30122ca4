"""The action vocabulary: what MindFormers can do to one layer, in one table.

MindFormers' ``LayerSetting`` (parallel_core/training_graph/transformer/utils.py: ``LayerSetting.__call__``)
applies, per layer, full recompute, then the select (comm) recompute patterns and their excludes, then the swap
strategy; its log lines and swapwatch's ``apply`` events come in that order. Every module that needs an action's
name, label, table column, walk mode or kind reads it from :data:`KINDS` here, so adding an action is one row.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class ActionKind:
    """One action MindFormers can apply to a layer.

    ``walk_mode`` is the ``patterns.walk`` mode of a pattern-driven action (what a leaf *cell* match means);
    ``None`` for whole-layer actions. ``label`` is the name in messages, ``column`` the layer-table header,
    ``plot_name``/``color`` the strategy map's row name and colour.
    """

    name: str
    label: str
    column: str
    plot_name: str
    color: str
    walk_mode: Optional[str] = None
    swap: bool = False
    exclude: bool = False

    @property
    def pattern_driven(self) -> bool:
        """Its items are paths that a pattern selects (the rest act on the whole layer)."""
        return self.walk_mode is not None


#: Every action, in MindFormers' per-layer order. Excludes are grey in the plot: they *remove* recompute.
KINDS: Tuple[ActionKind, ...] = (
    ActionKind("full_recompute", "full recompute", "full", "full recompute", "#1f5fa8"),
    ActionKind("select_recompute", "select recompute", "select recompute", "select recompute", "#6aaed6",
               walk_mode="recompute"),
    ActionKind("select_comm_recompute", "select comm recompute", "comm recompute", "comm recompute", "#8e6bbf",
               walk_mode="comm"),
    ActionKind("select_recompute_exclude", "select recompute exclude", "exclude", "select recompute exclude",
               "#b8b8b8", walk_mode="exclude", exclude=True),
    ActionKind("select_comm_recompute_exclude", "select comm recompute exclude", "comm exclude",
               "comm recompute exclude", "#b8b8b8", walk_mode="comm_exclude", exclude=True),
    ActionKind("layer_swap", "layer swap", "layer swap", "layer swap", "#238b45", swap=True),
    ActionKind("op_swap", "op swap", "op swap", "op swap", "#8fd18a", walk_mode="swap", swap=True),
)

#: name -> kind.
BY_NAME: Dict[str, ActionKind] = OrderedDict((k.name, k) for k in KINDS)
#: Every action name, in order (what an ``apply`` event can say was done).
NAMES: Tuple[str, ...] = tuple(BY_NAME)
#: Actions whose items are pattern-driven paths, in order.
PATTERN_ACTIONS: Tuple[str, ...] = tuple(k.name for k in KINDS if k.pattern_driven)
#: The recompute pattern actions (select keys), in the order LayerSetting formats them.
SELECT_ACTIONS: Tuple[str, ...] = tuple(k.name for k in KINDS if k.pattern_driven and not k.swap)
#: The whole-layer actions (no pattern, no paths).
WHOLE_LAYER_ACTIONS: Tuple[str, ...] = tuple(k.name for k in KINDS if not k.pattern_driven)
#: The swap actions.
SWAP_ACTIONS: Tuple[str, ...] = tuple(k.name for k in KINDS if k.swap)
#: action -> patterns.walk mode, for the pattern-driven actions.
WALK_MODE: Dict[str, str] = {k.name: k.walk_mode for k in KINDS if k.walk_mode is not None}
#: patterns.walk mode -> action (what the hooks record a walk as).
ACTION_OF_MODE: Dict[str, str] = {mode: name for name, mode in WALK_MODE.items()}
#: action -> label used in messages.
LABEL: Dict[str, str] = {k.name: k.label for k in KINDS}
#: action -> layer-table column header, in order.
COLUMNS: "OrderedDict[str, str]" = OrderedDict((k.name, k.column) for k in KINDS)


def label(action: str) -> str:
    """The message label of ``action``; an unknown name is shown as given."""
    return LABEL.get(action, action)
