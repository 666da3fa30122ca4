"""Text and JSON views of ``estimate`` and ``plan`` (DESIGN §3.3a for the JSON)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..text import fmt_size, ranges, write_table

if TYPE_CHECKING:       # a renderer takes the results, it does not import the commands' libraries
    from .model import Estimate
    from .planner import PlanResult


def _table(rows: List[List[str]]) -> List[str]:
    """``rows[0]`` is the header (:func:`swapwatch.text.write_table`)."""
    return write_table(rows[0], rows[1:])


def header(est: Estimate) -> str:
    sp = est.spec
    dt = {4: "fp32", 2: "16-bit"}.get(sp.compute_bytes, f"{sp.compute_bytes}-byte")
    par = f"dp {sp.dp} tp {sp.tp} pp {sp.pp}" + (f" cp {sp.cp}" if sp.cp > 1 else "") + \
        (f" ep {sp.ep}" if sp.ep > 1 else "") + (f" x{est.plan.geometry.pp_interleave_num} interleave"
                                                 if est.plan.geometry.pp_interleave_num > 1 else "")
    table = "" if est.fam.table == est.family else f" (tensor table {est.fam.table})"
    line = (f"{est.config}: {est.family}{table}, {sp.num_layers} layers, hidden {sp.hidden}, seq {sp.seq}, "
            f"micro-batch {sp.batch}, {dt} activations, {par}, {sp.micro_batch_num} micro-batch(es), "
            f"optimizer {sp.optimizer}")
    cal = est.calibration
    if cal.fitted:
        line += (f"\ncalibrated on {len({r['run'] for r in cal.runs})} run(s): static residual "
                 f"{fmt_size(cal.residual)}, activation scale {cal.scale:.3f}, fragmentation {cal.fragmentation:.3f}")
        if cal.transient_scale is not None:   # swapwatch/memory/calibrate.py: the per-term fit
            line += f", per-step scale {cal.transient_scale:.3f}"
        if cal.static_scale == 0.0:
            line += " (CPU pool: no weights, gradients or optimizer states in it)"
    else:
        how = "--calibrate RUN_DIR fits the allocator's share" if est.calibrates else "no --calibrate on this path"
        line += f"\nuncalibrated (tensor bytes only; {how})"
    if est.unmodelled:
        # swapwatch.memory.keys: keys that change memory and the model does not size
        line += (f"\nunmodelled: {', '.join(est.unmodelled)} (their effect is left out: the figures are a "
                 f"bound, not a prediction; docs/estimate.md)")
    if sp.frozen_base:
        line += "\nLoRA (pet_config): frozen base weights counted without gradients or optimizer states"
    if est.unchecked:
        line += f"\n{est.unchecked_where}, unchecked: " + "; ".join(est.unchecked)
    return line


def stage_rows(est: Estimate, budget: Optional[int] = None, plus: int = 0) -> List[str]:
    """``plus``: what the peak leaves out (plan's HCCL buffers): a column with the sum plan fits."""
    rows = [["stage", "layers", "predicted peak", "static", "activations", "other"]
            + (["+ HCCL buffers"] if plus else []) + (["budget"] if budget else []) + ["measured", "error"]]
    for st, js in zip(est.stages, est.to_json()["stages"]):
        c = js["components"]
        meas = js["measured_peak_bytes"]
        err = f"{(js['peak_bytes'] - meas) / meas:+.1%}" if meas else "-"
        rows.append([str(st.stage), ranges(st.layers, sep=","), fmt_size(js["peak_bytes"]), fmt_size(c["static"]),
                     fmt_size(c["activations"]), fmt_size(c["other"])]
                    + ([fmt_size(js["peak_bytes"] + plus)] if plus else [])
                    + ([fmt_size(budget)] if budget else []) + [fmt_size(meas) if meas else "-", err])
    return _table(rows)


def layer_rows(est: Estimate) -> List[str]:
    """Consecutive layers with the same choice share a row."""
    rows = [["layers", "stage", "choice", "kept per micro-batch", "recompute GFLOP per micro-batch"]]
    groups: List[List[Dict[str, Any]]] = []
    for r in est.to_json()["layers"]:
        src = next(x for x in est.layers if x["layer"] == r["layer"])
        r = {**r, "recompute_flops": src["recompute_flops"]}
        if groups and groups[-1][-1]["choice"] == r["choice"] and groups[-1][-1]["stage"] == r["stage"] \
                and groups[-1][-1]["layer"] == r["layer"] - 1:
            groups[-1].append(r)
        else:
            groups.append([r])
    for g in groups:
        rows.append([ranges([r["layer"] for r in g], sep=","), str(g[0]["stage"]), g[0]["choice"],
                     fmt_size(g[0]["activation_bytes"]), f"{g[0]['recompute_flops'] / 1e9:.3g}"])
    return _table(rows)


def _secs(v: float) -> str:
    return f"{v * 1e3:.3g} ms" if v >= 1e-6 else "0 ms"


def swap_rows(est: Estimate) -> List[str]:
    """Per swap (consecutive layers alike share a row): what it moves per micro-batch, the copy's time
    each way, the compute window MindSpore's schedule gives it and how long kernels wait for it
    (``swap_cost.py``), then the host memory it takes and the waits per step. Empty without swaps."""
    if not est.swaps:
        return []
    js = est.swap_json()
    link = est.link
    rows = [["layers", "stage", "swap", "prefetch", "moves", "copy out / back", "window", "waits"]]
    # swaps alike on a stage share a row (JSON has each): the window is the group's shortest, the wait
    # its longest
    groups: Dict[Any, List[Dict[str, Any]]] = {}
    for st in js["stages"]:
        for c in st["swaps"]:
            key = (st["stage"], c["swap"], c["backward_prefetch"], c["bytes"], c["hides"])
            groups.setdefault(key, []).append({**c, "stage": st["stage"]})
    for g in groups.values():
        c = g[0]
        copy = _secs(c["d2h_seconds"]) if c["d2h_seconds"] == c["h2d_seconds"] else \
            f"{_secs(c['d2h_seconds'])} / {_secs(c['h2d_seconds'])}"
        window = min(x["window_seconds"] for x in g)
        rows.append([ranges([x["layer"] for x in g], sep=","), str(c["stage"]), c["swap"], str(c["backward_prefetch"]),
                     fmt_size(c["bytes"]), copy, (">= " if len(g) > 1 else "") + _secs(window),
                     "hidden" if c["hides"] else _secs(max(x["exposed_seconds"] for x in g))])
    out = [f"swaps, per micro-batch, at {link.line()}" if link is not None else "swaps, per micro-batch"]
    out += _table(rows)
    worst = max(js["stages"], key=lambda st: st["host_bytes_per_rank"])
    node = js["host_bytes_per_node"]
    host = (f"host memory: {fmt_size(worst['host_bytes_per_rank'])} per rank on stage {worst['stage']} (its "
            f"micro-batches in flight) x {link.ranks_per_node if link else 1} ranks a node = {fmt_size(node)}")
    if link is not None and link.host_memory:
        host += (f", {'within' if js['host_fits'] else 'OVER'} the {fmt_size(link.host_memory)} a node has")
    out.append(host)
    waits = [st for st in js["stages"] if st["exposed_seconds_per_step"] > 0]
    if waits:
        out.append("waits per step (the step is that much longer): " + ", ".join(
            f"stage {st['stage']} {_secs(st['exposed_seconds_per_step'])}" for st in waits))
    else:
        out.append("every swap hides behind compute (no kernel waits for a copy)")
    return out


def calibration_rows(est: Estimate) -> List[str]:
    cal = est.calibration
    if not cal.fitted:
        return []
    rows = [["calibration run", "stage", "predicted", "measured", "residual", "error"]]
    for r in cal.runs:
        rows.append([r["run"], str(r["stage"]), fmt_size(r["predicted_bytes"]), fmt_size(r["measured_bytes"]),
                     fmt_size(r["residual_bytes"]), f"{r['error']:+.1%}" if r["error"] is not None else "-"])
    return _table(rows)


def render_estimate(est: Estimate, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(est.to_json(), indent=2) + "\n"
    out = [header(est), ""] + stage_rows(est) + phase_lines(est) + [not_in_peak_line(est), ""] + layer_rows(est)
    if est.swaps:
        out += [""] + swap_rows(est)
    cal = calibration_rows(est)
    if cal:
        out += [""] + cal
    if est.dryrun:
        out += [""] + dryrun_rows(est)
    return "\n".join(out) + "\n"


def phase_lines(est: Estimate) -> List[str]:
    """Where a stage peaks outside its first backward, say so: the "other" column is then a phase no
    recompute or swap moves (memory/model.py: StageMemory.phase)."""
    out = []
    for st in est.stages:
        if st.phase == "optimizer":
            out.append(f"stage {st.stage} peaks at the optimizer step ({fmt_size(st.optimizer)} above static): "
                       "no recompute or swap lowers it")
        elif st.phase == "backward_end":
            out.append(f"stage {st.stage} peaks at the backward's end (the gradients of one stage without "
                       f"accumulation, {fmt_size(st.backward_end)} above static): no recompute or swap lowers it")
    return out


def not_in_peak_line(est: Estimate) -> str:
    """What the predicted peak (like DryRun L1) leaves out, per rank (model.not_in_dryrun)."""
    n = est.to_json()["not_in_peak"]
    if not n["communicators"]:
        return "not in the predicted peak: kernel workspaces (not estimated)"
    return (f"not in the predicted peak: HCCL buffers, {n['communicators']} communicators x 2 x "
            f"{n['hccl_buffsize_mb']} MiB (HCCL_BUFFSIZE) = {fmt_size(n['communication_buffers_bytes'])} per rank; "
            f"kernel workspaces (not estimated)")


def dryrun_rows(est: Estimate) -> List[str]:
    """``estimate --dryrun``: MindSpore DryRun's allocator peaks (one simulated rank per stage)
    beside the model's; DryRun leaves out kernel workspaces and communication buffers."""
    rows = [["stage", "rank", "predicted peak", "DryRun L1 used peak", "actual (with fragments)", "error", "time"]]
    for r in est.dryrun_json()["stages"]:
        rows.append([str(r["stage"]), str(r["rank_id"]), fmt_size(r["model_peak_bytes"]),
                     fmt_size(r["used_peak_bytes"]), fmt_size(r["actual_peak_bytes"]),
                     f"{r['error']:+.1%}" if r["error"] is not None else "-", f"{r['seconds']:.0f} s"])
    return _table(rows) + ["DryRun L1: MindSpore's simulated Ascend allocator (MS_SIMULATION_LEVEL=1); it leaves "
                           "out kernel workspaces and communication buffers"]


def pool_rows(res: PlanResult, est: Estimate) -> List[str]:
    """``plan``'s stage table: the predicted peak, the margin's parts, what MindSpore's pool must
    hold (the sum checked against the budget: memory/budget.py) and the budget."""
    parts = res.parts is not None
    rows = [["stage", "layers", "predicted peak", "static", "activations", "other"]
            + (["+ model error", "+ fragments", "+ workspaces", "pool need"] if parts else [])
            + ["budget", "measured", "error"]]
    for st, js in zip(est.stages, res.to_json()["stages"]):
        c = js["components"]
        meas = js["measured_peak_bytes"]
        err = f"{(js['peak_bytes'] - meas) / meas:+.1%}" if meas else "-"
        extra: List[str] = []
        if parts:
            m = js["margin_bytes"]
            extra = [fmt_size(m["model_error_bytes"]), fmt_size(m["fragments_bytes"]), fmt_size(m["workspace_bytes"]),
                     fmt_size(js["pool_bytes"])]
        rows.append([str(st.stage), ranges(st.layers, sep=","), fmt_size(js["peak_bytes"]), fmt_size(c["static"]),
                     fmt_size(c["activations"]), fmt_size(c["other"])] + extra
                    + [fmt_size(res.budget) if parts or not res.margin else fmt_size(res.target),
                       fmt_size(meas) if meas else "-", err])
    return _table(rows)


def render_plan(res: PlanResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(res.to_json(), indent=2) + "\n"
    if fmt == "yaml":
        return res.text if res.fits and res.text is not None else ""
    parts = res.parts is not None
    if not res.fits:
        rows = [["stage", "lowest reachable peak"] + (["pool need"] if parts else []) + ["budget"]]
        rows += [[str(s.stage), fmt_size(res.lowest[s.stage])]
                 + ([fmt_size(res.need(s.stage, res.lowest[s.stage]))] if parts else []) + [fmt_size(res.budget)]
                 for s in res.stages]
        return "\n".join(_table(rows) + [""] + _budget_lines(res) + [res.message()]) + "\n"
    est = res.planned
    flops = sum(s.flops for s in res.stages)
    out = [header(est), ""] + pool_rows(res, est) + _budget_lines(res) + [""] + layer_rows(est) \
        + ([""] + swap_rows(est) if est.swaps else [])
    what = "forward FLOPs recomputed"
    if any(lv.swaps for s in res.stages for lv in s.levels.values()):
        # a swap recomputes nothing: its time cost is the copies its prefetch window does not hide, and
        # plan offers only swaps that hide (memory/swap_cost.py)
        what += f"; time cost {sum(s.seconds for s in res.stages):.4g} s per step, the swaps' copies hidden"
    out += ["", f"{res.message()}; modelled cost {flops / 1e9:.4g} GFLOP per step ({what})"]
    return "\n".join(out) + "\n"


def _budget_lines(res: PlanResult) -> List[str]:
    """The budget's reading, once: what the pool check adds (memory/budget.py), the card check, and
    what the peak leaves out beside the pool."""
    out = []
    if res.budget_source != "--budget":
        out.append(f"budget: {res.budget_source} = {fmt_size(res.budget)} (MindSpore reads GB as GiB)")
    if res.parts is not None:
        out.append(res.parts.line())
    if res.card is not None:
        out.append(res.card.line())
    return out
