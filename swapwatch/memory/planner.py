"""``swapwatch plan``: the cheapest strategy whose predicted peak fits a budget, as a YAML.

Steps: read the config and sizes, calibrate on the given runs, solve every stage
(:mod:`swapwatch.memory.search`), write the strategy into a copy of the YAML
(:mod:`swapwatch.memory.emit`), and then read that copy back through the same engine as
``explain`` (``swapwatch.strategy.plan``) and estimate it: what ``plan`` reports is what the
written YAML does, and a disagreement with the search is a bug (exit 3), not a guess.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..errors import InputError
from .calibrate import calibrate
from .model import NO_CALIBRATION, Calibration, Estimate, estimate, plan_of, planning_family
from .search import StagePlan, lowest_peak, solve_stage

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?|)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}


def parse_size(text: str) -> int:
    """``58GiB`` / ``45MB`` / ``62914560`` -> bytes. KiB/MiB/GiB and the bare K/M/G that MindSpore
    prints are powers of 2; KB/MB/GB are powers of 10."""
    m = _SIZE.match(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise InputError(f"--budget: {text!r} is not a size (e.g. 58GiB, 45MB, 62914560)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise InputError(f"--budget: {text!r} must be more than 0 bytes")
    return value


def fmt_size(n: float) -> str:
    """Bytes in MiB / GiB, as MindSpore reports pool sizes."""
    if abs(n) >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    return f"{n / (1 << 20):.1f} MiB"


@dataclass
class PlanResult:
    config: str
    budget: int
    fits: bool
    stages: List[StagePlan]
    calibration: Calibration
    text: Optional[str] = None              # the planned YAML (when it fits)
    estimate: Optional[Estimate] = None     # the planned YAML, estimated back
    lowest: Dict[int, int] = field(default_factory=dict)   # stage -> least reachable peak (when not)
    family: str = "tinyllama"                # the memory model's tensor table

    @property
    def exit_code(self) -> int:
        return 0 if self.fits else 1

    def message(self) -> str:
        if self.fits:
            return f"fits: every stage's predicted peak is within {fmt_size(self.budget)}"
        bad = {s.stage: self.lowest[s.stage] for s in self.stages if not s.fits}
        worst = max(bad, key=lambda k: bad[k])
        need = max(self.lowest.values())
        return (f"no strategy fits {fmt_size(self.budget)}: stage(s) {', '.join(map(str, sorted(bad)))} "
                f"cannot get below {fmt_size(bad[worst])} (stage {worst}, the most the model can drop "
                f"with full recompute or the select sets); it would take a budget of at least "
                f"{fmt_size(need)} ({need} bytes), or fewer layers / a smaller micro-batch per stage")

    def to_json(self) -> Dict[str, Any]:
        if self.estimate is not None:
            out = self.estimate.to_json()
        else:
            out = {"config": self.config, "family": self.family, "stages": [
                {"stage": s.stage, "lowest_peak_bytes": self.lowest.get(s.stage), "fits": s.fits}
                for s in self.stages], "layers": []}
        out["budget_bytes"] = self.budget
        out["fits"] = self.fits
        if not self.fits:
            out["lowest_peak_bytes"] = max(self.lowest.values())
        out["recompute_flops"] = sum(s.flops for s in self.stages)
        return out


def make_plan(config: str, budget: int, run_dirs: Sequence[str] = (), allow_swap: bool = False,
              model: Optional[str] = None) -> PlanResult:
    """``model``: the ``--model`` family; default the one the YAML names (as ``explain``)."""
    cfg, plan, spec = plan_of(config, model)
    target = str((cfg.context or {}).get("device_target", "Ascend"))
    if allow_swap and target.lower() != "ascend":
        raise InputError(f"--allow-swap: swap only moves memory on Ascend, and context.device_target is {target}",
                         file=config)
    geo = plan.geometry
    # a family whose layers differ by kind (DeepSeek-V3: dense, MoE, MTP) is searched on its most
    # demanding kind; the written YAML is then estimated layer by layer on its own kinds, and the
    # search budget tightened by any overshoot (memory.model.planning_family)
    fam = planning_family(spec, plan)
    cal = calibrate(run_dirs, model)[0] if run_dirs else NO_CALIBRATION
    search_budget = budget
    for _ in range(8):
        stages = [solve_stage(spec, fam, geo, p, cal, search_budget, allow_swap) for p in range(geo.pipeline_stage)]
        result = PlanResult(config=config, budget=budget, fits=all(s.fits for s in stages), stages=stages,
                            calibration=cal, family=fam.name)
        if not result.fits:
            result.lowest = {p: lowest_peak(spec, fam, geo, p, cal, allow_swap) for p in range(geo.pipeline_stage)}
            return result
        from .emit import emit

        with open(config, encoding="utf-8") as fh:
            result.text = emit(fh.read(), config, geo, stages)
        result.estimate = estimate_text(result.text, config, model, cal)
        result.estimate.budget_bytes = budget
        over = max(st.peak(cal) for st in result.estimate.stages) - budget
        if over <= 0:
            break
        search_budget -= over + budget // 256     # at least 0.4 % a round: a few rounds at most
    _check_round_trip(result)
    return result


def estimate_text(text: str, config: str, model: Optional[str], cal: Calibration) -> Estimate:
    """Estimate a YAML given as text (the planned copy), through the same engine as ``explain``."""
    fd, tmp = tempfile.mkstemp(suffix=".yaml", prefix="swapwatch-plan-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        est = estimate(tmp, model, cal)
    finally:
        os.unlink(tmp)
    est.config = config
    return est


def _check_round_trip(result: PlanResult) -> None:
    """The written YAML must do what the search chose, layer for layer (else a bug of ours)."""
    est = result.estimate
    chosen = {i: lv for s in result.stages for i, lv in s.levels.items()}
    for lp, row in zip(est.plan.layers, est.layers):
        lv = chosen[lp.layer]
        got = (lp.full_recompute, frozenset(() if lp.full_recompute else lp.select_recompute), lp.layer_swap)
        if got != (lv.full, frozenset(lv.patterns), lv.swap):
            raise AssertionError(f"planned YAML gives layer {lp.layer} {row['choice']!r}, search chose {lv.label!r}")
    for st in est.stages:
        if st.peak(result.calibration) > result.budget:
            raise AssertionError(f"planned YAML predicts {st.peak(result.calibration)} bytes on stage {st.stage}, "
                                 f"over the budget {result.budget}")
