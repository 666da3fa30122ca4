"""The FLOP/s a device achieves in training, from a run's step time: what a swap's compute window is
timed with (``swap_cost.Link.flops``; docs/plan.md, "What a swap is priced with").

A ``swapwatch run`` directory has the step times MindFormers logs (``MFLossMonitor``: per step, the
slowest rank) and the config that ran. Per pipeline stage the model counts the FLOPs one step does
on one rank: per micro-batch every layer's forward, twice that in backward, what recompute runs
again, and on the last stage the head (its matmul forward and backward). The busiest stage sets the
pace; under 1F1B a step of ``m`` micro-batches on ``P`` stages is ``m + P - 1`` slots long of which
``m`` compute on each stage, so the achieved rate is that stage's FLOPs over ``m / (m + P - 1)`` of
the step. The first steps (compilation, warm-up) are left out: the median of the others is taken.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

#: steps left out at the start of a run (the first compiles the graph)
WARMUP_STEPS = 2


def step_flops(est) -> float:
    """FLOPs one step runs on one rank of the busiest stage (``est``: an ``Estimate``)."""
    spec = est.spec
    sym = spec.symbols()
    from .model import layer_families

    tables = {}

    kinds, mtp = layer_families(spec, est.plan, est.fam)
    for lp, t in zip(est.plan.layers, kinds):
        tables[lp.layer] = t
    per_stage = {st.stage: 0.0 for st in est.stages}
    rec = {(row["layer"], bool(row.get("mtp"))): float(row["recompute_flops"]) for row in est.layers}
    for lp in est.plan.layers:
        per_stage[lp.stage] += 3 * tables[lp.layer].forward_flops() + rec[(lp.layer, False)]
    for lp, t in zip(est.plan.mtp, mtp):
        per_stage[lp.stage] += 3 * t.forward_flops() + rec.get((lp.layer, True), 0.0)
    last = spec.pp - 1
    per_stage[last] = per_stage.get(last, 0.0) + 3 * 2.0 * sym["b"] * sym["s"] * spec.hidden * sym["v"]
    return spec.micro_batch_num * max(per_stage.values())


def run_step_seconds(run_dir: str) -> List[float]:
    """The step times of a run directory (per step, the slowest rank), seconds."""
    from ..parsers import read_logs

    run = read_logs([run_dir], show_progress=False)
    per_step: Dict[int, float] = {}
    for rl in run.ranks.values():
        for e in rl.steps:
            if e.ms is not None:
                per_step[e.step] = max(per_step.get(e.step, 0.0), float(e.ms) / 1000.0)
    return [per_step[k] for k in sorted(per_step)]


def achieved_flops(run_dirs: Sequence[str], model: Optional[str] = None,
                   device_target: str = "Ascend") -> Optional[Tuple[float, str]]:
    """(FLOP/s, where it came from) measured on the run directories among ``run_dirs`` whose config
    trains on ``device_target`` and that logged steps past the warm-up; None when none did (the
    other calibration sources, DryRun records and logs, have no step time)."""
    import os

    from ..config import load_config
    from .calibrate import run_config
    from .model import estimate
    from ..parsers import read_logs

    rates: List[float] = []
    used: List[str] = []
    for rd in run_dirs:
        if "=" in rd or not os.path.isdir(rd):
            continue
        cfg_path = run_config(rd, read_logs([rd], show_progress=False).run_info)
        target = str((load_config(cfg_path).context or {}).get("device_target", "Ascend"))
        if target.lower() != device_target.lower():
            continue
        steps = run_step_seconds(rd)[WARMUP_STEPS:]
        if not steps:
            continue
        est = estimate(cfg_path, model)
        m, p = est.spec.micro_batch_num, est.spec.pp
        busy = statistics.median(steps) * m / (m + p - 1)
        rates.append(step_flops(est) / busy)
        used.append(os.path.basename(os.path.normpath(rd)))
    if not rates:
        return None
    return statistics.median(rates), f"measured: the step time of {', '.join(used)}"
