"""The page ``swapwatch run`` writes for a real training run (MindSpore, CPU, GRAPH_MODE): the tiny
model with full recompute, sizes from its YAML, so the run can be estimated and the page puts the
model's predicted peak per stage beside the peak the run measured (``memory.calibrate.measure``)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv  # noqa: E402
from swapwatch.memory.calibrate import measure  # noqa: E402
from swapwatch.memory.model import estimate  # noqa: E402
from swapwatch.text import fmt_bytes  # noqa: E402

from test_report import parse  # noqa: E402

TINY = REPO / "fixtures/configs/plan_tiny.yaml"


def test_a_real_run_writes_a_page_with_predicted_vs_measured_peaks(tmp_path):
    cfg = tmp_path / "full.yaml"
    cfg.write_text(TINY.read_text().replace("recompute: False", "recompute: True", 1))
    rdir = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "run", "--config", str(cfg), "--run-dir", str(rdir),
                        "--", sys.executable, "-m", "swapwatch.examples.train", "--config", str(cfg), "--steps", "2"],
                       capture_output=True, text=True, env=env_with_venv(), cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"swapwatch run: report {rdir / 'report.html'}" in r.stdout
    info = json.loads((rdir / "run.json").read_text())
    assert info["report"] == "report.html"
    page = parse((rdir / "report.html").read_text(encoding="utf-8"))
    est = next(t for t in page.tables if t["class"] == "estimate")
    assert est["head"] == ["stage", "predicted peak", "measured peak (worst rank)", "prediction error"]
    predicted = estimate(str(rdir / "config.yaml")).stages[0].peak()
    measured = measure(str(rdir), 1).used[0]
    assert est["rows"] == [["0", fmt_bytes(predicted), fmt_bytes(measured), f"{(predicted - measured) / measured:+.1%}"]]
    verdict = next(t for t in page.tables if t["class"] == "plan")
    assert verdict["rows"][0][2] == "yes"                               # full recompute, as configured
