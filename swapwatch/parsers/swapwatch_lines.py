"""SWAPWATCH event lines (DESIGN §3.4) -> typed events, authoritative where present.

The hooks write ``SWAPWATCH {json}`` next to the MindFormers-compatible text; the JSON carries exact
paths and values, so :mod:`swapwatch.parsers.reader` prefers these over the text lines of the same
rank. The line format itself lives in :mod:`swapwatch.model.event_lines` (written and read in one place).
"""
from __future__ import annotations

from typing import List, Optional

from ..model import event_lines as ev
from .model import ActionEvent, Event, ExitEvent, MemoryEvent, NoticeEvent, StepEvent, SwapwatchEvent


def _int(x) -> Optional[int]:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _float(x) -> Optional[float]:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def parse(msg: str, rank: Optional[int], source: str) -> List[Event]:
    obj = ev.parse_event(msg)
    if obj is None:
        at = msg.find(ev.PREFIX)
        return [NoticeEvent(rank, source, what="malformed_swapwatch", data={"text": msg[at:at + 300]})]
    r = _int(obj.get("rank"))
    rank = r if r is not None else rank
    kind = obj["kind"]
    if kind == "apply":
        action = obj.get("action")
        layer = _int(obj.get("layer"))
        if action not in ev.ACTIONS or layer is None:
            return [NoticeEvent(rank, source, what="malformed_swapwatch", data={"text": msg[:300]})]
        paths = [str(p).strip().lstrip(".") for p in (obj.get("paths") or [])]
        value = obj.get("value")
        values = {p: value for p in paths} if action == "op_swap" else {}
        return [ActionEvent(rank, source, layer=layer, action=action, paths=paths, value=value, values=values,
                            pattern=obj.get("pattern"), origin="swapwatch", swap_mode=obj.get("swap_mode"))]
    if kind == "step":
        return [StepEvent(rank, source, step=_int(obj.get("step")) or 0, epoch=_int(obj.get("epoch")),
                          loss=_float(obj.get("loss")), ms=_float(obj.get("ms")), origin="swapwatch")]
    if kind == "memory":
        metric = str(obj.get("source") or "memory")
        out: List[Event] = []
        if obj.get("bytes") is not None:
            out.append(MemoryEvent(rank, source, metric=metric, bytes=_int(obj.get("bytes")) or 0,
                                   step=_int(obj.get("step")), origin="swapwatch"))
        if obj.get("peak_bytes") is not None:
            out.append(MemoryEvent(rank, source, metric=f"{metric}_peak", bytes=_int(obj.get("peak_bytes")) or 0,
                                   step=_int(obj.get("step")), origin="swapwatch"))
        return out
    out = [SwapwatchEvent(rank, source, payload=obj)]
    code = _int(obj.get("exit_code")) if kind == "run" and obj.get("phase") == "end" else None
    if code is not None:
        out.append(ExitEvent(rank, source, code=code))
    return out
