"""Write swapwatch/memory/model_error.json from the oracle tier's DryRun records: the model's worst
error per tensor table, and on the plan DryRun records (held out), which plan's margin takes
(swapwatch/memory/budget.py). Run it after the
model or the records change; tests/test_plan_margin.py fails until the file matches.

    python tools/plan_margin_table.py
"""
from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from swapwatch.memory.budget import MODEL_ERROR_FILE  # noqa: E402
from swapwatch.memory.calibrate import corpus_errors  # noqa: E402


def main() -> int:
    data = corpus_errors(os.path.join(ROOT, "fixtures", "dryrun", "cases"),
                         os.path.join(ROOT, "fixtures", "dryrun", "plans"))
    with open(MODEL_ERROR_FILE, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
    for table, row in sorted(data["tables"].items()):
        print(f"{table:12s} worst {row['worst_error']:+.1%} ({row['worst_case']}), {row['stages']} stages")
    held = data["held_out"]
    print(f"held out     worst {held['worst_error']:+.1%} ({held['worst_case']}), {held['stages']} plan stages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
