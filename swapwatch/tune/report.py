"""``swapwatch tune``'s report: every attempt as a table, JSON (``tune.json``) and a figure
(``tune.png``), and the final speed-up over the full-recompute probe."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

from ..report.layer_table import grid
from ..text import MIB as MiB, MIB_UNIT, fmt_bytes
from .result import TuneResult


def _mib(n) -> str:
    """A MiB figure without the unit (the column header and the sentence name it); ``-`` if none."""
    return fmt_bytes(n, MIB_UNIT, digits=1, bare=True, missing="-")


def render_table(res: TuneResult) -> str:
    head = ["#", "attempt", "strategy", "target MiB", "predicted MiB", "measured MiB", "step ms (median ± spread)",
            "verify", "outcome", "cost s"]
    body: List[List[str]] = []
    for a in res.attempts:
        pred = max(a.predicted.values()) if a.predicted else None
        ms = "-" if a.median_ms is None else f"{a.median_ms:.0f} ± {a.spread_ms or 0:.0f}"
        mark = " *" if res.final is not None and a.n == res.final.n else ""
        body.append([f"{a.n}{mark}", a.label, "; ".join(a.strategy), _mib(a.target_bytes), _mib(pred), _mib(a.peak),
                     ms, a.verify or "-", a.outcome(res.budget), f"{a.seconds:.0f}"])
    out = [f"swapwatch tune: {res.config}, budget {_mib(res.budget)} MiB", ""]
    out += grid(head, body)
    out.append("")
    if res.final is not None:
        out.append(f"final (*): attempt {res.final.n}, {res.final.label}: measured {_mib(res.final.peak)} MiB "
                   f"<= budget {_mib(res.budget)} MiB, verify {res.final.verify}; written to {res.final_yaml}")
        sp = res.speedup()
        if sp is not None:
            gain, outside = sp
            out.append(f"speed-up over the full-recompute probe: {gain:+.1%} (median step time"
                       + ("" if outside else "; inside the noise: the medians differ by less than the two "
                          "runs' spreads") + ")")
    else:
        out.append("no strategy was measured within the budget: no YAML written")
        for lv in res.levers:
            out.append(f"  would fit: {lv}")
    out.append(f"stopped: {res.stop_reason}")
    if res.margin_why:
        out.append(f"margin {res.margin:.1%} ({res.margin_why}); resolution {_mib(res.resolution)} MiB")
    return "\n".join(line.rstrip() for line in out) + "\n"


def render(res: TuneResult, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(res.to_json(), indent=1) + "\n"
    return render_table(res)


def write_figure(res: TuneResult, path: Path) -> None:
    """Measured peak (bars) and predicted peak (marks) per attempt against the budget, and the
    step time beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    atts = res.attempts
    xs = list(range(1, len(atts) + 1))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(max(6.0, 1.2 * len(atts) + 3), 3.6))
    colors = ["#2a9d8f" if a.fits(res.budget) else "#e76f51" for a in atts]
    ax.bar(xs, [(a.peak or 0) / MiB for a in atts], color=colors, label="measured peak")
    ax.scatter(xs, [(max(a.predicted.values()) if a.predicted else 0) / MiB for a in atts], marker="_", s=400,
               color="black", label="predicted (before the run)", zorder=3)
    ax.axhline(res.budget / MiB, color="#264653", linestyle="--", label="budget")
    short = {"full recompute": "full", "no recompute": "none", "full recompute on half the layers": "half"}
    ax.set_xticks(xs, [f"{a.n}\n{short.get(a.label, a.label.replace('plan @ ', '@'))}" for a in atts], fontsize=7)
    ax.set_ylabel("peak per rank (MiB)")
    ax.set_title("memory per attempt (green: within budget)", fontsize=9)
    ax.legend(fontsize=7)
    bx.bar(xs, [a.median_ms or 0 for a in atts], yerr=[a.spread_ms or 0 for a in atts], color="#8ab17d")
    bx.set_xticks(xs, [str(a.n) for a in atts], fontsize=7)
    bx.set_ylabel("median step time (ms)")
    bx.set_title("step time after warm-up (± half IQR)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(res: TuneResult, directory: Path) -> None:
    (directory / "tune.txt").write_text(render_table(res), encoding="utf-8")
    if res.attempts:
        write_figure(res, directory / "tune.png")
