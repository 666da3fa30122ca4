"""Worker logs -> the run model (:class:`RunLog`). See :mod:`swapwatch.parsers.reader`.

Public API: :func:`read_logs` (the whole run, per rank, with completeness), :func:`iter_events`
(streaming; :func:`iter_event_text` has ``swapwatch events``' JSONL written by the scanning
workers), and the event classes of :mod:`swapwatch.parsers.model`.
"""
from .model import (ActionEvent, Event, ExitEvent, FormativeEvent, GeometryEvent, InitialConfigEvent, MemoryEvent,
                    NoticeEvent, RankLog, RunLog, StepEvent, SwapwatchEvent)
from .reader import complete_blocks, iter_event_text, iter_events, read_logs

__all__ = ["read_logs", "iter_events", "iter_event_text", "complete_blocks", "RunLog", "RankLog", "Event",
           "GeometryEvent", "FormativeEvent", "InitialConfigEvent", "ActionEvent", "NoticeEvent", "StepEvent",
           "MemoryEvent", "ExitEvent", "SwapwatchEvent"]
