"""Rendering ``swapwatch explain``: the table a person reads, the JSON, the Formative lines.

The table answers "what will MindFormers do to each layer of *this* YAML": stage and interleave,
full recompute, and, instead of regexes, the op paths each select / comm / exclude / swap pattern
really reaches on the model layout (so a typo shows as "no match" before the job is queued).
Swaps that recompute voids are marked ``!``. The findings the config alone shows follow, each with
its rule code and the YAML line it is about.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, List, Tuple

from . import layer_table, strategy
from .verify_render import findings_block

if TYPE_CHECKING:
    from .results import Explanation


def render(ex: Explanation, fmt: str, all_layers: bool = False) -> str:
    if fmt == "json":
        return json.dumps(ex.to_json(), indent=1) + "\n"
    if fmt == "formative":
        return "\n".join(strategy.layer_setting_lines(ex.plan, ex.layout)) + "\n"
    return render_table(ex, all_layers=all_layers)


def plan_rows(ex: Explanation, all_layers: bool = False) -> Tuple[List[str], List[List[str]]]:
    """Header and rows of the per-layer table, in the vocabulary every per-layer table shares
    (:mod:`swapwatch.layer_table`); consecutive identical layers of one stage fold into a range
    unless ``all_layers``. Each layer's patterns resolve on its own tree of the model family; the
    MTP layer (a second LayerSetting, set as layer num_layers - 1) is a row of its own."""
    plan = ex.plan
    interleaved = plan.geometry.pp_interleave_num > 1
    rows = []
    for lp, mtp in strategy.all_layer_plans(plan):
        walk = ex.layout if ex.layout is not None else layer_table.layer_walk(plan, lp, mtp)
        cells = layer_table.plan_cells(lp, walk)
        rows.append(([lp.layer], layer_table.stage_label(lp.stage, lp.interleave, interleaved), cells, mtp))
    if not all_layers:
        rows = layer_table.fold(rows, key=lambda r: (r[1], r[2]), layers=lambda r: r[0],
                                foldable=lambda r: not r[3])
    cols = layer_table.used_columns([r[2] for r in rows])
    header = ["layer", "stage"] + [layer_table.COLUMNS[a] for a in cols]
    body = [[layer_table.layer_label(layers, mtp), stage] + [cells[a] for a in cols]
            for layers, stage, cells, mtp in rows]
    return header, body


def render_table(ex: Explanation, all_layers: bool = False) -> str:
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
    if "op_swap" in plan.defaulted:
        out.append(f"note: swap is on with no layer_swap / op_swap: MindFormers applies its default op swap "
                   f"'{plan.defaulted['op_swap'][0]}' on every layer (you did not write it)")
    for key, pat in plan.removed:
        out.append(f"note: {key} pattern {pat!r} is removed from every layer (an exclude pattern overlaps it)")
    out.append("")

    header, body = plan_rows(ex, all_layers=all_layers)
    out.extend(layer_table.grid(header, body))
    marks = layer_table.legend(c for row in body for c in row[2:])
    if marks:
        out.append("  " + "; ".join(marks))
    out.extend(layer_table.stage_summary(plan.layers, plan))
    out.append("")
    if ex.findings:
        out.extend(findings_block(ex.findings))
    else:
        out.extend(["Findings: none", ""])
    if plan.swap and plan.geometry.pipeline_stage <= 1 and not ex.env:
        # SW302 depends on the launch environment, which explain cannot see without --env
        out.append("not checked (needs --env): SW302, the launch needs ENABLE_LAZY_INLINE_NO_PIPELINE=1 "
                   "for swap without pipeline parallel (`swapwatch run` sets it)")
    while out and not out[-1]:
        out.pop()
    return "\n".join(line.rstrip() for line in out) + "\n"

