"""msrun: worker-exit lines, and what the launch says about ranks (expected ranks, rank of a log).

msrun collapses any worker failure to exit code 1; the worker's real code is only in its console
line ``Worker process <pid> exit with exception. Error code: <N>.`` (docs/mindspore-facts.md §4). Expected
ranks come from the msrun directory (highest ``worker_N.log`` + 1, so a missing middle file shows),
``scheduler.log`` registrations (``rank id: N``), or a swapwatch ``run.json``.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Set

from .grammar import EXIT_RE, OFFLOAD_PRIM_RE, OFFLOAD_RE, RANK_RES
from .model import Event, ExitEvent, NoticeEvent

_EXIT = re.compile(EXIT_RE)
_OFFLOAD = re.compile(OFFLOAD_RE)
_OFFLOAD_PRIM = re.compile(OFFLOAD_PRIM_RE)
_RANKS = [re.compile(rx) for rx in RANK_RES]
_WORKER = re.compile(r"worker_(\d+)\.log(?:\.gz)?$")
_RANK_DIR = re.compile(r"(?:^|[/\\])rank_(\d+)(?:[/\\])")
_SCHED_RANK = re.compile(rb"\(role: MS_WORKER\), rank id: (\d+)")


def parse_exit(msg: str, rank: Optional[int], source: str) -> List[Event]:
    m = _EXIT.search(msg)
    return [ExitEvent(rank, source, code=int(m.group("code")), pid=int(m.group("pid")))] if m else []


def parse_offload(msg: str, rank: Optional[int], source: str) -> List[Event]:
    m = _OFFLOAD.search(msg)
    if not m:
        return []
    node = re.search(r"NOde: (\S+?)[{,]", m.group("rest"))
    prim = _OFFLOAD_PRIM.search(m.group("rest"))
    return [NoticeEvent(rank, source, what="offload_outside_lazy_inline",
                        data={"node": node.group(1) if node else None, "prim": prim.group("prim") if prim else None})]


def rank_from_name(path: str) -> Optional[int]:
    """``worker_3.log`` -> 3; ``output/log/rank_3/info.log`` -> 3; else None."""
    m = _WORKER.search(path)
    if m:
        return int(m.group(1))
    m = _RANK_DIR.search(path.replace("\\", "/"))
    return int(m.group(1)) if m else None


def rank_from_head(head: bytes, conclusive: bool = False) -> Optional[int]:
    """Rank evidence in the first bytes of a log (``rank id: N``, ``RANK_ID=N``, SWAPWATCH ``"rank":N``).

    ``conclusive``: ``head`` is only the start of a longer head; answer only when a longer head
    could not change the answer (the first, preferred form matched and does not touch the end of
    ``head``), else None (read more)."""
    for i, rx in enumerate(_RANKS):
        m = rx.search(head)
        if m:
            if conclusive and (i > 0 or m.end() >= len(head)):
                return None
            return int(m.group(1))
    return None


def scheduler_ranks(data: Iterable[bytes]) -> Set[int]:
    """Worker ranks registered in a scheduler.log (``The new node: 0(role: MS_WORKER), rank id: 0``)."""
    out: Set[int] = set()
    for chunk in data:
        out.update(int(x) for x in _SCHED_RANK.findall(chunk))
    return out
