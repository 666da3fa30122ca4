"""``swapwatch plan`` on a PyNative (r2.x) YAML: the cheapest ``recompute:`` block (least forward FLOPs
recomputed) whose predicted peak (``pynative/memory_model.py``) fits the budget, written into a copy of
the YAML by ``pynative/r2_writer.py`` (docs/estimate.md, "The PyNative path").

The search: every layer starts with no recompute; while the stage's peak is above the target, the
layer change that saves the most bytes per recomputed FLOP is applied (to any stronger option: select
``mlp``, select ``self_attention`` and ``mlp``, ``full``), the lowest layer first among equals, so the
written specs stay contiguous ranges; then each layer, from the last, goes back to its cheapest option
that still fits (the last change may have overshot).
Each step re-sizes the whole stage (the phases are not a sum over layers: the loss, the backward's
worst layer and the optimizer step compete). What the YAML swaps is kept as it is; the YAML written is
estimated again from its text (``sizing.estimate_pynative``), so the figure printed is the written
file's and ``explain`` of it is clean.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..config import read_yaml
from ..errors import ConfigError
from . import memory_model as mm
from .r2_writer import recompute_block, write_strategy

#: the example model's select groups (swapwatch/memory/tinyllama.yaml ``select_groups``: cells, as its
#: Cell.recompute needs)
EXAMPLE_GROUPS = ("feed_forward", "attention.flash_attention")
DEFAULT_MARGIN = 0.10
Option = Tuple[str, bool, Tuple[str, ...]]


def options(groups: Sequence[str]) -> List[Option]:
    """A layer's options, from least to most recomputed: none, the first group, the first two, ...,
    full (label, full, select paths)."""
    out: List[Option] = [("none", False, ())]
    for k in range(1, len(groups) + 1):
        sel = tuple(groups[:k])
        out.append(("select:" + ",".join(sorted(sel)), False, sel))
    out.append(("full", True, ()))
    return out


@dataclass
class PynativePlanResult:
    config: str
    budget: int
    margin: float
    target: int
    fits: bool
    peak: int
    choices: List[str]
    text: str
    estimate: Any
    flops: int
    notes: List[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.fits else 1

    # what memory/render.py:render_plan and the plan command read of a PlanResult
    not_in_peak = 0                           # one rank: nothing beside the peak (HCCL, ...)
    parts = None                              # a flat margin: no pool check's parts (memory/budget.py)
    budget_source = "--budget"
    card = None                               # no card check: one simulated rank, no HCCL communicators

    @property
    def planned(self) -> Any:
        return self.estimate

    @property
    def stages(self) -> List[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(stage=0, flops=float(self.flops), levels={})]

    @property
    def lowest(self) -> Dict[int, int]:
        return {0: self.peak}

    def margin_line(self) -> str:
        from ..text import fmt_size

        return (f"planned to {fmt_size(self.target)}: the budget {fmt_size(self.budget)} less a {self.margin:.0%} "
                f"margin (the PyNative model is uncalibrated; --margin sets it)")

    def message(self) -> str:
        from ..text import fmt_size

        if self.fits:
            return f"fits: predicted peak {fmt_size(self.peak)} <= {fmt_size(self.target)}"
        return (f"nothing fits {fmt_size(self.budget)}: the lowest peak is {fmt_size(self.peak)} with every "
                f"layer fully recomputed")

    def to_json(self) -> Dict[str, Any]:
        out = self.estimate.to_json()
        out.update({"budget_bytes": self.budget, "fits": self.fits, "margin": self.margin,
                    "target_bytes": self.target, "recompute_flops": self.flops, "notes": list(self.notes)})
        if not self.fits:
            out["lowest_peak_bytes"] = self.peak
        return out


def plan_pynative(path: str, budget: int, margin: Optional[float] = None, model: Optional[str] = None,
                  offset: int = 0) -> PynativePlanResult:
    """The search on ``path`` for ``budget`` bytes per rank (module docstring). ConfigError (exit 2) for
    what the search cannot model: a pipeline. ``offset``: bytes the launch adds to every peak (tune's
    residual, measured on its probes), fitted beside the model's peak."""
    from . import sizing

    est0 = sizing.estimate_pynative(path, model)
    if len(est0.stages) != 1:
        raise ConfigError("plan on the PyNative path plans one pipeline stage (pipeline_parallel 1)", file=path,
                          key="parallelism.pipeline_parallel")
    m = DEFAULT_MARGIN if margin is None else margin
    target = int(budget * (1 - m))
    fit_to = target - offset
    rows = est0.layers
    n = len(rows)
    data, _ = read_yaml(path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    tabled = isinstance(est0.fam, mm.LayerTable)
    opts = options(est0.fam.select_groups if tabled else EXAMPLE_GROUPS)

    def written(picks: Sequence[int]) -> str:
        full_ids = [i for i, k in enumerate(picks) if opts[k][1]]
        select: Dict[str, List[int]] = {}
        for i, k in enumerate(picks):
            for p in opts[k][2]:
                select.setdefault(p, []).append(i)
        return write_strategy(text, recompute_block(full_ids, select))

    peak_of: Callable[[Sequence[int]], int]
    if tabled:
        peak_of, flop_of, keep_of = _table_search(est0, data, opts)
    else:
        peak_of, flop_of, keep_of = _text_search(path, model, written, opts, n)
    picks = [0] * n
    peak = peak_of(picks)
    while peak > fit_to:
        best: Optional[Tuple[float, int, int]] = None
        for i in range(n):
            for k2 in range(picks[i] + 1, len(opts)):
                saved = keep_of[picks[i]] - keep_of[k2]
                score = saved / max(1, flop_of[k2] - flop_of[picks[i]])
                if saved > 0 and (best is None or score > best[0] + 1e-12):
                    best = (score, i, k2)
        if best is None:
            break
        picks[best[1]] = best[2]
        peak = peak_of(picks)
    # give back what the last changes took beyond the target: each layer, from the last, to its
    # cheapest option that still fits
    if peak <= fit_to:
        for i in reversed(range(n)):
            for k2 in range(picks[i]):
                if flop_of[k2] >= flop_of[picks[i]]:
                    continue
                trial = picks[:i] + [k2] + picks[i + 1:]
                p2 = peak_of(trial)
                if p2 <= fit_to:
                    picks, peak = trial, p2
                    break
    fits = peak <= fit_to
    new_text = written(picks)
    notes = []
    if "exclude_op" in str((data.get("recompute") or {}) if isinstance(data, dict) else ""):
        notes.append("the YAML's exclude_op is not kept: plan writes the recompute block whole")
    est = _estimate_text(path, new_text, model)
    return PynativePlanResult(config=path, budget=budget, margin=m, target=target, fits=fits,
                              peak=est.stages[0].peak(), choices=[opts[k][0] for k in picks], text=new_text,
                              estimate=est, flops=sum(r["recompute_flops"] for r in est.layers), notes=notes)


def _table_search(est0: Any, data: Any, opts: List[Option]) -> Tuple[Callable[[Sequence[int]], int], List[int],
                                                                        List[int]]:
    """The stage peak of per-layer picks straight from the layer table (what the YAML swaps kept)."""
    table: mm.LayerTable = est0.fam
    swaps: List[Tuple[bool, Tuple[str, ...]]] = []
    for r in est0.layers:
        ch = r["choice"]
        swaps.append((ch == "swap" or ch.endswith("+swap"),
                      tuple(ch.split("+op_swap:", 1)[1].split(",")) if "+op_swap:" in ch else ()))
    sw = (data.get("swap") or {}) if isinstance(data, dict) else {}
    prefetch = sw.get("default_prefetch", 1) if isinstance(sw, dict) and sw.get("enable") else None

    def peak_of(picks: Sequence[int]) -> int:
        costs = [table.cost(full=opts[k][1], select=opts[k][2], layer_swap=ls, op_swap=ops)
                 for k, (ls, ops) in zip(picks, swaps)]
        return mm.phases(table.shape, table, costs, prefetch).peak()
    flops = [table.cost(full=f, select=sel).flops for _, f, sel in opts]
    keeps = [table.cost(full=f, select=sel).kept for _, f, sel in opts]
    return peak_of, flops, keeps


def _text_search(path: str, model: Optional[str], written: Callable[[Sequence[int]], str], opts: List[Option],
                 n: int) -> Tuple[Callable[[Sequence[int]], int], List[int], List[int]]:
    """The stage peak of per-layer picks as ``estimate`` gives it for the YAML they write (the example
    model, sized from its CPU runs: docs/estimate.md), memoised."""
    memo: Dict[Tuple[int, ...], Any] = {}

    def est_of(picks: Sequence[int]) -> Any:
        key = tuple(picks)
        if key not in memo:
            memo[key] = _estimate_text(path, written(picks), model)
        return memo[key]

    flops, keeps = [], []
    for k in range(len(opts)):
        row = est_of([k] * n).layers[0]
        flops.append(int(row["recompute_flops"]))
        keeps.append(int(row["activation_bytes"]))
    return (lambda picks: est_of(picks).stages[0].peak()), flops, keeps


def _estimate_text(path: str, text: str, model: Optional[str]) -> Any:
    """The estimate of the written YAML itself, from a temporary file beside nothing the user owns."""
    import os
    import tempfile

    from . import sizing

    fd, tmp = tempfile.mkstemp(suffix=".yaml", prefix="swapwatch-plan-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        est = sizing.estimate_pynative(tmp, model)
    finally:
        os.unlink(tmp)
    est.config = path
    return est


def probe_text(path: str, text: str, fraction: float) -> str:
    """Tune's probe: ``text`` with full recompute on the first ``fraction`` of the layers and no select
    recompute (the ``recompute:`` block only, as ``plan`` writes it)."""
    from .config import load

    n = load(path).num_layers
    return write_strategy(text, recompute_block(list(range(int(round(n * fraction)))), {}))


def launch_offset(run_dirs: Sequence[str], model: Optional[str] = None) -> Any:
    """What tune fits on this path: the bytes the launch adds to every run whatever the strategy (the median
    of measured - predicted over the probes: under msrun the example model's CPU pool holds 13 MiB more than
    in one process, for full and no recompute alike), as a residual-only ``Calibration`` (not ``fitted``:
    the plan's margin stays the uncalibrated one)."""
    import os
    import statistics

    from ..memory.calibrate import measure
    from ..memory.model import Calibration
    from . import sizing

    rows = []
    for d in run_dirs:
        est = sizing.estimate_pynative(os.path.join(d, "config.yaml"), model)
        m = measure(d, len(est.stages))
        for st in est.stages:
            if st.stage in m.used:
                pred = st.peak()
                rows.append({"run": d, "stage": st.stage, "predicted_bytes": pred, "measured_bytes": m.used[st.stage],
                             "residual_bytes": m.used[st.stage] - pred})
    if not rows:
        return None
    return Calibration(residual=float(statistics.median(r["residual_bytes"] for r in rows)), runs=rows, fitted=False)
