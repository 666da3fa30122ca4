"""How long ``plan`` takes (``make_plan``, in process: read, search, write, read back and
estimate): the 64-layer, 4-stage ``fixtures/configs/plan_qwen64.yaml``, the same at 128 layers in
one stage and at 128 layers over 16 stages (goal < 1 s each: a user re-plans on every budget
change), at 1,000 layers on one stage and 1,000 per stage over 4 (goal < 10 s), and 10,000 layers
over 8 stages (goal < 60 s: bounded, issue 35 point 6). tests/test_plan_search.py and
tests/test_plan_knapsack.py check the answers, this their speed (timings are no test assertion: the
box is shared, docs/plan.md).

    python bench/plan_search.py [--runs 3]

Prints the best and the median of ``--runs`` runs per case; the best is the figure. Exit 1 when a
case's best is over the goal.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from swapwatch.memory.planner import make_plan  # noqa: E402

QWEN = os.path.join(ROOT, "fixtures", "configs", "plan_qwen64.yaml")
GiB = 1 << 30


def cases(tmp: str):
    """(label, config path, budget bytes, goal seconds): budgets where the plan fits and mixes choices."""
    with open(QWEN, encoding="utf-8") as fh:
        text = fh.read()

    def variant(layers: int, stages: int, micro: int) -> str:
        path = os.path.join(tmp, f"q{layers}x{stages}.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text.replace("num_layers: 64", f"num_layers: {layers}")
                     .replace("pipeline_stage: 4", f"pipeline_stage: {stages}")
                     .replace("micro_batch_num: 16", f"micro_batch_num: {micro}"))
        return path

    return [("64 layers x 4 stages", QWEN, 15 * GiB, 1.0),
            ("128 layers x 1 stage", variant(128, 1, 1), 88 * GiB, 1.0),
            ("128 layers x 16 stages", variant(128, 16, 32), 13 * GiB, 1.0),
            ("1,000 layers x 1 stage", variant(1000, 1, 1), 500 * GiB, 10.0),
            ("4,000 layers x 4 stages", variant(4000, 4, 16), 480 * GiB, 10.0),
            ("10,000 layers x 8 stages", variant(10000, 8, 16), 700 * GiB, 60.0)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    slow = 0
    with tempfile.TemporaryDirectory(prefix="swapwatch-bench-") as tmp:
        for label, path, budget, goal in cases(tmp):
            took = []
            for _ in range(args.runs):
                t = time.perf_counter()
                res = make_plan(path, budget, offsets=True)
                took.append(time.perf_counter() - t)
            best = min(took)
            slow += best > goal
            mix = len({lv.label for s in res.stages for lv in s.levels.values()})
            print(f"{label:26s} budget {budget / GiB:.0f} GiB  fits {res.fits!s:5s}  levels {mix}  best {best:.2f} s  "
                  f"median {statistics.median(took):.2f} s  ({'within' if best <= goal else 'OVER'} {goal:.0f} s)")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
