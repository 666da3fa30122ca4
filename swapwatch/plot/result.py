"""What a plot function returns: the figure, the frames drawn on it, and the notes it shows.

Why an object and not attributes on the Figure: a matplotlib ``Figure`` with extra attributes hides
them from readers and type checkers, and any caller has to know which attribute which plot set.
Here the data behind a picture is a typed field: the CLI prints its summary from it, tests assert on
it, and a notebook user re-plots from ``frames``. Drawing and writing are separate steps: a plot
function only draws; :meth:`PlotResult.save` writes under the ``-o`` rules of
:mod:`swapwatch.commands.outputs`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pandas as pd
from matplotlib.figure import Figure

from . import _render


@dataclass
class PlotResult:
    """``figure``; ``frames``: the data drawn, by name (a panel title for the strategy map);
    ``notes``: what the figure says about itself beyond the data (left-out panels, not comparable)."""
    figure: Figure
    frames: Dict[str, pd.DataFrame]
    notes: List[str] = field(default_factory=list)

    def save(self, out: str, fmt: Optional[str] = None, force: bool = False) -> str:
        """Write the figure to ``out`` (format from ``fmt`` or the name); returns the format used."""
        return _render.save(self.figure, out, fmt, force)


@dataclass
class MemoryPlot(PlotResult):
    """``frames["memory"]``: every memory reading (:func:`swapwatch.plot.memory.memory_frame`);
    ``panels``: the panels drawn (``steps``, ``peaks``); ``incomparable``: how the runs differ in
    shape when they do (the peak bars then carry no percentage)."""
    panels: List[str] = field(default_factory=list)
    incomparable: List[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        return self.frames["memory"]


@dataclass
class StrategyPlot(PlotResult):
    """``frames``: one strategy frame per map drawn, by panel title; ``diff``: the config-vs-log
    differences (None when there is no config to compare with); ``cut``: layers past the point where
    the log stops."""
    diff: Optional[pd.DataFrame] = None
    cut: List[int] = field(default_factory=list)


@dataclass
class EstimatePlot(PlotResult):
    """``frames["estimate"]``: one row per (stage, component) (:func:`swapwatch.plot.estimate.estimate_frame`)."""

    @property
    def frame(self) -> pd.DataFrame:
        return self.frames["estimate"]
