"""The scanner against a slow obvious reference (:func:`_naive`: the whole input split into lines,
each tested for the literals and the record shape): for any input and any chunk size, the same
candidate lines with the same line numbers, the same ``partial`` flags, the same lines read ahead by
``follow``, and the same ``newlines``/``bytes``, through each prefilter path (Hyperscan's and the
numpy fallback). The reference shares nothing with the scanner's
chunking, prefilter, dense/sparse line location or record test (breaking any of them fails here).

Inputs: every fixture log (gz ones decompressed and also read through gzip), and logs generated
from their lines with CRLF endings, ANSI colour codes, long lines, needle soup, no trailing newline,
cut into line-aligned pieces as ``read_logs`` cuts big files; prefixed and unprefixed needles.
"""
import gzip
import io
import os
import random
import re

from hypothesis import HealthCheck, given, settings, strategies as st

from swapwatch.parsers import prefilter, scanner

#: The prefilter paths every scan here runs through: numpy's (the fallback) and, where the wheel is
#: installed, Hyperscan's (test_parsers_prefilter says where it must be)
BACKENDS = ["numpy"] + (["hyperscan"] if prefilter.backend() == "hyperscan" else [])

LOGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs")


def _fixture_logs():
    out = {}
    for root, _, files in os.walk(LOGS):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(".log"):
                with open(path, "rb") as f:
                    out[os.path.relpath(path, LOGS)] = f.read()
            elif name.endswith(".log.gz"):
                with gzip.open(path, "rb") as f:
                    out[os.path.relpath(path, LOGS)] = f.read()
    return out


FIXTURES = _fixture_logs()
LINES = sorted({line for data in FIXTURES.values() for line in data.split(b"\n") if line})
NOISE = [b"\x1b[32m", b"\x1b[0m", b"\r", b"\xff\xfe", b"\x00", b"] - ", b"] - INFO - ", b"] - WARNING - ",
         b"SWAPWATCH {\"", b"Traceback (most recent call last):", b"emory size: ", b"peak used mem:",
         b"2026-07-14 06:47:08,133 - mf[models/utils.py:205] - INFO - Set ", b"x" * 3000,
         # a record whose first separator is not a parsed family's, with one that is further on
         b"2026-07-14 06:47:08,133 - mf[a.py:1] - INFO - hello ] - INFO - Set full recompute at layer 1",
         b"2026-07-14 06:47:08,133 - mf[a.py:1] - DEBUG - x ] - ERROR - y"]


def _run(data: bytes, prefixed: bool, chunk: int, owned=None, start: int = 0, gz: bool = False):
    """Everything a caller can observe of one scan: (line, text, partial, follow) per candidate."""
    stream = io.BytesIO(gzip.compress(data)) if gz else io.BytesIO(data)
    if gz:
        stream = gzip.GzipFile(fileobj=stream)
    stream.seek(start)
    needles = scanner.Needles.for_file(prefixed)
    scan = scanner.Scan(stream, needles, owned=owned, chunk=chunk)
    out = []
    for i, (line, text) in enumerate(scan):
        ahead = list(scan.follow(max_lines=3)) if i % 3 == 0 or any(n.decode() in text for n in needles.follow) \
            else None
        out.append((line, text, scan.partial, ahead))
    return out, scan.newlines, scan.bytes


def _same(data: bytes, prefixed: bool, chunk: int, **kw):
    """The scan through each prefilter path (Hyperscan's where installed, numpy's always) is the
    reference's."""
    outs = []
    for name in BACKENDS:
        with prefilter.using(name):
            outs.append(_run(data, prefixed, chunk, **kw))
    if kw.pop("gz", False):          # the whole input, read through gzip
        kw.pop("start", None)
    want = _naive(data, prefixed, **kw)
    for name, new in zip(BACKENDS, outs):
        assert new == want, name
    return outs[0]


def _naive(data: bytes, prefixed: bool, owned=None, start: int = 0, max_follow: int = 3):
    """What the scan must yield, worked out the slow obvious way over the whole input, line by line
    (no chunks, no prefilter): a line is a candidate when a searched literal lies in it (a record
    separator only where it is the line's first ``] - `` after a fixed-width timestamp), or, in a
    prefixed log, when it starts with an ANSI escape and holds ``] - ``."""
    needles = scanner.Needles.for_file(prefixed)
    records = set(needles.records)
    end = len(data) if owned is None else start + owned
    region = data[start:end]
    lines = region.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rest = data[start:].split(b"\n")            # follow reads on past the owned bytes
    out, pos = [], start
    for i, raw in enumerate(lines):
        terminated = pos + len(raw) < len(data) and data[pos + len(raw)] == 10
        if _candidate(raw, needles.literals, records, prefixed):
            text = raw.decode("utf-8", "replace")
            if len(out) % 3 and not any(n.decode() in text for n in needles.follow):   # as _run asks
                out.append((i + 1, text, not terminated, None))
                pos += len(raw) + 1
                continue
            ahead = []
            for j, nxt in enumerate(rest[i + 1:i + 1 + max_follow]):
                last = i + 1 + j == len(rest) - 1
                if last and not nxt:
                    break
                ahead.append((i + 2 + j, scanner.clean(nxt.decode("utf-8", "replace"))))
            out.append((i + 1, text, not terminated, ahead))
        pos += len(raw) + 1
    return out, region.count(b"\n"), len(region)


def _candidate(line: bytes, literals, records, prefixed: bool) -> bool:
    if any(lit in line for lit in literals):
        return True
    if prefixed and line.startswith(b"\x1b") and b"] - " in line:
        return True
    if _record_from(line, 0, records):
        return True
    # a progress bar's CR or NUL bytes glued in front of a record: the record after the last of them
    for r in records:
        p = line.find(r)
        while p >= 0:
            junk = max(line.rfind(b"\r", 0, p), line.rfind(b"\x00", 0, p))
            if junk >= 0 and _record_from(line, junk + 1, records) and line.find(b"] - ", junk + 27) == p:
                return True
            p = line.find(r, p + 1)
    return False


def _record_from(line: bytes, s: int, records) -> bool:
    """A record starts at ``s``: a fixed-width timestamp, then its first ``] - `` is a record literal."""
    stamped = len(line) > s + 26 and line[s:s + 1].isdigit() and line[s + 4:s + 5] == b"-" \
        and line[s + 19:s + 20] == b"," and line[s + 23:s + 25] == b" -"
    first = line.find(b"] - ", s + 26) if stamped else -1
    return first >= 0 and any(line.startswith(r, first) for r in records)


def test_every_fixture_log_every_needle_set():
    n = 0
    for name, data in FIXTURES.items():
        for prefixed in (True, False):
            for chunk in (1 << 20, 4096, 977, 64):
                lines, newlines, nbytes = _same(data, prefixed, chunk)
                assert newlines == data.count(b"\n") and nbytes == len(data), name
                n += len(lines)
    assert n > 1000


def _generated(rnd: random.Random, size: int) -> bytes:
    parts = []
    while sum(map(len, parts)) < size:
        r = rnd.random()
        if r < 0.75:
            line = rnd.choice(LINES)
            if rnd.random() < 0.1:
                line = line[:rnd.randrange(len(line) + 1)]           # cut short
            if rnd.random() < 0.05:
                line = rnd.choice(NOISE) + line                      # colour code / junk before
            parts.append(line + (b"\r\n" if rnd.random() < 0.1 else b"\n"))
        elif r < 0.95:
            parts.append(rnd.choice(NOISE) + (b"\n" if rnd.random() < 0.5 else b""))
        else:
            parts.append(b"\n" * rnd.randrange(1, 4))
    data = b"".join(parts)
    return data if rnd.random() < 0.7 else data.rstrip(b"\n")         # often no trailing newline


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.sampled_from([200, 5000, 60000, 300000]),
       chunk=st.one_of(st.integers(1, 5000), st.just(1 << 20)), prefixed=st.booleans())
def test_generated_logs_any_chunk(seed, size, chunk, prefixed):
    data = _generated(random.Random(seed), size)
    _same(data, prefixed, chunk)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), cuts=st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=4),
       chunk=st.sampled_from([333, 8192, 1 << 20]))
def test_line_aligned_pieces_and_gzip(seed, cuts, chunk):
    """Pieces of a file (``owned`` bytes from a line start, as read_logs cuts), and a gzip stream."""
    data = _generated(random.Random(seed), 200000)
    bounds = sorted({0} | {data.find(b"\n", c % len(data)) + 1 for c in cuts} - {0, len(data)})
    for a, b in zip([0] + bounds, bounds + [None]):
        _same(data, True, chunk, owned=None if b is None else b - a, start=a)
    _same(data, True, chunk, gz=True)


def test_dense_stretch_edges():
    """Hits every line up to the region's end, a dense stretch whose last line has more hits, a
    dense stretch ending in a line without a line feed, a record hit rejected inside it."""
    rec = b"2026-07-14 06:47:08,133 - mf[models/utils.py:205] - INFO - Set full recompute at layer 1"
    bad = b"2026/07-14 06:47:08,133 - mf[models/utils.py:205] - INFO - Set op_swap at layer 2"
    far = b"x" * 90000 + b" peak used mem: 3M"     # a hit far along the stretch's last (rejected) line
    for tail in (b"", b"\n", b" peak used mem: 3M SWAPWATCH {\"k\":1}", b"\n" + b"noise line\n" * 500,
                 b"\n" + bad + far, b"\n" + bad + far + b"\n" + rec):
        for n in (1, 7, 8, 9, 40):
            data = b"\n".join([rec, bad] * n) + tail
            for chunk in (1 << 20, 100, 5000):
                _same(data, True, chunk)


def test_scans_at_once_keep_their_own_buffers():
    """Scans read into buffers reused across the files of a process (scanner._buffer): scans
    iterated in turn, one abandoned half-way, and one after them all give what each gives alone."""
    import itertools

    names = sorted(FIXTURES, key=lambda n: -len(FIXTURES[n]))[:3]

    def scan(name, chunk):
        return scanner.Scan(io.BytesIO(FIXTURES[name]), scanner.Needles.for_file(True), chunk=chunk)
    alone = {name: list(scan(name, 977)) for name in names}
    assert all(alone.values())
    its = [iter(scan(name, 977)) for name in names]
    got = {name: [] for name in names}
    for row in itertools.zip_longest(*its):
        for name, item in zip(names, row):
            if item is not None:
                got[name].append(item)
    assert got == alone
    half = iter(scan(names[0], 333))
    next(half)                                   # left open: its buffer is not given back
    assert list(scan(names[1], 1 << 20)) == alone[names[1]]
    assert next(half) == alone[names[0]][1]


class _Memo(dict):
    """reader._MEMO stand-in: counts the lines the scanner handed over by their bytes; ``off``
    remembers nothing (every line decoded and classified)."""

    def __init__(self, off=False):
        super().__init__()
        self.off, self.hits = off, 0
        self.stretches = []             # reader._STRETCHES stand-in: they hold this memo's entries

    def get(self, key, default=None):
        got = None if self.off else super().get(key, default)
        self.hits += got is not None
        return got

    def __setitem__(self, key, value):
        if not self.off:
            super().__setitem__(key, value)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), chunk=st.sampled_from([977, 1 << 20]))
def test_templated_scan_by_remembered_bytes_is_the_decoded_one(seed, chunk):
    """reader._scan_templated lets the scanner hand over a record line classify already saw by its
    bytes after the timestamp (Scan.memo): with the memo cold, warm (a second rank's log), or off,
    every file gives the same entries, line numbers and extras (generated logs: garbled stamps,
    CR/NUL junk before records, colour codes, cut lines; the real strategy block)."""
    rnd = random.Random(seed)
    rec = b" - mf[models/utils.py:205] - INFO - Set full recompute at layer 1\n"
    odd = b"2026-07-14 06:47:08,133" + rec + b"2026-07-14\xc2\xa06:47:08,133" + rec   # a non-ASCII stamp
    logs = [_generated(rnd, 20000) for _ in range(2)] + [FIXTURES["recompute_48l.log"], odd]

    warm = _Memo()
    for data in logs:
        off = _templated(data, _Memo(off=True), _Memo(off=True), chunk)
        assert _templated(data, _Memo(), _Memo(), chunk) == off
        assert _templated(data, warm, _Memo(), chunk) == off and _templated(data, warm, _Memo(), chunk) == off
    assert warm.hits > 100                # the remembered path ran (the strategy block's lines)


def _templated(data, memo, memo_cpp, chunk):
    """reader._scan_templated of ``data`` (rank 5) with ``memo`` / ``memo_cpp`` standing in for
    reader._MEMO / reader._MEMO_CPP: its entries' and extras' JSON, line numbers, positions."""
    from swapwatch.parsers import reader

    saved = reader._MEMO, reader._MEMO_CPP, reader._STRETCHES
    reader._MEMO, reader._MEMO_CPP, reader._STRETCHES = memo, memo_cpp, memo.stretches
    if memo_cpp.stretches is not memo.stretches:        # a stretch holds both tables' entries
        del memo.stretches[:]
        memo_cpp.stretches = memo.stretches
    try:
        scan = scanner.Scan(io.BytesIO(data), scanner.Needles.for_file(True), chunk=chunk)
        entries, lines, positions, extras = reader._scan_templated(scan, 5, True)
    finally:
        reader._MEMO, reader._MEMO_CPP, reader._STRETCHES = saved
    return ([[e.to_json() for e in x.events] for x in entries], list(lines), positions,
            [e.to_json() for e in extras])


#: MindSpore C++ record heads (``[LEVEL] MOD(pid,tid,proc):timestamp``) the scanner must not key by
#: their bytes, or keys as the text would be keyed: a non-ASCII, spaced, coloured, CR-holding or
#: needle-holding ``proc``, a non-ASCII digit after the timestamp (which extends the text's), and
#: plain ones with different pids and timestamps (the same key: remembered).
_CPP_HEADS = [b"[WARNING] PARALLEL(11823,7f1a3c66de40,python):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(4,7f1a3c66de40,python):2026-11-23-23:03:19.1.2",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,pyth\xc3\xb6n):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,py thon):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,\x1b[31mpython):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,py\rthon):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,SWAPWATCH {\"x):2026-11-23-23:03:18.898.823",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,Traceback (most recent call last):2026-11-23-23:03:18.8.8",
              b"[WARNING] PARALLEL(11823,7f1a3c66de40,python):2026-11-23-23:03:18.898.823\xd9\xa3",
              b"[ERROR] PRE_ACT(1,ab,python):2026-11-23-23:03:18.898.823"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), chunk=st.sampled_from([977, 1 << 20]))
def test_templated_scan_by_remembered_cpp_bytes_is_the_decoded_one(seed, chunk):
    """reader._scan_templated lets the scanner hand over a MindSpore C++ record line classify already
    saw by its bytes after the record's head (Scan.memo_cpp, classify.CPP_HEAD_BYTES): the offload
    warnings of the fixture logs and the CPU pool lines, under the heads of :data:`_CPP_HEADS`, with
    the memo cold, warm or off, give the same entries, line numbers and extras."""
    rnd = random.Random(seed)
    bodies = [line[line.index(b" [", line.index(b"):") if b"):" in line else 0):] for line in LINES
              if line.startswith(b"[") and (b"Offload does not" in line or b"peak used mem" in line)
              and b"):" in line]
    assert len(bodies) >= 2
    logs = []
    for _ in range(2):
        lines = []
        for _ in range(60):
            body = rnd.choice(bodies)
            if rnd.random() < 0.1:
                body = body.replace(b"Offload", "Offl\u00f6ad".encode(), 1)
            lines.append(rnd.choice(_CPP_HEADS) + body + b"\n")
            if rnd.random() < 0.2:
                lines.append(rnd.choice(LINES) + b"\n")
        logs.append(b"".join(lines))
    warm = _Memo()
    for data in logs:
        off = _templated(data, _Memo(off=True), _Memo(off=True), chunk)
        assert _templated(data, _Memo(), _Memo(), chunk) == off
        assert _templated(data, _Memo(), warm, chunk) == off and _templated(data, _Memo(), warm, chunk) == off
    assert warm.hits > 20                 # the remembered path ran


_MF_STAMP = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}")
_CPP_ID = re.compile(rb"^\[([A-Z]+)\] ([A-Z_]+)\(\d+,[0-9a-fA-F]+,")


def _ids(rnd):
    """A rank's pid and thread id (other widths now and then, upper-case hex now and then)."""
    pid = b"%d" % (rnd.randrange(10 ** 4, 10 ** 5) if rnd.random() < 0.9 else rnd.randrange(10 ** 7))
    tid = b"%012x" % rnd.randrange(1 << 48)
    return pid, tid.upper() if rnd.random() < 0.1 else tid if rnd.random() < 0.9 else tid[1:]


def _restamped(rnd, line: bytes, ids) -> bytes:
    """``line`` as another rank would log it: a MindFormers record's timestamp, a C++ head's pid,
    thread id (``ids``, now and then others) and timestamp digits redrawn; any other line's digits
    redrawn now and then."""
    def digits(m):
        return re.sub(rb"\d", lambda _: str(rnd.randrange(10)).encode(), m.group(0))
    if _MF_STAMP.match(line):
        return _MF_STAMP.sub(digits, line, count=1)
    m = _CPP_ID.match(line)
    if m:
        pid, tid = ids if rnd.random() < 0.97 else _ids(rnd)
        rest = line[m.end():]
        head, sep, tail = rest.partition(b" [")
        return b"[%s] %s(%s,%s,%s%s%s" % (m.group(1), m.group(2), pid, tid, digits(re.match(b".*", head)),
                                          sep, tail)
    return digits(re.match(b".*", line)) if rnd.random() < 0.3 else line


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), chunk=st.sampled_from([1 << 14, 1 << 20]))
def test_learned_stretch_is_the_line_by_line_scan(seed, chunk):
    """reader._scan_templated lets the scanner learn a run of remembered lines at a file's start
    (its strategy block: scanner.Stretch) and take it whole in the next files when their bytes
    differ only in digits and thread ids: every file gives what it gives with the memo off, when
    its block is the learned one under other timestamps, pids (other widths) and thread ids, after
    a preamble or not, or when a line of it changed (a key's letter or digit, a CR, a colour code,
    a line dropped or added), and the learned path ran."""
    from swapwatch.parsers import reader

    rnd = random.Random(seed)
    mf = [line for line in FIXTURES["recompute_48l.log"].split(b"\n") if b"] - INFO - " in line]
    cpp = [line for line in LINES if _CPP_ID.match(line) and b"Offload does not" in line]
    assert len(mf) > 50 and cpp
    block = mf[:rnd.randrange(10, 60)] + rnd.sample(cpp, min(len(cpp), 4))
    block += rnd.sample(LINES, 3)                  # whatever the fixtures hold, the stretch ends where it must
    rnd.shuffle(block)

    def rank_log():
        ids = _ids(rnd)
        lines = [_restamped(rnd, line, ids) for line in block]
        if rnd.random() < 0.3:                     # a changed line: the stretch must not be taken
            i = rnd.randrange(len(lines))
            line = lines[i]
            j = rnd.randrange(len(line)) if line else 0
            change = rnd.choice([b"x", b"7", b"\r", b"\x1b[0m", b"", None, 0, 0])
            if change == 0:                        # a digit of the message (a layer's number) redrawn
                msg = line.find(b"] - INFO - ") + 1 or line.find(b"] ", 60) + 1 or 40
                at = [k for k in range(msg, len(line)) if line[k:k + 1].isdigit()]
                j = rnd.choice(at) if at else j
                change = b"%d" % ((int(line[j:j + 1]) + 1) % 10) if at else b"7"
            lines[i] = line[:j] + line[j + 1:] if change == b"" else \
                line + b" " + lines[0] if change is None else line[:j] + change + line[j + 1:]
        pre = [_restamped(rnd, rnd.choice(LINES), ids) for _ in range(rnd.choice([0, 0, 1, 3]))]
        post = [_restamped(rnd, rnd.choice(LINES), ids) for _ in range(rnd.randrange(0, 40))]
        return b"\n".join(pre + lines + post) + rnd.choice([b"\n", b""])

    logs = [rank_log() for _ in range(6)]
    applied = [0]
    apply = scanner.Stretch.apply

    def counted(self, sink, before):
        applied[0] += 1
        return apply(self, sink, before)
    warm, warm_cpp = _Memo(), _Memo()
    warm_cpp.stretches = warm.stretches
    scanner.Stretch.apply = counted
    try:
        for data in logs:
            off = _templated(data, _Memo(off=True), _Memo(off=True), chunk)
            assert _templated(data, warm, warm_cpp, chunk) == off
    finally:
        scanner.Stretch.apply = apply
    assert reader._STRETCHES is not warm.stretches
    _LEARNED[0] += applied[0]


#: Files taken by a learned stretch over all examples of the test above (the path must run)
_LEARNED = [0]


def test_learned_stretch_ran():
    """The learned-stretch test above took whole stretches (it runs first: pytest keeps file order)."""
    if _LEARNED[0] == 0:
        test_learned_stretch_is_the_line_by_line_scan()
    assert _LEARNED[0] > 0


def test_stretch_needles():
    """No needle may lie on a byte a stretch lets vary: the needle sets of both log kinds qualify,
    and a needle with a digit, a line feed or that could lie on a C++ thread id does not."""
    for prefixed in (True, False):
        assert scanner._needles_ok(scanner.Needles.for_file(prefixed))
    for bad in (b"layer 1", b"a\nb", b",7f06,", b"beef", b",cafe"):
        assert not scanner._needles_ok(scanner.Needles(True, (bad,)))
    assert scanner._needles_ok(scanner.Needles(True, (b"Device MOC", b"] - INFO - Set ")))
