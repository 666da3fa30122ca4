"""The fast scanner: big binary chunks, literal search for candidate lines, parse only those.

Why this shape: the lines swapwatch needs are O(layers x ranks + steps) inside
GB-size logs, so the cost is the search, not the parsing, and any per-line Python loop or regex
alternation is 3-20x slower than C-level search. ``bytes.find`` searches one literal per pass, so
all needles are found in ONE pass instead (:mod:`swapwatch.parsers.prefilter`: a numpy gather
over the chunk's byte pairs, or its 64-bit words when every needle is long, then ``startswith`` on
the few candidates); only the hits are then placed in their lines and numbered:

* in logs with MindFormers stdout records (every msrun worker log) a record is a line that
  *starts* with the logger's fixed-width timestamp and holds ``] - LEVEL - ``; the needles are the
  separator with its level, for INFO with the message start of a family we parse (the ``starts``
  column of :mod:`swapwatch.parsers.grammar`), checked against the line start afterwards. In such
  logs an unprefixed ``Set ...`` line is not MindFormers';
* in logs without that prefix (info.log, raw excerpts, hook-only runs) the message needles of
  :mod:`swapwatch.parsers.grammar` are searched instead;
* a few needles (MindSpore memory/offload lines, msrun exits, tracebacks, SWAPWATCH) are searched
  in every log.

Lines are never split across chunks: a chunk is processed up to its last newline and the rest is
carried over; a family that needs the lines after its own (tracebacks, the Ascend memory block)
reads ahead through :meth:`Scan.follow`, which pulls more data from the stream when the buffer ends,
so the result never depends on the chunk size. A line longer than ``max_line`` is processed in
pieces, which bounds memory whatever the input. Line numbers are counted only up to the hits:
the line feeds between one hit's line and the next (numpy for long stretches, ``bytes.count`` for
short ones), never an array of every line feed's offset.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import grammar
from .classify import CPP_HEAD_BYTES
from .prefilter import compiled
from .prefix import clean

CHUNK = 1 << 20
MAX_LINE = 32 << 20
FOLLOW_BYTES = 1 << 20

_REC = grammar.MF_RECORD
_INFO = b"INFO - "
_TS_LEN = 26                  # len("2026-07-14 06:47:08,133 - ")
_MF_STARTS = grammar.mf_info_starts()


@dataclass(frozen=True)
class Needles:
    """What to search for in one file (decided once per file from its head, see :func:`is_prefixed`)."""

    prefixed: bool
    literals: Tuple[bytes, ...] = field(default=())
    follow: Tuple[bytes, ...] = field(default=())      # literals whose lines read ahead
    records: Tuple[bytes, ...] = field(default=())     # prefixed logs: ``] - LEVEL - `` (+ message start)

    @property
    def searched(self) -> Tuple[bytes, ...]:
        """``literals + records``: what the prefilter looks for (built once, it keys the prefilter cache)."""
        sr = self.__dict__.get("_searched")
        if sr is None:
            sr = self.__dict__["_searched"] = self.literals + self.records
        return sr

    @property
    def record_set(self) -> frozenset:
        """``records`` as a set (a hit's literal is looked up in it once per candidate line)."""
        rs = self.__dict__.get("_record_set")
        if rs is None:
            rs = self.__dict__["_record_set"] = frozenset(self.records)
        return rs

    @classmethod
    def for_file(cls, prefixed: bool) -> "Needles":
        """The needles of a prefixed / unprefixed log: built once per process (every file of a
        job asks, 10,000 times at 10,000 ranks), shared (frozen)."""
        nd = _NEEDLES.get(prefixed)
        if nd is None:
            lits = list(grammar.ANYWHERE)
            if not prefixed:
                lits += [n for n in grammar.raw_needles() if n not in lits]
            records: Tuple[bytes, ...] = ()
            if prefixed:      # INFO records only when their message starts like a family we parse
                records = tuple(_REC + _INFO + start for start in _MF_STARTS) + \
                    tuple(_REC + level for level in grammar.MF_LEVELS if level != _INFO)
            nd = _NEEDLES[prefixed] = cls(prefixed, tuple(lits), tuple(n for n, k in grammar.ANYWHERE.items() if k),
                                          records)
        return nd


_NEEDLES: Dict[bool, Needles] = {}

#: Idle read buffers of this process (:func:`_buffer`): one per scan running at once, kept
#: between files up to :data:`_KEEP` bytes (a buffer grown for a giant line is let go).
_IDLE: List[bytearray] = []
_KEEP = 4 * CHUNK


def _buffer(size: int) -> bytearray:
    """A read buffer of at least ``size`` bytes: an idle one of this process when it is big enough
    (its pages stay mapped: no page faults for the next file), else a new one."""
    for i, buf in enumerate(_IDLE):
        if len(buf) >= size:
            return _IDLE.pop(i)
    return bytearray(size)


def _release(buf: bytearray) -> None:
    """Give a scan's buffer back for the next scan of this process (at most two are kept)."""
    if len(buf) <= _KEEP and len(_IDLE) < 2 and all(b is not buf for b in _IDLE):
        _IDLE.append(buf)


def is_prefixed(head: bytes) -> bool:
    """True when the log's head holds MindFormers stdout records (then MindFormers families are
    read from those records only). Decided from a fixed-size head, so chunking never changes it."""
    return re.search(rb"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - .*?\[[^\[\]\s]+:\d+\] - "
                     rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ", head) is not None


class Scan:
    """Iterate the candidate lines of one stream (a whole file, or a line-aligned byte range of it).

    Yields ``(line, text)``: ``line`` is 1-based relative to where the stream started, ``text`` the
    decoded line (undecodable bytes replaced); ``partial`` is True while the yielded line has no
    line feed after it (a log cut off mid-line). While handling a yielded line the caller may call
    :meth:`follow` to read the lines after it. After exhaustion ``newlines`` is the number of line
    feeds in the owned region (to number the lines of the next range).

    The stream is read into one buffer, reused for every file a process scans (:func:`_buffer`): a
    fresh 1 MB ``bytes`` per read was a fresh mapping from malloc, ~250 page faults a 1 MB rank log
    and a third of the 1,024-log workload's system time. Each region searched is the buffer up to
    its last line feed; the partial line after it moves to the buffer's front and the next read
    lands behind it, so every byte is searched once and only that line is copied. :meth:`head`
    lets the caller decide from the stream's first bytes (prefixed? which rank?) before the scan,
    without reading them twice.
    """

    def __init__(self, stream: BinaryIO, needles: Optional[Needles], owned: Optional[int] = None,
                 chunk: int = CHUNK, max_line: int = MAX_LINE, progress: Optional[Callable[[int], None]] = None,
                 first: bytes = b""):
        self.stream = stream
        self.needles = needles                 # may be set after head() (decided from it)
        self.owned = owned
        self.chunk = max(1, chunk)
        self.max_line = max(self.chunk, max_line)
        self.progress = progress
        self.newlines = 0
        self.bytes = 0
        self.eof = False
        self._extra: List[bytes] = []        # data read ahead by follow() (or given), not yet in the buffer
        if first:             # the stream's first bytes, already read by the caller
            self._extra = [first]
            if progress:
                progress(len(first))
        self._buf: Optional[bytearray] = None
        self._n = 0                           # bytes of input in the buffer (from its start)
        self._cur: Tuple[Any, int, int] = (b"", 0, 0)   # (buffer, after the current line, end of input)
        self._cur_line = 0
        self.partial = False
        self._readinto = getattr(stream, "readinto", None)
        #: Set by a caller that classifies record lines by their message alone (the templated
        #: scan, reader._scan_templated): message bytes -> what it made of them. A whole record
        #: line whose fixed-width timestamp is well-formed and whose bytes after it are a key here
        #: is yielded as ``(line, memo[key])`` instead of its decoded text; ``key`` is that key of
        #: the line just yielded as text (None when it is not such a line), for the caller to store.
        self.memo: Optional[Dict[bytes, Any]] = None
        self.key: Optional[bytes] = None
        #: The same for MindSpore C++ record lines (``[LEVEL] MOD(pid,tid,proc):timestamp``, the
        #: head ``classify_proto`` keys them after): their bytes after that head -> what the caller
        #: made of them; ``keyed`` is the table :attr:`key` belongs in (this one or :attr:`memo`).
        self.memo_cpp: Optional[Dict[bytes, Any]] = None
        self.keyed: Optional[Dict[bytes, Any]] = None
        #: With :attr:`memo`: ``(entries, lines)`` (a list and an ``array("q")``), to which the scanner
        #: appends a remembered line's value (when its ``events`` are not empty) and its line number
        #: instead of a yield: a
        #: rank log's strategy block is ~105 of its ~135 candidate lines, and handing each over
        #: through the generator and the caller's loop was a third of their cost.
        self.sink: Optional[Tuple[List[Any], Any]] = None
        #: With :attr:`sink`: the :class:`Stretch` es this process learned (a list the caller owns
        #: and empties whenever it empties :attr:`memo` / :attr:`memo_cpp`, whose entries they hold).
        self.stretches: Optional[List["Stretch"]] = None

    # -- reading ----------------------------------------------------------------------------
    def _read(self) -> bytes:
        """One read of the stream as new bytes (follow's read-ahead past the buffer)."""
        if self.eof:
            return b""
        data = self.stream.read(self.chunk)
        if not data:
            self.eof = True
        elif self.progress:
            self.progress(len(data))
        return data

    def _fill(self, buf: bytearray, at: int, size: int) -> int:
        """Up to ``size`` more input bytes into ``buf[at:]``: follow's read-ahead first, then the
        stream (``readinto`` where it has one: no intermediate bytes). 0 at the end of input."""
        if self._extra:
            seg = self._extra[0]
            take = min(len(seg), size)
            buf[at:at + take] = seg[:take] if take < len(seg) else seg
            if take < len(seg):
                self._extra[0] = seg[take:]
            else:
                self._extra.pop(0)
            return take
        if self.eof:
            return 0
        if self._readinto is not None:
            got = self._readinto(memoryview(buf)[at:at + size]) or 0
        else:                               # a stream without readinto (GzipUntilCut)
            data = self.stream.read(size)
            got = len(data)
            buf[at:at + got] = data
        if not got:
            self.eof = True
        elif self.progress:
            self.progress(got)
        return got

    def _room(self, need: int) -> bytearray:
        """The buffer, with room for ``need`` bytes from its start (grown for a long line)."""
        buf = self._buf
        if buf is None:
            buf = self._buf = _buffer(max(need, self.chunk + (self.chunk >> 2)))
        elif len(buf) < need:
            bigger = bytearray(max(need, 2 * len(buf)))
            bigger[:self._n] = memoryview(buf)[:self._n]
            _release(buf)
            buf = self._buf = bigger
        return buf

    def head(self, n: int) -> memoryview:
        """The stream's first ``n`` bytes (fewer when it is shorter), read into the scan's buffer;
        the scan starts with them. Valid until the scan reads on (a view, not a copy)."""
        buf = self._room(n)
        while self._n < n:
            got = self._fill(buf, self._n, n - self._n)
            if not got:
                break
            self._n += got
        return memoryview(buf)[:self._n]

    def _following(self) -> Iterator[Tuple[Any, int, int]]:
        """The input after the current line as ``(segment, start, end)``, segment by segment (the
        buffer's rest, then read-ahead), reading the stream on demand; nothing copied."""
        buf, after, n = self._cur
        yield buf, after, min(n, after + FOLLOW_BYTES)
        for seg in list(self._extra):
            yield seg, 0, min(len(seg), FOLLOW_BYTES)
        while not self.eof:
            more = self._read()
            if not more:
                return
            self._extra.append(more)
            yield more, 0, min(len(more), FOLLOW_BYTES)

    def follow(self, max_lines: int = 400, max_bytes: int = FOLLOW_BYTES) -> Iterator[Tuple[int, str]]:
        """The lines after the current candidate, as (line, cleaned text), reading on when needed."""
        line = self._cur_line
        pending = b""
        seen = 0
        count = 0
        for seg, p, end in self._following():
            while True:
                q = seg.find(b"\n", p, end)
                if q < 0:
                    pending += seg[p:end]
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
        pos = 0                              # the buffer's bytes before pos are scanned
        try:
            while True:
                buf = self._room(self._n)
                n = self._n
                end = self.eof and not self._extra
                if left is not None and n - pos >= left:
                    cut, done = pos + left, True
                elif end:
                    cut, done = n, True
                else:
                    cut, done = buf.rfind(b"\n", pos, n) + 1, False
                    if cut <= pos:               # no whole line: read on, unless a giant line is cut here
                        cut = n if n - pos >= self.max_line else pos
                if cut > pos:
                    yield from self._region(buf, pos, cut, n)
                    self.bytes += cut - pos
                    if left is not None:
                        left -= cut - pos
                    pos = cut
                if done:
                    return
                if pos:                      # the partial line to the front, the next read behind it
                    k = n - pos
                    if k:
                        buf[0:k] = buf[pos:n]
                    self._n = n = k
                    pos = 0
                buf = self._room(n + self.chunk)
                self._n += self._fill(buf, n, self.chunk)
        finally:
            self._cur = (b"", 0, 0)
            if self._buf is not None:
                _release(self._buf)
                self._buf = None

    def _region(self, buf: Any, lo: int, hi: int, avail: int) -> Iterator[Tuple[int, str]]:
        """Candidate lines of ``buf[lo:hi]`` (whole lines; ``hi`` follows a newline or ends the input;
        ``buf[hi:avail]`` is input after the region, which :meth:`follow` reads on into).

        Literal-led: one prefilter pass finds the needles (and, in prefixed logs, the record
        separators ``] - LEVEL - ``); lines are located and numbered only around those hits, in
        hit order. Where the hits lie close together from the region's start (a log's strategy
        block: a hit every line or two), that stretch's line feeds are located at once
        (:func:`_dense`); after it, a hit's line start is found by ``rfind`` back from it, the line
        feeds before it are counted from the previous hit's line (:func:`_count_newlines`), and its
        end is searched only for a line that is yielded. Hits inside a yielded line are skipped.
        With :attr:`stretches`, a file's first region is first looked at for a learned
        :class:`Stretch` (its remembered lines are then added at once, and only the bytes before and
        after it are searched); without one, the remembered lines its hits start with are learned.
        """
        needles = self.needles
        if needles is None:
            raise ValueError("Scan: the needles are decided from head() before the scan starts")
        ansi = needles.prefixed and buf.find(b"\x1b", lo, hi) >= 0
        stretches: List[Stretch] = self.stretches if self.stretches is not None else []
        stretch: Optional[Stretch] = None
        learn: Optional[List[Tuple[int, int, int, Any]]] = None     # remembered lines from the first hit on
        if self.stretches is not None and self.sink is not None and not self.bytes and not ansi:
            stretch, s0 = _stretch_at(stretches, needles, buf, lo, hi)
            if stretch is None and len(stretches) < STRETCHES_MAX:
                learn = []
        if stretch is not None:              # its hits are known: search only around it
            s1 = s0 + stretch.size
            hits = compiled(needles.searched, buf, lo, s0).find(buf, lo, s0) if s0 > lo else []
            hits.append((s0, _STRETCH))
            if hi > s1:
                hits.extend(compiled(needles.searched, buf, s1, hi).find(buf, s1, hi))
        else:
            hits = compiled(needles.searched, buf, lo, hi).find(buf, lo, hi)
        if ansi:
            hits.extend((p, b"") for p in self._ansi_records(buf, lo, hi))
        base = nls = self.newlines           # line feeds before ``counted``, from the stream's start
        counted = lo
        if hits:
            hits.sort()
            records = needles.record_set
            rfind, find, count = buf.rfind, buf.find, buf.count
            memo, memo_cpp = self.memo, self.memo_cpp
            view: Any = memoryview(buf) if memo is not None else None
            sink: Any = self.sink
            add_entry: Any = sink[0].append if sink is not None else None
            add_line: Any = sink[1].append if sink is not None else None
            k, last = 0, lo                  # hits[:k]: the dense stretch at the region's start
            for p, _ in hits:
                if p - last > _DENSE or stretch is not None:
                    break
                k, last = k + 1, p
            if k >= _DENSE_MIN:
                counted = find(b"\n", hits[k - 1][0], hi) + 1 or hi
                while k < len(hits) and hits[k][0] < counted:     # the rest of that hit's line
                    k += 1
                feeds, starts, ends, n = _dense(buf, lo, counted, hits[:k])
                nls += n
            else:
                k = 0
            end = lo                         # the end of the last yielded line: hits before it are in it
            for i, (p, lit) in enumerate(hits):
                if p < end:
                    continue
                if lit is _STRETCH:          # a learned stretch: its remembered lines at once
                    nls += _count_newlines(buf, counted, p)                     # once a file
                    stretch.apply(sink, nls)                                    # type: ignore[union-attr]
                    nls += stretch.newlines                                     # type: ignore[union-attr]
                    counted = end = p + stretch.size                            # type: ignore[union-attr]
                    continue
                ls = starts[i] if i < k else (rfind(b"\n", lo, p) + 1 or lo)
                # A record hit: is it the separator of a MindFormers record worth parsing? A record is
                # a line that starts with the logger's fixed-width ``YYYY-MM-DD HH:MM:SS,mmm - `` and
                # whose first ``] - `` after it is followed by the level; INFO records are kept when
                # their message starts like a family we parse, WARNING and above always. The literal
                # that hit is that separator with such a level (and message start, Needles.for_file),
                # so what is left is the timestamp and that no ``] - `` comes between it and ``p``.
                if lit in records and (ls + _TS_LEN >= hi or not (
                        48 <= buf[ls] <= 57 and buf[ls + 4] == 45 and buf[ls + 19] == 44 and buf[ls + 23] == 32
                        and buf[ls + 24] == 45) or find(_REC, ls + _TS_LEN, p + 4) != p):
                    # a progress bar's CR or a NUL hole (a crash on NFS, an interleaved UTF-16
                    # writer) glued in front of the record: the record starts after the last one
                    junk = max(rfind(b"\r", ls, p), rfind(b"\x00", ls, p))
                    if junk < ls or not _record_at(buf, junk + 1, p, hi):
                        if learn is not None:
                            _learn(stretches, needles, buf, learn)
                            learn = None
                        continue
                if i < k:
                    line, le = base + feeds[i] + 1, ends[i]
                else:
                    nls += count(b"\n", counted, ls) if ls - counted <= _NUMPY_COUNT \
                        else _count_newlines(buf, counted, ls)
                    counted = ls
                    line, le = nls + 1, find(b"\n", p, hi)
                partial = le < 0            # no line feed after it: the file ends (or a giant line is cut) here
                if partial:
                    le = hi
                end = le
                table: Any = None
                if memo is not None and le < hi:
                    if lit in records and _STAMP(buf, ls):
                        ks = ls + _STAMP_LEN
                        table, key = memo, view[ks:le].tobytes()
                    elif buf[ls] == 91 and memo_cpp is not None:
                        ks = _cpp_key_at(buf, ls, le)
                        if ks >= 0:
                            table, key = memo_cpp, view[ks:le].tobytes()
                if table is not None:
                    known = table.get(key)
                    if known is not None:
                        if add_entry is None:
                            self._cur_line, self.partial = line, partial
                            self._cur = (buf, le + 1, avail)
                            yield line, known
                        elif known.events:
                            add_entry(known)
                            add_line(line)
                        if learn is not None:
                            learn.append((ls, ks, le, known))
                        continue
                    self.key, self.keyed = key, table
                else:
                    self.key = None
                if learn is not None:
                    _learn(stretches, needles, buf, learn)
                    learn = None
                self.partial = partial
                self._cur = (buf, le + 1 if le < hi else hi, avail)     # follow() reads on from there
                self._cur_line = line
                yield line, buf[ls:le].decode("utf-8", "replace")
        if learn:
            _learn(stretches, needles, buf, learn)
        self.newlines = nls + _count_newlines(buf, counted, hi)

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


#: A MindFormers record's timestamp, ``YYYY-MM-DD HH:MM:SS,mmm`` (ASCII digits and separators
#: only: then the text after it is the line's text after its 23rd character, the key of
#: classify's record cache, and no needle can touch it)
_STAMP = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}").match
_STAMP_LEN = 23


def _cpp_key_at(buf: Any, ls: int, le: int) -> int:
    """Where the key of the MindSpore C++ record line ``buf[ls:le]`` starts, -1 when the line is
    not handed over by its bytes (``classify.CPP_HEAD_BYTES`` says why that key is the one
    ``classify_proto`` takes of the decoded line)."""
    m = _CPP_HEAD_BYTES(buf, ls, le)
    return -1 if m is None else m.end()


_CPP_HEAD_BYTES = CPP_HEAD_BYTES.match


def _record_at(buf: bytes, ls: int, p: int, hi: int) -> bool:
    """Does a MindFormers record start at ``ls`` with its first ``] - `` at ``p``? (its fixed-width
    ``YYYY-MM-DD HH:MM:SS,mmm - `` timestamp, and no other separator between)."""
    return not (ls + _TS_LEN >= hi or not (
        48 <= buf[ls] <= 57 and buf[ls + 4] == 45 and buf[ls + 19] == 44 and buf[ls + 23] == 32
        and buf[ls + 24] == 45) or buf.find(_REC, ls + _TS_LEN, p + 4) != p)


_NUMPY_COUNT = 1 << 13      # from this many bytes on, numpy counts line feeds faster than bytes.count
_DENSE = _NUMPY_COUNT       # hits at most this many bytes apart from the region's start on ...
_DENSE_MIN = 8              # ... and at least this many: their line feeds are located in numpy (cheaper
#                             per byte than bytes.count, which counts the gaps up to _NUMPY_COUNT)


def _dense(buf: bytes, lo: int, hi: int, hits: List[Tuple[int, bytes]]) -> Tuple[list, list, list, int]:
    """For sorted hits inside ``buf[lo:hi]``: the line feeds before each (from ``lo``), its line's
    start and end (-1: no line feed after it), and the line feeds in ``[lo, hi)``; every line feed's
    offset at once (numpy), which beats a search per hit when hits are a line or two apart."""
    nl = np.flatnonzero(_feeds(buf, lo, hi))
    at = np.searchsorted(nl, np.array([p for p, _ in hits], np.int64) - lo)
    n = len(nl)
    if not n:
        return at.tolist(), [lo] * len(hits), [-1] * len(hits), 0
    starts = np.where(at > 0, nl[np.maximum(at - 1, 0)] + 1, 0) + lo
    ends = np.where(at < n, nl[np.minimum(at, n - 1)] + lo, -1)
    return at.tolist(), starts.tolist(), ends.tolist(), n


def _feeds(buf: bytes, lo: int, hi: int):
    """``buf[lo:hi] == b"\\n"`` as a bool array, in a buffer reused up to :data:`CHUNK` bytes (a
    fresh one per call is page faults on every file in a pool worker: malloc maps and unmaps it)."""
    global _SCRATCH
    n = hi - lo
    if n > CHUNK:
        return np.frombuffer(buf, np.uint8, count=n, offset=lo) == 10
    if _SCRATCH is None:
        _SCRATCH = np.empty(CHUNK, np.bool_)
    return np.equal(np.frombuffer(buf, np.uint8, count=n, offset=lo), 10, out=_SCRATCH[:n])


_SCRATCH: Optional[np.ndarray] = None


def _count_newlines(buf: bytes, lo: int, hi: int) -> int:
    if hi - lo > _NUMPY_COUNT:          # numpy compares faster than bytes.count's byte loop
        return int(np.count_nonzero(_feeds(buf, lo, hi)))
    return buf.count(b"\n", lo, hi)


#: :class:`Stretch`: a process learns at most this many (a job's ranks log a handful of distinct
#: strategy blocks: one per pipeline stage), each of at least ``STRETCH_MIN`` remembered lines,
#: and looks for them in the first ``STRETCH_WINDOW`` bytes of a file.
STRETCHES_MAX = 4
STRETCH_MIN = 8
STRETCH_WINDOW = 256 << 10
_ANCHOR = 48
#: The hit that stands for a whole learned stretch in ``Scan._region``'s hit list (no needle is
#: this object, and none holds a line feed).
_STRETCH = b"\n<stretch>"
_HEX_RUN = re.compile(rb",?[0-9a-fA-F]+(?:,|$)").match


class Stretch:
    """A run of remembered lines at the start of a file's hits (its strategy block: ~130 lines of
    a rank log, the same on every rank but for timestamps, pids and thread ids), learned from one
    file and recognised in the next ones by one numpy comparison instead of the per-hit loop
    (~1.3 us a line: the prefilter's callback, the record test, the key's slice and lookup).

    Why the comparison is enough: the stretch's bytes must equal the learned ones except where a
    digit stands (any digit may stand there instead) outside the remembered lines' keys, and in
    the thread-id field of a MindSpore C++ head (any hex digit). No needle holds a digit or a line
    feed, and none can lie on a thread id (:func:`_needles_ok`), so the same needles hit at the same
    offsets; each line's record test reads only its bytes outside those digits (the timestamp's
    separators, ``] - `` after it) or accepts any digit there; ``CPP_HEAD_BYTES`` accepts any digits
    and hex digits in those fields and then ends where it did; the keys are the same bytes. So every
    hit has the outcome it had when learned: the same remembered entries at the same line offsets.
    The entries are those of the caller's memo tables, which the caller empties together with its
    stretches. Lines with CR, NUL or ESC bytes are never learned (their record tests look further).
    """

    __slots__ = ("needles", "text", "var", "size", "newlines", "anchor", "anchor_at", "entries", "rels")

    def __init__(self, needles: Needles, text: bytes, var: np.ndarray, newlines: int, anchor_at: int,
                 entries: List[Any], rels: np.ndarray):
        self.needles = needles
        self.text = np.frombuffer(text, np.uint8)
        self.var = var                     # per byte: 0 as learned, 1 any digit, 2 any hex digit
        self.size = len(text)
        self.newlines = newlines
        self.anchor = text[anchor_at:anchor_at + _ANCHOR]
        self.anchor_at = anchor_at
        self.entries = entries             # the remembered lines with events, in order ...
        self.rels = rels                   # ... and their lines, counted from the stretch's start (int64)

    def matches(self, buf: Any, at: int) -> bool:
        """Do ``buf[at:at + size]`` differ from the learned bytes only where :attr:`var` allows?"""
        got = np.frombuffer(buf, np.uint8, count=self.size, offset=at)
        d = np.flatnonzero(got != self.text)
        if not d.size:
            return True
        cls = self.var[d]
        if not cls.all():
            return False
        v = got[d]
        ok = (v - 48) < 10                             # uint8: a byte below "0" wraps round
        hexed = cls == 2
        if hexed.any():
            ok |= hexed & (((v | 32) - 97) < 6)
        return bool(ok.all())

    def apply(self, sink: Tuple[List[Any], Any], before: int) -> None:
        """The stretch's remembered lines into ``sink`` (entries, ``array("q")`` line numbers), its
        start being preceded by ``before`` line feeds."""
        sink[0].extend(self.entries)
        sink[1].frombytes((self.rels + before).tobytes())


def _needles_ok(needles: Needles) -> bool:
    """Can no needle lie on a byte a :class:`Stretch` lets vary? No digit (timestamps, pids), no
    line feed (hits stay inside their lines), and none that could lie on a C++ head's thread id
    (``(pid,tid,``: such a needle would be hex digits, maybe after a comma, then a comma or its end)."""
    ok = _NEEDLES_OK.get(needles)
    if ok is None:
        ok = _NEEDLES_OK[needles] = not any(
            any(48 <= c <= 57 for c in n) or b"\n" in n or _HEX_RUN(n) for n in needles.searched)
    return ok


_NEEDLES_OK: Dict[Needles, bool] = {}


def _stretch_at(stretches: List[Stretch], needles: Needles, buf: Any, lo: int, hi: int
                ) -> Tuple[Optional[Stretch], int]:
    """A learned stretch that starts on a line of ``buf[lo:hi]`` near its start, and where."""
    for st in stretches:
        if st.needles is not needles:
            continue
        a = buf.find(st.anchor, lo + st.anchor_at, min(hi, lo + STRETCH_WINDOW))
        if a < 0:
            continue
        at = a - st.anchor_at
        if (at == lo or buf[at - 1] == 10) and at + st.size <= hi and st.matches(buf, at):
            return st, at
    return None, 0


def _learn(stretches: List[Stretch], needles: Needles, buf: Any, lines: List[Tuple[int, int, int, Any]]) -> None:
    """Learn a :class:`Stretch` from the remembered lines ``(start, key start, end, entry)`` that
    began a file's hits (from the first line's start to the last one's line feed)."""
    if len(lines) < STRETCH_MIN or len(stretches) >= STRETCHES_MAX or not _needles_ok(needles):
        return
    s0, s1 = lines[0][0], lines[-1][2] + 1
    text = bytes(buf[s0:s1])
    if b"\r" in text or b"\x00" in text or b"\x1b" in text:
        return
    t = np.frombuffer(text, np.uint8)
    var = ((t - 48) < 10).astype(np.uint8)
    nl = np.flatnonzero(t == 10)
    starts = [0] + (nl[:-1] + 1).tolist()
    for ls, le in zip(starts, nl.tolist()):
        if t[ls] == 91:
            m = _CPP_HEAD_BYTES(text, ls, le)
            if m is not None:
                var[m.start("tid"):m.end("tid")] = 2
    for _, ks, le, _ in lines:
        var[ks - s0:le - s0] = 0                       # a key: as learned
    first_key = lines[0][1] - s0
    if lines[0][2] - lines[0][1] < 16:                 # too short a key to find the stretch by
        return
    with_events = [(ls, entry) for ls, _, _, entry in lines if entry.events]
    rels = np.searchsorted(nl, np.array([ls - s0 for ls, _ in with_events], np.int64)) + 1
    stretches.append(Stretch(needles, text, var, len(nl), first_key, [e for _, e in with_events],
                             rels.astype(np.int64)))
