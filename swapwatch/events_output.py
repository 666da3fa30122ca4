"""``swapwatch events`` output: which events to keep (``--kind``, ``--rank``) and their CSV columns.

The CSV has one column per event field, fixed before the first row from the event dataclasses
(:func:`swapwatch.parsers.model.event_kinds`), so the file streams and a spreadsheet can filter on
``layer`` or ``loss`` directly. A field that holds a list is joined with ``;``; a mapping (a
notice's ``data``, an op swap's ``values``) stays JSON in its own column.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, List, Optional

from .errors import InputError

FIRST = ("kind", "rank", "source")


def _kinds() -> Dict[str, List[str]]:
    from .parsers.model import event_kinds

    return event_kinds()


def event_filter(kinds: Iterable[str], ranks: Optional[str]) -> Callable[[Any], bool]:
    """A predicate for ``--kind`` (repeatable, comma lists too) and ``--rank`` (``0-7,12``)."""
    known = _kinds()
    wanted = {k.strip().lower() for raw in kinds or () for k in str(raw).split(",") if k.strip()}
    wanted = {k[:-1] if k not in known and k.endswith("s") and k[:-1] in known else k for k in wanted}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise InputError(f"--kind {unknown[0]}: unknown event kind; known: {', '.join(sorted(known))}")
    rank_set = set(_parse_ranks(ranks)) if ranks is not None else None

    def keep(event: Any) -> bool:
        if wanted and event.kind not in wanted:
            return False
        return rank_set is None or event.rank in rank_set

    return keep


def _parse_ranks(text: str) -> List[int]:
    from .plot.commands import parse_ranks        # the one parser of "0,1,4-7"

    try:
        return parse_ranks(text) or []
    except InputError as exc:
        raise InputError(exc.message.replace("--ranks", "--rank", 1)) from None


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
