"""A packed rank as a shared template plus line numbers (``parsers/templates.py``) against the
object path it replaces: real fixture logs and generated jobs read both ways give equal events,
summaries and verdicts; ranks with one strategy share one template (sent to the parent once per
worker); a job whose every rank differs stays bounded; ``swapwatch events`` writes the same bytes.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from swapwatch.commands.events import event_filter
from swapwatch.parsers import classify, model, reader, templates
from swapwatch.parsers.model import (ActionEvent, ExitEvent, GeometryEvent, MemoryEvent, NoticeEvent, RankLog,
                                     StepEvent)

ROOT = os.path.join(os.path.dirname(__file__), "..")
LOGS = os.path.join(ROOT, "fixtures", "logs")


def _read(paths, monkeypatch, packed: bool, pool: bool = False):
    monkeypatch.setattr(reader, "PACK_MIN", 0 if packed else 10 ** 9)
    monkeypatch.setattr(reader, "PARALLEL_MIN", 0 if pool else 10 ** 15)
    return reader.read_logs(paths, show_progress=False, jobs=2 if pool else 1)


def _same_ranks(a, b) -> None:
    """Every RankLog method answers the same for the object path (``a``) and the packed one."""
    assert sorted(a.ranks) == sorted(b.ranks)
    for k in a.ranks:
        x, y = a.ranks[k], b.ranks[k]
        assert (x.complete, x.truncated, x.layer_settings, x.files) == \
            (y.complete, y.truncated, y.layer_settings, y.files), k
        ex, ey = x.events, y.events
        assert [type(e) for e in ex] == [type(e) for e in ey] and [e.to_json() for e in ex] == [e.to_json() for e in ey]
        assert (x.kinds(), x.formative(), x.initial_config(), x.geometry()) == \
            (y.kinds(), y.formative(), y.initial_config(), y.geometry()), k
        assert {kind: x.first_source(kind) for kind in x.kinds()} == {kind: y.first_source(kind) for kind in x.kinds()}
        whats = {e.what for e in ex if e.kind == "notice"} | {"no_such_notice"}
        assert {w: x.notices(w) for w in whats} == {w: y.notices(w) for w in whats}, k
        assert x.fatal_after_actions() == y.fatal_after_actions(), k
        assert x.memory_rows() == y.memory_rows()
        if y.__dict__.get("_packed") is not None:     # (an unranked file is never packed)
            model.pack(x)                 # the object path's strategy key, for comparison
            assert x.strategy_key() == y.strategy_key(), k
    assert a.run_events == b.run_events and a.expected_ranks == b.expected_ranks


def _templated(run) -> list:
    return [r.rank for r in run.ranks.values() if isinstance(r.__dict__.get("_packed"), templates.Templated)]


@pytest.mark.parametrize("name", ["msrun_2ranks", "cpu_swap", "stdout_devices", "msrun_missing_rank",
                                  "truncated.log", "swap_case2.log.gz", "pynative_pp2"])
def test_fixture_logs_read_as_templates_equal_the_object_path(name, monkeypatch):
    path = os.path.join(LOGS, name)
    plain = _read([path], monkeypatch, packed=False)
    packed = _read([path], monkeypatch, packed=True)
    _same_ranks(plain, packed)
    if name == "msrun_2ranks":        # plain MindFormers worker logs: the template path from the 2nd rank on
        assert _templated(packed) == [1]
    if name == "cpu_swap":            # SWAPWATCH events overrule text lines: the object path
        assert not _templated(packed)


def _gen_job(tmp_path, ranks: int, size_kb: int) -> str:
    out = tmp_path / f"job_{ranks}x{size_kb}"
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_job.py"), "--ranks", str(ranks),
                    "--size-kb", str(size_kb), "--out", str(out)], check=True, capture_output=True)
    return str(out)


def test_generated_job_through_the_pool_equals_the_object_path(tmp_path, monkeypatch):
    job = _gen_job(tmp_path, 24, 100)
    # one rank cut off mid-line inside its strategy block, another cut after a whole line
    for r, mid in ((4, True), (9, False)):
        p = os.path.join(job, f"worker_{r}.log")
        with open(p, "rb") as f:
            data = f.read()
        cut = data.index(b"Set select recompute on at layer 20") + 50
        if not mid:
            cut = data.rindex(b"\n", 0, cut) + 1
        with open(p, "wb") as f:
            f.write(data[:cut])
    plain = _read([job], monkeypatch, packed=False)
    packed = _read([job], monkeypatch, packed=True, pool=True)
    _same_ranks(plain, packed)
    assert packed.ranks[4].truncated and packed.ranks[9].truncated and packed.ranks[0].complete
    assert any(e.kind == "notice" and e.what == "partial_line" for e in packed.ranks[4].events)
    assert len(_templated(packed)) >= 24 - 2 * 6      # the first of each sequence per worker: objects
    # the ranks that log the common strategy share one template per worker, and one strategy key
    tpls = {id(packed.ranks[r].__dict__["_packed"].template) for r in _templated(packed)}
    assert len(tpls) <= 2 * 6       # 2 workers x (common + 3 variants + 2 cut ranks)
    keys = {id(packed.ranks[r].strategy_key()) for r in packed.ranks}
    assert len(keys) == len({packed.ranks[r].strategy_key() for r in packed.ranks})


def test_a_job_whose_every_rank_differs_stays_bounded(tmp_path, monkeypatch):
    with open(os.path.join(LOGS, "msrun_2ranks", "worker_0.log"), encoding="utf-8") as f:
        text = f.read()
    anchor = "Set op_swap at layer 3: .attention, value=10"
    assert anchor in text
    job = tmp_path / "job"
    job.mkdir()
    def write(r: int, value: int) -> None:     # a value in a strategy line: its own template
        t = text.replace("This node 0 rank id: 0", f"This node 0 rank id: {r}")
        (job / f"worker_{r}.log").write_text(t.replace(anchor, anchor[:-2] + str(value)), encoding="utf-8")

    for r in range(20):               # every rank differs: no template at all
        write(r, 100 + r)
    plain = _read([str(job)], monkeypatch, packed=False)
    packed = _read([str(job)], monkeypatch, packed=True)
    _same_ranks(plain, packed)
    assert not _templated(packed)
    assert all(r.__dict__.get("_packed") is not None for r in packed.ranks.values())   # packed events
    for r in range(20):               # pairs of equal ranks: 10 templates wanted, 5 made
        write(r, 100 + r // 2)
    monkeypatch.setattr(templates, "TEMPLATE_MAX", 5)
    plain = _read([str(job)], monkeypatch, packed=False)
    packed = _read([str(job)], monkeypatch, packed=True)
    _same_ranks(plain, packed)
    made = {id(r.__dict__["_packed"].template) for r in packed.ranks.values() if r.rank in _templated(packed)}
    assert len(_templated(packed)) == 5 and len(made) == 5
    # the bound is per read: the next read in this process makes templates again
    again = _read([os.path.join(LOGS, "msrun_2ranks")], monkeypatch, packed=True)
    assert _templated(again) == [1] and not templates._TEMPLATES      # (and none kept after it)


def test_a_template_travels_once_then_by_id(tmp_path, monkeypatch):
    import pickle

    run = _read([_gen_job(tmp_path, 4, 100)], monkeypatch, packed=True)
    assert _templated(run) == [1, 2, 3]
    r0, r1 = run.ranks[1], run.ranks[2]
    assert r0.__dict__["_packed"].template is r1.__dict__["_packed"].template
    # outside a read (a user pickling a RunLog) every pickle carries its template
    full = pickle.dumps(r1)
    templates.reset()
    assert pickle.loads(full).events == r1.events
    # during a read (so in the pool workers): in full the first time, then by id
    monkeypatch.setattr(templates, "_SENT", set())
    monkeypatch.setattr(templates, "_BY_ID", [True])
    first, second = pickle.dumps(r0), pickle.dumps(r1)
    path = next(e.paths[0] for e in r0.events if e.kind == "action" and e.paths).encode()
    assert path in first and path not in second     # the second names the template by its id
    templates.reset()                           # as in the parent: nothing received yet
    a, b = pickle.loads(first), pickle.loads(second)
    assert a.__dict__["_packed"].template is b.__dict__["_packed"].template
    assert [e.to_json() for e in b.events] == [e.to_json() for e in r1.events]
    assert (b.kinds(), b.strategy_key(), b.complete) == (r1.kinds(), r1.strategy_key(), r1.complete)


def test_step_and_memory_lines_do_not_fill_the_classify_cache(tmp_path, monkeypatch):
    job = _gen_job(tmp_path, 3, 600)
    monkeypatch.setattr(classify, "_CACHE", [{}, {}, {}])
    # and the lines the scanner hands over by their bytes, cold too: remembered by an earlier test,
    # no line of this job would reach classify's cache
    monkeypatch.setattr(reader, "_MEMO", {})
    monkeypatch.setattr(reader, "_MEMO_CPP", {})
    monkeypatch.setattr(reader, "_STRETCHES", [])      # they hold the memo tables' entries
    _read([job], monkeypatch, packed=True)
    kinds = {e.kind for entry in classify.cached_entries() for e in entry.events}
    assert kinds and not kinds & {"step", "memory"}
    assert len(classify.cached_entries()) < 400        # the strategy block and the C++ warnings, not 3 x 1,000 lines


@pytest.mark.parametrize("kinds,ranks", [((), None), (("action",), None), ((), "3-5"), (("notice", "memory"), "1,7")])
def test_events_text_from_templates_is_the_object_path_text(tmp_path, kinds, ranks):
    job = _gen_job(tmp_path, 10, 100)
    paths = [job, os.path.join(LOGS, "msrun_2ranks"), os.path.join(LOGS, "cpu_swap")]
    select = event_filter(kinds, ranks)
    fast = "".join(reader.iter_event_text(paths, select, jobs=1, show_progress=False))
    slow = select.text(e for e in reader.iter_events(paths, jobs=1, show_progress=False))
    assert fast == slow and fast


def _random_rank(rng: random.Random):
    """A random template (geometry, actions, crash/moved-on notices) and random extras around it."""
    def one():
        r = rng.random()
        if r < 0.12:
            return GeometryEvent(None, "", what="layer_list", value=[[rng.randint(1, 4), rng.randint(0, 4)]])
        if r < 0.6:
            return ActionEvent(None, "", layer=rng.randint(0, 7), action="full_recompute")
        if r < 0.7:
            return NoticeEvent(None, "", what=rng.choice(["traceback", "config_error", "offload_outside_lazy_inline",
                                                          "cell_not_op"]), data={"prim": rng.choice(["a", None])})
        if r < 0.75:
            return ExitEvent(None, "", code=rng.choice([0, 1]))
        return GeometryEvent(None, "", what="pp_ids", value=[0, 1])
    entries = [classify.Entry(i, [one() for _ in range(rng.choice([1, 1, 2]))]) for i in range(rng.randint(0, 12))]
    line = 0
    lines = []
    for _ in entries:
        line += rng.randint(1, 120)
        lines.append(line)
    extras, positions = [], []
    for _ in range(rng.randint(0, 6)):
        r = rng.random()
        e = (StepEvent(None, "", step=1) if r < 0.3 else MemoryEvent(None, "", metric="m", bytes=1) if r < 0.6 else
             NoticeEvent(None, "", what=rng.choice(["partial_line", "tb2"]), data={}))
        extras.append(e)
        positions.append(rng.randint(0, len(entries)))
    order = sorted(range(len(extras)), key=lambda i: positions[i])
    extras, positions = [extras[i] for i in order], [positions[i] for i in order]
    for e, p in zip(extras, positions):          # an extra's line: between its neighbours' lines
        e.source = f"f.log:{(lines[p - 1] if p else 0)}"
        e.rank = 3
    return entries, lines, positions, extras, line + rng.randint(0, 400)


def test_template_summary_and_completeness_equal_the_event_list_ones():
    rng = random.Random(12)
    compared = 0
    for _ in range(3000):
        entries, lines, positions, extras, total = _random_rank(rng)
        t = templates.Template(("test", compared), entries)
        if not entries or not templates.fits(extras, t.info):
            continue
        events = list(templates.merged(entries, lines, positions, extras, 3, "f.log:"))
        want = RankLog(3, files=["f.log"])
        want.events = events
        reader._settle(want, {"f.log": total})
        model.pack(want)
        got = RankLog(3, files=["f.log"])
        reader._settle_found(got, t, lines, positions, extras, "f.log", {"f.log": total})
        assert (got.complete, got.truncated, got.layer_settings) == (want.complete, want.truncated, want.layer_settings)
        memo = {**t.info.shared, **templates.summary(t.info, lines, positions, extras, 3, "f.log:")}
        for key in ("kinds", "first", "fatal_after_actions", "notices", "strategy", "geometry"):
            assert memo[key] == want.__dict__["_memo"][key], key
        compared += 1
    assert compared > 1000
