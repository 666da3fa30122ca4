"""``make bench``: the whole ``swapwatch`` command against ``grep -cE`` on the same files, and peak RSS.

What is compared (the method of docs/performance.md): the whole process a user runs
(interpreter start, imports, parse, checks, render), ``swapwatch verify LOGS --format json`` with
its report written to a file, against ``grep -cE`` over the same files with the alternation of the
seven line families verify reads (LayerSetting ``Set ...``, ``Formative``, ``initial ... from dict``,
step lines, memory peaks, error codes, SWAPWATCH), its counts written to a file too (GNU grep
writing to /dev/null stops at the first match). Page cache warm (every file read once first), the
minimum of ``--repeat`` runs (3) of each, both under ``LC_ALL=C.UTF-8``. Peak RSS is GNU time's
``%M`` for the command (the largest process of its tree, pool workers included) when
``/usr/bin/time`` exists, else the largest child's ``ru_maxrss``. The CPU time (``%U + %S``, the
command and its pool workers) is printed too: on a shared machine it varies far less than the
wall clock.

Workloads (generated once into ``bench/out/``, gitignored, and reused):

* ``1gb``: one 1 GB worker log (``gen_log.py``: a real strategy block in ~1 GB of MindSpore noise);
* ``1024``: an msrun job of 1,024 worker logs of 1 MB (``gen_job.py``: ranks differ in rank ids,
  timings and memory figures, three ranks in strategy), plus ``swapwatch events`` and
  ``swapwatch plot memory`` over it;
* ``10k``: 10,000 worker logs of 100 KB.

Goals: ratio <= 1.5 (1.0 stretch), peak RSS <= 200 MB whatever the size or the number of logs;
the plot over 1,024 ranks <= 10 s. ``--only 1gb,1024`` picks workloads; ``--repeat 1`` for a quick look.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
#: The grep a user would run instead (the seven line families verify reads).
PATTERN = ("Set (full recompute|select|layer swap|op_swap)|Formative|initial [a-z_]+ from dict|per_step_time|"
           "peak|Error code|SWAPWATCH")
#: Bytecode cached as an installed package has it (pip compiles on install); a session that sets
#: PYTHONDONTWRITEBYTECODE would otherwise recompile every swapwatch module in every timed run.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV.update(LC_ALL="C.UTF-8", LANG="C.UTF-8", PYTHONPYCACHEPREFIX=os.path.join(OUT, "pycache"))
GNU_TIME = "/usr/bin/time"


def swapwatch_cmd() -> List[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "swapwatch")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "swapwatch.cli"]


def workload(name: str) -> Tuple[str, List[str]]:
    """(what, files) of a workload, generating it once."""
    gen = [sys.executable]
    if name == "1gb":
        path = os.path.join(OUT, "worker_0_1024mb.log")
        if not os.path.exists(path):
            print(f"generating {path} (1 GB, once) ...", flush=True)
            subprocess.run(gen + [os.path.join(HERE, "gen_log.py"), "--size-mb", "1024", "--out", path], check=True)
        return "one 1 GB worker log", [path]
    ranks, kb = {"1024": (1024, 1000), "10k": (10000, 100)}[name]
    path = os.path.join(OUT, f"job_{ranks}x{kb}kb")
    if not os.path.exists(os.path.join(path, ".complete")):
        print(f"generating {path} ({ranks} logs of {kb} KB, once) ...", flush=True)
        subprocess.run(gen + [os.path.join(HERE, "gen_job.py"), "--ranks", str(ranks), "--size-kb", str(kb),
                              "--out", path], check=True)
    files = sorted((os.path.join(path, f) for f in os.listdir(path) if f.endswith(".log")),
                   key=lambda p: int(os.path.basename(p)[7:-4]))
    return f"{ranks:,} worker logs of {kb // 1000 or kb} {'MB' if kb >= 1000 else 'KB'}", files


def warm(files: List[str]) -> int:
    size = 0
    for p in files:
        with open(p, "rb") as f:
            while True:
                block = f.read(16 << 20)
                if not block:
                    break
                size += len(block)
    return size


def run(cmd: List[str], out_path: str, env: Optional[Dict[str, str]] = None
        ) -> Tuple[float, Optional[int], int, Optional[float]]:
    """(seconds, peak RSS in KB or None, exit code, CPU seconds user+sys or None) of one run,
    stdout to ``out_path``, in ``env`` (default :data:`ENV`)."""
    timed = os.path.exists(GNU_TIME)
    rss_file = out_path + ".rss"
    full = [GNU_TIME, "-f", "%M %U %S", "-o", rss_file] + cmd if timed else cmd
    with open(out_path, "wb") as out:
        t = time.perf_counter()
        p = subprocess.run(full, stdout=out, stderr=subprocess.PIPE, env=env or ENV, cwd=ROOT)
        dt = time.perf_counter() - t
    rss, cpu = None, None
    if timed:
        with open(rss_file) as f:     # the last line is ours ("Command exited with ..." may precede it)
            last = f.read().strip().splitlines()[-1].split()
        rss, cpu = int(last[0]), float(last[1]) + float(last[2])
    else:
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode not in (0, 1):
        sys.stderr.write(p.stderr.decode(errors="replace")[-2000:])
    return dt, rss, p.returncode, cpu


@dataclass
class Row:
    """One command's figures over a workload's rounds (each beside grep's of the same rounds)."""

    workload: str
    command: str
    s: float              # minimum wall seconds
    grep: float           # grep's minimum over the same rounds
    rss: int              # largest peak RSS, KB
    rc: int
    cpu: float            # minimum CPU seconds (user + sys, pool workers included)
    gcpu: float
    load: Tuple[float, float]   # load average range over the rounds
    goal: Optional[str]   # the workload's name when the row is one of issue 37's goals

    @property
    def ratio(self) -> float:
        return self.s / self.grep


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere) and its flags
    that matter to the scan's SIMD code (AVX2, AVX-512, NEON/ASIMD)."""
    import platform

    name, flags = "", set()  # type: Tuple[str, set]
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model name") and not name:
                    name = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    simd = [f for f in ("avx2", "avx512f", "avx512vbmi", "asimd", "sve") if f in flags]
    return f"{name or platform.processor() or platform.machine()} ({', '.join(simd) or 'no AVX2/NEON flags'})"


def loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def prefilter_backend(env: Dict[str, str]) -> str:
    """Which prefilter path swapwatch takes under ``env`` (hyperscan or numpy), asked of the
    interpreter that runs it."""
    code = "from swapwatch.parsers import prefilter; print(prefilter.backend())"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="1gb,1024,10k", help="workloads, comma-separated: 1gb, 1024, 10k")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-fallback", action="store_true",
                    help="skip the rows of verify on the numpy prefilter (SWAPWATCH_PREFILTER=numpy)")
    a = ap.parse_args(argv)
    grep = shutil.which("grep")
    if not grep:
        print("grep not found: no baseline", file=sys.stderr)
        return 1
    sw = swapwatch_cmd()
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "swapwatch")], env=ENV, check=True)
    fallback = dict(ENV, SWAPWATCH_PREFILTER="numpy")
    backend = prefilter_backend(ENV)
    cpu = cpu_model()
    grep_version = subprocess.run([grep, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    print(f"CPU: {cpu}; {os.cpu_count()} cores; prefilter: {backend}; {grep_version}; "
          f"Python {sys.version.split()[0]}", flush=True)
    rows: List[Row] = []
    with tempfile.TemporaryDirectory(prefix="swapwatch-bench-") as tmp:
        for name in [x.strip() for x in a.only.split(",") if x.strip()]:
            what, files = workload(name)
            warm(files)
            target = files if name == "1gb" else [os.path.dirname(files[0])]
            verify = sw + ["verify"] + target + ["--format", "json"]
            cmds = [("verify", verify, "report.json", ENV, name)]
            if backend == "hyperscan" and not a.no_fallback:
                cmds.append(("verify (numpy)", verify, "report.json", fallback, None))
            if name == "1024":
                cmds += [("events", sw + ["events"] + target, "events.jsonl", ENV, None),
                         ("plot memory",
                          sw + ["plot", "memory"] + target + ["-o", os.path.join(tmp, "memory.png"), "--force"],
                          "plot.txt", ENV, None)]
            # Rounds: grep, then each command, so that every figure has a grep beside it taken under
            # the same load (a shared machine is rarely quiet for long).
            got: Dict[str, List[Tuple[float, Optional[int], int, Optional[float]]]] = {c[0]: [] for c in cmds}
            greps: List[Tuple[float, Optional[int], int, Optional[float]]] = []
            loads: List[float] = []
            for _ in range(a.repeat):
                loads.append(loadavg())
                greps.append(run([grep, "-cE", PATTERN] + files, os.path.join(tmp, "counts.txt")))
                for label, cmd, out, env, _ in cmds:
                    got[label].append(run(cmd, os.path.join(tmp, out), env))
            loads.append(loadavg())
            g = min(t for t, _, _, _ in greps)
            gcpu = min((c for _, _, _, c in greps if c is not None), default=float("nan"))
            for label, _, _, _, goal in cmds:
                runs = got[label]
                dt = min(t for t, _, _, _ in runs)
                rss = max(r or 0 for _, r, _, _ in runs)
                cpu_s = min((c for _, _, _, c in runs if c is not None), default=float("nan"))
                rc = runs[-1][2]
                rows.append(Row(what, label, dt, g, rss, rc, cpu_s, gcpu, (min(loads), max(loads)), goal))
                print(f"{what:<28} {label:<15} {dt:7.2f} s   grep -cE {g:6.2f} s   ratio {dt / g:5.2f}   "
                      f"peak RSS {rss / 1024:6.0f} MB   CPU {cpu_s:6.2f} s (grep {gcpu:5.2f} s)   exit {rc}   "
                      f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)
    print()
    print(f"CPU: {cpu}, {os.cpu_count()} cores; prefilter: {backend}; minimum of {a.repeat} rounds, each "
          "grep then swapwatch, under the load average shown")
    print()
    print("| workload | command | swapwatch | grep -cE | ratio | peak RSS | CPU swapwatch / grep | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.workload} | {r.command} | {r.s:.2f} s | {r.grep:.2f} s | {r.ratio:.2f} | {r.rss / 1024:.0f} MB | "
              f"{r.cpu:.2f} s / {r.gcpu:.2f} s | {r.load[0]:.1f}-{r.load[1]:.1f} |")
    goals = [r for r in rows if r.goal]
    if goals:
        plots = [r.s for r in rows if r.command == "plot memory"]
        said = ", ".join(f"{r.goal} {r.ratio:.2f}" for r in goals)
        line = (f"\ngoals (issue 37): verify <= 1.0x grep -cE ({said}): "
                f"{'met' if max(r.ratio for r in goals) <= 1.0 else 'NOT met'}; peak RSS <= 200 MB: "
                f"{'met' if all(r.rss <= 200 * 1024 for r in rows) else 'NOT met'}")
        if plots:
            line += f"; plot memory <= 10 s: {'met' if max(plots) <= 10 else 'NOT met'}"
        print(line)
        busiest = max(r.load[1] for r in rows)
        if busiest > (os.cpu_count() or 1) / 2:
            print(f"(load average up to {busiest:.1f} on {os.cpu_count()} cores: not a quiet machine, "
                  "wall-clock ratios are the load's as much as ours; re-run when it is quiet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
