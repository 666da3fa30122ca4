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
    from .unmatched import NoMatch

#: The plan views (``PlanView.view``): a LayerSetting plan (patterns per layer, resolved on the layer's tree)
#: and an ``apply_ac`` plan (module paths per global layer id).
LAYER_SETTING, APPLY_AC = "layer_setting", "apply_ac"
VIEWS = (LAYER_SETTING, APPLY_AC)

class PlanView(Protocol):
    """What every consumer (explain's renderers, verify and its renderers, diff, ``plot strategy``, report, the
    rules) may read of a plan, whichever path made it. The action names are ``actions.py``'s."""

    @property
    def view(self) -> str:
        """Which view this is (:data:`LAYER_SETTING` or :data:`APPLY_AC`): what ``checks.Rule.views`` match."""

    @property
    def global_layer_ids(self) -> bool:
        """The layers are global ids (``apply_ac``: the trainer's ``apply_pp`` splits the decoder after the strategy
        is resolved; ``stage_of`` gives that split, ``pynative/config.py:stage_split``)."""

    @property
    def comparable(self) -> bool:
        """Patterns are matched segment by segment against the logged paths (LayerSetting)."""

    @property
    def voided_legend(self) -> str:
        """What a table's ``!`` mark (``layer_table.VOIDED``) means on this plan."""

    @property
    def path_note(self) -> str:
        """Appended to a side's description where a table shows two plans (``diff``): "" or the path's name."""

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

    def unmatched(self, config: Any) -> List["NoMatch"]:
        """The configured patterns (regexes) that reach nothing on any layer they are applied on, in this path's
        words and located in ``config`` (SW104 before launch)."""

    def stage_counts(self) -> List[Tuple[Any, List[int], Dict[str, int]]]:
        """Per pipeline stage: ``(stage, its layers, {mechanism: layers that get it})`` (the per-stage summary)."""

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
    voided_legend = "swap voided by recompute on that layer (SW201)"
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

    def unmatched(self, config: Any) -> List["NoMatch"]:
        from .unmatched import no_match

        return no_match(self, config)  # type: ignore[arg-type]

    def stage_counts(self) -> List[Tuple[Any, List[int], Dict[str, int]]]:
        from . import layer_table

        return layer_table.stage_counts(self.layers, self)  # type: ignore[arg-type]

    def strategy_rows_hook(self) -> Optional[List[tuple]]:
        return None

    def strategy_logs_hook(self, frame: "pd.DataFrame", runlog: Any,
                           rank: int) -> Optional[Tuple["pd.DataFrame", "pd.DataFrame"]]:
        return None


def is_view(obj: Any) -> bool:
    """``obj`` is a plan (either view), not a log or a result."""
    return getattr(obj, "view", None) in VIEWS
