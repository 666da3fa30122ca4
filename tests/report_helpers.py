"""Run directories and logs for the report tests, made from the project's real fixtures.

* a passing run: ``fixtures/plot_runs/select-2ranks`` (a real 2-worker ``swapwatch run`` of the tiny
  Llama on MindSpore) copied with its config beside it as ``swapwatch run`` keeps it (``config.yaml``,
  run.json naming it), so the page has the run, the verify map, memory and the estimate;
* a failing run: the real Qwen3 log with a swap/recompute conflict (SW201) as rank 0, and the same
  log without its ``Set op_swap at layer 2`` line as rank 1 (SW101, SW401);
* a truncated log: ``fixtures/logs/truncated.log`` (cut inside a ``Set op_swap`` line);
* a 1,024-rank msrun job: the real ``msrun_2ranks`` worker log, each copy naming its own rank id (as
  tests/test_scale.py makes its 64-rank job), two ranks without one ``Set op_swap`` line.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "fixtures"


def passing_run(tmp: Path) -> Path:
    src = FIX / "plot_runs" / "select-2ranks"
    dst = tmp / "select-2ranks"
    shutil.copytree(src, dst)
    cfg = FIX / "plot_runs" / "configs" / "select.yaml"
    shutil.copyfile(cfg, dst / "config.yaml")
    info = json.loads((dst / "run.json").read_text(encoding="utf-8"))
    info["config"]["path"] = str(dst / "config.yaml")       # where this copy keeps it (same bytes, same sha256)
    (dst / "run.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return dst


def failing_run(tmp: Path) -> Path:
    text = (FIX / "logs" / "families" / "qwen3_swap_conflict.log").read_text(encoding="utf-8")
    assert "Set op_swap at layer 2:" in text
    d = tmp / "qwen3-conflict"
    d.mkdir()
    (d / "worker_0.log").write_text(text, encoding="utf-8")
    (d / "worker_1.log").write_text("".join(x for x in text.splitlines(True) if "Set op_swap at layer 2:" not in x),
                                    encoding="utf-8")
    return d


def truncated_log() -> Path:
    return FIX / "logs" / "truncated.log"


def big_job(tmp: Path, ranks: int = 1024) -> Path:
    text = (FIX / "logs" / "msrun_2ranks" / "worker_0.log").read_text(encoding="utf-8")
    assert "This node 0 rank id: 0" in text and "Set op_swap at layer 2:" in text
    d = tmp / f"job{ranks}"
    d.mkdir()
    for r in range(ranks):
        t = text.replace("This node 0 rank id: 0", f"This node 0 rank id: {r}")
        if r in (5, 700):
            t = "".join(x for x in t.splitlines(True) if "Set op_swap at layer 2:" not in x)
        (d / f"worker_{r}.log").write_text(t, encoding="utf-8")
    return d


def chromium() -> str:
    """Debian's Chromium (``make browser`` installs it); CHROMIUM names another."""
    return os.environ.get("CHROMIUM") or "/usr/bin/chromium"
