"""The scanner as it was before the scan4 round (main 56b796a), kept verbatim as the reference the
randomized tests compare the current :mod:`swapwatch.parsers.scanner` with (same lines, same line
numbers, same ``newlines``/``bytes``/``partial``, whatever the chunk size). Only its imports differ,
and its prefilter is always the byte-pair :class:`~swapwatch.parsers.prefilter.Prefilter`
(compiled on each region: the sample never changes what it finds). Not used by the package.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from swapwatch.parsers import grammar
from swapwatch.parsers.prefilter import Prefilter
from swapwatch.parsers.prefix import clean

_COMPILED: Dict[Tuple[bytes, ...], Prefilter] = {}


def compiled(literals: Tuple[bytes, ...], buf: bytes, lo: int, hi: int) -> Prefilter:
    pf = _COMPILED.get(literals)
    if pf is None:
        pf = _COMPILED[literals] = Prefilter(literals, buf[lo:hi][:1 << 18])
    return pf


CHUNK = 1 << 20
MAX_LINE = 32 << 20
FOLLOW_BYTES = 1 << 20

_REC = grammar.MF_RECORD
_INFO = b"INFO - "
_OTHER_LEVELS = (b"WARNING - ", b"ERROR - ", b"CRITICAL - ")
_TS_LEN = 26                  # len("2026-07-14 06:47:08,133 - ")
_MF_STARTS = grammar.mf_info_starts()


@dataclass
class Needles:
    """What to search for in one file (decided once per file from its head, see :func:`is_prefixed`)."""

    prefixed: bool
    literals: Tuple[bytes, ...] = field(default=())
    follow: Tuple[bytes, ...] = field(default=())      # literals whose lines read ahead
    records: Tuple[bytes, ...] = field(default=())     # prefixed logs: ``] - LEVEL - `` (+ message start)

    @property
    def record_set(self) -> frozenset:
        """``records`` as a set (a hit's literal is looked up in it once per candidate line)."""
        rs = self.__dict__.get("_record_set")
        if rs is None:
            rs = self.__dict__["_record_set"] = frozenset(self.records)
        return rs

    @classmethod
    def for_file(cls, prefixed: bool) -> "Needles":
        lits = list(grammar.ANYWHERE)
        if not prefixed:
            lits += [n for n in grammar.raw_needles() if n not in lits]
        records: Tuple[bytes, ...] = ()
        if prefixed:      # INFO records only when their message starts like a family we parse
            records = tuple(_REC + _INFO + start for start in _MF_STARTS) + \
                tuple(_REC + level for level in grammar.MF_LEVELS if level != _INFO)
        return cls(prefixed, tuple(lits), tuple(n for n, k in grammar.ANYWHERE.items() if k), records)



def is_prefixed(head: bytes) -> bool:
    """True when the log's head holds MindFormers stdout records (then MindFormers families are
    read from those records only). Decided from a fixed-size head, so chunking never changes it."""
    import re
    return re.search(rb"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - .*?\[[^\[\]\s]+:\d+\] - "
                     rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ", head) is not None


class Scan:
    """Iterate the candidate lines of one stream (a whole file, or a line-aligned byte range of it).

    Yields ``(line, text)``: ``line`` is 1-based relative to where the stream started, ``text`` the
    decoded line (undecodable bytes replaced); ``partial`` is True while the yielded line has no
    line feed after it (a log cut off mid-line). While handling a yielded line the caller may call
    :meth:`follow` to read the lines after it. After exhaustion ``newlines`` is the number of line
    feeds in the owned region (to number the lines of the next range).

    Chunks are searched in place (no copy of the 8 MB chunk): only the partial line carried over
    from the previous chunk is joined with the head of the next one, as a small separate region.
    """

    def __init__(self, stream: BinaryIO, needles: Needles, owned: Optional[int] = None, chunk: int = CHUNK,
                 max_line: int = MAX_LINE, progress: Optional[Callable[[int], None]] = None, first: bytes = b""):
        self.stream = stream
        self.needles = needles
        self.owned = owned
        self.chunk = max(1, chunk)
        self.max_line = max(self.chunk, max_line)
        self.progress = progress
        self.newlines = 0
        self.bytes = 0
        self.eof = False
        self._extra: List[bytes] = []        # data read ahead by follow(), not yet scanned
        if first:             # the stream's first bytes, already read by the caller (the file's head)
            self._extra = [first[i:i + self.chunk] for i in range(0, len(first), self.chunk)] \
                if len(first) > self.chunk else [first]
            if progress:
                progress(len(first))
        self._after: List[Tuple[bytes, int]] = []   # unscanned input after the current region
        self._cur: Tuple[bytes, int, int] = (b"", 0, 0)
        self._cur_line = 0
        self.partial = False

    # -- reading ----------------------------------------------------------------------------
    def _read(self) -> bytes:
        if self.eof:
            return b""
        data = self.stream.read(self.chunk)
        if not data:
            self.eof = True
        elif self.progress:
            self.progress(len(data))
        return data

    def _next(self) -> bytes:
        return self._extra.pop(0) if self._extra else self._read()

    def _following_bytes(self) -> Iterator[bytes]:
        """The input after the current line, segment by segment, reading the stream on demand."""
        buf, le, hi = self._cur
        yield buf[le + 1:hi] if hi - le - 1 < FOLLOW_BYTES else buf[le + 1:le + 1 + FOLLOW_BYTES]
        for seg, off in self._after:
            yield seg[off:off + FOLLOW_BYTES]
        for seg in list(self._extra):
            yield seg
        while not self.eof:
            more = self._read()
            if not more:
                return
            self._extra.append(more)
            yield more

    def follow(self, max_lines: int = 400, max_bytes: int = FOLLOW_BYTES) -> Iterator[Tuple[int, str]]:
        """The lines after the current candidate, as (line, cleaned text), reading on when needed."""
        line = self._cur_line
        pending = b""
        seen = 0
        count = 0
        for seg in self._following_bytes():
            p = 0
            while True:
                q = seg.find(b"\n", p)
                if q < 0:
                    pending += seg[p:]
                    break
                text = pending + seg[p:q] if pending else seg[p:q]
                pending = b""
                line += 1
                count += 1
                seen += len(text) + 1
                yield line, clean(text.decode("utf-8", "replace"))
                if count >= max_lines or seen > max_bytes:
                    return
                p = q + 1
            if len(pending) > max_bytes:
                return
        if pending:
            yield line + 1, clean(pending.decode("utf-8", "replace"))

    # -- the scan ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Tuple[int, str]]:
        left = self.owned                    # owned bytes not yet scanned (None: to EOF)
        carry = b""
        while True:
            data = self._next()
            if not data and not carry:
                return
            start = 0
            if carry:
                i = data.find(b"\n")
                more = not self.eof or bool(self._extra)
                if i < 0 and more and len(carry) + len(data) < self.max_line:
                    carry += data
                    continue
                take = len(data) if i < 0 else i + 1
                head = carry + data[:take]
                carry = b""
                start = take
                n = len(head) if left is None else min(len(head), left)
                self._after = [(data, start)]
                yield from self._region(head, 0, n)
                self.bytes += n
                if left is not None:
                    left -= n
                    if left <= 0:
                        return
            if start >= len(data):
                if self.eof and not self._extra:
                    return
                continue
            end = len(data)
            done = self.eof and not self._extra
            if left is not None and end - start >= left:
                cut, done = start + left, True
            elif done:
                cut = end
            else:
                cut = data.rfind(b"\n", start, end) + 1
                if cut <= start:
                    carry = data[start:]
                    continue
            self._after = [(data, cut)]
            yield from self._region(data, start, cut)
            self.bytes += cut - start
            if left is not None:
                left -= cut - start
            if done:
                return
            carry = data[cut:]

    def _region(self, buf: bytes, lo: int, hi: int) -> Iterator[Tuple[int, str]]:
        """Candidate lines of ``buf[lo:hi]`` (whole lines; ``hi`` follows a newline or ends the input).

        Literal-led: one prefilter pass finds the needles (and, in prefixed logs, the record
        separators ``] - LEVEL - ``); lines are located and numbered only around those hits.
        """
        needles = self.needles
        hits = compiled(needles.literals + needles.records, buf, lo, hi).find(buf, lo, hi)
        if needles.prefixed:
            hits.extend((p, b"") for p in self._ansi_records(buf, lo, hi))
        base = self.newlines
        if not hits:
            self.newlines = base + _count_newlines(buf, lo, hi)
            return
        hits.sort()
        records = needles.record_set
        if len(hits) > (hi - lo) >> 15:     # dense: every line feed's offset at once (numpy)
            nl = np.flatnonzero(np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo) == 10)
            at = np.searchsorted(nl, np.fromiter((p for p, _ in hits), np.int64, len(hits)) - lo)
            n = len(nl)
            if n:       # each hit's line start and end (-1: no line feed after it), all at once
                starts = np.where(at > 0, nl[np.maximum(at - 1, 0)] + 1, 0) + lo
                ends = np.where(at < n, nl[np.minimum(at, n - 1)] + lo, -1)
            else:
                starts, ends = np.full(len(at), lo), np.full(len(at), -1)
            spans = zip(at.tolist(), starts.tolist(), ends.tolist())
        else:                                # sparse: look around each hit, count the feeds between
            n = -1
            counted = [lo, 0]                # (offset, line feeds before it) reached by _spans
            spans = _spans(buf, lo, hi, hits, counted)
        last = -1
        for (p, lit), (i, ls, le) in zip(hits, spans):
            if ls == last:
                continue
            if lit in records and not _is_record(buf, ls, p, hi, le):
                continue
            last = ls
            self.partial = le < 0       # no line feed after it: the file ends (or a giant line is cut) here
            if le < 0:
                le = hi
            self._cur = (buf, le, hi)
            self._cur_line = base + i + 1
            yield self._cur_line, buf[ls:le].decode("utf-8", "replace")
        self.newlines = base + (n if n >= 0 else counted[1] + _count_newlines(buf, counted[0], hi))

    def _ansi_records(self, buf: bytes, lo: int, hi: int) -> List[int]:
        """Positions of the record separator in lines that start with an ANSI colour code and hold
        ``] - `` (always candidates; classify strips the codes)."""
        out: List[int] = []
        find = buf.find
        p = find(b"\x1b", lo, hi)
        while p >= 0:
            if p == lo or buf[p - 1] == 10:
                end = find(b"\n", p, hi)
                q = find(_REC, p, hi if end < 0 else end)
                if q >= 0:
                    out.append(q)
            p = find(b"\x1b", p + 1, hi)
        return out


def _is_record(buf: bytes, ls: int, p: int, hi: int, le: int) -> bool:
    """Is ``p`` (a ``] - LEVEL - `` hit) the separator of a MindFormers record worth parsing?

    A record is a line that starts with the logger's fixed-width ``YYYY-MM-DD HH:MM:SS,mmm - ``
    and whose first ``] - `` after it is followed by the level; INFO records are kept when their
    message starts like a family we parse, WARNING and above always.
    """
    if ls + _TS_LEN >= hi or not (48 <= buf[ls] <= 57 and buf[ls + 4] == 45 and buf[ls + 19] == 44
                                  and buf[ls + 23] == 32 and buf[ls + 24] == 45):
        return False
    if buf.find(_REC, ls + _TS_LEN, hi if le < 0 else le) != p:
        return False
    q = p + 4
    if buf.startswith(_INFO, q):
        return buf.startswith(_MF_STARTS, q + 7)
    return buf.startswith(_OTHER_LEVELS, q)


def _spans(buf: bytes, lo: int, hi: int, hits: List[Tuple[int, bytes]],
           counted: List[int]) -> Iterator[Tuple[int, int, int]]:
    """(line feeds before the line, line start, line end or -1) of each sorted hit; ``counted``
    keeps the offset up to which line feeds were counted and their number."""
    rfind, find = buf.rfind, buf.find
    for p, _ in hits:
        ls = rfind(b"\n", lo, p) + 1 or lo
        counted[1] += _count_newlines(buf, counted[0], ls)
        counted[0] = ls
        yield counted[1], ls, find(b"\n", p, hi)


def _count_newlines(buf: bytes, lo: int, hi: int) -> int:
    if hi - lo > 1 << 13:               # numpy compares faster than bytes.count's byte loop
        return int(np.count_nonzero(np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo) == 10))
    return buf.count(b"\n", lo, hi)
