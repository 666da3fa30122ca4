"""From command-line paths to the runs a plot compares.

``plot memory`` compares runs, so it must know which paths are one run. The rule: every directory
given is one run (a swapwatch run dir or an msrun log dir with all its ``worker_*.log``); files
given are grouped by the directory they sit in, so ``worker_0.log worker_1.log`` of one msrun log
dir are the two ranks of one run, and logs from two directories are two runs.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError

if TYPE_CHECKING:
    from ..parsers.model import RunLog


def group_paths(paths: Sequence[str]) -> List[List[str]]:
    """Paths grouped into runs, in the order first given. InputError for a missing path."""
    groups: List[List[str]] = []
    by_dir: Dict[str, List[str]] = {}
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", file=str(p))
        if os.path.isdir(p):
            groups.append([p])
            continue
        d = os.path.dirname(os.path.abspath(p))
        if d in by_dir:
            by_dir[d].append(p)
        else:
            by_dir[d] = [p]
            groups.append(by_dir[d])
    return groups


def label_for(group: Sequence[str]) -> str:
    p = os.path.abspath(group[0])
    if os.path.isdir(p):
        return os.path.basename(p.rstrip(os.sep)) or p
    if len(group) == 1:
        return os.path.splitext(os.path.basename(p))[0]
    return os.path.basename(os.path.dirname(p)) or "run"


def load_runs(paths: Sequence[str], while_scanning: Optional[Callable[[], None]] = None
              ) -> List[Tuple[List[str], Any]]:
    """(paths, RunLog) per run (see :func:`group_paths`), labelled by its directory or file name.
    ``while_scanning``: as :func:`swapwatch.parsers.read_logs` (run while a run's logs are scanned)."""
    groups = group_paths(paths)               # missing paths fail before any parsing
    from ..parsers import read_logs

    runs = []
    for group in groups:
        rl = read_logs(list(group), while_scanning=while_scanning)
        if not rl.ranks:
            raise InputError("no worker logs found here (expected worker_*.log, a run dir, or log files)",
                             file=", ".join(group))
        if not rl.label:
            rl.label = label_for(group)
        runs.append((list(group), rl))
    return runs


def has_memory(runlog: "RunLog") -> bool:
    return any(rk.memory for rk in runlog.ranks.values())
