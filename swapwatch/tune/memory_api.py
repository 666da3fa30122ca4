"""The one place ``tune`` and ``diff`` reach the memory model (``swapwatch.memory``).

Why an adapter: the model and its calibration are being reworked in parallel (DryRun agreement,
tensor tables, calibration terms); ``tune`` needs four answers from it — predicted peak and
recompute cost per stage of a YAML, a calibration fitted to run directories, a plan under a budget,
and the calibration's own residuals — and nothing else. When the model's API changes, this file is
the only one to re-point.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple


@dataclass
class StagePrediction:
    stage: int
    peak_bytes: int
    recompute_flops: float


def predict(config: str, calibration: Any = None, model: Optional[str] = None) -> List[StagePrediction]:
    """Per stage: the predicted peak of ``config``'s strategy and the forward FLOPs it recomputes."""
    from .. import paths
    from ..memory.model import NO_CALIBRATION

    cal = calibration if calibration is not None else NO_CALIBRATION
    est = paths.estimate(config, model, cal)
    flops: Dict[int, float] = {}
    for row in est.layers:
        flops[row["stage"]] = flops.get(row["stage"], 0.0) + float(row["recompute_flops"] or 0.0)
    return [StagePrediction(st.stage, st.peak(cal), flops.get(st.stage, 0.0)) for st in est.stages]


def calibrate(run_dirs: Sequence[str], model: Optional[str] = None, config: Optional[str] = None) -> Any:
    """A calibration fitted to ``run_dirs`` (``swapwatch run`` directories of this model); None on the
    PyNative path, which has no calibration (its figure is checked against PyNative DryRun and the
    example model's CPU runs: docs/estimate.md)."""
    from .. import paths
    from ..memory.calibrate import calibrate as fit

    if config is not None and paths.pynative_tree(config) is not None:
        return pynative_offset(run_dirs, model)
    return fit(list(run_dirs), model)[0]


def pynative_offset(run_dirs: Sequence[str], model: Optional[str] = None) -> Any:
    """On the PyNative path, the one term tune fits: the bytes the launch adds to every run whatever the
    strategy (the median of measured - predicted over the probes: under msrun the example model's CPU pool
    holds 13 MiB more than in one process, for full and no recompute alike), as a residual-only
    ``Calibration`` (not ``fitted``: the margin stays the uncalibrated one)."""
    import os
    import statistics

    from .. import paths
    from ..memory.calibrate import measure
    from ..memory.model import Calibration

    rows = []
    for d in run_dirs:
        est = paths.estimate(os.path.join(d, "config.yaml"), model)
        m = measure(d, len(est.stages))
        for st in est.stages:
            if st.stage in m.used:
                pred = st.peak()
                rows.append({"run": d, "stage": st.stage, "predicted_bytes": pred, "measured_bytes": m.used[st.stage],
                             "residual_bytes": m.used[st.stage] - pred})
    if not rows:
        return None
    offset = statistics.median(r["residual_bytes"] for r in rows)
    return Calibration(residual=float(offset), runs=rows, fitted=False)


def residuals(calibration: Any) -> List[Dict[str, Any]]:
    """The calibration's rows: run, stage, predicted and measured bytes."""
    return list(getattr(calibration, "runs", []) or [])


def plan(config: str, budget: int, calibration: Any = None, margin: Optional[float] = None,
         model: Optional[str] = None, allow_swap: bool = False) -> Any:
    """``swapwatch plan``'s answer (``PlanResult``, or on the PyNative path ``PynativePlanResult``: both
    have ``fits`` and ``text``) for ``budget`` bytes."""
    from .. import paths
    from ..memory.planner import make_plan

    if paths.pynative_tree(config) is not None:
        from ..pynative.planning import plan_pynative

        return plan_pynative(config, budget, margin, model, int(round(getattr(calibration, "residual", 0) or 0)))
    return make_plan(config, budget, (), allow_swap=allow_swap, model=model, margin=margin,
                     calibration=calibration)


def uniform_strategy(text: str, config: str, model: Optional[str], fraction: float) -> Optional[str]:
    """On the PyNative path, ``text`` with full recompute on the first ``fraction`` of the layers and no
    select recompute (tune's probes; ``recompute:`` written by ``pynative/r2_writer.py``); None on the
    static paths (tune writes those with ``memory.emit``)."""
    from .. import paths

    if paths.pynative_tree(config) is None:
        return None
    from ..pynative.config import load
    from ..pynative.r2_writer import recompute_block, write_strategy

    n = load(config).num_layers
    return write_strategy(text, recompute_block(list(range(int(round(n * fraction)))), {}))


def stages_and_device(config: str, model: Optional[str] = None) -> Tuple[int, str]:
    """(pipeline stages, ``context.device_target``) of ``config`` (Ascend when the YAML does not say): the
    static loader's, or the r2.x sections' (``parallelism.pipeline_parallel``, ``context``)."""
    from .. import paths

    if paths.pynative_tree(config) is not None:
        from ..config import read_yaml
        from ..pynative.config import load

        data, _ = read_yaml(config)
        ctx = (data.get("context") or {}) if isinstance(data, dict) else {}
        return load(config).pipeline_parallel, str((ctx if isinstance(ctx, dict) else {}).get("device_target",
                                                                                               "Ascend"))
    from ..memory.model import plan_of

    cfg, plan, _ = plan_of(config, model)
    return plan.geometry.pipeline_stage, str((cfg.context or {}).get("device_target", "Ascend"))


def strategy_rows(config: str, model: Optional[str] = None) -> List[Dict[str, Any]]:
    """The estimate's per-layer rows of ``config`` (stage, layer, choice), on either path."""
    from .. import paths

    return list(paths.estimate(config, model).layers)


def dryrun_available(config: Optional[str] = None) -> Optional[str]:
    """None when DryRun probes can run here, else the one-line reason (estdry's harness,
    ``swapwatch.memory.dryrun``, imported lazily: it may not be merged yet; on the PyNative path
    ``swapwatch.pynative.dryrun``)."""
    from .. import paths

    if config is not None and paths.pynative_tree(config) is not None:
        from ..pynative import dryrun as pyn

        return pyn.available()
    try:
        from ..memory import dryrun  # type: ignore[attr-defined]
    except ImportError:
        return "DryRun probes are unavailable: this build has no swapwatch.memory.dryrun harness yet"
    return dryrun.available()


def dryrun_measure(config: str, stages: Optional[Sequence[int]] = None, timeout: Optional[float] = None) -> Any:
    """DryRun's peaks per stage (``DryRunResult``: ``stages`` of ``StagePeak``); on the PyNative path the
    one simulated rank of ``swapwatch.pynative.dryrun`` as stage 0."""
    from .. import paths
    from ..memory import dryrun  # type: ignore[attr-defined]

    if paths.pynative_tree(config) is not None:
        from ..pynative import dryrun as pyn

        res = pyn.measure(config, timeout=timeout)
        out = dryrun.DryRunResult(config=config, rank_size=1)
        out.stages[0] = dryrun.StagePeak(stage=0, rank_id=0, used_bytes=res.used_bytes, actual_bytes=res.actual_bytes,
                                         seconds=res.seconds, log_path=res.log_path)
        return out
    return dryrun.measure(config, stages, timeout=timeout)
