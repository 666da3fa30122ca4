"""SW402: ranks of the run whose logs are missing."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

from ..text import ranges
from . import CheckContext, Finding, Rule, register

if TYPE_CHECKING:
    from ..parsers.model import RunLog


@register
class MissingRanks(Rule):
    """Logs of some ranks of the run are missing.

    **What it means.** The run had more ranks than the logs given: msrun's worker count, the
    ``world_size`` that ``swapwatch run`` recorded, or gaps in the ``worker_N.log`` numbers (logs
    0, 1 and 3 mean rank 2 is missing; a single log given on its own is taken as a choice).
    Multi-node jobs write each node's logs on that node; for one
    node of a multi-node launch without ``--node_rank`` only the number of local logs is known.

    **Why it matters.** A pass over some ranks says nothing about the others, and a crashed rank
    often leaves its log on a node you did not collect.

    **How to fix it.** Collect every node's ``--log_dir`` and pass them all::

        swapwatch verify node0/output/msrun_log node1/output/msrun_log --config llama.yaml
    """

    code = "SW402"
    severity = "warning"
    title = "expected rank logs are missing"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        runlog = ctx.runlog
        if runlog is None or not runlog.ranks:
            return
        present = set(runlog.ranks)
        info = runlog.run_info or {}
        local = info.get("local_worker_num")
        if "ranks" in info and info["ranks"] is None and not runlog.expected_ranks:
            # one node of a multi-node launch without --node_rank: which ranks it ran is unknown,
            # only how many (a count that several nodes' dirs given together exceed)
            if isinstance(local, int) and len(present) < local:
                yield self.finding(f"{local - len(present)} of this node's {local} worker logs are missing "
                                   f"(found ranks {ranges(sorted(present))})",
                                   expected=f"{local} worker logs", actual=f"{len(present)}")
            return
        expected, why = _expected_ranks(runlog)
        for rank in sorted(set(expected) - present):
            yield self.finding(
                f"no log found ({why}; found ranks {ranges(sorted(present))})",
                rank=rank, expected="a worker log", actual="(missing)", source=_expected_at(runlog, rank))


def _expected_at(runlog: "RunLog", rank: int) -> Optional[str]:
    """Where the missing rank's log should be: ``worker_<rank>.log`` beside the logs found."""
    for r in sorted(runlog.ranks):
        files = runlog.ranks[r].files
        if files:
            return os.path.join(os.path.dirname(files[0]), f"worker_{rank}.log (missing)")
    return None


def _expected_ranks(runlog: "RunLog") -> Tuple[List[int], str]:
    if runlog.expected_ranks:
        return list(runlog.expected_ranks), f"the launch had {len(runlog.expected_ranks)} ranks"
    info = runlog.run_info or {}
    world = info.get("world_size") or info.get("worker_num")
    if isinstance(world, int) and world > 0:
        return list(range(world)), f"the run recorded world_size {world}"
    if len(runlog.ranks) < 2:
        return list(runlog.ranks), "one log given"      # a single file is a deliberate choice
    top = max(runlog.ranks)
    return list(range(top + 1)), f"ranks 0..{top} are numbered"
