"""Names for runs on a plot: the run (directory) name and the strategy it ran.

A comparison plot is only useful when each run says what it was ("none" vs "select" vs "full" vs
"swap"). The strategy name comes from ``run.json`` (the config file the run used) when the run was
made by ``swapwatch run``, else from nothing: we never guess it from the directory name twice.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ..parsers.model import RunLog

#: run.json keys that can name the strategy, best first.
_STRATEGY_KEYS = ("strategy", "config_name", "config", "config_path")


def strategy_name(run_info: Dict[str, Any]) -> Optional[str]:
    """The strategy a run used, as a short name: the config file's stem (``swap_case3``)."""
    for key in _STRATEGY_KEYS:
        v = run_info.get(key)
        if isinstance(v, dict):
            v = v.get("name") or v.get("path")
        if isinstance(v, str) and v.strip():
            base = os.path.basename(v.strip().rstrip("/"))
            stem, ext = os.path.splitext(base)
            return stem if ext.lower() in (".yaml", ".yml", ".json") else base
    return None


def run_label(runlog: "RunLog", index: int) -> str:
    """The run's own name: its label (run dir name), else run.json's name, else ``run N``."""
    info = getattr(runlog, "run_info", None) or {}
    for v in (getattr(runlog, "label", ""), info.get("name"), info.get("run_dir")):
        if isinstance(v, str) and v.strip():
            return os.path.basename(v.strip().rstrip("/")) or v.strip()
    return f"run {index + 1}"


def run_names(runlogs: Sequence[Any]) -> List[Tuple[str, str, str]]:
    """(key, label, strategy) per run; ``key`` is unique and is what legends and frames show.

    ``key`` is ``label (strategy)`` when the strategy adds information, with ``#2``... appended when
    two runs would otherwise look the same (the same directory given twice, two unnamed logs).
    """
    out: List[Tuple[str, str, str]] = []
    seen: Dict[str, int] = {}
    for i, rl in enumerate(runlogs):
        label = run_label(rl, i)
        strategy = strategy_name(getattr(rl, "run_info", None) or {}) or ""
        key = label if not strategy or strategy == label or strategy in label else f"{label} ({strategy})"
        n = seen.get(key, 0) + 1
        seen[key] = n
        if n > 1:
            key = f"{key} #{n}"
        out.append((key, label, strategy))
    return out
