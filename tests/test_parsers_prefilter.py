"""The literal-led scan: the one-pass prefilter finds exactly what ``bytes.find`` finds, the scanner
yields exactly the lines a line-by-line reading selects, and the fast events output is ``to_json``."""
import io
import json
import os
import platform
import sys

import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

from swapwatch.events_output import event_dict, jsonl_line
from swapwatch.parsers import grammar, iter_events
from swapwatch.parsers import prefilter
from swapwatch.parsers.prefilter import Prefilter, WordPrefilter
from swapwatch.parsers.scanner import Needles, Scan

LOGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs")
ALPHABET = b"ab] -\nINFOSet"


def by_find(buf, lits, lo, hi):
    out = set()
    for lit in lits:
        p = buf.find(lit, lo, hi)
        while p >= 0:
            out.add((p, lit))
            p = buf.find(lit, p + 1, hi)
    return out


LITERAL = st.binary(min_size=1, max_size=14).map(lambda b: bytes(ALPHABET[c % len(ALPHABET)] for c in b))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lits=st.lists(LITERAL, min_size=1, max_size=6), draw=st.data(), sample=st.binary(max_size=400),
       cut=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_prefilter_finds_what_find_finds(lits, draw, sample, cut):
    """Whatever the sample that chose the byte pairs, every occurrence inside [lo, hi) is found,
    at odd and even offsets, overlapping or at the region's edges, and nothing else."""
    lits = [lit for lit in lits if b"\n" not in lit] or [b"Set"]
    pieces = st.one_of(st.sampled_from(lits), st.sampled_from([bytes([c]) for c in ALPHABET]),
                       st.sampled_from(lits).map(lambda b: b[1:]))
    data = b"".join(draw.draw(st.lists(pieces, max_size=300)))
    lo, hi = min(cut[0], len(data)), max(min(cut[0], len(data)), len(data) - cut[1])
    got = Prefilter(lits, sample).find(data, lo, hi)
    assert len(got) == len(set(got))
    assert set(got) == by_find(data, set(lits), lo, hi)


LONG_LITERAL = st.binary(min_size=WordPrefilter.MIN_LEN, max_size=24).map(
    lambda b: bytes(ALPHABET[c % len(ALPHABET)] for c in b))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lits=st.lists(LONG_LITERAL, min_size=1, max_size=6), draw=st.data(), sample=st.binary(max_size=400),
       cut=st.tuples(st.integers(0, 40), st.integers(0, 40)), block=st.sampled_from([8, 16, 64, 1 << 20]))
def test_word_prefilter_finds_what_find_finds(lits, draw, sample, cut, block):
    """The 64-bit-word prefilter (literals of 11+ bytes): every occurrence at any of the 8 offsets
    to a word, next to block edges, at the region's edges and in the buffer's last partial word."""
    lits = [lit for lit in lits if b"\n" not in lit] or [b"Set Set Set"]
    pieces = st.one_of(st.sampled_from(lits), st.sampled_from([bytes([c]) for c in ALPHABET]),
                       st.sampled_from(lits).map(lambda b: b[1:]), st.sampled_from(lits).map(lambda b: b[:-1]))
    data = b"".join(draw.draw(st.lists(pieces, max_size=200)))
    lo, hi = min(cut[0], len(data)), max(min(cut[0], len(data)), len(data) - cut[1])
    pf = WordPrefilter(lits, sample or data)
    pf.BLOCK = block
    got = pf.find(data, lo, hi)
    assert len(got) == len(set(got))
    assert set(got) == by_find(data, set(lits), lo, hi)


def test_word_prefilter_on_real_logs():
    """On the fixture logs with the needles of prefixed logs (the set it serves), sampled from
    another log, at every region start modulo 8: the same hits as ``bytes.find``."""
    lits = Needles.for_file(True).literals + Needles.for_file(True).records
    data = b""
    for name in ("msrun_2ranks/worker_0.log", "recompute_48l.log", "garbage.log", "cpu_swap/msrun_log/worker_1.log"):
        with open(os.path.join(LOGS, name), "rb") as f:
            data += f.read()
    with open(os.path.join(LOGS, "quirks.log"), "rb") as f:
        other = f.read()
    pf = WordPrefilter(lits, other)
    want = by_find(data, set(lits), 0, len(data))
    assert len(want) > 100
    for lo in range(9):
        for hi in (len(data), len(data) - 1, len(data) - 5, len(data) - 13):
            assert set(pf.find(data, lo, hi)) == {h for h in want if h[0] >= lo and h[0] + len(h[1]) <= hi}


#: Where setup.cfg installs the hyperscan wheel (a core dependency): there its path must run
WHEEL_HERE = sys.platform.startswith("linux") and platform.machine() == "x86_64" and sys.version_info >= (3, 10)
needs_hyperscan = pytest.mark.skipif(prefilter.backend() != "hyperscan",
                                     reason="hyperscan not installed (test_hyperscan_runs_where_it_is_installed)")


def test_hyperscan_runs_where_it_is_installed():
    """Where setup.cfg makes hyperscan a core dependency, it is installed and usable, so the tests
    below that need it run here (and cannot skip silently); SWAPWATCH_PREFILTER=numpy turns it off."""
    if os.environ.get("SWAPWATCH_PREFILTER", "").lower() == "numpy" or not WHEEL_HERE:
        pytest.skip("the numpy path by request, or a platform without the wheel")
    assert prefilter.backend() == "hyperscan"


@needs_hyperscan
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lits=st.lists(LITERAL, min_size=1, max_size=6), draw=st.data(), cut=st.tuples(st.integers(0, 40),
                                                                                     st.integers(0, 40)))
def test_hyperscan_prefilter_finds_what_find_finds(lits, draw, cut):
    """Hyperscan's matcher: every occurrence inside [lo, hi), overlapping ones, one literal inside
    another, at the region's edges (a bytearray and a bytes buffer alike), and nothing else."""
    lits = [lit for lit in lits if b"\n" not in lit] or [b"Set"]
    pieces = st.one_of(st.sampled_from(lits), st.sampled_from([bytes([c]) for c in ALPHABET]),
                       st.sampled_from(lits).map(lambda b: b[1:]))
    data = b"".join(draw.draw(st.lists(pieces, max_size=300)))
    lo, hi = min(cut[0], len(data)), max(min(cut[0], len(data)), len(data) - cut[1])
    pf = prefilter.HyperscanPrefilter(lits)
    for buf in (data, bytearray(data)):
        got = pf.find(buf, lo, hi)
        assert len(got) == len(set(got))
        assert set(got) == by_find(data, set(lits), lo, hi)


@needs_hyperscan
def test_compiled_picks_by_region():
    """With hyperscan: small regions and the unprefixed (short) needles go to Hyperscan, a region of
    WORD_REGION+ bytes of the prefixed (long) needles to the word prefilter, which is faster there;
    a literal with a NUL byte (the binding cuts it) to numpy; with the numpy path, numpy always."""
    pre, raw = Needles.for_file(True).searched, Needles.for_file(False).searched
    big = b"x" * prefilter.WORD_REGION
    assert isinstance(prefilter.compiled(pre, big, 0, len(big) - 1), prefilter.HyperscanPrefilter)
    assert isinstance(prefilter.compiled(pre, big, 0, len(big)), WordPrefilter)
    assert isinstance(prefilter.compiled(raw, big, 0, len(big)), prefilter.HyperscanPrefilter)
    assert isinstance(prefilter.compiled((b"a\0b",), big, 0, 10), Prefilter)
    with prefilter.using("numpy"):
        assert prefilter.backend() == "numpy"
        assert isinstance(prefilter.compiled(raw, big, 0, 100), Prefilter)
        assert isinstance(prefilter.compiled(pre, big, 0, 100), WordPrefilter)
    assert prefilter.backend() == "hyperscan"


def naive_lines(data: bytes, needles: Needles):
    """The candidate definition of the scanner's docstring, one line at a time."""
    starts = grammar.mf_info_starts()
    out = []
    for n, line in enumerate(data.split(b"\n"), 1):
        hit = any(lit in line for lit in needles.literals)
        if needles.prefixed and not hit:
            if line[:1] == b"\x1b":
                hit = b"] - " in line
            elif len(line) > 26 and line[:1].isdigit() and line[4:5] == b"-" and line[19:20] == b"," \
                    and line[23:25] == b" -":
                p = line.find(b"] - ", 26)
                if p >= 0:
                    rest = line[p + 4:]
                    hit = rest.startswith(b"INFO - ") and rest[7:].startswith(starts) or \
                        rest.startswith((b"WARNING - ", b"ERROR - ", b"CRITICAL - "))
        if hit:
            out.append((n, line.decode("utf-8", "replace")))
    return out


FRAGMENTS = [b"2026-07-14 06:47:08,133 - mf[models/utils.py:205] - ", b"INFO - ", b"WARNING - ", b"DEBUG - ",
             b"Set full recompute at layer 3", b"Formative ", b"num_layers per stage: [4]", b"{ Epoch:[1/2]",
             b"] - ", b"\x1b[32m", b"peak used mem: 12M", b'SWAPWATCH {"k":1}', b"noise text ", b"x" * 70,
             b"Device MOC memory size: 3M", b"Traceback (most recent call last)", b"\n", b"\n", b"\n"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=120), prefixed=st.booleans(),
       chunk=st.sampled_from([64, 333, 1 << 20]))
def test_scanner_yields_the_lines_a_line_reader_selects(parts, prefixed, chunk):
    data = b"".join(parts) + b"\n"
    needles = Needles.for_file(prefixed)
    for name in ["numpy"] + (["hyperscan"] if prefilter.backend() == "hyperscan" else []):
        with prefilter.using(name):
            scan = Scan(io.BytesIO(data), needles, chunk=chunk)
            assert list(scan) == naive_lines(data, needles), name
            assert scan.newlines == data.count(b"\n")


def test_event_lines_are_to_json_on_every_fixture():
    n = 0
    for e in iter_events([LOGS], show_progress=False):
        assert event_dict(e) == e.to_json()
        assert list(event_dict(e)) == list(e.to_json())
        assert json.loads(jsonl_line(e)) == json.loads(json.dumps(e.to_json(), default=str))
        n += 1
    assert n > 100


def test_worker_written_jsonl_is_what_the_parent_would_write(tmp_path, monkeypatch):
    """``swapwatch events`` has each whole file's JSONL written by the worker that scanned it
    (iter_event_text): the text equals the parent-side encoding of iter_events, for every fixture
    (msrun dirs with scheduler.log, .gz, a SWAPWATCH rank that overrides the file name), with
    ``--kind``/``--rank`` selections, in-process and over a pool, and for a file cut into pieces."""
    from swapwatch.events_output import event_filter
    from swapwatch.parsers import iter_event_text, reader

    monkeypatch.setattr(reader, "PARALLEL_MIN", 0)         # a real pool even for these small files
    big = tmp_path / "worker_3.log"
    with open(os.path.join(LOGS, "recompute_48l.log"), "rb") as f:
        big.write_bytes(f.read() * 3)
    for paths in ([LOGS], [str(big)]):
        for kinds, ranks in (((), None), (("action,steps",), None), ((), "1,3")):
            keep = event_filter(kinds, ranks)
            for jobs, piece in ((1, 1 << 30), (2, 1 << 30), (2, 20000)):
                want = "".join(jsonl_line(e) + "\n" for e in iter_events(paths, show_progress=False, jobs=jobs,
                                                                        piece=piece) if keep(e))
                got = "".join(iter_event_text(paths, keep, show_progress=False, jobs=jobs, piece=piece))
                assert got == want
                assert want or ranks is not None
