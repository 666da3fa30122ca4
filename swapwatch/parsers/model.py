"""The run model: what the parsers produce from worker logs, and what verify and plot consume.

One :class:`RunLog` per invocation, one :class:`RankLog` per rank, each holding typed events in file
order. The dataclasses here are the contract between ``parsers`` (writers) and ``checks`` /
``plot`` (readers): extend them with new fields or new event classes, never change the meaning of
an existing field.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple


@dataclass
class Event:
    """Base of every parsed event. ``source`` is ``file:line`` (1-based) of the line it came from."""

    rank: Optional[int]
    source: str
    kind: str = field(default="", init=False)

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind
        return d


@dataclass
class GeometryEvent(Event):
    """``num_layers per stage`` / ``Accumulated ...`` / ``Pipeline id list ...`` / ``Interleave id list``.

    ``what`` is ``layer_list`` | ``layer_accu`` | ``pp_ids`` | ``interleave_ids``.
    """

    what: str = ""
    value: Any = None

    def __post_init__(self):
        self.kind = "geometry"


@dataclass
class FormativeEvent(Event):
    """``Formative <key>: <repr>``, the repr parsed back into Python values (numpy reprs rewritten).

    ``key`` is as logged: ``layer_recompute``, ``select_recompute``, ``select_comm_recompute``,
    ``select_recompute_exclude``, ``select_comm_recompute_exclude``, ``layer swap``, ``op swap``.
    """

    key: str = ""
    value: Any = None

    def __post_init__(self):
        self.kind = "formative"


@dataclass
class InitialConfigEvent(Event):
    """``initial recompute_config|swap_config|parallel_config from dict: {...}`` parsed."""

    section: str = ""
    value: Any = None

    def __post_init__(self):
        self.kind = "initial_config"


@dataclass
class ActionEvent(Event):
    """One strategy action on one layer: a ``Set ...`` text line, or a SWAPWATCH ``apply`` event.

    ``action`` is one of :data:`swapwatch.events.ACTIONS`. ``paths`` are dotted, normalised (no
    leading dot/space). ``values`` maps path -> prefetch for ``op_swap``; ``value`` is the prefetch
    for ``layer_swap``. ``origin`` is ``"text"`` or ``"swapwatch"`` (authoritative where present).
    ``swap_mode`` tells which wording the line used (``None`` when it cannot tell): non-swap lines
    say ``on``/``exclude``, swap-mode lines say neither.
    """

    layer: int = -1
    action: str = ""
    paths: List[str] = field(default_factory=list)
    value: Any = None
    values: Dict[str, Any] = field(default_factory=dict)
    pattern: Optional[str] = None
    origin: str = "text"
    swap_mode: Optional[bool] = None

    def __post_init__(self):
        self.kind = "action"

    def items(self) -> List[Tuple[Optional[str], Any]]:
        """What the line applied, as (op path, value): path None for the whole layer (full
        recompute: True, layer swap: its prefetch); op swap: each path with its own prefetch (one
        ``Set op_swap`` line can carry several); select/comm/exclude: each path with True."""
        if self.action == "full_recompute":
            return [(None, True)]
        if self.action == "layer_swap":
            return [(None, self.value)]
        if self.action == "op_swap":
            vals = dict(self.values or {})
            return [(p, vals.get(p, self.value)) for p in (self.paths or list(vals))]
        return [(p, True) for p in self.paths]


@dataclass
class NoticeEvent(Event):
    """Lines that explain or warn about the strategy without being an action.

    ``what``: ``pattern_removed`` (exclude-vs-select), ``cell_not_op`` ("expected to be operation but
    got cell"), ``swap_conflict`` (the recompute-overrides-swap WARNINGs), ``offload_outside_lazy_inline``,
    ``config_error`` (MindFormers check errors), ``traceback``, ``empty_config``, ``regex_timeout``,
    ``pp_interleave_reset``, ``oom`` (Ascend "Out of Memory!!!"), ``malformed_swapwatch``,
    ``rank_guessed`` (no rank evidence in the file), ``no_mindformers_lines`` (STDOUT_DEVICES),
    ``partial_line`` (the log ends mid-line; that line is not parsed).
    ``data`` holds the parsed fields (``op``, ``layer``, ``pattern``, ``path``, ``text``...).
    """

    what: str = ""
    data: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.kind = "notice"


@dataclass
class StepEvent(Event):
    """One training step (MindFormers ``{ Epoch:[...], step:[...], loss: ...`` line or SWAPWATCH ``step``)."""

    step: int = 0
    epoch: Optional[int] = None
    epochs: Optional[int] = None
    steps: Optional[int] = None
    loss: Optional[float] = None
    ms: Optional[float] = None
    lr: Optional[float] = None
    overflow: Optional[bool] = None
    loss_scale: Optional[float] = None
    global_norm: Optional[float] = None
    throughput: Optional[float] = None
    origin: str = "text"

    def __post_init__(self):
        self.kind = "step"


@dataclass
class MemoryEvent(Event):
    """A memory figure in bytes.

    ``metric`` names what it is: SWAPWATCH per-step readings (``max_memory_allocated``,
    ``memory_allocated``, ``pool_peak``, ``rss``...), Ascend statistics (``device_size``,
    ``used_size``, ``used_peak``, ``actual_peak``, ``static``, ``dynamic``, ``graph_dynamic``) or the
    CPU pool lines (``pool_peak``, ``pool_actual_peak``, ``pool_total``). ``step`` is None for
    whole-run figures printed at exit.
    """

    metric: str = ""
    bytes: int = 0
    step: Optional[int] = None
    origin: str = "text"

    def __post_init__(self):
        self.kind = "memory"


@dataclass
class ExitEvent(Event):
    """A process exit code: msrun's ``Worker process N exit with exception. Error code: 7.``, or a
    SWAPWATCH ``run`` end event. ``pid`` is msrun's worker pid when that is what the line names."""

    code: int = 0
    pid: Optional[int] = None

    def __post_init__(self):
        self.kind = "exit"


@dataclass
class SwapwatchEvent(Event):
    """A SWAPWATCH ``plan`` or ``run`` event kept as its JSON payload."""

    payload: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.kind = "swapwatch"


@dataclass
class RankLog:
    """Everything parsed for one rank, in file order, with the completeness verdict.

    ``complete``: the strategy block covers every layer the geometry announces. ``truncated``: the
    file ends in the middle of it (so missing layers are SW106, not SW101). ``layer_settings``
    counts LayerSetting instances (MTP models log a second block).
    """

    rank: int
    files: List[str] = field(default_factory=list)
    events: List[Event] = field(default_factory=list)
    complete: bool = False
    truncated: bool = False
    layer_settings: int = 0

    def of(self, kind: str) -> Iterator[Event]:
        return (e for e in self.events if e.kind == kind)

    @property
    def actions(self) -> List[ActionEvent]:
        return [e for e in self.events if isinstance(e, ActionEvent)]

    @property
    def steps(self) -> List[StepEvent]:
        return [e for e in self.events if isinstance(e, StepEvent)]

    @property
    def memory(self) -> List[MemoryEvent]:
        return [e for e in self.events if isinstance(e, MemoryEvent)]

    def initial_config(self) -> Dict[str, Any]:
        """section -> dict from the ``initial ... from dict`` lines (last one wins)."""
        return {e.section: e.value for e in self.events if isinstance(e, InitialConfigEvent)}

    def formative(self) -> Dict[str, Any]:
        """Logged Formative values (first LayerSetting block)."""
        out: Dict[str, Any] = {}
        for e in self.events:
            if isinstance(e, FormativeEvent):
                out.setdefault(e.key, e.value)
        return out

    def geometry(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for e in self.events:
            if isinstance(e, GeometryEvent):
                out.setdefault(e.what, e.value)
        return out


@dataclass
class RunLog:
    """All ranks of one run (possibly several nodes' logs), plus what is known about the launch."""

    ranks: Dict[int, RankLog] = field(default_factory=dict)
    expected_ranks: Optional[List[int]] = None     # from msrun worker count / run.json, when known
    run_info: Dict[str, Any] = field(default_factory=dict)   # run.json of a swapwatch run dir
    label: str = ""                                 # a name for plots (run dir name)
    #: Events not attributable to one rank (scheduler.log: tracebacks, exits), in file order.
    run_events: List[Event] = field(default_factory=list)

    def to_frame(self, kind: str):
        """A pandas DataFrame of one event kind across ranks (columns = the event's fields).

        ``kind`` is an event kind (``step``, ``memory``, ``action``, ...) or its plural
        (``steps``, ``actions``): a notebook user types either. A kind the logs do not have gives an
        empty frame that still has the kind's columns; an unknown kind is a ValueError that lists
        the known ones (an empty frame would hide the typo).
        """
        import pandas as pd

        kinds = event_kinds()
        name = kind if kind in kinds else kind[:-1] if kind.endswith("s") and kind[:-1] in kinds else None
        if name is None:
            raise ValueError(f"unknown event kind {kind!r}; known: {', '.join(sorted(kinds))}")
        rows = [e.to_json() for r in sorted(self.ranks) for e in self.ranks[r].events if e.kind == name]
        return pd.DataFrame(rows, columns=None if rows else kinds[name])


def event_kinds() -> Dict[str, List[str]]:
    """kind -> the columns of its frame, from the Event subclasses (one place: the dataclasses)."""
    from dataclasses import fields

    out: Dict[str, List[str]] = {}
    for cls in Event.__subclasses__():
        name = cls(rank=None, source="").kind       # every event field has a default
        out[name] = [f.name for f in fields(cls) if f.name != "kind"] + ["kind"]
    return out
