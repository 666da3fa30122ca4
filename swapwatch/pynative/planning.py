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
from typing import Any, Dict, List, Optional, Tuple

from ..config import read_yaml
from ..errors import ConfigError
from . import memory_model as mm
from .r2_writer import recompute_block, write_strategy

#: a layer's options, from least to most recomputed: (label, full, select paths)
OPTIONS: Tuple[Tuple[str, bool, Tuple[str, ...]], ...] = (
    ("none", False, ()),
    ("select:mlp", False, ("mlp",)),
    ("select:self_attention,mlp", False, ("self_attention", "mlp")),
    ("full", True, ()),
)
DEFAULT_MARGIN = 0.10


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

    def to_json(self) -> Dict[str, Any]:
        out = self.estimate.to_json()
        out.update({"budget_bytes": self.budget, "fits": self.fits, "margin": self.margin,
                    "target_bytes": self.target, "recompute_flops": self.flops, "notes": list(self.notes)})
        if not self.fits:
            out["lowest_peak_bytes"] = self.peak
        return out


def _stage_peak(shape: mm.Shape, table: mm.LayerTable, picks: List[int], swaps: List[Tuple[bool, Tuple[str, ...]]],
                prefetch: Optional[int]) -> int:
    costs = []
    for k, (lswap, ops) in zip(picks, swaps):
        _, full, sel = OPTIONS[k]
        costs.append(table.cost(full=full, select=sel, layer_swap=lswap, op_swap=ops))
    return mm.phases(shape, table, costs, prefetch).peak()


def plan_pynative(path: str, budget: int, margin: Optional[float] = None, model: Optional[str] = None
                  ) -> PynativePlanResult:
    """The search on ``path`` for ``budget`` bytes per rank (module docstring). ConfigError (exit 2) for
    what the search cannot model: a pipeline, sharding across ranks (unchecked by DryRun here)."""
    from . import sizing

    est0 = sizing.estimate_pynative(path, model)
    if not isinstance(est0.fam, mm.LayerTable):
        raise ConfigError("plan on the PyNative path models MindFormers' PyNative models (pynative/tables); "
                          f"family {est0.family!r} is sized from its CPU runs only", file=path)
    if len(est0.stages) != 1:
        raise ConfigError("plan on the PyNative path plans one pipeline stage (pipeline_parallel 1)", file=path,
                          key="parallelism.pipeline_parallel")
    m = DEFAULT_MARGIN if margin is None else margin
    target = int(budget * (1 - m))
    table: mm.LayerTable = est0.fam
    shape = table.shape
    rows = est0.layers
    n = len(rows)
    # what the YAML swaps stays (recompute is what plan chooses)
    swaps: List[Tuple[bool, Tuple[str, ...]]] = []
    for r in rows:
        ch = r["choice"]
        lswap = ch == "swap" or ch.endswith("+swap")
        ops = tuple(ch.split("+op_swap:", 1)[1].split(",")) if "+op_swap:" in ch else ()
        swaps.append((lswap, ops))
    prefetch = None
    data, _ = read_yaml(path)
    sw = (data.get("swap") or {}) if isinstance(data, dict) else {}
    if isinstance(sw, dict) and sw.get("enable"):
        prefetch = sw.get("default_prefetch", 1)
    picks = [0] * n
    flop_of = [[table.cost(full=f, select=s).flops for _, f, s in OPTIONS]] * n
    keep_of = [[table.cost(full=f, select=s).kept for _, f, s in OPTIONS]] * n
    peak = _stage_peak(shape, table, picks, swaps, prefetch)
    while peak > target:
        best: Optional[Tuple[float, int, int]] = None
        for i in range(n):
            for k2 in range(picks[i] + 1, len(OPTIONS)):
                saved = keep_of[i][picks[i]] - keep_of[i][k2]
                score = saved / max(1, flop_of[i][k2] - flop_of[i][picks[i]])
                if saved > 0 and (best is None or score > best[0] + 1e-12):
                    best = (score, i, k2)
        if best is None:
            break
        picks[best[1]] = best[2]
        peak = _stage_peak(shape, table, picks, swaps, prefetch)
    # give back what the last upgrades took beyond the target: each layer, from the last, to its
    # cheapest option that still fits
    if peak <= target:
        for i in reversed(range(n)):
            for k2 in range(picks[i]):
                if flop_of[i][k2] >= flop_of[i][picks[i]]:
                    continue
                trial = picks[:i] + [k2] + picks[i + 1:]
                p2 = _stage_peak(shape, table, trial, swaps, prefetch)
                if p2 <= target:
                    picks, peak = trial, p2
                    break
    fits = peak <= target
    full_ids = [i for i, k in enumerate(picks) if OPTIONS[k][1]]
    select: Dict[str, List[int]] = {}
    for i, k in enumerate(picks):
        for p in OPTIONS[k][2]:
            select.setdefault(p, []).append(i)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new_text = write_strategy(text, recompute_block(full_ids, select))
    notes = []
    if "exclude_op" in str((data.get("recompute") or {}) if isinstance(data, dict) else ""):
        notes.append("the YAML's exclude_op is not kept: plan writes the recompute block whole")
    est = _estimate_text(path, new_text, model)
    return PynativePlanResult(config=path, budget=budget, margin=m, target=target, fits=fits,
                              peak=est.stages[0].peak(), choices=[OPTIONS[k][0] for k in picks], text=new_text,
                              estimate=est, flops=sum(r["recompute_flops"] for r in est.layers), notes=notes)


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


def render(res: PynativePlanResult, fmt: str) -> str:
    """table: the estimate of the written YAML with the budget line; json: its JSON plus the plan's
    fields; yaml: the written YAML."""
    import json

    if fmt == "yaml":
        return res.text
    if fmt == "json":
        return json.dumps(res.to_json(), indent=2) + "\n"
    from .sizing import render as render_estimate

    gib = 1 << 30
    head = (f"plan: {'fits' if res.fits else 'does NOT fit'}: predicted peak {res.peak / gib:.2f} GiB, target "
            f"{res.target / gib:.2f} GiB (budget {res.budget / gib:.2f} GiB less the {res.margin:.0%} margin); "
            f"recompute {res.flops / 1e9:.0f} GFLOP per micro-batch\n")
    return head + render_estimate(res.estimate, "table")
