"""``plot memory``: what each run's memory did, per step and per rank, and its whole-run peaks.

Two panels, because MindSpore gives two different kinds of memory figure:

* **per step** (left): SWAPWATCH ``memory`` events from the runtime callback, one reading per step
  and rank. On Ascend that is ``max_memory_allocated``; on CPU MindSpore's allocator APIs return 0,
  so the callback falls back to process RSS, which is mostly the framework and is *not* what
  recompute saves (docs/mindspore-facts.md §3). The axis says which one it is.
* **whole-run peaks** (right): the figures MindSpore prints at exit: Ascend ``Used peak`` vs
  ``Actual peak`` and the CPU pool's ``peak used mem`` vs ``actual peak used mem``. The used peak
  is what the model needed; the gap up to the actual peak is fragmentation. On CPU this pool peak
  is the real signal of what recompute bought.

Several runs share both panels, one colour per run, named by run and strategy. Many ranks are
aggregated (min-median-max band; the peak bar is the max over ranks with one dot per rank) and the
ranks that stand out are drawn and named, so 128 ranks read as well as 8.
"""
from __future__ import annotations

import textwrap
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from matplotlib.legend_handler import HandlerTuple
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ..errors import InputError
from ..text import RankSet, fmt_bytes, ranges, unit_for
from . import _render
from .result import MemoryPlot
from .runs import run_names

FRAME_COLUMNS = ["run", "label", "strategy", "rank", "step", "metric", "bytes", "origin", "source"]

#: Per-step metrics in order of preference: device allocator readings beat pool readings beat RSS.
#: The memory callback's event names the API family in ``source`` and carries the current value in
#: ``bytes`` and the high-water mark in ``peak_bytes``; the parsers turn those into ``<source>`` and
#: ``<source>_peak``. The device peak is what runs out, so it comes first; for RSS the current value
#: is the better picture (the peak RSS is mostly compile-time framework memory).
STEP_METRICS = ("max_memory_allocated_peak", "max_memory_allocated", "pool_peak", "memory_allocated",
                "max_memory_reserved", "memory_reserved", "used_peak", "actual_peak", "rss", "rss_peak")

#: Whole-run (used, actual, family): the used peak, and the actual peak that includes fragmentation.
PEAK_PAIRS = (("used_peak", "actual_peak", "device"), ("pool_peak", "pool_actual_peak", "CPU pool"))

METRIC_LABEL = {
    "max_memory_allocated_peak": "peak allocated (device)",
    "max_memory_allocated": "allocated (device)",
    "rss_peak": "peak process RSS (CPU fallback)",
    "memory_allocated": "allocated",
    "max_memory_reserved": "max reserved",
    "memory_reserved": "reserved",
    "pool_peak": "pool peak",
    "used_peak": "used peak",
    "actual_peak": "actual peak",
    "rss": "process RSS (CPU fallback)",
}

#: How to get memory figures into the logs; the CLI's "no memory data" line and the empty panels say it.
HOW_TO_GET = ("run it through `swapwatch run` (per-step SWAPWATCH memory events), or set GLOG_v=1 "
              "(or GLOG_v=2 MS_SUBMODULE_LOG_v={PRE_ACT:1}) for the CPU pool peak at exit, "
              "or MS_MEMORY_STATISTIC=1 for Ascend's Used/Actual peak")

#: Up to this many ranks of one run get a line each; above it, the band takes over.
MAX_RANK_LINES = 8
#: Up to this many ranks of a single run get a bar each in the peak panel.
MAX_RANK_BARS = 16
MAX_OUTLIERS = 5


# ---- data -------------------------------------------------------------------------------------

def _as_list(runlogs: Any) -> List[Any]:
    return [runlogs] if hasattr(runlogs, "ranks") else list(runlogs)


def memory_frame(runlogs: Any, ranks: Optional[Union[RankSet, Iterable[int]]] = None) -> pd.DataFrame:
    """Every memory event of every run, one row each: the data behind :func:`plot_memory`.

    Columns: ``run`` (unique display name), ``label``, ``strategy``, ``rank``, ``step`` (nullable
    Int64; NA for whole-run figures), ``metric``, ``bytes``, ``origin``, ``source`` (file:line).
    Runs keep the order given, which is the order on the plot.
    """
    runlogs = _as_list(runlogs)
    keep = ranks                 # membership only: a RankSet is never expanded
    rows = []
    for (key, label, strategy), rl in zip(run_names(runlogs), runlogs):
        for rank in sorted(rl.ranks):
            if keep is not None and rank not in keep:
                continue
            for step, metric, nbytes, origin, source in rl.ranks[rank].memory_rows():
                rows.append((key, label, strategy, rank, step, metric, int(nbytes), origin, source))
    df = pd.DataFrame(rows, columns=FRAME_COLUMNS)
    df["rank"] = df["rank"].astype("int64")
    df["step"] = df["step"].astype("Int64")
    df["bytes"] = df["bytes"].astype("int64")
    df["run"] = pd.Categorical(df["run"], categories=[k for k, _, _ in run_names(runlogs)], ordered=True)
    return df


def step_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-step series actually plotted: one metric per run (see :data:`STEP_METRICS`).

    All-zero series are skipped (on CPU ``max_memory_allocated`` is always 0, which would hide the
    RSS fallback). Duplicate readings of one (rank, step) keep the largest. Columns: ``run``,
    ``rank``, ``step``, ``metric``, ``bytes``.
    """
    per_step = frame[frame["step"].notna()]
    parts = []
    for run in frame["run"].cat.categories:
        sub = per_step[per_step["run"] == run]
        if sub.empty:
            continue
        present = [m for m in STEP_METRICS if m in set(sub["metric"])]
        present += sorted(set(sub["metric"]) - set(present))
        for metric in present:
            s = sub[sub["metric"] == metric]
            if (s["bytes"] > 0).any():
                s = s.groupby(["rank", "step"], as_index=False)["bytes"].max()
                s.insert(0, "run", run)
                s["metric"] = metric
                parts.append(s)
                break
    if not parts:
        return pd.DataFrame({"run": pd.Categorical([], categories=frame["run"].cat.categories),
                             "rank": [], "step": [], "metric": [], "bytes": []})
    out = pd.concat(parts, ignore_index=True)[["run", "rank", "step", "metric", "bytes"]]
    out["run"] = pd.Categorical(out["run"], categories=frame["run"].cat.categories, ordered=True)
    out["step"] = out["step"].astype("int64")
    return out


def peak_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Whole-run peaks per run and rank: ``used``, ``actual``, ``fragmentation`` (bytes; NaN if absent).

    One family per run: the device figures (Ascend) when present, else the CPU pool lines. Used and
    actual are taken from the *same* printed block (an actual peak pairs with the used peak printed
    just before it), because their gap is the fragmentation and two blocks' figures do not make one
    gap. When a rank printed several blocks (msrun workers sometimes do), the largest one counts.
    """
    whole = frame[frame["step"].isna()]
    rows = []
    for run in frame["run"].cat.categories:
        sub = whole[whole["run"] == run]
        for used_m, actual_m, family in PEAK_PAIRS:
            pair = sub[sub["metric"].isin([used_m, actual_m])]
            if pair.empty:
                continue
            for rank, g in pair.groupby("rank"):
                used, actual = _largest_block(zip(g["metric"], g["bytes"]), used_m)
                rows.append((run, int(rank), family, used, actual))
            break
    df = pd.DataFrame(rows, columns=["run", "rank", "family", "used", "actual"])
    df["used"] = df["used"].astype("float64")
    df["actual"] = df["actual"].astype("float64")
    df["fragmentation"] = df["actual"] - df["used"]
    df["run"] = pd.Categorical(df["run"], categories=frame["run"].cat.categories, ordered=True)
    return df


def _largest_block(events, used_metric: str) -> Tuple[float, float]:
    """(used, actual) of the largest block, from (metric, bytes) in file order.

    An actual peak closes a block with the latest used peak before it; a used peak with no actual
    after it (the CPU ``Common mem pool info`` line, an adapter that prints no actual) is a block
    of its own, and so is an actual with no used (the two-pointer adapter's ``Actual peak``).
    """
    blocks: List[Tuple[float, float]] = []
    pending = np.nan
    for metric, b in events:
        if metric == used_metric:
            if not np.isnan(pending):
                blocks.append((pending, np.nan))
            pending = float(b)
        else:
            blocks.append((pending, float(b)))
            pending = np.nan
    if not np.isnan(pending):
        blocks.append((pending, np.nan))
    return max(blocks, key=lambda ua: (np.nanmax(ua), not np.isnan(ua[0]) and not np.isnan(ua[1])))


def rank_outliers(values: pd.Series, limit: int = MAX_OUTLIERS) -> List[int]:
    """Ranks whose value stands out from the rest, most deviant first (at most ``limit``).

    Robust: distance from the median over 3.5 scaled MADs, and at least 5 % of the median and
    1 MB, so identical data-parallel ranks with byte-level noise name nobody. Needs 3+ ranks.
    """
    v = values.dropna().astype(float)
    if len(v) < 3:
        return []
    med = float(v.median())
    mad = float((v - med).abs().median()) * 1.4826
    threshold = max(3.5 * mad, 0.05 * abs(med), float(_render.MB))
    dev = (v - med).abs()
    out = dev[dev > threshold].sort_values(ascending=False, kind="mergesort")
    return [int(r) for r in out.index[:limit]]


# ---- figure -----------------------------------------------------------------------------------

def _colors(n: int) -> List[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _title(keys: Sequence[str], nranks: int) -> str:
    runs = " vs ".join(keys) if len(keys) <= 4 else f"{len(keys)} runs: " + ", ".join(keys[:4]) + ", …"
    ranks = f"  ·  {nranks} rank{'s' if nranks != 1 else ''}" if nranks else ""
    return "\n".join(textwrap.wrap(f"Memory — {runs}{ranks}", 110))


def _draw_steps(ax, steps: pd.DataFrame, runs: List[str], colors: Dict[str, Any],
                rank_colors: Dict[int, Any], unit) -> None:
    name, div = unit
    single_run = len(runs) == 1
    metrics = sorted(set(steps["metric"]))
    handles: List[Any] = []                    # legend: lines, and (band, median) pairs drawn as one
    labels: List[str] = []
    for run in runs:
        s = steps[steps["run"] == run]
        if s.empty:
            continue
        c = colors[run]
        metric = s["metric"].iloc[0]
        tag = "" if len(metrics) == 1 else f" [{METRIC_LABEL.get(metric, metric)}]"
        wide = s.pivot_table(index="step", columns="rank", values="bytes", aggfunc="max").sort_index()
        x = wide.index.to_numpy()
        marker = "o" if len(x) <= 30 else None
        if wide.shape[1] == 1:
            rank = wide.columns[0]
            handles += ax.plot(x, wide[rank].to_numpy() / div, color=c, marker=marker, ms=3,
                               gid=f"steps|{run}|rank{rank}")
            labels.append(f"{run} · rank {rank}{tag}")
        elif single_run and wide.shape[1] <= MAX_RANK_LINES:
            for rank in wide.columns:
                handles += ax.plot(x, wide[rank].to_numpy() / div, color=rank_colors[rank], marker=marker,
                                   ms=3, lw=1.2, gid=f"steps|{run}|rank{rank}")
                labels.append(f"rank {rank}{tag}")
        else:
            lo, med, hi = wide.min(axis=1), wide.median(axis=1), wide.max(axis=1)
            band = ax.fill_between(x, lo.to_numpy() / div, hi.to_numpy() / div, color=c, alpha=0.22, lw=0,
                                   gid=f"steps|{run}|band")
            (line,) = ax.plot(x, med.to_numpy() / div, color=c, lw=1.8, marker=marker, ms=3,
                              gid=f"steps|{run}|median")
            handles.append((band, line))
            labels.append(f"{run} · median, band min–max of {wide.shape[1]} ranks{tag}")
            for rank in rank_outliers(wide.max(axis=0)):
                y = wide[rank].to_numpy() / div
                ax.plot(x, y, color=c, lw=0.9, ls="--", gid=f"steps|{run}|rank{rank}")
                ok = np.flatnonzero(~np.isnan(y))
                if len(ok):
                    ax.annotate(f"rank {rank}", (x[ok[-1]], y[ok[-1]]), xytext=(4, 0),
                                textcoords="offset points", fontsize=7, color=c, va="center")
    ax.set_xlabel("step")
    what = METRIC_LABEL.get(metrics[0], metrics[0]) if len(metrics) == 1 else "memory"
    ax.set_ylabel(f"{what} per step ({name})")
    ax.set_title("per step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    xs = sorted(set(steps["step"]))
    if len(xs) == 1:                           # one step: a tick at it, not 0.95 ... 1.05
        ax.set_xlim(xs[0] - 1, xs[0] + 1)
        ax.set_xticks([xs[0]])
    if not all(m.startswith("rss") for m in metrics):
        ax.set_ylim(bottom=0)                  # RSS is mostly the framework: 0 would flatten it
    if any(m.startswith("rss") for m in metrics):
        ax.text(0.01, 0.02, "RSS is the whole process (framework included): on CPU it does not show\n"
                "what recompute saves; the pool peak does.", transform=ax.transAxes, fontsize=7,
                style="italic", color="0.35", va="bottom")
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0)},
              loc="upper center", bbox_to_anchor=(0.5, -0.13),
              ncols=_legend_cols(labels, ax, 4 if single_run else 2))


def _peaks_by_rank(peaks: pd.DataFrame, runs: List[str]) -> bool:
    """One bar per rank (a single run with few ranks) rather than one bar per run."""
    return len(runs) == 1 and peaks["rank"].nunique() <= MAX_RANK_BARS


def _draw_peaks(ax, peaks: pd.DataFrame, runs: List[str], colors: Dict[str, Any],
                rank_colors: Dict[int, Any], unit, comparable: bool = True) -> None:
    name, div = unit
    families = sorted(set(peaks["family"]))
    by_rank = _peaks_by_rank(peaks, runs)
    groups: List[Tuple[str, Any, pd.DataFrame]] = []   # (x label, colour, rows)
    if by_rank:
        for rank, g in peaks.groupby("rank"):
            groups.append((f"rank {rank}", rank_colors.get(int(rank), colors[runs[0]]), g))
    else:
        for run in runs:
            g = peaks[peaks["run"] == run]
            if not g.empty:
                groups.append((run, colors[run], g))
    width = 0.6
    frag_labelled = False
    first = groups[0][2] if groups else None
    baseline = None
    if first is not None:
        col = "used" if first["used"].notna().any() else "actual"
        baseline = float(first[col].max()) if first[col].notna().any() else None
    top = 0.0
    for i, (xlabel, c, g) in enumerate(groups):
        used = float(g["used"].max()) if g["used"].notna().any() else np.nan
        actual = float(g["actual"].max()) if g["actual"].notna().any() else np.nan
        base = used if not np.isnan(used) else actual
        ax.bar(i, base / div, width, color=c, alpha=0.85, gid=f"peak|{xlabel}|used")
        if not np.isnan(used) and not np.isnan(actual) and actual > used:
            ax.bar(i, (actual - used) / div, width, bottom=used / div, facecolor="white", edgecolor=c,
                   hatch="////", lw=0.8, gid=f"peak|{xlabel}|frag")
            frag_labelled = True
        hi = np.nanmax([used, actual])
        top = max(top, hi)
        if np.isnan(used):                     # an adapter that prints only the actual peak
            text = f"actual {fmt_bytes(actual, unit)}"
        elif np.isnan(actual) or actual == used:
            text = fmt_bytes(used, unit)
        else:
            text = f"{fmt_bytes(used, unit)}\n+{fmt_bytes(actual - used, unit)} frag."
        if not by_rank and i > 0 and not comparable:
            text += "\nnot comparable"      # another model or run shape: a percentage would lie
        elif not by_rank and i > 0 and baseline and not np.isnan(base):
            # what the strategy bought, against the first run given (the baseline by convention)
            pct = f"{(base - baseline) / baseline * 100:+.0f}%".replace("-", "−")
            text += f"\n{pct} vs {groups[0][0].split(' (')[0]}"
        elif not by_rank and i == 0 and len(groups) > 1:
            text += "\n(baseline)"
        ax.annotate(text, (i, hi / div), xytext=(0, 2), textcoords="offset points", ha="center",
                    va="bottom", fontsize=7, gid=f"peak|{xlabel}|label")
        if not by_rank and len(g) > 1:
            vals = g.set_index("rank")["used" if g["used"].notna().any() else "actual"].sort_index()
            xs = i + np.linspace(-width * 0.35, width * 0.35, len(vals))
            ax.scatter(xs, vals.to_numpy() / div, s=6 if len(vals) > 32 else 12, color="0.15", alpha=0.6,
                       zorder=3, lw=0, gid=f"peak|{xlabel}|ranks")
            pos = dict(zip(vals.index, xs))
            for rank in rank_outliers(vals):
                ax.annotate(f"rank {rank}", (pos[rank], vals[rank] / div), xytext=(5, 0),
                            textcoords="offset points", fontsize=7, color="0.15", va="center",
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([_wrap_label(lbl) for lbl, _, _ in groups], fontsize=8,
                       rotation=0 if len(groups) <= 6 else 30, ha="center" if len(groups) <= 6 else "right")
    ax.set_ylim(0, top / div * 1.25 if top else 1)
    fam = " / ".join(families)
    ax.set_ylabel(f"whole-run peak ({name})")
    sub = "" if by_rank else "\nbar: max over ranks · dots: ranks" if peaks["rank"].nunique() > 1 else ""
    ax.set_title(f"whole-run {fam} peak{sub}")
    # each legend swatch is the bars' own colours side by side, so the key looks like the bars
    bar_colors = [c for _, c, _ in groups]
    handles: List[Any] = [tuple(Patch(facecolor=c, alpha=0.85) for c in bar_colors)]
    labels = ["used peak" if peaks["used"].notna().any() else "actual peak"]
    if frag_labelled:
        handles.append(tuple(Patch(facecolor="white", edgecolor=c, hatch="////", lw=0.8) for c in bar_colors))
        labels.append("fragmentation (actual − used)")
    ax.legend(handles, labels, handler_map={tuple: HandlerTuple(ndivide=None, pad=0)},
              loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=_legend_cols(labels, ax, 2))


def _legend_cols(labels: Sequence[str], ax: Any, most: int) -> int:
    """As many legend columns as fit under the panel (~11 characters per inch at 8 pt), so a long
    run name wraps the legend onto more rows instead of running off the figure's edge."""
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    longest = max((len(str(lbl)) for lbl in labels), default=1) + 5     # + the marker and padding
    return max(1, min(len(labels), most, int(width_in * 11 // longest)))


def _wrap_label(key: str) -> str:
    if " (" in key and key.endswith(")"):
        a, b = key.split(" (", 1)
        return f"{a}\n({b}"
    return "\n".join(textwrap.wrap(key, 18)) or key


def plot_memory(runlogs: Any, ranks: Optional[Union[RankSet, Iterable[int]]] = None) -> MemoryPlot:
    """Draw the memory figure for one or more runs (``.save(out)`` writes it).

    The data behind it is :func:`memory_frame` (then :func:`step_frame` and :func:`peak_frame`).
    Raises :class:`InputError` when there is nothing to draw (no memory figures at all, or none for
    the requested ranks).
    """
    runlogs = _as_list(runlogs)
    if not runlogs:
        raise InputError("no runs to plot")
    frame = memory_frame(runlogs, ranks)
    if frame.empty:
        if ranks is not None and not memory_frame(runlogs).empty:
            have = sorted(set(memory_frame(runlogs)["rank"]))
            raise InputError(f"no memory figures for ranks {ranges(ranks)} "
                             f"(the logs have memory figures for ranks {ranges(have)})")
        raise InputError(f"no memory figures in the logs: {HOW_TO_GET}")
    steps = step_frame(frame)
    peaks = peak_frame(frame)
    runs = [r for r in frame["run"].cat.categories]
    colors = dict(zip(runs, _colors(len(runs))))
    # one unit per panel: a 550 MB RSS beside a 48 GB device peak should read as MB, not 0.5 GB
    step_unit = unit_for(float(steps["bytes"].max()) if not steps.empty else 0.0)
    peak_unit = unit_for(float(np.nanmax(peaks[["used", "actual"]].to_numpy())) if not peaks.empty else 0.0)

    panels = [p for p, d in (("steps", steps), ("peaks", peaks)) if not d.empty]
    notes: List[str] = []
    rss_only = not steps.empty and all(m.startswith("rss") for m in set(steps["metric"]))
    if rss_only and not peaks.empty and _flat(steps):
        # a flat line of the whole process's RSS says nothing about the strategy: the pool peak does
        lo, hi = float(steps["bytes"].min()), float(steps["bytes"].max())
        panels.remove("steps")
        notes.append(f"per-step panel left out: process RSS (CPU fallback) is flat at "
                     f"{fmt_bytes(lo, step_unit)}–{fmt_bytes(hi, step_unit)} and does not "
                     f"show what recompute saves; the pool peak does")
    from ..run_shape import differences, run_shape

    incomparable = differences([run_shape(rl) for rl in runlogs]) if len(runlogs) > 1 else []
    if incomparable:
        notes.append("runs not comparable (" + ", ".join(incomparable) + "): the bars are not what a "
                     "strategy saved")
    n_peak_groups = peaks["rank"].nunique() if _peaks_by_rank(peaks, runs) else len(runs)
    peak_w = min(8.0, max(3.4, 0.8 * n_peak_groups + 1.6))
    # an RSS panel that moves a little still gets less room than a device-memory one
    widths = {"steps": 4.4 if rss_only and not peaks.empty else 7.6, "peaks": peak_w}
    run_ranks = sorted(set(frame["rank"])) if len(runs) == 1 else []
    rank_colors = dict(zip(run_ranks, _colors(len(run_ranks)))) if len(run_ranks) <= MAX_RANK_LINES else {}
    with _render.style():
        fig_w = max(6.8, sum(widths[p] for p in panels))       # room for the title and its notes
        fig = _render.new_figure(fig_w, 5.4)
        axes = fig.subplots(1, len(panels), squeeze=False,
                            gridspec_kw={"width_ratios": [widths[p] for p in panels]})[0]
        for ax, p in zip(axes, panels):
            if p == "steps":
                _draw_steps(ax, steps, runs, colors, rank_colors, step_unit)
            else:
                _draw_peaks(ax, peaks, runs, colors, rank_colors, peak_unit, comparable=not incomparable)
        missing = []
        if steps.empty:
            missing.append("no per-step memory events (run through `swapwatch run` to get them)")
        elif set(runs) - set(steps["run"]):
            missing.append("no per-step events for " + ", ".join(sorted(set(runs) - set(steps["run"]))))
        if peaks.empty:
            missing.append("no whole-run peak lines (CPU: GLOG_v=1; Ascend: MS_MEMORY_STATISTIC=1)")
        elif set(runs) - set(peaks["run"]):
            missing.append("no peak lines for " + ", ".join(sorted(set(runs) - set(peaks["run"]))))
        title = _title(runs, int(frame.groupby("run", observed=True)["rank"].nunique().max()))
        if missing or notes:
            title += "\n" + "\n".join(textwrap.wrap("; ".join(missing + notes), int(fig_w * 11)))
        fig.suptitle(title, fontsize=11)
    return MemoryPlot(figure=fig, frames={"memory": frame, "steps": steps, "peaks": peaks}, notes=notes,
                      panels=list(panels), incomparable=incomparable)


#: A per-step series that moves less than this share of its median carries no signal.
FLAT = 0.05


def _flat(steps: pd.DataFrame) -> bool:
    """Every run's and rank's per-step series stays within :data:`FLAT` of its median."""
    for _, s in steps.groupby(["run", "rank"], observed=True):
        med = float(s["bytes"].median())
        if med > 0 and (float(s["bytes"].max()) - float(s["bytes"].min())) / med > FLAT:
            return False
    return True
