"""Rendering ``swapwatch explain``: the table a person reads, the JSON, the Formative lines.

The table answers "what will MindFormers do to each layer of *this* YAML": stage and interleave,
full recompute, and, instead of regexes, the op paths each select / comm / exclude / swap pattern
really reaches on the model layout (so a typo shows as "no match" before the job is queued).
Swaps that recompute voids are marked ``!``. The findings the config alone shows follow, each with
its rule code and the YAML line it is about.
"""
from __future__ import annotations

import json
import textwrap
from typing import List, Sequence

from . import strategy
from .explain import Explanation

WRAP = 50


def render(ex: Explanation, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(ex.plan.to_json(), indent=1) + "\n"
    if fmt == "formative":
        return "\n".join(strategy.layer_setting_lines(ex.plan, ex.layout)) + "\n"
    return render_table(ex)


# ---------------------------------------------------------------------------------------------

def _paths(ex: Explanation, patterns: Sequence[str], mode: str, layer: int = 0, mtp: bool = False) -> List[str]:
    """Each pattern as the paths it reaches on ``layer``'s tree; reaching nothing is shown as such."""
    out: List[str] = []
    for pat in patterns:
        res = ex.walk(layer, pat, mode, mtp)
        if res.targets:
            out.extend(t.path for t in res.targets)
        elif res.skipped_cells:
            out.append(f"{pat} (cell only: no effect)")
        else:
            out.append(f"{pat} (no match)")
    return out


def _swap_cell(ex: Explanation, lp: strategy.LayerPlan, mtp: bool = False) -> List[str]:
    items: List[str] = []
    over = set(lp.swap_overridden)
    if lp.layer_swap is not None:
        mark = "!" if "layer_swap" in over or any(o.startswith("layer_swap[") for o in over) else ""
        items.append(f"{mark}layer p={lp.layer_swap}")
    for pat, p in lp.op_swap.items():
        mark = "!" if pat in over else ""
        targets = [t.path for t in ex.walk(lp.layer, pat, "swap", mtp).targets]
        shown = ", ".join(targets) if targets else f"{pat} (no match)"
        items.append(f"{mark}{shown} p={p}")
    return items


def _wrap(items: List[str], width: int = WRAP) -> List[str]:
    if not items:
        return ["-"]
    text = ", ".join(items)
    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False) or ["-"]


def render_table(ex: Explanation) -> str:
    plan, cfg, g = ex.plan, ex.config, ex.plan.geometry
    out: List[str] = []
    src = cfg.source or "config"
    mode = "swap ON (recompute keys are layer ids)" if plan.swap else "swap off"
    out.append(f"{src}: {g.num_layers} layers, pipeline_stage {g.pipeline_stage}, "
               f"pp_interleave_num {g.pp_interleave_num}, {mode}; model layout: {plan.model}")
    if plan.family is not None:
        out.append(f"  model family: {plan.family.describe()}")
    if cfg.mtp_depth:
        out.append(f"  (num_layers includes mtp_depth {cfg.mtp_depth}, as MindFormers passes it to LayerSetting)")
    if cfg.pp_interleave_num > 1 and not cfg.pipeline_interleave:
        out.append(f"  (pp_interleave_num {cfg.pp_interleave_num} is ignored: pipeline_interleave is off)")
    out.append(f"layers per chunk [interleave][stage]: {g.layer_list}   chunk starts: "
               f"{[row[:-1] for row in g.chunk_starts]}")
    if plan.legacy_recompute is not None:
        out.append(f"parallel_config.recompute is the plain bool {plan.legacy_recompute}: MindFormers skips "
                   f"recompute_config and logs nothing per layer")
    for key, pat in plan.removed:
        out.append(f"note: {key} pattern {pat!r} is removed from every layer (an exclude pattern overlaps it)")
    out.append("")

    interleaved = g.pp_interleave_num > 1
    headers = ["layer", "stage/v" if interleaved else "stage", "full", "select recompute",
               "comm recompute", "exclude", "swap (p = backward_prefetch)"]
    rows = []
    # the MTP layer (a second LayerSetting, set as layer num_layers - 1) is a row of its own
    for lp, mtp in strategy.all_layer_plans(plan):
        full = "yes" if lp.full_recompute else "-"
        if lp.full_recompute and not lp.full_recompute_logged:
            full = "yes*"
        excl = _paths(ex, lp.select_recompute_exclude, "exclude", lp.layer, mtp) + \
            [f"comm:{p}" for p in _paths(ex, lp.select_comm_recompute_exclude, "comm_exclude", lp.layer, mtp)]
        rows.append([[f"{lp.layer} (MTP)" if mtp else str(lp.layer)],
                     [f"{lp.stage}/{lp.interleave}" if interleaved else str(lp.stage)], [full],
                     _wrap(_paths(ex, lp.select_recompute, "recompute", lp.layer, mtp)),
                     _wrap(_paths(ex, lp.select_comm_recompute, "comm", lp.layer, mtp)),
                     _wrap(excl), _wrap(_swap_cell(ex, lp, mtp)) if plan.swap else ["-"]])
    # a column that says "-" on every layer (no exclude, no swap) only costs width
    keep = [i for i in range(len(headers)) if i < 3 or any(r[i] != ["-"] for r in rows)]
    headers = [headers[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    widths = [max([len(h)] + [len(line) for r in rows for line in r[i]]) for i, h in enumerate(headers)]
    out.append(_fmt_row(headers, widths))
    out.append(_fmt_row(["-" * w for w in widths], widths))
    for r in rows:
        for k in range(max(len(c) for c in r)):
            out.append(_fmt_row([c[k] if k < len(c) else "" for c in r], widths))
    legend = []
    if any(lp.full_recompute and not lp.full_recompute_logged for lp in plan.layers):
        legend.append("yes* = fully recomputed without a log line")
    if any(lp.swap_overridden for lp in plan.layers):
        legend.append("! = swap voided by recompute on that layer (SW201)")
    if legend:
        out.append("  " + "; ".join(legend))
    out.append("")
    if ex.findings:
        out.append(f"findings ({len(ex.findings)}):")
        for f in ex.findings:
            where = f"  [{f.source}]" if f.source else ""
            out.append(f"  {f.code} {f.severity:<7} {f.message}{where}")
    else:
        out.append("findings: none")
    if plan.swap and plan.geometry.pipeline_stage <= 1 and not ex.env:
        # SW302 depends on the launch environment, which explain cannot see without --env
        out.append("not checked (needs --env): SW302, the launch needs ENABLE_LAZY_INLINE_NO_PIPELINE=1 "
                   "for swap without pipeline parallel (`swapwatch run` sets it)")
    return "\n".join(line.rstrip() for line in out) + "\n"


def _fmt_row(cells: List[str], widths: List[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths))
