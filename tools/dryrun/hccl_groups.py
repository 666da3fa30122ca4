"""Which HCCL groups a DryRun rank opens and which of them carry an operator: the record behind
``swapwatch.memory.model.communicators`` (docs/estimate.md "The communicators a rank opens").

For each DryRun stage directory given (``dryrun.log`` with its ``execute_order/comm_execute_order.csv``
under it: ``swapwatch.memory.dryrun.measure``'s work directory, ``bench/plan_dryrun.py``'s, or
``tools/dryrun/record_cases.py``'s), read from the log the rank, the parallel sizes MindFormers
initialised (``initial parallel_config from dict``), the code path (``use_legacy``) and every
``Create collective communication group`` line, and from the CSV the collectives the compiled graph
runs on each group; write them as one JSON record a stage:

  {"job", "rank", "rank_size", "use_legacy", "parallel": {dp, tp, pp, cp, ep, vocab_emb_dp,
   use_seq_parallel}, "groups": [{"name", "ranks", "ops": {primitive: count}}]}

``hccl_world_group`` is not logged as created (``init`` makes it) and is listed from the CSV.

usage: .venv/bin/python tools/dryrun/hccl_groups.py JOB=STAGE_DIR[#legacy|#mcore] ... [-o OUT.json]
       (``#legacy`` / ``#mcore``: the code path of a run whose log does not print ``use_legacy``)
"""
from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

CREATED = re.compile(r"Create collective communication group: (\S+) \[const vector\]\{(.*?)\}, async")
PARALLEL = re.compile(r"initial parallel_config from dict: (\{.*\})")
RANK = re.compile(r"RANK_ID: (\d+), RANK_SIZE: (\d+)")
LEGACY = re.compile(r"'use_legacy': (True|False)")


def record(job: str, stage_dir: Path, path: str = "") -> Dict[str, Any]:
    log = (stage_dir / "dryrun.log").read_text(encoding="utf-8", errors="replace")
    csvs = sorted(stage_dir.rglob("comm_execute_order.csv"))
    if not csvs:
        raise SystemExit(f"{stage_dir}: no comm_execute_order.csv under it")
    rank = RANK.search(log)
    par = PARALLEL.search(log)
    found = LEGACY.search(log)
    if not (rank and par and (found or path)):
        raise SystemExit(f"{stage_dir}/dryrun.log: no rank, parallel_config or use_legacy line")
    use_legacy = found.group(1) == "True" if found else path == "legacy"
    pc = ast.literal_eval(par.group(1))
    ops: Dict[str, Counter] = {}
    sizes: Dict[str, int] = {}
    with open(csvs[0], encoding="utf-8") as f:
        for row in csv.DictReader(f):
            ops.setdefault(row["group"], Counter())[row["primitive"]] += 1
            sizes[row["group"]] = len(row["comm_rank"].split())
    groups: List[Dict[str, Any]] = []
    for m in CREATED.finditer(log):
        name, members = m.group(1), m.group(2)
        if any(g["name"] == name for g in groups):
            continue
        groups.append({"name": name, "ranks": members.count(",") + 1 if members else 0,
                       "ops": dict(sorted(ops.get(name, Counter()).items()))})
    for name, count in ops.items():
        if not any(g["name"] == name for g in groups):
            groups.append({"name": name, "ranks": sizes[name], "ops": dict(sorted(count.items()))})
    return {"job": job, "rank": int(rank.group(1)), "rank_size": int(rank.group(2)),
            "use_legacy": use_legacy,
            "parallel": {"dp": pc["data_parallel"], "tp": pc["model_parallel"], "pp": pc["pipeline_stage"],
                         "cp": pc.get("context_parallel", 1), "ep": pc.get("expert_parallel", 1),
                         "vocab_emb_dp": pc.get("vocab_emb_dp", True),
                         "use_seq_parallel": pc.get("use_seq_parallel", False)},
            "groups": groups}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="JOB=STAGE_DIR")
    ap.add_argument("-o", "--out", default="fixtures/dryrun/hccl_groups.json")
    args = ap.parse_args(argv)
    out = []
    for run in args.runs:
        job, _, where = run.partition("=")
        where, _, path = where.partition("#")
        if not where or path not in ("", "legacy", "mcore"):
            raise SystemExit(f"{run}: expected JOB=STAGE_DIR[#legacy|#mcore]")
        out.append(record(job, Path(where), path))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(out)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
