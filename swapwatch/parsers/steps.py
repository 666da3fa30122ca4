"""Per-step training lines (``core/callback/callback.py:MFLossMonitor.print_output_info``) -> StepEvent.

Both generations (dev ``loss: %5.3f`` and master ``loss: {:5.6f}``, sink and non-sink
``loss:[cur/mean]``, optional ``lr``, ``global_norm``, throughput, mcore's separate losses) are rows of
:data:`swapwatch.parsers.grammar.STEPS`. Values that MindFormers prints as numpy reprs
(``global_norm: [44.313248]``, ``loss_scale: unavailable``) are read leniently: unreadable -> None.
"""
from __future__ import annotations

import re
from typing import Optional

from .grammar import STEPS
from .model import StepEvent

_ROWS = [re.compile(r.regex) for r in STEPS]


def _num(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    t = text.strip().strip("[]").strip()
    try:
        return float(t)
    except ValueError:
        return None


def parse(msg: str, rank: Optional[int], source: str) -> Optional[StepEvent]:
    """A collapsed message -> StepEvent, or None when it is not a step line."""
    if "Epoch:[" not in msg:
        return None
    at = msg.find("{")
    msg = msg[at:] if at > 0 else msg
    for rx in _ROWS:
        m = rx.match(msg)
        if m:
            g = m.groupdict()
            ovf = (g["ovf"] or "").strip()
            return StepEvent(rank, source, step=int(g["step"]), epoch=int(g["epoch"]), epochs=int(g["epochs"]),
                             steps=int(g["steps"]), loss=_num(g["loss"]), ms=_num(g["ms"]), lr=_num(g["lr"]),
                             overflow={"True": True, "False": False}.get(ovf), loss_scale=_num(g["scale"]),
                             global_norm=_num(g["gn"]), throughput=_num(g["tflops"]))
    return None
