"""Fit the memory model's free terms to measured peaks of real runs (``--calibrate RUN_DIR``).

Each ``--calibrate`` source is a ``swapwatch run`` directory, a DryRun record (the JSON
``tools/dryrun/record_cases.py`` writes beside the YAML DryRun ran: DryRun L1's peaks per stage; the
CPU records of ``fixtures/cpu_memory`` have the same form), or a raw DryRun log (its ``Used peak``
line, the stage from its ``RANK_ID``): ``CONFIG.yaml=LOG``, or just ``LOG`` for a DryRun of the
very YAML being estimated or planned.

Why: the model counts tensors; an allocator adds what no tensor table shows (CPU: weights outside
the pool, the pool's own rounding; Ascend: workspace, communication buffers, fragmentation). Runs of
the same model with known strategies pin that down. Each run directory (``swapwatch run`` output)
names its config in ``run.json``; its logs give the measured peak of every rank, which is compared
with the model's prediction for that rank's pipeline stage (the worst rank of each stage).

Fitted, by least squares over every (run, stage), never more parameters than sources (runs,
records, logs) pin down (docs/estimate.md, "Calibration"):

* MindSpore's CPU pool (``pool_peak``; CPU records say ``"peak": "cpu_pool"``): ``measured = a *
  kept + t * per_step`` (:func:`fit_pool`). Known, not fitted: the pool holds no weights, gradients
  or optimizer states (its peaks double with the micro-batch) and no separate backward workspace.
  ``a`` scales the saved activations (per layer and micro-batch in flight), ``t`` the per-step
  working set (recompute transient, head and loss). From none + full at one shape it predicts 18
  other strategies and shapes of the tiny Llama within 7.1 %, where one scale missed twice the
  sequence by up to 26 %;
* a device's peak (DryRun L1, Ascend logs), three sources or more: ``measured = static + residual +
  a * kept + t * per_step`` (:func:`fit_terms`; the per-step terms include the backward workspace);
* a device's peak, two sources (or when the three terms are not pinned down): ``measured = static +
  residual + scale * dynamic`` (``dynamic`` = activations + transients + head, see
  :mod:`swapwatch.memory.model`). With one point, or when every point has the same dynamic part,
  the scale stays 1 and only the residual is fitted.
``fragmentation`` is the mean measured actual / used peak (Ascend ``Actual`` vs ``Used`` peak, CPU
``actual peak used mem`` vs ``peak used mem``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError, NotModelled
from .keys import lever_key
from .model import Calibration, Estimate, estimate, plan_of

#: measured peak metrics, most specific first (parsers' MemoryEvent.metric names)
USED_METRICS = ("pool_peak", "used_peak", "max_memory_allocated")
ACTUAL_METRICS = ("pool_actual_peak", "actual_peak", "max_memory_reserved")


@dataclass
class Measured:
    run_dir: str
    config: str
    used: Dict[int, int]        # stage -> worst rank's used peak
    actual: Dict[int, int]      # stage -> worst rank's actual peak (when logged)
    #: the peak is MindSpore's CPU pool (``pool_peak``): no weights, gradients or optimizer
    #: states in it, no separate backward workspace (docs/estimate.md, "Calibration")
    cpu_pool: bool = False


def run_config(run_dir: str, info: Dict[str, Any]) -> str:
    """The config path a ``swapwatch run`` directory recorded (resolved like the run did)."""
    cfg = (info.get("config") or {}).get("path") if isinstance(info.get("config"), dict) else None
    if not cfg:
        raise InputError("the run directory names no config (run.json has no config.path): "
                         "calibration needs runs made with `swapwatch run --config X.yaml`", file=run_dir)
    if not os.path.isabs(cfg):
        cfg = os.path.join(info.get("cwd") or os.getcwd(), cfg)
    if not os.path.exists(cfg):
        raise InputError(f"the run's config {cfg} no longer exists", file=os.path.join(run_dir, "run.json"))
    want = info["config"].get("sha256")
    if want:
        import hashlib

        with open(cfg, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != want:
                raise InputError(f"the run's config {cfg} changed since the run (sha256 differs from "
                                 f"run.json): it no longer says what ran", file=run_dir)
    return cfg


def measure(run_dir: str, pipeline_stages: int) -> Measured:
    """Measured peaks per stage of one run directory."""
    from ..parsers import read_logs
    from ..parsers.model import MemoryEvent

    if not os.path.isdir(run_dir):
        raise InputError("not a run directory", file=run_dir)
    run = read_logs([run_dir], show_progress=False)
    cfg = run_config(run_dir, run.run_info)
    per_rank_used: Dict[int, int] = {}
    per_rank_actual: Dict[int, int] = {}
    used_metrics = set()
    for rank, rlog in run.ranks.items():
        mem = [e for e in rlog.events if isinstance(e, MemoryEvent)]
        for metrics, out in ((USED_METRICS, per_rank_used), (ACTUAL_METRICS, per_rank_actual)):
            for metric in metrics:
                vals = [e.bytes for e in mem if e.metric == metric and e.bytes > 0]
                if vals:
                    out[rank] = max(vals)
                    if metrics is USED_METRICS:
                        used_metrics.add(metric)
                    break
    if not per_rank_used:
        raise InputError("no peak memory figures in the run's logs (the CPU pool peak needs GLOG_v=2 "
                         "MS_SUBMODULE_LOG_v={PRE_ACT:1}, which `swapwatch run` sets)", file=run_dir)
    world = max(len(run.ranks), max(run.ranks) + 1)
    per_stage = max(1, world // pipeline_stages)

    def by_stage(values: Dict[int, int]) -> Dict[int, int]:
        out: Dict[int, int] = {}
        for rank, v in values.items():
            st = min(rank // per_stage, pipeline_stages - 1)
            out[st] = max(out.get(st, 0), v)
        return out

    return Measured(run_dir, cfg, by_stage(per_rank_used), by_stage(per_rank_actual),
                    cpu_pool=used_metrics == {"pool_peak"})


#: the largest standard error the fitted scale may have (three points or more) for :func:`fit` to keep
#: it: points whose dynamic parts hardly differ do not pin a slope. The Qwen3-MoE cut's none + full
#: records (four stages, three at the optimizer step, dynamic parts within 13 % of each other) fit a
#: scale of 0.53 +- 0.51 with 1.7 GiB of residual, which put the full-size YAML 12 % low; the other
#: families' pairs pin it to 0.005-0.039 (docs/estimate.md "Calibration")
SCALE_SE_MAX = 0.05


def fit(points: Sequence[Tuple[float, float, float]]) -> Tuple[float, float]:
    """(residual, scale) fitting ``measured = static + residual + scale * dynamic`` to
    ``(static, dynamic, measured)`` points; a scale <= 0 (nonsense) or one the points do not pin
    down (standard error above :data:`SCALE_SE_MAX`) falls back to 1: the residual alone."""
    n = len(points)
    ys = [m - s for s, _, m in points]
    xs = [d for _, d, _ in points]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n >= 2 and sxx > 0:
        scale = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        residual = my - scale * mx
        pinned = n == 2 or (sum((y - residual - scale * x) ** 2 for x, y in zip(xs, ys)) / (n - 2) / sxx) ** 0.5 \
            <= SCALE_SE_MAX
        if scale > 0 and pinned:
            return residual, scale
    return my - mx, 1.0


def fit_terms(points: Sequence[Tuple[float, float, float, float]]) -> Optional[Tuple[float, float, float]]:
    """(residual, activation scale, transient scale) fitting ``measured = static + residual +
    a * kept + t * per_step`` to ``(static, kept, per_step, measured)`` points by least squares;
    None when the three terms are not pinned down (fewer than three points, collinear points) or a
    scale comes out <= 0 (nonsense: the caller falls back to :func:`fit`).

    Why two scales: the saved activations (``kept``: what every layer and micro-batch in flight
    holds) and the per-step working set (``per_step``: the recompute transient, the backward
    workspace, the head and loss; once per step whatever the depth) grow differently with the
    strategy and the shape, and an allocator need not hold them alike (the CPU pool does not:
    :func:`fit_pool`). Three parameters: only from three sources or more."""
    if len(points) < 3:
        return None
    import numpy as np

    x = np.array([[1.0, k, t] for _, k, t, _ in points])
    y = np.array([m - s for s, _, _, m in points])
    if np.linalg.matrix_rank(x / np.maximum(np.abs(x).max(axis=0), 1.0)) < 3:
        return None
    (r, a, t), *_ = np.linalg.lstsq(x, y, rcond=None)
    if a <= 0 or t <= 0:
        return None
    return float(r), float(a), float(t)


def calibrate(run_dirs: Sequence[str], model: Optional[str] = None,
              config: Optional[str] = None) -> Tuple[Calibration, Dict[str, Measured]]:
    """Fit a :class:`Calibration` to the runs; each run's rows say predicted vs measured (``model``:
    the ``--model`` family, default each run's YAML's own). ``config``: the YAML a raw DryRun log
    given without ``CONFIG.yaml=`` ran (the one being estimated)."""
    rows: List[Tuple[str, int, Any, int, Optional[int]]] = []
    measured: Dict[str, Measured] = {}
    for source in run_dirs:
        log_cfg, rd = split_source(source)
        dry = dryrun_case(rd) or dryrun_log(rd, log_cfg or config)
        if dry is None and not os.path.isdir(rd):
            raise InputError("not a calibration source: neither a `swapwatch run` directory, a DryRun record "
                             "(.json) nor a DryRun log (no 'Used peak memory usage' line)", file=rd)
        cfg = dry.config if dry else run_config(rd, _run_json(rd))
        est = estimate(cfg, model)
        m0 = dry or measure(rd, len(est.stages))
        measured[rd] = m0
        for st in est.stages:
            if st.stage in m0.used:
                rows.append((rd, st.stage, st, m0.used[st.stage], m0.actual.get(st.stage)))
    if not rows:
        raise InputError("no calibration run covers any pipeline stage", file=run_dirs[0] if run_dirs else None)
    fr = [a / u for *_, u, a in rows if a and u]
    cal = Calibration(fragmentation=sum(fr) / len(fr) if fr else 1.0, fitted=True)
    if all(m.cpu_pool for m in measured.values()):
        # the CPU pool: static and workspace are not in it (not fitted: known), the saved
        # activations and the per-step terms get a scale each (two parameters, two runs)
        cal.static_scale, cal.workspace_scale = 0.0, 0.0
        cal.scale, cal.transient_scale = fit_pool([_split(st, workspace=False) + (used,)
                                                   for _, _, st, used, _ in rows])
    else:
        # three sources or more: the per-term fit (residual, activation scale, transient scale);
        # two: at most two parameters (residual and one scale), never more than the runs pin down
        terms = fit_terms([(st.static_total, *_split(st), used) for _, _, st, used, _ in rows]) \
            if len(measured) >= 3 else None
        if terms:
            cal.residual, cal.scale, cal.transient_scale = terms
        else:
            cal.residual, cal.scale = fit([(st.static_total, st.dynamic, used) for _, _, st, used, _ in rows])
    for rd, stage, st, used, _ in rows:
        pred = st.peak(cal)
        cal.runs.append({"run": rd, "config": measured[rd].config, "stage": stage, "predicted_bytes": pred,
                         "measured_bytes": used, "residual_bytes": used - pred,
                         "error": round((pred - used) / used, 4) if used else None})
    return cal, measured


def _split(st: Any, workspace: bool = True) -> Tuple[int, int]:
    """(kept, per_step) of a stage's dynamic part (``model.StageMemory``): the saved activations
    and swap window vs the transient, workspace (unless ``workspace`` is False), head and gathered
    weights; a stage whose peak is the optimizer step or the backward's end counts it as kept (it is
    scaled like the activations: ``scaled_dynamic``)."""
    if st.phase != "activations":
        return st.late, 0
    # the loss apart: the larger side only, weighed as scaled_dynamic weighs it (no workspace: w 0)
    return st.activations + st.swap_window, int(sum(st.step_parts(w=1.0 if workspace else 0.0)))


def fit_pool(points: Sequence[Tuple[float, float, float]]) -> Tuple[float, Optional[float]]:
    """(activation scale, per-step scale) fitting ``measured = a * kept + t * per_step`` to
    ``(kept, per_step, measured)`` points of MindSpore's CPU pool, by least squares (no residual,
    no static: the pool's peaks double with the micro-batch, docs/estimate.md). One point, points
    that do not pin both down, or a scale <= 0: one scale over both, per-step scale None."""
    import numpy as np

    x = np.array([[k, t] for k, t, _ in points], dtype=float)
    y = np.array([m for _, _, m in points], dtype=float)
    if len(points) >= 2 and np.linalg.matrix_rank(x / np.maximum(np.abs(x).max(axis=0), 1.0)) == 2:
        (a, t), *_ = np.linalg.lstsq(x, y, rcond=None)
        if a > 0 and t > 0:
            return float(a), float(t)
    tot = x.sum(axis=1)
    return (float(np.dot(tot, y) / np.dot(tot, tot)) if np.dot(tot, tot) else 1.0), None


def dryrun_case(path: str) -> Optional[Measured]:
    """A DryRun record (``fixtures/dryrun/cases/<name>.json``, what ``tools/dryrun/record_cases.py``
    writes: the YAML DryRun ran, beside it, and DryRun L1's used / actual peak per stage), as
    measured peaks; None when ``path`` is not a ``.json`` file (a run directory)."""
    from .. import json_input

    if not (path.endswith(".json") and os.path.isfile(path)):
        return None
    data = json_input.read(path, "DryRun record")      # bounded: size, device, depth
    try:
        cfg = os.path.join(os.path.dirname(path), data["yaml"])
        # bytes where the record has them (fixtures/cpu_memory: the CPU pool), else DryRun's MiB
        used = {int(s["stage"]): int(s["used_peak_bytes"]) if "used_peak_bytes" in s
                else int(s["used_peak_mib"]) << 20 for s in data["stages"]}
        actual = {int(s["stage"]): int(s["actual_peak_bytes"]) if "actual_peak_bytes" in s
                  else int(s["actual_peak_mib"]) << 20 for s in data["stages"] if "actual_peak_mib" in s}
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise InputError(f"not a DryRun record (yaml, stages[].used_peak_mib ...): {exc}", file=path) from None
    if not os.path.isfile(cfg):
        raise InputError(f"the DryRun record's YAML {cfg} does not exist", file=path)
    return Measured(path, cfg, used, actual, cpu_pool=data.get("peak") == "cpu_pool")


def split_source(source: str) -> Tuple[Optional[str], str]:
    """``CONFIG.yaml=LOG`` -> (config, log); anything else -> (None, source). The ``=`` form names the
    YAML a raw DryRun log ran (a log does not name it); a path that exists as given is never split."""
    if "=" in source and not os.path.exists(source):
        cfg, _, log = source.partition("=")
        if cfg.endswith((".yaml", ".yml")):
            return cfg, log
    return None, source


def dryrun_log(path: str, config: Optional[str]) -> Optional[Measured]:
    """A raw DryRun log (what ``swapwatch.memory.dryrun.measure`` keeps as ``stage<N>/dryrun.log``, or
    any log of a ``MS_SIMULATION_LEVEL=1`` run): its last ``Used peak memory usage (without
    fragments)`` / ``Actual peak memory usage (with fragments)`` lines are the peaks of the pipeline
    stage of its ``RANK_ID`` (ranks are stage-major: ``dryrun.rank_layout``). ``config``: the YAML it
    ran. None when ``path`` is not a file or has no ``Used peak`` line (not a DryRun log)."""
    import re

    from . import dryrun as dr

    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read the log: {exc}", file=path) from None
    used, actual = dr.read_peaks(text)
    if used is None:
        return None
    if not config:
        raise InputError("a raw DryRun log does not name the YAML it ran: pass it as "
                         "--calibrate CONFIG.yaml=LOG (or calibrate the estimate of that very YAML)", file=path)
    if not os.path.isfile(config):
        raise InputError(f"the DryRun log's YAML {config} does not exist", file=path)
    ranks = re.findall(r"RANK_ID:\s*(\d+),\s*RANK_SIZE:\s*(\d+)", text)
    rank_size, pp = dr.rank_layout(config)
    if ranks:
        rank, size = int(ranks[-1][0]), int(ranks[-1][1])
        if size != rank_size:
            raise InputError(f"the log ran {size} simulated ranks, the YAML {config} has {rank_size} "
                             f"(data x model x context x pipeline parallel): not a DryRun of that YAML", file=path)
        stage = min(rank // max(1, rank_size // pp), pp - 1)
    elif pp == 1:
        stage = 0
    else:
        raise InputError(f"the log names no RANK_ID and the YAML has {pp} pipeline stages: which stage ran "
                         f"is unknown", file=path)
    return Measured(path, config, {stage: used}, {stage: actual} if actual else {})


def _run_json(run_dir: str) -> Dict[str, Any]:
    from ..json_input import read_run_json

    data = read_run_json(run_dir)            # bounded and type-checked
    if data is None:
        raise InputError("not a swapwatch run directory (no run.json)", file=run_dir)
    return data


def calibrated_estimate(config: str, run_dirs: Sequence[str], model: Optional[str] = None,
                        link: Optional[Any] = None) -> Estimate:
    """``estimate`` of ``config`` with the calibration of ``run_dirs``; measured peaks beside the
    prediction where a calibration run used this very config; ``link``: what its swaps are priced
    with (``swap_cost.Link``)."""
    est = estimate(config, model, link=link)
    if not run_dirs:
        return est
    cal, measured = calibrate(run_dirs, model, config)
    est.calibration = cal
    same = [m for m in measured.values() if os.path.realpath(m.config) == os.path.realpath(config)]
    for m in same:
        for stage, used in m.used.items():
            est.measured[stage] = max(est.measured.get(stage, 0), used)
    return est


def corpus_errors(cases_dir: str, plans_dir: Optional[str] = None) -> Dict[str, Any]:
    """The model's error against DryRun L1 on every recorded stage of the oracle tier (the ``.json``
    records beside the YAMLs DryRun ran, ``fixtures/dryrun/cases``), per tensor table: the worst
    signed error ``(estimate - used) / used`` over the stages without swap and without SeqPipe (what
    a recompute plan's margin takes: memory/budget.py; ``by_unmodelled``: the same per set of lever
    keys the estimate leaves out on the stage, ``keys.lever_key``), over the SeqPipe stages (``seqpipe_*``: what
    a SeqPipe plan's margin adds), over all stages, and per kind of strategy on the stage (the
    first word of each layer's choice: none, select, full, swap ..., ``+seqpipe`` under SeqPipe).
    Uncalibrated, as ``plan`` uses the model. Written to ``memory/model_error.json`` by tools/plan_margin_table.py;
    tests/test_plan_budget.py checks the file is what the records say.

    Per table too, the pool's fragments under ``memory_optimize_level: O0`` (DryRun L1's actual peak
    minus its used peak) as a fraction of the used peak above the model's static memory, worst over
    the stages recorded at their full shape (``"stage_shape": "full"`` in the record: a maintainer
    YAML's stage with all its layers and micro-batches in flight, whole or as a stage cut). Cuts with
    fewer layers are left out: their holes are as large as a full stage's while their dynamic part is
    a fraction of it (docs/estimate.md "Fragmentation"). memory/budget.py:fragments_for takes it.

    With ``plans_dir`` (``fixtures/dryrun/plans``), ``held_out`` too: :func:`plan_errors`."""
    import glob
    import json

    tables: Dict[str, Dict[str, Any]] = {}
    for rec in sorted(glob.glob(os.path.join(cases_dir, "*.json"))):
        with open(rec, encoding="utf-8") as fh:
            data = json.load(fh)
        yaml_path = os.path.join(cases_dir, data["yaml"])
        try:
            est = estimate(yaml_path)
        except NotModelled:
            continue      # a record of what the model refuses (legacy MoE): no plan of it takes a margin
        name = os.path.basename(rec)[:-5]
        # the fragments of a full-shape record count under O0 only (the YAML read again for its context
        # only where they would count)
        full = data.get("stage_shape") == "full"
        o1 = full and _is_o1(yaml_path)
        full_o0 = full and not o1
        for row in data.get("stages", []):
            stage, used = row["stage"], row["used_peak_mib"] << 20
            err = (est.stages[stage].peak() - used) / used
            kinds = sorted({r["choice"].removeprefix("mtp:").split(":")[0] for r in est.layers
                            if r["stage"] == stage})
            t = _table_row(tables, est.fam.table)
            t["stages"] += 1
            if est.family not in t["families"]:
                t["families"].append(est.family)
            swap = any(k not in ("none", "select", "full") for k in kinds)
            if est.spec.seq_split > 1:
                # SeqPipe's stages apart: their own terms' error goes to SeqPipe plans only
                # (memory/budget.py:table_error), not to every plan of the table
                if err < t.get("seqpipe_worst_error", 0.0):
                    t["seqpipe_worst_error"], t["seqpipe_worst_case"] = round(err, 4), f"{name} stage {stage}"
                t["seqpipe_stages"] = t.get("seqpipe_stages", 0) + 1
                kinds = kinds + ["seqpipe"]
            elif not swap:
                if err < t["worst_error"]:
                    t["worst_error"], t["worst_case"] = round(err, 4), f"{name} stage {stage}"
                # per set of lever keys (recompute, swap) the estimate leaves out on the stage: a YAML's
                # error part takes the stages whose left-out lever keys it has too (memory/budget.py:
                # table_error)
                left = ",".join(sorted({k for k in est.unmodelled if lever_key(k)}))
                g = t.setdefault("by_unmodelled", {}).setdefault(left, {"stages": 0, "worst_error": 0.0,
                                                                       "worst_case": ""})
                g["stages"] += 1
                if err < g["worst_error"]:
                    g["worst_error"], g["worst_case"] = round(err, 4), f"{name} stage {stage}"
            t["worst_error_all"] = round(min(t["worst_error_all"], err), 4)
            key = "+".join(kinds)
            t["by_kind"][key] = round(min(t["by_kind"].get(key, 0.0), err), 4)
            if o1:
                _o1_fragments(tables, est, name, row)
            if full_o0:
                above = used - est.stages[stage].static_total
                _note_fragments(t, "fragments", ((row["actual_peak_mib"] << 20) - used) / above,
                                f"{name} stage {stage}")
    out: Dict[str, Any] = {"source": "fixtures/dryrun/cases (DryRun L1 used peak, uncalibrated estimate)",
                           "tables": tables}
    if plans_dir is not None:
        records = _plan_records(plans_dir)
        # the plan records' stage cuts keep their stage's full shape: their O1 fragments count too
        for name, data, est in records:
            if _is_o1(os.path.join(plans_dir, data["planned"])):
                for row in data.get("stages", []):
                    _o1_fragments(tables, est, name, row)
        out["held_out"] = plan_errors(plans_dir, records)
    return out


def _table_row(tables: Dict[str, Dict[str, Any]], table: str) -> Dict[str, Any]:
    """``table``'s row of :func:`corpus_errors`, made on first use."""
    return tables.setdefault(table, {"worst_error": 0.0, "worst_case": "", "worst_error_all": 0.0,
                                     "stages": 0, "families": [], "by_kind": {}})


def _note_fragments(t: Dict[str, Any], key: str, frac: float, where: str) -> None:
    """Count a stage's fragments (a fraction of its peak above static) under ``key`` of row ``t``
    (``<key>_stages``, and ``<key>_worst`` / ``<key>_case`` for the worst)."""
    t[f"{key}_stages"] = t.get(f"{key}_stages", 0) + 1
    if frac > t.get(f"{key}_worst", -1.0):
        t[f"{key}_worst"], t[f"{key}_case"] = round(frac, 4), where


def _is_o1(yaml_path: str) -> bool:
    """Whether the YAML runs ``memory_optimize_level: O1`` (MindSpore's default O0 otherwise)."""
    return str((plan_of(yaml_path)[0].context or {}).get("memory_optimize_level", "O0")).upper() == "O1"


def _plan_records(plans_dir: str) -> List[Tuple[str, Dict[str, Any], Any]]:
    """(name, record, estimate of its planned YAML) of each plan DryRun record in ``plans_dir`` (the
    maintainers' own ``*.own.json`` left out: they are calibration sources, not plans), each
    estimated once."""
    import glob
    import json

    out = []
    for rec in sorted(glob.glob(os.path.join(plans_dir, "*.json"))):
        if rec.endswith(".own.json"):
            continue
        with open(rec, encoding="utf-8") as fh:
            data = json.load(fh)
        out.append((os.path.basename(rec)[:-5], data, estimate(os.path.join(plans_dir, data["planned"]))))
    return out


def _o1_fragments(tables: Dict[str, Dict[str, Any]], est: Any, name: str, row: Dict[str, Any]) -> None:
    """The fragments of a full-shape stage under ``memory_optimize_level: O1`` (actual minus used peak,
    a fraction of the used peak above static), worst per table, SeqPipe's stages apart
    (``fragments_o1_seqpipe_*``): SOMAS plans the static graph in one block, and the O1 stages without
    SeqPipe show none (Qwen2.5-7B / 14B / 32B 8k), while the Qwen2.5-72B 32k stages (SeqPipe, 8
    sequence chunks) hold 565-6544 MiB beside it (docs/plan.md). memory/budget.py:fragments_for."""
    stage, used = row["stage"], row["used_peak_mib"] << 20
    above = used - est.stages[stage].static_total
    frac = max(0.0, ((row["actual_peak_mib"] << 20) - used) / above) if above > 0 else 0.0
    _note_fragments(_table_row(tables, est.fam.table),
                    "fragments_o1_seqpipe" if est.spec.seq_split > 1 else "fragments_o1", frac, f"{name} stage {stage}")


def plan_errors(plans_dir: str, records: Optional[List[Tuple[str, Dict[str, Any], Any]]] = None) -> Dict[str, Any]:
    """The model's worst under-prediction on the plan DryRun records (``fixtures/dryrun/plans``: each
    stage of a YAML ``plan`` wrote, run through DryRun L1 after the plan was made, so every one is a
    held-out check of the model that planned it): the estimate of the planned YAML against DryRun's
    used peak. memory/budget.py:table_error takes it as the floor of every table's error part: a
    table whose in-sample worst is smaller (a few cases, all seen while modelling it) is not trusted
    below what a held-out stage has missed by.

    A stage DryRun put over its plan's budget (its actual peak plus the workspace bound) is a failed
    plan: its miss counts for its own tensor table (``by_table``), not for the floor of every table.
    DeepSeek-V3's plan of no recompute held 115737 MiB on stage 1 where the estimate said 49643
    (-57 %): the MoE layers' activations without recompute, which no recorded case had put at the
    peak, are that table's defect, and a 133 % error part on every other family would plan nothing.
    ``records``: :func:`_plan_records` of ``plans_dir``, when the caller has them."""
    from .budget import measured_need

    def covers(worst: float) -> float:
        # the fraction of the estimate the margin adds (peak x (1 + covers)) to reach DryRun's used
        # peak on that stage, rounded up: the floor covers the stage it was taken from
        return math.ceil(-worst / (1 + worst) * 1e4) / 1e4 if worst < 0 else 0.0

    worst, case, n = 0.0, "", 0
    failed: Dict[str, Dict[str, Any]] = {}
    for _, data, est in (records if records is not None else _plan_records(plans_dir)):
        for row in data.get("stages", []):
            used = row["used_peak_mib"] << 20
            err = (est.stages[row["stage"]].peak() - used) / used
            actual = row["actual_peak_mib"] << 20
            where = f"{data['case']} stage {row['stage']}"
            if measured_need(actual) > data["budget_bytes"]:
                got = failed.setdefault(est.fam.table, {"stages": 0, "worst_error": 0.0, "worst_case": ""})
                got["stages"] += 1
                if err < got["worst_error"]:
                    got["worst_error"], got["worst_case"] = round(err, 4), where
                continue
            n += 1
            if err < worst:
                worst, case = err, where
    for got in failed.values():
        got["covers"] = covers(got["worst_error"])
    return {"source": "fixtures/dryrun/plans (each plan's stages, DryRun L1 used peak)", "stages": n,
            "worst_error": round(worst, 4), "worst_case": case, "covers": covers(worst), "by_table": failed}
