"""Python tracebacks and MindFormers config-check errors -> NoticeEvent.

A failed config check (offset sums, swap ``layers`` types, ``check_rules``...) reaches the worker log
as a traceback ending in ``ValueError: <MindFormers text>``; the texts are rows of
:data:`swapwatch.parsers.grammar.CONFIG_ERRORS`. We read ahead from the ``Traceback`` line to the
exception line (skipping interleaved log records from other threads), bounded so a runaway block
cannot cost more than a few hundred lines.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional

from .layersetting import config_error
from .model import Event, NoticeEvent

_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)')
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)|[A-Za-z_][\w.]*)"
                  r"(?::\s?(?P<msg>.*))?$")
_RECORD = re.compile(r"^(?:\[[A-Z]+\]|\d{4}-\d{2}-\d{2})")


def parse(rank: Optional[int], source: str, follow: Iterable[tuple] = ()) -> List[Event]:
    """The traceback whose ``Traceback (most recent call last):`` line is at ``source`` (the line
    itself says nothing more); ``follow`` yields (source, text) of the lines after it."""
    frames = 0
    where = None
    for src, text in follow:
        if not text.strip():
            continue
        if text[:1].isspace():
            m = _FRAME.match(text)
            if m:
                frames += 1
                where = f"{m.group('file')}:{m.group('line')}"
            continue
        if _RECORD.match(text):
            continue                     # an interleaved log record, not the exception line
        m = _EXC.match(text.strip())
        if not m:
            break
        data = {"exception": m.group("type"), "message": (m.group("msg") or "").strip(), "frames": frames,
                "where": where, "exception_source": src}
        out: List[Event] = [NoticeEvent(rank, source, what="traceback", data=data)]
        check = config_error(text)
        if check:
            out.append(NoticeEvent(rank, src, what="config_error",
                                   data={"check": check, "exception": data["exception"], "message": data["message"]}))
        return out
    return [NoticeEvent(rank, source, what="traceback", data={"exception": None, "message": None, "frames": frames,
                                                              "where": where, "exception_source": None})]
