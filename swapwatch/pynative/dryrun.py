"""MindSpore's PyNative DryRun as the memory oracle of the PyNative (r2.x) path: run MindFormers' own
PyNative ``Trainer`` on an r2.x YAML for one simulated rank and read the allocator's peaks
(docs/estimate.md, "The PyNative path").

DryRun (``MS_SIMULATION_LEVEL=1``) works in ``PYNATIVE_MODE`` on the same CANN stand-ins as graph mode:
every op goes through the real Ascend allocator without a kernel launched, and MindSpore prints the same two
peak lines at exit (:func:`swapwatch.memory.dryrun.read_peaks`). What differs from the graph harness
(``memory/dryrun.py``): MindSpore's PyNative mode needs numpy 1 (MindFormers' graph-mode venv has numpy 2),
so the child runs under its own interpreter (``SWAPWATCH_PYNATIVE_DRYRUN_PYTHON``, else the repository's
``.pynative-venv``: ``make dryrun-pynative``); and the trainer is one rank, so a YAML that shards across
ranks (tensor / context / expert / pipeline parallel, an FSDP shard) is refused: its one-rank figure would be
another model's. ``hyper_parallel`` is the interpreter's own, else the project's stand-in
(``pynative/standin/``: its README says what it simulates faithfully).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from ..config import read_yaml
from ..errors import InputError
from ..memory import dryrun as graph_dryrun

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("dryrun_child.py")
ENV_PYTHON = "SWAPWATCH_PYNATIVE_DRYRUN_PYTHON"
#: what the child prints about itself (dryrun_child.py ``TAG``)
HP_RE = re.compile(r"\[dryrun-pynative\] hyper_parallel: (installed|stand-in)")
SWAP_RE = re.compile(r"\[dryrun-pynative\] swap: (.*)")
#: keys that shard the model across ranks: one simulated rank of them is not this YAML's rank
SHARDING = ("tensor_parallel", "context_parallel", "expert_parallel", "pipeline_parallel", "data_parallel_shard")
#: numpy 1: MindSpore 2.10's PyNative ops fail to import numpy's C API under numpy 2
PROBE = "import numpy, sys; sys.exit(0 if int(numpy.__version__.split('.')[0]) < 2 else 'numpy ' + numpy.__version__)"


@dataclass
class PynativePeak:
    """One PyNative DryRun: the allocator's two peaks, which hyper_parallel ran, what swap did."""
    used_bytes: int
    actual_bytes: int
    seconds: float
    log_path: str
    hyper_parallel: str
    swap: Dict[str, int] = field(default_factory=dict)


def python() -> str:
    env = os.environ.get(ENV_PYTHON)
    if env:
        return env
    return str(REPO / ".pynative-venv" / "bin" / "python")


def available() -> Optional[str]:
    """None when a PyNative DryRun can run here, else the one-line reason (what is missing)."""
    reason = graph_dryrun.interpreter_missing(python(), ENV_PYTHON, PROBE)
    if reason and "no Python" in reason:
        reason += "; `make dryrun-pynative` builds .pynative-venv"
    return reason


def one_rank_refusal(data: Dict[str, Any], lines: Dict[str, int], path: str) -> None:
    """InputError (exit 2) at the first key that shards the model: the harness simulates one rank."""
    par = data.get("parallelism") or {}
    if not isinstance(par, dict):
        return
    for key in SHARDING:
        value = par.get(key, 1)
        if isinstance(value, int) and value > 1:
            raise InputError(f"PyNative DryRun here simulates one rank of MindFormers' one-rank trainer; "
                             f"{key} {value} shards the model across ranks (set it to 1 for a DryRun)",
                             file=path, line=lines.get(f"parallelism.{key}"), key=f"parallelism.{key}")


def _swap_counts(text: str) -> Dict[str, int]:
    found = SWAP_RE.findall(text)
    out: Dict[str, int] = {}
    if found and found[-1] != "nothing swapped":
        for part in found[-1].split(", "):
            name, _, value = part.rpartition(" ")
            if value.isdigit():
                out[name] = int(value)
    return out


def measure(config_path: str, *, timeout: Optional[float] = None, work_dir: Optional[str] = None) -> PynativePeak:
    """Run ``config_path`` through PyNative DryRun once (one simulated rank); InputError (exit 2) for a
    missing YAML or one that shards across ranks, DryRunError naming the log when DryRun fails."""
    path = Path(config_path)
    if not path.is_file():
        raise InputError("no such training YAML", file=config_path)
    data, lines = read_yaml(str(path))
    if not isinstance(data, dict):
        raise InputError("expected a mapping of config sections at the top level", file=config_path, line=1)
    one_rank_refusal(data, lines, config_path)
    reason = available()
    if reason:
        raise graph_dryrun.DryRunError(f"PyNative DryRun is not available: {reason}")
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="swapwatch-dryrun-pynative-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "dryrun.log"
    env = graph_dryrun.simulation_env(1, 0, work)
    t0 = time.time()
    with open(log, "w", encoding="utf-8") as out:
        try:
            proc = subprocess.run([python(), str(CHILD), str(path.resolve())], cwd=work, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise graph_dryrun.DryRunError(f"PyNative DryRun timed out after {timeout:.0f} s; log: {log}") from exc
    seconds = time.time() - t0
    text = log.read_text(encoding="utf-8", errors="replace")
    used, actual = graph_dryrun.read_peaks(text)
    if proc.returncode != 0 or used is None or actual is None:
        raise graph_dryrun.DryRunError(f"PyNative DryRun failed (exit {proc.returncode}, "
                                       f"{'no' if used is None else 'with'} peak line); log: {log}")
    hp = HP_RE.findall(text)
    return PynativePeak(used_bytes=used, actual_bytes=actual, seconds=round(seconds, 1), log_path=str(log),
                        hyper_parallel=("standin" if hp and hp[-1] == "stand-in" else "installed"),
                        swap=_swap_counts(text))


def main(argv: Optional[list] = None) -> int:
    """``python -m swapwatch.pynative.dryrun CONFIG``: one run, the peaks in MiB (a debugging aid)."""
    args = sys.argv[1:] if argv is None else argv
    res = measure(args[0], work_dir=args[1] if len(args) > 1 else None)
    print(f"used {res.used_bytes >> 20}M actual {res.actual_bytes >> 20}M in {res.seconds:.0f}s "
          f"(hyper_parallel {res.hyper_parallel}; swap {res.swap or 'none'}); log {res.log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
