"""``swapwatch plot estimate``: the predicted peak of every pipeline stage as stacked components
(weights, gradients, optimizer states, saved activations, transients, head), with the measured peak
beside it when a calibration run used the same config.

Why a picture: which stage is the tight one, and whether it is tight because of static memory (no
recompute helps) or because of in-flight activations (recompute / swap / fewer micro-batches help),
is what a user decides from; a stacked bar per stage shows it at a glance. The data behind it is
:func:`estimate_frame`.
"""
from __future__ import annotations

import os
from typing import Optional

from . import _render
from .result import EstimatePlot

#: breakdown keys of :meth:`swapwatch.memory.model.StageMemory.to_json`, bottom to top, with labels
PARTS = [("weights", "weights"), ("grads", "gradients"), ("optimizer_states", "optimizer states"),
         ("calibration_residual", "calibration residual"), ("saved_activations", "saved activations"),
         ("swap_prefetch_window", "swap prefetch window"), ("recompute_transient", "recompute transient"),
         ("backward_workspace", "backward workspace"), ("head_and_logits", "head and logits"),
         ("gathered_weights", "gathered weights"), ("optimizer_step", "optimizer step")]


def estimate_frame(est):
    """One row per (stage, component): bytes, plus the predicted and measured peak of the stage."""
    import pandas as pd

    rows = []
    for st in est.to_json()["stages"]:
        for key, label in PARTS:
            rows.append({"stage": st["stage"], "component": label, "bytes": st["breakdown"][key],
                         "peak_bytes": st["peak_bytes"], "measured_peak_bytes": st["measured_peak_bytes"]})
    return pd.DataFrame(rows, columns=["stage", "component", "bytes", "peak_bytes", "measured_peak_bytes"])


def plot_estimate(est, budget: Optional[int] = None) -> EstimatePlot:
    """Stacked predicted components per stage, measured peak as a marker, the budget as a line
    (``.save(out)`` writes it)."""
    from ..text import GIB, GIB_UNIT, MIB_UNIT, fmt_size     # the tables' byte format

    frame = estimate_frame(est)
    stages = sorted(frame["stage"].unique())
    top = max([float(frame["peak_bytes"].max())] + [float(v) for v in frame["measured_peak_bytes"].dropna()]
              + ([float(budget)] if budget else []))
    # the estimate / plan tables' units (text.fmt_size: GiB from 1 GiB on), so the bar
    # reads as the table does: "7.97 GiB", not "8165 MiB"
    unit = GIB_UNIT if top >= GIB else MIB_UNIT
    with _render.style():
        fig = _render.new_figure(max(6.0, 1.1 * len(stages) + 3.5), 3.8)
        ax = fig.add_subplot(1, 1, 1)
        bottoms = {s: 0.0 for s in stages}
        negatives = []
        for _, label in PARTS:
            part = frame[frame["component"] == label].set_index("stage")["bytes"]
            if not part.any():
                continue
            vals = [float(part.get(s, 0)) / unit[1] for s in stages]
            if any(v < 0 for v in vals):
                negatives.append((label, vals))      # drawn down from the top of the stack, below
                vals = [max(v, 0.0) for v in vals]
                if not any(vals):
                    continue
            ax.bar([str(s) for s in stages], vals, bottom=[bottoms[s] for s in stages], label=label, width=0.6)
            for s, v in zip(stages, vals):
                bottoms[s] += v
        for label, vals in negatives:
            # a negative calibration residual: the allocator holds less than the tensors counted
            # (CPU: weights live outside the pool); hatched, from the stack's top down to the peak
            ax.bar([str(s) for s in stages], [min(v, 0.0) for v in vals], bottom=[bottoms[s] for s in stages],
                   width=0.6, color="white", edgecolor="grey", hatch="//", alpha=0.9, label=f"{label} (negative)")
        meas = frame.drop_duplicates("stage").set_index("stage")["measured_peak_bytes"]
        shown = [(str(s), float(meas[s]) / unit[1]) for s in stages if meas.get(s) == meas.get(s)
                 and meas.get(s) is not None]
        if shown:
            ax.scatter([x for x, _ in shown], [y for _, y in shown], marker="D", color="black", zorder=3,
                       label="measured peak")
        peaks = frame.drop_duplicates("stage").set_index("stage")["peak_bytes"]
        for s in stages:
            ax.annotate(fmt_size(float(peaks[s])), (str(s), float(peaks[s]) / unit[1]),
                        textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        if budget:
            ax.axhline(budget / unit[1], color="crimson", linestyle="--", linewidth=1, label="budget")
        ax.axhline(0, color="grey", linewidth=0.6)
        ax.set_xlabel("pipeline stage")
        ax.set_ylabel(f"predicted peak per rank ({unit[0]})")
        cal = "calibrated" if est.calibration.fitted else "uncalibrated"
        ax.set_title(f"{os.path.basename(est.config)}: predicted peak per stage ({cal})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return EstimatePlot(figure=fig, frames={"estimate": frame})
