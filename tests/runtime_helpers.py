"""Shared helpers of the runtime test tier (imported by tests/test_runtime_*.py, test_runner*.py, test_ir*.py).

``single_stage_plan`` hand-builds a :class:`swapwatch.engine.strategy.Plan` for one pipeline stage, so the
hooks can be tested on their own; the integration tests use the real engine when it is there.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

from swapwatch.engine.strategy import Geometry, LayerPlan, Plan

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def single_stage_plan(n: int, swap: bool = False, formative: Optional[Dict[str, Any]] = None,
                      **per_layer: Dict[int, Dict[str, Any]]) -> Plan:
    """Plan for ``n`` layers on one stage; ``per_layer={i: {LayerPlan field: value}}`` via ``layers=``."""
    geo = Geometry(num_layers=n, pipeline_stage=1, pp_interleave_num=1, offset=[[0]], layer_list=[[n]],
                   layer_accu=[[n]], chunk_starts=[[0, n]], pp_ids=[0] * n, interleave_ids=[0] * n)
    fields = per_layer.get("layers", {})
    lps = [LayerPlan(layer=i, stage=0, interleave=0, **fields.get(i, {})) for i in range(n)]
    return Plan(geometry=geo, swap=swap, formative=formative or {}, layers=lps)


def wait_for_file(path: Path, timeout: float = 60.0) -> str:
    """The stripped text of ``path`` once a job has written it (a pid or a ready mark); AssertionError
    after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with_venv() -> Dict[str, str]:
    """msrun starts workers as a bare `python`: the venv's bin must come first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env
