"""A packed rank as a shared template plus line numbers: the representation of 1,000+ rank jobs.

Why: every rank of a job logs the same strategy block (~125 of a 100 KB rank log's ~140 events),
and the classify cache (:func:`swapwatch.parsers.classify.classify_proto`) already parses each of
those lines once per process. Copying the prototypes per rank, summarising, pickling, compressing
and sending them to the parent, and the parent interning each rank's strategy key, cost more than
finding the lines. So a rank file is kept as

* its **template**: the ordered cache entries of its remembered lines (one shared object per
  distinct sequence, interned per process, so ranks with the same strategy block share it), with
  everything the checks ask of those events computed once per template (:class:`TemplateInfo`);
* the **line numbers** of those lines (an ``array``), and
* the **extras**: the events of the lines that are not remembered (memory and step values,
  tracebacks...), each with its position among the template's lines, pickled.

:class:`Templated` unpacks to exactly the events the object path makes (same classes, fields,
order, ``file:line`` sources and rank). A template travels to the parent once per worker process
(then by id, see :meth:`Template.__reduce__`). Memory stays bounded: a sequence of lines becomes
a template the second time a process sees it (a job whose every rank differs makes none), and a
process makes at most :data:`TEMPLATE_MAX` templates per read; other ranks take the object path.
"""
from __future__ import annotations

import os
import pickle
import random
from array import array
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .classify import Entry
from .model import Event, NoticeTally, Walk, _intern, _memory_rows, _new_copy, _notice_tallies, is_fatal

#: Templates one process makes at most per read (a job whose every rank differs falls back past them).
TEMPLATE_MAX = 64
#: Sequences seen once that a process remembers (by their entries' serials) to make a template of
#: the next time: when full, it starts again (a few more ranks take the object path).
SEEN_MAX = 256
#: Extra kinds a packed rank may have for the template path of read_logs (the others, such as
#: SWAPWATCH actions that overrule text lines, take the object path; see :func:`fits`).
EXTRA_KINDS = ("memory", "exit", "notice")

_TEMPLATES: Dict[Tuple[int, ...], "Template"] = {}
_SEEN: set = set()
_SENT: set = set()
#: the templates this process received (or made) in the current read, by id
_ARRIVED: Dict[tuple, "Template"] = {}
_NONCE = [random.getrandbits(62)]
_SERIAL = [0]
#: True while a read is under way (and so in the pool workers it forks): a template is pickled in
#: full only the first time; otherwise always (a RunLog a user pickles carries its templates).
_BY_ID = [False]


def reset(reading: bool = False) -> None:
    """Start (``reading``) or end a read: no templates made or received yet (the ranks of earlier
    reads keep theirs). Bounds what a process holds to one read's templates: at most
    :data:`TEMPLATE_MAX` per worker."""
    _TEMPLATES.clear()
    _SEEN.clear()
    _ARRIVED.clear()
    _BY_ID[0] = reading


def _after_fork() -> None:
    """A forked worker is a new sender: its own ids (never its parent's), nothing made or sent yet."""
    _NONCE[0] = random.getrandbits(62)
    _SENT.clear()
    reset(_BY_ID[0])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Template:
    """The ordered cache entries of one rank file's remembered lines (see the module docstring)."""

    __slots__ = ("tid", "entries", "_info", "blocks")

    def __init__(self, tid: tuple, entries: Sequence[Entry]):
        self.tid = tid
        self.entries = tuple(entries)
        self._info: Optional[TemplateInfo] = None
        self.blocks: Any = None         # reader._template_blocks (completeness), made on first use

    @property
    def info(self) -> "TemplateInfo":
        info = self._info
        if info is None:
            info = self._info = TemplateInfo(self.entries)
        return info

    def __reduce__(self):
        # the parent reads a worker's results in the order the worker sent them, so after the
        # first full copy the id is enough (ids carry the process's nonce: unique across workers)
        if _BY_ID[0]:
            if self.tid in _SENT:
                return _known, (self.tid,)
            _SENT.add(self.tid)
        return _arrived, (self.tid, [e.events for e in self.entries])

    def __copy__(self) -> "Template":
        return self             # shared, never changed

    def __deepcopy__(self, memo: Any) -> "Template":
        return self


def _arrived(tid: tuple, events: List[List[Event]]) -> Template:
    t = _ARRIVED[tid] = Template(tid, [Entry(i, evs) for i, evs in enumerate(events)])
    return t


def _known(tid: tuple) -> Template:
    return _ARRIVED[tid]


def template_of(entries: List[Entry]) -> Optional[Template]:
    """The process's template for this sequence of entries (made the second time it is seen);
    None the first time, and when :data:`TEMPLATE_MAX` templates exist and this would be another."""
    key = tuple([e.serial for e in entries])
    t = _TEMPLATES.get(key)
    if t is None:
        if key not in _SEEN:
            if len(_SEEN) >= SEEN_MAX:
                _SEEN.clear()
            _SEEN.add(key)
            return None
        if len(_TEMPLATES) >= TEMPLATE_MAX:
            return None
        _SERIAL[0] += 1
        t = _TEMPLATES[key] = Template((_NONCE[0], _SERIAL[0]), entries)
    return t


class TemplateInfo:
    """What :func:`swapwatch.parsers.model._summarise` derives from a template's events, once per
    template; positions are indexes into the template's entries (a rank maps them to its lines)."""

    def __init__(self, entries: Sequence[Entry]):
        w = Walk((k, entry.events) for k, entry in enumerate(entries))
        last_action = -1 if w.last_action is None else w.last_action
        #: the first step or fatal event after the last action: (entry index, event) or None
        self.after: Optional[Tuple[int, Event]] = None
        for k in range(max(last_action, 0), len(entries)):
            evs = entries[k].events
            if k == last_action:      # only the events after the action itself in its own line
                i = max(i for i, e in enumerate(evs) if e.kind == "action")
                evs = evs[i + 1:]
            hit = next((e for e in evs if e.kind == "step" or is_fatal(e)), None)
            if hit is not None:
                self.after = (k, hit)
                break
        self.last_action = last_action
        self.first: Dict[str, int] = w.first
        self.kinds = frozenset(w.kinds)
        self.notices = w.notices
        self.mindformers = w.mindformers
        self.shared = {"initial_config": w.initial, "formative": w.formative, "geometry": w.geometry,
                       "strategy": _intern(w.strategy)}


def fits(extras: Sequence[Event], info: TemplateInfo) -> bool:
    """Can :func:`summary` combine these extras with the template's part? Extras of other kinds
    (SWAPWATCH actions and steps, whose authority drops text lines; MindFormers lines of logs
    without the record prefix) or notices the template tallies too take the object path."""
    for e in extras:
        kind = e.kind
        if kind == "step":
            if getattr(e, "origin", "text") != "text":
                return False
        elif kind not in EXTRA_KINDS or (kind == "notice" and e.what in info.notices):  # type: ignore
            return False
    return True


class Templated:
    """A packed rank in the template representation (``RankLog._packed``, see :func:`pack`)."""

    __slots__ = ("template", "lines", "extras", "display", "rank", "own")

    def __init__(self, template: Template, lines: array, extras: bytes, display: str, rank: int,
                 own: Dict[str, Any]):
        self.template = template
        self.lines = lines          # each template entry's line number (array: 4 or 8 bytes each)
        self.extras = extras        # pickle of (positions, events), b"" when none (pack_extras)
        self.display = display
        self.rank = rank
        self.own = own              # the summary's per-rank part (see :func:`summary`)

    def __getstate__(self):
        return (self.template, self.lines, self.extras, self.display, self.rank, self.own)

    def __setstate__(self, state):
        self.template, self.lines, self.extras, self.display, self.rank, self.own = state
        self.own["kinds"] = _intern(self.own["kinds"])

    def memo(self) -> Dict[str, Any]:
        """The summary :class:`swapwatch.parsers.model.RankLog` answers from (its memory rows are
        read from the extras when asked: they are the extras' memory events)."""
        return {**self.template.info.shared, **self.own, "memory": self.memory_rows}

    def memory_rows(self) -> List[Tuple[Optional[int], str, int, str, str]]:
        return _memory_rows(_extras(self.extras)[1])

    def events(self) -> List[Event]:
        positions, extras = _extras(self.extras)
        return list(merged(self.template.entries, self.lines, positions, extras, self.rank, self.display + ":"))


def _extras(blob: bytes) -> Tuple[Sequence[int], List[Event]]:
    if not blob:
        return (), []
    return pickle.loads(blob)


def merged(entries: Sequence[Entry], lines: Sequence[int], positions: Sequence[int], extras: List[Event],
           rank: Optional[int], prefix: str):
    """The rank's events in file order: copies of the entries' prototypes with ``rank`` and source
    ``prefix + line``, the extras (as they are) before the entry at their position."""
    x = 0
    nx = len(extras)
    for k, entry in enumerate(entries):
        while x < nx and positions[x] <= k:
            yield extras[x]
            x += 1
        src = f"{prefix}{lines[k]}"
        for e in entry.events:
            yield _new_copy(e, rank, src)
    while x < nx:
        yield extras[x]
        x += 1


def summary(info: TemplateInfo, lines: Sequence[int], positions: Sequence[int], extras: List[Event],
            rank: int, prefix: str) -> Dict[str, Any]:
    """The per-rank part of a packed rank's summary: the template's part (``info``) with this
    rank's line numbers, combined with its extras (which :func:`fits`): the values
    :func:`swapwatch.parsers.model._summarise` computes from the whole event list."""
    first = {kind: f"{prefix}{lines[k]}" for kind, k in info.first.items()}
    kinds = set(info.kinds)
    seen = set()                    # kinds whose first extra was looked at
    for x, e in enumerate(extras):
        kind = e.kind
        kinds.add(kind)
        if kind == "step":
            kinds.add("step:text")
        if kind not in seen:
            seen.add(kind)
            k = info.first.get(kind)
            if k is None or positions[x] <= k:
                first[kind] = e.source
    notices = {what: NoticeTally(n, f"{prefix}{lines[k]}", prims) for what, (n, k, prims) in info.notices.items()}
    notices.update(_notice_tallies(extras))
    # the first step or fatal event after the last action: the template's or an extra's
    fatal = None
    found = info.after
    for x, e in enumerate(extras):
        p = positions[x]
        if p <= info.last_action:
            continue
        if found is not None and p > found[0]:
            break
        if e.kind == "step":
            found = None
            fatal = None
            break
        if is_fatal(e):
            found = None
            fatal = e
            break
    if found is not None:
        k, e = found
        fatal = None if e.kind == "step" else _new_copy(e, rank, f"{prefix}{lines[k]}")
    return {"kinds": _intern(frozenset(kinds)), "first": first, "fatal_after_actions": fatal,
            "notices": notices}


def pack_extras(positions: Sequence[int], extras: List[Event]) -> bytes:
    """A rank's extras with their positions, pickled (~1.3 KB for a 100 KB rank log's 11; zlib
    would halve that for 30 us a rank, more than the rest of packing it)."""
    if not extras:
        return b""
    return pickle.dumps((list(positions), extras), protocol=pickle.HIGHEST_PROTOCOL)


def has_mindformers(info: TemplateInfo, extras: Sequence[Event]) -> bool:
    """``reader._has_mindformers`` of the merged events (extras that :func:`fits`: only text steps count)."""
    return info.mindformers or any(e.kind == "step" for e in extras)
