"""Many ranks: packed ranks and folded comparisons give exactly the findings of one rank at a time.

A 64-rank msrun job is generated from the real 2-rank fixture (each copy names its own rank id),
three ranks altered: rank 5 lost a ``Set op_swap`` line, rank 20 logs another prefetch, rank 47's
log is cut off inside the strategy block. The job is read twice, once with every rank packed
(``reader.PACK_MIN = 0``: the path 1,000+ rank jobs take) and once with none packed (the path of
small jobs, unchanged), and verified; the findings must be identical, and be exactly the ones the
alterations cause.
"""
from __future__ import annotations

import os

import pytest

from swapwatch.report.verify import document
from swapwatch.parsers import model, reader
from swapwatch.commands.verify import verify

pytestmark = pytest.mark.scale

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs", "msrun_2ranks", "worker_0.log")
RANKS = 64


def _job(tmp_path) -> str:
    with open(FIXTURE, encoding="utf-8") as f:
        text = f.read()
    assert "This node 0 rank id: 0" in text and "Set op_swap at layer 2:" in text and "value=10" in text
    job = tmp_path / "job"
    job.mkdir()
    for r in range(RANKS):
        t = text.replace("This node 0 rank id: 0", f"This node 0 rank id: {r}")
        if r == 5:
            t = "".join(x for x in t.splitlines(True) if "Set op_swap at layer 2:" not in x)
        elif r == 20:
            t = t.replace("Set op_swap at layer 3: .attention, value=10", "Set op_swap at layer 3: .attention, value=12")
        elif r == 47:
            t = t[:t.index("Set op_swap at layer 2:")]
            t = t[:t.rindex("\n") + 1]
        (job / f"worker_{r}.log").write_text(t, encoding="utf-8")
    return str(job)


def _findings(job, monkeypatch, pack_min):
    monkeypatch.setattr(reader, "PACK_MIN", pack_min)
    result = verify([job])
    packed = [r.__dict__.get("_packed") is not None for r in result.runlog.ranks.values()]
    return result, packed


def test_packed_and_folded_ranks_find_exactly_what_unpacked_ranks_find(tmp_path, monkeypatch):
    job = _job(tmp_path)
    plain, packed_flags = _findings(job, monkeypatch, 10 ** 9)
    assert not any(packed_flags)
    packed, packed_flags = _findings(job, monkeypatch, 0)
    assert all(packed_flags) and len(packed_flags) == RANKS
    assert [f.to_json() for f in packed.findings] == [f.to_json() for f in plain.findings]
    assert document(packed) == document(plain)
    # the runs' events read back from packed ranks are the events of the unpacked ones
    for r in range(RANKS):
        assert [e.to_json() for e in packed.runlog.ranks[r].events] == \
               [e.to_json() for e in plain.runlog.ranks[r].events]
    # what a packed rank answers from its summary is what the unpacked rank computes from events
    tallied = 0
    for r in range(RANKS):
        a, b = packed.runlog.ranks[r], plain.runlog.ranks[r]
        whats = {e.what for e in b.events if e.kind == "notice"}
        assert {w: a.notices(w) for w in whats} == {w: b.notices(w) for w in whats}
        tallied += sum(a.notices(w).n for w in whats)
        assert a.notices("no_such_notice").n == b.notices("no_such_notice").n == 0
        assert (a.kinds(), a.formative(), a.initial_config(), a.geometry()) == \
            (b.kinds(), b.formative(), b.initial_config(), b.geometry())
        assert [a.first_source(k) for k in b.kinds()] == [b.first_source(k) for k in b.kinds()]
        assert a.memory_rows() == b.memory_rows() == [(e.step, e.metric, e.bytes, e.origin, e.source)
                                                      for e in b.memory]
    assert sum(len(plain.runlog.ranks[r].memory_rows()) for r in range(RANKS)) > 0
    assert tallied == sum(e.kind == "notice" for r in range(RANKS) for e in plain.runlog.ranks[r].events) > 0
    fired = sorted({(f.code, f.rank) for f in plain.findings if f.code != "SW112"})
    assert fired == [("SW101", 5), ("SW103", 20), ("SW106", 47), ("SW401", 5), ("SW401", 20)]
    # the fixture's CPU run warns that the offload moved nothing: every rank whose log reaches it
    assert sorted(f.rank for f in plain.findings if f.code == "SW112") == [r for r in range(RANKS) if r != 47]
    by = {(f.code, f.rank): f for f in plain.findings}
    assert by[("SW101", 5)].layer == 2
    assert by[("SW103", 20)].layer == 3 and by[("SW103", 20)].source.endswith("worker_20.log:26")
    assert "62 ranks" in by[("SW401", 20)].message      # not rank 20, not rank 47 (cut before layer 3)
    # rank 47 is cut after layer 1: its missing layers are SW106, not SW101 or SW401
    assert by[("SW106", 47)].layer == 1
    # the folded comparison: every unaltered rank reuses rank 0's verdicts with its own sources
    comp = packed.comparison
    assert {r for r, d in comp.ranks.items() if d.same_as is None} == {0, 5, 20, 47}
    seen = comp.ranks[63].seen
    assert seen[3][0].source.endswith("worker_63.log:26")


def test_equal_strategy_keys_that_are_other_objects_fold_the_same(tmp_path, monkeypatch):
    """compare matches a packed rank to the ranks already compared by the identity of its strategy
    key (one shared object per distinct strategy); an equal key that is another object only misses
    that shortcut: the same verdicts and the same folding, found by content."""
    job = _job(tmp_path)
    shared, _ = _findings(job, monkeypatch, 0)
    real = model.RankLog.strategy_key

    def copied_key(self):
        key = real(self)
        return None if key is None else tuple(list(key))       # equal, never the same object

    monkeypatch.setattr(model.RankLog, "strategy_key", copied_key)
    copied, _ = _findings(job, monkeypatch, 0)
    assert document(copied) == document(shared)
    assert {r: d.same_as for r, d in copied.comparison.ranks.items()} == \
        {r: d.same_as for r, d in shared.comparison.ranks.items()}


@pytest.mark.parametrize("config", ["swap_case3", "swap_case2"])
def test_with_config_packed_ranks_find_what_unpacked_ranks_find(tmp_path, monkeypatch, config):
    """SW107 / SW109 compare each distinct set of logged value objects with --config once (packed
    ranks share them, unpacked ranks do not): the findings are the same either way. swap_case3 is
    the config these logs ran (only the altered ranks differ), swap_case2 another one (SW109)."""
    job = _job(tmp_path)
    path = os.path.join(os.path.dirname(FIXTURE), "..", "..", "configs", f"{config}.yaml")
    results = []
    for pack_min in (10 ** 9, 0):
        monkeypatch.setattr(reader, "PACK_MIN", pack_min)
        results.append(document(verify([job], config_path=path)))
    assert results[0] == results[1]
    codes = {f["code"] for f in results[0]["findings"]}
    assert ("SW109" in codes) == (config == "swap_case2")


def test_unpacked_window_is_bounded(tmp_path, monkeypatch):
    job = _job(tmp_path)
    monkeypatch.setattr(reader, "PACK_MIN", 0)
    monkeypatch.setattr(model, "UNPACKED_MAX", 4)
    run = reader.read_logs([job], show_progress=False)
    for r in run.ranks.values():
        assert r.events                      # unpack every rank once
    unpacked = [r for r in run.ranks.values() if r.__dict__.get("_events") is not None]
    assert len(unpacked) <= 4


def test_a_packed_rank_that_is_assigned_new_events_keeps_them(tmp_path, monkeypatch):
    job = _job(tmp_path)
    monkeypatch.setattr(reader, "PACK_MIN", 0)
    run = reader.read_logs([job], show_progress=False)
    r = run.ranks[3]
    kept = r.events[:2]
    r.events = kept
    for other in run.ranks.values():          # push rank 3 out of the unpacked window
        _ = other.events
    assert r.events == kept and r.__dict__.get("_packed") is None


@pytest.mark.parametrize("files", [1, 3])
def test_progress_names_files_and_bytes(files):
    import io

    from swapwatch.parsers.progress import Progress
    out = io.StringIO()
    p = Progress(3_000_000, stream=out, force=True, files=files, interval=0)
    p.add(1_500_000)
    p.file_done()
    p.close()
    text = out.getvalue()
    assert "2/3 MB" in text and ("1/3 files" in text) == (files == 3)
    quiet = io.StringIO()
    q = Progress(10 ** 12, stream=quiet)       # not a terminal: never drawn, however big
    q.add(10 ** 12)
    q.close()
    assert quiet.getvalue() == ""


def test_ranks_whose_logged_config_differs_are_found_packed_as_unpacked(tmp_path, monkeypatch):
    # SW401 compares the logged ``initial ... from dict`` values once per shared summary of packed ranks
    # (RankLog.shared_values): two ranks logging another micro_batch_num (one config, two ranks that
    # share it) are still each found, as when every rank is read unpacked
    job = _job(tmp_path)
    for r in (9, 33):
        p = os.path.join(job, f"worker_{r}.log")
        with open(p, encoding="utf-8") as f:
            text = f.read()
        assert "'micro_batch_num': 1," in text
        with open(p, "w", encoding="utf-8") as f:
            f.write(text.replace("'micro_batch_num': 1,", "'micro_batch_num': 4,"))
    plain, _ = _findings(job, monkeypatch, 10 ** 9)
    packed, packed_flags = _findings(job, monkeypatch, 0)
    assert all(packed_flags)
    assert [f.to_json() for f in packed.findings] == [f.to_json() for f in plain.findings]
    config = [f for f in packed.findings if f.code == "SW401" and "initial config" in f.message]
    assert [(f.rank, f.op) for f in config] == [(9, "parallel_config"), (33, "parallel_config")]
    shared = [r.shared_values("initial_config") for r in packed.runlog.ranks.values()]
    assert all(v is not None for v in shared) and len({id(v) for v in shared}) < RANKS // 2    # folded
    assert all(r.shared_values("initial_config") is None for r in plain.runlog.ranks.values())
