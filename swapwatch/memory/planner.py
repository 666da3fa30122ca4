"""``swapwatch plan``: the cheapest strategy whose predicted peak fits a budget, as a YAML.

Steps: read the config and sizes, calibrate on the given runs, solve every stage
(:mod:`swapwatch.memory.search`), write the strategy into a copy of the YAML
(:mod:`swapwatch.memory.emit`), and then read that copy back through the same engine as
``explain`` (``swapwatch.strategy.plan``) and estimate it: what ``plan`` reports is what the
written YAML does, and a disagreement with the search is a bug (exit 3), not a guess.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError
from ..families import DEFAULT_FAMILY
from ..text import fmt_size
from .calibrate import calibrate
from .model import NO_CALIBRATION, Calibration, Estimate, estimate, not_in_dryrun, plan_of, planning_family
from .search import StagePlan, SwapOffer, kinds_of, lowest_peak, solve_stage

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?|)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}


def parse_size(text: str, flag: str = "--budget") -> int:
    """``58GiB`` / ``45MB`` / ``62914560`` -> bytes. KiB/MiB/GiB and the bare K/M/G that MindSpore
    prints are powers of 2; KB/MB/GB are powers of 10 (docs/units.md).

    A budget under 1 MiB is refused rather than planned: no training step fits in it, so it is a
    forgotten unit (``--budget 58``) or a unit one step too small (``58K``), and the message names
    the size that was probably meant instead of answering ``no strategy fits 0.0 MiB``."""
    m = _SIZE.match(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise InputError(f"{flag}: {text!r} is not a size (e.g. 58GiB, 45MB, 62914560)")
    number, unit = m.group(1), m.group(2)
    value = int(Fraction(number) * _UNITS[unit.upper()])     # exact: a float overflows
    if Fraction(number) <= 0:
        raise InputError(f"{flag}: {text!r} must be more than 0 bytes")
    if value >= 1 << 63:
        raise InputError(f"{flag}: {text[:40]!r} is more than any device holds (2**63 bytes)")
    if value < 1 << 20:
        meant = _meant(number, unit)
        what = "has no unit, so it is" if not unit else "is"
        raise InputError(f"{flag} {text.strip()} {what} {value:,} byte(s), less than 1 MiB: "
                         f"did you mean {flag} {meant}?")
    return value


def _meant(number: str, unit: str) -> str:
    """The budget a too-small one most likely stood for: a bare number (or bytes) below 1024 in GiB,
    the unit a device's memory is counted in, a larger one in MiB (MindSpore's ``M``); a K or M
    size the same number one unit up, in GiB (GB, G)."""
    if not unit or unit.upper() == "B":
        return f"{number}GiB" if float(number) < 1024 else f"{number}MiB"
    return number + "G" + unit[1:]


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
    family: str = DEFAULT_FAMILY             # the memory model's tensor table
    margin: float = 0.0                      # fraction of the budget held back (see plan_margin)
    margin_why: str = ""
    notes: List[str] = field(default_factory=list)    # what the written YAML dropped, and why
    levers: List[str] = field(default_factory=list)   # when nothing fits: what would
    #: per rank, what ``peak_bytes`` (like DryRun L1, the allocator's peak) leaves out and the model
    #: estimates on its own (``model.not_in_dryrun``: HCCL's communication buffers; kernel workspaces
    #: are not estimated). The search fits ``peak + not_in_peak`` to :attr:`target` (issue 27 pt 3).
    not_in_peak: int = 0

    @property
    def target(self) -> int:
        """What every stage's predicted peak plus :attr:`not_in_peak` must fit: the budget less the margin."""
        return int(self.budget * (1.0 - self.margin))

    @property
    def peak_target(self) -> int:
        """What the search fits every stage's predicted peak (``peak_bytes``) into: the target less
        what the peak leaves out (the communication buffers)."""
        return self.target - self.not_in_peak

    def _within(self) -> str:
        """What must fit the target: the peak alone, or the peak and the buffers it leaves out."""
        return "predicted peak" if not self.not_in_peak else \
            f"predicted peak + {fmt_size(self.not_in_peak)} of HCCL buffers (not in the peak)"

    @property
    def exit_code(self) -> int:
        return 0 if self.fits else 1

    @property
    def planned(self) -> Estimate:
        """The planned YAML estimated back: there whenever a YAML was written (a fitting plan)."""
        if self.estimate is None:
            raise AssertionError("a plan without its written YAML's estimate")
        return self.estimate

    def margin_line(self) -> str:
        """Says what the search aimed at, when a margin holds part of the budget back."""
        if not self.margin:
            return ""
        return (f"planned to {fmt_size(self.target)}: the budget {fmt_size(self.budget)} less a "
                f"{self.margin:.0%} margin ({self.margin_why}; --margin sets it)")

    def message(self) -> str:
        if self.fits:
            return f"fits: every stage's {self._within()} is within {fmt_size(self.target)}" + \
                (f" ({fmt_size(self.budget)} less the {self.margin:.0%} margin)" if self.margin else "")
        bad = {s.stage: self.lowest[s.stage] for s in self.stages if not s.fits}
        worst = max(bad, key=lambda k: bad[k])
        need = max(self.lowest.values()) + self.not_in_peak
        levers = "; ".join(self.levers) if self.levers else "fewer layers / a smaller micro-batch per stage"
        plus = f" + {fmt_size(self.not_in_peak)} of HCCL buffers (not in the peak)" if self.not_in_peak else ""
        return (f"no strategy fits {fmt_size(self.target)}: stage(s) {', '.join(map(str, sorted(bad)))} "
                f"cannot get below {fmt_size(bad[worst])}{plus} (stage {worst}, the most the model can drop "
                f"with full recompute or the select sets); it would take a target of at least "
                f"{fmt_size(need)} ({need} bytes). What would fit: {levers}")

    def to_json(self) -> Dict[str, Any]:
        if self.estimate is not None:
            out = self.estimate.to_json()
        else:
            out = {"config": self.config, "family": self.family, "stages": [
                {"stage": s.stage, "lowest_peak_bytes": self.lowest.get(s.stage), "fits": s.fits}
                for s in self.stages], "layers": []}
        out["budget_bytes"] = self.budget
        out["fits"] = self.fits
        # additions (issue 24): the margin the search held back, what it aimed at, what the
        # written YAML dropped (notes), and when nothing fits what would (levers)
        out["margin"] = round(self.margin, 4)
        out["target_bytes"] = self.target
        out["notes"] = list(self.notes)
        # additions (issue 27 pt 3): what the peak leaves out, per rank, and per stage the sum that
        # was fitted to target_bytes (peak_bytes + not_in_peak_bytes)
        out["not_in_peak_bytes"] = self.not_in_peak
        out["peak_target_bytes"] = self.peak_target
        for st in out["stages"]:
            peak = st.get("peak_bytes", st.get("lowest_peak_bytes"))
            st["not_in_peak_bytes"] = self.not_in_peak
            st["total_bytes"] = None if peak is None else peak + self.not_in_peak
        if not self.fits:
            out["lowest_peak_bytes"] = max(self.lowest.values())
            out["levers"] = list(self.levers)
        out["recompute_flops"] = sum(s.flops for s in self.stages)
        # addition (issue 35): the search's objective, seconds per step (recompute at the device's
        # throughput, swap's exposed transfer; memory/search.py Price)
        out["time_cost_seconds"] = sum(s.seconds for s in self.stages)
        return out


#: The margin on an uncalibrated model: its tensor counts miss what no table shows (allocator
#: rounding, workspaces, communication buffers); on unseen strategies and shapes the estimate issue
#: measured misses of 12-43 % (docs/tune.md). 10 % keeps a plan from filling a budget to the last
#: MiB on counts alone (57.98 of 58 GiB before) without giving up most of the headroom.
UNCALIBRATED_MARGIN = 0.10


def plan_margin(cal: Calibration, margin: Optional[float] = None, model: Optional[str] = None) -> Tuple[float, str]:
    """(fraction of the budget held back, why). ``--margin`` wins; an uncalibrated model takes
    :data:`UNCALIBRATED_MARGIN`; a calibrated one the largest relative miss of its calibration on
    what it measured: its residuals, and with two runs or more each run predicted by the
    calibration fitted to the others alone (:func:`held_out_error`).

    Why not the residuals alone: the fit has two free terms (residual, activation scale), so through
    two points (``tune``'s none and full probes, one stage each) it is exact and every residual is
    0 by construction: a margin of 0 that says nothing about a strategy it was not fitted on. Left
    out in turn, each run is a point the fit did not see. When a refit has fewer free terms
    (``Calibration.free_terms``: a device run alone fits the residual only, a CPU pool run one scale
    instead of two), it is a weaker model than the one planned with: its miss then counts up to
    :data:`UNCALIBRATED_MARGIN` (a calibrated model is not held to less trust than none). One
    run that makes the fit exact, nothing to leave out: the uncalibrated margin, said."""
    if margin is not None:
        if not 0.0 <= margin < 1.0:
            raise InputError(f"--margin: {margin} must be a fraction in [0, 1) (e.g. 0.05)")
        return margin, "--margin"
    if not cal.fitted:
        return UNCALIBRATED_MARGIN, "the model is uncalibrated: tensor counts alone"
    errs = [abs(r["residual_bytes"]) / r["measured_bytes"] for r in cal.runs if r.get("measured_bytes")]
    worst = max(errs, default=0.0)
    held = held_out_error(cal, model)
    if held is not None:
        miss, weaker = held
        m = max(worst, miss)
        runs = len({r["run"] for r in cal.runs})
        why = (f"the calibration's largest miss, {m:.1%} of a measured peak: each of its {runs} runs predicted "
               f"from the others (residuals {worst:.1%})")
        if weaker and m > UNCALIBRATED_MARGIN:
            return UNCALIBRATED_MARGIN, (f"each of the calibration's {runs} runs predicted from the others misses "
                                         f"by up to {m:.1%}, but a refit from fewer runs fits fewer terms: "
                                         f"held at the uncalibrated margin")
        return m, why
    if len(errs) <= (2 if cal.scale != 1.0 else 1):
        return UNCALIBRATED_MARGIN, (f"one calibration run, {len(errs)} point(s): the fit is exact, nothing "
                                     f"measures its error, so the uncalibrated margin")
    return worst, f"the calibration's largest residual, {worst:.1%} of a measured peak"


def held_out_error(cal: Calibration, model: Optional[str] = None) -> Optional[Tuple[float, bool]]:
    """Leave one run out: fit the calibration to the other runs (``calibrate``), predict the run's
    stages (``estimate`` of its config): (the largest relative miss, whether a refit had fewer free
    terms than ``cal``: one point, residual only). None with fewer than two runs."""
    runs = sorted({r["run"] for r in cal.runs})
    if len(runs) < 2:
        return None
    worst, weaker = 0.0, False
    for rd in runs:
        sub, _ = calibrate([x for x in runs if x != rd], model)
        weaker = weaker or sub.free_terms() < cal.free_terms()
        rows = [r for r in cal.runs if r["run"] == rd and r.get("measured_bytes")]
        if not rows:
            continue
        peaks = {st.stage: st.peak(sub) for st in estimate(rows[0]["config"], model, sub).stages}
        for r in rows:
            worst = max(worst, abs(peaks[r["stage"]] - r["measured_bytes"]) / r["measured_bytes"])
    return worst, weaker


def make_plan(config: str, budget: int, run_dirs: Sequence[str] = (), allow_swap: bool = False,
              model: Optional[str] = None, margin: Optional[float] = 0.0,
              calibration: Optional[Calibration] = None, link: Optional[Any] = None) -> PlanResult:
    """``model``: the ``--model`` family; default the one the YAML names (as ``explain``).
    ``margin``: the fraction of ``budget`` held back; None: :func:`plan_margin`'s default (what
    ``swapwatch plan`` uses; the library's 0.0 keeps the search exact for callers that set the
    target themselves); ``calibration``:
    an already fitted calibration (``tune``), instead of fitting ``run_dirs``; ``link``: the host
    link and throughput swaps are priced with (``swap_cost.Link``; default the 910B's, assumed)."""
    cfg, plan, spec = plan_of(config, model)
    target = str((cfg.context or {}).get("device_target", "Ascend"))
    if allow_swap and target.lower() != "ascend":
        raise InputError(f"--allow-swap: swap only moves memory on Ascend, and context.device_target is {target}",
                         file=config)
    geo = plan.geometry
    # a family whose layers differ by kind (DeepSeek-V3: dense, MoE, MTP): its levels are the most
    # demanding kind's select sets (memory.model.planning_family), each layer priced on its own kind
    # and the MTP layer on its own (memory.search.Kinds); the written YAML is then estimated and the
    # search target tightened by any overshoot (the interleaved / swap searches price every layer
    # as the heaviest kind)
    fam = planning_family(spec, plan)
    kinds = kinds_of(spec, plan)
    cal = calibration if calibration is not None else (calibrate(run_dirs, model)[0] if run_dirs else NO_CALIBRATION)
    frac, why = plan_margin(cal, margin, model)
    # what DryRun L1 and so peak_bytes leave out (HCCL buffers) is fitted too: peak + buffers <= target.
    # HCCL is Ascend's collective library: a CPU / GPU job has none of them (ModelSpec.hccl)
    extra = int(not_in_dryrun(spec)["communication_buffers_bytes"])
    result = PlanResult(config=config, budget=budget, fits=False, stages=[], calibration=cal, family=fam.name,
                        margin=frac, margin_why=why, not_in_peak=extra)
    goal = search = result.peak_target
    from ..config import read_config_text       # once: a config given as a pipe was read already
    from .emit import emit_result

    text = read_config_text(config)
    from .search import DEFAULT_DEVICE, Device, Rooms
    from .swap_cost import make_link

    priced = link if link is not None else make_link()
    link = priced
    # with swap: the swap levels priced with the link (memory/swap_cost.py), recompute at its throughput,
    # and per stage the host memory of a rank (a node's over its ranks) a capacity the search keeps to
    swap: Any = SwapOffer(priced) if allow_swap else False
    device = Device(flops_per_s=priced.flops, host_bytes_per_s=priced.h2d, link=priced) if allow_swap \
        else DEFAULT_DEVICE
    host_room = priced.host_memory / priced.ranks_per_node if allow_swap and priced.host_memory else math.inf
    rooms = Rooms(host=host_room)
    for _ in range(8):
        stages = [solve_stage(spec, fam, geo, p, cal, search, swap, kinds, device, rooms)
                  for p in range(geo.pipeline_stage)]
        result.stages = stages
        result.fits = all(s.fits for s in stages)
        if not result.fits:
            result.lowest = {p: lowest_peak(spec, fam, geo, p, cal, swap, kinds)
                             for p in range(geo.pipeline_stage)}
            result.levers = levers(config, cfg, spec, fam, geo, cal, goal, result.lowest, swap, target, model,
                                   kinds, link)
            return result
        written = emit_result(text, config, geo, stages, plan_of_text=lambda t: _plan_of_text(t, model, config))
        result.text = written.text
        result.notes = written.notes
        result.estimate = estimate_text(result.text, config, model, cal, link)
        result.estimate.budget_bytes = budget
        waiting = sorted(st for st, sw in result.estimate.swaps.items() if sw.exposed_seconds > 1e-9)
        if waiting:
            # each swap level hides with every layer of its chunk taking it; swaps of different levels
            # side by side can still queue on the link: said, with the waits in the table (docs/plan.md)
            result.notes.append(f"swap: the copies of stage(s) {', '.join(map(str, waiting))} wait a little where "
                                f"different swaps sit side by side (the table's waits column)")
        over = max(st.peak(cal) for st in result.estimate.stages) - goal
        if over <= 0:
            break
        search -= over + goal // 256     # at least 0.4 % a round: a few rounds at most
    else:
        # still over the target after the rounds: never hand back a YAML as fitting that does not
        result.fits = False
        result.lowest = {p: lowest_peak(spec, fam, geo, p, cal, swap, kinds) for p in range(geo.pipeline_stage)}
        return result
    _check_round_trip(result)
    return result


def _plan_of_text(text: str, model: Optional[str], config: str = "<string>"):
    """The Plan of a YAML given as text (the engine explain uses), read from the text."""
    return plan_of(config, model, text)[1]


def levers(config: str, cfg: Any, spec, fam, geo, cal: Calibration, goal: int, lowest: Dict[int, int],
           allow_swap: Any, device: str, model: Optional[str], kinds=None, link: Optional[Any] = None) -> List[str]:
    """When no recompute strategy fits: the other levers that would, each checked on the model
    (not a list of generic tips). Tried: the parallel optimizer (weights and optimizer states
    sharded over data parallel), ``offset`` moving layers off a stage that cannot fit to a stage
    with room (each candidate offset written into a copy and re-planned through the engine, so
    MindFormers' geometry decides where layers land), and layer swap on Ascend."""
    import dataclasses

    out: List[str] = []
    P = geo.pipeline_stage
    if not spec.optimizer_shard and spec.dp > 1:
        sharded = dataclasses.replace(spec, optimizer_shard=True)
        low = {p: lowest_peak(sharded, fam, geo, p, cal, allow_swap, kinds) for p in range(P)}
        if max(low.values()) <= goal:
            out.append(f"the parallel optimizer (parallel.enable_parallel_optimizer: True shards weights and "
                       f"optimizer states over the {spec.dp} data-parallel ranks): lowest peak "
                       f"{fmt_size(max(low.values()))}")
    bad = [p for p in range(P) if lowest[p] > goal]
    room = [q for q in range(P) if lowest[q] <= goal]
    if P > 1 and geo.pp_interleave_num == 1 and bad and room:
        found = _offset_lever(config, cfg, geo, cal, goal, bad, model, allow_swap)
        if found:
            out.append(found)
    if device.lower() == "ascend" and not allow_swap:
        low = {p: lowest_peak(spec, fam, geo, p, cal, link if link is not None else True, kinds) for p in range(P)}
        if max(low.values()) <= goal:
            out.append(f"swap to host where its copies hide (--allow-swap): lowest peak {fmt_size(max(low.values()))}")
    if not out:
        out.append("none of offset, the parallel optimizer or swap gets every stage under it: fewer layers "
                   "or a smaller micro-batch per stage, or more pipeline stages")
    return out


def _offset_lever(config: str, cfg: Any, geo, cal: Calibration, goal: int, bad: List[int],
                  model: Optional[str], allow_swap: bool) -> str:
    """Move 1..4 layers from the worst stage to each other stage (``parallel_config.offset``)
    and re-plan the copy: the first offset under which every stage's lowest peak fits."""
    from ..config import read_config_text       # once: a config given as a pipe was read already
    from .emit import splice

    text = read_config_text(config)
    P = geo.pipeline_stage
    base = [int(x) for x in geo.offset[0]]
    worst = max(bad)
    for k in range(1, 5):
        for q in sorted(range(P), key=lambda q: abs(q - worst)):
            if q == worst:
                continue
            off = list(base)
            off[worst] -= k
            off[q] += k
            try:
                new = splice(text, config, [(("model", "model_config", "offset"), off)])
                _, p2, spec2 = plan_of(config, model, new)
                fam2 = planning_family(spec2, p2)
                kinds2 = kinds_of(spec2, p2)
                low = [lowest_peak(spec2, fam2, p2.geometry, p, cal, allow_swap, kinds2) for p in range(P)]
            except (InputError, ValueError):     # an offset MindFormers' geometry refuses: not a lever
                continue
            if max(low) <= goal:
                return (f"model.model_config.offset: {off} (moves {k} layer{'s' if k > 1 else ''} off "
                        f"stage {worst}, which cannot get under it, to stage {q}): lowest peak {fmt_size(max(low))}")
    return ""


def estimate_text(text: str, config: str, model: Optional[str], cal: Calibration,
                  link: Optional[Any] = None) -> Estimate:
    """Estimate a YAML given as text (the planned copy), through the same engine as ``explain``."""
    est = estimate(config, model, cal, text, link)
    est.config = config
    return est


def _check_round_trip(result: PlanResult) -> None:
    """The written YAML must do what the search chose, layer for layer (else a bug of ours)."""
    est = result.planned
    chosen = {i: lv for s in result.stages for i, lv in s.levels.items()}
    for lp, row in zip(est.plan.layers, est.layers):
        lv = chosen[lp.layer]
        got = (lp.full_recompute, frozenset(() if lp.full_recompute else lp.select_recompute), lp.layer_swap,
               frozenset((lp.op_swap or {}).items()))
        if got != (lv.full, frozenset(lv.patterns), lv.swap, frozenset(lv.op_swap)):
            raise AssertionError(f"planned YAML gives layer {lp.layer} {row['choice']!r}, search chose {lv.label!r}")
    for st in est.stages:
        if st.peak(result.calibration) + result.not_in_peak > result.budget:
            raise AssertionError(f"planned YAML predicts {st.peak(result.calibration)} bytes on stage {st.stage} "
                                 f"and {result.not_in_peak} outside the peak, over the budget {result.budget}")
