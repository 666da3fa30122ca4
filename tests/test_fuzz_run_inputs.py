"""Fuzzing issue 36's two new inputs: the JSON of a run directory (``run.json``) and rank ranges
(``--rank`` / ``--ranks``). docs/reliability.md states the bounds.

run.json: whatever JSON (or bytes) a run directory's ``run.json`` holds, values of any type under
the keys swapwatch reads, nested deep, numbers past the 4,300-digit limit, cut off mid-way,
:func:`swapwatch.json_input.read_run_json` either gives a mapping whose known keys have their
types or one InputError line; ``verify``, ``events`` and ``report`` of that directory are exit 0, 1,
2 or 4, never an internal error.

Rank ranges: :func:`swapwatch.text.parse_ranks` either refuses with one line or gives a
:class:`~swapwatch.text.RankSet` that holds exactly the ranks the text names (checked against a
brute-force reading on small numbers and at every range's ends on huge ones), in memory that
grows with the text, never with the range.

``SWAPWATCH_FUZZ_EXAMPLES=N`` runs N random examples per test (fuzz_helpers).
"""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzz_helpers import assert_clean_exit, fuzz_settings, run_cli
from swapwatch import json_input
from swapwatch.errors import InputError
from swapwatch.text import RankSet, parse_ranks

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "fixtures" / "plot_runs" / "full" / "console.log"
GOOD = json.loads((ROOT / "fixtures" / "plot_runs" / "full" / "run.json").read_text())

# ---- run.json -------------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2 ** 70, max_value=2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
KEYS = sorted(json_input.RUN_JSON_KEYS) + ["config.path", "config.copy", "config.sha256", "other"]


@st.composite
def run_jsons(draw):
    """A run.json as bytes: the real one with some keys' values replaced by anything, or damage."""
    info = dict(GOOD)
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=5)):
        if key.startswith("config."):
            cfg = info.get("config") if isinstance(info.get("config"), dict) else {}
            info["config"] = dict(cfg, **{key[7:]: draw(values)})
        else:
            info[key] = draw(values)
    text = json.dumps(info)
    how = draw(st.sampled_from(["as is", "cut", "deep", "huge int", "top-level", "bytes"]))
    if how == "cut":
        text = text[:draw(st.integers(min_value=0, max_value=len(text)))]
    elif how == "deep":
        n = draw(st.sampled_from([63, 64, 65, 1000, 200_000]))
        text = text[:-1] + ', "deep": ' + "[" * n + "]" * n + "}"
    elif how == "huge int":
        text = text[:-1] + ', "pid": ' + "9" * draw(st.sampled_from([18, 19, 400, 5000])) + "}"
    elif how == "top-level":
        text = json.dumps(draw(values))
    data = text.encode()
    if how == "bytes":
        data = draw(st.binary(max_size=200))
    return data


@fuzz_settings(60)
@given(data=run_jsons())
def test_any_run_json_is_read_or_one_line(data):
    d = Path(tempfile.mkdtemp(prefix="rj"))
    try:
        (d / "run.json").write_bytes(data)
        try:
            info = json_input.read_run_json(str(d))
        except InputError as exc:
            assert "\n" not in exc.one_line() and "run.json" in exc.one_line()
        else:
            assert isinstance(info, dict)
            for key, (ok, _) in json_input.RUN_JSON_KEYS.items():
                assert key not in info or ok(info[key]), (key, info[key])
            assert json_input.depth(info) <= json_input.MAX_DEPTH
    finally:
        shutil.rmtree(d)


@fuzz_settings(40)
@given(data=run_jsons(), cmd=st.sampled_from(["verify", "events", "report"]))
def test_any_run_json_is_a_clean_exit_for_every_reader(data, cmd):
    d = Path(tempfile.mkdtemp(prefix="rd"))
    try:
        shutil.copy(LOG, d / "console.log")
        (d / "run.json").write_bytes(data)
        argv = [cmd, str(d)] + (["-o", str(d / "r.html")] if cmd == "report" else [])
        code, _, err = run_cli(argv)
        assert_clean_exit(code, err, f"{cmd} with run.json {data[:200]!r}")
    finally:
        shutil.rmtree(d)


# ---- rank ranges ------------------------------------------------------------------------------------

NUMBERS = st.one_of(st.integers(min_value=0, max_value=40), st.sampled_from([10 ** 12, 2 ** 63, 10 ** 30, 10 ** 400]))
parts = st.one_of(
    NUMBERS.map(str),
    st.tuples(NUMBERS, NUMBERS).map(lambda ab: f"{ab[0]}-{ab[1]}"),
    st.sampled_from(["", " ", "-", "x", "1-", "-3", "1-2-3", "٣", "1e3", "0x10", " 4 - 6 ", "+2"]))
texts = st.lists(parts, min_size=0, max_size=6).map(",".join)


def _brute(text):
    """The reading parse_ranks promises, by brute force (small numbers only): a set, or None."""
    out = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            return None
        if a < 0 or b < a:
            return None
        out.add((a, b))
    return out or None


@fuzz_settings(300)
@given(text=texts)
def test_a_rank_range_holds_exactly_what_it_names(text):
    spans = _brute(text)
    try:
        got = parse_ranks(text, "--rank")
    except InputError as exc:
        assert spans is None, (text, exc.one_line())
        assert exc.one_line().startswith("--rank") and "\n" not in exc.one_line()
        return
    assert spans is not None and isinstance(got, RankSet), text
    assert len(got.spans) <= len(spans)                      # never more than the text's own ranges
    probes = {p for a, b in spans for p in (a - 1, a, a + 1, b - 1, b, b + 1)} | set(range(0, 45))
    for p in probes:
        assert (p in got) == any(a <= p <= b for a, b in spans), (text, p)
    assert got.count() == len({r for a, b in spans if b < 100 for r in range(a, b + 1)}) or \
        any(b >= 100 for _, b in spans)


@fuzz_settings(40)
@given(text=texts)
def test_a_rank_option_is_a_clean_exit(text):
    code, _, err = run_cli(["events", str(LOG.parent), "--rank", text, "--kind", "memory"])
    assert_clean_exit(code, err, f"events --rank {text!r}")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
def test_a_huge_range_costs_what_its_text_costs():
    import tracemalloc

    tracemalloc.start()
    got = parse_ranks(",".join(f"{i * 10 ** 15}-{i * 10 ** 15 + 10 ** 14}" for i in range(1000)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(got.spans) == 1000 and peak < 2 << 20
