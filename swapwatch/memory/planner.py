"""``swapwatch plan``: the cheapest strategy whose predicted peak fits a budget, as a YAML.

Steps: read the config and sizes, calibrate on the given runs, solve every stage
(:mod:`swapwatch.memory.search`), write the strategy into a copy of the YAML
(:mod:`swapwatch.memory.emit`), and then read that copy back through the same engine as
``explain`` (``swapwatch.engine.strategy.plan``) and estimate it: what ``plan`` reports is what the
written YAML does, and a disagreement with the search is a bug (exit 3), not a guess.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError
from ..model.families import DEFAULT_FAMILY
from ..text import fmt_size
from .calibrate import calibrate
from .keys import classify as classify_keys, context as key_context
from .model import NO_CALIBRATION, Calibration, Estimate, estimate, not_in_dryrun, plan_of, planning_family
from .budget import (Card, Margin, card_check, fragments_for, model_errors, parse_size,  # noqa: F401
                     table_error, workspace_bound)
from .offsets import Split, head_seconds, layer_seconds, search_split, stage_geometry, stage_tables, step_seconds
from .search import (DEFAULT_DEVICE, NO_ROOMS, Device, Rooms, StagePlan, SwapOffer, kinds_of, lowest_peak,
                     own_select_sets, solve_stage, stage_shape, stage_terms)

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
    margin: float = 0.0                      # fraction of the budget held back at the tightest stage
    margin_why: str = ""
    notes: List[str] = field(default_factory=list)    # what the written YAML dropped, and why
    levers: List[str] = field(default_factory=list)   # when nothing fits: what would
    #: per rank, what ``peak_bytes`` (like DryRun L1, the allocator's peak) leaves out and the model
    #: estimates on its own: HCCL's communication buffers, outside MindSpore's pool (memory/budget.py:
    #: the card check counts them, the pool check does not)
    not_in_peak: int = 0
    #: the pool check's parts (memory/budget.py); None: the library's flat ``margin``
    parts: Optional[Margin] = None
    #: stage -> the highest predicted peak the pool check allows there
    caps: Dict[int, int] = field(default_factory=dict)
    #: stage -> its static bytes (what fragments are not counted on)
    statics: Dict[int, int] = field(default_factory=dict)
    card: Optional[Card] = None
    #: where the budget came from: ``--budget`` or ``context.max_device_memory``
    budget_source: str = "--budget"
    #: the YAML's own strategy is the answer (issue 35 point 3): ``unchanged`` when its text is handed
    #: back byte for byte, else with its select patterns that reach nothing dropped (SW104: the same
    #: memory, without the silent no-op)
    own_answer: bool = False
    unchanged: bool = False
    #: the YAML's own strategy as a candidate: {fits, time_cost_seconds, recompute_flops, errors, dryrun_stages}
    own: Dict[str, Any] = field(default_factory=dict)
    #: stage -> DryRun's actual peak of this very YAML (a ``--calibrate`` source that ran its text)
    measured_actual: Dict[int, int] = field(default_factory=dict)
    #: the modelled 1F1B step time of the answer, seconds (memory/offsets.py)
    step: float = 0.0
    #: the layer split of the answer (the YAML's, or the one the split search wrote as offset)
    geometry: Any = None

    @property
    def target(self) -> int:
        """The highest predicted peak any stage may reach (the tightest stage's cap)."""
        return min(self.caps.values()) if self.caps else int(self.budget * (1.0 - self.margin))

    @property
    def peak_target(self) -> int:
        """What the search fits the tightest stage's predicted peak (``peak_bytes``) into."""
        return self.target

    def need(self, stage: int, peak: int, own: bool = False) -> int:
        """What MindSpore's pool must hold on ``stage`` for a predicted ``peak`` (memory/budget.py);
        for the YAML's own strategy (``own``, or handed back unchanged) on a stage DryRun ran, its
        actual peak and the workspaces."""
        if (own or self.own_answer) and stage in self.measured_actual:
            a = self.measured_actual[stage]
            return a + (self.parts.parts(a, a)["workspace_bytes"] if self.parts is not None else 0)
        if self.parts is None:
            return peak
        return self.parts.need(peak, self.statics.get(stage, 0))

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
        """What the pool check holds back besides the peak (or the flat --margin)."""
        if self.parts is not None:
            return self.parts.line()
        if not self.margin:
            return ""
        return (f"planned to {fmt_size(self.target)}: the budget {fmt_size(self.budget)} less a "
                f"{self.margin:.0%} margin ({self.margin_why}; --margin sets it)")

    def message(self) -> str:
        what = "pool need (predicted peak + the margin's parts)" if self.parts is not None else "predicted peak"
        if self.fits:
            head = f"fits: every stage's {what} is within {fmt_size(self.budget)}"
            if self.parts is None and self.margin:
                head = (f"fits: every stage's predicted peak is within {fmt_size(self.target)} "
                        f"({fmt_size(self.budget)} less the {self.margin:.0%} margin)")
            if self.own_answer:
                head += ("; the YAML's own strategy, " + ("unchanged" if self.unchanged else
                                                          "its patterns that match nothing dropped")
                         + ": nothing cheaper fits")
            return head
        bad = {s.stage: self.lowest[s.stage] for s in self.stages if not s.fits}
        worst = max(bad, key=lambda k: self.need(k, bad[k]))
        need = max(self.need(k, v) for k, v in self.lowest.items())
        levers = "; ".join(self.levers) if self.levers else "fewer layers / a smaller micro-batch per stage"
        plus = f" (pool need {fmt_size(self.need(worst, bad[worst]))})" if self.parts is not None else ""
        return (f"no strategy fits {fmt_size(self.budget)}: stage(s) {', '.join(map(str, sorted(bad)))} "
                f"cannot get below {fmt_size(bad[worst])}{plus} (stage {worst}, the most the model can drop "
                f"with full recompute or the select sets); it would take a budget of at least "
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
        # additions (issue 27 pt 3), semantics of issue 35: HCCL's buffers are outside MindSpore's
        # pool (reported, in the card check, not fitted); total_bytes is what each stage's pool must
        # hold, the sum fitted to the budget
        out["not_in_peak_bytes"] = self.not_in_peak
        out["peak_target_bytes"] = self.peak_target
        for st in out["stages"]:
            peak = st.get("peak_bytes", st.get("lowest_peak_bytes"))
            st["not_in_peak_bytes"] = self.not_in_peak
            st["total_bytes"] = None if peak is None else self.need(st["stage"], peak)
            # additions (issue 35): the pool check per stage, its parts, the cap the search used
            if self.parts is not None and peak is not None:
                st["margin_bytes"] = self.parts.parts(peak, self.statics.get(st["stage"], 0))
                if self.own_answer and st["stage"] in self.measured_actual:
                    # checked with DryRun's actual peak of this very YAML: only the workspaces added
                    a = self.measured_actual[st["stage"]]
                    st["dryrun_actual_bytes"] = a
                    st["margin_bytes"] = {"model_error_bytes": 0, "fragments_bytes": 0,
                                          "workspace_bytes": self.need(st["stage"], peak) - a}
            st["pool_bytes"] = st["total_bytes"]
            st["peak_cap_bytes"] = self.caps.get(st["stage"])
        if not self.fits:
            out["lowest_peak_bytes"] = max(self.lowest.values())
            out["levers"] = list(self.levers)
        out["recompute_flops"] = sum(s.flops for s in self.stages)
        # additions (issue 35): the search's objective, seconds per step (recompute at the device's
        # throughput, swap's exposed transfer; memory/search.py Price); the margin's parts; the card
        # check; where the budget came from; the YAML's own strategy as a candidate
        out["time_cost_seconds"] = sum(s.seconds for s in self.stages)
        out["margin_parts"] = self.parts.to_json() if self.parts is not None else {"flat_fraction": self.margin}
        out["card"] = self.card.to_json() if self.card is not None else None
        out["budget_source"] = self.budget_source
        out["unchanged"] = self.unchanged
        out["own_answer"] = self.own_answer
        out["own_strategy"] = dict(self.own)
        out["step_time_seconds"] = self.step
        if self.geometry is not None:
            out["layer_split"] = list(self.geometry.layer_list[0]) if self.geometry.pp_interleave_num == 1 \
                else [list(r) for r in self.geometry.layer_list]
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


def margin_parts(cfg: Any, table: str, family: str, cal: Calibration, model: Optional[str],
                 ascend: bool = True, level: Optional[str] = None) -> Margin:
    """The pool check's parts for this YAML (memory/budget.py): the model's error (with a
    calibration that measures its own miss, that miss; else the recorded DryRun error of the tensor
    table), the fragments MindSpore's pool may hold at the YAML's memory_optimize_level, and the
    kernel workspaces. ``level``: the ``memory_optimize_level`` the written YAML will have, when not
    the YAML's (a swap plan's O0)."""
    err, why = table_error(table, family, seqpipe=key_context(cfg.tree).seqpipe,
                           unmodelled=classify_keys(cfg.tree).unmodelled)
    if cal.fitted:
        frac, cwhy = plan_margin(cal, None, model)
        if not cwhy.startswith(("the model is uncalibrated", "one calibration run")):
            # a calibration measures the model on the strategies its runs used; the search may choose
            # others, where the table's recorded DryRun error still holds: Qwen2.5-14B 8k calibrated to
            # the maintainers' DryRun (0.5 % residual) planned select feed_forward on stage 0, which
            # DryRun held 2.7 % above the calibrated estimate (docs/plan.md). A table no DryRun case
            # covers has a guess there, not a measurement: the calibration replaces it.
            if err > frac and table in model_errors().get("tables", {}):
                why = (f"{cwhy}, but a changed strategy is held to the {table} tensor table's recorded "
                       f"{err:.1%} ({why})")
            else:
                err, why = frac, cwhy
    context = cfg.context or {}
    frag, fwhy = fragments_for(level or str(context.get("memory_optimize_level", "O0")), table,
                               seqpipe=key_context(cfg.tree).seqpipe)
    ws, wfrac, wwhy = workspace_bound() if ascend else (0, 0.0, "no kernel workspaces off Ascend (aclnn's)")
    return Margin(error=err, error_why=why, fragments=frag, fragments_why=fwhy, workspace=ws, workspace_why=wwhy,
                  workspace_fraction=wfrac)


def make_plan(config: str, budget: Optional[int], run_dirs: Sequence[str] = (), allow_swap: bool = False,
              model: Optional[str] = None, margin: Optional[float] = 0.0,
              calibration: Optional[Calibration] = None, offsets: bool = False,
              link: Optional[Any] = None) -> PlanResult:
    """The plan (:func:`search_plan`). With swap allowed and the pool check's parts (``margin`` None):
    a swap needs ``memory_optimize_level: O0`` (the plan writes it; SW301), MindSpore's dynamic pool,
    whose fragments the pool check counts where the YAML's O1 has none (memory/budget.py). So a plan
    with swaps is searched with O0's parts and one without swap with the YAML's level, and the faster
    (the modelled step time) is the answer, said in the notes."""
    run = functools.partial(search_plan, config, budget, run_dirs, model=model, margin=margin,
                            calibration=calibration, offsets=offsets, link=link)
    if not allow_swap or margin is not None:
        return run(allow_swap=allow_swap)
    swapped = run(allow_swap=True, level="O0")
    level = str((plan_of(config, model)[0].context or {}).get("memory_optimize_level", "O0")).upper()
    if level != "O1":
        return swapped                        # O0 already: the one search is the answer
    plain = run(allow_swap=False)
    swaps = swapped.fits and not swapped.own_answer and \
        any(lv.swaps for s in swapped.stages for lv in s.levels.values())
    if swaps and (not plain.fits or swapped.step < plain.step * (1 - 1e-9)):
        why = (f"still faster than the best plan without swap at O1 (modelled step {swapped.step:.4g} s against "
               f"{plain.step:.4g} s)" if plain.fits else "no plan without swap fits")
        swapped.notes.append("swap: written with memory_optimize_level O0 (swap needs it), so the pool check "
                             f"counts O0's fragments; {why}")
        return swapped
    if plain.fits:
        why = (f"its best plan (modelled step {swapped.step:.4g} s) is not faster than the one without swap "
               f"({plain.step:.4g} s)" if swaps else "no swap fits there")
        plain.notes.append("swap (--allow-swap): none written: a swap needs memory_optimize_level O0, whose "
                           f"fragments the pool check counts where O1 has none; {why}")
        return plain
    return swapped


def search_plan(config: str, budget: Optional[int], run_dirs: Sequence[str] = (), allow_swap: bool = False,
                model: Optional[str] = None, margin: Optional[float] = 0.0,
                calibration: Optional[Calibration] = None, offsets: bool = False,
                link: Optional[Any] = None, level: Optional[str] = None) -> PlanResult:
    """``model``: the ``--model`` family; default the one the YAML names (as ``explain``).
    ``budget``: MindSpore's pool per rank; None: the YAML's ``context.max_device_memory`` as
    MindSpore reads it. ``margin``: a flat fraction of ``budget`` held back instead of the pool
    check's parts; None: the parts (:func:`margin_parts`, what ``swapwatch plan`` uses; the library's
    0.0 fits the predicted peaks to the budget exactly, for callers that set the target themselves);
    ``calibration``: an already fitted calibration (``tune``), instead of fitting ``run_dirs``.

    The YAML's own strategy is a candidate: when it passes the same check and nothing the search
    finds is faster (the modelled step time), the YAML is handed back unchanged (issue 35 point 3).
    ``offsets``: search the layer split with the levels and write it as ``offset`` (memory/offsets.py;
    ``swapwatch plan`` does, ``--keep-offset`` does not); else the YAML's split is kept. ``link``: the
    host link and throughput swaps are priced with (``swap_cost.Link``; default the 910B's, assumed).
    ``level``: the ``memory_optimize_level`` the pool check's fragments are counted at, when not the
    YAML's (:func:`make_plan`)."""
    from .budget import max_device_memory
    from .swap_cost import make_link

    cfg, plan, spec = plan_of(config, model)
    target = str((cfg.context or {}).get("device_target", "Ascend"))
    if allow_swap and target.lower() != "ascend":
        raise InputError(f"--allow-swap: swap only moves memory on Ascend, and context.device_target is {target}",
                         file=config)
    from ..config import read_config_text       # once: a config given as a pipe was read already
    from .emit import emit_result, yaml_context

    text = read_config_text(config)
    context = yaml_context(text, config)        # the whole context section (max_device_memory)
    source = "--budget"
    if budget is None:
        budget = max_device_memory(context)
        if budget is None:
            raise InputError("no --budget, and the YAML sets no context.max_device_memory (e.g. \"58GB\") to "
                             "plan to", file=config, key="context.max_device_memory")
        source = "context.max_device_memory"
    if margin is not None and not 0.0 <= margin < 1.0:
        raise InputError(f"--margin: {margin} must be a fraction in [0, 1) (e.g. 0.05)")
    geo = plan.geometry
    # a family whose layers differ by kind (DeepSeek-V3: dense, MoE, MTP): its levels are the most
    # demanding kind's select sets (memory.model.planning_family), each layer priced on its own kind
    # and the MTP layer on its own (memory.search.Kinds)
    fam = planning_family(spec, plan)
    kinds = kinds_of(spec, plan)
    cal, actual = (calibration, {}) if calibration is not None else _calibration(run_dirs, model, config, text)
    parts = None if margin is not None else margin_parts(cfg, fam.table, plan.fam.name, cal, model, spec.hccl, level)
    # HCCL is Ascend's collective library: a CPU / GPU job has none of them (ModelSpec.hccl); its
    # buffers are outside MindSpore's pool: the card check, not the budget (memory/budget.py)
    extra = int(not_in_dryrun(spec)["communication_buffers_bytes"])
    result = PlanResult(config=config, budget=budget, fits=False, stages=[], calibration=cal, family=fam.name,
                        margin=margin or 0.0, margin_why="--margin" if margin else "", not_in_peak=extra,
                        parts=parts, budget_source=source, measured_actual=actual)
    if spec.hccl:
        result.card = card_check(context, budget, extra)
    P = geo.pipeline_stage

    priced = link if link is not None else make_link()
    link = priced
    # with swap: the swap levels priced with the link (memory/swap_cost.py), recompute at its throughput,
    # and per stage the host memory of a rank (a node's over its ranks) a capacity the search keeps to
    swap: Any = SwapOffer(priced) if allow_swap else False
    device = Device(flops_per_s=priced.flops, host_bytes_per_s=priced.h2d, link=priced) if allow_swap \
        else DEFAULT_DEVICE
    host_room = priced.host_memory / priced.ranks_per_node if allow_swap and priced.host_memory else math.inf
    rooms = Rooms(host=host_room)

    def cap_of(static: int) -> int:
        return parts.cap(budget, static) if parts is not None else int(budget * (1.0 - (margin or 0.0)))

    for p in range(P):
        result.statics[p] = stage_terms(spec, fam, geo, p, NO_CALIBRATION, kinds)[0]
        result.caps[p] = cap_of(result.statics[p])
    if parts is not None:
        result.margin = 1.0 - min(result.caps.values()) / budget
        result.margin_why = parts.line()
    own = _own_candidate(result, config, text, model, cal, spec, fam, kinds, cfg, plan, device, link)
    # the YAML's own select sets are levels of the search too (search.own_select_sets)
    sets = own_select_sets(fam, plan.layers)
    # the layer split is searched with the levels (memory/offsets.py) on one chunk per stage
    split_on = offsets and P > 1 and geo.pp_interleave_num == 1 and cfg.layer_list is None
    if offsets and P > 1 and not split_on:
        result.notes.append("the layer split (offset) is kept: an interleaved pipeline's offsets are not searched")
    tighten = [0] * P
    for _ in range(8):
        if split_on:
            found = _split_search(spec, fam, geo, cal, kinds, swap, cap_of, tighten, device, rooms, sets)
            stages = found.stages if found is not None else [StagePlan(stage=p, fits=False) for p in range(P)]
            used = found.geometry if found is not None else geo
        else:
            stages = [solve_stage(spec, fam, geo, p, cal, result.caps[p] - tighten[p], swap, kinds, device, rooms,
                                  own=sets) for p in range(P)]
            used = geo
        result.stages = stages
        result.fits = all(s.fits for s in stages)
        if not result.fits:
            if own is not None:
                return _hand_back(result, text, own, device)
            result.lowest = {p: lowest_peak(spec, fam, geo, p, cal, swap, kinds) for p in range(P)}
            result.levers = levers(config, cfg, spec, fam, geo, cal, result.caps, result.lowest, swap, target,
                                   model, kinds, link)
            return result
        for p in range(P):                     # the chosen split's static parts and caps
            result.statics[p] = stage_terms(spec, fam, used, p, NO_CALIBRATION, kinds)[0]
            result.caps[p] = cap_of(result.statics[p])
        result.step = step_seconds(stage_times(spec, fam, kinds, used, stages, device), spec.micro_batch_num)
        # the YAML's own strategy stands when nothing faster fits, and when the faster answer would
        # recompute more than it does (issue 35: "recomputes no more than the maintainers"): what a
        # recompute costs is certain, what a moved layer saves is the step model's pipeline balance,
        # which no measurement here has checked (Qwen2.5-14B 8k: 0.7 % faster by one layer moved off
        # the last stage, 102 % of their FLOPs)
        flops = sum(s.flops for s in stages)
        more = flops > result.own.get("recompute_flops", math.inf) * (1 + 1e-9)
        if own is not None and (own.step <= result.step * (1 + 1e-9) or more):
            faster = result.step
            back = _hand_back(result, text, own, device)
            if more and own.step > faster * (1 + 1e-9):
                back.notes.append(f"a faster plan (modelled step {faster:.4g} s against {own.step:.4g} s) recomputes "
                                  f"{flops / result.own['recompute_flops']:.0%} of the YAML's FLOPs: not offered "
                                  f"in its place (docs/plan.md)")
            return back
        written = emit_result(text, config, used, stages, plan_of_text=lambda t: _plan_of_text(t, model, config),
                              split=used is not geo)
        if own is not None and written.text == text:
            # the search wrote the YAML byte for byte: it is the YAML's own strategy (the two step
            # times can differ by the preset marks the search's none level leaves unpriced)
            return _hand_back(result, text, own, device)
        result.text = written.text
        result.notes = written.notes + [n for n in result.notes if n.startswith("the layer split")]
        unchecked = [p for p in result.own.get("over_stages", ()) if p not in result.measured_actual]
        if unchecked and own is None and result.parts is not None and result.own["step_time_seconds"] < result.step:
            # the margin's parts are bounds (memory/budget.py): a cheaper strategy they hold out may
            # still fit, which only MindSpore's own figure can tell (a flat --margin is the user's own
            # choice: nothing to say there)
            result.notes.append(
                f"the YAML's own strategy is faster (step {result.own['step_time_seconds']:.3g} s against "
                f"{result.step:.3g} s) but over the pool check on stage(s) {', '.join(map(str, unchecked))} "
                f"by the margin's bounds: DryRun it (`swapwatch estimate --dryrun`) and plan again with "
                f"--calibrate CONFIG=DRYRUN.log (the log it names), which checks those stages by MindSpore's "
                f"actual peak")
        loose = [s.stage for s in stages if not s.exact]
        if loose:
            result.notes.append(f"stage(s) {', '.join(map(str, loose))}: the search stopped at its work bound "
                                f"(capacities beside memory bind hard): the best found, not proven the least")
        result.estimate = estimate_text(result.text, config, model, cal, link)
        result.estimate.budget_bytes = budget
        result.geometry = used
        waiting = sorted(st for st, sw in result.estimate.swaps.items() if sw.exposed_seconds > 1e-9)
        if waiting:
            # each swap level hides with every layer of its chunk taking it; swaps of different levels
            # side by side can still queue on the link: said, with the waits in the table (docs/plan.md)
            result.notes.append(f"swap: the copies of stage(s) {', '.join(map(str, waiting))} wait a little where "
                                f"different swaps sit side by side (the table's waits column)")
        over = {st.stage: st.peak(cal) - result.caps[st.stage] for st in result.estimate.stages}
        if max(over.values()) <= 0:
            break
        for p, o in over.items():
            if o > 0:
                tighten[p] += o + result.caps[p] // 256    # at least 0.4 % a round: a few rounds at most
    else:
        # still over the target after the rounds: never hand back a YAML as fitting that does not
        result.fits = False
        result.lowest = {p: lowest_peak(spec, fam, geo, p, cal, swap, kinds) for p in range(P)}
        return result
    _check_round_trip(result)
    return result


def stage_times(spec: Any, fam: Any, kinds: Any, geo: Any, stages: Sequence[StagePlan],
                device: Device = DEFAULT_DEVICE) -> List[float]:
    """Each stage's time per micro-batch: its layers' forward and backward, the head on the last
    stage (at ``device``'s throughput, the one the levels were priced at), and its plan's recompute
    and exposed swap (memory/offsets.py)."""
    P = geo.pipeline_stage
    out = []
    for sp in stages:
        p = sp.stage
        layers = [i for v in range(geo.pp_interleave_num)
                  for i in range(geo.chunk_starts[v][p], geo.chunk_starts[v][p] + geo.layer_list[v][p])]
        out.append(layer_seconds(stage_tables(fam, kinds, layers), device)
                   + (head_seconds(spec, device) if sp.stage == P - 1 else 0.0) + sp.seconds / spec.micro_batch_num)
    return out


def _split_search(spec: Any, fam: Any, geo: Any, cal: Calibration, kinds: Any, allow_swap: Any, cap_of: Any,
                  tighten: Sequence[int], device: Device = DEFAULT_DEVICE, rooms: Rooms = NO_ROOMS,
                  own: Tuple[Tuple[str, ...], ...] = ()) -> Optional[Split]:
    """:func:`swapwatch.memory.offsets.search_split` with each (stage, first layer, count) solved by
    the search at that stage's cap (layers of one table alike: solved once per count, moved);
    ``allow_swap`` / ``device`` / ``rooms`` / ``own``: the swap offer, the throughputs, the host room
    and the YAML's own select sets, as :func:`make_plan` hands them to :func:`solve_stage` without a
    split search."""
    L, P, micro = geo.num_layers, geo.pipeline_stage, spec.micro_batch_num
    same: Dict[Tuple[int, int], Tuple[int, Optional[Tuple[StagePlan, float]]]] = {}

    def solve(p: int, start: int, n: int) -> Optional[Tuple[StagePlan, float]]:
        if kinds is None and (p, n) in same:
            return same[(p, n)][1]           # its levels sit at another first layer: realize() moves them
        g = stage_geometry(L, P, p, start, n)
        shape = stage_shape(spec, fam, g, p, cal, kinds)
        sp = solve_stage(spec, fam, g, p, cal, cap_of(shape.static) - tighten[p], allow_swap, kinds, device, rooms,
                         shape=shape, own=own)
        out = None
        if sp.fits:
            t = stage_times(spec, fam, kinds, g, [sp], device)[0]
            out = (sp, t)
        if kinds is None:
            same[(p, n)] = (start, out)
        return out

    def realize(p: int, start: int, n: int) -> StagePlan:
        got = same[(p, n)] if kinds is None else (start, solve(p, start, n))
        s0, (sp, _) = got[0], got[1]         # type: ignore[misc]
        return dataclasses.replace(sp, levels={i - s0 + start: lv for i, lv in sp.levels.items()})

    return search_split(L, P, micro, geo.layer_list[0], solve, realize)


def _calibration(run_dirs: Sequence[str], model: Optional[str], config: str,
                 text: str) -> Tuple[Calibration, Dict[int, int]]:
    """The calibration of ``run_dirs``, and per stage the actual peak (with fragments) a DryRun
    among them measured for this very YAML (the same text): what the YAML's own strategy is
    checked with (memory/budget.py: the pool holds DryRun's actual where the stage was run)."""
    if not run_dirs:
        return NO_CALIBRATION, {}
    from ..config import read_config_text

    cal, measured = calibrate(run_dirs, model, config)
    actual: Dict[int, int] = {}
    for m in measured.values():
        try:
            same = read_config_text(m.config) == text
        except (InputError, OSError):
            same = False
        if same:
            for stage, a in m.actual.items():
                actual[stage] = max(actual.get(stage, 0), a)
    return cal, actual


def _own_candidate(result: PlanResult, config: str, text: str, model: Optional[str], cal: Calibration,
                   spec: Any, fam: Any, kinds: Any, cfg: Any, plan: Any, device: Device = DEFAULT_DEVICE,
                   link: Optional[Any] = None) -> Optional["Own"]:
    """The YAML's own strategy, estimated, with its time cost (its recomputed FLOPs at the device's
    throughput, every micro-batch), when every stage passes the same check as a plan and ``explain``
    finds no error or warning in it (a trap or dead configuration handed back unchanged would stay;
    a written plan clears it); else None. The findings are explain's config-time rules run on the
    same config and plan (``checks.run_rules``, as ``codepaths.LayerSetting.explain`` runs them: the
    command itself is above this module). Its only finding SW104 (select patterns that reach
    nothing), it is a candidate with those patterns dropped (:func:`_without_dead_patterns`)."""
    from ..checks import CheckContext, run_rules
    from ..model.families import check_code_path, from_name

    own = estimate(config, model, cal, link=link)
    flops = sum(r["recompute_flops"] for r in own.layers) * spec.micro_batch_num
    seconds = flops / device.flops_per_s
    # a stage DryRun measured for this very YAML: its actual peak (fragments in) and the workspaces;
    # else the same check as a plan's
    over = [st.stage for st in own.stages
            if not (result.need(st.stage, st.peak(cal), own=True) <= result.budget
                    if st.stage in result.measured_actual else st.peak(cal) <= result.caps[st.stage])]
    fits = not over
    if fits and model is not None:
        check_code_path(from_name(model), cfg.mcore)
    errors = sorted({f.code for f in run_rules(CheckContext(plan=plan, config=cfg, env={}), needs=("config",))
                     if f.severity in ("error", "warning")}) if fits else []
    per_stage = {st.stage: 0.0 for st in own.stages}
    for r in own.layers:
        per_stage[r["stage"]] += r["recompute_flops"] * spec.micro_batch_num / device.flops_per_s
    step = step_seconds(stage_times(spec, fam, kinds, own.plan.geometry,
                                    [StagePlan(stage=p, fits=True, seconds=sec) for p, sec in per_stage.items()],
                                    device), spec.micro_batch_num)
    result.own = {"fits": fits, "time_cost_seconds": seconds, "recompute_flops": flops, "errors": errors,
                  "dryrun_stages": sorted(result.measured_actual), "step_time_seconds": step, "over_stages": over}
    if not fits:
        return None
    if not errors:
        return Own(own, step, text)
    if errors == ["SW104"]:
        return _without_dead_patterns(text, config, model, cfg, plan, own, step, link)
    return None


@dataclass
class Own:
    """The YAML's own strategy as the answer: its estimate, its modelled step time and the text
    handed back (the YAML's, or the YAML's without its select patterns that reach nothing)."""

    estimate: Estimate
    step: float
    text: str
    notes: List[str] = field(default_factory=list)


def _without_dead_patterns(text: str, config: str, model: Optional[str], cfg: Any, plan: Any, est: Estimate,
                           step: float, link: Optional[Any]) -> Optional[Own]:
    """The YAML's own strategy whose only finding is SW104 (select patterns that reach nothing, e.g.
    MindFormers' default ``feed_forward\\.w1`` set on a Qwen2.5 ``w_gate_hidden`` layer), with those
    patterns dropped: the same memory and the same recompute (they mark nothing), without the silent
    no-op; None when a pattern is not in a mapping plan can rewrite or the rewritten YAML still has a
    finding."""
    from ..checks import CheckContext, run_rules
    from .emit import _get, _load, drop_pattern_edits, recompute_base, splice

    doc = _load(text, config)
    base = recompute_base(doc, [])
    section = _get(doc, base)
    dead: Dict[str, List[str]] = {}
    for m in plan.unmatched(cfg):
        value = section.get(m.action) if isinstance(section, dict) else None
        if m.action not in ("select_recompute", "select_comm_recompute") or not isinstance(value, dict) \
                or m.op not in value:
            return None
        dead.setdefault(m.action, []).append(m.op)
    if not dead:
        return None
    out = splice(text, config, drop_pattern_edits(doc, base, dead))
    new_cfg, new_plan, _ = plan_of(config, model, out)
    if any(f.severity in ("error", "warning")
           for f in run_rules(CheckContext(plan=new_plan, config=new_cfg, env={}), needs=("config",))):
        return None
    notes = [f"{'.'.join(base + (key,))}: dropped '{p}': it matches nothing on the model's layer (SW104)"
             for key, pats in dead.items() for p in pats]
    return Own(estimate_text(out, config, model, est.calibration, link), step, out, notes)


def _hand_back(result: PlanResult, text: str, own: Own, device: Device = DEFAULT_DEVICE) -> PlanResult:
    """The YAML's own strategy as the answer (``text``: the YAML's): its text, unchanged or without
    its patterns that match nothing, and its estimate."""
    est, seconds = own.estimate, own.step
    result.fits = True
    result.own_answer = True
    result.unchanged = own.text == text
    result.text = own.text
    result.notes = own.notes + ["the YAML's own strategy passes the pool check and nothing cheaper does: handed "
                                "back " + ("unchanged" if result.unchanged else "with those patterns dropped")]
    result.estimate = est
    result.estimate.budget_bytes = result.budget
    result.lowest = {}
    result.step = seconds
    result.geometry = est.plan.geometry
    # the stages as the YAML has them (for the JSON's cost and the renderers): no level search
    per_stage: Dict[int, Tuple[float, float]] = {}
    micro = est.spec.micro_batch_num
    for r in est.layers:
        f, _ = per_stage.get(r["stage"], (0.0, 0.0))
        per_stage[r["stage"]] = (f + r["recompute_flops"] * micro, 0.0)
    result.stages = [StagePlan(stage=st.stage, fits=True, static=st.static_total,
                               flops=per_stage.get(st.stage, (0.0, 0.0))[0],
                               seconds=per_stage.get(st.stage, (0.0, 0.0))[0] / device.flops_per_s)
                     for st in est.stages]
    return result


def _plan_of_text(text: str, model: Optional[str], config: str = "<string>"):
    """The Plan of a YAML given as text (the engine explain uses), read from the text."""
    return plan_of(config, model, text)[1]


def levers(config: str, cfg: Any, spec, fam, geo, cal: Calibration, caps: Dict[int, int], lowest: Dict[int, int],
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
        if all(low[p] <= caps[p] for p in range(P)):
            out.append(f"the parallel optimizer (parallel.enable_parallel_optimizer: True shards weights and "
                       f"optimizer states over the {spec.dp} data-parallel ranks): lowest peak "
                       f"{fmt_size(max(low.values()))}")
    bad = [p for p in range(P) if lowest[p] > caps[p]]
    room = [q for q in range(P) if lowest[q] <= caps[q]]
    if P > 1 and geo.pp_interleave_num == 1 and bad and room:
        found = _offset_lever(config, cfg, geo, cal, min(caps.values()), bad, model, allow_swap)
        if found:
            out.append(found)
    if device.lower() == "ascend" and not allow_swap:
        low = {p: lowest_peak(spec, fam, geo, p, cal, link if link is not None else True, kinds) for p in range(P)}
        if all(low[p] <= caps[p] for p in range(P)):
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
    if result.geometry is not None and est.plan.geometry.layer_list != result.geometry.layer_list:
        raise AssertionError(f"planned YAML splits the layers {est.plan.geometry.layer_list}, the search chose "
                             f"{result.geometry.layer_list}")
    for lp, row in zip(est.plan.layers, est.layers):
        lv = chosen[lp.layer]
        got = (lp.full_recompute, frozenset(() if lp.full_recompute else lp.select_recompute), lp.layer_swap,
               frozenset((lp.op_swap or {}).items()))
        if got != (lv.full, frozenset(lv.patterns), lv.swap, frozenset(lv.op_swap)):
            raise AssertionError(f"planned YAML gives layer {lp.layer} {row['choice']!r}, search chose {lv.label!r}")
    for st in est.stages:
        need = result.need(st.stage, st.peak(result.calibration))
        if st.peak(result.calibration) > result.caps[st.stage] or need > result.budget:
            raise AssertionError(f"planned YAML predicts {st.peak(result.calibration)} bytes on stage {st.stage} "
                                 f"(pool need {need}), over the budget {result.budget}")
