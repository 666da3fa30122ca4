"""The report layer's text primitives: how swapwatch writes bytes, id sets, severities and tables.

Every command's text output goes through these (issue 23.4): one byte formatter
(:func:`fmt_bytes`), one way to write and read a set of layer or rank ids (:func:`ranges` /
:func:`parse_ranks`: ``0-3, 5``), one severity order (:data:`SEVERITY_ORDER`) and one plain-text
table writer (:func:`write_table`), which escapes control characters so that a value copied from
a user's log (``\\x1b[2J``, a bare ``\\r``) cannot rewrite the terminal it is printed on.

This module sits below the commands, the renderers and the rules (``checks/*`` import
:func:`ranges` from here, never from a renderer); it imports nothing of swapwatch but
:mod:`swapwatch.errors` (the one-line bad-input error of :func:`parse_ranks`).
tests/test_text.py holds the architecture assertion.
"""
from __future__ import annotations

import bisect
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .errors import UNSHOWN, InputError, escaped_char

MIB = 1 << 20
GIB = 1 << 30
#: MindSpore prints memory in ``M`` meaning 2**20 bytes, so the units are MiB / GiB (docs/units.md).
MIB_UNIT: Tuple[str, float] = ("MiB", MIB)
GIB_UNIT: Tuple[str, float] = ("GiB", GIB)

#: The one severity order: errors first. Findings sort by it (verify, explain); an unknown
#: severity sorts last (:func:`severity_rank`).
SEVERITIES: Tuple[str, ...] = ("error", "warning", "info")
SEVERITY_ORDER: Dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


def severity_rank(severity: str) -> int:
    """Where ``severity`` sorts: 0 for error, 1 warning, 2 info, after those anything else."""
    return SEVERITY_ORDER.get(severity, len(SEVERITIES))


# ---------------------------------------------------------------------------------------------
# Bytes
# ---------------------------------------------------------------------------------------------

def unit_for(max_bytes: float) -> Tuple[str, float]:
    """The short style's unit: MiB, GiB once values pass 10 GiB (where MiB numbers get long)."""
    return GIB_UNIT if max_bytes >= 10 * GIB else MIB_UNIT


Digits = Union[None, int, Tuple[int, int]]


def fmt_bytes(n: Optional[float], unit: Optional[Tuple[str, float]] = None, *, digits: Digits = None,
              bare: bool = False, missing: str = "n/a") -> str:
    """Bytes as a person reads them, in one of two styles.

    - ``digits=None`` (the figures' short style): ``183 MiB``, ``47.7 GiB``; whole numbers and
      numbers from 100 on without decimals; the unit from :func:`unit_for` unless given.
    - ``digits`` an int, or a ``(MiB digits, GiB digits)`` pair (the tables' style): a fixed
      number of decimals, GiB from 1 GiB on (in magnitude) unless ``unit`` is given:
      ``estimate`` / ``plan`` write ``(1, 2)`` (``44.2 MiB``, ``7.97 GiB``), ``diff`` ``1``.

    ``bare`` leaves the unit name out (a column whose header names it); None or NaN (a figure the
    log did not print) is ``missing``."""
    if n is None or n != n:
        return missing
    if unit is None:
        unit = unit_for(n) if digits is None else (GIB_UNIT if abs(n) >= GIB else MIB_UNIT)
    name, div = unit
    v = n / div
    if digits is None:
        num = f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.1f}"
    else:
        d = digits if isinstance(digits, int) else digits[1 if div >= GIB else 0]
        num = f"{v:.{d}f}"
    return num if bare else f"{num} {name}"


def fmt_size(n: float) -> str:
    """The tables' style (estimate, plan, tune, the estimate plot's bar labels): ``44.2 MiB``,
    ``7.97 GiB``, as MindSpore reports pool sizes."""
    return fmt_bytes(n, digits=(1, 2))


# ---------------------------------------------------------------------------------------------
# Id sets
# ---------------------------------------------------------------------------------------------

def ranges(values: Union[Iterable[int], "RankSet"], limit: Optional[int] = None, sep: str = ", ") -> str:
    """``0-3, 5, 7-9``: the one way swapwatch writes a set of layer or rank ids (sorted, each id
    once; ``sep`` between runs, ``","`` in the compact memory tables); with ``limit``, at most that
    many runs and then ``… (N in all)``. :func:`parse_ranks` reads it back."""
    if isinstance(values, RankSet):          # its spans are the runs already (never expanded)
        return _join_runs([str(a) if a == b else f"{a}-{b}" for a, b in values.spans], values.count(), limit, sep)
    vals = sorted(set(values))
    runs: List[str] = []
    start = None
    for i, v in enumerate(vals):
        start = v if start is None else start
        if i + 1 == len(vals) or vals[i + 1] != v + 1:
            runs.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return _join_runs(runs, len(vals), limit, sep)


def _join_runs(runs: List[str], count: int, limit: Optional[int], sep: str) -> str:
    if limit is not None and len(runs) > limit:
        head = runs[:limit - 1]
        return f"{sep.join(head)}{sep}…{sep}{runs[-1]} ({count} in all)"
    return sep.join(runs)


class RankSet:
    """A set of rank ids kept as its ranges: sorted, disjoint, non-adjacent ``(first, last)``
    pairs. Why not a list: ``--rank 0-100000000000`` is 17 bytes and would be 10**11 ints (the
    2026-11-28 review: 5 GB, then exit 3); as ranges it costs what its text costs, and a rank is
    looked up by bisection. It has no ``__iter__`` on purpose: nothing may expand it."""

    __slots__ = ("spans", "_firsts")

    def __init__(self, spans: Iterable[Tuple[int, int]]) -> None:
        merged: List[Tuple[int, int]] = []
        for a, b in sorted(spans):
            if merged and a <= merged[-1][1] + 1:
                if b > merged[-1][1]:
                    merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self.spans: Tuple[Tuple[int, int], ...] = tuple(merged)
        self._firsts = [a for a, _ in merged]

    def __contains__(self, rank: object) -> bool:
        if not isinstance(rank, int):
            return False
        i = bisect.bisect_right(self._firsts, rank) - 1
        return i >= 0 and rank <= self.spans[i][1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RankSet) and other.spans == self.spans

    def __hash__(self) -> int:
        return hash(self.spans)

    def __getstate__(self) -> Tuple[Tuple[int, int], ...]:
        return self.spans

    def __setstate__(self, spans: Tuple[Tuple[int, int], ...]) -> None:
        self.spans = spans
        self._firsts = [a for a, _ in spans]

    def count(self) -> int:
        """How many ranks (an int, however large: never a list)."""
        return sum(b - a + 1 for a, b in self.spans)

    def __str__(self) -> str:
        """``0-3, 5``: as :func:`ranges` writes the same ids."""
        return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in self.spans)

    def __repr__(self) -> str:
        return f"RankSet({str(self)!r})"


def parse_ranks(text: Optional[str], option: str = "--ranks") -> Optional[RankSet]:
    """``0,1,4-7`` (or :func:`ranges`' ``0-1, 4-7``) -> the :class:`RankSet` of 0, 1, 4-7; None
    stays None. Ranges stay ranges (memory is the text's, whatever the range). Bad input is one
    :class:`~swapwatch.errors.InputError` line naming ``option``."""
    if text is None:
        return None
    spans: List[Tuple[int, int]] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            shown = text if len(text) <= 60 else text[:60] + "..."
            raise InputError(f"{option} {shown}: expected rank numbers like 0,1,4-7") from None
        if a < 0 or b < a:
            raise InputError(f"{option} {text}: {part} is not a rank or an increasing range")
        spans.append((a, b))
    if not spans:
        raise InputError(f"{option} {text!r}: no rank given")
    return RankSet(spans)


# ---------------------------------------------------------------------------------------------
# Terminal-safe text and the table writer
# ---------------------------------------------------------------------------------------------

#: C0 controls and every other character that is not text to show (:data:`errors.UNSHOWN`: DEL,
#: C1, the bidi and zero-width format characters, line separators): a log line can carry any of
#: them, and printed raw they move the cursor, clear the screen, recolour, reorder or hide text.
_CONTROL = re.compile(f"[\x00-\x1f{UNSHOWN}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(m: "re.Match[str]") -> str:
    c = m.group(0)
    return _NAMED.get(c) or escaped_char(c)


def escape(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\r``,
    ``\\u202e``), everything else (backslashes, ``→``, CJK) as it is."""
    return _CONTROL.sub(_escape_char, text) if _CONTROL.search(text) else text


def wrap_items(items: Sequence[str], width: int, sep: str = ", ", indent: str = "") -> List[str]:
    """``items`` joined by ``sep`` on lines of at most ``width`` characters, broken only between
    items (``qkv_concat: True`` stays on one line), each line but the last ending with ``sep``
    without its blank; lines after the first start with ``indent``. An item longer than
    ``width`` has a line of its own."""
    lines: List[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) + len(sep.rstrip()) <= width:
            lines[-1] += sep + item
        else:
            if lines:
                lines[-1] += sep.rstrip()
            lines.append((indent if lines else "") + item)
    return lines


Cell = Union[str, Sequence[str]]


def write_table(header: Optional[Sequence[str]], rows: Iterable[Sequence[Cell]], sep: str = "  ",
                rule: bool = True) -> List[str]:
    """A plain-text table: the header, a rule of dashes, one row per line, columns left-aligned
    ``sep`` apart, each line without trailing blanks (every table of explain, verify, diff,
    estimate, plan, tune, families and rules). A cell is a string or a list of lines (a wrapped
    cell continues on the next lines of its row); every line is :func:`escape` d. With no
    ``header``, the rows alone (``swapwatch rules``)."""
    cells = [[[escape(str(c))] if isinstance(c, str) else [escape(str(x)) for x in c] or [""] for c in row]
             for row in rows]
    head = None if header is None else [escape(str(h)) for h in header]
    ncol = len(head) if head is not None else max((len(r) for r in cells), default=0)
    widths = [max([len(head[i]) if head is not None else 0]
                  + [len(line) for row in cells if i < len(row) for line in row[i]]) for i in range(ncol)]

    def fmt(parts: Sequence[str]) -> str:
        return sep.join(p.ljust(w) for p, w in zip(parts, widths)).rstrip()

    out = [] if head is None else [fmt(head)] + ([fmt(["-" * w for w in widths])] if rule else [])
    for row in cells:
        for k in range(max(len(c) for c in row)):
            out.append(fmt([c[k] if k < len(c) else "" for c in row]))
    return out
