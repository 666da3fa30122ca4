"""Issue 16, what a user did with run logs and expected: MindSpore's offload warnings are reported
per rank (SW112), a wrong or stale ``--config`` is one finding instead of a flood (SW109, SW403),
and a log given to ``explain`` / a YAML given to ``verify`` names the command meant.

The logs are real: ``fixtures/logs/cpu_swap`` is a 2-worker msrun CPU run of the tiny Llama with
swap on (MindSpore 2.10 prints the offload warning per marked node), ``fixtures/plot_runs`` are
real runs with recompute.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil

import pytest

from cli_helpers import sw
from swapwatch.report.finding_groups import line
from swapwatch.commands.verify import verify

CPU_SWAP = "fixtures/logs/cpu_swap"
SELECT_RUN = "fixtures/plot_runs/select-2ranks"


def _codes(result, code):
    return [f for f in result.findings if f.code == code]


# ---- (3) offload that did not take effect, from the log text alone: SW112 -----------------------

def test_cpu_swap_run_reports_offload_not_effective_per_rank():
    res = verify([CPU_SWAP])                                  # no --ir: the log text is the evidence
    f = _codes(res, "SW112")
    assert [x.rank for x in f] == [0, 1]
    for x in f:
        with open(f"{CPU_SWAP}/msrun_log/worker_{x.rank}.log") as fh:
            lines = fh.read().splitlines()
        n = sum("Offload does not take effect outside the scope of the lazy_inline Cell" in ln for ln in lines)
        assert n == 30 and x.actual == n and x.severity == "warning"
        assert f"MindSpore warned {n} times that the offload does not take effect" in x.message
        prims = {}
        for ln in lines:
            m = re.search(r"Offload does not take effect.*ValueNode<Primitive> PrimFunc_(\w+)", ln)
            if m:
                prims[m.group(1)] = prims.get(m.group(1), 0) + 1
        assert f"(BatchMatMul x{prims['BatchMatMul']}, " in x.message        # the most marked primitive first
        file, line = x.source.rsplit(":", 1)
        assert file.endswith(f"worker_{x.rank}.log") and "Offload does not take effect" in lines[int(line) - 1]
    assert res.verdict == "pass" and verify([CPU_SWAP], strict=True).verdict == "fail"


def test_sw112_quiet_without_offload_warnings():
    assert not _codes(verify([SELECT_RUN]), "SW112")


def test_sw112_in_the_table(capsys):
    code, out, _ = sw("verify", CPU_SWAP, "--config", f"{CPU_SWAP}/config.yaml", capsys=capsys)
    assert code == 0
    assert "SW112 warning: offload did not take effect" in out
    assert "ranks 0-1: MindSpore warned 30 times" in out


# ---- (6) a wrong --config is said once: SW109 ---------------------------------------------------

def test_wrong_config_is_one_finding_not_a_flood(capsys):
    code, out, _ = sw("verify", SELECT_RUN, "--config", "fixtures/plot_runs/configs/full.yaml", capsys=capsys)
    assert code == 1
    groups = [ln for ln in out.splitlines() if ln.startswith("  SW")]
    assert len(groups) == 1 and groups[0].startswith("  SW109 error")
    assert ("this log (ranks 0-1) is not a run of this config: recompute_config.recompute False vs True"
            in out)
    assert "FAIL: 1 error(s), 0 warning(s)" in out and "Per-layer strategy" not in out


def test_4_layer_log_against_32_layer_yaml_says_layers_and_pp_once():
    res = verify(["fixtures/logs/msrun_2ranks"], config_path="fixtures/configs/llama32_swap_trap.yaml")
    errors = [f for f in res.findings if f.severity == "error"]
    assert [f.code for f in errors] == ["SW109"]
    assert "this log (ranks 0-1) is not a run of this config: 4 vs 32 layers, pp 1 vs 4" in errors[0].message
    assert errors[0].source.endswith("worker_0.log:11")
    assert not {"SW101", "SW102", "SW103", "SW106", "SW107"} & {f.code for f in res.findings}


def test_sw109_quiet_on_the_right_config_and_without_config():
    assert not _codes(verify([SELECT_RUN], config_path="fixtures/plot_runs/configs/select.yaml"), "SW109")
    assert not _codes(verify([SELECT_RUN]), "SW109")


# ---- (6) YAML edited since the run launched: SW403 ----------------------------------------------

def _run_copy(tmp_path, edit=None, keep_copy=False):
    run = tmp_path / "run"
    shutil.copytree(CPU_SWAP, run)
    cfg = tmp_path / "x.yaml"
    shutil.copy(f"{CPU_SWAP}/config.yaml", cfg)
    info = json.loads((run / "run.json").read_text())
    info["config"] = {"path": str(cfg), "sha256": hashlib.sha256(cfg.read_bytes()).hexdigest()}
    info["run_dir"] = str(run)
    (run / "run.json").write_text(json.dumps(info))
    if not keep_copy:
        (run / "config.yaml").unlink()
    if edit:
        cfg.write_text(cfg.read_text().replace(*edit))
    return run, cfg


def test_config_edited_since_run_is_a_finding(tmp_path):
    run, cfg = _run_copy(tmp_path, edit=("default_prefetch: 10", "default_prefetch: 3"))
    f = _codes(verify([str(run)], config_path=str(cfg)), "SW403")
    assert len(f) == 1 and f[0].severity == "warning"
    assert f"{cfg} changed since the run launched" in f[0].message and "kept" not in f[0].message
    assert f[0].source == f"{run}/run.json"
    # the edit also makes the log "not a run of this config", said once
    assert len(_codes(verify([str(run)], config_path=str(cfg)), "SW109")) == 1


def test_sw403_names_the_copy_the_run_kept(tmp_path):
    run, cfg = _run_copy(tmp_path, edit=("default_prefetch: 10", "default_prefetch: 3"), keep_copy=True)
    f = _codes(verify([str(run)]), "SW403")
    assert len(f) == 1 and f[0].message.endswith(f"the run kept the YAML it launched with: {run}/config.yaml")


def test_sw403_quiet_when_unchanged(tmp_path):
    run, cfg = _run_copy(tmp_path)
    assert not _codes(verify([str(run)], config_path=str(cfg)), "SW403")


# ---- (8) the other kind of file -----------------------------------------------------------------

@pytest.mark.parametrize("log", ["fixtures/logs/msrun_2ranks/worker_0.log", "fixtures/logs/swap_case1.log",
                                 f"{CPU_SWAP}/console.log", "fixtures/logs/swap_case2.log.gz"])
def test_explain_on_a_worker_log_points_to_verify(log, capsys):
    code, out, err = sw("explain", log, capsys=capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{log}: this is a worker log, not a training YAML" in err
    assert f"swapwatch verify {log} --config" in err and "YAML syntax" not in err


@pytest.mark.parametrize("args", [["estimate"], ["plan", "--budget", "1GB"], ["verify", "fixtures/logs/msrun_2ranks",
                                                                            "--config"]])
def test_every_command_that_reads_a_config_recognises_a_worker_log(args, capsys):
    """The check lives where configs are loaded (config.load_config), not in explain alone."""
    log = "fixtures/logs/swap_case1.log"
    code, out, err = sw(*args, log, capsys=capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{log}: this is a worker log, not a training YAML" in err and "YAML syntax" not in err


def test_verify_on_a_yaml_points_to_explain(capsys, tmp_path):
    for path in ("fixtures/configs/conflict.yaml", f"{CPU_SWAP}/config.yaml"):
        code, out, err = sw("verify", path, capsys=capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert f"{path}: this is a training YAML, not a worker log; for its plan: swapwatch explain {path}" in err
    renamed = tmp_path / "cfg.txt"                       # recognised by content, not only by name
    shutil.copy("fixtures/configs/conflict.yaml", renamed)
    code, _, err = sw("verify", str(renamed), capsys=capsys)
    assert code == 2 and "this is a training YAML" in err


def test_right_kinds_still_work(capsys):
    assert sw("explain", "fixtures/configs/conflict.yaml", capsys=capsys)[0] == 1
    assert sw("verify", "fixtures/logs/msrun_2ranks/worker_0.log", capsys=capsys)[0] in (0, 1)
    code, _, err = sw("explain", "fixtures/logs/empty.log", capsys=capsys)
    assert code == 2 and "worker log" not in err


def test_sw109_from_formative_lines_when_the_log_prints_no_initial_sections(tmp_path):
    log = tmp_path / "worker_0.log"
    with open("fixtures/logs/swap_case3.log") as fh:
        log.write_text("".join(ln for ln in fh if " initial " not in ln))
    res = verify([str(log)], config_path="fixtures/configs/swap_case4.yaml")
    assert [f.code for f in res.findings if f.severity == "error"] == ["SW109"]
    f = _codes(res, "SW109")[0]
    assert f.rank == 0 and f.message.startswith("this log is not a run of this config: Formative select_recompute differs")
    assert line(f).startswith("rank 0: this log is not a run")       # the renderer puts the place in front
    assert not _codes(verify([str(log)], config_path="fixtures/configs/swap_case3.yaml"), "SW109")
