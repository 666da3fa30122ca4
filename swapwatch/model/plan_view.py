"""The one plan shape every consumer reads, whichever MindFormers code path made it (DESIGN §1.2).

A LayerSetting :class:`~swapwatch.model.plan.Plan` (legacy and mcore, ``strategy.py``) and an ``apply_ac``
``PynativePlan`` (``pynative/resolve.py``) are both a :class:`PlanView`: per layer, the :class:`Action` s applied
there (kind in ``actions.py``'s names, the subjects it reaches, its prefetch, whether recompute voids it), the
layer's stage, the plan's JSON document. Consumers (the tables of ``explain`` / ``verify`` / ``diff``, ``plot
strategy``, the report) draw every path's plan from these; none asks which path made it. Which path a YAML goes to
is ``codepaths.py``'s (the one dispatch). This module holds data only: it imports no renderer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Protocol, Tuple


if TYPE_CHECKING:
    from ..engine.unmatched import NoMatch

#: The plan views (``PlanView.view``): a LayerSetting plan (patterns per layer, resolved on the layer's tree)
#: and an ``apply_ac`` plan (module paths per global layer id); the rule registry matches them (``Rule.views``).
LAYER_SETTING, APPLY_AC = "layer_setting", "apply_ac"
VIEWS = (LAYER_SETTING, APPLY_AC)

def reads(views: Tuple[str, ...], plan: Optional["PlanView"]) -> bool:
    """Does a reader of the plan views ``views`` (``checks.Rule.views``) read ``plan``? A missing plan reads as a
    LayerSetting one (the rules of that view find nothing without one)."""
    return (LAYER_SETTING if plan is None else plan.view) in views


#: what a voided swap (a table's ``!``) means on a LayerSetting plan (``PlanView.voided_legend``)
VOIDED_BY_RECOMPUTE = "swap voided by recompute on that layer (SW201)"

#: why a subject reaches nothing, or has no effect (a table shows ``NAME (note)``)
NO_MATCH, CELL_ONLY, INVALID, NOT_EFFECTIVE = "no match", "cell only: no effect", "invalid pattern", \
    "cell: not effective"


@dataclass(frozen=True)
class Subject:
    """What one action names at one layer: the pattern (LayerSetting) or module path (``apply_ac``) as configured,
    the op paths it reaches on the layer's tree (``apply_ac``: itself), and why it reaches nothing or has no effect
    (:data:`NO_MATCH`, :data:`CELL_ONLY`, :data:`INVALID`, :data:`NOT_EFFECTIVE`; "" when it applies)."""

    name: str
    reaches: Tuple[str, ...] = ()
    note: str = ""

    def texts(self) -> List[str]:
        """The subject in a table cell: the paths it reaches, else ``NAME (note)``, else its name."""
        if self.reaches:
            return list(self.reaches)
        return [f"{self.name} ({self.note})" if self.note else self.name]


@dataclass(frozen=True)
class Action:
    """One action a plan applies at one layer.

    ``kind``: ``actions.NAMES``; ``subjects``: what it names (none for a whole-layer action); ``prefetch``: a
    LayerSetting swap's ``backward_prefetch`` (None where the path has none per swap: ``PlanView.layer_prefetch``);
    ``voided``: recompute voids this swap (SW201 / SW504) or, with ``shadowed``, this select pattern never
    applies (the layer is fully recomputed: SW105); ``partial``: only part of a layer swap is voided; ``why``: what
    voids it; ``logged``: MindFormers logs a line for it; ``resolved``: its subjects were walked on the model's tree
    (an unknown family's are shown as written)."""

    kind: str
    subjects: Tuple[Subject, ...] = ()
    prefetch: Any = None
    voided: bool = False
    partial: bool = False
    shadowed: bool = False
    why: str = ""
    logged: bool = True
    resolved: bool = True


class Config(Protocol):
    """What every path's config offers a consumer that reads either (``TrainingConfig``, ``PynativeConfig``):
    the file it came from and where a key is (``file:line``)."""

    @property
    def source(self) -> Optional[str]: ...

    def where(self, key: str) -> Optional[str]: ...


class PlanView(Protocol):
    """What every consumer (explain's renderers, verify and its renderers, diff, ``plot strategy``, report, the
    rules) may read of a plan, whichever path made it. The action names are ``actions.py``'s."""

    @property
    def view(self) -> str:
        """Which view this is (:data:`LAYER_SETTING` or :data:`APPLY_AC`): what ``checks.Rule.views`` match."""

    @property
    def swap_keys_become_ids(self) -> bool:
        """Turning swap on changes what the recompute keys mean (LayerSetting: per-stage counts become layer ids)."""

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

    def stage_of(self, layer: int, mtp: bool = False) -> Tuple[Optional[int], int]:
        """``(stage, interleave)`` of ``layer`` (``mtp``: of the MTP layer set as that id); stage None when the
        config does not decide it."""

    def layer_actions(self, layer: int) -> Dict[str, List[str]]:
        """Per action (``actions.NAMES``) applied at ``layer``: its patterns (LayerSetting) or module paths
        (``apply_ac``); ``[]`` for a whole-layer action. Actions not applied are absent."""

    def actions_at(self, layer: int, mtp: bool = False) -> List[Action]:
        """The :class:`Action` s applied at ``layer`` (``mtp``: the MTP layer LayerSetting sets as that id), in
        MindFormers' per-layer order; a select pattern that never applies there is one with ``shadowed``."""

    def layer_prefetch(self, layer: int) -> Optional[int]:
        """The layer whose swapped tensors are prefetched when ``layer`` runs forward (``apply_ac``'s prefetch
        pair); None where there is none, or where the prefetch is per swap (``Action.prefetch``)."""

    def all_layers(self) -> List[Tuple[int, bool]]:
        """``(layer, mtp)`` of every layer the plan sets, decoder layers first."""

    def to_json(self, findings: Iterable[Any] = ()) -> Dict[str, Any]:
        """explain's JSON document of this plan and the ``findings`` about it (DESIGN §3.2)."""

    def unmatched(self, config: Optional[Config]) -> List["NoMatch"]:
        """The configured patterns (regexes) that reach nothing on any layer they are applied on, in this path's
        words and located in ``config`` (SW104 before launch)."""

    def stage_counts(self) -> List[Tuple[Any, List[int], Dict[str, int]]]:
        """Per pipeline stage: ``(stage, its layers, {mechanism: layers that get it})`` (the per-stage summary)."""
