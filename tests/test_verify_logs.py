"""verify end to end: real worker-log text -> parsers -> strategy engine -> rules -> exit code.

Worker logs are written with MindFormers' exact texts for the documented outcomes (reference
§2.6, §3.7, §5.1; helpers in verify_helpers), so the engine's per-layer decisions and the
parsers' reading are cross-checked against the documentation, not against themselves. Mutated
copies (a deleted line, a changed prefetch, a moved layer id, a truncated file, a disagreeing
rank) must fail with the right code. Skips while the engine or the parsers are not in the tree.
"""
import json
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

import verify_helpers as vh

parsers = pytest.importorskip("swapwatch.parsers")
if not hasattr(parsers, "read_logs"):
    pytest.skip("parsers (read_logs) not in the tree yet", allow_module_level=True)
config_mod = pytest.importorskip("swapwatch.config")
strategy = pytest.importorskip("swapwatch.strategy")
if not hasattr(strategy, "plan"):
    pytest.skip("strategy.plan not in the tree yet", allow_module_level=True)

from swapwatch.cli import main                      # noqa: E402
from swapwatch.verify import verify                 # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ENV = {"ENABLE_LAZY_INLINE_NO_PIPELINE": "1"}       # the documented swap runs set it (no pp)

HEAD = """\
context: {mode: 0, device_target: Ascend, memory_optimize_level: O0}
"""
OPS3 = """\
  op_swap:
    - {op_name: 'attention', backward_prefetch: 20, layers: [0, 1, 2]}
    - {op_name: 'attention', backward_prefetch: 10, layers: [3]}
    - {op_name: 'feed_forward', backward_prefetch: 15, layers: [1, 2]}
"""
SCENARIOS = {
    "swap_case1": (HEAD + "model: {model_config: {num_layers: 4}}\nparallel_config: {pipeline_stage: 1}\n"
                   "swap_config:\n  swap: True\n  default_prefetch: 10\n",
                   lambda: vh.swap_case(1), {}, {"swap": True, "default_prefetch": 10}),
    "swap_case2": (HEAD + "model: {model_config: {num_layers: 4}}\nparallel_config: {pipeline_stage: 1}\n"
                   "swap_config:\n  swap: True\n  layer_swap:\n    - {backward_prefetch: 20, layers: [0, 3]}\n",
                   lambda: vh.swap_case(2), {},
                   {"swap": True, "layer_swap": [{"backward_prefetch": 20, "layers": [0, 3]}]}),
    "swap_case3": (HEAD + "model: {model_config: {num_layers: 4}}\nparallel_config: {pipeline_stage: 1}\n"
                   "swap_config:\n  swap: True\n" + OPS3,
                   lambda: vh.swap_case(3), {},
                   {"swap": True, "op_swap": [
                       {"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
                       {"op_name": "attention", "backward_prefetch": 10, "layers": [3]},
                       {"op_name": "feed_forward", "backward_prefetch": 15, "layers": [1, 2]}]}),
    "swap_case4": (HEAD + "model: {model_config: {num_layers: 4}}\nparallel_config: {pipeline_stage: 1}\n"
                   "recompute_config:\n  select_recompute: {'feed_forward': [0, 3]}\n"
                   "swap_config:\n  swap: True\n" + OPS3,
                   lambda: vh.swap_case(4), {"select_recompute": {"feed_forward": [0, 3]}},
                   {"swap": True, "op_swap": [
                       {"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
                       {"op_name": "attention", "backward_prefetch": 10, "layers": [3]},
                       {"op_name": "feed_forward", "backward_prefetch": 15, "layers": [1, 2]}]}),
    "recompute_48l": ("""\
model:
  model_config: {num_layers: 48, pp_interleave_num: 2, offset: [[0,1,1,1,1],[1,1,1,1,0]]}
parallel_config: {pipeline_stage: 5}
parallel: {pipeline_config: {pipeline_interleave: True}}
recompute_config:
  recompute: [[2,1,0,0,0],[1,0,0,0,0]]
  select_recompute:
    'feed_forward\\.w1\\.activation\\.silu': True
    'feed_forward\\.mul': True
    'feed_forward\\.w1\\.matmul': [[1,0,0,0,0],[2,1,0,0,0]]
    'feed_forward\\.w3\\.matmul': [2,1,0,0,0]
  select_comm_recompute: ['ffn_norm\\.norm','attention_norm\\.norm']
""", vh.recompute_48l,
        {"recompute": [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]],
         "select_recompute": {vh.SILU: True, vh.MUL: True, vh.W1M: [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]],
                              vh.W3M: [2, 1, 0, 0, 0]},
         "select_comm_recompute": [vh.FFN_NORM, vh.ATT_NORM]}, {}),
}
PARALLEL = {"swap_case1": 1, "swap_case2": 1, "swap_case3": 1, "swap_case4": 1, "recompute_48l": 5}


def make_run(tmp_path: Path, name: str, ranks=(0, 1)) -> Path:
    """A msrun log dir with one worker log per rank, and the config next to it."""
    text, plan_fn, recompute, swap = SCENARIOS[name]
    cfg = FIXTURES / "configs" / f"{name}.yaml"
    cfg_path = tmp_path / f"{name}.yaml"
    if cfg.exists():
        shutil.copy(cfg, cfg_path)
    else:
        cfg_path.write_text(text, encoding="utf-8")
    plan = plan_fn()
    header = vh.header_messages(plan, recompute, swap, {"pipeline_stage": PARALLEL[name],
                                                          "data_parallel": 1, "model_parallel": 1})
    logs = tmp_path / "msrun_log"
    logs.mkdir()
    for r in ranks:
        (logs / f"worker_{r}.log").write_text(vh.worker_log(plan, header), encoding="utf-8")
    return logs


def edit(path: Path, fn) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(fn(lines)), encoding="utf-8")


def line_no(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


# --- genuine logs verify clean -----------------------------------------------------------------

@pytest.mark.parametrize("name", list(SCENARIOS))
def test_documented_runs_verify_clean_against_their_configs(tmp_path, name):
    logs = make_run(tmp_path, name)
    r = verify([str(logs)], config_path=str(tmp_path / f"{name}.yaml"), env=ENV)
    errors = [(f.code, f.rank, f.layer, f.message) for f in r.findings if f.severity == "error"]
    assert errors == [] and r.verdict == "pass" and r.ranks == [0, 1]
    mine = {f.code for f in r.findings} - {"SW303"}
    assert mine == ({"SW105"} if name == "recompute_48l" else set())


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_documented_runs_verify_clean_from_the_logs_own_config(tmp_path, name):
    logs = make_run(tmp_path, name)
    r = verify([str(logs)], env=ENV)
    assert [f for f in r.findings if f.severity == "error"] == [] and r.verdict == "pass"
    assert r.config_source.startswith("rank 0 log")


def test_without_config_and_without_initial_lines_is_exit_2(tmp_path, capsys):
    logs = make_run(tmp_path, "swap_case3")
    for p in logs.iterdir():
        edit(p, lambda ls: [x for x in ls if "from dict" not in x])
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(logs)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--config" in err and len(err.strip().splitlines()) == 1


# --- mutated copies fail with the right code ---------------------------------------------------

def _verify(tmp_path, logs, name, **kw):
    return verify([str(logs)], config_path=str(tmp_path / f"{name}.yaml"), env=ENV, **kw)


def test_deleted_set_line_is_sw101(tmp_path):
    logs = make_run(tmp_path, "recompute_48l")
    w0 = logs / "worker_0.log"
    edit(w0, lambda ls: [x for x in ls if "Set select recompute on at layer 25:" not in x])
    r = _verify(tmp_path, logs, "recompute_48l")
    bad = [(f.code, f.rank, f.layer, f.op) for f in r.findings if f.severity == "error"]
    assert ("SW101", 0, 25, "feed_forward.w1.matmul") in bad
    assert {c for c, *_ in bad} == {"SW101", "SW401"} and r.exit_code == 1
    f = next(f for f in r.findings if f.code == "SW101")
    assert re.fullmatch(r"(.*/)?worker_0\.log:\d+", f.source)


def test_changed_prefetch_is_sw103_with_file_and_line(tmp_path):
    logs = make_run(tmp_path, "swap_case3", ranks=(0,))
    w0 = logs / "worker_0.log"
    edit(w0, lambda ls: [x.replace(".feed_forward, value=15", ".feed_forward, value=5")
                         if "at layer 2:" in x else x for x in ls])
    r = _verify(tmp_path, logs, "swap_case3")
    f = next(f for f in r.findings if f.code == "SW103")
    assert (f.rank, f.layer, f.op, str(f.expected), str(f.actual)) == (0, 2, "feed_forward", "15", "5")
    assert f.source.endswith(f"worker_0.log:{line_no(w0, 'Set op_swap at layer 2')}")


def test_changed_layer_id_is_sw102_and_sw101(tmp_path):
    logs = make_run(tmp_path, "swap_case2", ranks=(0,))
    edit(logs / "worker_0.log", lambda ls: [x.replace("Set layer swap at layer 3", "Set layer swap at layer 2")
                                            for x in ls])
    r = _verify(tmp_path, logs, "swap_case2")
    assert {(f.code, f.layer) for f in r.findings if f.severity == "error"} == {("SW102", 2), ("SW101", 3)}


def test_truncated_log_is_sw106(tmp_path):
    logs = make_run(tmp_path, "recompute_48l")
    w1 = logs / "worker_1.log"
    cut = line_no(w1, "Set select recompute on at layer 30:")
    data = w1.read_bytes()
    w1.write_bytes(b"".join(data.splitlines(keepends=True)[:cut])[:-7])   # mid-line, no newline
    r = _verify(tmp_path, logs, "recompute_48l")
    codes = {f.code for f in r.findings if f.severity == "error"}
    assert "SW106" in codes and "SW101" not in codes
    assert next(f for f in r.findings if f.code == "SW106").rank == 1


def test_rank_that_disagrees_is_sw401(tmp_path):
    logs = make_run(tmp_path, "swap_case1", ranks=(0, 1, 2))
    edit(logs / "worker_2.log", lambda ls: [x.replace("value=10", "value=3") if "at layer 1:" in x else x
                                            for x in ls])
    r = _verify(tmp_path, logs, "swap_case1")
    assert {(f.code, f.rank, f.layer) for f in r.findings if f.severity == "error"} == {
        ("SW401", 2, 1), ("SW103", 2, 1)}


def test_missing_rank_is_sw402_warning(tmp_path):
    logs = make_run(tmp_path, "swap_case1", ranks=(0, 1, 3))
    r = _verify(tmp_path, logs, "swap_case1")
    assert [(f.code, f.rank) for f in r.findings if f.code == "SW402"] == [("SW402", 2)]
    assert r.verdict == "pass" and _verify(tmp_path, logs, "swap_case1", strict=True).verdict == "fail"


def test_log_of_another_config_is_sw107(tmp_path):
    logs = make_run(tmp_path, "swap_case3")
    r = verify([str(logs)], config_path=str(_write(tmp_path, "swap_case4")), env=ENV)
    assert "SW107" in {f.code for f in r.findings} and r.exit_code == 1


def _write(tmp_path, name):
    p = tmp_path / f"other_{name}.yaml"
    p.write_text(SCENARIOS[name][0], encoding="utf-8")
    return p


# --- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "json", "junit", "markdown"])
def test_cli_formats_parse_and_exit_codes(tmp_path, fmt, capsys):
    logs = make_run(tmp_path, "swap_case3")
    edit(logs / "worker_1.log", lambda ls: [x.replace("value=10", "value=11") for x in ls])
    args = ["verify", str(logs), "--config", str(tmp_path / "swap_case3.yaml"), "--format", fmt,
            "--env", "ENABLE_LAZY_INLINE_NO_PIPELINE=1"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr().out
    assert exc.value.code == 1
    if fmt == "json":
        doc = json.loads(out)
        assert doc["verdict"] == "fail" and doc["ranks"] == [0, 1] and doc["layers"] == 4
        assert any(f["code"] == "SW103" and f["rank"] == 1 and f["layer"] == 3 for f in doc["findings"])
    elif fmt == "junit":
        assert ET.fromstring(out).tag == "testsuites"
    elif fmt == "markdown":
        assert out.startswith("### swapwatch verify: ❌ fail")
    else:
        assert out.rstrip().splitlines()[-1].startswith("FAIL:")
    with pytest.raises(SystemExit) as exc:
        main(args + ["--ignore", "SW103", "--ignore", "SW401", "-o", str(tmp_path / "r.txt")])
    assert exc.value.code == 0 and (tmp_path / "r.txt").read_text()


# --- real runs of the tiny Llama (swapwatch run, MindSpore 2.10 CPU; fixtures/plot_runs) -------

REAL = FIXTURES / "plot_runs"


@pytest.mark.parametrize("run, config", [("none", "none"), ("select", "select"), ("full", "full"),
                                         ("select-2ranks", "select")])
def test_real_runs_verify_clean(run, config):
    if not (REAL / run).is_dir():
        pytest.skip("real run fixtures not present")
    r = verify([str(REAL / run)], config_path=str(REAL / "configs" / f"{config}.yaml"))
    assert [(f.code, f.message) for f in r.findings if f.severity == "error"] == []
    assert r.verdict == "pass"
    r = verify([str(REAL / run)])                     # the config the log printed
    assert r.verdict == "pass", [(f.code, f.message) for f in r.findings]


def test_real_run_against_another_config_fails(tmp_path):
    if not (REAL / "select-2ranks").is_dir():
        pytest.skip("real run fixtures not present")
    r = verify([str(REAL / "select-2ranks")], config_path=str(REAL / "configs" / "full.yaml"))
    codes = {f.code for f in r.findings if f.severity == "error"}
    assert {"SW101", "SW102", "SW107"} <= codes and r.exit_code == 1
    assert {f.rank for f in r.findings if f.code == "SW101"} == {0, 1}
