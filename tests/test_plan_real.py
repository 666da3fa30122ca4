"""One real plan-run-measure cycle on MindSpore (CPU, GRAPH_MODE): calibrate on no and full
recompute, plan for a budget between their measured pool peaks, run the planned YAML through
`swapwatch run` (which verifies the run against it), and check the measured peak; then predict a
strategy the calibration did not see, and run it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv  # noqa: E402
from swapwatch.memory.calibrate import measure  # noqa: E402

pytestmark = pytest.mark.runtime

TINY = REPO / "fixtures/configs/plan_tiny.yaml"


def _config(tmp_path, name, recompute):
    p = tmp_path / f"{name}.yaml"
    p.write_text(TINY.read_text().replace("recompute: False", recompute, 1))
    return str(p)


def _run(config, run_dir):
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "run", "--config", config, "--run-dir", str(run_dir),
                        "--", sys.executable, "-m", "swapwatch.examples.train", "--config", config, "--steps", "2"],
                       capture_output=True, text=True, env=env_with_venv(), cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]     # trained, and verify passed
    return measure(str(run_dir), 1).used[0]


def test_plan_fits_the_budget_and_uses_the_headroom(tmp_path):
    none_peak = _run(_config(tmp_path, "none", "recompute: False"), tmp_path / "run-none")
    full_peak = _run(_config(tmp_path, "full", "recompute: True"), tmp_path / "run-full")
    assert full_peak < none_peak
    budget = (none_peak + full_peak) // 2
    planned = tmp_path / "planned.yaml"
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "plan", str(TINY), "--budget", str(budget),
                        "--calibrate", str(tmp_path / "run-none"), "--calibrate", str(tmp_path / "run-full"),
                        "-o", str(planned), "--format", "json"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert {row["choice"] for row in plan["layers"]} != {"full"}      # not the trivial answer
    measured = _run(str(planned), tmp_path / "run-planned")
    assert full_peak < measured <= budget
    # a mixed plan is predicted conservatively (the largest transient on top of every layer)
    predicted = plan["stages"][0]["peak_bytes"]
    assert measured <= predicted <= budget
    # and a strategy the calibration did not see is predicted within 10 %
    other = _config(tmp_path, "both", "recompute: False\n  select_recompute:\n"
                                      "    'attention\\.flash_attention': True\n    'feed_forward': True")
    other_peak = _run(other, tmp_path / "run-both")
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "estimate", other, "--format", "json",
                        "--calibrate", str(tmp_path / "run-none"), "--calibrate", str(tmp_path / "run-full")],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert abs(json.loads(r.stdout)["stages"][0]["peak_bytes"] - other_peak) <= 0.10 * other_peak
    # the run's own record: it ran the planned YAML (verify PASS is the run's exit code 0 above)
    info = json.loads((tmp_path / "run-planned" / "run.json").read_text())
    assert os.path.samefile(info["config"]["path"], planned)
