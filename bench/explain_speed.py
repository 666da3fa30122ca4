"""How long `swapwatch explain` takes on a 64-layer YAML, CLI start included (the budget: < 1 s).

A user runs explain before every launch and in CI on every YAML change, so its cost is the
process start (Python, click, the config loader, the layout, the renderer) plus the per-layer
work. This times the installed console script end to end, as a user sees it: the folded table,
`--all-layers`, and `--format json`, on a generated 64-layer, 4-stage Llama YAML with full,
select and comm recompute (no swap) and on the same with swap on (layer and op swap). Prints the
minimum and median of several runs; the minimum is the figure (the rest is other load on the box).

    python bench/explain_speed.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

NO_SWAP = """\
model:
  model_config:
    num_layers: 64
parallel_config:
  pipeline_stage: 4
recompute_config:
  recompute: [6, 4, 2, 0]
  select_recompute: ['feed_forward\\.mul', 'feed_forward\\.w1\\.activation\\.silu']
  select_comm_recompute: True
"""
SWAP = """\
model:
  model_config:
    num_layers: 64
parallel_config:
  pipeline_stage: 4
context:
  memory_optimize_level: O0
recompute_config:
  recompute: [0, 16, 32, 48]
  select_recompute:
    'feed_forward\\.mul': [1, 2, 3, 17, 18]
swap_config:
  swap: True
  layer_swap:
    - backward_prefetch: 10
      layers: [4, 5, 6, 20, 21]
  op_swap:
    - op_name: 'attention'
      backward_prefetch: 20
      layers: [8, 9, 10, 11, 24, 25, 40, 41]
"""


def time_cli(exe: str, args, runs: int):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode not in (0, 1):
            raise SystemExit(f"swapwatch {' '.join(args)} failed: {r.stderr.strip()}")
    return min(times), statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    exe = os.path.join(os.path.dirname(sys.executable), "swapwatch")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'workload':<42} {'min s':>7} {'median s':>9}")
        for name, text in (("64 layers, pp 4, no swap", NO_SWAP), ("64 layers, pp 4, swap", SWAP)):
            path = os.path.join(tmp, name.replace(" ", "_").replace(",", "") + ".yaml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            for extra in ([], ["--all-layers"], ["--format", "json"]):
                lo, med = time_cli(exe, ["explain", path, *extra], a.runs)
                label = f"{name} {' '.join(extra) or '(table)'}"
                print(f"{label:<42} {lo:>7.2f} {med:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
