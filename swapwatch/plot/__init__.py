"""Figures people would rather look at than read: memory per step / rank / run, the strategy map,
and the memory estimate per stage.

Every plot function draws and returns a result object (:mod:`swapwatch.plot.result`): the figure,
the pandas frames drawn on it, and its notes, so what is drawn can be checked and re-plotted;
``result.save(out)`` writes it under the ``-o`` rules. :func:`memory_frame` and
:func:`strategy_frame` build the frames on their own. Rendering is headless (Agg, no pyplot) and
byte-for-byte deterministic.
"""
from .memory import (HOW_TO_GET, memory_frame, peak_frame, plot_memory, rank_outliers,  # noqa: F401
                     step_frame)
from .result import EstimatePlot, MemoryPlot, PlotResult, StrategyPlot  # noqa: F401
from .strategy_map import frame_differences, plot_strategy, strategy_frame  # noqa: F401
