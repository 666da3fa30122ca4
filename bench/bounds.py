"""``make bench-bounds``: issue 36's large-but-legal inputs, each at two sizes ten times apart, with the
CPU time, wall time and peak RSS of the whole command (what ``docs/reliability.md`` quotes).

Near-linear is the goal: the CPU ratio between the two sizes should be about their size ratio (10),
and peak RSS should not grow with the input where it is streamed. CPU time (``ru_utime + ru_stime``
of the command and its pool workers) is the figure on a shared machine: the wall clock there is
mostly other people's load. Workloads are generated into ``bench/out/bounds/`` (gitignored) once:

* ``patterns``: ``explain`` of a YAML with 2,000 / 20,000 ``select_recompute`` patterns;
* ``layers``: ``verify`` (without and with ``--config``) and ``events`` of a worker log with 10**5 /
  10**6 ``Set layer swap at layer N`` lines (22 / 220 MB), layers 0 .. N-1;
* ``plot``: ``plot strategy`` of a YAML at 1,000 / 10,000 layers (pp 8), and of 10,000 layers whose
  neighbours all differ (every other layer swapped: nothing folds);
* ``ranks``: ``events --rank 0-1000000000000`` and ``plot memory --ranks 0-1000000000000``.

    python bench/bounds.py [--only patterns,layers,plot,ranks]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from typing import List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out", "bounds")
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
GNU_TIME = "/usr/bin/time"


def swapwatch() -> List[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "swapwatch")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "swapwatch.cli"]


def measure(args: List[str]) -> Tuple[int, float, float, int]:
    """(exit code, wall s, CPU s, peak RSS kB) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = ([GNU_TIME, "-f", "%M"] if os.path.exists(GNU_TIME) else []) + args
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss = int(r.stderr.strip().splitlines()[-1]) if os.path.exists(GNU_TIME) and r.stderr.strip() else \
        after.ru_maxrss
    return r.returncode, wall, cpu, rss


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def patterns_yaml(n: int) -> str:
    path = os.path.join(OUT, f"patterns_{n}.yaml")
    if not os.path.exists(path):
        src = _read(os.path.join(CONFIGS, "conflict.yaml")).replace("swap: True", "swap: False").replace(
            "  recompute: [0, 1]", "  recompute: False")
        pats = "".join(f"    'attention\\.wq{i}': True\n" for i in range(n))
        with open(path, "w") as fh:
            fh.write(src.replace("    'feed_forward\\.w1': [1, 2]\n", pats))
    return path


def layers_log(n: int) -> str:
    path = os.path.join(OUT, f"layers_{n}.log")
    if not os.path.exists(path):
        lines = _read(os.path.join(ROOT, "fixtures", "logs", "swap_case2.log")).splitlines(True)
        with open(path + ".tmp", "w") as fh:
            fh.write("".join(lines[:16]))
            for i in range(n):
                fh.write(lines[16].replace("layer 0 ", f"layer {i} ", 1))
        os.replace(path + ".tmp", path)
    return path


def layers_yaml(n: int, alternate: bool = False) -> str:
    path = os.path.join(OUT, f"layers_{n}{'_alt' if alternate else ''}.yaml")
    if not os.path.exists(path):
        src = _read(os.path.join(CONFIGS, "plan_qwen64.yaml")).replace(
            "num_layers: 64", f"num_layers: {n}").replace("pipeline_stage: 4", "pipeline_stage: 8")
        if alternate:
            src = re.sub(r"swap_config:\n(  .*\n)+", "", src).replace(
                "recompute_config:\n  recompute: True\n", "recompute_config:\n  recompute: False\n")
            src += ("swap_config:\n  swap: True\n  layer_swap:\n    - backward_prefetch: 1\n      layers: "
                    + str(list(range(0, n, 2))) + "\n")
        with open(path, "w") as fh:
            fh.write(src)
    return path


def rows(only: List[str]) -> List[Tuple[str, str, List[str]]]:
    """(workload, size, argv) of every measured command."""
    sw = swapwatch()
    png = os.path.join(OUT, "out.png")
    out: List[Tuple[str, str, List[str]]] = []
    if "patterns" in only:
        for n in (2000, 20000):
            out.append(("explain, N select patterns", f"{n:,}", sw + ["explain", patterns_yaml(n)]))
    if "layers" in only:
        cfg = os.path.join(CONFIGS, "swap_case2.yaml")
        for n in (100_000, 1_000_000):
            log = layers_log(n)
            out.append(("verify, N strategy lines", f"{n:,}", sw + ["verify", log]))
            out.append(("verify --config, N strategy lines", f"{n:,}", sw + ["verify", log, "--config", cfg]))
            out.append(("events, N strategy lines", f"{n:,}", sw + ["events", log]))
    if "plot" in only:
        for n in (1000, 10000):
            out.append(("plot strategy, N layers", f"{n:,}", sw + ["plot", "strategy", layers_yaml(n), "-o", png,
                                                                    "--force"]))
        out.append(("plot strategy, N layers all different", "10,000",
                    sw + ["plot", "strategy", layers_yaml(10000, True), "-o", png, "--force"]))
    if "ranks" in only:
        full = os.path.join(ROOT, "fixtures", "plot_runs", "full")
        out.append(("events --rank 0-10**12", "-", sw + ["events", full, "--rank", "0-1000000000000"]))
        out.append(("plot memory --ranks 0-10**12", "-", sw + ["plot", "memory", full, "--ranks", "0-1000000000000",
                                                               "-o", png, "--force"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="patterns,layers,plot,ranks")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    only = args.only.split(",")
    print(f"{'workload':40} {'N':>10} {'exit':>4} {'wall s':>8} {'CPU s':>8} {'peak RSS':>10}")
    for what, n, argv in rows(only):
        code, wall, cpu, rss = measure(argv)
        print(f"{what:40} {n:>10} {code:>4} {wall:8.1f} {cpu:8.1f} {rss / 1024:8.0f} MB", flush=True)


if __name__ == "__main__":
    main()
