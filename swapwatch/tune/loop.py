"""``swapwatch tune``: probe, calibrate, plan, run, measure, bisect — MindSpeed's adaptive recompute
loop, for a MindFormers YAML, as a sequence of short runs (docs/tune.md).

Why a loop of runs: in MindSpore's static graph the recompute strategy is fixed at compile time, so
a strategy can only be measured by running it; and the memory model alone misses unseen strategies
and shapes by more than a budget can absorb. So:

1. **Probe** the strategies that cannot OOM first (full recompute on every layer), then no
   recompute (the other calibration point; if it fits the budget there is nothing to plan); if no
   recompute OOMs, full recompute on half of each stage's layers instead. Each attempt is the user's
   YAML with the strategy spliced in (:mod:`swapwatch.memory.emit`) and the step limit MindFormers
   itself honours (a ``TrainCallBack`` with ``stop_step``, which the example trainer reads too), run
   through :func:`swapwatch.runner.run` (environment, run directory, logs, verify).
2. **Calibrate** the memory model on the probes that ran; the margin comes from its residuals
   (:func:`swapwatch.memory.planner.plan_margin`) or ``--margin``.
3. **Plan** for the target, **run** the plan, **verify** (the runner's verify, every rank) and
   **measure** the peak (Ascend ``Actual peak memory usage``, CPU the pool peak: the figures
   :mod:`swapwatch.memory.calibrate` reads) and the step time (median after the warm-up steps).
4. **Bisect** the planner's target: an OOM (:mod:`swapwatch.tune.oom`) or a peak over the budget
   lowers it, a peak well under raises it; stop when the interval is under the resolution (below),
   when the plan no longer changes, or at ``--max-runs``.
5. Hand back only a strategy that was **measured** within the budget with verify PASS: the cheapest
   in recompute FLOPs among them unless another was measurably faster (:meth:`Tuner._best`); full
   recompute when nothing else was.

Resolution: the planner's choices are discrete, and the smallest change of a stage's predicted peak
between two of them is one layer moving one level (its kept activations, e.g. 5.4 MiB on the tiny
model); bisecting the target finer than that, or than the 1 MiB granularity MindSpore prints peaks in
(``NNNM``), gives the same plan or the same measurement. MindSpeed stops its budget bisection at 1 MB
for the same reason (its ``dichotomy_best``).

The tune directory holds ``tune.json`` (every attempt, rewritten after each), each attempt's YAML
and run directory, ``tune.txt`` / ``tune.png`` (the report) and the final YAML; run again with the
same arguments, ``tune`` reuses every finished attempt (matched by the sha256 of its YAML) and
re-runs an interrupted one. The user's YAML is never written.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import json_input
from ..errors import InputError
from ..text import MIB, MIB_UNIT, fmt_bytes
from . import memory_api
from .oom import oom_in_run

MiB = MIB
#: steps dropped before the step-time median: the first step compiles the graph (seconds on CPU,
#: minutes on Ascend) and the second still fills the memory pool
WARMUP_STEPS = 2
STATE = "tune.json"


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


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------

def command_for(command: Sequence[str], config: str, attempt_yaml: str) -> List[str]:
    """``command`` with the config replaced by the attempt's YAML: ``{config}`` anywhere in an
    argument, else CONFIG's path verbatim inside an argument."""
    cmd = list(command)
    if any("{config}" in a for a in cmd):
        return [a.replace("{config}", attempt_yaml) for a in cmd]
    if any(config in a for a in cmd):
        return [a.replace(config, attempt_yaml) for a in cmd]
    raise InputError(f"the command must name the config as {{config}} or contain {config} "
                     f"(each attempt runs its own YAML): {' '.join(command)}")


# ---------------------------------------------------------------------------------------------
# YAMLs
# ---------------------------------------------------------------------------------------------

def step_limit_edit(doc: Dict[str, Any], steps: int) -> Tuple[Tuple[str, ...], Any]:
    """The edit that stops training after ``steps`` steps the way MindFormers itself does: a
    ``callbacks`` entry ``{type: TrainCallBack, stop_step: K}`` (mindformers/core/callback/callback.py:
    TrainCallBack.on_train_step_end; the example trainer reads it too). ``runner_config.stop_step``
    does not work in MindFormers 2.1.0: trainer/base_trainer.py:BaseTrainer.training_process builds
    the callback from it and never adds it."""
    cbs = doc.get("callbacks")
    keep = [c for c in cbs if not (isinstance(c, dict) and c.get("type") == "TrainCallBack")] \
        if isinstance(cbs, list) else []
    return ("callbacks",), keep + [{"type": "TrainCallBack", "stop_step": steps}]


def uniform_text(text: str, config: str, model: Optional[str], fraction: float) -> str:
    """The YAML with full recompute on the first ``fraction`` of each stage chunk's layers and no
    select recompute (the probes), written by the same emitter as ``plan``."""
    own = memory_api.probe_text(text, config, model, fraction)
    if own is not None:
        return own
    from ..memory.emit import emit_result
    from ..memory.tensor_table import LayerCost
    from ..memory.model import plan_of
    from ..memory.planner import _plan_of_text
    from ..memory.search import Level, StagePlan

    _, plan, _ = plan_of(config, model)
    geo = plan.geometry
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    full, none = Level("full", (), True, None, zero, 1), Level("none", (), False, None, zero, 0)
    levels: Dict[int, Level] = {}
    for v in range(geo.pp_interleave_num):
        for st in range(geo.pipeline_stage):
            start, n = geo.chunk_starts[v][st], geo.layer_list[v][st]
            k = int(round(n * fraction))
            for i in range(start, start + n):
                levels[i] = full if i - start < k else none
    return emit_result(text, config, geo, [StagePlan(stage=0, fits=True, levels=levels)],
                       plan_of_text=lambda t: _plan_of_text(t, model)).text


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Measuring one run
# ---------------------------------------------------------------------------------------------

def measure_run(run_dir: Path, stages: int, device: str) -> Tuple[Dict[str, int], List[float]]:
    """Measured peak per stage (Ascend: the actual peak, with fragments; CPU: the pool peak) and
    the step times (per step, the slowest rank)."""
    from ..memory.calibrate import measure
    from ..parsers import read_logs

    peaks: Dict[str, int] = {}
    try:
        m = measure(str(run_dir), stages)
        use = m.actual if (device.lower() == "ascend" and m.actual) else m.used
        peaks = {str(k): int(v) for k, v in use.items()}
    except InputError:
        pass
    per_step: Dict[int, float] = {}
    try:
        run = read_logs([str(run_dir)], show_progress=False)
    except InputError:
        return peaks, []
    for rl in run.ranks.values():
        seen = set()
        for e in rl.steps:
            if e.ms is None or e.step in seen:
                continue
            seen.add(e.step)
            per_step[e.step] = max(per_step.get(e.step, 0.0), float(e.ms))
    return peaks, [per_step[k] for k in sorted(per_step)]


def _verdict(run_dir: Path, info: Dict[str, Any]) -> str:
    try:
        data = json_input.read(str(run_dir / "verify.json"), "verify.json")
        return str(data.get("verdict") or "").upper()
    except (InputError, AttributeError):
        v = info.get("verify") or {}
        return "PASS" if v.get("exit_code") == 0 else ("" if not v else "FAIL")


class _Sink:
    """Where the runner streams the job's output during tune: the run directory's console.log keeps
    every byte; the terminal gets tune's one line per attempt."""

    def write(self, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------

class Tuner:
    def __init__(self, config: str, budget: int, command: Sequence[str], *, max_runs: int = 8,
                 margin: Optional[float] = None, steps: int = 10, directory: Optional[str] = None,
                 dryrun: bool = False, model: Optional[str] = None, say: Callable[[str], None] = print,
                 runner_out=None):
        if not os.path.isfile(config):
            raise InputError("no such file", file=config)
        if max_runs < 2:
            raise InputError(f"--max-runs {max_runs}: at least 2 (the full-recompute probe and one more)")
        if steps < WARMUP_STEPS + 2:
            raise InputError(f"--steps {steps}: at least {WARMUP_STEPS + 2} (the first {WARMUP_STEPS} are warm-up, "
                             "and the step time is a median of the rest)")
        if margin is not None and not 0.0 <= margin < 1.0:
            raise InputError(f"--margin: {margin} must be a fraction in [0, 1) (e.g. 0.05)")
        self.config, self.budget, self.max_runs, self.margin_arg = config, budget, max_runs, margin
        self.steps, self.dryrun, self.model, self.say = steps, dryrun, model, say
        self.command = list(command)
        if dryrun:
            reason = memory_api.dryrun_available(config)
            if reason:
                raise InputError(f"--dryrun: {reason}")
        else:
            if not self.command:
                raise InputError("no command given: swapwatch tune CONFIG --budget SIZE -- COMMAND...")
            command_for(self.command, config, "x")          # names the config, or exit 2 now
        self.text = Path(config).read_text(encoding="utf-8")
        stem = Path(config).stem
        self.dir = Path(directory or f"{stem}.tune")
        self.final_path = self.dir / f"{stem}.tuned.yaml"
        if self.final_path.resolve() == Path(config).resolve():
            raise InputError("the tune directory's final YAML would be CONFIG itself; pick another --dir",
                             file=config)
        self.stages, self.device = memory_api.stages_and_device(config, model)
        self.runner_out = runner_out if runner_out is not None else _Sink()
        self.attempts: List[Attempt] = []
        self.cache: Dict[str, Attempt] = {}
        self.runs = 0                         # attempts run (or reused) in this tune
        self._open_dir()

    # --- the directory -----------------------------------------------------------------------

    def _params(self) -> Dict[str, Any]:
        return {"config": str(Path(self.config).resolve()), "config_sha256": _sha(self.text), "budget": self.budget,
                "command": self.command, "steps": self.steps, "dryrun": self.dryrun, "model": self.model,
                "margin_arg": self.margin_arg, "max_runs": self.max_runs}

    def _open_dir(self) -> None:
        state = self.dir / STATE
        if state.exists():
            old = json_input.read(str(state), "tune.json")      # bounded; not JSON: one line
            if not isinstance(old, dict):
                raise InputError("the tune directory's tune.json is not a JSON object", file=str(state))
            params = old.get("params", {})
            mine = self._params()
            for key in ("config_sha256", "budget", "command", "steps", "dryrun", "model"):
                if params.get(key) != mine[key]:
                    raise InputError(f"this tune directory was made with another {key} "
                                     f"({params.get(key)!r}); resume with the same arguments or pick another --dir",
                                     file=str(self.dir))
            for d in old.get("attempts", []):
                a = Attempt.from_json(d)
                if a.exit_code is not None and (a.dryrun or (a.run_dir and Path(a.run_dir, "run.json").exists())):
                    self.cache[a.sha256] = a
            self.say(f"swapwatch tune: resuming {self.dir}: {len(self.cache)} finished attempt(s) are reused")
        elif self.dir.exists() and any(self.dir.iterdir()):
            raise InputError("the tune directory exists and is not a tune directory (no tune.json); "
                             "pick another --dir", file=str(self.dir))
        self.dir.mkdir(parents=True, exist_ok=True)
        if not state.exists():
            self._save()                      # a tune directory from the start: resumable after a crash

    def _save(self, extra: Optional[Dict[str, Any]] = None) -> None:
        data = {"params": self._params(), "attempts": [a.to_json() for a in self.attempts], **(extra or {})}
        tmp = self.dir / (STATE + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.dir / STATE)

    # --- one attempt -------------------------------------------------------------------------

    def attempt(self, kind: str, label: str, strategy_text: str, calibration: Any,
                target: Optional[int] = None) -> Attempt:
        """Run (or reuse) the attempt whose strategy is ``strategy_text``."""
        from ..memory.emit import _load, splice

        run_text = splice(strategy_text, self.config, [step_limit_edit(_load(strategy_text, self.config), self.steps)])
        sha = _sha(run_text)
        for a in self.attempts:
            if a.sha256 == sha:
                return a                      # this tune measured it already
        n = len(self.attempts) + 1
        if sha in self.cache:
            a = self.cache[sha]
            a.n = n
            self.attempts.append(a)
            self.runs += 1
            self.say(f"  attempt {n}: {label}: reused from the tune directory ({a.outcome(self.budget)})")
            self._save()
            return a
        slug = label.replace(" ", "-").replace("@", "at").replace("/", "-")
        yaml_path = self.dir / f"attempt-{n:02d}-{slug}.yaml"
        strat_path = self.dir / f"attempt-{n:02d}-{slug}.strategy.yaml"
        yaml_path.write_text(run_text, encoding="utf-8")
        strat_path.write_text(strategy_text, encoding="utf-8")
        a = Attempt(n=n, kind=kind, label=label, yaml=str(yaml_path), strategy_yaml=str(strat_path), sha256=sha,
                    target_bytes=target, dryrun=self.dryrun)
        preds = memory_api.predict(str(yaml_path), calibration, self.model)
        a.predicted = {str(p.stage): p.peak_bytes for p in preds}
        a.recompute_flops = sum(p.recompute_flops for p in preds)
        a.strategy = strategy_summary(str(yaml_path), self.model)
        self.attempts.append(a)
        self.runs += 1
        self._save()
        self.say(f"  attempt {n}: {label}: running {self.steps} steps ...")
        t0 = time.monotonic()
        if self.dryrun:
            self._dryrun(a)
        else:
            self._run(a, yaml_path)
        a.seconds = round(time.monotonic() - t0, 1)
        peak = fmt_bytes(a.peak, MIB_UNIT, digits=1) if a.peak else "no peak"
        med = f", step {a.median_ms:.0f} ms" if a.median_ms else ""
        self.say(f"  attempt {n}: {label}: {a.outcome(self.budget)}: peak {peak}{med}, verify "
                 f"{a.verify or 'n/a'} ({a.seconds:.0f} s)")
        self._save()
        return a

    def _run(self, a: Attempt, yaml_path: Path) -> None:
        from ..runner import run

        rdir = self.dir / f"attempt-{a.n:02d}"
        if rdir.exists():                     # an interrupted earlier try of this attempt: keep it aside
            k = 1
            while (self.dir / f"attempt-{a.n:02d}.interrupted-{k}").exists():
                k += 1
            rdir.rename(self.dir / f"attempt-{a.n:02d}.interrupted-{k}")
        # the attempts run unattended, one after another: none reads tune's own stdin
        res = run(command_for(self.command, self.config, str(yaml_path)), config=str(yaml_path), run_dir=str(rdir),
                  out=self.runner_out, err=self.runner_out, stdin=subprocess.DEVNULL)
        a.run_dir = str(res.run_dir) if res.run_dir else None
        info = res.info or {}
        if info.get("interrupted"):
            a.exit_code = None
            self._save()
            raise KeyboardInterrupt
        a.exit_code = res.exit_code
        if res.run_dir is None:
            a.verify = "blocked by preflight"
            return
        a.verify = _verdict(res.run_dir, info)
        child = info.get("child_exit_code")
        oom = oom_in_run(res.run_dir, child if child else res.exit_code)
        a.oom = oom.describe() if oom else None
        a.measured, a.step_ms = measure_run(res.run_dir, self.stages, self.device)

    def _dryrun(self, a: Attempt) -> None:
        """A DryRun simulation instead of a run: peaks only (no step time, no verify)."""
        try:
            res = memory_api.dryrun_measure(a.yaml)
        except InputError:
            raise                             # bad input: exit 2, as everywhere
        except Exception as exc:  # noqa: BLE001 - DryRun's own failure: recorded, like a failed run
            a.exit_code = 1
            text = str(exc)
            a.oom = text if ("isn't enough" in text or "Out of Memory" in text) else None
            return
        a.exit_code = 0
        a.verify = "n/a (DryRun)"
        a.measured = {str(k): int(sp.actual_bytes) for k, sp in res.stages.items()}
        a.record = write_dryrun_record(a.yaml, res)



    # --- the loop ----------------------------------------------------------------------------

    def tune(self) -> TuneResult:
        from ..memory.planner import fmt_size, plan_margin

        self.say(f"swapwatch tune: {self.config}, budget {fmt_size(self.budget)}, {self.steps} steps per attempt, "
                 f"at most {self.max_runs} runs; directory {self.dir}")
        full = self.attempt("probe", FULL, uniform_text(self.text, self.config, self.model, 1.0), None)
        probes = [full]
        if not full.fits(self.budget):
            return self._nothing_fits(full)
        none = self.attempt("probe", NONE, uniform_text(self.text, self.config, self.model, 0.0), None)
        probes.append(none)
        if none.fits(self.budget):
            return self._finish(none, "no recompute fits the budget: there is nothing to recompute", 0, 0.0,
                                "no plan needed", [])
        if none.oom and self.runs < self.max_runs:
            half = self.attempt("probe", HALF, uniform_text(self.text, self.config, self.model, 0.5), None)
            probes.append(half)
        # the probes' measured peaks fit the model's free terms: run dirs, or with --dryrun the DryRun
        # records (memory.calibrate takes both)
        usable = [p.record for p in probes if p.record and p.exit_code == 0] if self.dryrun else \
            [p.run_dir for p in probes if p.run_dir and p.exit_code == 0 and p.peak]
        cal = memory_api.calibrate(usable, self.model, self.config) if usable else None
        rows = memory_api.residuals(cal) if cal is not None else []
        from ..memory.model import NO_CALIBRATION

        margin, why = plan_margin(cal if cal is not None else NO_CALIBRATION, self.margin_arg, self.model)
        resolution = self._resolution(cal)
        frag = getattr(cal, "fragmentation", 1.0) if self.device.lower() == "ascend" else 1.0
        self.say(f"swapwatch tune: calibrated on {len(usable)} probe(s); margin {margin:.1%} ({why}); "
                 f"resolution {fmt_size(resolution)}")
        lo: Optional[int] = None             # largest target whose plan measured within the budget
        hi: Optional[int] = None             # smallest target whose plan failed
        target = int(self.budget * (1.0 - margin))
        reason = f"--max-runs {self.max_runs} reached"
        for _ in range(64):                   # plans are cheap; a plan already measured is not re-run
            if self.runs >= self.max_runs:
                break
            res = memory_api.plan(self.config, int(target / frag), calibration=cal, margin=0.0, model=self.model)
            if not res.fits:
                lo = target                  # nothing cheaper than the probes under it: look higher
                nxt = self._next(lo, hi, target, None)
                if nxt is None:
                    reason = "the model finds no strategy below the budget other than the probes"
                    break
                target = nxt
                continue
            a = self.attempt("plan", f"plan @ {fmt_bytes(target, MIB_UNIT, digits=1)}", res.text, cal, target)
            if a.fits(self.budget):
                lo = target if lo is None else max(lo, target)
                if self.budget - (a.peak or 0) <= resolution:
                    reason = f"measured peak within {fmt_size(resolution)} (the resolution) of the budget"
                    break
            elif a.oom or (a.peak is not None and a.peak > self.budget):
                hi = target if hi is None else min(hi, target)
            else:
                reason = f"attempt {a.n} failed without an OOM ({a.outcome(self.budget)}): stopped, see {a.run_dir}"
                break
            nxt = self._next(lo, hi, target, a.peak if a.fits(self.budget) else None)
            if nxt is None or (lo is not None and hi is not None and hi - lo < resolution):
                reason = "the target interval is under the resolution"
                break
            target = nxt
        return self._finish(self._best(), reason, resolution, margin, why, rows)

    def _next(self, lo: Optional[int], hi: Optional[int], target: int, peak: Optional[int]) -> Optional[int]:
        """The next target: halfway into the open interval; with no failure yet, step up by the
        measured slack (a secant step: the calibrated model is close, so this is most often the
        last run); None when the interval has closed."""
        if hi is not None:
            base = lo if lo is not None else (self.full_peak() or 0)
            nxt = (base + hi) // 2
        elif peak is not None:
            nxt = target + max(self.budget - peak, 1 * MiB)
        else:
            nxt = target + max((self.budget - target) // 2, 1 * MiB)
        if nxt == target or (hi is not None and hi - nxt < MiB) or (lo is not None and nxt <= lo):
            return None
        if nxt > 2 * self.budget:
            return None
        return nxt

    def full_peak(self) -> Optional[int]:
        p = next((a for a in self.attempts if a.label == FULL), None)
        return p.peak if p else None

    def _resolution(self, cal: Any) -> int:
        """max(1 MiB, the smallest per-layer step of the model's levels on this config)."""
        try:
            from ..memory.model import memory_family, plan_of
            from ..memory.search import chains

            _, plan, spec = plan_of(self.config, self.model)
            fam = memory_family(spec, plan)
            steps = [abs(c[i].cost.kept - c[i + 1].cost.kept) for c in chains(fam) for i in range(len(c) - 1)]
            step = min((s for s in steps if s > 0), default=MiB)
            return max(MiB, int(step * getattr(cal, "scale", 1.0)))
        except (InputError, KeyError):          # the PyNative path has no static levels: 1 MiB
            return MiB

    def _best(self) -> Optional[Attempt]:
        """Among the attempts measured within the budget with verify PASS: the cheapest in
        recomputed FLOPs (the model's cost, deterministic), unless another was measurably faster
        (its median step time plus spread below this one's median less spread: a difference
        outside the noise of a few steps on shared cores). With fewer than 4 steps after the warm-up
        an attempt has no spread to compare (``spread_ms`` is 0 there): no speed can overrule the
        cost then (with ``--steps 4`` the full-recompute probe won on one step's noise)."""
        ok = sorted((a for a in self.attempts if a.fits(self.budget)),
                    key=lambda a: (a.recompute_flops, a.median_ms or float("inf")))
        if not ok:
            return None

        def measured(a: Attempt) -> bool:
            return len(a.step_ms[WARMUP_STEPS:]) >= 4

        best = ok[0]
        for a in ok[1:]:
            if a.median_ms and best.median_ms and measured(a) and measured(best) and \
                    a.median_ms + (a.spread_ms or 0) < best.median_ms - (best.spread_ms or 0):
                best = a
        return best

    def _nothing_fits(self, full: Attempt) -> TuneResult:
        from ..memory.planner import fmt_size

        why = full.oom or (f"measured {fmt_size(full.peak)}" if full.peak else full.outcome(self.budget))
        reason = f"full recompute does not fit the budget ({why}): no recompute strategy can"
        levers: List[str] = []
        try:
            res = memory_api.plan(self.config, max(1, self.budget), margin=0.0, model=self.model)
            levers = list(getattr(res, "levers", []) or [])
        except InputError:
            pass
        return self._finish(None, reason, MiB, 0.0, "", [], levers)

    def _finish(self, best: Optional[Attempt], reason: str, resolution: int, margin: float, why: str,
                rows: List[Dict[str, Any]], levers: Sequence[str] = ()) -> TuneResult:
        final_yaml = None
        if best is not None:
            text = Path(best.strategy_yaml).read_text(encoding="utf-8")
            from ..outputs import write_text

            write_text(str(self.final_path), text, True)       # tune's own file, inside its directory
            final_yaml = str(self.final_path)
        res = self._result(best, reason, resolution, margin, why, rows, final_yaml, list(levers))
        self._save({"result": {k: v for k, v in res.to_json().items() if k != "attempts"}})
        from .report import write_report

        write_report(res, self.dir)
        return res

    def _result(self, best, reason, resolution, margin, why, rows=(), final_yaml=None, levers=()) -> TuneResult:
        return TuneResult(config=self.config, budget=self.budget, directory=str(self.dir), attempts=list(self.attempts),
                          final=best, final_yaml=final_yaml, stop_reason=reason, resolution=resolution, margin=margin,
                          margin_why=why, calibration=list(rows), levers=list(levers))


def strategy_summary(config: str, model: Optional[str]) -> List[str]:
    """Per stage, the layers of each choice: ``stage 0: 0-1 full, 2-3 select:feed_forward``."""
    from ..text import ranges

    rows = memory_api.strategy_rows(config, model)
    out = []
    for stage in sorted({r["stage"] for r in rows}):
        groups: Dict[str, List[int]] = {}
        for row in rows:
            if row["stage"] == stage:
                groups.setdefault(row["choice"], []).append(row["layer"])
        out.append(f"stage {stage}: " + ", ".join(f"{ranges(ls)} {c}" for c, ls in groups.items()))
    return out


def tune(config: str, budget: int, command: Sequence[str], **kw: Any) -> TuneResult:
    """Library entry point of ``swapwatch tune`` (see the module docstring)."""
    return Tuner(config, budget, command, **kw).tune()


def write_dryrun_record(yaml_path: str, res: Any) -> str:
    """``<attempt>.dryrun.json`` beside the attempt's YAML, in the DryRun corpus format
    (``fixtures/dryrun/cases/<name>.json``: the YAML's name, DryRun L1's used / actual peak per stage
    in MiB), so the probes calibrate the model as recorded cases do (``memory.calibrate.dryrun_case``)."""
    stem = os.path.splitext(yaml_path)[0]
    path = stem + ".dryrun.json"
    doc = {"yaml": os.path.basename(yaml_path), "rank_size": getattr(res, "rank_size", None),
           "stages": [{"stage": int(k), "rank_id": sp.rank_id, "used_peak_mib": int(sp.used_bytes) >> 20,
                       "actual_peak_mib": int(sp.actual_bytes) >> 20, "seconds": sp.seconds}
                      for k, sp in sorted(res.stages.items())]}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    return path
