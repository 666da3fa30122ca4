"""How long ``plan``'s search takes (``make_plan``, in process: read, search, write, read back and
estimate): the 64-layer, 4-stage ``fixtures/configs/plan_qwen64.yaml``, the same at 128 layers in
one stage, and at 128 layers over 16 stages. The goal is < 1 s each (a user re-plans on every
budget change); tests/test_plan_search.py checks these cases' answers, this their speed (timings
are no test assertion: the box is shared, docs/plan.md).

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
GOAL_S = 1.0


def cases(tmp: str):
    """(label, config path, budget bytes): budgets where the plan fits and mixes choices."""
    with open(QWEN, encoding="utf-8") as fh:
        text = fh.read()
    one = os.path.join(tmp, "q128x1.yaml")
    with open(one, "w", encoding="utf-8") as fh:
        fh.write(text.replace("num_layers: 64", "num_layers: 128").replace("pipeline_stage: 4", "pipeline_stage: 1")
                 .replace("micro_batch_num: 16", "micro_batch_num: 1"))
    sixteen = os.path.join(tmp, "q128x16.yaml")
    with open(sixteen, "w", encoding="utf-8") as fh:
        fh.write(text.replace("num_layers: 64", "num_layers: 128").replace("pipeline_stage: 4", "pipeline_stage: 16")
                 .replace("micro_batch_num: 16", "micro_batch_num: 32"))
    return [("64 layers x 4 stages", QWEN, 15 << 30), ("128 layers x 1 stage", one, 88 << 30),
            ("128 layers x 16 stages", sixteen, 13 << 30)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    slow = 0
    with tempfile.TemporaryDirectory(prefix="swapwatch-bench-") as tmp:
        for label, path, budget in cases(tmp):
            took = []
            for _ in range(args.runs):
                t = time.perf_counter()
                res = make_plan(path, budget)
                took.append(time.perf_counter() - t)
            best = min(took)
            slow += best > GOAL_S
            print(f"{label:24s} budget {budget / (1 << 30):.0f} GiB  fits {res.fits!s:5s}  best {best:.2f} s  "
                  f"median {statistics.median(took):.2f} s  ({'within' if best <= GOAL_S else 'OVER'} {GOAL_S:.0f} s)")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
