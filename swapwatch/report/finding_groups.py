"""Findings grouped by cause, for people: one line per cause with the ranks and layers it hits.

A config mismatch on a 1,024-rank job is the same sentence 1,024 times, and a missing action on
every layer of every rank is ranks x layers lines; a person (a terminal, a PR comment, a CI
report) wants each cause once, with "ranks 0-1023, layers 0-31", a count, the first place to look
and the ranks hit hardest. JSON keeps every finding; the table, Markdown and JUnit use these
groups. A finding's message says *what*; its *where* is ``Finding.rank`` / ``Finding.layer``, and
this module puts it in front (:func:`line` for one finding, :meth:`Group.text` for a group), so
findings that differ only in rank and layer share one message and group by code, severity, op,
message and values; a message that differs (another value, another path) is another cause.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Tuple

from ..text import escape, ranges

#: How many rank / layer runs a range text shows before "…".
RANGE_RUNS = 6


@dataclass
class Group:
    """One cause: the findings that share it."""

    code: str
    severity: str
    body: str                           # the message every finding of the group shares
    findings: List[Any] = field(default_factory=list)

    @property
    def first(self) -> Any:
        return self.findings[0]

    @property
    def ranks(self) -> List[int]:
        return sorted({f.rank for f in self.findings if f.rank is not None})

    @property
    def layers(self) -> List[int]:
        return sorted({f.layer for f in self.findings if f.layer is not None})

    @property
    def sources(self) -> List[str]:
        seen: "OrderedDict[str, None]" = OrderedDict()
        for f in self.findings:
            if f.source:
                seen.setdefault(f.source, None)
        return list(seen)

    def where(self, limit: Optional[int] = RANGE_RUNS) -> str:
        """``ranks 0-3, 7 · layers 0-31`` (or ``rank 5 · layer 2``; empty when neither applies)."""
        return _where(self.ranks, self.layers, limit)

    def source_text(self) -> str:
        srcs = self.sources
        if not srcs:
            return ""
        return escape(srcs[0]) + (f" +{len(srcs) - 1} more" if len(srcs) > 1 else "")

    def text(self, limit: Optional[int] = RANGE_RUNS) -> str:
        """The cause as a person reads it; control characters escaped (:func:`swapwatch.text.escape`:
        a message quotes values from the user's logs, and a raw ``\\x1b`` would drive the terminal)."""
        where = self.where(limit)
        body = escape(self.body)
        return f"{where}: {body}" if where else body


def _where(ranks: List[int], layers: List[int], limit: Optional[int] = RANGE_RUNS) -> str:
    parts = []
    if ranks:
        parts.append(("rank " if len(ranks) == 1 else "ranks ") + ranges(ranks, limit))
    if layers:
        parts.append(("layer " if len(layers) == 1 else "layers ") + ranges(layers, limit))
    return " · ".join(parts)


def where(f: Any) -> str:
    """One finding's place from its fields: ``rank 0 · layer 2``, ``layer 3``, or empty."""
    return _where([] if f.rank is None else [f.rank], [] if f.layer is None else [f.layer])


def line(f: Any) -> str:
    """One finding as a person reads it: its place (:func:`where`), then its message (escaped as
    in :meth:`Group.text`)."""
    at = where(f)
    msg = escape(f.message)
    return f"{at}: {msg}" if at else msg


def group(findings: Iterable[Any]) -> List[Group]:
    """Findings grouped by cause, in the order their first finding comes."""
    groups: "OrderedDict[Tuple, Group]" = OrderedDict()
    for f in findings:
        key = (f.code, f.severity, f.op, f.message, repr(f.expected), repr(f.actual))
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(f.code, f.severity, f.message)
        g.findings.append(f)
    return list(groups.values())


def by_code(groups: Iterable[Group]) -> "OrderedDict[str, List[Group]]":
    out: "OrderedDict[str, List[Group]]" = OrderedDict()
    for g in groups:
        out.setdefault(g.code, []).append(g)
    return out


def worst_ranks(findings: Iterable[Any], failing=lambda f: True, n: int = 5) -> List[Tuple[int, int]]:
    """The ``n`` ranks with the most (failing) findings, as (rank, count), most first."""
    counts = Counter(f.rank for f in findings if f.rank is not None and failing(f))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def rank_signature(findings: Iterable[Any]) -> Tuple:
    """What a rank's findings say once the rank is taken out: ranks with equal signatures are
    one JUnit testcase."""
    return tuple(sorted((f.code, f.severity, f.layer if f.layer is not None else -1, f.message)
                        for f in findings))


def family(code: str) -> str:
    """``SW1`` for SW101..SW199: the rule family a testcase stands for."""
    return code[:3]
