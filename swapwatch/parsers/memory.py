"""MindSpore memory lines -> MemoryEvent (bytes): the Ascend statistics block and the CPU pool lines.

Ascend (docs/mindspore-facts.md §3): one glog record ``... deinitialize success, statistics:`` whose continuation
lines are unprefixed, or the same block after ``Out of Memory!!!``; the key names vary by adapter
and era (rows in :data:`swapwatch.parsers.grammar.ASCEND_MEMORY_KEYS`). The scanner hands us the
first ``... memory size: NM`` line; the block's other lines are read ahead from the same buffer,
up to the next line that carries the needle itself (which is a candidate and reads on from there),
so every block line is parsed exactly once.

CPU (docs/mindspore-facts.md §3): ``peak used mem:NM`` / ``actual peak used mem:NM`` / ``total allocated
mem:NM`` in the PRE_ACT pool dumps printed at exit with ``GLOG_v=1`` or
``MS_SUBMODULE_LOG_v={PRE_ACT:1}``. Sizes are whole MB (MindSpore's kMBToByte = 2**20).
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional

from .grammar import ASCEND_MEMORY_KEYS, ASCEND_MEMORY_RE, ASCEND_NEEDLE, CPU_MEMORY, MB, OOM_RE
from .model import Event, MemoryEvent, NoticeEvent

_ASCEND = re.compile(ASCEND_MEMORY_RE)
_OOM = re.compile(OOM_RE)
_CPU = [(re.compile(rx), metric) for rx, metric in CPU_MEMORY]
_BASE = re.compile(r"MindSpore memory base address: (?P<addr>\S+)")
_NEEDLE = ASCEND_NEEDLE.decode()


def parse_cpu(msg: str, rank: Optional[int], source: str) -> List[Event]:
    out: List[Event] = []
    for rx, metric in _CPU:
        m = rx.search(msg)
        if m:
            out.append(MemoryEvent(rank, source, metric=metric, bytes=int(m.group("mb")) * MB))
    return out


def _ascend_line(msg: str, rank: Optional[int], source: str) -> List[Event]:
    return [MemoryEvent(rank, source, metric=ASCEND_MEMORY_KEYS[m.group("k")], bytes=int(m.group("mb")) * MB)
            for m in _ASCEND.finditer(msg)]


def is_block_line(msg: str) -> bool:
    return bool(_ASCEND.search(msg) or _BASE.search(msg))


def parse_ascend(msg: str, rank: Optional[int], source: str, follow: Iterable[tuple] = ()) -> List[Event]:
    """The needle line itself, then the block's following lines that do not carry the needle.

    ``follow`` yields ``(source, message)`` of the lines after this one, in order.
    """
    out: List[Event] = []
    m = _OOM.search(msg)
    if m:
        out.append(NoticeEvent(rank, source, what="oom", data={"request_bytes": int(m.group("n"))}))
    out.extend(_ascend_line(msg, rank, source))
    if not out:
        return out
    for src, text in follow:
        if not is_block_line(text):
            break
        if _NEEDLE in text:
            break             # a candidate line itself: it reads the rest of the block, exactly once
        out.extend(_ascend_line(text, rank, src))
    return out
