"""``swapwatch tune`` end to end with real MindSpore on CPU: the example trainer directly (and a
resume that runs nothing again), through msrun (two workers, every rank verified), and through a
shell launcher. Few steps, the tiny model of fixtures/configs/plan_tiny.yaml."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv, free_port  # noqa: E402

TINY = REPO / "fixtures" / "configs" / "plan_tiny.yaml"
TRAIN = str(REPO / "swapwatch" / "examples" / "train.py")
MiB = 1 << 20


def _tune(cwd, *args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", "tune", *args], capture_output=True, text=True,
                          cwd=cwd, env=env_with_venv(), timeout=1500)


def _setup(tmp_path):
    src = tmp_path / "tiny.yaml"
    src.write_text(TINY.read_text())
    return src


def test_tune_on_the_example_trainer_fits_uses_the_headroom_and_resumes(tmp_path):
    src = _setup(tmp_path)
    before = src.read_bytes()
    args = ["tiny.yaml", "--budget", "41MiB", "--steps", "4", "--max-runs", "4", "--format", "json", "--",
            sys.executable, "-m", "swapwatch.examples.train", "--config", "{config}"]
    r = _tune(tmp_path, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    atts = {a["n"]: a for a in res["attempts"]}
    full = atts[1]
    assert full["label"] == "full recompute" and full["verify"] == "PASS"
    final = atts[res["final"]]
    # measured within the budget, verified, and more than full recompute's peak: the headroom is used
    assert final["verify"] == "PASS" and full["peak_bytes"] < final["peak_bytes"] <= 41 * MiB
    assert final["label"] != "full recompute"
    assert all(a["peak_bytes"] for a in res["attempts"]) and all(len(a["step_ms"]) == 4 for a in res["attempts"])
    # the final YAML: the user's with the strategy, no step limit; the user's YAML untouched
    assert src.read_bytes() == before
    out = tmp_path / res["final_yaml"]
    assert out.parent == tmp_path / "tiny.tune"
    text = out.read_text()
    assert "TrainCallBack" not in text
    a, b = yaml.safe_load(before), yaml.safe_load(text)
    assert {k: v for k, v in a.items() if k != "recompute_config"} == \
        {k: v for k, v in b.items() if k != "recompute_config"}
    for name in ("tune.json", "tune.txt", "tune.png"):
        assert (tmp_path / "tiny.tune" / name).stat().st_size > 0
    assert "speed-up over the full-recompute probe" in (tmp_path / "tiny.tune" / "tune.txt").read_text()
    # resume: the same arguments run nothing again
    runs = sorted(p.name for p in (tmp_path / "tiny.tune").glob("attempt-??"))
    r2 = _tune(tmp_path, *args)
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "resuming" in r2.stderr and "running" not in r2.stderr
    assert sorted(p.name for p in (tmp_path / "tiny.tune").glob("attempt-??")) == runs
    assert json.loads(r2.stdout)["final"] == res["final"]
    # other arguments in the same directory: refused, nothing touched
    r3 = _tune(tmp_path, *[("40MiB" if x == "41MiB" else x) for x in args])
    assert r3.returncode == 2 and "another budget" in r3.stderr


def test_tune_through_msrun_verifies_every_rank(tmp_path):
    if shutil.which("msrun", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("msrun not installed next to the interpreter")
    _setup(tmp_path)
    r = _tune(tmp_path, "tiny.yaml", "--budget", "41MiB", "--steps", "4", "--max-runs", "3", "--format", "json",
              "--", "msrun", "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
              "--log_dir=msrun_log", "--join=True", TRAIN, "--config", "{config}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert len(res["attempts"]) == 3
    for a in res["attempts"]:
        assert a["verify"] == "PASS" and a["exit_code"] == 0
        run = tmp_path / a["run_dir"]
        assert {p.name for p in (run / "msrun_log").glob("worker_*.log")} == {"worker_0.log", "worker_1.log"}
        info = json.loads((run / "run.json").read_text())
        assert info["launcher"] == "msrun" and info["ranks"] == [0, 1]
    final = next(a for a in res["attempts"] if a["n"] == res["final"])
    assert final["peak_bytes"] <= 41 * MiB


def test_tune_through_a_shell_launcher(tmp_path):
    _setup(tmp_path)
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m swapwatch.examples.train --config "$1"\n')
    launcher.chmod(0o755)
    # a budget above no recompute's peak: two probes, no plan needed, the final is no recompute
    r = _tune(tmp_path, "tiny.yaml", "--budget", "80MiB", "--steps", "4", "--format", "json", "--",
              "sh", str(launcher), "{config}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert [a["label"] for a in res["attempts"]] == ["full recompute", "no recompute"]
    assert res["final"] == 2 and "nothing to recompute" in res["stop_reason"]
    # and a budget below full recompute's measured peak: nothing is handed back
    r = _tune(tmp_path, "tiny.yaml", "--budget", "8MiB", "--steps", "4", "--dir", "low", "--format", "json", "--",
              "sh", str(launcher), "{config}")
    assert r.returncode == 1, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["final"] is None and res["final_yaml"] is None and len(res["attempts"]) == 1
    assert not list((tmp_path / "low").glob("*.tuned.yaml"))


def test_tune_bisects_down_on_a_real_mindspore_oom(tmp_path):
    """A launcher that runs a job which really OOMs in MindSpore (the CPU pool cannot get its block
    under ulimit -v: fixtures/tune/oom/oom_tile.py) whenever the attempt recomputes no layer in full:
    the no-recompute probe OOMs, tune probes half the layers instead, lowers its target on every OOM,
    and hands back only a strategy that ran."""
    _setup(tmp_path)
    oom = REPO / "fixtures" / "tune" / "oom" / "oom_tile.py"
    launcher = tmp_path / "launch.sh"
    launcher.write_text(
        "#!/bin/sh\n"
        "if grep -q '^  recompute: False' \"$1\"; then\n"
        f"  ulimit -v 3500000; exec \"{sys.executable}\" {oom}\n"
        "fi\n"
        f"exec \"{sys.executable}\" -m swapwatch.examples.train --config \"$1\"\n")
    r = _tune(tmp_path, "tiny.yaml", "--budget", "41MiB", "--steps", "4", "--max-runs", "5", "--format", "json",
              "--", "sh", str(launcher), "{config}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    atts = res["attempts"]
    assert atts[1]["label"] == "no recompute" and "OOM" in (atts[1]["oom"] or "")
    assert atts[2]["label"] == "full recompute on half the layers" and atts[2]["exit_code"] == 0
    final = next(a for a in atts if a["n"] == res["final"])
    assert final["oom"] is None and final["verify"] == "PASS" and final["peak_bytes"] <= 41 * MiB
    for a in atts:
        if a["oom"]:
            assert a["peak_bytes"] is None or a["n"] != res["final"]
