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


def run(cmd: List[str], out_path: str) -> Tuple[float, Optional[int], int, Optional[float]]:
    """(seconds, peak RSS in KB or None, exit code, CPU seconds user+sys or None) of one run,
    stdout to ``out_path``."""
    timed = os.path.exists(GNU_TIME)
    rss_file = out_path + ".rss"
    full = [GNU_TIME, "-f", "%M %U %S", "-o", rss_file] + cmd if timed else cmd
    with open(out_path, "wb") as out:
        t = time.perf_counter()
        p = subprocess.run(full, stdout=out, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
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


def best(cmd: List[str], out_path: str, repeat: int) -> Tuple[float, int, int, float]:
    """Minimum wall time, largest peak RSS, last exit code, minimum CPU time over ``repeat`` runs."""
    times, cpus, peak, rc = [], [], 0, 0
    for _ in range(repeat):
        dt, rss, rc, cpu = run(cmd, out_path)
        times.append(dt)
        cpus.append(cpu if cpu is not None else float("nan"))
        peak = max(peak, rss or 0)
    return min(times), peak, rc, min(cpus)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="1gb,1024,10k", help="workloads, comma-separated: 1gb, 1024, 10k")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    grep = shutil.which("grep")
    if not grep:
        print("grep not found: no baseline", file=sys.stderr)
        return 1
    sw = swapwatch_cmd()
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "swapwatch")], env=ENV, check=True)
    rows: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="swapwatch-bench-") as tmp:
        for name in [x.strip() for x in a.only.split(",") if x.strip()]:
            what, files = workload(name)
            warm(files)
            g, _, _, gcpu = best([grep, "-cE", PATTERN] + files, os.path.join(tmp, "counts.txt"), a.repeat)
            target = files if name == "1gb" else [os.path.dirname(files[0])]
            cmds = [("verify", sw + ["verify"] + target + ["--format", "json"], "report.json")]
            if name == "1024":
                cmds += [("events", sw + ["events"] + target, "events.jsonl"),
                         ("plot memory",
                          sw + ["plot", "memory"] + target + ["-o", os.path.join(tmp, "memory.png"), "--force"],
                          "plot.txt")]
            for label, cmd, out in cmds:
                dt, rss, rc, cpu = best(cmd, os.path.join(tmp, out), a.repeat)
                rows.append({"workload": what, "command": label, "s": dt, "grep": g, "rss": rss, "rc": rc,
                             "cpu": cpu, "gcpu": gcpu})
                print(f"{what:<28} {label:<12} {dt:7.2f} s   grep -cE {g:6.2f} s   ratio {dt / g:5.2f}   "
                      f"peak RSS {rss / 1024:6.0f} MB   CPU {cpu:6.2f} s (grep {gcpu:5.2f} s)   exit {rc}",
                      flush=True)
    print()
    print("| workload | command | swapwatch | grep -cE | ratio | peak RSS | CPU swapwatch / grep |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['command']} | {r['s']:.2f} s | {r['grep']:.2f} s | "
              f"{r['s'] / r['grep']:.2f} | {r['rss'] / 1024:.0f} MB | {r['cpu']:.2f} s / {r['gcpu']:.2f} s |")
    print(f"\n{os.cpu_count()} cores; goals: ratio <= 1.5 (plot memory: <= 10 s), peak RSS <= 200 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
