"""Figures people would rather look at than read: memory per step / rank / run, the strategy map,
and the memory estimate per stage.

Every plot function draws and returns a result object (:mod:`swapwatch.plot.result`): the figure,
the pandas frames drawn on it, and its notes, so what is drawn can be checked and re-plotted;
``result.save(out)`` writes it under the ``-o`` rules. :func:`memory_frame` and
:func:`strategy_frame` build the frames on their own. Rendering is headless (Agg, no pyplot) and
byte-for-byte deterministic.
"""
from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module of this package that holds it. Imported on first use (PEP 562), so a
#: command that only needs one of them (``plot memory``: pandas, not the strategy map) loads it
#: after its logs are being scanned, not before.
_WHERE = {name: mod for mod, names in (
    ("memory", ("HOW_TO_GET", "memory_frame", "peak_frame", "plot_memory", "rank_outliers", "step_frame")),
    ("result", ("EstimatePlot", "MemoryPlot", "PlotResult", "StrategyPlot")),
    ("strategy_map", ("frame_differences", "plot_strategy", "strategy_frame")),
    ("_render", ("check_writable", "svg_text"))) for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
