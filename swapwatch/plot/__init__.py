"""Figures people would rather look at than read: memory per step / rank / run, and the strategy map.

Every figure has a pandas DataFrame behind it, available from the API, so what is drawn can be
checked and re-plotted: :func:`memory_frame` for :func:`plot_memory`, :func:`strategy_frame` for
:func:`plot_strategy`. Rendering is headless (Agg, no pyplot) and byte-for-byte deterministic.
"""
from .memory import (HOW_TO_GET, memory_frame, peak_frame, plot_memory, rank_outliers,  # noqa: F401
                     step_frame)
from .strategy_map import frame_differences, plot_strategy, strategy_frame  # noqa: F401
