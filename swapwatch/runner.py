"""``swapwatch run``: launch a training command with the environment its strategy needs, keep
everything it says, stop it cleanly, and verify what it did.

Why a runner at all: the evidence of a recompute/swap run is scattered and fragile. msrun truncates
its worker logs on the next run, collapses every worker exit code to 1, and leaves its workers
running when it gets SIGTERM; CPU memory figures only appear with the right GLOG settings; swap
silently needs ``ENABLE_LAZY_INLINE_NO_PIPELINE=1`` without pipeline parallel. The runner fixes
each of these once:

* environment: sets what the strategy needs, never overriding a value the user set (both are
  recorded in ``run.json``); the interpreter's ``bin`` goes first on ``PATH`` so msrun's bare
  ``python`` is the right one;
* the command runs in its own session/process group and sees what it would see without
  swapwatch: swapwatch's own stdin (a terminal stays the job's terminal, a pipe reaches it), its
  stdout and its stderr apart, each streamed byte for byte to swapwatch's stdout / stderr and to
  ``<run-dir>/console.log`` / ``console.stderr.log``;
* SIGINT/SIGTERM/SIGHUP (and the other requests to end) stop the whole tree: the runner is the
  subreaper of its descendants and snapshots them *before* signalling (msrun's workers are session
  leaders, out of reach of the process group; :mod:`swapwatch.proctree`, standard library only),
  then SIGINT to the group (msrun kills its workers on SIGINT, not on SIGTERM), a grace period,
  then SIGKILL for whatever is left; SIGQUIT, SIGUSR1/2 ... are passed to the job, Ctrl-Z
  suspends the tree with swapwatch (:mod:`swapwatch.job_signals` has every signal's fate);
* msrun's ``--log_dir`` (or msrun_launcher.sh's positional LOG_DIR) is copied into
  ``<run-dir>/msrun_log`` (a copy, because the next msrun run truncates the originals);
* ``run.json`` is written at start and rewritten at the end, also on crash or interrupt;
* exit code: the child's failure code (the worker's real code from msrun's ``Error code: N.`` line
  when msrun only says 1), else ``swapwatch verify``'s code on the run directory.

Run directory layout: ``run.json``, ``console.log`` and ``console.stderr.log`` (the launcher's own
stdout and stderr; under msrun ``--join=True`` they also hold ``tail -f`` copies of the worker logs),
``msrun_log/worker_N.log``
and ``scheduler.log`` (per-rank logs), ``ir/`` (with ``--ir``), ``verify.txt``.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, overload

from .config import TrainingConfig, load_config, read_config_bytes, read_yaml
from .errors import InputError
from .job_signals import new_state, routed, signal_name
from .parsers.grammar import EXIT_RE
from .proctree import Tree, parent_death_signal
from .text import escape
from .paths import is_pynative

#: Passes whose IR dumps show recompute clones and offload marks (docs/mindspore-facts.md §5).
IR_PASSES = "add_recomputation,validate"
#: Seconds each step of the stop sequence waits: SIGINT to the child's group, then SIGTERM to every
#: process of the tree, then SIGKILL for whatever is left (docs/reliability.md).
GRACE_SECONDS = 20.0
#: The run directory's copies of the job's two output streams (DESIGN §3.3b).
STDOUT_COPY, STDERR_COPY = "console.log", "console.stderr.log"
#: After the command exits, its output pipe is read until EOF, or until it is quiet this long ...
DRAIN_QUIET = 2.0
#: ... or at most this long in all: a descendant that keeps the pipe open (a monitor, ``tail -f``, a
#: server) must not keep ``run`` waiting for ever; it is a leftover, stopped after this.
DRAIN_LIMIT = 10.0

SHIM_DIR = Path(__file__).resolve().parent / "hooks" / "sitecustomize_dir"
#: msrun's worker-exit line, as the parsers read it (the grammar holds the one regex)
_ERROR_CODE = re.compile(EXIT_RE.encode())


@dataclass
class RunResult:
    run_dir: Optional[Path]          # None when preflight stopped the run before it had one
    exit_code: int
    info: Dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------

def strategy_env(config: Optional[TrainingConfig], run_dir: Path, ir: bool, shim: bool) -> Dict[str, str]:
    """The variables this run wants, before looking at what the user already set. ``config`` is the
    loaded config (None: no --config, a PyNative YAML, or one swapwatch rejects): swap on, as
    LayerSetting sees it (on mcore from ``model_config``), without pipeline parallel needs the
    lazy-inline switch (SW302 asks the same of the plan)."""
    want = {
        "GLOG_v": "2",                               # default level: keep the logs readable ...
        "MS_SUBMODULE_LOG_v": "{PRE_ACT:1}",         # ... but the CPU pool's `peak used mem` lines at exit
        "MS_MEMORY_STATISTIC": "1",                  # Ascend: the per-graph memory statistics block
        "PYTHONUNBUFFERED": "1",                     # msrun writes worker stdout to files, block-buffered
        "SWAPWATCH_RUN_DIR": str(run_dir),
    }
    if config is not None and config.swap and config.pipeline_stage <= 1:
        want["ENABLE_LAZY_INLINE_NO_PIPELINE"] = "1"  # swap without pipeline parallel (SW302)
    if ir:
        want.update({"MS_DEV_SAVE_GRAPHS": "1", "MS_DEV_SAVE_GRAPHS_PATH": str(run_dir / "ir"),
                     "MS_DEV_DUMP_IR_PASSES": IR_PASSES})
    if shim:
        want["SWAPWATCH_MINDFORMERS_SHIM"] = "1"
    return want


def build_env(want: Dict[str, str], base: Dict[str, str], shim: bool) -> Tuple[Dict[str, str], Dict[str, Any]]:
    """Merge ``want`` into ``base`` without overriding the user; return (env, record for run.json)."""
    env = dict(base)
    record: Dict[str, Any] = {}
    for key, value in want.items():
        if key in base and base[key] != value:
            record[key] = {"wanted": value, "user": base[key], "used": base[key]}
        else:
            env[key] = value
            record[key] = {"wanted": value, "used": value}
    venv_bin = str(Path(sys.executable).parent)
    path = base.get("PATH", os.defpath)
    if path.split(os.pathsep)[0] != venv_bin:
        env["PATH"] = venv_bin + os.pathsep + path
        record["PATH"] = {"prepended": venv_bin}
    if shim:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), base.get("PYTHONPATH", "")) if p)
        record["PYTHONPATH"] = {"prepended": str(SHIM_DIR)}
    return env, record


def read_config(path: str) -> Tuple[Optional[TrainingConfig], str]:
    """The config as :func:`swapwatch.config.load_config` reads it, and the sha256 of its bytes.

    The config is None for a PyNative YAML (its trainer needs none of the strategy environment)
    and for one whose values swapwatch rejects: preflight then reports the error, and only
    ``--force`` starts the command. A file that cannot be read or is no YAML mapping is bad input
    (exit 2) either way."""
    raw = read_config_bytes(path)        # once: a pipe (``--config <(...)``) has no second read
    data, _ = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError("expected a YAML mapping at the top level", file=path)
    sha = hashlib.sha256(raw).hexdigest()
    if is_pynative(data):               # the seam decides the path
        return None, sha
    try:
        return load_config(path), sha
    except InputError:
        return None, sha


# --------------------------------------------------------------------------------------------
# The command: msrun log dir, world size
# --------------------------------------------------------------------------------------------

def _flag(args: Sequence[str], name: str) -> Optional[str]:
    """Value of ``--name=V`` or ``--name V`` in ``args`` (msrun accepts both)."""
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def msrun_info(command: Sequence[str], env: Dict[str, str]) -> Dict[str, Any]:
    """Where the launcher will put per-rank logs, and how many ranks, read from the command line.

    ``msrun ... --log_dir=D`` (default: the working directory); ``msrun_launcher.sh`` takes LOG_DIR
    positionally (6 args: 4th, 9 args: 7th; default ``output/msrun_log``; ``MF_LOG_SUFFIX``
    appends ``_<suffix>``), as MindFormers' ``scripts/msrun_launcher.sh`` maps its arguments.
    """
    for i, tok in enumerate(command):
        base = os.path.basename(tok)
        if base == "msrun":
            args = list(command[i + 1:])
            workers = _int(_flag(args, "--worker_num"), 8)
            local = _int(_flag(args, "--local_worker_num"), workers)
            join = _flag(args, "--join")
            return {"launcher": "msrun", "log_dir": _flag(args, "--log_dir") or "", "world_size": workers,
                    "local_worker_num": local,
                    "ranks": _local_ranks(workers, local, _int(_flag(args, "--node_rank"), None)),
                    "join": (join or "False").lower() == "true"}
        if base == "msrun_launcher.sh":
            args = list(command[i + 1:])
            log_dir, workers = "output/msrun_log", 8
            given: Optional[int] = None       # LOCAL_WORKER, when the 9-argument form gives one
            node: Optional[int] = None
            if len(args) == 6:        # "cmd" WORKER_NUM MASTER_PORT LOG_DIR JOIN CLUSTER_TIME_OUT
                workers, log_dir = _int(args[1], 8), args[3]
            elif len(args) == 9:      # "cmd" WORKER_NUM LOCAL_WORKER MASTER_ADDR MASTER_PORT NODE_RANK LOG_DIR ...
                workers, given, node, log_dir = _int(args[1], 8), _int(args[2], None), _int(args[5], None), args[6]
            elif len(args) == 2:      # "cmd" WORKER_NUM
                workers = _int(args[1], 8)
            if env.get("MF_LOG_SUFFIX"):
                log_dir = f"{log_dir}_{env['MF_LOG_SUFFIX']}"
            join = args[4] if len(args) == 6 else args[7] if len(args) == 9 else "False"
            local = given if given is not None else workers
            return {"launcher": "msrun_launcher.sh", "log_dir": log_dir, "world_size": workers,
                    "local_worker_num": local, "ranks": _local_ranks(workers, local, node),
                    "join": join.lower() == "true"}
    return {"launcher": None, "log_dir": None, "world_size": 1, "local_worker_num": 1, "ranks": [0], "join": True}


@overload
def _int(text: Optional[str], default: int) -> int: ...
@overload
def _int(text: Optional[str], default: None) -> Optional[int]: ...
def _int(text: Optional[str], default: Optional[int]) -> Optional[int]:
    """``text`` as a count, else ``default`` (typed: an int default gives an int)."""
    return int(text) if text is not None and text.strip().isdigit() else default


def _local_ranks(world: int, local: int, node_rank: Optional[int]) -> Optional[List[int]]:
    """The ranks whose worker logs this node's launcher writes, when the command line says.

    One node: all of them. Several nodes: msrun gives node ``n`` ranks ``n*local ... n*local+local-1``
    when ``--node_rank`` is set; without it the scheduler assigns them, so they are unknown (None)
    and verify falls back to the logs found rather than report the other nodes' ranks as missing.
    """
    if local >= world:
        return list(range(world))
    if node_rank is not None:
        return list(range(node_rank * local, min(world, (node_rank + 1) * local)))
    return None


def copy_msrun_logs(log_dir: Optional[str], cwd: Path, dest: Path) -> Optional[str]:
    """Copy msrun's per-rank logs into the run dir; returns the source directory, or None."""
    if log_dir is None:
        return None
    src = (cwd / log_dir) if log_dir else cwd
    if not src.is_dir():
        return None
    if src.resolve() == dest.resolve():        # --log_dir=<run-dir>/msrun_log: already in place
        return str(src)
    if log_dir and src.resolve() != cwd.resolve():
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
    else:                      # --log_dir="" writes into the cwd: take only msrun's own files
        dest.mkdir(parents=True, exist_ok=True)
        for f in list(src.glob("worker_*.log")) + list(src.glob("scheduler.log")):
            shutil.copy2(f, dest / f.name)
    return str(src)


def worker_exit_code(console: Path) -> Optional[int]:
    """The first worker's real exit code from msrun's ``... Error code: N.`` line, in the launcher's
    stdout copy ``console`` or in the stderr copy beside it (msrun logs through Python's logging)."""
    for path in (console, console.with_name(STDERR_COPY)):
        try:
            with path.open("rb") as fh:
                for line in fh:
                    if b"Error code:" in line:
                        m = _ERROR_CODE.search(line)
                        if m:
                            return int(m.group("code"))
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------
# Run directory
# --------------------------------------------------------------------------------------------

def new_run_dir(run_dir: Optional[str], name: str, root: Path = Path("runs")) -> Path:
    """Create the run directory; an explicit one must not exist yet (nothing is overwritten).

    ``mkdir`` itself is the test (no ``exists()`` first: two runs racing for one name get one
    winner and one clear refusal). A directory that cannot be created (a read-only filesystem, a
    path under a regular file, a full disk) is bad input: exit 2 with one line, before anything starts.
    """
    if run_dir:
        p = Path(run_dir)
        try:
            p.mkdir(parents=True)
        except FileExistsError:
            raise InputError("run directory already exists (swapwatch never overwrites one); "
                             "pick another --run-dir", file=str(p)) from None
        except OSError as exc:
            raise InputError(f"cannot create the run directory: {exc.strerror or exc}", file=str(p)) from None
        return p
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "run"
    for n in range(1, 1000):
        p = root / (f"{stamp}-{safe}" if n == 1 else f"{stamp}-{safe}-{n}")
        try:
            p.mkdir(parents=True)
            return p
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot create a run directory here (use --run-dir): {exc.strerror or exc}",
                             file=str(p)) from None
    raise InputError(f"cannot create a new run directory under {root}")


def write_json(path: Path, data: Dict[str, Any]) -> bool:
    """Atomic rewrite: a reader never sees half a run.json, a crash leaves the last good one.

    A failure (the run directory was deleted under us, disk full) is reported on stderr and
    returns False: it must never stop the runner from stopping the process tree, nor the job.
    """
    why = _write_json(path, data)
    if why is not None:
        with contextlib.suppress(Exception):
            sys.stderr.write(f"swapwatch run: warning: cannot write {path}: {why}\n")
    return why is None


def _write_json(path: Path, data: Dict[str, Any]) -> Optional[str]:
    """Write ``path`` atomically; None when done, else why not (the temp file is never left behind)."""
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return None
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return str(exc.strerror or exc)


class _Copy:
    """``console.log``: our copy of the job's output. A failure to write it (disk full, quota, the
    directory removed) is a warning: the copy stops there, the job runs on and its output still
    goes to the terminal; what was lost is said at the end (docs/reliability.md)."""

    def __init__(self, path: Path, notes: List[str]) -> None:
        self.path, self.notes, self.written = path, notes, 0
        self.last = b"\n"
        self.fh: Any = None
        try:
            self.fh = path.open("wb")
        except OSError as exc:
            self._lost(exc)

    def write(self, chunk: bytes) -> None:
        self.last = chunk[-1:] or self.last      # the terminal got it too: does it end mid-line?
        if self.fh is None:
            return
        try:
            self.fh.write(chunk)
            self.fh.flush()
            self.written += len(chunk)
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        why = exc.strerror or str(exc)
        kept = self.written
        if self.fh is not None:
            with contextlib.suppress(OSError, ValueError):
                # what reached the disk: the write that failed may have stored part of its chunk (the
                # review saw "after 0 bytes" beside 61,440 bytes of console.log)
                kept = max(kept, os.fstat(self.fh.fileno()).st_size)
            with contextlib.suppress(OSError, ValueError):
                self.fh.close()
            self.fh = None
        text = (f"{self.path.name} is incomplete: writing it failed after {kept:,} bytes ({why}); "
                "the job ran on and its output went to the terminal only")
        self.notes.append(text)
        with contextlib.suppress(Exception):
            sys.stderr.write(f"swapwatch run: warning: cannot write {self.path}: {why}; "
                             "the job goes on, its output still goes to the terminal\n")

    def close(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError, ValueError):
                self.fh.close()
            self.fh = None


def _now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------------------------
# The child process tree
# --------------------------------------------------------------------------------------------

# The tree itself (finding every descendant, setsid'd ones included, and stopping them) lives in
# swapwatch.proctree: standard library only, so `run` works from the core install.


# --------------------------------------------------------------------------------------------
# run()
# --------------------------------------------------------------------------------------------

def run(command: Sequence[str], config: Optional[str] = None, run_dir: Optional[str] = None,
        verify: bool = True, ir: bool = False, mindformers_shim: bool = False,
        out=None, grace: float = GRACE_SECONDS, force: bool = False, report: bool = True,
        err=None, stdin: Any = None) -> RunResult:
    """Run ``command`` as described in the module docstring; returns the run dir and exit code.

    With ``config``, the config-time checks of ``explain`` run first (preflight): error findings
    stop here with exit 1 and no run directory, unless ``force``. Signals are routed
    (:mod:`swapwatch.job_signals`) from the moment the run directory may exist, so an interrupt at
    any point leaves a complete run.json. ``out`` / ``err``: where the job's stdout / stderr (and
    swapwatch's own lines) go, as bytes (default: swapwatch's stdout / stderr); ``stdin``: the
    job's stdin as ``subprocess.Popen`` takes it (default: swapwatch's own, inherited as it is).
    """
    command = list(command)
    if not command:
        raise InputError("no command given: swapwatch run [OPTIONS] -- COMMAND...")
    out = out if out is not None else _stdout_bytes()
    err = err if err is not None else _stderr_bytes()
    stop = new_state()
    stop["err"], stop["stdin"] = err, stdin
    with routed(stop):
        res = _run(command, config, run_dir, verify, ir, mindformers_shim, out, grace, force, stop)
        if report and verify and res.run_dir is not None and not stop["sig"]:
            # issue 26: RUN_DIR/report.html of the finished run, built on verify's result (so not with
            # --no-verify); a signal now is recorded, not raised (run.json and the exit code stay the
            # run's); a failure is a warning, never the exit code
            from .report import write_for_run

            res.info["report"] = write_for_run(str(res.run_dir), lambda m: _say(out, f"swapwatch run: warning: {m}"))
            notes: List[str] = []
            _step(notes, "record report.html in run.json", lambda: write_json(res.run_dir / "run.json", res.info))
            for note in notes:          # the run's own run.json stands; the job's outcome is unchanged
                _say(out, f"swapwatch run: warning: {note}")
            if res.info["report"]:
                _say(out, f"swapwatch run: report {res.run_dir / res.info['report']}")
    return res


def _run(command, config, run_dir, verify, ir, mindformers_shim, out, grace, force, stop) -> RunResult:
    cfg, cfg_sha = read_config(config) if config else (None, None)
    base_env = dict(os.environ)
    probe_env, _ = build_env({}, base_env, False)
    if os.path.isdir(command[0]):
        raise InputError("is a directory, not a command", file=command[0])
    if shutil.which(command[0], path=probe_env["PATH"]) is None and not os.path.isfile(command[0]):
        raise InputError(f"command not found: {command[0]}")
    notes: List[str] = []
    if config:
        blocked = preflight(config, build_env(strategy_env(cfg, Path("."), ir, mindformers_shim),
                                              base_env, mindformers_shim)[0], force, out, notes)
        if blocked is not None:
            return RunResult(None, blocked, {"preflight": "blocked"})
    name = Path(config).stem if config else os.path.basename(command[0])
    rdir = new_run_dir(run_dir, name)
    env, env_record = build_env(strategy_env(cfg, rdir.resolve(), ir, mindformers_shim), base_env,
                                mindformers_shim)
    cwd = Path.cwd()
    launch = msrun_info(command, env)
    info: Dict[str, Any] = {
        "swapwatch": _version(), "command": command, "cwd": str(cwd), "run_dir": str(rdir),
        "config": {"path": str(Path(config).resolve()), "sha256": cfg_sha, "copy": CONFIG_COPY} if config else None,
        "env": env_record, "start": _now(), "end": None, "exit_code": None, "child_exit_code": None,
        "worker_exit_code": None, "interrupted": None, "launcher": launch["launcher"],
        "world_size": launch["world_size"], "local_worker_num": launch["local_worker_num"],
        "ranks": launch["ranks"], "found_ranks": None,
        "msrun_log_dir": None, "ir_dir": "ir" if ir else None, "verify": None, "leftover_killed": [],
        "pid": None, "streams": {"stdin": _describe_stdin(stop["stdin"]), "stdout": STDOUT_COPY,
                                 "stderr": STDERR_COPY},
        "signals_passed": {},
    }
    run_json = rdir / "run.json"
    why = _write_json(run_json, info)
    if why is not None:          # nothing could be kept: refuse before the command starts
        with contextlib.suppress(OSError):
            rdir.rmdir()
        raise InputError(f"cannot write in the run directory: {why}", file=str(rdir))
    code = 1
    try:
        if config and cfg_sha is not None:       # read_config gave the hash whenever there is a config
            _copy_config(config, cfg_sha, rdir / CONFIG_COPY, notes)
        if launch["launcher"] and not launch["join"]:
            notes.append(f"{launch['launcher']} without --join=True returns before the workers finish: "
                         "their exit codes and logs may be incomplete")
        if not stop["sig"]:
            _supervise(command, env, rdir, info, out, grace, notes, stop, launch)
        _end_line(out, stop)
        if stop["sig"] and not info["interrupted"]:       # before the start, or after the child ended
            _mark_interrupted(info, stop)
        # the end-of-run steps (the log copy, verify, what comes after) run inside the same envelope:
        # a failure of one is a note, never a lost record or a changed job result (docs/reliability.md)
        _step(notes, "copy the launcher's logs into the run directory",
              lambda: _copy_logs(launch, cwd, rdir, info))
        child = info["child_exit_code"]
        if info["interrupted"]:
            code = 128 + info["interrupted_signal"]
        elif child != 0:
            worker = worker_exit_code(rdir / "console.log") if launch["launcher"] else None
            info["worker_exit_code"] = worker
            code = worker if (child == 1 and worker) else (child if child and child > 0 else 128 + abs(child or 1))
        elif verify:
            code = _verify(rdir, config, ir, info, out, notes)
        else:
            info["verify"] = {"skipped": "--no-verify"}
            code = 0
        if stop["sig"] and not info["interrupted"]:       # during the verification
            _mark_interrupted(info, stop)
            code = 128 + info["interrupted_signal"]
    except InputError:
        code = 2
        raise
    finally:
        info["end"] = _now()
        info["exit_code"] = code
        info["signals_passed"] = dict(stop["passed"])
        info["notes"] = notes
        if not write_json(run_json, info):
            notes.append(f"{run_json} could not be completed: its end and exit code are only here")
        _end_line(out, stop)
        for n in notes:
            _say(out, f"swapwatch run: note: {n}")
        _say(out, f"swapwatch run: run directory {rdir} (exit code {code})")
    return RunResult(rdir, code, info)


def _copy_logs(launch: Dict[str, Any], cwd: Path, rdir: Path, info: Dict[str, Any]) -> None:
    src = copy_msrun_logs(launch["log_dir"], cwd, rdir / "msrun_log")
    info["msrun_log_dir"] = src
    if src:
        found = sorted(int(m.group(1)) for f in (rdir / "msrun_log").glob("worker_*.log")
                       if (m := re.match(r"worker_(\d+)\.log$", f.name)))
        info["found_ranks"] = found      # "ranks" stays what was expected: a missing log is SW402


def _step(notes: List[str], what: str, action) -> Any:
    """One end-of-run step inside the "warn and go on" envelope: the job is over and its result is
    known; a full disk or a vanished directory while keeping its evidence is a note, not exit 3."""
    try:
        return action()
    except (OSError, shutil.Error) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        notes.append(f"could not {what}: {why}")
        return None


#: The copy of ``--config`` inside the run directory (the YAML may be edited after the launch).
CONFIG_COPY = "config.yaml"


def _copy_config(config: str, sha: str, dest: Path, notes: List[str]) -> None:
    """Keep the YAML as launched; run.json's sha256 is the hash of exactly these bytes."""
    try:
        data = read_config_bytes(config)
        if hashlib.sha256(data).hexdigest() != sha:
            notes.append(f"{config} changed while the run was starting; {CONFIG_COPY} holds the newer bytes")
        dest.write_bytes(data)
    except (OSError, InputError) as exc:
        why = exc.message if isinstance(exc, InputError) else (exc.strerror or exc)
        notes.append(f"cannot copy {config} into the run directory: {why}")


def _mark_interrupted(info: Dict[str, Any], stop: Dict[str, Any]) -> None:
    info["interrupted"] = signal_name(stop["sig"])
    info["interrupted_signal"] = int(stop["sig"])


def _describe_stdin(stdin: Any) -> str:
    """What the job reads (run.json ``streams.stdin``): ``terminal``, ``pipe``, ``file``,
    ``/dev/null``, ``closed`` ... of swapwatch's own stdin when it is inherited."""
    if stdin is subprocess.DEVNULL:
        return "/dev/null (given by the caller)"
    try:
        st = os.fstat(0)
    except OSError:
        return "closed"
    import stat as _stat

    if os.isatty(0):
        return "terminal"
    mode = st.st_mode
    if _stat.S_ISFIFO(mode):
        return "pipe"
    if _stat.S_ISSOCK(mode):
        return "socket"
    if _stat.S_ISREG(mode):
        return "file"
    if _stat.S_ISCHR(mode) and os.path.realpath("/proc/self/fd/0") == os.devnull:
        return "/dev/null"
    return "device"


def preflight(config: str, env: Dict[str, str], force: bool, out, notes: List[str]) -> Optional[int]:
    """``explain``'s config-time checks before anything starts; prints the findings.

    Returns the exit code when the command must not start (1: error findings; 2: a config
    swapwatch cannot read), None to go on. ``force`` goes on anyway (and says so); warnings never
    block. Why: an error the config alone shows (SW201, SW301 ...) otherwise surfaces at the end
    of a job that held a cluster for hours.
    """
    from .explain import explain

    try:
        ex = explain(config, env=env)
    except InputError as exc:
        if not force:
            raise InputError(f"preflight: {exc.message} (--force starts the command anyway)", file=exc.file,
                             line=exc.line, key=exc.key) from None
        notes.append(f"preflight could not check the config ({exc.one_line()}); started anyway (--force)")
        return None
    errors = [f for f in ex.findings if f.severity == "error"]
    from .finding_groups import line

    for f in ex.findings:
        where = f"  [{f.source}]" if f.source else ""
        _say(out, f"swapwatch run: preflight: {f.code} {f.severity}: {line(f)}{where}")
    if not errors:
        return None
    if force:
        notes.append(f"preflight found {len(errors)} error(s) in {config}; started anyway (--force)")
        return None
    _say(out, f"swapwatch run: preflight: {len(errors)} error(s) in {config}: the command was not started "
              f"(fix the config, see `swapwatch explain {config}`, or pass --force to start it anyway)")
    return 1


def _supervise(command, env, rdir: Path, info: Dict[str, Any], out, grace: float, notes: List[str],
               stop: Dict[str, Any], launch: Optional[Dict[str, Any]] = None) -> int:
    """Start the child, tee its two output streams, act on ``stop``; returns the child's exit code.

    The child inherits swapwatch's stdin as it is (``stop["stdin"]`` when a caller gives another):
    a terminal stays a terminal (``isatty`` is true, the line discipline is the terminal's; the job
    can read it because it is not the job's controlling terminal: no SIGTTIN in its own session),
    a pipe reaches the job, end of file is the caller's. Its stdout and stderr are two pipes, each
    copied as it comes, byte for byte, to its own file and to swapwatch's stdout / stderr."""
    copies = (_Copy(rdir / STDOUT_COPY, notes), _Copy(rdir / STDERR_COPY, notes))
    tree = Tree()
    launcher = (launch or {}).get("launcher")
    streams = None
    try:
        try:
            proc = subprocess.Popen(command, env=env, stdin=stop.get("stdin"), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True,
                                    preexec_fn=parent_death_signal(signal.SIGINT if launcher else signal.SIGTERM))
        except OSError as exc:   # not executable, not a program (ENOEXEC), ...
            raise InputError(f"cannot start the command: {exc.strerror or exc}", file=command[0]) from None
        tree.attach(proc.pid)
        stop["tree"], stop["running"] = tree, True
        assert proc.stdout is not None and proc.stderr is not None      # both are PIPE
        streams = _Streams([(proc.stdout.fileno(), copies[0], out), (proc.stderr.fileno(), copies[1], stop["err"])])
        info["pid"] = proc.pid
        write_json(rdir / "run.json", info)
        try:
            return _pump(proc, tree, rdir, info, streams, grace, notes, stop, launch or {})
        except BaseException:
            _emergency_stop(proc, tree, grace)   # never leave the tree behind, whatever went wrong
            raise
    finally:
        stop["running"], stop["tree"] = False, None
        tree.close()
        for c in copies:
            c.close()
        if streams is not None:
            streams.close()
        stop["mid_line"] = copies[0].last != b"\n"     # swapwatch's closing lines start on a line of their own


def _emergency_stop(proc, tree: "Tree", grace: float) -> None:
    """A bug of ours mid-run: the same stop sequence as for a signal, so nothing is left behind."""
    stopper = _Stopper(tree, grace)
    stopper.interrupt()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    if tree.alive() or proc.poll() is None:
        stopper.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    stopper.kill()


class _Stopper:
    """The stop sequence: SIGINT to the child's group (msrun stops its workers on SIGINT, not
    SIGTERM), then after ``grace`` SIGTERM to every process of the tree (workers started with ``&``
    by a launcher shell ignore SIGINT by POSIX rule, and many save a checkpoint on SIGTERM), then
    after another ``grace`` SIGKILL for what is left. A second signal to swapwatch goes straight
    to SIGKILL."""

    def __init__(self, tree: "Tree", grace: float) -> None:
        self.tree, self.grace = tree, grace
        self.step = 0                  # 0 nothing sent, 1 SIGINT, 2 SIGTERM, 3 SIGKILL
        self.at = 0.0

    def interrupt(self) -> None:
        self.tree.snapshot()           # BEFORE signalling: workers are session leaders
        self.tree.signal_group(signal.SIGINT)
        self.step, self.at = 1, time.monotonic() + self.grace

    def terminate(self) -> None:
        self.tree.snapshot()
        self.tree.signal_group(signal.SIGTERM)
        self.tree.signal_all(signal.SIGTERM)
        self.step, self.at = 2, time.monotonic() + self.grace

    def kill(self) -> None:
        self.tree.signal_group(signal.SIGKILL)
        self.tree.kill_leftovers()
        self.step = 3

    def tick(self, signals: int) -> None:
        if self.step in (1, 2) and signals > 1:
            self.kill()
        elif self.step in (1, 2) and time.monotonic() > self.at:
            self.terminate() if self.step == 1 else self.kill()


def _pump(proc, tree: "Tree", rdir: Path, info: Dict[str, Any], streams: "_Streams", grace: float,
          notes: List[str], stop: Dict[str, Any], launch: Dict[str, Any]) -> int:
    """Tee the child's output until it is gone; turn a signal into a clean stop of the tree; then
    drain the pipes (bounded) and deal with what the command left running."""
    stopper = _Stopper(tree, grace)
    last_snap = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if now - last_snap > 0.5:
            tree.snapshot()
            last_snap = now
        if stop["sig"] and stopper.step == 0:
            stopper.interrupt()
            _mark_interrupted(info, stop)
            write_json(rdir / "run.json", info)
        stopper.tick(stop["count"])
        if streams.eof:
            time.sleep(0.1)
        else:
            streams.tee(0.2)
    rc = proc.wait()
    stop["running"] = False          # from now on a passed signal has no job to go to
    info["child_exit_code"] = rc
    if not streams.eof:
        _drain_after_exit(streams, stop)
    tree.snapshot()
    left = tree.alive()
    if left and launch.get("launcher") and not launch.get("join") and not stop["sig"]:
        # msrun --join=False returns at once: its workers ARE the job; watch them to their end
        _watch(tree, streams, stop)
        left = tree.alive()
    if left:
        if stop["sig"] and not info["interrupted"]:
            _mark_interrupted(info, stop)
        named = tree.describe(left)
        if stopper.step in (0, 1):
            stopper.terminate()      # the command is over: what it left gets SIGTERM, then SIGKILL
        while tree.alive() and stopper.step < 3:
            stopper.tick(stop["count"])
            if streams.eof:
                time.sleep(0.1)
            else:
                streams.tee(0.1)
        info["leftover_killed"] = left
        notes.append(f"stopped {len(left)} leftover process(es) the command left running "
                     f"(SIGTERM, then SIGKILL after {grace:g} s): {named}")
    if not streams.eof:
        _drain_after_exit(streams, stop, quiet=0.5, limit=2.0)
    return rc


class _Streams:
    """The job's output pipes, each with its copy in the run directory and its terminal stream.

    One ``select`` waits on every pipe still open; what comes is copied as it comes (a read of up
    to 64 KiB), so each stream is byte for byte and in order within itself in both places. Across
    the two streams the order is the order the reads came in (two pipes cannot say more: a job
    that writes to stdout and stderr within one read's time may have them swapped)."""

    def __init__(self, pairs: List[Tuple[int, "_Copy", Any]]) -> None:
        self.open: Dict[int, Tuple["_Copy", Any]] = {fd: (copy, sink) for fd, copy, sink in pairs}

    @property
    def eof(self) -> bool:
        """Every pipe reached its end (no process holds a write end any more)."""
        return not self.open

    def tee(self, wait: float) -> Optional[bool]:
        """Copy what the pipes have within ``wait`` seconds: True when something was copied,
        False when the last pipe reached its end, None when nothing came."""
        if not self.open:
            return False
        ready, _, _ = select.select(list(self.open), [], [], wait)
        if not ready:
            return None
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            copy, sink = self.open[fd]
            if not chunk:
                del self.open[fd]
                continue
            copy.write(chunk)
            _write(sink, chunk)
        return True

    def close(self) -> None:
        self.open.clear()


def _watch(tree: "Tree", streams: _Streams, stop: Dict[str, Any]) -> None:
    """Keep teeing while the launcher's detached workers run; a signal ends the wait."""
    while tree.alive() and not stop["sig"]:
        tree.snapshot()
        if streams.eof:
            time.sleep(0.2)
        else:
            streams.tee(0.2)


def _drain_after_exit(streams: _Streams, stop: Dict[str, Any], quiet: float = DRAIN_QUIET,
                      limit: float = DRAIN_LIMIT) -> None:
    """The child is gone; its descendants may still hold the pipes (e.g. msrun's ``tail -f``).
    Read until both pipes end, until nothing came for ``quiet`` seconds, until ``limit`` seconds
    passed, or until a signal came."""
    end = time.monotonic() + limit
    while not stop["sig"] and not streams.eof:
        left = end - time.monotonic()
        if left <= 0:
            return
        if streams.tee(min(quiet, left)) is None:
            return                   # quiet for `quiet` seconds: whoever holds the pipes is not the job



def _verify(rdir: Path, config: Optional[str], ir: bool, info: Dict[str, Any], out,
            notes: Optional[List[str]] = None) -> int:
    """Verify the run directory with the verify library; the table goes to the terminal and to
    ``verify.txt``, the JSON verdict to ``verify.json`` (what CI jobs read)."""
    from .verify import verify
    from .verify_render import render

    ir_dir = rdir / "ir"
    try:
        result = verify([str(rdir)], config_path=config, ir_dir=str(ir_dir) if ir and ir_dir.is_dir() else None)
    except InputError as exc:
        if config is None and not _strategy_logged(rdir):
            text = ("swapwatch run: nothing to verify: the job logged no strategy line ('Set ... at layer N') "
                    "and no 'initial ... from dict' config, and no --config was given\n")
            _keep(rdir / "verify.txt", text, notes)
            _write(out, text.encode())
            info["verify"] = {"skipped": "nothing to verify", "output": "verify.txt"}
            return 0                    # the job's own code: it succeeded, and nothing contradicts it
        text = f"swapwatch verify: {exc.one_line()}\n"
        code = 2
    except Exception as exc:  # noqa: BLE001 - a verify bug must not lose the run's record
        text = (f"swapwatch run: internal error in verify: {type(exc).__name__}: {exc} (a bug in swapwatch: "
                f"please report it; `swapwatch verify {rdir}` with SWAPWATCH_DEBUG=1 shows the traceback)\n")
        code = 3                        # as on every command: a bug of ours, not a failed verification
    else:
        text = render(result, "table")
        if not text.endswith("\n"):
            text += "\n"
        code = result.exit_code
        _keep(rdir / "verify.json", render(result, "json"), notes)
    _keep(rdir / "verify.txt", text, notes)
    _write(out, text.encode())
    info["verify"] = {"exit_code": code, "output": "verify.txt",
                      **({"json": "verify.json"} if (rdir / "verify.json").exists() else {})}
    return code


def _keep(path: Path, text: str, notes: Optional[List[str]]) -> None:
    """Write one of the run's result files; a failure is a note (the verdict went to the terminal)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        if notes is not None:
            notes.append(f"could not write {path}: {exc.strerror or exc} (the verdict above is the only copy)")


def _strategy_logged(rdir: Path) -> bool:
    """Whether any log of the run holds a strategy line or a logged config (what verify needs)."""
    from .parsers import read_logs

    try:
        runlog = read_logs([str(rdir)])
    except InputError:
        return False
    return any(e.kind in ("action", "initial_config") for rl in runlog.ranks.values() for e in rl.events)


class _Nowhere:
    """swapwatch's own stdout was closed (``>&-``): the tee goes to console.log only."""

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


def _stdout_bytes():
    if sys.stdout is None:           # Python's stdout when fd 1 was closed at start
        return _Nowhere()
    return getattr(sys.stdout, "buffer", sys.stdout)


def _stderr_bytes():
    if sys.stderr is None:           # fd 2 closed at start: the job's stderr goes to its copy only
        return _Nowhere()
    return getattr(sys.stderr, "buffer", sys.stderr)


def _write(out, data: bytes) -> None:
    try:
        out.write(data)
        out.flush()
    except (ValueError, OSError, AttributeError):
        pass            # the terminal went away or is full: console.log still gets every byte


def _end_line(out, stop: Dict[str, Any]) -> None:
    """The job's output ended without a newline: swapwatch's own lines start on a new one."""
    if stop.pop("mid_line", False):
        _write(out, b"\n")


def _say(out, text: str) -> None:
    """One line of swapwatch's own: escaped (a run-dir name or a path in a note is the caller's, and an
    ESC in it printed raw would reach the terminal: the review's N56)."""
    _write(out, (escape(text) + "\n").encode())


def _version() -> str:
    try:
        from . import __version__

        return __version__
    except ImportError:
        return "unknown"
