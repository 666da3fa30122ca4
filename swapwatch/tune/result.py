"""What ``swapwatch tune`` found: every attempt (:class:`Attempt`) and the outcome (:class:`TuneResult`).

Below both the loop that makes them (``tune/loop.py``) and the report that renders them (``tune/report.py``), so
neither imports the other's module for the other's type.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

#: steps dropped before the step-time median: the first step compiles the graph (seconds on CPU,
#: minutes on Ascend) and the second still fills the memory pool
WARMUP_STEPS = 2


@dataclass
class Attempt:
    n: int
    kind: str                              # "probe" | "plan"
    label: str                             # "full recompute", "no recompute", "plan @ 61.2 MiB"
    yaml: str                              # the YAML that ran (strategy + step limit)
    strategy_yaml: str                     # the same strategy without the step limit
    sha256: str
    target_bytes: Optional[int] = None     # the planner's target (plans)
    strategy: List[str] = field(default_factory=list)     # per stage: "stage 0: layers 0-1 full, 2-3 none"
    predicted: Dict[str, int] = field(default_factory=dict)   # stage -> predicted peak before the run
    recompute_flops: float = 0.0
    run_dir: Optional[str] = None
    exit_code: Optional[int] = None
    verify: str = ""                       # PASS / FAIL / WARN / "" (not verified)
    oom: Optional[str] = None
    measured: Dict[str, int] = field(default_factory=dict)    # stage -> measured peak
    step_ms: List[float] = field(default_factory=list)        # per step (max over ranks)
    seconds: float = 0.0                   # what the attempt cost (wall time)
    dryrun: bool = False
    record: Optional[str] = None           # --dryrun: the DryRun record (calibrate.dryrun_case reads it)

    @property
    def peak(self) -> Optional[int]:
        return max(self.measured.values()) if self.measured else None

    @property
    def median_ms(self) -> Optional[float]:
        s = self.step_ms[WARMUP_STEPS:]
        return statistics.median(s) if s else None

    @property
    def spread_ms(self) -> Optional[float]:
        """Half the inter-quartile range of the steps after warm-up (0 with fewer than 4)."""
        s = sorted(self.step_ms[WARMUP_STEPS:])
        if len(s) < 4:
            return 0.0 if s else None
        q = statistics.quantiles(s, n=4)
        return (q[2] - q[0]) / 2

    def fits(self, budget: int) -> bool:
        return self.exit_code == 0 and self.oom is None and self.peak is not None and self.peak <= budget \
            and (self.verify == "PASS" or self.dryrun)

    def outcome(self, budget: int) -> str:
        if self.oom:
            return "OOM"
        if self.exit_code is None:
            return "not run"
        if self.exit_code != 0 and not self.dryrun:
            tail = "" if self.verify in ("", "PASS") else f", verify {self.verify}"
            return f"failed (exit {self.exit_code}){tail}"
        if self.peak is None:
            return "no peak in the logs"
        return "within budget" if self.peak <= budget else "over budget"

    def to_json(self) -> Dict[str, Any]:
        out = asdict(self)
        out.update(peak_bytes=self.peak, median_step_ms=self.median_ms, spread_step_ms=self.spread_ms)
        return out

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Attempt":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class TuneResult:
    config: str
    budget: int
    directory: str
    attempts: List[Attempt]
    final: Optional[Attempt]
    final_yaml: Optional[str]
    stop_reason: str
    resolution: int
    margin: float
    margin_why: str
    calibration: List[Dict[str, Any]] = field(default_factory=list)
    levers: List[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.final is not None else 1

    @property
    def full_probe(self) -> Optional[Attempt]:
        return next((a for a in self.attempts if a.kind == "probe" and a.label == FULL), None)

    def speedup(self) -> Optional[Tuple[float, bool]]:
        """(final step-time speed-up over the full-recompute probe, whether it is outside the
        noise: the medians differ by more than the two runs' spreads together)."""
        base, fin = self.full_probe, self.final
        if base is None or fin is None or not base.median_ms or not fin.median_ms:
            return None
        gain = base.median_ms / fin.median_ms - 1.0
        noise = (base.spread_ms or 0.0) + (fin.spread_ms or 0.0)
        return gain, abs(base.median_ms - fin.median_ms) > noise

    def to_json(self) -> Dict[str, Any]:
        sp = self.speedup()
        return {"config": self.config, "budget_bytes": self.budget, "directory": self.directory,
                "margin": round(self.margin, 4), "margin_why": self.margin_why,
                "resolution_bytes": self.resolution, "stop_reason": self.stop_reason,
                "final": None if self.final is None else self.final.n, "final_yaml": self.final_yaml,
                "speedup_vs_full_recompute": None if sp is None else round(sp[0], 4),
                "speedup_outside_noise": None if sp is None else sp[1],
                "calibration": self.calibration, "levers": self.levers,
                "attempts": [a.to_json() for a in self.attempts]}


FULL, NONE, HALF = "full recompute", "no recompute", "full recompute on half the layers"
