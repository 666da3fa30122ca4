"""The one place ``tune`` and ``diff`` reach the memory model (``swapwatch.memory``).

Why an adapter: the model and its calibration are being reworked in parallel (DryRun agreement,
tensor tables, calibration terms); ``tune`` needs four answers from it — predicted peak and
recompute cost per stage of a YAML, a calibration fitted to run directories, a plan under a budget,
and the calibration's own residuals — and nothing else. When the model's API changes, this file is
the only one to re-point. Every answer comes from the YAML's :class:`~swapwatch.codepaths.CodePath`
(the static paths' and the PyNative path's differ: probes, calibration, DryRun).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple


@dataclass
class StagePrediction:
    stage: int
    peak_bytes: int
    recompute_flops: float


def predict(config: str, calibration: Any = None, model: Optional[str] = None,
            command: str = "tune") -> List[StagePrediction]:
    """Per stage: the predicted peak of ``config``'s strategy and the forward FLOPs it recomputes
    (``codepaths``: the YAML's own path sizes it; ``command`` names who asks when it cannot)."""
    from .. import codepaths
    from ..memory.model import NO_CALIBRATION

    cal = calibration if calibration is not None else NO_CALIBRATION
    doc, cp = codepaths.read(config)
    est = cp.size(doc, command, model, calibration=calibration)
    flops: Dict[int, float] = {}
    for row in est.layers:
        flops[row["stage"]] = flops.get(row["stage"], 0.0) + float(row["recompute_flops"] or 0.0)
    return [StagePrediction(st.stage, st.peak(cal), flops.get(st.stage, 0.0)) for st in est.stages]


def calibrate(run_dirs: Sequence[str], model: Optional[str] = None, config: Optional[str] = None) -> Any:
    """What tune fits to its probes' ``run_dirs`` (``swapwatch run`` directories of this model): the
    path's own (``CodePath.tune_calibration``)."""
    from .. import codepaths

    if config is None:
        from ..memory.calibrate import calibrate as fit

        return fit(list(run_dirs), model)[0]
    doc, cp = codepaths.read(config)
    return cp.tune_calibration(doc, run_dirs, model)


def residuals(calibration: Any) -> List[Dict[str, Any]]:
    """The calibration's rows: run, stage, predicted and measured bytes."""
    return list(getattr(calibration, "runs", []) or [])


def plan(config: str, budget: int, calibration: Any = None, margin: Optional[float] = None,
         model: Optional[str] = None, allow_swap: bool = False) -> Any:
    """``swapwatch plan``'s answer (``PlanResult``) for ``budget`` bytes."""
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return cp.fit(doc, "tune", budget, allow_swap=allow_swap, model=model, margin=margin, calibration=calibration)


def probe_text(text: str, config: str, model: Optional[str], fraction: float) -> Optional[str]:
    """The probe YAML with full recompute on the first ``fraction`` of the layers, when the path writes
    its own (``CodePath.probe_text``); None: tune writes it with ``memory.emit``."""
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return cp.probe_text(doc, text, model, fraction)


def stages_and_device(config: str, model: Optional[str] = None) -> Tuple[int, str]:
    """(pipeline stages, ``context.device_target``) of ``config``."""
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return cp.stages_and_device(doc, model)


def strategy_rows(config: str, model: Optional[str] = None) -> List[Dict[str, Any]]:
    """The estimate's per-layer rows of ``config`` (stage, layer, choice)."""
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return list(cp.size(doc, "tune", model).layers)


def dryrun_available(config: Optional[str] = None) -> Optional[str]:
    """None when DryRun probes can run here, else the one-line reason (the path's DryRun)."""
    from .. import codepaths

    if config is not None:
        doc, cp = codepaths.read(config)
        return cp.dryrun_missing()
    try:
        from ..memory import dryrun  # type: ignore[attr-defined]
    except ImportError:
        return "DryRun probes are unavailable: this build has no swapwatch.memory.dryrun harness yet"
    return dryrun.available()


def dryrun_measure(config: str, stages: Optional[Sequence[int]] = None, timeout: Optional[float] = None) -> Any:
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return cp.dryrun(doc, "tune", stages)
