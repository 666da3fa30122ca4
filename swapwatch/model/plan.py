"""The Plan: what MindFormers will apply at every layer, as typed data.

Built by :func:`swapwatch.engine.strategy.plan` (which holds the semantics: MindFormers' ``LayerSetting``,
parallel_core/training_graph/transformer/utils.py); read by explain, verify, diff, the hooks, the plots and
the memory model. Kept apart from the engine so that readers of a plan need not import how it is made.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from . import actions, patterns
from .plan_view import CELL_ONLY, INVALID, LAYER_SETTING, NO_MATCH, VOIDED_BY_RECOMPUTE, Action, Subject

if TYPE_CHECKING:
    from ..engine.unmatched import NoMatch
    from .families import ModelFamily
    from .plan_view import Config

Prefetch = Union[int, str]

#: How :func:`swapwatch.engine.strategy.layer_lines` reaches a layer's cells: ``walker(pattern, mode) ->
#: WalkResult``. The layout walk for explain/verify, the real-cell walk for the runtime hooks.
Walker = Callable[[str, str], patterns.WalkResult]


@dataclass
class Geometry:
    """Where every layer sits: (interleave, stage) chunks, as MindFormers' LayerSetting computes them."""

    num_layers: int
    pipeline_stage: int
    pp_interleave_num: int
    offset: List[List[int]]          # V x P after broadcast
    layer_list: List[List[int]]      # layers per chunk, V x P
    layer_accu: List[List[int]]      # cumulative, row-major over chunks
    chunk_starts: List[List[int]]    # layer_accu_mod: start of chunk (v, p) is chunk_starts[v][p]
    pp_ids: List[int]                # stage of every layer
    interleave_ids: List[int]        # interleave of every layer
    start_stage: int = 0

    def chunk_of(self, layer: int) -> Tuple[int, int]:
        """(interleave, stage) of ``layer``."""
        return self.interleave_ids[layer], self.pp_ids[layer]

    def position(self, layer: int) -> int:
        """How far ``layer`` is into its chunk (0 = the chunk's first layer)."""
        v, p = self.chunk_of(layer)
        return layer - self.chunk_starts[v][p]


@dataclass(frozen=True)
class Override:
    """A swap MindFormers applies at a layer but recompute voids there (SW201, the tables, the plot).

    ``scope`` is ``"layer"`` (the layer swap, on a fully recomputed layer), ``"part"`` (the part of
    the layer swap that a select pattern recomputes; ``pattern`` is that select pattern) or
    ``"op"`` (an op_swap ``pattern`` whose target is recomputed); ``action`` is the swap action
    voided (``layer_swap`` / ``op_swap``) and ``why`` says which recompute voids it.
    """

    scope: str
    action: str
    pattern: Optional[str]
    why: str

    @classmethod
    def whole_layer(cls, why: str) -> "Override":
        return cls("layer", "layer_swap", None, why)

    @classmethod
    def part_of_layer(cls, select_pattern: str, why: str) -> "Override":
        return cls("part", "layer_swap", select_pattern, why)

    @classmethod
    def op(cls, pattern: str, why: str) -> "Override":
        return cls("op", "op_swap", pattern, why)

    @property
    def entry(self) -> str:
        """The string of ``swap_overridden`` in explain's JSON (DESIGN §3.2): ``layer_swap``,
        ``layer_swap[<select pattern>]`` or the op_swap pattern."""
        if self.scope == "layer":
            return "layer_swap"
        if self.scope == "part":
            return f"layer_swap[{self.pattern}]"
        return str(self.pattern)


@dataclass
class LayerPlan:
    """What MindFormers will *apply* at one layer (select patterns absent on fully recomputed layers)."""

    layer: int
    stage: int
    interleave: int
    full_recompute: bool = False
    select_recompute: List[str] = field(default_factory=list)
    select_comm_recompute: List[str] = field(default_factory=list)
    select_recompute_exclude: List[str] = field(default_factory=list)
    select_comm_recompute_exclude: List[str] = field(default_factory=list)
    layer_swap: Optional[Prefetch] = None
    op_swap: Dict[str, Prefetch] = field(default_factory=dict)
    #: swaps applied here but voided by recompute on this layer, in the order they were found
    swap_overridden: List[Override] = field(default_factory=list)
    #: select key (``select_recompute`` / ``select_comm_recompute``) -> the patterns that target
    #: this layer but are never applied, because the layer is fully recomputed (SW105, the map)
    select_shadowed: Dict[str, List[str]] = field(default_factory=dict)
    #: False when the full recompute leaves no log line (swap mode with ``recompute: True``)
    full_recompute_logged: bool = True

    def patterns(self, action: str) -> List[str]:
        """The patterns of one select action (``actions.SELECT_ACTIONS``: the field of that name), typed; the
        one place an action name picks a field (a KeyError for any other action)."""
        return {"select_recompute": self.select_recompute, "select_comm_recompute": self.select_comm_recompute,
                "select_recompute_exclude": self.select_recompute_exclude,
                "select_comm_recompute_exclude": self.select_comm_recompute_exclude}[action]

    def to_json(self) -> Dict[str, Any]:
        return {"layer": self.layer, "stage": self.stage, "interleave": self.interleave,
                "full_recompute": self.full_recompute,
                "select_recompute": list(self.select_recompute),
                "select_comm_recompute": list(self.select_comm_recompute),
                "select_recompute_exclude": list(self.select_recompute_exclude),
                "select_comm_recompute_exclude": list(self.select_comm_recompute_exclude),
                "layer_swap": self.layer_swap, "op_swap": dict(self.op_swap),
                "swap_overridden": [o.entry for o in self.swap_overridden]}

    @property
    def layer_swap_voided(self) -> bool:
        """The whole layer swap is voided (the layer is fully recomputed)."""
        return any(o.scope == "layer" for o in self.swap_overridden)

    @property
    def layer_swap_touched(self) -> bool:
        """The layer swap is voided wholly or in part (a select pattern recomputes part of it)."""
        return any(o.action == "layer_swap" for o in self.swap_overridden)

    def op_swap_voided(self, pattern: str) -> bool:
        """The op_swap ``pattern`` is voided here."""
        return any(o.scope == "op" and o.pattern == pattern for o in self.swap_overridden)


class LayerSettingView:
    """:class:`PlanView` of a LayerSetting :class:`~swapwatch.model.plan.Plan` (legacy and mcore): a base of ``Plan``,
    reading only its fields (``layers``, ``mtp``, ``swap``, its family's walk), so the view and the plan cannot
    drift apart."""

    view = LAYER_SETTING
    swap_keys_become_ids = True
    path_note = ""
    voided_legend = VOIDED_BY_RECOMPUTE
    layers: List["LayerPlan"]
    mtp: List["LayerPlan"]
    swap: bool

    @property
    def swap_on(self) -> bool:
        return bool(self.swap)

    @property
    def fam(self) -> "ModelFamily":
        raise NotImplementedError           # Plan's

    def walker(self, layer: int, mtp: bool = False) -> Walker:
        raise NotImplementedError           # Plan's

    def _layer_plan(self, layer: int, mtp: bool = False) -> "LayerPlan":
        for lp in (self.mtp if mtp else self.layers):
            if lp.layer == layer:
                return lp
        raise KeyError(layer)

    def stage_of(self, layer: int, mtp: bool = False) -> Tuple[Optional[int], int]:
        lp = self._layer_plan(layer, mtp)
        return lp.stage, lp.interleave

    def all_layers(self) -> List[Tuple[int, bool]]:
        return [(lp.layer, False) for lp in self.layers] + [(lp.layer, True) for lp in self.mtp]

    def layer_actions(self, layer: int) -> Dict[str, List[str]]:
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

    def actions_at(self, layer: int, mtp: bool = False) -> List[Action]:
        """Each pattern walked on the layer's own tree (its family's dense / MoE / MTP kind), as MindFormers'
        walk finds them; swaps voided by recompute carry the engine's :class:`~swapwatch.model.plan.Override`
        reasons."""
        lp = self._layer_plan(layer, mtp)
        walk = self.walker(lp.layer, mtp)
        fam = self.fam
        resolved = fam is None or fam.known
        out: List[Action] = []
        if lp.full_recompute:
            out.append(Action("full_recompute", logged=lp.full_recompute_logged))
        for kind in actions.SELECT_ACTIONS:
            pats = lp.patterns(kind)
            if pats:
                out.append(Action(kind, tuple(_subject(walk, p, actions.WALK_MODE[kind]) for p in pats),
                                  resolved=resolved))
            for pat in lp.select_shadowed.get(kind, []):
                out.append(Action(kind, (Subject(pat),), voided=True, shadowed=True,
                                  why="the layer is fully recomputed", resolved=resolved))
        if lp.layer_swap is not None:
            whole = lp.layer_swap_voided
            out.append(Action("layer_swap", prefetch=lp.layer_swap, voided=lp.layer_swap_touched,
                              partial=lp.layer_swap_touched and not whole,
                              why="; ".join(o.why for o in lp.swap_overridden if o.action == "layer_swap")))
        for pat, prefetch in (lp.op_swap or {}).items():
            out.append(Action("op_swap", (_subject(walk, pat, "swap"),), prefetch=prefetch,
                              voided=lp.op_swap_voided(pat), resolved=resolved,
                              why=next((o.why for o in lp.swap_overridden if o.scope == "op" and o.pattern == pat),
                                       "")))
        return out

    def layer_prefetch(self, layer: int) -> Optional[int]:
        return None                          # LayerSetting's prefetch is per swap (Action.prefetch)

    def stage_counts(self) -> List[Tuple[Any, List[int], Dict[str, int]]]:
        return stage_counts(self.layers, self)


def _subject(walk: Optional[Walker], pattern: str, mode: str) -> Subject:
    """``pattern`` as walked on one layer's tree (``walk``; None: shown as written)."""
    if walk is None:
        return Subject(pattern)
    try:
        res = walk(pattern, mode)
    except Exception:            # noqa: BLE001 - an invalid regex is reported by the config checks, not here
        return Subject(pattern, note=INVALID)
    if res.targets:
        return Subject(pattern, tuple(t.path for t in res.targets))
    return Subject(pattern, note=CELL_ONLY if res.skipped_cells else NO_MATCH)


def stage_counts(layer_plans: Iterable["LayerPlan"], plan: Optional[LayerSettingView] = None
                 ) -> List[Tuple[Any, List[int], Dict[str, int]]]:
    """Per stage of a LayerSetting plan: ``(stage, its layers, {full, select, comm, swap[, voided swap]: n})``. A
    stage's interleave chunks count together (memory is per device); with the ``plan`` (a family it can walk), a
    layer counts only for what applies there: select, comm and op-swap patterns that reach nothing on the layer's
    tree do not count (issue 21.8: ``select_recompute: True`` on Qwen3-MoE expands to defaults that match
    nothing)."""
    by_stage: Dict[Any, List["LayerPlan"]] = {}
    for lp in sorted(layer_plans, key=lambda x: (x.stage, x.layer)):
        by_stage.setdefault(lp.stage, []).append(lp)
    fam = plan.fam if plan is not None else None
    walkable = plan is not None and (fam is None or fam.known)

    def applies(lp: "LayerPlan", pats: Any, mode: str) -> bool:
        if not pats:
            return False
        if not walkable or plan is None:
            return True
        walk = plan.walker(lp.layer)
        for pat in pats:
            try:
                if walk(pat, mode).targets:
                    return True
            except Exception:       # noqa: BLE001 - an invalid pattern is the config checks' to report
                return True
        return False

    out = []
    for stage, lps in by_stage.items():
        counts = {"full": sum(1 for lp in lps if lp.full_recompute),
                  "select": sum(1 for lp in lps if applies(lp, lp.select_recompute,
                                                            actions.WALK_MODE["select_recompute"])),
                  "comm": sum(1 for lp in lps if applies(lp, lp.select_comm_recompute,
                                                          actions.WALK_MODE["select_comm_recompute"])),
                  "swap": sum(1 for lp in lps if lp.layer_swap is not None
                              or applies(lp, list(lp.op_swap or {}), "swap"))}
        voided = sum(1 for lp in lps if lp.swap_overridden)
        if voided:
            counts["voided swap"] = voided
        out.append((stage, [lp.layer for lp in lps], counts))
    return out


@dataclass
class Plan(LayerSettingView):
    """The whole intended strategy: geometry, the Formative values, one LayerPlan per layer.

    ``formative`` holds the values exactly as LayerSetting builds them (numpy arrays and scalars
    where MindFormers has them), keyed ``layer_recompute``, ``select_recompute``,
    ``select_comm_recompute``, ``select_recompute_exclude``, ``select_comm_recompute_exclude`` and,
    in swap mode, ``layer_swap`` and ``op_swap``. It is empty for the legacy plain-bool
    ``parallel_config.recompute``, which makes MindFormers skip all of this (and log nothing).
    What consumers read of it is the per-layer view (``paths.PlanView``, DESIGN §1.2).
    """

    geometry: Geometry
    swap: bool
    formative: Dict[str, Any]
    layers: List[LayerPlan]
    #: (select key, pattern) removed because an exclude pattern overlaps it (logged at init)
    removed: List[Tuple[str, str]] = field(default_factory=list)
    #: the swap/recompute conflict WARNING messages MindFormers prints at init (exact text)
    warnings: List[str] = field(default_factory=list)
    #: the legacy plain-bool ``parallel_config.recompute`` (None when recompute_config is used)
    legacy_recompute: Optional[bool] = None
    #: the model family: each layer's tree comes from it (per layer kind: dense, moe, mtp)
    family: Optional["ModelFamily"] = None
    #: MTP (``MultiTokenPredictionBlock``): a second LayerSetting sets each MTP layer as layer
    #: ``num_layers - 1``, on the MTP layer's own tree; one LayerPlan per MTP layer
    mtp: List[LayerPlan] = field(default_factory=list)
    #: one layout (a LayoutNode) for every layer, when the caller gave one explicitly
    layout_override: Any = None
    #: select key -> the default patterns MindFormers filled in (the value was a bool or counts):
    #: on mcore they cover every layer kind, so one reaching nothing on some model is by design
    defaulted: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def fam(self) -> "ModelFamily":
        """The family every layout question goes through: the plan's own, else the default one
        (decided in one place, :func:`swapwatch.model.families.default_family`)."""
        if self.family is not None:
            return self.family
        from .families import default_family

        return default_family()

    @property
    def model(self) -> str:
        """The family's name (kept for callers that only want the name)."""
        return self.fam.name

    def layout_key(self, layer: int, mtp: bool = False) -> Optional[str]:
        """The layout key (``family:kind``) of decoder layer ``layer`` or of the MTP layer."""
        return self.fam.layout_key(layer, mtp)

    def unmatched(self, config: Optional["Config"]) -> List["NoMatch"]:
        """Patterns that reach nothing on any layer kind they are applied on (``unmatched.no_match``: the walk of
        each kind's tree, with a did-you-mean), located in ``config`` (its TrainingConfig, or None)."""
        from ..config import TrainingConfig
        from ..engine.unmatched import no_match

        return no_match(self, config if isinstance(config, TrainingConfig) else None)

    def walker(self, layer: int, mtp: bool = False) -> "Walker":
        """``walker(pattern, mode)`` over the tree of one layer (memoised per layer kind)."""
        if self.layout_override is not None:
            lay = self.layout_override
            return lambda pat, mode: walk(lay, pat, mode)
        key = self.layout_key(layer, mtp)
        fam = self.fam
        return lambda pat, mode: fam.walk(key, pat, mode)

    def to_json(self, findings: Iterable[Any] = ()) -> Dict[str, Any]:
        """The ``explain --format json`` document: the plan and the ``findings`` about it
        (explain's, passed in: a Plan holds no findings)."""
        g = self.geometry
        return {"num_layers": g.num_layers, "pipeline_stage": g.pipeline_stage,
                "pp_interleave_num": g.pp_interleave_num, "swap": self.swap,
                "formative": jsonable(self.formative),
                "layers": [lp.to_json() for lp in self.layers],
                "findings": [f.to_json() if hasattr(f, "to_json") else f for f in findings],
                # additions (issue 11): the family, and the MTP layer(s) set as layer num_layers - 1
                "family": None if self.family is None else {
                    "name": self.family.name, "known": self.family.known, "origin": self.family.origin,
                    "path": self.family.path if self.family.known else None},
                "mtp": [dict(lp.to_json(), layout=self.layout_key(lp.layer, True)) for lp in self.mtp]}


def jsonable(obj: Any) -> Any:
    """numpy arrays / scalars -> plain lists / ints, recursively."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


_WALKS: Dict[Tuple[int, str, str], Tuple[Any, patterns.WalkResult]] = {}


def walk(layout: Any, pattern: str, mode: str) -> patterns.WalkResult:
    """Cached :func:`patterns.walk_layout` (a layout is immutable data; the cache keeps a reference
    to it, so its id cannot be reused by another layout while the entry lives)."""
    key = (id(layout), pattern, mode)
    hit = _WALKS.get(key)
    if hit is None or hit[0] is not layout:
        if len(_WALKS) > 4096:
            _WALKS.clear()
        hit = _WALKS[key] = (layout, patterns.walk_layout(layout, pattern, mode))
    return hit[1]
