"""The run model: what the parsers produce from worker logs, and what verify and plot consume.

One :class:`RunLog` per invocation, one :class:`RankLog` per rank, each holding typed events in file
order. The dataclasses here are the contract between ``parsers`` (writers) and ``checks`` /
``plot`` (readers): extend them with new fields or new event classes, never change the meaning of
an existing field.
"""
from __future__ import annotations

import pickle
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union, cast


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

    ``action`` is one of :data:`swapwatch.model.event_lines.ACTIONS`. ``paths`` are dotted, normalised (no
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
    ``partial_line`` (the log ends mid-line; that line is not parsed), ``past_layer_ceiling`` (the
    strategy lines of a file for layer ids past any config's, counted instead of kept:
    ``reader.LAYER_CEILING``; ``count``, ``first_layer``, ``last_layer``, ``ceiling``).
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

    def memory_rows(self) -> List[Tuple[Optional[int], str, int, str, str]]:
        """``(step, metric, bytes, origin, source)`` of each memory event, in file order: what
        ``plot memory`` draws, read from the summary of a packed rank (unpacking every rank of a
        1,024-rank job only for its few memory lines took the plot's parent 0.5 s)."""
        memo = self._summary()
        if memo is not None:
            rows = memo["memory"]
            if rows.__class__ is not bytes:      # a template rank: its rows are in its extras
                return rows()
            return list(pickle.loads(zlib.decompress(rows))) if rows else []
        return _memory_rows(self.events)

    def initial_config(self) -> Dict[str, Any]:
        """section -> dict from the ``initial ... from dict`` lines (last one wins)."""
        memo = self._summary()
        if memo is not None:
            return dict(memo["initial_config"])
        return {e.section: e.value for e in self.events if isinstance(e, InitialConfigEvent)}

    def formative(self) -> Dict[str, Any]:
        """Logged Formative values (first LayerSetting block)."""
        memo = self._summary()
        if memo is not None:
            return dict(memo["formative"])
        out: Dict[str, Any] = {}
        for e in self.events:
            if isinstance(e, FormativeEvent):
                out.setdefault(e.key, e.value)
        return out

    def geometry(self) -> Dict[str, Any]:
        memo = self._summary()
        if memo is not None:
            return dict(memo["geometry"])
        out: Dict[str, Any] = {}
        for e in self.events:
            if isinstance(e, GeometryEvent):
                out.setdefault(e.what, e.value)
        return out

    def kinds(self) -> frozenset:
        """The event kinds this rank has, plus ``kind:origin`` for actions and steps."""
        memo = self._summary()
        if memo is not None:
            return memo["kinds"]
        return _kinds(self.events)

    def first_source(self, kind: str) -> Optional[str]:
        """``file:line`` of this rank's first event of ``kind`` (None when it has none)."""
        memo = self._summary()
        if memo is not None:
            return memo["first"].get(kind)
        return next((e.source for e in self.events if e.kind == kind), None)

    def fatal_after_actions(self) -> Optional[Event]:
        """The first fatal event (traceback, config error, non-zero exit) after the last action
        line, unless a step line comes first (training started: the strategy block was finished)."""
        memo = self._summary()
        if memo is not None:
            return memo["fatal_after_actions"]
        return fatal_after_actions_of(self.events)

    def shared_values(self, section: str) -> Optional[Mapping[str, Any]]:
        """A packed rank's ``initial_config`` or ``formative`` summary as it is, not copied: one object for
        every rank that logged the same lines (its template's), so a check comparing ranks (SW401) reads
        each distinct one once instead of copying 10,000 dicts. Read only. None when not packed."""
        memo = self._summary()
        return memo[section] if memo is not None else None

    def strategy_key(self) -> Optional[tuple]:
        """The content of this rank's action events in order (no ranks, no sources), one shared
        object per distinct strategy: ranks with equal keys logged exactly the same strategy.
        None when the rank is not packed (then nobody needs to fold it)."""
        memo = self._summary()
        return memo["strategy"] if memo is not None else None

    def notices(self, what: str) -> "NoticeTally":
        """How many ``what`` notices this rank has, the first one's source, and their count per
        ``data["prim"]`` (``"?"`` when a notice names none) in first-seen order: what a check that
        counts a notice per rank needs (SW112), read from the summary of a packed rank."""
        memo = self._summary()
        if memo is not None:
            return memo["notices"].get(what, _NO_NOTICES)
        return _notice_tallies(self.events).get(what, _NO_NOTICES)

    def _summary(self) -> Optional[Dict[str, Any]]:
        state = self.__dict__           # asked ~10 times a rank by the checks: one lookup each
        return state.get("_memo") if state.get("_packed") is not None else None

    def __getstate__(self):
        # a packed rank travels without its unpacked events (a cache of the unpacking window);
        # packed as a template (parsers/templates.py), also without its summary's shared part:
        # the receiving process rebuilds it from the template
        state = self.__dict__
        packed = state.get("_packed")
        if packed is not None:
            state = dict(state)
            state["_events"] = None
            if not isinstance(packed, bytes):
                state["_memo"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        packed = state.get("_packed")
        if packed is not None and not isinstance(packed, bytes):
            self.__dict__["_memo"] = packed.memo()


class NoticeTally(NamedTuple):
    """See :meth:`RankLog.notices`."""

    n: int
    first: Optional[str]
    prims: Dict[str, int]


_NO_NOTICES = NoticeTally(0, None, {})


def _notice_tallies(events: Sequence[Event]) -> Dict[str, NoticeTally]:
    return Walk((e.source, (e,)) for e in events if e.kind == "notice").tallies()


class Walk:
    """One pass over events grouped by position, for what a rank's summary holds: a rank's events
    one by one (position: the source), or a template's entries (position: the entry's index,
    :class:`swapwatch.parsers.templates.TemplateInfo`). The one copy of these rules: ``first``
    position and ``kinds`` (with ``action:origin`` / ``step:origin``), ``initial`` (last section
    wins), Formative and geometry values (first wins), the strategy key's content, notice tallies
    ``what -> [count, first position, {prim: count}]``, the position of the last action, and
    whether a MindFormers line is among them (``reader._has_mindformers``)."""

    def __init__(self, groups: Iterable[Tuple[Any, Sequence[Event]]]):
        first: Dict[str, Any] = {}
        initial: Dict[str, Any] = {}
        formative: Dict[str, Any] = {}
        geometry: Dict[str, Any] = {}
        kinds = set()
        strategy = []
        notices: Dict[str, list] = {}
        last_action = None
        mf = False
        for k, events in groups:
            for e in events:
                kind = e.kind
                if kind not in first:
                    first[kind] = k
                    kinds.add(kind)
                if kind == "action":
                    a: ActionEvent = e      # type: ignore[assignment]
                    kinds.add("action:" + str(a.origin))
                    strategy.append((a.layer, a.action, tuple(a.paths), repr(a.value),
                                     tuple((key, repr(v)) for key, v in (a.values or {}).items()), a.origin))
                    last_action = k
                    mf = mf or a.origin == "text"
                elif kind == "step":
                    origin = cast(StepEvent, e).origin      # kinds, not isinstance (above): a kind is one class
                    kinds.add("step:" + str(origin))
                    mf = mf or origin == "text"
                elif kind == "initial_config":
                    initial[e.section] = e.value                   # type: ignore[attr-defined]
                    mf = True
                elif kind == "formative":
                    formative.setdefault(e.key, e.value)           # type: ignore[attr-defined]
                    mf = True
                elif kind == "geometry":
                    geometry.setdefault(e.what, e.value)           # type: ignore[attr-defined]
                    mf = True
                elif kind == "notice":
                    prim = (e.data or {}).get("prim") or "?"       # type: ignore[attr-defined]
                    t = notices.get(e.what)                        # type: ignore[attr-defined]
                    if t is None:
                        notices[e.what] = [1, k, {prim: 1}]        # type: ignore[attr-defined]
                    else:
                        t[0] += 1
                        t[2][prim] = t[2].get(prim, 0) + 1
        self.first = first
        self.kinds = kinds
        self.initial = initial
        self.formative = formative
        self.geometry = geometry
        self.strategy = tuple(strategy)
        self.notices = notices
        self.last_action = last_action
        self.mindformers = mf

    def tallies(self) -> Dict[str, NoticeTally]:
        """The notice tallies with sources for positions (a walk over one rank's events)."""
        return {what: NoticeTally(n, first, prims) for what, (n, first, prims) in self.notices.items()}


#: Notices that mean the process stopped with an error.
FATAL_NOTICES = ("traceback", "config_error")


def is_fatal(e: Event) -> bool:
    """Does this event say the process stopped with an error (a traceback, a config error, a
    non-zero exit code)? The one such test (SW106 and the cut-off detection both ask it)."""
    if e.kind == "notice":                  # each kind is one class (its __post_init__ sets it)
        return cast(NoticeEvent, e).what in FATAL_NOTICES
    return e.kind == "exit" and bool(cast(ExitEvent, e).code)


def _kinds(events: List[Event]) -> frozenset:
    out = {e.kind for e in events}
    out.update(f"{e.kind}:{cast('Union[ActionEvent, StepEvent]', e).origin}" for e in events
               if e.kind in ("action", "step"))
    return frozenset(out)


def fatal_after_actions_of(events: Sequence[Event]) -> Optional[Event]:
    """See :meth:`RankLog.fatal_after_actions` (here for event lists that are not a RankLog)."""
    last_action = max((i for i, e in enumerate(events) if e.kind == "action"), default=-1)
    for e in events[last_action + 1:]:
        if e.kind == "step":
            return None
        if is_fatal(e):
            return e
    return None


# ---------------------------------------------------------------------------------------------
# Packed ranks: bounded memory whatever the number of ranks
# ---------------------------------------------------------------------------------------------
#: How many packed ranks keep their events unpacked at once (most recently used first).
UNPACKED_MAX = 64
_UNPACKED: "OrderedDict[int, RankLog]" = OrderedDict()


def _get_events(self: "RankLog") -> List[Event]:
    packed = self.__dict__.get("_packed")
    if packed is None:
        return self.__dict__["_events"]
    key = id(self)
    cached = self.__dict__.get("_events")
    if cached is not None:
        _UNPACKED.move_to_end(key)
        return cached
    events = pickle.loads(zlib.decompress(packed)) if isinstance(packed, bytes) else packed.events()
    self.__dict__["_events"] = events
    _UNPACKED[key] = self
    while len(_UNPACKED) > UNPACKED_MAX:
        _, old = _UNPACKED.popitem(last=False)
        if old.__dict__.get("_packed") is not None:
            old.__dict__["_events"] = None
    return events


def _set_events(self: "RankLog", events: List[Event]) -> None:
    self.__dict__["_events"] = events
    self.__dict__["_packed"] = None
    _UNPACKED.pop(id(self), None)


RankLog.events = property(_get_events, _set_events, doc=RankLog.__doc__)  # type: ignore[assignment]


_INTERNED: Dict[Any, Any] = {}
_new = object.__new__


def _new_copy(event: Event, rank: Optional[int], source: str) -> Event:
    """A shallow copy of a prototype event with its own rank and source (what the classify cache
    and the template representation hand out; ``copy.copy`` costs several times more)."""
    c = _new(type(event))
    d = c.__dict__
    d.update(event.__dict__)
    d["rank"] = rank
    d["source"] = source
    return c


def _intern(value: Any) -> Any:
    return _INTERNED.setdefault(value, value)


def _summarise(events: List[Event]) -> Dict[str, Any]:
    """What :func:`pack` keeps unpacked beside a rank's events (see there), in one pass over them
    (:class:`Walk`): the same values :class:`RankLog`'s methods compute from unpacked events."""
    w = Walk((e.source, (e,)) for e in events)
    return {"initial_config": w.initial, "formative": w.formative, "geometry": w.geometry,
            "kinds": _intern(frozenset(w.kinds)), "first": w.first,
            "fatal_after_actions": fatal_after_actions_of(events), "notices": w.tallies(),
            "strategy": _intern(w.strategy), "memory": _pack_rows(_memory_rows(events))}


def _memory_rows(events: Sequence[Event]) -> List[Tuple[Optional[int], str, int, str, str]]:
    return [(e.step, e.metric, e.bytes, e.origin, e.source) for e in events if isinstance(e, MemoryEvent)]


def _pack_rows(rows: List[tuple]) -> bytes:
    """A packed rank's memory rows, compressed on their own (~0.2 KB a rank instead of ~2 KB of
    tuples and source strings: 18 MB more peak RSS over 10,000 ranks otherwise); empty: b''."""
    return zlib.compress(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL), 1) if rows else b""


def pack(rank_log: "RankLog") -> None:
    """Keep ``rank_log``'s events compressed (a few KB instead of ~0.5 KB per event) and unpack
    them on access; at most :data:`UNPACKED_MAX` packed ranks are unpacked at a time. What the
    checks ask of every rank (kinds present, ``initial``/Formative/geometry values, the first source
    of each kind, a fatal event after the strategy block, the memory figures ``plot memory``
    draws: a few a rank) is kept unpacked beside it, so a check
    that visits every rank does not unpack every rank.

    Why: a 10,000-rank job holds ~1.2 million events; as objects that is gigabytes, packed it is
    tens of MB, and the checks visit ranks one after the other, so a small window of unpacked ranks
    serves them. The events read back are equal to the ones packed (same classes, same fields).
    A packed rank's list must not be changed in place (the change would be lost when the rank is
    packed away again): assign a new list instead, which unpacks the rank for good.
    """
    events = rank_log.__dict__.get("_events")
    if events is None:
        return
    rank_log.__dict__["_memo"] = _summarise(events)
    rank_log.__dict__["_packed"] = zlib.compress(pickle.dumps(events, protocol=pickle.HIGHEST_PROTOCOL), 1)
    rank_log.__dict__["_events"] = None
    _UNPACKED.pop(id(rank_log), None)


def share(rank_log: "RankLog") -> None:
    """Let a packed rank that came from another process share its summary's strategy and kinds
    with equal ranks here (one object per distinct strategy, not one per batch of ranks)."""
    memo = rank_log.__dict__.get("_memo")
    if memo is not None and isinstance(rank_log.__dict__.get("_packed"), bytes):   # templates: shared already
        memo["strategy"] = _intern(memo["strategy"])
        memo["kinds"] = _intern(memo["kinds"])


def unpacked(rank_log: "RankLog") -> List[Event]:
    """The events of a rank, packed or not, as a list of its own."""
    return list(rank_log.events)


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
