"""MindSpore DryRun as a memory oracle: run a training YAML for one simulated rank per pipeline stage
and read the allocator's peaks (docs/estimate.md, "DryRun L1").

DryRun (``MS_SIMULATION_LEVEL=1`` with ``RANK_SIZE`` / ``RANK_ID``) compiles the real training graph
and walks it kernel by kernel through the real Ascend allocator without launching kernels; at exit
MindSpore prints ``Used peak memory usage (without fragments): NNNM`` and ``Actual peak memory usage
(with fragments): NNNM`` (M = MiB). It covers MindFormers' cells, kernel selection, the parallel
passes and memory reuse; it leaves out kernel workspaces and communication buffers. A login node
needs MindSpore, MindFormers and CANN, no NPU; on this project's CPU machines the CANN libraries are
stand-ins built by ``make dryrun`` (``.dryrun-stubs/``) from the wheel in ``.oracle-venv``.

Where things are found (each overridable by the environment):

* the interpreter with MindSpore + MindFormers: ``SWAPWATCH_DRYRUN_PYTHON``, else the repository's
  ``.oracle-venv/bin/python``, else the running interpreter;
* CANN: ``SWAPWATCH_DRYRUN_STUBS`` (a ``make dryrun`` folder), else the repository's
  ``.dryrun-stubs``, else a real toolkit (``ASCEND_HOME_PATH`` or ``/usr/local/Ascend/ascend-toolkit/latest``).
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
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import InputError

MIB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("dryrun_child.py")
USED_RE = re.compile(r"Used peak memory usage \(without fragments\):\s*(\d+)M")
ACTUAL_RE = re.compile(r"Actual peak memory usage \(with fragments\):\s*(\d+)M")


class DryRunError(RuntimeError):
    """DryRun itself failed (compile error, crash, timeout): the message names the log."""


@dataclass
class StagePeak:
    stage: int
    rank_id: int
    used_bytes: int
    actual_bytes: int
    seconds: float
    log_path: str


@dataclass
class DryRunResult:
    config: str
    rank_size: int
    stages: Dict[int, StagePeak] = field(default_factory=dict)


def _python() -> str:
    env = os.environ.get("SWAPWATCH_DRYRUN_PYTHON")
    if env:
        return env
    oracle = REPO / ".oracle-venv" / "bin" / "python"
    return str(oracle) if oracle.exists() else sys.executable


def _cann() -> Tuple[Optional[Path], Optional[Path]]:
    """(stand-in folder, real toolkit): the first one found, the other None."""
    env = os.environ.get("SWAPWATCH_DRYRUN_STUBS")
    if env:
        return Path(env), None
    stubs = REPO / ".dryrun-stubs"
    if (stubs / ".built").exists():
        return stubs, None
    for root in (os.environ.get("ASCEND_HOME_PATH"), "/usr/local/Ascend/ascend-toolkit/latest"):
        if root and (Path(root) / "lib64" / "libascendcl.so").exists():
            return None, Path(root)
    return None, None


def available() -> Optional[str]:
    """None when DryRun can run here, else the one-line reason (what is missing)."""
    return interpreter_missing(_python(), "SWAPWATCH_DRYRUN_PYTHON")


def cann_missing() -> Optional[str]:
    """None when CANN (the stand-ins of ``make dryrun`` or a real toolkit) is found, else why not."""
    stubs, toolkit = _cann()
    if stubs is None and toolkit is None:
        return ("no CANN: neither the stand-ins of `make dryrun` (.dryrun-stubs/, SWAPWATCH_DRYRUN_STUBS) "
                "nor an Ascend toolkit (ASCEND_HOME_PATH) was found")
    if stubs is not None and not (stubs / "latest" / "lib64" / "libascendcl.so").exists():
        return f"the CANN stand-ins in {stubs} are incomplete (run `make dryrun`)"
    return None


def interpreter_missing(py: str, env_name: str, probe_code: str = "") -> Optional[str]:
    """None when ``py`` can run a DryRun (CANN found, MindSpore and MindFormers importable, and
    ``probe_code`` exits 0 if given), else the one-line reason naming ``env_name``, the variable that
    picks another interpreter."""
    if not os.access(py, os.X_OK):
        return f"no Python with MindSpore at {py} ({env_name})"
    reason = cann_missing()
    if reason:
        return reason
    probe = subprocess.run(
        [py, "-c", "import importlib.util as u, sys; "
                   "sys.exit(0 if u.find_spec('mindspore') and u.find_spec('mindformers') else 1)"],
        capture_output=True, timeout=60, check=False)
    if probe.returncode != 0:
        return f"MindSpore and MindFormers are not both importable by {py} ({env_name})"
    if probe_code:
        extra = subprocess.run([py, "-c", probe_code], capture_output=True, text=True, timeout=120, check=False)
        if extra.returncode != 0:
            tail = (extra.stderr.strip().splitlines() or ["failed"])[-1]
            return f"{py} ({env_name}) cannot run it: {tail}"
    return None


def rank_layout(config_path: str) -> Tuple[int, int]:
    """(simulated ranks, pipeline stages) of the YAML: MindFormers' device number is
    data x model x context x pipeline parallel, and ranks are numbered stage-major (rank r is on
    stage r // (ranks / stages))."""
    from .spec import load_spec

    spec = load_spec(config_path)
    return spec.dp * spec.tp * spec.cp * spec.pp, spec.pp


def _check_data_loader(config_path: str) -> None:
    """YAMLs whose training data comes from MindFormers' BlendedMegatron loader (the mcore ones) and
    legacy YAMLs (``use_legacy`` absent or True) reading a MindDataset are run: the harness swaps in
    MindFormers' own mock source for either (dryrun_child.py: ``legacy_mock_loader``). Anything else
    would need another mock: refused with that reason (exit 2)."""
    from ..config import read_yaml

    data, _ = read_yaml(config_path)
    data = data if isinstance(data, dict) else {}
    loader = ((data.get("train_dataset") or {}).get("data_loader") or {}).get("type")
    if loader == "BlendedMegatronDatasetDataLoader":
        return
    if loader == "MindDataset" and data.get("use_legacy", True) is not False:
        return
    raise InputError(f"DryRun here runs YAMLs whose train_dataset.data_loader is "
                     f"BlendedMegatronDatasetDataLoader (mcore) or MindDataset (legacy); this one has "
                     f"{loader!r}" + (" with use_legacy: False" if loader == "MindDataset" else ""),
                     file=config_path, key="train_dataset.data_loader.type")


def read_peaks(text: str) -> Tuple[Optional[int], Optional[int]]:
    """(used, actual) bytes from a DryRun log, None where the line is missing."""
    used = USED_RE.findall(text)
    actual = ACTUAL_RE.findall(text)
    return (int(used[-1]) * MIB if used else None, int(actual[-1]) * MIB if actual else None)


def simulation_env(rank_size: int, rank_id: int, work: Path) -> Dict[str, str]:
    """The environment of a DryRun child: CANN on the library and Python paths, one simulated rank
    ``rank_id`` of ``rank_size``, MindSpore's warnings (the peak lines) on, MindFormers' logs under ``work``."""
    env = dict(os.environ)
    stubs, toolkit = _cann()
    if stubs is not None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(stubs / "latest" / "lib64"),
                                                               env.get("LD_LIBRARY_PATH")]))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(stubs / "python"), env.get("PYTHONPATH")]))
    env.update({"MS_SIMULATION_LEVEL": "1", "RANK_SIZE": str(rank_size), "RANK_ID": str(rank_id),
                "GLOG_v": "2", "LOG_MF_PATH": str(work / "mf_log"), "PYTHONUNBUFFERED": "1"})
    for key in ("MS_ENABLE_LCCL", "DEVICE_ID", "MS_ROLE", "MS_WORKER_NUM"):
        env.pop(key, None)
    return env


def measure(config_path: str, stages: Optional[Sequence[int]] = None, *, timeout: Optional[float] = None,
            work_dir: Optional[str] = None, python: Optional[str] = None) -> DryRunResult:
    """Run ``config_path`` through DryRun once per stage in ``stages`` (default: every stage), one
    simulated rank each (the first rank of the stage), one after another; InputError (exit 2) for a
    missing YAML or a stage out of range, DryRunError naming the log when DryRun fails. ``python``:
    the interpreter to run it with, instead of :func:`_python`'s."""
    path = Path(config_path)
    if not path.is_file():
        raise InputError("no such training YAML", file=config_path)
    py = python or _python()
    reason = interpreter_missing(py, "SWAPWATCH_DRYRUN_PYTHON")
    if reason:
        raise DryRunError(f"DryRun is not available: {reason}")
    rank_size, pp = rank_layout(config_path)
    _check_data_loader(config_path)
    wanted = list(range(pp)) if stages is None else list(stages)
    for s in wanted:
        if not 0 <= s < pp:
            raise InputError(f"stage {s} is out of range: the YAML has {pp} pipeline stage(s)", file=config_path)
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="swapwatch-dryrun-"))
    work.mkdir(parents=True, exist_ok=True)
    result = DryRunResult(config=str(path), rank_size=rank_size)
    for s in wanted:
        rank = s * (rank_size // pp)
        sub = work / f"stage{s}"
        sub.mkdir(exist_ok=True)
        log = sub / "dryrun.log"
        t0 = time.time()
        with open(log, "w", encoding="utf-8") as out:
            try:
                proc = subprocess.run([py, str(CHILD), str(path.resolve())], cwd=sub,
                                      env=simulation_env(rank_size, rank, sub), stdout=out, stderr=subprocess.STDOUT,
                                      timeout=timeout, check=False)
            except subprocess.TimeoutExpired as exc:
                raise DryRunError(f"DryRun of stage {s} (rank {rank}) timed out after {timeout:.0f} s; "
                                  f"log: {log}") from exc
        seconds = time.time() - t0
        used, actual = read_peaks(log.read_text(encoding="utf-8", errors="replace"))
        if proc.returncode != 0 or used is None or actual is None:
            raise DryRunError(f"DryRun of stage {s} (rank {rank}) failed (exit {proc.returncode}, "
                              f"{'no' if used is None else 'with'} peak line); log: {log}")
        result.stages[s] = StagePeak(stage=s, rank_id=rank, used_bytes=used, actual_bytes=actual,
                                     seconds=round(seconds, 1), log_path=str(log))
    return result


def stage_lines(result: DryRunResult) -> List[str]:
    return [f"stage {p.stage} (rank {p.rank_id}): used {p.used_bytes // MIB}M actual {p.actual_bytes // MIB}M "
            f"in {p.seconds:.0f}s" for p in result.stages.values()]
