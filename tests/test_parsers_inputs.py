"""Inputs (files, msrun dirs, run dirs, nodes, .gz), ranks, expected ranks, completeness, bad paths."""
import os

import pytest

from swapwatch.errors import InputError
from swapwatch.parsers import complete_blocks, read_logs
from swapwatch.parsers.model import ActionEvent, GeometryEvent, StepEvent

ROOT = os.path.join(os.path.dirname(__file__), "..")
LOGS = os.path.join(ROOT, "fixtures", "logs")
RUNS = os.path.join(ROOT, "fixtures", "plot_runs")


def read(*paths, **kw):
    return read_logs([os.path.join(LOGS, p) for p in paths], show_progress=False, **kw)


def test_msrun_dir_two_ranks_every_layer_everywhere():
    run = read("msrun_2ranks")
    assert sorted(run.ranks) == [0, 1] and run.expected_ranks == [0, 1]
    for r in run.ranks.values():
        assert r.complete and not r.truncated and r.layer_settings == 1
        assert [a.layer for a in r.actions] == [0, 1, 2, 3]
        assert len(r.steps) == 3 and r.files == [f"msrun_2ranks/worker_{r.rank}.log"]
    assert run.label == "msrun_2ranks"


def test_missing_rank_and_gzip_worker():
    run = read("msrun_missing_rank")
    assert sorted(run.ranks) == [0, 2] and run.expected_ranks == [0, 1, 2]
    assert [a.layer for a in run.ranks[2].actions] == [0, 1, 2, 3]


def test_several_nodes_at_once(tmp_path):
    for node, ranks in (("node0", (0, 1)), ("node1", (2, 3))):
        d = tmp_path / node / "msrun_log"
        d.mkdir(parents=True)
        for r in ranks:
            text = open(os.path.join(LOGS, "msrun_2ranks", f"worker_{r % 2}.log"), encoding="utf-8").read()
            (d / f"worker_{r}.log").write_text(text.replace(f"rank id: {r % 2}", f"rank id: {r}"))
    run = read_logs([str(tmp_path / "node0"), str(tmp_path / "node1")], show_progress=False)
    assert sorted(run.ranks) == [0, 1, 2, 3] and run.expected_ranks == [0, 1, 2, 3]


def test_content_rank_beats_file_name(tmp_path):
    """msrun --node_rank=-1 names files by local index; the log's own 'rank id:' line wins."""
    d = tmp_path / "n1"
    d.mkdir()
    text = open(os.path.join(LOGS, "msrun_2ranks", "worker_0.log"), encoding="utf-8").read()
    (d / "worker_0.log").write_text(text.replace("rank id: 0", "rank id: 6"))
    assert list(read_logs([str(d)], show_progress=False).ranks) == [6]


def test_swapwatch_run_directories():
    run = read_logs([os.path.join(RUNS, "select-2ranks")], show_progress=False)
    assert sorted(run.ranks) == [0, 1] and run.run_info
    for r in run.ranks.values():
        assert r.complete and not r.truncated and r.layer_settings == 1
        assert r.actions and all(a.origin == "swapwatch" for a in r.actions)
        assert r.steps and r.memory
    single = read_logs([os.path.join(RUNS, "none")], show_progress=False)
    assert len(single.ranks) == 1


def test_truncated_log_is_cut_off_not_complete():
    r = read("truncated.log").ranks[0]
    assert r.truncated and not r.complete and r.layer_settings == 1
    assert [a.layer for a in r.actions] == [0]


def test_stdout_devices_hidden_rank_gets_a_notice():
    run = read("stdout_devices")
    hidden = run.ranks[1]
    assert not hidden.actions and not hidden.complete and not hidden.truncated
    assert [e.what for e in hidden.events if e.kind == "notice"][0] == "no_mindformers_lines"
    assert run.ranks[0].complete


def test_empty_file_gives_an_empty_rank():
    run = read("empty.log")
    r = run.ranks[0]
    assert not r.complete and not r.truncated and r.layer_settings == 0
    assert [e.what for e in r.events] == ["rank_guessed"]


def test_to_frame_per_kind():
    run = read("msrun_2ranks")
    steps = run.to_frame("step")
    assert list(steps["rank"].unique()) == [0, 1] and len(steps) == 6
    acts = run.to_frame("action")
    assert {"layer", "action", "paths", "values", "source"} <= set(acts.columns)
    assert run.to_frame("steps").equals(steps) and run.to_frame("actions").equals(acts)   # plurals
    exits = run.to_frame("exit")                          # a kind these logs lack: empty, with columns
    assert exits.empty and {"rank", "code", "source"} <= set(exits.columns)
    with pytest.raises(ValueError, match="unknown event kind 'stpes'; known: action, exit"):
        run.to_frame("stpes")


def test_public_api_is_exported():
    import swapwatch
    assert swapwatch.read_logs is read_logs


@pytest.mark.parametrize("make, expect", [
    (lambda t: str(t / "nope.log"), "no such file or directory"),
    (lambda t: (t / "d").mkdir() or str(t / "d"), "no worker logs here"),
    (lambda t: ((t / "d2").mkdir(), (t / "d2" / "run.json").write_text("{not json"))[0] or str(t / "d2"),
     "cannot read run.json"),
])
def test_bad_paths_are_one_line_input_errors(tmp_path, make, expect):
    path = make(tmp_path)
    with pytest.raises(InputError) as ei:
        read_logs([path], show_progress=False)
    msg = ei.value.one_line()
    assert expect in msg and "\n" not in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    p = tmp_path / "worker_0.log"
    p.write_text("x\n")
    p.chmod(0)
    with pytest.raises(InputError):
        read_logs([str(p)], show_progress=False)


def test_unreadable_file_as_root_via_directory_error(tmp_path):
    p = tmp_path / "worker_0.log"
    p.mkdir()                                   # a directory named like a log: no log files inside
    with pytest.raises(InputError):
        read_logs([str(p)], show_progress=False)


# ---- completeness rules on hand-built event streams ----------------------------------------------

def _blocks(evs, lines=None):
    return [(b["num_layers"], b["max_layer"], b["complete"]) for b in complete_blocks(evs, lines)]


def G(n, line=1):
    return GeometryEvent(0, f"w:{line}", what="layer_list", value=[[n]])


def A(layer, line):
    return ActionEvent(0, f"w:{line}", layer=layer, action="full_recompute")


def test_block_complete_when_last_layer_logged():
    assert _blocks([G(4), A(0, 2), A(3, 3)]) == [(4, 3, True)]


def test_block_complete_when_the_run_moved_on():
    assert _blocks([G(8), A(0, 2), StepEvent(0, "w:9", step=1)]) == [(8, 0, True)]
    assert _blocks([G(8), A(0, 2)], {"w": 5000}) == [(8, 0, True)]


def test_block_cut_off_at_end_of_file():
    assert _blocks([G(8), A(0, 2)], {"w": 3}) == [(8, 0, False)]


def test_progress_bar_only_on_a_terminal():
    import io
    from swapwatch.parsers.progress import MIN_BYTES, Progress
    quiet = io.StringIO()
    p = Progress(10 * MIN_BYTES, stream=quiet)           # not a TTY: nothing drawn
    p.add(MIN_BYTES)
    p.close()
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    p = Progress(200, stream=loud, force=True)
    p.add(200)
    p.close()
    assert "100.0%" in loud.getvalue()
