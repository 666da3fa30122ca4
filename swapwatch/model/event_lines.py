"""The SWAPWATCH event line: written by the runtime hooks, read back by the parsers.

Besides the MindFormers-compatible text lines (kept so existing greps keep working), every action
the hooks take is also written as one line ``SWAPWATCH {compact JSON}`` with ``"v": 1``, a
``kind`` and the ``rank``. Where these lines are present the parsers treat them as authoritative:
they carry exact paths and values with none of the whitespace and truncation quirks of the text
lines.

Kinds and their fields (all carry ``v``, ``kind``, ``rank``; extra fields are allowed):

``plan``    the plan the hooks were given: ``num_layers``, ``pipeline_stage``, ``pp_interleave_num``,
            ``swap``, ``config_sha256`` (of the YAML when known), ``source`` ("swapwatch" or "mindformers")
``apply``   one action on one layer: ``layer``, ``action`` (one of :data:`ACTIONS`), ``pattern``
            (None for whole-layer actions), ``paths`` (dotted op/cell paths it reached; every one,
            not just the last), ``value`` (prefetch for swaps, True/False for recompute marks)
``memory``  one memory reading: ``step``, ``source`` (e.g. "max_memory_allocated", "pool_peak",
            "rss"), ``bytes`` (int), optional ``peak_bytes``, ``device``
``step``    one training step: ``step``, ``loss``, ``ms`` (step time), optional ``epoch``
``run``     run lifecycle: ``phase`` ("start" | "end"), optional ``exit_code``, ``world_size``
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import actions

PREFIX = "SWAPWATCH "
VERSION = 1
KINDS = ("plan", "apply", "memory", "step", "run")
#: What an ``apply`` event can say was done.
ACTIONS = actions.NAMES


def format_event(kind: str, rank: int, **fields: Any) -> str:
    """One SWAPWATCH line (no trailing newline). Field order: v, kind, rank, then as given."""
    if kind not in KINDS:
        raise ValueError(f"unknown SWAPWATCH event kind {kind!r}")
    body: Dict[str, Any] = {"v": VERSION, "kind": kind, "rank": rank}
    body.update(fields)
    return PREFIX + json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_jsonable)


def parse_event(text: str) -> Optional[Dict[str, Any]]:
    """The event dict of a line that contains a SWAPWATCH event, else None.

    The marker may follow a logger prefix (``... - INFO - SWAPWATCH {...}``); anything after the
    JSON object is ignored. Malformed JSON gives None (the caller reports it as noise).
    """
    at = text.find(PREFIX)
    if at < 0:
        return None
    payload = text[at + len(PREFIX):].strip()
    try:
        obj, _ = json.JSONDecoder().raw_decode(payload)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
        return None
    return obj


def _jsonable(value: Any) -> Any:
    """numpy scalars and other odd values as plain JSON."""
    for attr in ("item", "tolist"):
        fn = getattr(value, attr, None)
        if callable(fn):
            return fn()
    return str(value)
