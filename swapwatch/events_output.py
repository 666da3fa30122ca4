"""``swapwatch events`` output: which events to keep (``--kind``, ``--rank``) and their CSV columns.

The CSV has one column per event field, fixed before the first row from the event dataclasses
(:func:`swapwatch.parsers.model.event_kinds`), so the file streams and a spreadsheet can filter on
``layer`` or ``loss`` directly. A field that holds a list is joined with ``;``; a mapping (a
notice's ``data``, an op swap's ``values``) stays JSON in its own column.
"""
from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .errors import InputError
from .text import RankSet, parse_ranks

FIRST = ("kind", "rank", "source")


def _kinds() -> Dict[str, List[str]]:
    from .parsers.model import event_kinds

    return event_kinds()


def event_filter(kinds: Iterable[str], ranks: Optional[str]) -> "EventSelect":
    """A predicate for ``--kind`` (repeatable, comma lists too) and ``--rank`` (``0-7,12``)."""
    known = _kinds()
    wanted = {k.strip().lower() for raw in kinds or () for k in str(raw).split(",") if k.strip()}
    wanted = {k[:-1] if k not in known and k.endswith("s") and k[:-1] in known else k for k in wanted}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise InputError(f"--kind {unknown[0]}: unknown event kind; known: {', '.join(sorted(known))}")
    return EventSelect(frozenset(wanted), parse_ranks(ranks, "--rank"))


class EventSelect:
    """``--kind``/``--rank`` as data, not a closure: the scanning workers get it with their files
    and write the JSONL of a whole rank file themselves (:meth:`text`), so the parent process only
    copies text out instead of unpickling and encoding every event on its own (docs/performance.md)."""

    def __init__(self, kinds: frozenset, ranks: Optional[RankSet]):
        self.kinds = kinds
        self.ranks = ranks

    def __call__(self, event: Any) -> bool:
        if self.kinds and event.kind not in self.kinds:
            return False
        return self.ranks is None or event.rank in self.ranks

    def text(self, events: Iterable[Any]) -> str:
        """The JSONL lines of the selected ``events``, each ending in a line feed."""
        lines = [jsonl_line(e) for e in events if self(e)]
        return "\n".join(lines) + "\n" if lines else ""

    def text_template(self, entries: Sequence[Any], lines: Sequence[int], positions: Sequence[int],
                      extras: List[Any], rank: Optional[int], display: str) -> str:
        """:meth:`text` of a file scanned as a template (``parsers/templates.py``): the events of
        cache ``entries`` (prototypes, on ``lines``, of ``rank``) and the ``extras`` (final events,
        each before the entry at its position), in file order. A prototype's JSON after ``rank``
        and ``source`` is encoded once per process (:func:`jsonl_tails`), so a line costs a string
        join, not a dict and an encoding (docs/performance.md)."""
        out: List[str] = []
        kinds = self.kinds
        mine = self.ranks is None or rank in self.ranks
        head = '{"rank":' + _ENCODE(rank) + ',"source":' + _ENCODE(display)[:-1] + ":"
        x = 0
        nx = len(extras)
        for k, entry in enumerate(entries):
            while x < nx and positions[x] <= k:
                if self(extras[x]):
                    out.append(jsonl_line(extras[x]))
                x += 1
            if not mine:
                continue
            tails = entry.tails
            if tails is None:
                tails = entry.tails = jsonl_tails(entry.events)
            ln = lines[k]
            for e, tail in zip(entry.events, tails):
                if not kinds or e.kind in kinds:
                    out.append(f'{head}{ln}",{tail}')
        for e in extras[x:]:
            if self(e):
                out.append(jsonl_line(e))
        return "\n".join(out) + "\n" if out else ""


def csv_columns(kinds: Iterable[str] = ()) -> List[str]:
    """``kind, rank, source`` then every field of the selected kinds (all kinds by default)."""
    known = _kinds()
    wanted = {k.strip().lower() for raw in kinds or () for k in str(raw).split(",") if k.strip()}
    cols = list(FIRST)
    for kind in sorted(known):
        if wanted and kind not in wanted and f"{kind}s" not in wanted:
            continue
        cols.extend(c for c in known[kind] if c not in cols)
    return cols


def csv_row(event: Dict[str, Any], columns: List[str]) -> List[str]:
    return [_cell(event.get(c)) for c in columns]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ";".join(_cell(v) if not isinstance(v, (dict, list, tuple)) else _json(v) for v in value)
    if isinstance(value, dict):
        return _json(value)
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


_FIELDS: Dict[type, Tuple[str, ...]] = {}
#: one encoder for every line (``json.dumps`` with arguments builds a new one per call)
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def event_dict(event: Any) -> Dict[str, Any]:
    """What :meth:`swapwatch.parsers.model.Event.to_json` returns, field for field and in the same
    order, without ``dataclasses.asdict``'s deep copy: event fields hold plain values (numbers,
    strings, lists and dicts parsed from log text), and at 10^5 events the copy cost more than the
    JSON encoding (docs/performance.md)."""
    names = _FIELDS.get(type(event))
    if names is None:
        names = _FIELDS[type(event)] = tuple(f.name for f in fields(event))
    return {n: getattr(event, n) for n in names}


def jsonl_line(event: Any) -> str:
    """One ``swapwatch events`` JSONL line (without the line feed)."""
    return _ENCODE(event_dict(event))


def jsonl_tails(events: Iterable[Any]) -> List[str]:
    """Each event's :func:`jsonl_line` after ``{"rank":..,"source":..,`` (the first two fields of
    every event, see :func:`event_dict`): what is the same on every rank for a shared prototype."""
    out = []
    for e in events:
        d = event_dict(e)
        del d["rank"], d["source"]
        out.append(_ENCODE(d)[1:])
    return out
