"""What DryRun L1's memory tracker has alive at one moment, grouped: the evidence behind a model term,
small enough to keep in fixtures/dryrun/findings/ (the tracker's own CSVs are tens of MB).

A DryRun run with ``MS_ALLOC_CONF=memory_tracker:True`` in its environment (``swapwatch.memory.dryrun.
measure`` passes the environment on) writes ``rank_0/memory_block.csv`` beside its log: one row per
device block with its start and end (task time stamps), size, kind (Weight, Kernel, ...) and the node
that made it. This tool finds the used peak (or takes ``--at T``), and writes the blocks alive then,
grouped by kind and node name with layer numbers and op ids folded (``layers-CellList/#-...``), each
group's MiB and block count; ``--after-use PATTERN`` adds, for the blocks whose last user's node name
matches PATTERN (e.g. ReduceScatter), how long they stayed after that use (task ticks: median, max)
and how many there were.

    python tools/dryrun/tracker_summary.py RUN/stage0/rank_0/memory_block.csv --case NAME \\
        [--at T] [--after-use ReduceScatter] [--top 30] -o fixtures/dryrun/findings/NAME.json
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

MIB = 1 << 20
#: the end time stamp of a block alive to the end of the run
FOREVER = 1 << 62


def _fold(node: str) -> str:
    """A node name with its layer numbers and op ids folded, so a term's blocks group together."""
    return re.sub(r"\d+", "#", re.sub(r"-op\d+$", "", node))


def read_blocks(path: str) -> List[Tuple[int, int, int, str, str, str]]:
    """(start, end, size, kind, node, last user task) per device block of a memory_block.csv."""
    csv.field_size_limit(1 << 30)
    out = []
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        for row in csv.DictReader(fh):
            if "Host" in (row.get("pool_type") or ""):
                continue
            out.append((int(row["start_time_stamp"]), int(row["end_time_stamp"]), int(row["size"]),
                        row["type"], row["node_name"], row.get("last_user_task") or ""))
    return out


def peak(blocks: List[Tuple[int, int, int, str, str, str]]) -> Tuple[int, int]:
    """(used bytes, time stamp) of the largest sum of live blocks."""
    delta: Dict[int, int] = collections.defaultdict(int)
    for start, end, size, *_ in blocks:
        delta[start] += size
        delta[end] -= size
    cur, best = 0, (0, 0)
    for t in sorted(delta):
        cur += delta[t]
        if cur > best[0]:
            best = (cur, t)
    return best


def task_names(path: str) -> Dict[str, str]:
    """time stamp -> node name of task.csv beside memory_block.csv."""
    csv.field_size_limit(1 << 30)
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        return {row["time_stamp"]: row["node_name"] for row in csv.DictReader(fh)}


def summary(path: str, case: str, at: Optional[int] = None, top: int = 30,
            after_use: Optional[str] = None) -> Dict[str, Any]:
    blocks = read_blocks(path)
    used, t_peak = peak(blocks)
    t = t_peak if at is None else at
    live = [b for b in blocks if b[0] <= t < b[1]]
    groups: Dict[Tuple[str, str], List[int]] = collections.defaultdict(lambda: [0, 0])
    for _, _, size, kind, node, _ in live:
        g = groups[(kind, _fold(node))]
        g[0] += size
        g[1] += 1
    kinds: Dict[str, int] = collections.Counter()
    for (kind, _), (size, _) in groups.items():
        kinds[kind] += size
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][0])
    out: Dict[str, Any] = {
        "case": case, "source": "DryRun L1, MS_ALLOC_CONF=memory_tracker:True (tools/dryrun/tracker_summary.py)",
        "used_peak_mib": used // MIB, "peak_at": t_peak, "at": t, "live_mib": sum(b[2] for b in live) // MIB,
        "end": max(b[1] for b in blocks if b[1] < FOREVER),
        "by_kind_mib": {k: v // MIB for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
        "groups": [{"kind": kind, "node": node, "mib": round(size / MIB, 1), "blocks": n}
                   for (kind, node), (size, n) in ranked[:top]]}
    if after_use:
        tasks = task_names(os.path.join(os.path.dirname(path), "task.csv"))
        pat = re.compile(after_use)
        held: Dict[str, List[int]] = collections.defaultdict(list)
        sizes: Dict[str, int] = collections.Counter()
        for _start, end, size, _kind, node, last in blocks:
            user = tasks.get(last, "")
            if last and pat.search(user) and not pat.search(node) and end < FOREVER:
                held[_fold(node)].append(end - int(last))
                sizes[_fold(node)] += size
        out["held_after_last_use"] = {
            "pattern": after_use,
            "groups": [{"node": node, "mib": round(sizes[node] / MIB, 1), "blocks": len(ticks),
                        "median_ticks": sorted(ticks)[len(ticks) // 2], "max_ticks": max(ticks)}
                       for node, ticks in sorted(held.items(), key=lambda kv: -sizes[kv[0]])[:top]]}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="rank_N/memory_block.csv of a DryRun run with the memory tracker on")
    ap.add_argument("--case", required=True, help="the DryRun case (fixtures/dryrun/cases/NAME.yaml) it ran")
    ap.add_argument("--at", type=int, help="a task time stamp (default: the used peak's)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--after-use", help="regex of a last user's node name (e.g. ReduceScatter)")
    ap.add_argument("-o", "--output", help="write the JSON here (default: standard output)")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.csv):
        print(f"tracker_summary: no such file: {args.csv}", file=sys.stderr)
        return 2
    data = summary(args.csv, args.case, args.at, args.top, args.after_use)
    text = json.dumps(data, indent=1) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
