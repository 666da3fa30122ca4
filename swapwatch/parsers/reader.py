"""From paths to a :class:`RunLog`: discovery, parallel scanning, rank assignment, completeness.

Work is split into *pieces*: a small or gzip file is one piece, a big plain file is cut into
line-aligned byte ranges (``PIECE`` bytes each) so even a single 1 GB worker log uses every core.
Each piece yields events with piece-relative line numbers plus its line-feed count; the parent
adds the counts of the pieces before it, so ``source`` is always the true ``file:line``.

Per rank, afterwards:

* **authority**: when a rank has SWAPWATCH ``apply`` (``step``) events, its text ``Set ...`` (step)
  lines are dropped — the JSON carries the exact paths/values the text lines garble;
* **completeness** (:func:`complete_blocks`): a LayerSetting block opens at ``num_layers per stage``
  (or a SWAPWATCH ``plan``) and announces ``num_layers``. Layers with nothing configured log nothing,
  so "every layer has a line" cannot be the test. A block counts as finished when the last layer
  was logged, or when the process visibly went on past model building (a later block, a step,
  memory or exit line, a compile-time offload warning, or ``TAIL_SLACK`` more log lines) without a
  traceback in between. Otherwise the log was cut off inside it: ``truncated`` -> SW106, not SW101.
  MTP models log a second block (``layer_settings`` == 2) whose only layer is ``num_layers-1``.
* a rank whose log has no MindFormers line at all while other ranks have them gets a
  ``no_mindformers_lines`` notice (``STDOUT_DEVICES`` hides ranks from stdout).
"""
from __future__ import annotations

import gc
import os
import zlib
from array import array
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import InputError
from . import inputs as inp
from . import templates
from .classify import Entry, classify, classify_cached, classify_proto
from .model import Event, NoticeEvent, RankLog, RunLog, SwapwatchEvent, _new_copy, pack, share, unpacked
from .msrun import rank_from_head, scheduler_ranks
from .progress import Progress
from .scanner import CHUNK, Needles, Scan, is_prefixed

PIECE = 32 << 20           # bytes per parallel piece of one big file (small enough to balance 2+ workers)
WINDOW = 2               # batches in flight per worker
BATCH_SMALL = 128        # pieces per pool task at most when their results are small (_run); else 32
PARALLEL_MIN = 48 << 20    # below this total, process pieces in-process (pool start-up costs more)
PACK_MIN = 128            # above this many rank logs, each rank's events are kept packed (model.pack)
SMALL_HEAD = 64 << 10     # most logs are decided by their first 64 KB (the full head is 1 MB)
TAIL_SLACK = 200           # log lines after a block that show the process moved on
#: Strategy lines for a layer id from here on are counted, not kept (:class:`_Ceiling`): no config
#: swapwatch reads has more layers (``config.training.MAX_LAYERS``, the same figure; parsers sit below
#: config, tests/test_reliability_round2.py checks they agree). A 220 MB log of 10**6 such lines was
#: 2.5 GB and one SW102 finding per layer; now it is at most this many layers of events.
LAYER_CEILING = 10_000


@dataclass
class Piece:
    index: int
    path: str
    display: str
    start: int
    end: Optional[int]      # None: to EOF (gz or last piece)
    prefixed: Optional[bool]  # None: a whole file, decided by the worker from the file's head
    rank: Optional[int]
    chunk: int = CHUNK
    head_rank: bool = False   # the worker takes the rank from the file's head when it names one
    pack: bool = False        # a whole rank file for read_logs: the worker settles and packs it
    encode: Any = None        # a whole file for ``swapwatch events``: the selector that writes its JSONL
    rank_file: bool = False   # the file's role is "rank" (its events take the file's rank)


@dataclass
class PieceResult:
    index: int
    events: List[Event]     # ``source`` holds the piece-relative line number (as str)
    newlines: int
    nbytes: int
    head_rank: Optional[int] = None   # the rank the file's head names (``Piece.head_rank``)
    packed: Optional["Packed"] = None  # ``Piece.pack``: the file's rank, settled and packed (events empty)
    text: Optional[str] = None        # ``Piece.encode``: the file's JSONL lines (events empty)


@dataclass
class Packed:
    """One rank file settled and packed by the worker that scanned it (:func:`_pack_file`), so
    the parent neither unpickles nor re-pickles its events. ``mf_before``/``mf_after``: it has
    MindFormers lines before / after the authority filter (what :func:`read_logs` needs to know)."""

    rank_log: RankLog
    mf_before: bool
    mf_after: bool


def _decide(piece: Piece, first: Any) -> Tuple[bool, Optional[int]]:
    """(prefixed, head rank) of a whole-file piece, from its head ``first`` (the file's first
    ``inp.HEAD_BYTES``, read in the worker, so the parent never holds 1,000 heads, and read once:
    a view of the scan's buffer, :meth:`Scan.head`, which the scan then starts with)."""
    head = first[:SMALL_HEAD]
    if len(head) == SMALL_HEAD:           # more file than this: is the small head conclusive?
        pre = is_prefixed(head)
        rank = rank_from_head(head, conclusive=True) if piece.head_rank else None
        if pre and (rank is not None or not piece.head_rank):
            return pre, rank
        head = first
    return is_prefixed(head), (rank_from_head(head) if piece.head_rank else None)


def _parse_piece(piece: Piece, progress=None) -> PieceResult:
    """One piece's events, scanned with the cyclic garbage collector paused: events hold no cycle
    (reference counting frees them), and a piece of 10**5 strategy lines allocates 10**5 of them,
    which the collector rescanned again and again (40 % of the scan's CPU)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _parse_piece_now(piece, progress)
    finally:
        if paused:
            gc.enable()


def _parse_piece_now(piece: Piece, progress=None) -> PieceResult:
    head_rank = None
    prefixed = piece.prefixed
    rank = piece.rank
    try:
        with inp.open_binary(piece.path) as f:
            if piece.start:
                f.seek(piece.start)
            owned = None if piece.end is None else piece.end - piece.start
            scan = Scan(f, None if prefixed is None else Needles.for_file(prefixed), owned=owned,
                        chunk=piece.chunk, progress=progress)
            if prefixed is None:                 # a whole file (start 0): decided from its head
                prefixed, head_rank = _decide(piece, _head(scan, piece.path))
                scan.needles = Needles.for_file(prefixed)
                if head_rank is not None:
                    rank = head_rank
            events: List[Event] = []
            found = None
            if piece.pack or piece.encode is not None:      # a whole file (see _plan)
                found = _scan_templated(scan, rank, prefixed)
            else:
                for line, text in scan:
                    evs = classify_cached(text, rank, str(line), follow=scan.follow, prefixed=prefixed)
                    if scan.partial and evs:
                        evs = _partial(evs, rank, line, text)
                    events.extend(evs)
    except (OSError, EOFError, zlib.error) as exc:
        raise inp.unreadable(exc, piece.path) from None
    result = PieceResult(piece.index, events, scan.newlines, scan.bytes, head_rank)
    if found is not None:
        if piece.pack:
            _pack_found(piece, rank, result, found)
        else:
            _encode_found(piece, rank, result, found)
    return result


def _head(scan: Scan, path: str) -> Any:
    """The file's head (:meth:`Scan.head`); a file that cannot be read there says so as
    :func:`inputs.read_head` words it."""
    try:
        return scan.head(inp.HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise inp.unreadable(exc, path) from None



def _partial(evs: List[Event], rank: Optional[int], line: int, text: str) -> List[Event]:
    """A line cut off mid-way would parse into wrong paths/values: say so instead (SWAPWATCH
    events, complete JSON, stay)."""
    if all(getattr(e, "origin", "") == "swapwatch" or e.kind == "swapwatch" for e in evs):
        return evs
    return [NoticeEvent(rank, str(line), what="partial_line", data={"text": text[:200]})]


#: What a whole file's scan leaves for its rank (:func:`_scan_templated`): the cache entries of its
#: remembered lines, their line numbers, each extra event's position among those entries, the extras.
Found = Tuple[List[Entry], array, List[int], List[Event]]


def _scan_templated(scan: Scan, rank: Optional[int], prefixed: bool) -> Found:
    """The candidate lines of a whole file as the template representation
    (:mod:`swapwatch.parsers.templates`): a remembered line adds its shared cache entry and line
    number, any other line its events (rank and piece-relative source, as classify makes them)."""
    entries: List[Entry] = []
    lines = array("q")
    positions: List[int] = []
    extras: List[Event] = []
    follow = scan.follow
    add_entry = entries.append
    add_line = lines.append
    proto = classify_proto
    if prefixed:
        if len(_MEMO) >= MEMO_MAX or len(_MEMO_CPP) >= MEMO_MAX:
            _MEMO.clear()
            _MEMO_CPP.clear()
            del _STRETCHES[:]                   # they hold the memo's entries
        scan.memo, scan.memo_cpp = _MEMO, _MEMO_CPP
        scan.sink = (entries, lines)            # a record line remembered by its bytes: added by the scan
        scan.stretches = _STRETCHES
    for line, text in scan:
        hit = proto(text, follow, prefixed)
        if hit.__class__ is Entry:
            protos = hit.events                                 # type: ignore[union-attr]
            if scan.key is not None:
                scan.keyed[scan.key] = hit                      # type: ignore[index]
            if not protos:
                continue
            if not scan.partial:
                add_entry(hit)                                  # type: ignore[arg-type]
                add_line(line)
                continue
            evs = [_new_copy(e, rank, str(line)) for e in protos]
        elif hit is None:
            evs = classify(text, rank, str(line), follow, prefixed)
        else:
            evs = hit                                           # type: ignore[assignment]
            for e in evs:
                e.rank = rank
                e.source = str(line)
        if evs:
            if scan.partial:
                evs = _partial(evs, rank, line, text)
            positions.extend([len(entries)] * len(evs))
            extras.extend(evs)
    return entries, lines, positions, extras


#: Record lines of prefixed logs already classified by this process, by their bytes after the
#: timestamp (:attr:`Scan.memo`): what ``classify_proto`` keys its cache by, without decoding the
#: line or slicing its text (the strategy block is the same on every rank: ~130 of a rank log's
#: ~140 candidate lines). Bounded like classify's cache.
_MEMO: Dict[bytes, Entry] = {}
#: MindSpore C++ record lines the same way, by their bytes after the head (:attr:`Scan.memo_cpp`):
#: the offload warnings every rank logs alike.
_MEMO_CPP: Dict[bytes, Entry] = {}
MEMO_MAX = 8192
#: The strategy blocks this process learned (:class:`swapwatch.parsers.scanner.Stretch`): runs of
#: remembered lines, recognised in a whole by their bytes; emptied with the memo tables.
_STRETCHES: List[Any] = []


def _pack_found(piece: Piece, rank: Optional[int], result: PieceResult, found: Found) -> None:
    """:func:`_pack_file` of a whole rank file scanned as a template: settled and packed as one
    (:class:`swapwatch.parsers.templates.Templated`), or, when the template does not apply
    (unranked file, SWAPWATCH events that overrule text lines, too many templates), by the object
    path."""
    entries, lines, positions, extras = found
    final = _events_rank(extras, rank)
    template = templates.template_of(entries) if final is not None and entries else None
    if final is None or template is None or not templates.fits(extras, template.info):
        result.events = list(templates.merged(entries, lines, positions, extras, rank, ""))
        _pack_file(piece, rank, result)
        return
    prefix = f"{piece.display}:"
    for e in extras:
        e.source = f"{prefix}{e.source}"
        e.rank = final
    if lines and lines[-1] < 1 << 32:
        lines = array("I", lines)
    rl = RankLog(final, files=[piece.display])
    _settle_found(rl, template, lines, positions, extras, piece.display, {piece.display: result.newlines})
    own = templates.summary(template.info, lines, positions, extras, final, prefix)
    packed = templates.Templated(template, lines, templates.pack_extras(positions, extras), piece.display, final, own)
    rl.__dict__["_packed"] = packed
    rl.__dict__["_events"] = None
    rl.__dict__["_memo"] = packed.memo()
    mf = templates.has_mindformers(template.info, extras)
    result.packed = Packed(rl, mf, mf)


def _settle_found(rl: RankLog, template: Any, lines: Any, positions: List[int], extras: List[Event],
                  display: str, file_lines: Dict[str, int]) -> None:
    """:func:`_settle` of a template rank: no authority (its extras hold no SWAPWATCH actions or
    steps, see ``templates.fits``); completeness (:func:`complete_blocks`) from the template's
    blocks (:func:`_template_blocks`, once per template) replayed with this rank's extras and
    line numbers."""
    tb = template.blocks
    if tb is None:
        tb = template.blocks = _template_blocks(template.entries)
    opens, ops = tb
    state = [[False, False] for _ in opens]         # per block: moved on, crashed
    cur = -1
    x = 0
    nx = len(extras)
    for k, op in ops:
        while x < nx and positions[x] <= k:
            if cur >= 0:
                _replay(state[cur], _BLOCK_OPS.get(_op_kind(extras[x])))
            x += 1
        if op == _OPEN:
            if cur >= 0 and not state[cur][1]:
                state[cur][0] = True
            cur += 1
        else:
            _replay(state[cur], op)
    if cur >= 0:
        for e in extras[x:]:
            _replay(state[cur], _BLOCK_OPS.get(_op_kind(e)))
    total = file_lines.get(display, 0)
    done = []
    for (n, max_layer, k_last), (moved_on, crashed) in zip(opens, state):
        more = total - lines[k_last] > TAIL_SLACK
        done.append(bool((n is not None and max_layer >= n - 1) or moved_on or (more and not crashed)))
    rl.layer_settings = len(done)
    rl.complete = bool(done) and all(done)
    rl.truncated = not all(done)


def _replay(block: List[bool], op: Optional[int]) -> None:
    """One crash / moved-on op on a block's [moved on, crashed] (as :func:`complete_blocks`)."""
    if op == _CRASH:
        if not block[0]:
            block[1] = True
    elif op == _MOVED and not block[1]:
        block[0] = True


def _template_blocks(entries: Sequence[Entry]) -> Tuple[List[Tuple[Optional[int], int, int]], List[Tuple[int, int]]]:
    """A template's part of :func:`complete_blocks`: per block (``num_layers``, its highest
    action layer, the entry of its last action line (or of its geometry line)), and the events
    that open a block, crash it or show the process moved on, as (entry index, op), a run of the
    same op kept once (a repeat changes nothing, whatever extras come between). Actions do not
    depend on the order of the other events, so they are folded into their block here. A
    template holds no SWAPWATCH events (never remembered), so no plan merges into a block."""
    opens: List[list] = []
    ops: List[Tuple[int, int]] = []
    for k, entry in enumerate(entries):
        for e in entry.events:
            kind = e.kind
            if kind == "geometry" and e.what == "layer_list":                       # type: ignore
                n = _num_layers(e.value)                                             # type: ignore
                opens.append([n if isinstance(n, int) and n > 0 else None, -1, k])
                ops.append((k, _OPEN))
            elif not opens:
                continue
            elif kind == "action":
                if e.layer > opens[-1][1]:                                           # type: ignore
                    opens[-1][1] = e.layer                                           # type: ignore
                opens[-1][2] = k
            else:
                op = _BLOCK_OPS.get(_op_kind(e))
                if op is not None and ops[-1][1] != op:
                    ops.append((k, op))
    return [tuple(b) for b in opens], ops                                           # type: ignore[misc]


def _encode_found(piece: Piece, rank: Optional[int], result: PieceResult, found: Found) -> None:
    """The JSONL of a whole file, as :func:`iter_events` + the events command would write it in
    the parent: the file's rank (:func:`_file_rank`) on each event of a rank file, final sources.
    Each prototype's JSON is encoded once per process (``EventSelect.text_template``), rank and
    source spliced in."""
    entries, lines, positions, extras = found
    final = _events_rank(extras, rank) if piece.rank_file else None
    prefix = f"{piece.display}:"
    for e in extras:
        e.source = f"{prefix}{e.source}"
        if final is not None:
            e.rank = final
    result.text = piece.encode.text_template(entries, lines, positions, extras,
                                             rank if final is None else final, piece.display)


def _pack_file(piece: Piece, rank: Optional[int], result: PieceResult) -> None:
    """Settle and pack a whole rank file in the worker (what read_logs would do in the parent)."""
    events = result.events
    rank = _events_rank(events, rank)
    if rank is None:                  # unranked: the parent guesses its rank once all files are in
        return
    display = f"{piece.display}:"
    for e in events:
        e.source = f"{display}{e.source}"
        e.rank = rank
    rl = RankLog(rank, files=[piece.display])
    rl.events = events
    before = _has_mindformers(rl)
    dropped = _settle(rl, {piece.display: result.newlines})
    result.packed = Packed(rl, before, _has_mindformers(rl) if dropped else before)
    pack(rl)
    result.events = []


def _align(path: str, pos: int) -> int:
    """The first line start at or after ``pos`` (a range boundary that never splits a line)."""
    with open(path, "rb") as f:
        f.seek(pos - 1)
        if f.read(1) == b"\n":
            return pos
        while True:
            block = f.read(1 << 16)
            if not block:
                return f.tell()
            i = block.find(b"\n")
            if i >= 0:
                return f.tell() - len(block) + i + 1


def _plan(files: Sequence[inp.LogFile], chunk: int, piece: int, pack_files: bool = False,
          encode: Any = None) -> List[Piece]:
    """Pieces in file order. A file of one piece is decided (prefixed? rank in its head?) by the
    worker that scans it; a file cut into several is decided here once, so all its pieces agree."""
    pieces: List[Piece] = []
    for f in files:
        wants_rank = f.name_rank is None or f.role == "rank"
        cut = [0]
        if not f.gz and f.size > piece * 3 // 2:
            for p in range(piece, f.size - piece // 2, piece):
                a = _align(f.path, p)
                if a > cut[-1] and a < f.size:
                    cut.append(a)
        if len(cut) == 1:
            pieces.append(Piece(len(pieces), f.path, f.display, 0, None, None, f.name_rank, chunk,
                                head_rank=wants_rank and f.role == "rank",
                                pack=pack_files and f.role == "rank" and f.partner is None,
                                # the two streams of one process take one rank: decided here, in order
                                encode=encode if f.stream is None else None, rank_file=f.role == "rank"))
            continue
        head = inp.read_head(f.path)
        if wants_rank:
            _apply_head_rank(f, rank_from_head(head))
        pre = is_prefixed(head)
        del head
        for a, b in zip(cut, cut[1:] + [None]):
            pieces.append(Piece(len(pieces), f.path, f.display, a, b, pre, f.name_rank, chunk))
    return pieces


def _apply_head_rank(f: inp.LogFile, head_rank: Optional[int]) -> None:
    """A worker log's head (``rank id: N``) names its rank better than its file name."""
    if head_rank is not None and f.role == "rank":
        f.name_rank = head_rank


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS/Windows
        return max(1, os.cpu_count() or 1)


def _run(pieces: List[Piece], total: int, jobs: Optional[int], progress: Progress,
         while_scanning: Optional[Callable[[], None]] = None) -> Iterator[PieceResult]:
    jobs = _workers() if jobs is None else max(1, jobs)
    if jobs == 1 or len(pieces) == 1 or total < PARALLEL_MIN:
        for p in pieces:
            yield _parse_piece(p, progress.add)
        return
    workers = min(jobs, len(pieces))
    # Batches of pieces per task (1,000 small files cost 1,000 round trips otherwise), and only
    # WINDOW batches' worth of pieces per worker in flight: results the caller has not taken yet
    # are memory, and ``Executor.map`` would run ahead through the whole input.
    # Whole files settled and packed (or encoded) by the worker come back small (a packed rank, a
    # file's JSONL), so up to BATCH_SMALL of them go in one task: each task's round trip left a
    # worker idle ~0.5 ms, 0.15 s of each worker's time over 10,000 files in batches of 32.
    small = all(p.pack or p.encode is not None for p in pieces)
    batch = max(1, min(BATCH_SMALL if small else 32, len(pieces) // (workers * 8)))
    window = WINDOW * workers * batch
    # The workers get the whole piece list once, when they start (inherited as it is when they are
    # forked), and each task is only a range of it: pickling 10,000 Piece dataclasses at submit
    # took the parent ~0.1 s of CPU while the workers scanned.
    with ProcessPoolExecutor(max_workers=workers, initializer=_take_pieces, initargs=(pieces,)) as ex:
        todo = iter(_batches(len(pieces), batch, window))
        pending: Deque = deque()

        def fill(inflight: int) -> int:
            """Submit batches while fewer than ``window`` pieces are in flight."""
            while inflight < window:
                lo, hi = next(todo, (0, 0))
                if hi == 0:
                    break
                pending.append((ex.submit(_parse_range, lo, hi), hi - lo))
                inflight += hi - lo
            return inflight

        inflight = fill(0)
        if while_scanning is not None:
            while_scanning()        # the workers (forked at the first submit) scan meanwhile
        try:
            while pending:
                future, size = pending.popleft()
                results = future.result()
                inflight = fill(inflight - size)
                for r in results:
                    progress.add(r.nbytes)
                    yield r
                # What the caller kept of this batch lives as long as the scan: out of the cyclic
                # collector's sight until it ends (objects are still freed when unreferenced).
                # Each full collection rescanned every rank kept so far: ~70 ms of the parent's
                # CPU over 10,000 ranks.
                gc.freeze()
        finally:
            gc.unfreeze()


def _batches(n: int, batch: int, tail: int) -> List[Tuple[int, int]]:
    """``[lo, hi)`` ranges of ``n`` pieces: ``batch`` pieces each, but the last ``tail`` pieces in
    quarter batches, so the workers run out of work within a few pieces of each other (a worker
    that gets the last full batch keeps the other idle for half a batch on average: ~0.07 s of
    1,024 one-MB logs)."""
    small = max(1, batch // 4)
    cut = max(0, n - tail)
    cut -= cut % batch
    return ([(i, min(i + batch, cut)) for i in range(0, cut, batch)] +
            [(i, min(i + small, n)) for i in range(cut, n, small)])


#: The pieces of the scan a pool worker serves (:func:`_take_pieces`, at the worker's start).
_POOL_PIECES: List[Piece] = []


def _take_pieces(pieces: List[Piece]) -> None:
    global _POOL_PIECES
    _POOL_PIECES = pieces


def _parse_range(lo: int, hi: int) -> List[PieceResult]:
    """A pool task: the worker's pieces ``lo`` to ``hi`` (:func:`_take_pieces`)."""
    return _parse_batch(_POOL_PIECES[lo:hi])


def _parse_batch(pieces: List[Piece]) -> List[PieceResult]:
    return [_parse_piece(p) for p in pieces]


def iter_file_events(paths: Sequence[str], chunk: int = CHUNK, jobs: Optional[int] = None, piece: int = PIECE,
                     show_progress: bool = True) -> Iterator[Tuple[inp.LogFile, List[Event], int]]:
    """Per file (in discovery order): its events with final ``file:line`` sources and provisional
    ranks, and the file's line count.

    Memory stays bounded by one piece's events (plus the pool's look-ahead), so this is the
    streaming path behind ``swapwatch events``.
    """
    found = inp.discover(paths)
    yield from _iter_found(found, chunk, jobs, piece, show_progress)


class _Ceiling:
    """The strategy lines of one file past :data:`LAYER_CEILING`, counted as they stream by and
    summed up in one notice (``past_layer_ceiling``: count, layer range, first source) at the end
    of the file's events, so memory stays at most the ceiling's worth of layers per block."""

    def __init__(self) -> None:
        self.count, self.lo, self.hi, self.first = 0, 0, 0, ""
        self.rank: Optional[int] = None

    def keep(self, e: Event) -> bool:
        if e.kind != "action" or e.layer < LAYER_CEILING:                # type: ignore[attr-defined]
            return True
        layer = e.layer                                                  # type: ignore[attr-defined]
        if not self.count:
            self.lo = self.hi = layer
            self.first, self.rank = e.source, e.rank
        self.count += 1
        self.lo, self.hi = min(self.lo, layer), max(self.hi, layer)
        return False

    def notice(self) -> Optional[NoticeEvent]:
        if not self.count:
            return None
        return NoticeEvent(self.rank, self.first, what="past_layer_ceiling",
                           data={"count": self.count, "first_layer": self.lo, "last_layer": self.hi,
                                 "ceiling": LAYER_CEILING})


class _Spool:
    """``swapwatch events`` of one rank file cut into pieces, written as its pieces come: JSONL with
    the rank left ``null`` in a spooled temporary file (memory up to :data:`SPOOL_MEMORY`, then disk),
    because the file's rank (its first SWAPWATCH rank, else its name's) is known only at its end.
    Holding every event of the file instead was 1.1 GB for a 220 MB log of 10**6 strategy lines."""

    NULL = '{"rank":null,'

    def __init__(self, select: Any) -> None:
        import tempfile

        self.kinds = select.__class__(select.kinds, None)     # the kinds now; the rank at the end
        self.fh = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY, mode="w+", encoding="utf-8")  # noqa: SIM115
        self.rank: Optional[int] = None

    def add(self, events: List[Event]) -> None:
        if self.rank is None:
            self.rank = _events_rank(events, None)
        for e in events:
            e.rank = None
        self.fh.write(self.kinds.text(events))

    def blocks(self, rank: Optional[int], size: int = 1 << 20) -> Iterator[str]:
        """The file's JSONL with ``rank`` in every line, in blocks of about ``size`` characters."""
        self.fh.seek(0)
        head = self.NULL if rank is None else '{"rank":%d,' % rank
        out: List[str] = []
        n = 0
        for line in self.fh:
            out.append(head + line[len(self.NULL):] if rank is not None else line)
            n += len(line)
            if n >= size:
                yield "".join(out)
                out, n = [], 0
        if out:
            yield "".join(out)
        self.fh.close()


#: What a :class:`_Spool` keeps in memory before it goes to disk.
SPOOL_MEMORY = 32 << 20


def _iter_found(found: inp.Inputs, chunk: int, jobs: Optional[int], piece: int, show_progress: bool,
                pack_files: bool = False, encode: Any = None,
                while_scanning: Optional[Callable[[], None]] = None,
                ceiling: bool = False) -> Iterator[Tuple[inp.LogFile, Any, int]]:
    """As :func:`iter_file_events`; with ``pack_files`` a whole rank file may come back as a
    :class:`Packed` rank instead of its events, with ``encode`` a whole file as its JSONL text;
    ``while_scanning`` see :func:`read_logs`; ``ceiling``: strategy lines past
    :data:`LAYER_CEILING` are summed up, not kept (:class:`_Ceiling`)."""
    pieces = _plan(found.files, chunk, piece, pack_files, encode)
    templates.reset(reading=True)
    total = sum(f.size for f in found.files)
    progress = Progress(total if show_progress else 0, files=len(found.files))
    by_path = {f.path: f for f in found.files}
    cur: Optional[str] = None
    base = 0
    acc: List[Event] = []
    whole: Union[Packed, str, _Spool, None] = None   # a whole file's one piece, packed or encoded, instead of acc
    past = _Ceiling()

    def done() -> Tuple[inp.LogFile, Any, int]:
        progress.file_done()
        n = past.notice()
        if n is not None:
            acc.append(n)
        return by_path[cur], (acc if whole is None else whole), base   # type: ignore[index]

    try:
        for p, r in zip(pieces, _run(pieces, total, jobs, progress, while_scanning)):
            if p.head_rank:
                _apply_head_rank(by_path[p.path], r.head_rank)
            if p.path != cur:
                if cur is not None:
                    yield done()
                cur, base, acc, whole, past = p.path, 0, [], None, _Ceiling()
            if r.packed is not None:
                whole = r.packed           # the whole file (Piece.pack is only set for those)
            elif r.text is not None:
                whole = r.text             # the same (Piece.encode)
            else:
                for e in r.events:
                    e.source = f"{p.display}:{base + int(e.source)}"
                if encode is not None and p.prefixed is not None and by_path[p.path].role == "rank":
                    if whole is None:      # a rank file cut into pieces: its JSONL spooled as it comes
                        whole = _Spool(encode)
                    whole.add(r.events)    # type: ignore[union-attr]
                else:
                    acc.extend(filter(past.keep, r.events) if ceiling else r.events)
            base += r.newlines
        if cur is not None:
            yield done()
    finally:
        progress.close()
        templates.reset()


def iter_events(paths: Sequence[str], **kw) -> Iterator[Event]:
    """Every parsed event of every file, in file order (ranks as far as each file tells)."""
    ranks: Dict[str, Optional[int]] = {}
    for f, events, _ in iter_file_events(paths, **kw):
        rank = ranks[f.path] = _partner_rank(f, _file_rank(f, events), ranks)
        for e in events:
            if rank is not None and f.role == "rank":
                e.rank = rank
            yield e


def iter_event_text(paths: Sequence[str], select: Any, **kw) -> Iterator[str]:
    """``swapwatch events`` as JSONL text blocks, in file order: what :func:`iter_events` yields,
    kept by ``select(event)`` and written by ``select.text(events)`` (the events command's
    selector, :class:`swapwatch.commands.events.EventSelect`). A file scanned as one piece is
    written by the worker that scanned it; a big file cut into pieces is written here."""
    found = inp.discover(paths)
    ranks: Dict[str, Optional[int]] = {}
    for f, events, _ in _iter_found(found, kw.pop("chunk", CHUNK), kw.pop("jobs", None), kw.pop("piece", PIECE),
                                    kw.pop("show_progress", True), encode=select):
        if isinstance(events, _Spool):
            rank = ranks[f.path] = events.rank if events.rank is not None else f.name_rank
            if select.ranks is None or rank in select.ranks:
                yield from events.blocks(rank)
            continue
        if not isinstance(events, str):
            rank = ranks[f.path] = _partner_rank(f, _file_rank(f, events), ranks) if f.role == "rank" else None
            if rank is not None:
                for e in events:
                    e.rank = rank
            events = select.text(events)
        if events:
            yield events


def _partner_rank(f: inp.LogFile, rank: Optional[int], known: Dict[str, Optional[int]]) -> Optional[int]:
    """A run directory's stderr copy takes its stdout copy's rank (one process: ``LogFile.partner``)
    when it names none itself; the stdout copy comes first (discovery order)."""
    if rank is None and f.partner is not None:
        return known.get(f.partner)
    return rank


def _file_rank(f: inp.LogFile, events: List[Event]) -> Optional[int]:
    """SWAPWATCH rank (authoritative) > content (``rank id:``) / file name (already in name_rank)."""
    return _events_rank(events, f.name_rank)


def _events_rank(events: List[Event], otherwise: Optional[int]) -> Optional[int]:
    for e in events:
        if (getattr(e, "origin", None) == "swapwatch" or isinstance(e, SwapwatchEvent)) and e.rank is not None:
            return e.rank
    return otherwise


def read_logs(paths: Sequence[str], chunk: int = CHUNK, jobs: Optional[int] = None, piece: int = PIECE,
              show_progress: bool = True, while_scanning: Optional[Callable[[], None]] = None) -> RunLog:
    """Parse worker logs / msrun dirs / run dirs (plain or .gz) into one :class:`RunLog`.

    ``while_scanning``: called once as soon as the worker processes have their first files, when
    the logs are scanned in parallel (not at all otherwise): the caller's own start-up (importing
    what it needs after the scan) then overlaps the scan instead of delaying it.

    Raises :class:`swapwatch.errors.InputError` (one line, exit 2 in the CLI) for paths that do not
    exist, hold no logs, or cannot be read.
    """
    found = inp.discover(paths)
    run = RunLog(run_info=dict(found.run_info), label=found.label)
    expected = set(found.expected_ranks or [])
    unranked: List[Tuple[inp.LogFile, List[Event]]] = []
    lines: Dict[str, int] = {}
    packing = sum(f.role == "rank" for f in found.files) > PACK_MIN
    mf_any = False                  # some rank printed MindFormers lines (before the authority filter)
    mf_after: Dict[int, bool] = {}  # packed ranks: MindFormers lines left after it
    path_rank: Dict[str, Optional[int]] = {}   # each rank file's rank (a stderr copy takes its partner's)
    for f, events, nlines in _iter_found(found, chunk, jobs, piece, show_progress, pack_files=packing,
                                         while_scanning=while_scanning, ceiling=True):
        lines[f.display] = nlines
        if isinstance(events, Packed):
            path_rank[f.path] = events.rank_log.rank
            if events.rank_log.rank not in run.ranks:
                rl = run.ranks[events.rank_log.rank] = events.rank_log
                share(rl)
                mf_any = mf_any or events.mf_before
                mf_after[rl.rank] = events.mf_after
                continue
            events = unpacked(events.rank_log)      # a second file of a rank: merge as usual
        if f.role == "scheduler":
            run.run_events.extend(events)
            if not found.run_info.get("ranks") and not found.run_info.get("world_size"):
                with inp.open_binary(f.path) as fh:
                    expected.update(scheduler_ranks(iter(lambda: fh.read(CHUNK), b"")))
            continue
        rank = path_rank[f.path] = _partner_rank(f, _file_rank(f, events), path_rank)
        if rank is None:
            unranked.append((f, events))
            continue
        rl = _add(run, rank, f, events)
        if packing:
            # settle and pack this rank now, so only one rank's events are ever unpacked here
            mf_any = mf_any or _has_mindformers(rl)
            _settle(rl, lines)
            mf_after[rank] = _has_mindformers(rl)
            pack(rl)
    partners = sum(f.partner is not None for f, _ in unranked)
    for f, events in unranked:
        guess = path_rank.get(f.partner) if f.partner is not None else None
        if guess is None:
            rank = 0 if not run.ranks and len(unranked) - partners == 1 else max(list(run.ranks) + [-1]) + 1
            events.insert(0, NoticeEvent(rank, f"{f.display}:1", what="rank_guessed",
                                         data={"file": f.display, "rank": rank}))
        else:
            rank = guess
        path_rank[f.path] = rank
        _add(run, rank, f, events)
        mf_after.pop(rank, None)
    run.expected_ranks = sorted(expected) if expected else None
    any_mf = mf_any or any(_has_mindformers(r) for k, r in run.ranks.items() if k not in mf_after)
    for k, r in run.ranks.items():
        if k not in mf_after:
            _finish(r, any_mf, lines)
        elif any_mf and not mf_after[k]:
            r.events = [_silent_notice(r)] + r.events
            pack(r)
    return run


def _add(run: RunLog, rank: int, f: inp.LogFile, events: List[Event]) -> RankLog:
    rl = run.ranks.get(rank)
    if rl is None:
        rl = run.ranks[rank] = RankLog(rank)
    elif rl.files and os.path.dirname(rl.files[0]) != os.path.dirname(f.display):
        # one run logs each rank once (a run directory's stdout and stderr copies are one file's two
        # halves, in one directory); two directories with the same rank are two runs or a copy, and
        # read as one rank they were a made-up second LayerSetting block (SW109 "an MTP block")
        raise InputError(f"rank {rank} appears twice: in {rl.files[0]} and in {f.display}; a run logs each rank "
                         "once (two attempts, or a copy of the same logs?): verify each directory on its own",
                         file=f.display)
    rl.files.append(f.display)
    for e in events:
        e.rank = rank
    rl.events = rl.events + events if rl.events else events
    return rl


def _has_mindformers(r: RankLog) -> bool:
    return any(e.kind in ("geometry", "formative", "initial_config") or
               (e.kind in ("action", "step") and getattr(e, "origin", "text") == "text") for e in r.events)


def _settle(r: RankLog, lines: Dict[str, int]) -> bool:
    """Authority (SWAPWATCH events over text lines) and completeness of one rank's events.
    True when the authority rule dropped text lines."""
    authority = {e.kind for e in r.events if e.kind in _AUTHORITY and e.origin == "swapwatch"}  # type: ignore
    if authority:
        r.events = [e for e in r.events if not (e.kind in authority and e.origin == "text")]  # type: ignore
    blocks = complete_blocks(r.events, lines)
    r.layer_settings = len(blocks)
    r.complete = bool(blocks) and all(b["complete"] for b in blocks)
    r.truncated = any(not b["complete"] for b in blocks)
    return bool(authority)


#: The kinds whose SWAPWATCH events make the same kind's text lines redundant (ActionEvent, StepEvent).
_AUTHORITY = ("action", "step")


def _finish(r: RankLog, any_mf: bool, lines: Dict[str, int]) -> None:
    _settle(r, lines)
    if any_mf and not _has_mindformers(r):
        r.events.insert(0, _silent_notice(r))


def _silent_notice(r: RankLog) -> NoticeEvent:
    return NoticeEvent(r.rank, r.events[0].source if r.events else f"{r.files[0]}:1", what="no_mindformers_lines",
                       data={"hint": "STDOUT_DEVICES may hide this rank's MindFormers lines; "
                                     "its output/log/rank_N/info.log has them"})


def _num_layers(value) -> Optional[int]:
    try:
        return int(sum(sum(row) if isinstance(row, (list, tuple)) else row for row in value))
    except (TypeError, ValueError):
        return None


_OPEN, _CRASH, _MOVED = 0, 1, 2
#: What an event does to the open LayerSetting block (:func:`complete_blocks`), by its kind (or
#: ``notice:<what>``, ``swapwatch:<payload kind>``): a traceback or config error crashes it (unless
#: the process had moved on); a step, memory or exit line, a compile-time offload warning or a
#: SWAPWATCH ``run`` event shows the process moved on past model building (unless it crashed).
_BLOCK_OPS = {"notice:traceback": _CRASH, "notice:config_error": _CRASH, "step": _MOVED, "memory": _MOVED,
              "exit": _MOVED, "notice:offload_outside_lazy_inline": _MOVED, "swapwatch:run": _MOVED}


def _op_kind(e: Event) -> str:
    kind = e.kind
    if kind == "notice":
        return f"notice:{e.what}"                                   # type: ignore[attr-defined]
    if kind == "swapwatch":
        return f"swapwatch:{e.payload.get('kind')}"                 # type: ignore[attr-defined]
    return kind


def complete_blocks(events: Sequence[Event], file_lines: Optional[Dict[str, int]] = None,
                    tail_slack: int = TAIL_SLACK) -> List[dict]:
    """The LayerSetting blocks of one rank's events, each a dict with ``num_layers``, ``max_layer``
    and ``complete`` (see the module docstring). ``file_lines``: total lines per file, for the
    "more log after the block" evidence.

    A SWAPWATCH ``plan`` and MindFormers' own geometry lines of the same LayerSetting instance
    describe one block (the shim sends its plan after layer 0; the hooks send it first).
    """
    blocks: List[dict] = []
    cur: Optional[dict] = None
    for e in events:          # kinds, not isinstance: one string compare per event (each class has one kind)
        kind = e.kind
        geometry = kind == "geometry" and e.what == "layer_list"                     # type: ignore
        plan = kind == "swapwatch" and e.payload.get("kind") == "plan"               # type: ignore
        if geometry or plan:
            name, _, ln = e.source.rpartition(":")
            line = int(ln) if ln.isdigit() else 0
            n = _num_layers(e.value) if geometry else e.payload.get("num_layers")     # type: ignore
            n = n if isinstance(n, int) and n > 0 else None
            merge = cur is not None and not cur["crashed"] and (
                (plan and cur["geometry"] and not cur["plan"]) or
                (geometry and cur["plan"] and not cur["geometry"] and cur["max_layer"] < 0))
            if merge and cur is not None:      # merge implies cur (said again for mypy)
                cur["plan"] = cur["plan"] or plan
                cur["geometry"] = cur["geometry"] or geometry
                cur["num_layers"] = cur["num_layers"] or n
                continue
            if cur is not None and not cur["crashed"]:
                cur["moved_on"] = True
            cur = {"num_layers": n, "max_layer": -1, "moved_on": False, "crashed": False, "file": name,
                   "last": line, "plan": plan, "geometry": geometry}
            blocks.append(cur)
            continue
        if cur is None:
            continue
        if kind == "action":
            if e.layer > cur["max_layer"]:                                            # type: ignore
                cur["max_layer"] = e.layer                                            # type: ignore
            name, _, ln = e.source.rpartition(":")
            if name == cur["file"]:
                line = int(ln) if ln.isdigit() else 0
                if line > cur["last"]:
                    cur["last"] = line
        else:
            op = _BLOCK_OPS.get(_op_kind(e))
            if op == _CRASH:
                if not cur["moved_on"]:
                    cur["crashed"] = True
            elif op == _MOVED and not cur["crashed"]:
                cur["moved_on"] = True
    for b in blocks:
        n = b["num_layers"]
        last_layer = n is not None and b["max_layer"] >= n - 1
        more = file_lines is not None and file_lines.get(b["file"], 0) - b["last"] > tail_slack
        b["complete"] = bool(last_layer or b["moved_on"] or (more and not b["crashed"]))
    return blocks
