"""The one per-layer, per-action view of a plan, whichever MindFormers code path made it (DESIGN §1.2).

A LayerSetting :class:`~swapwatch.plan.Plan` (legacy and mcore, ``strategy.py``) and an ``apply_ac``
``PynativePlan`` (``pynative/resolve.py``) are both a :class:`PlanView`: consumers read layers, the actions at a
layer (``actions.py``'s names), a layer's stage, its table cells and the JSON document through it, and where the
two paths really differ the difference is an attribute (``global_layer_ids``, ``comparable``) or a hook method
of the view, not a test of the path's name in the consumer. Which path a YAML takes is ``paths.py``'s (the seam).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Protocol, Tuple

if TYPE_CHECKING:
    import pandas as pd

    from .plan import LayerPlan

#: The plan views (``PlanView.view``): a LayerSetting plan (patterns per layer, resolved on the layer's tree)
#: and an ``apply_ac`` plan (module paths per global layer id).
LAYER_SETTING, APPLY_AC = "layer_setting", "apply_ac"
VIEWS = (LAYER_SETTING, APPLY_AC)

class PlanView(Protocol):
    """What every consumer (explain's renderers, verify and its renderers, diff, ``plot strategy``, report, the
    rules) may read of a plan, whichever path made it. The action names are ``actions.py``'s."""

    #: which view this is (:data:`LAYER_SETTING` or :data:`APPLY_AC`): what ``checks.Rule.views`` match
    view: str
    #: the layers are global ids (``apply_ac``: the trainer's ``apply_pp`` splits the decoder after the strategy
    #: is resolved; ``stage_of`` gives that split, ``pynative/config.py:stage_split``)
    global_layer_ids: bool
    #: verify's per-layer :class:`~swapwatch.compare.Comparison` (patterns matched segment by segment
    #: against the logged paths) reads this plan
    comparable: bool
    #: appended to a side's description where a table shows two plans (``diff``): "" or the path's name
    path_note: str
    layers: List[Any]

    @property
    def swap_on(self) -> bool:
        """Swap is enabled (the lever, whatever it applies)."""

    def stage_of(self, layer: int) -> Tuple[Optional[int], int]:
        """``(stage, interleave)`` of ``layer``; stage None when the config does not decide it."""

    def layer_actions(self, layer: int) -> Dict[str, List[str]]:
        """Per action (``actions.NAMES``) applied at ``layer``: its patterns (LayerSetting) or module paths
        (``apply_ac``); ``[]`` for a whole-layer action. Actions not applied are absent."""

    def table_cells(self, layer: int) -> Dict[str, str]:
        """``layer``'s cells in the shared layer-table columns (``layer_table.COLUMNS``), as diff shows them."""

    def to_json(self, findings: Iterable[Any] = ()) -> Dict[str, Any]:
        """explain's JSON document of this plan and the ``findings`` about it (DESIGN §3.2)."""

    def verify_map_lines(self, result: Any) -> List[str]:
        """verify's table lines of this path's own per-layer map (none: the map is made from the
        :class:`~swapwatch.compare.Comparison`)."""

    def verify_map_json(self, result: Any) -> Optional[Dict[str, Any]]:
        """verify's JSON ``layer_map`` when this path has its own; None: made from the Comparison."""

    def strategy_rows_hook(self) -> Optional[List[tuple]]:
        """``plot strategy``'s config rows when this path has its own; None: ``strategy_map`` makes them."""

    def strategy_logs_hook(self, frame: "pd.DataFrame", runlog: Any,
                           rank: int) -> Optional[Tuple["pd.DataFrame", "pd.DataFrame"]]:
        """(log frame, differences) of ``rank``'s log drawn against this plan when this path has its own;
        None: the comparison's."""


class LayerSettingView:
    """:class:`PlanView` of a LayerSetting :class:`~swapwatch.plan.Plan` (legacy and mcore): a base of ``Plan``,
    reading only its fields (``layers``, ``swap``), so the view and the plan cannot drift apart."""

    view = LAYER_SETTING
    global_layer_ids = False
    comparable = True
    path_note = ""
    layers: List["LayerPlan"]
    swap: bool

    @property
    def swap_on(self) -> bool:
        return bool(self.swap)

    def _layer_plan(self, layer: int) -> "LayerPlan":
        for lp in self.layers:
            if lp.layer == layer:
                return lp
        raise KeyError(layer)

    def stage_of(self, layer: int) -> Tuple[Optional[int], int]:
        lp = self._layer_plan(layer)
        return lp.stage, lp.interleave

    def layer_actions(self, layer: int) -> Dict[str, List[str]]:
        from . import actions

        lp = self._layer_plan(layer)
        out: Dict[str, List[str]] = {}
        if lp.full_recompute:
            out["full_recompute"] = []
        for action in actions.SELECT_ACTIONS:
            if lp.patterns(action):
                out[action] = list(lp.patterns(action))
        if lp.layer_swap is not None:
            out["layer_swap"] = []
        if lp.op_swap:
            out["op_swap"] = list(lp.op_swap)
        return out

    def table_cells(self, layer: int) -> Dict[str, str]:
        from . import layer_table

        lp = self._layer_plan(layer)
        return layer_table.plan_cells(lp, layer_table.layer_walk(self, lp))

    def verify_map_lines(self, result: Any) -> List[str]:
        return []

    def verify_map_json(self, result: Any) -> Optional[Dict[str, Any]]:
        return None

    def strategy_rows_hook(self) -> Optional[List[tuple]]:
        return None

    def strategy_logs_hook(self, frame: "pd.DataFrame", runlog: Any,
                           rank: int) -> Optional[Tuple["pd.DataFrame", "pd.DataFrame"]]:
        return None


def is_view(obj: Any) -> bool:
    """``obj`` is a plan (either view), not a log or a result."""
    return getattr(obj, "view", None) in VIEWS
