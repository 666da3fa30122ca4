"""A planned swap YAML on real MindSpore (CPU, GRAPH_MODE): `plan --allow-swap` writes it, the example
model trains with it through `swapwatch run`, and the run verifies: every `Set op_swap` line MindFormers'
LayerSetting would log is in the log. Offload does not execute on CPU (MindSpore warns per marked node:
SW112, a warning), so this checks what is applied, not the memory it frees; the run's step time gives
the throughput `--calibrate` prices swaps with."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv  # noqa: E402
from swapwatch.memory.swap_cost import make_link  # noqa: E402
from swapwatch.memory.throughput import achieved_flops  # noqa: E402

pytestmark = pytest.mark.runtime

TINY = REPO / "fixtures/configs/plan_tiny_swap.yaml"


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=env_with_venv(), **kw)


def test_planned_swap_runs_and_verifies(tmp_path):
    planned = tmp_path / "planned.yaml"
    # --margin 0: the pool check's parts would add an Ascend card's kernel workspaces (>= 512 MiB) to a
    # model of a few MiB (memory/budget.py); the flat margin fits the predicted peak alone
    r = cli("plan", str(TINY), "--budget", "60MiB", "--margin", "0", "--allow-swap", "--host-bandwidth", "1TB/s",
            "--host-memory", "1TiB", "-o", str(planned), "--format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    swaps = [c for st in plan["swap"]["stages"] for c in st["swaps"]]
    assert swaps and all(c["hides"] for c in swaps)
    text = planned.read_text()
    assert "swap: True" in text and "op_swap:" in text
    # what MindFormers logs for it, per explain
    formative = cli("explain", str(planned), "--format", "formative", "--host-bandwidth", "1TB/s").stdout
    expected = re.findall(r"Set op_swap at layer (\d+): (.*)", formative)
    assert sorted(int(i) for i, _ in expected) == [0, 1, 2, 3]
    run_dir = tmp_path / "run"
    r = cli("run", "--config", str(planned), "--run-dir", str(run_dir), "--", sys.executable, "-m",
            "swapwatch.examples.train", "--config", str(planned), "--steps", "5", timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]          # trained, and verify passed
    verdict = json.loads((run_dir / "verify.json").read_text())
    assert verdict["verdict"] == "pass" and verdict["run_verdict"] == "applied"
    codes = {f["code"] for f in verdict["findings"]}
    assert "SW112" in codes and not {"SW101", "SW102", "SW103"} & codes  # offload marked, not effective on CPU
    log = "".join(p.read_text(errors="replace") for p in run_dir.rglob("*.log"))
    logged = re.findall(r"Set op_swap at layer (\d+): (.*)", log)
    assert sorted(set((int(i), items.strip()) for i, items in logged)) == sorted((int(i), v.strip()) for i, v in expected)
    # the run's step time is a throughput a plan can price swaps with (this CPU's, the config saying Ascend)
    measured = achieved_flops([str(run_dir)], device_target="Ascend")
    assert measured is not None
    rate, where = measured
    assert 1e7 < rate < 1e13 and "run" in where
    link = make_link(host_memory=1 << 40, flops=measured)
    assert link.flops == rate and link.flops_from.startswith("measured: the step time of run")
    assert achieved_flops([str(run_dir)], device_target="CPU") is None    # another device target: not used
