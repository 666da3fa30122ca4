"""The one place ``tune`` and ``diff`` reach the memory model (``swapwatch.memory``).

Why an adapter: the model and its calibration are being reworked in parallel (DryRun agreement,
tensor tables, calibration terms); ``tune`` needs four answers from it — predicted peak and
recompute cost per stage of a YAML, a calibration fitted to run directories, a plan under a budget,
and the calibration's own residuals — and nothing else. When the model's API changes, this file is
the only one to re-point.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence


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


def calibrate(run_dirs: Sequence[str], model: Optional[str] = None) -> Any:
    """A calibration fitted to ``run_dirs`` (``swapwatch run`` directories of this model)."""
    from ..memory.calibrate import calibrate as fit

    return fit(list(run_dirs), model)[0]


def residuals(calibration: Any) -> List[Dict[str, Any]]:
    """The calibration's rows: run, stage, predicted and measured bytes."""
    return list(getattr(calibration, "runs", []) or [])


def plan(config: str, budget: int, calibration: Any = None, margin: Optional[float] = None,
         model: Optional[str] = None, allow_swap: bool = False) -> Any:
    """``swapwatch plan``'s answer (``PlanResult``) for ``budget`` bytes."""
    from .. import codepaths

    doc, cp = codepaths.read(config)
    return cp.fit(doc, "tune", budget, allow_swap=allow_swap, model=model, margin=margin, calibration=calibration)


def dryrun_available() -> Optional[str]:
    """None when DryRun probes can run here, else the one-line reason (estdry's harness,
    ``swapwatch.memory.dryrun``, imported lazily: it may not be merged yet)."""
    try:
        from ..memory import dryrun  # type: ignore[attr-defined]
    except ImportError:
        return "DryRun probes are unavailable: this build has no swapwatch.memory.dryrun harness yet"
    return dryrun.available()


def dryrun_measure(config: str, stages: Optional[Sequence[int]] = None, timeout: Optional[float] = None) -> Any:
    from ..memory import dryrun  # type: ignore[attr-defined]

    return dryrun.measure(config, stages, timeout=timeout)
