"""Fuzzing `swapwatch verify` with byte-level damage to real worker logs.

The logs are the fixtures of real MindFormers 2.1.0 runs (fixtures/logs/README.md) that verify
PASSes against their configs. Each example applies a few mutations a real log goes through:
truncation, binary garbage, CRLF line ends, ANSI colours, a 10 MB line, two writers interleaved
mid-line, a duplicated block, a dropped or shuffled block. Properties:

* exit code 0, 1, 2 or 4 (NOT VERIFIED); never an internal error (3), never a traceback; bad input is one line;
* when a mutation damaged a strategy line (``Set ... at layer N ...``: its message is no longer
  intact on a line of its own), verify does not PASS: damaged evidence must never read as proof.
"""
import json
import re
import shutil
from xml.etree import ElementTree
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz_helpers import assert_clean_exit, fuzz_settings, run_cli

pytestmark = pytest.mark.fuzz

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "fixtures" / "logs"
CONFIGS = REPO / "fixtures" / "configs"

#: (log, config or None = the config the log printed, worker file name to write)
CASES = [(LOGS / f"swap_case{i}.log", CONFIGS / f"swap_case{i}.yaml") for i in (1, 2, 3, 4)] + [
    (LOGS / "recompute_48l.log", CONFIGS / "recompute_48l.yaml"),
    (LOGS / "msrun_2ranks" / "worker_0.log", None),
]
STRATEGY = re.compile(rb"(Set [^\r\n]*? at layer \d+[^\r\n]*)")
ANSI = re.compile(rb"\x1b\[[0-9;]*m")
BIG_LINE = 10 * 1024 * 1024


def strategy_messages(data: bytes):
    return [m.group(1).rstrip() for m in STRATEGY.finditer(data)]


def intact(message: bytes, data: bytes) -> bool:
    """``message`` still stands as the end of a line (colours and CRs are cosmetic: removed first)."""
    text = ANSI.sub(b"", data).replace(b"\r", b"")
    return message + b"\n" in text or text.endswith(message)


# ---- mutations: (name, function(data, rnd) -> data), rnd = a hypothesis-drawn random.Random ---

def truncate(data, rnd):
    return data[:rnd.randrange(len(data) + 1)]


def garbage(data, rnd):
    at = rnd.randrange(len(data) + 1)
    junk = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
    return data[:at] + junk + data[at:]


def crlf(data, rnd):
    return data.replace(b"\n", b"\r\n")


def ansi(data, rnd):
    lines = data.split(b"\n")
    return b"\n".join(b"\x1b[3%dm" % rnd.randrange(8) + ln + b"\x1b[0m" if rnd.random() < 0.5 else ln
                      for ln in lines)


def huge_line(data, rnd):
    lines = data.split(b"\n")
    at = rnd.randrange(len(lines) + 1)
    return b"\n".join(lines[:at] + [b"x" * BIG_LINE] + lines[at:])


def interleave(data, rnd):
    """Another writer's bytes (a copy of part of this log) cut in mid-line at random points, as two
    processes without line buffering write one file."""
    other = data[rnd.randrange(len(data) + 1):]
    out, i, j = [], 0, 0
    while i < len(data) or j < len(other):
        n = rnd.randrange(1, 400)
        out.append(data[i:i + n])
        i += n
        m = rnd.randrange(0, 400)
        out.append(other[j:j + m])
        j += m
    return b"".join(out)


def duplicate(data, rnd):
    lines = data.split(b"\n")
    a = rnd.randrange(len(lines))
    b = rnd.randrange(a, min(len(lines), a + 30) + 1)
    at = rnd.randrange(len(lines) + 1)
    return b"\n".join(lines[:at] + lines[a:b] + lines[at:])


def drop(data, rnd):
    lines = data.split(b"\n")
    a = rnd.randrange(len(lines))
    return b"\n".join(lines[:a] + lines[a + rnd.randrange(1, 6):])


def shuffle(data, rnd):
    lines = data.split(b"\n")
    a = rnd.randrange(len(lines))
    block = lines[a:a + rnd.randrange(2, 10)]
    rnd.shuffle(block)
    return b"\n".join(lines[:a] + block + lines[a + len(block):])


def flip_digit(data, rnd):
    """Change one digit inside a strategy line (a layer id or a prefetch): a plausible corruption."""
    spans = [m.span(1) for m in STRATEGY.finditer(data)]
    if not spans:
        return data
    lo, hi = rnd.choice(spans)
    digits = [k for k in range(lo, hi) if data[k:k + 1].isdigit()]
    if not digits:
        return data
    k = rnd.choice(digits)
    new = str((int(data[k:k + 1]) + rnd.randrange(1, 10)) % 10).encode()
    return data[:k] + new + data[k + 1:]


MUTATIONS = {f.__name__: f for f in (truncate, garbage, crlf, ansi, huge_line, interleave, duplicate, drop,
                                     shuffle, flip_digit)}


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    """Each case as a worker log in its own msrun-like directory (msrun_2ranks keeps its rank 1)."""
    root = tmp_path_factory.mktemp("fuzzlogs")
    out = []
    for i, (log, cfg) in enumerate(CASES):
        d = root / f"case{i}"
        if log.parent.name == "msrun_2ranks":
            shutil.copytree(log.parent, d)
        else:
            d.mkdir()
            shutil.copy(log, d / "worker_0.log")
        code, out_text, err = run_cli(["verify", str(d)] + (["--config", str(cfg)] if cfg else []))
        assert code == 0 and "PASS" in out_text, (log, out_text[-500:], err)   # the baseline passes
        out.append((d, cfg, (d / "worker_0.log").read_bytes()))
    return out


@fuzz_settings(40)
@given(case=st.integers(0, len(CASES) - 1), names=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3),
       rnd=st.randoms(use_true_random=False), fmt=st.sampled_from(["table", "json", "junit", "markdown"]))
def test_verify_survives_damaged_logs_and_never_passes_damaged_evidence(cases_dir, case, names, rnd, fmt):
    d, cfg, original = cases_dir[case]
    data = original
    for name in names:
        data = MUTATIONS[name](data, rnd)
    worker = d / "worker_0.log"
    worker.write_bytes(data)
    try:
        code, out, err = run_cli(["verify", str(d), "--format", fmt] + (["--config", str(cfg)] if cfg else []))
        e_code, e_out, e_err = run_cli(["events", str(d)])
    finally:
        worker.write_bytes(original)
    what = f"verify --format {fmt} {CASES[case][0].name} after {names}"
    assert_clean_exit(code, err, what)
    assert_clean_exit(e_code, e_err, f"events of {CASES[case][0].name} after {names}")
    if code in (0, 1, 4):
        if fmt == "json":
            json.loads(out)
        elif fmt == "junit":
            ElementTree.fromstring(out.encode("utf-8"))     # CI parses it: it must stay XML
    if e_code == 0:
        for line in e_out.splitlines():
            json.loads(line)
    damaged = [m for m in strategy_messages(original) if not intact(m, data)]
    if damaged:
        assert code != 0, f"{what}: PASS although {damaged[0][:120]!r} was damaged\n{out[-1500:]}"


def test_the_damage_check_sees_damage():
    """The property's own detector: a cut strategy line is damage, colours and CRLF are not."""
    log = CASES[2][0].read_bytes()
    msgs = strategy_messages(log)
    assert len(msgs) == 4 and all(intact(m, log) for m in msgs)
    assert all(intact(m, crlf(ansi(log, __import__("random").Random(1)), None)) for m in msgs)
    cut = log[:log.index(msgs[-1]) + len(msgs[-1]) - 3]
    assert not intact(msgs[-1], cut)


@pytest.mark.parametrize("value", ['{"a": 1if 2 else 3}', '{"a": 0x1for}', '{"a": "\\q"}'])
def test_a_damaged_logged_config_is_still_one_line(tmp_path, value):
    """Found by the fuzzer: a logged repr that is not a literal made Python print a SyntaxWarning
    line of its own before the one-line error."""
    (tmp_path / "worker_0.log").write_text(
        f"2026-11-22 04:02:37,939 - mindformers[x.py:1] - INFO - initial swap_config from dict: {value}\n")
    code, _out, err = run_cli(["verify", str(tmp_path)])
    assert_clean_exit(code, err, value)
    assert code == 2
