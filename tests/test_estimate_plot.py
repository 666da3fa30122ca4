"""`swapwatch plot estimate`: the frame behind the figure adds up to the predicted peak, and the
command writes the image (and never replaces a file without -o)."""
from __future__ import annotations

import subprocess
import sys

from swapwatch.memory.model import estimate
from swapwatch.plot.estimate import estimate_frame, plot_estimate

QWEN = "fixtures/configs/plan_qwen64.yaml"


def test_components_add_up_to_each_stage_peak():
    est = estimate(QWEN)
    frame = estimate_frame(est)
    assert sorted(frame["stage"].unique()) == [0, 1, 2, 3]
    for stage, rows in frame.groupby("stage"):
        assert rows["bytes"].sum() == est.stages[stage].peak()
        assert set(rows["component"]) >= {"weights", "gradients", "optimizer states", "saved activations"}
    # the first stage holds the most micro-batches in flight under 1F1B
    acts = frame[frame["component"] == "saved activations"].set_index("stage")["bytes"]
    assert acts[0] > acts[1] > acts[2] > acts[3]


def test_plot_writes_an_image(tmp_path):
    out = tmp_path / "est.svg"
    res = plot_estimate(estimate(QWEN), budget=12 << 30)
    res.save(str(out))
    text = out.read_text()
    assert "saved activations" in text and "budget" in text and "pipeline stage" in text
    assert len(res.frame) == 4 * 11


def test_cli_writes_and_refuses_to_replace(tmp_path):
    out = tmp_path / "estimate.png"
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "plot", "estimate", QWEN, "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and out.stat().st_size > 1000 and "4 stages" in r.stdout
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "plot", "estimate", QWEN], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "already exists" in r.stderr
