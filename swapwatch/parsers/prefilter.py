"""Find every occurrence of a set of literals in one pass, whatever the number of literals.

Why: ``bytes.find`` runs at C speed but searches one literal per pass, so N literals cost N passes
over a GB-size log (the scanner's main cost, docs/performance.md). Here each literal of 3+ bytes is
represented by two *adjacent* byte pairs (bigrams) of itself, at offsets ``j`` and ``j + 1``: any
occurrence of the literal puts one of those two bigrams at an even distance from the region's
start. So one numpy gather of a 65,536-entry table over the region read as little-endian 16-bit
words (every other byte pair) finds every place where some literal may start; each such place is
then checked with ``bytes.startswith``. The pairs are chosen per literal as the rarest ones in a
sample of the data (the first region scanned), which only affects speed, never the result.
Literals shorter than 3 bytes are searched with ``bytes.find`` as before.

When every literal has 11 bytes or more (the needles of MindFormers-prefixed logs: the record
separator with its level and message start, the MindSpore/msrun needles), :class:`WordPrefilter`
does the same with a quarter of the work (see its docstring): it reads the region as 64-bit words,
one per 8 bytes, so its gather, the costly numpy step, touches 8x fewer elements, and the 8-byte
words make its second stage nearly exact. Both find exactly what ``bytes.find`` finds.

Where the ``hyperscan`` wheel is installed (a core dependency on x86_64 Linux, the ``hyperscan``
extra elsewhere: setup.cfg), :class:`HyperscanPrefilter` serves most regions: Hyperscan's SIMD
literal matcher (FDR/Teddy) has no per-call set-up to speak of, so it is 2-5x faster than the
numpy gathers on small regions (a 100 KB rank log) and on the unprefixed needle set (short
literals: the byte-pair :class:`Prefilter`). On big regions of prefixed logs the 64-bit-word
:class:`WordPrefilter` stays faster (one multiply and gather per 8 bytes whatever the number of
literals, where FDR's cost grows with it: 0.33 against 0.49 s/GB for the 27 prefixed needles,
docs/performance.md), so :func:`compiled` picks by the region's size (:data:`WORD_REGION`). The
numpy classes are the whole path where the wheel is missing, or with ``SWAPWATCH_PREFILTER=numpy``
(the benchmark's fallback figures, the tests of both paths). Every class has the same contract:
``find(buf, lo, hi)`` returns each occurrence wholly inside ``buf[lo:hi]`` as ``(start, literal)``.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from itertools import repeat
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

BLOCK = 1 << 20           # bytes per gather (keeps the temporaries small and in cache)
SAMPLE = 256 << 10        # bytes of data that decide which byte pairs stand for each literal
_SLICES = 64              # ... taken as this many slices spread over the first region scanned


def _pair(lit: bytes, j: int) -> int:
    return lit[j] | (lit[j + 1] << 8)


def _gram_counter(sample: bytes, pairs):
    """How often a 2- or 4-byte string occurs in ``sample`` (4-byte ones counted at once, sorted)."""
    n = len(sample)
    grams = [np.frombuffer(sample, "<u4", count=(n - a) // 4, offset=a) for a in range(4) if n - a >= 4]
    values, freq = np.unique(np.concatenate(grams), return_counts=True) if grams else (np.zeros(0, "<u4"),) * 2

    def count(gram: bytes) -> int:
        if len(gram) == 2:
            return int(pairs[gram[0] | (gram[1] << 8)])
        key = int.from_bytes(gram, "little")
        i = int(np.searchsorted(values, key))
        return int(freq[i]) if i < len(values) and values[i] == key else 0
    return count


class Prefilter:
    """One literal set, compiled against a data sample (see the module docstring)."""

    def __init__(self, literals: Sequence[bytes], sample: bytes):
        n = len(sample) & ~1
        counts = np.zeros(65536, np.int64)
        if n >= 4:
            counts += np.bincount(np.frombuffer(sample, np.uint16, count=n // 2), minlength=65536)
            counts += np.bincount(np.frombuffer(sample, np.uint16, count=n // 2 - 1, offset=1), minlength=65536)
        quads = _gram_counter(sample, counts)
        self.table = np.zeros(65536, np.bool_)       # first byte pair -> maybe a literal starts near
        self.wild = np.zeros(65536, np.bool_)        # ... and no second pair to check (3-4 byte literals)
        keys = set()                                 # (first pair | second pair << 16) of the others
        short4 = set()                               # ... of those whose literal has no 8 bytes from there
        keys8 = set()                                # four pairs (8 bytes) where the literal has them
        self.at4: Dict[int, List[Tuple[bytes, int]]] = {}  # both pairs -> (literal, offset of the first)
        self.at2: Dict[int, List[Tuple[bytes, int]]] = {}  # first pair of a wild one -> the same
        self.short: List[bytes] = []
        for lit in dict.fromkeys(literals):
            if len(lit) < 3:
                self.short.append(lit)
                continue
            # offsets j, j+1 whose 4-byte windows are rarest in the sample (those reach the Python
            # check); with 5+ bytes each first pair is followed by a second one inside the literal
            last = len(lit) - 5 if len(lit) >= 5 else len(lit) - 3
            width = 4 if len(lit) >= 5 else 2
            j = min(range(last + 1), key=lambda k: (quads(lit[k:k + width]) + quads(lit[k + 1:k + 1 + width]),
                                                    counts[_pair(lit, k)] + counts[_pair(lit, k + 1)]))
            for off in (j, j + 1):
                v = _pair(lit, off)
                self.table[v] = True
                if off + 4 <= len(lit):
                    key = v | (_pair(lit, off + 2) << 16)
                    keys.add(key)
                    self.at4.setdefault(key, []).append((lit, off))
                    if off + 8 <= len(lit):
                        keys8.add(key | (_pair(lit, off + 4) << 32) | (_pair(lit, off + 6) << 48))
                    else:
                        short4.add(key)
                else:
                    self.wild[v] = True
                    self.at2.setdefault(v, []).append((lit, off))
        self.keys = np.array(sorted(keys), np.uint32)
        self.short4 = np.array(sorted(short4), np.uint32)
        self.keys8 = np.array(sorted(keys8), np.uint64)

    def find(self, buf: bytes, lo: int, hi: int) -> List[Tuple[int, bytes]]:
        """(start, literal) of every occurrence of a literal wholly inside ``buf[lo:hi]``."""
        out: List[Tuple[int, bytes]] = []
        add = out.append
        table, wild, at4, at2, sw = self.table, self.wild, self.at4, self.at2, buf.startswith
        last = hi - 2                       # the last position a checked byte pair may start at
        for blo in range(lo, last + 1, BLOCK):
            count = (min(blo + BLOCK - 1, last) - blo) // 2 + 1
            words = np.frombuffer(buf, np.uint16, count=min(count + 3, (len(buf) - blo) // 2), offset=blo)
            idx = np.flatnonzero(np.take(table, words[:count]))
            if not len(idx):
                continue
            # second stage on the few candidates: the byte pair after the first must fit too, and
            # the two after that where the literal has them (a 4-byte window of a literal is often
            # common in the noise: ``ry s`` of ``emory size: `` in ``memory step``)
            last_w = len(words) - 1
            first = words[idx]
            second = words[np.minimum(idx + 1, last_w)].astype(np.uint32)
            quad = first.astype(np.uint32) | (second << 16)
            keep = _member(self.keys, quad)
            if len(self.keys8) and keep.any():
                sel = np.flatnonzero(keep)
                at = idx[sel]
                full = at + 3 <= last_w              # 8 bytes in the buffer (else the 4-byte test stands)
                octet = quad[sel].astype(np.uint64) | \
                    (words[np.minimum(at + 2, last_w)].astype(np.uint64) << np.uint64(32)) | \
                    (words[np.minimum(at + 3, last_w)].astype(np.uint64) << np.uint64(48))
                keep[sel] = ~full | _member(self.keys8, octet) | _member(self.short4, quad[sel])
            keep |= np.take(self.wild, first)
            for k in idx[keep].tolist():
                p = blo + 2 * k
                v = buf[p] | (buf[p + 1] << 8)
                cands = at4.get(v | (buf[p + 2] << 16) | (buf[p + 3] << 24), ()) if p + 4 <= len(buf) else ()
                if wild[v]:
                    cands = list(cands) + at2[v]
                for lit, off in cands:
                    s = p - off
                    if s >= lo and sw(lit, s, hi):
                        add((s, lit))
        for lit in self.short:
            p = buf.find(lit, lo, hi)
            while p >= 0:
                add((p, lit))
                p = buf.find(lit, p + 1, hi)
        return out


def _member(keys, values):
    """Which ``values`` are in the sorted array ``keys`` (numpy, no Python loop)."""
    if not len(keys):
        return np.zeros(len(values), np.bool_)
    return keys[np.minimum(np.searchsorted(keys, values), len(keys) - 1)] == values


_K = 0x9E3779B97F4A7C15            # an odd 64-bit multiplier: (x * K) mod 2**64, top 16 bits = hash
_M64 = (1 << 64) - 1
_NK = np.uint64(_K)
_S32 = np.uint64(32)
_S48 = np.uint64(48)
_WORD = np.dtype("<u8")              # 8 bytes read little-endian, as int.from_bytes(..., "little") keys them


def _hash(x: int) -> int:
    return ((x * _K) & _M64) >> 48


class WordPrefilter:
    """One literal set whose literals all have :data:`MIN_LEN`+ bytes, compiled against a sample.

    Why: the gather of :class:`Prefilter` (one table lookup per 16-bit word) is most of its cost,
    and numpy's per-call overhead dominates small regions. Here the region is read as 64-bit
    words, one per 8 bytes (positions ``blo + 8k``). Each literal is represented by 8 consecutive
    offsets ``j .. j+7`` of itself: any occurrence puts exactly one of them on a sampled position.
    At each sampled position

    1. the ``m``-byte gram starting there (``m`` = 5..8, the most every offset of the shortest
       literal has room for) is hashed to 16 bits and looked up in a 64 K table (one multiply, one
       shift, one gather, per 8 bytes of input);
    2. at the few hits, 8 whole bytes of the literal are hashed and looked up again: the 8 bytes
       at the position itself, or, for an offset too near the literal's end, the 8 bytes from 4
       before it (the word before, shifted). The bytes are taken as late in the literal as they
       fit: the MindFormers record literals differ only after ``] - INFO - ``;
    3. the survivors are compared with ``startswith``, grouped by literal offset.

    ``j`` is chosen per literal so that its 8 grams' hashes are the rarest in the sample (speed
    only: any choice finds every occurrence). The sampled positions whose 8-byte word would run
    past the buffer (at most one per region) are checked in Python from their gram alone.
    """

    MIN_LEN = 11          # 8 offsets, a gram of 4+ bytes after the last, 8 checkable bytes per offset
    BLOCK = 1 << 20       # bytes per gather (a multiple of 8: keeps the temporaries small)

    def __init__(self, literals: Sequence[bytes], sample: bytes):
        lits = list(dict.fromkeys(literals))
        if not lits or min(len(lit) for lit in lits) < self.MIN_LEN:
            raise ValueError(f"WordPrefilter needs literals of {self.MIN_LEN}+ bytes")
        m = self.m = min(8, min(len(lit) for lit in lits) - 7)
        mult = (_K << (64 - 8 * m)) & _M64          # (x << (64 - 8m)) * K: a hash of x's low m bytes
        self.mult = np.uint64(mult)
        freq = np.zeros(65536, np.int64)             # stage-1 hash values at every offset of the sample
        n = len(sample)
        for a in range(min(8, max(0, n - 7))):
            w = np.frombuffer(sample, _WORD, count=(n - a) // 8, offset=a)
            freq += np.bincount(((w * self.mult) >> _S48).view(np.int64), minlength=65536)
        self.table = np.zeros(65536, np.bool_)       # stage 1: gram hash -> a literal may be near
        self.checks = {d: np.zeros(65536, np.bool_) for d in (-4, 0)}   # stage 2, 8 bytes from p + d
        at: Dict[int, Dict[int, Dict[int, List[bytes]]]] = {-4: {}, 0: {}}
        self.gram: Dict[int, List[Tuple[bytes, int]]] = {}   # gram -> (literal, offset): the last positions

        def gram_hash(g: int) -> int:
            return ((g * mult) & _M64) >> 48
        for lit in lits:
            grams = [int.from_bytes(lit[off:off + m], "little") for off in range(len(lit) - m + 1)]
            j = min(range(len(lit) - m - 6), key=lambda k: sum(int(freq[gram_hash(g)]) for g in grams[k:k + 8]))
            for off in range(j, j + 8):
                self.table[gram_hash(grams[off])] = True
                self.gram.setdefault(grams[off], []).append((lit, off))
                d = 0 if off + 8 <= len(lit) else -4      # off >= 4 then, as len(lit) >= 11
                key = int.from_bytes(lit[off + d:off + d + 8], "little")
                self.checks[d][_hash(key)] = True
                at[d].setdefault(key, {}).setdefault(off, []).append(lit)
        # 8-byte key -> ((offset, literals sharing those bytes at that offset, the literal if only one), ...)
        self.at = {d: {key: tuple((off, tuple(ls), ls[0] if len(ls) == 1 else None) for off, ls in offs.items())
                       for key, offs in keys.items()} for d, keys in at.items()}
        self.before = bool(at[-4])
        self._h: Any = None
        self._hit: Any = None

    def _scratch(self, n: int) -> Tuple[Any, Any]:
        """The hash and hit arrays of one block, allocated once: a fresh 1 MB temporary per region
        is page faults on every file in a pool worker (mmap'd and unmapped each time by malloc),
        ~0.5 ms of system time per 1 MB rank log."""
        if self._h is None or len(self._h) < n:
            self._h = np.empty(max(n, self.BLOCK // 8), np.uint64)
            self._hit = np.empty(len(self._h), np.bool_)
        return self._h[:n], self._hit[:n]

    def find(self, buf: bytes, lo: int, hi: int) -> List[Tuple[int, bytes]]:
        """(start, literal) of every occurrence of a literal wholly inside ``buf[lo:hi]``."""
        out: List[Tuple[int, bytes]] = []
        add = out.append
        sw, m, table, mult = buf.startswith, self.m, self.table, self.mult
        at0, at4 = self.at[0], self.at[-4]
        nbuf = len(buf)
        end = hi - m                          # the last position a literal's gram may start at
        for blo in range(lo & ~7, end + 1, self.BLOCK):
            cnt = (min(blo + self.BLOCK, end + 1) - blo + 7) // 8     # sampled positions in this block
            full = min(cnt, (nbuf - blo) // 8)                         # ... with 8 bytes in the buffer
            if full > 0:
                words = np.frombuffer(buf, _WORD, count=full, offset=blo)
                h, hit = self._scratch(full)
                np.multiply(words, mult, out=h)
                np.right_shift(h, _S48, out=h)
                idx = np.flatnonzero(np.take(table, h.view(np.int64), out=hit, mode="clip"))
                if len(idx):
                    v = words[idx]
                    keep = np.take(self.checks[0], ((v * _NK) >> _S48).view(np.int64))
                    if self.before:           # the 8 bytes from 4 before: the previous word's top half
                        prev = np.frombuffer(buf, _WORD, count=full, offset=blo - 8)[idx] if blo >= 8 \
                            else words[np.maximum(idx - 1, 0)]     # blo = 0: no literal starts before 0
                        vb = (prev >> _S32) | (v << _S32)
                        keep |= np.take(self.checks[-4], ((vb * _NK) >> _S48).view(np.int64))
                        befores: Any = vb[keep].tolist()
                    else:
                        befores = repeat(None)
                    for p, val, vbefore in zip((idx[keep] * 8 + blo).tolist(), v[keep].tolist(), befores):
                        groups = at0.get(val, ())
                        if vbefore is not None:
                            groups += at4.get(vbefore, ())
                        for off, lits, one in groups:
                            s = p - off
                            if s >= lo and sw(lits, s, hi):
                                if one is not None:
                                    add((s, one))
                                    continue
                                for lit in lits:
                                    if sw(lit, s, hi):
                                        add((s, lit))
            for k in range(max(full, 0), cnt):    # past the buffer's last whole word: from the gram
                p = blo + 8 * k
                for lit, off in self.gram.get(int.from_bytes(buf[p:p + m], "little"), ()):
                    s = p - off
                    if s >= lo and sw(lit, s, hi):
                        add((s, lit))
        return out


class HyperscanPrefilter:
    """One literal set compiled into a Hyperscan block-mode database (literal mode, no regex).

    Block mode, not stream mode: the scanner hands over whole lines (a region ends after a line
    feed, a literal holds none), so no occurrence spans two regions and there is no stream state to
    carry; stream mode measured the same speed here (0.48 against 0.48 s/GB) and would split the
    one ``find(buf, lo, hi)`` contract the numpy classes share. Hyperscan reports every end offset
    of every literal, overlapping ones included, which is what ``bytes.find`` finds; a literal
    holding a NUL byte is refused (the binding cuts it there), and the numpy classes take it.
    """

    def __init__(self, literals: Sequence[bytes]):
        lits = list(dict.fromkeys(literals))
        if not lits or any(not lit or b"\0" in lit for lit in lits) or _hs is None:
            raise ValueError("HyperscanPrefilter needs non-empty literals without NUL bytes, and hyperscan")
        self.lits = lits
        self.lens = [len(lit) for lit in lits]
        self.db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        self.db.compile(expressions=lits, ids=list(range(len(lits))), flags=0, literal=True)

    def find(self, buf: Any, lo: int, hi: int) -> List[Tuple[int, bytes]]:
        """(start, literal) of every occurrence of a literal wholly inside ``buf[lo:hi]``."""
        out: List[Tuple[int, bytes]] = []
        if hi <= lo:
            return out
        add, lits, lens = out.append, self.lits, self.lens

        def on_match(i: int, _start: int, end: int, _flags: int, _ctx: Any) -> None:
            add((lo + end - lens[i], lits[i]))
        self.db.scan(memoryview(buf)[lo:hi], match_event_handler=on_match)
        return out


def _load_hyperscan() -> Any:
    """The ``hyperscan`` module, or None where the wheel is missing (setup.cfg installs it only
    where PyPI has one for every libc of the platform) or cannot run on this CPU, or when
    ``SWAPWATCH_PREFILTER=numpy`` asks for the numpy path."""
    if os.environ.get("SWAPWATCH_PREFILTER", "").strip().lower() == "numpy":
        return None
    try:
        import hyperscan
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[b"swapwatch"], ids=[0], flags=0, literal=True)
        db.scan(b"a swapwatch probe", match_event_handler=lambda *_: None)
    except Exception:       # ImportError, or the library refusing this CPU (it needs SSSE3)
        return None
    return hyperscan


_hs: Any = _load_hyperscan()


def backend() -> str:
    """``"hyperscan"`` or ``"numpy"``: what :func:`compiled` builds (``make bench`` prints it)."""
    return "numpy" if _hs is None else "hyperscan"


def use(name: str) -> None:
    """Switch this process to the ``"numpy"`` path or to ``"hyperscan"`` (when installed)."""
    global _hs
    if name == "numpy":
        _hs = None
    else:
        import hyperscan          # ImportError where it is not installed

        _hs = hyperscan
    _CACHE.clear()
    _SEEN.clear()
    _HS.clear()


@contextmanager
def using(name: str) -> Iterator[None]:
    """:func:`use` for a block, then back to what was in use: the tests run every fixture
    through both paths."""
    before = backend()
    use(name)
    try:
        yield
    finally:
        use(before)


#: With hyperscan, regions of at least this many bytes of a long-literal set (prefixed logs) go
#: to :class:`WordPrefilter`: measured faster from ~200 KB on (docs/performance.md); below it,
#: numpy's per-call overhead makes Hyperscan the faster one (0.08 against 0.14 ms a 100 KB log).
WORD_REGION = 256 << 10

_CACHE: Dict[Tuple[bytes, ...], Any] = {}
_SEEN: Dict[Tuple[bytes, ...], int] = {}   # bytes scanned with the first compilation (until RESAMPLE)
_HS: Dict[Tuple[bytes, ...], Optional[HyperscanPrefilter]] = {}
#: After this many bytes the literal set is compiled once more, from the region at hand: the first
#: region a process sees may be a log's head (its strategy block), whose byte pairs are not those
#: of the MindSpore noise that makes up the rest (a head-only sample let ``emory size: `` stand
#: for itself by ``ry s``, which every ``memory step`` line in the noise then matched).
RESAMPLE = 16 << 20


def compiled(literals: Tuple[bytes, ...], buf: Any, lo: int, hi: int) -> Any:
    """The prefilter of ``literals`` for the region ``buf[lo:hi]``: Hyperscan's when installed
    (compiled once per process), except for a big region of a long-literal set, which the
    numpy :class:`WordPrefilter` scans faster (:data:`WORD_REGION`); the numpy ones compiled per
    process from the first region they see (and once more after :data:`RESAMPLE` bytes), sampled
    in slices spread over the region (a log's head is its strategy block, unlike the rest; the
    logs of one job look alike, and 10,000 small files must not pay for it 10,000 times)."""
    long = min(len(lit) for lit in literals) >= WordPrefilter.MIN_LEN if literals else False
    if _hs is not None and not (long and hi - lo >= WORD_REGION):
        hp = _HS.get(literals, False)
        if hp is False:
            try:
                hp = _HS[literals] = HyperscanPrefilter(literals)
            except ValueError:              # a NUL byte in a literal: the numpy path takes the set
                hp = _HS[literals] = None
        if hp is not None:
            return hp
    pf = _CACHE.get(literals)
    seen = _SEEN.get(literals, 0)
    if pf is None or 0 <= seen < RESAMPLE <= seen + hi - lo:
        if hi - lo <= SAMPLE:
            sample = bytes(buf[lo:hi])
        else:
            step, size = (hi - lo) // _SLICES, SAMPLE // _SLICES
            sample = b"".join(buf[a:a + size] for a in range(lo, hi - size, step))
        pf = _CACHE[literals] = (WordPrefilter if long else Prefilter)(literals, sample)
        _SEEN[literals] = -1 if seen else 0          # -1: compiled for good
    elif seen >= 0:
        _SEEN[literals] = seen + hi - lo
    return pf
