"""``swapwatch tune`` on a PyNative (r2.x) YAML of the example model, end to end with real MindSpore on CPU
in PyNative mode through msrun (two workers, every rank verified): at a budget between full and no
recompute it hands back a YAML whose rerun fits the budget, uses the headroom and verifies
(swapwatch/tune/memory_api.py dispatches the probes and the plan to swapwatch/pynative/)."""
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

pytestmark = pytest.mark.runtime

TINY = REPO / "fixtures" / "pynative_memory" / "none.yaml"
TRAIN = str(REPO / "swapwatch" / "examples" / "train.py")
MiB = 1 << 20
#: between the example's full recompute and no recompute under msrun (two workers: 55 and 88 MiB measured, the
#: one-process figures of fixtures/pynative_memory plus the launch's 13 MiB)
BUDGET = 70


def _tune(cwd, *args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", "tune", *args], capture_output=True, text=True,
                          cwd=cwd, env=env_with_venv(), timeout=2400)


def test_tune_on_a_pynative_yaml_fits_uses_the_headroom_and_verifies_through_msrun(tmp_path):
    if shutil.which("msrun", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("msrun not installed next to the interpreter")
    data = yaml.safe_load(TINY.read_text())
    data["context"] = {"device_target": "CPU"}        # the CPU pool's peak is what tune measures here
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    r = _tune(tmp_path, "tiny.yaml", "--budget", f"{BUDGET}MiB", "--steps", "4", "--max-runs", "4", "--format",
              "json", "--", "msrun", "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
              "--log_dir=msrun_log", "--join=True", TRAIN, "--config", "{config}")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    attempts = {a["n"]: a for a in res["attempts"]}
    full = next(a for a in res["attempts"] if a["label"] == "full recompute")
    final = attempts[res["final"]]
    assert final["kind"] == "plan" and final["verify"] == "PASS" and final["exit_code"] == 0
    # every rank of every attempt ran and was verified
    for a in res["attempts"]:
        run = tmp_path / a["run_dir"]
        assert {p.name for p in (run / "msrun_log").glob("worker_*.log")} == {"worker_0.log", "worker_1.log"}
    # fits the budget and uses the headroom: above full recompute's measured peak
    assert full["peak_bytes"] < final["peak_bytes"] <= BUDGET * MiB
    # the YAML handed back is r2.x: only its recompute block differs from the input, and it explains clean
    tuned = tmp_path / res["final_yaml"]
    out = yaml.safe_load(tuned.read_text())
    assert {k: v for k, v in out.items() if k != "recompute"} == {k: v for k, v in data.items() if k != "recompute"}
    assert out["recompute"]["mode"] in ("full", "select")
    ex = subprocess.run([sys.executable, "-m", "swapwatch.cli", "explain", str(tuned), "--format", "json"],
                        capture_output=True, text=True, cwd=tmp_path, env=env_with_venv(), timeout=300)
    assert {f["code"] for f in json.loads(ex.stdout)["findings"]} <= {"SW501"}
    # its rerun, launched as tune launched it: within the budget, above full recompute's peak, verify PASS
    rerun = subprocess.run([sys.executable, "-m", "swapwatch.cli", "run", "--config", str(tuned), "--run-dir",
                            str(tmp_path / "rerun"), "--", "msrun", "--worker_num=2", "--local_worker_num=2",
                            f"--master_port={free_port()}", "--log_dir=msrun_log", "--join=True", TRAIN, "--config",
                            str(tuned), "--steps", "4"], capture_output=True, text=True, cwd=tmp_path,
                           env=env_with_venv(), timeout=1200)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    info = json.loads((tmp_path / "rerun" / "run.json").read_text())
    assert info["verify"]["exit_code"] == 0, (tmp_path / "rerun" / "verify.txt").read_text()
    from swapwatch.tune.loop import measure_run

    measured, _ = measure_run(tmp_path / "rerun", 1, "CPU")
    assert full["peak_bytes"] < measured["0"] <= BUDGET * MiB
