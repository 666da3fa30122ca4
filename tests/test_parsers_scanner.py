"""The scanner: chunk boundaries, parallel pieces, hostile bytes, huge lines, gzip — same events always."""
import gzip
import io
import json
import os
import shutil

from hypothesis import HealthCheck, given, settings, strategies as st

from swapwatch.parsers import iter_events, read_logs
from swapwatch.parsers.classify import classify
from swapwatch.parsers.scanner import Needles, Scan, is_prefixed

LOGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs")
SAMPLES = ["msrun_2ranks/worker_0.log", "quirks.log", "garbage.log", "truncated.log", "swap_case1.log"]


def scan_bytes(data: bytes, chunk: int, prefixed=None):
    """All events of ``data`` scanned with ``chunk``-byte reads (the scanner's own loop, in memory)."""
    pre = is_prefixed(data[:1 << 20]) if prefixed is None else prefixed
    scan = Scan(io.BytesIO(data), Needles.for_file(pre), chunk=chunk)
    out = []
    for line, text in scan:
        out.extend(classify(text, 0, str(line), follow=scan.follow, prefixed=pre))
    return [json.dumps(e.to_json(), sort_keys=True, default=str) for e in out], scan.newlines


def sample(name):
    with open(os.path.join(LOGS, name), "rb") as fh:
        return fh.read()


REFERENCE = {name: scan_bytes(sample(name), 1 << 20) for name in SAMPLES}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(SAMPLES), chunk=st.integers(min_value=1, max_value=700))
def test_chunk_size_never_changes_events(name, chunk):
    assert scan_bytes(sample(name), chunk) == REFERENCE[name]


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10 ** 6), max_size=6))
def test_random_piece_splits_equal_whole_file(tmp_path_factory, cuts):
    """read_logs cuts big files into line-aligned pieces; any cut points give the same events."""
    d = tmp_path_factory.mktemp("pieces")
    path = d / "worker_0.log"
    shutil.copy(os.path.join(LOGS, "msrun_2ranks", "worker_0.log"), path)
    whole = [e.to_json() for e in iter_events([str(path)], show_progress=False)]
    size = path.stat().st_size
    piece = max(64, (cuts[0] % size) if cuts else size // 3)
    parts = [e.to_json() for e in iter_events([str(path)], show_progress=False, piece=piece, jobs=1)]
    assert parts == whole


def test_parallel_pool_equals_sequential(tmp_path, monkeypatch):
    from swapwatch.parsers import reader
    monkeypatch.setattr(reader, "PARALLEL_MIN", 0)
    path = tmp_path / "worker_0.log"
    shutil.copy(os.path.join(LOGS, "recompute_48l.log"), path)
    seq = [e.to_json() for e in iter_events([str(path)], show_progress=False, piece=2000, jobs=1)]
    par = [e.to_json() for e in iter_events([str(path)], show_progress=False, piece=2000, jobs=2)]
    assert par == seq and len(seq) == 105


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=4000), chunk=st.integers(min_value=1, max_value=300), prefixed=st.booleans())
def test_random_bytes_never_raise(data, chunk, prefixed):
    scan_bytes(data, chunk, prefixed)


@settings(max_examples=80, deadline=None)
@given(junk=st.lists(st.sampled_from([b"\r\n", b"\x1b[31m", b"\xff\xfe", b"\x00", b"SWAPWATCH {\"", b"Traceback "
                                      b"(most recent call last):\n", b"] - INFO - ", b"emory size: 12M\n", b"\n",
                                      b"Set op_swap at layer ", b"peak used mem:", b"{ Epoch:[", b"\t  "]),
                     max_size=30),
       chunk=st.integers(min_value=1, max_value=200))
def test_needle_soup_never_raises(junk, chunk):
    data = b"".join(junk) + sample("quirks.log")[:2000] + b"".join(reversed(junk))
    scan_bytes(data, chunk)
    scan_bytes(data, chunk, prefixed=True)


def test_line_numbers_count_crlf_and_garbage():
    evs, newlines = REFERENCE["garbage.log"]
    acts = [json.loads(e) for e in evs if json.loads(e)["kind"] == "action"]
    assert [(a["layer"], a["value"]) for a in acts] == [(0, 20), (3, 20)]     # ANSI-coloured, CRLF lines
    text = sample("garbage.log").split(b"\n")
    for a in acts:
        assert b"Set layer swap at layer %d" % a["layer"] in text[int(a["source"]) - 1]
    assert newlines == sample("garbage.log").count(b"\n")


def test_ten_megabyte_single_line(tmp_path):
    big = tmp_path / "big.log"
    with open(big, "wb") as fh:
        fh.write(sample("swap_case2.log"))
        fh.write(b"x" * (10 * 1024 * 1024) + b" Set layer swap at layer 9 and value is: 1\n")
        fh.write(b"SWAPWATCH " + b'{"v":1,"kind":"step","rank":0,"step":7,"loss":1.5,"pad":"' + b"y" * 100
                 + b'"}\n')
    evs = list(iter_events([str(big)], show_progress=False, chunk=1 << 20))
    assert [e.layer for e in evs if e.kind == "action"] == [0, 3]   # prefixed log: the raw giant line is no record
    steps = [e for e in evs if e.kind == "step"]
    assert steps[0].step == 7 and steps[0].source.endswith(":20")


def test_giant_line_without_newline_is_bounded(tmp_path):
    from swapwatch.parsers import scanner
    data = b"a" * 300 + b"Traceback (most recent call last):" + b"b" * 5000
    scan = Scan(io.BytesIO(data), Needles.for_file(False), chunk=64, max_line=128)
    list(scan)                              # pieces of a line longer than max_line: no error, bounded
    assert scanner.MAX_LINE >= 16 << 20


def test_gzip_equals_plain(tmp_path):
    plain = [e.to_json() for e in iter_events([os.path.join(LOGS, "swap_case2.log")], show_progress=False)]
    gz = [e.to_json() for e in iter_events([os.path.join(LOGS, "swap_case2.log.gz")], show_progress=False)]
    for e in plain + gz:
        e["source"] = e["source"].rsplit(":", 1)[1]
    assert gz == plain


def test_truncated_gzip_reads_like_a_truncated_plain_log(tmp_path):
    """A .gz cut off mid-stream ends where its data ends, as the same log cut off in plain text does
    (issue 22 item 16: one truncated rank no longer stops the whole verify); no gzip at all is still
    one line, exit 2."""
    import zlib

    import pytest
    from swapwatch.errors import InputError
    cut = gzip.compress(sample("swap_case3.log"))[:900]
    p = tmp_path / "worker_0.log.gz"
    p.write_bytes(cut)
    plain = tmp_path / "plain" / "worker_0.log"
    plain.parent.mkdir()
    plain.write_bytes(zlib.decompressobj(wbits=31).decompress(cut))
    assert 0 < plain.stat().st_size < len(sample("swap_case3.log"))

    def events(path):
        out = [e.to_json() for e in iter_events([str(path)], show_progress=False)]
        for e in out:
            e["source"] = e["source"].rsplit(":", 1)[1]
        return out
    assert events(p) == events(plain) and events(p)
    bad = tmp_path / "worker_1.log.gz"
    bad.write_bytes(b"not gzip at all\n")
    with pytest.raises(InputError) as ei:
        read_logs([str(bad)], show_progress=False)
    assert "worker_1.log.gz" in ei.value.one_line()


def test_interleaved_processes_keep_their_lines():
    """Two processes writing one file: each whole line is still parsed on its own."""
    a = sample("swap_case3.log").splitlines(keepends=True)
    b = sample("msrun_2ranks/worker_1.log").splitlines(keepends=True)
    mixed = b"".join(x for pair in zip(a, b) for x in pair)
    evs = [json.loads(e) for e in scan_bytes(mixed, 97)[0]]
    assert [e["layer"] for e in evs if e["kind"] == "action"] == [0, 1, 2, 3]
