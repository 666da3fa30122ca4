"""Rendering ``swapwatch explain``: the table a person reads, the JSON, the Formative lines.

The table answers "what will MindFormers do to each layer of *this* YAML", for a plan of either code path
(``plan_view.PlanView``): stage and interleave, full recompute, and, instead of regexes, the op paths each
select / comm / exclude / swap pattern really reaches on the model layout (so a typo shows as "no match" before
the job is queued). Swaps that recompute voids are marked ``!``. The findings the config alone shows follow, each
with its rule code and the YAML line it is about. The words about the plan itself (its header, what was not
checked, the lines MindFormers will log) are the explanation's (``results.Explanation``: the path says them).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, List, Tuple

from . import formats, layer_table
from .verify import findings_block

if TYPE_CHECKING:
    from ..model.results import Explanation

FORMATS = formats.EXPLAIN


def render(ex: "Explanation", fmt: str, all_layers: bool = False) -> str:
    if fmt == "json":
        return json.dumps(ex.to_json(), indent=1) + "\n"
    if fmt == "formative":
        return "".join(f"{line}\n" for line in ex.log_lines)
    if fmt == "table":
        return render_table(ex, all_layers=all_layers)
    raise ValueError(f"unknown format {fmt!r}")


def plan_rows(ex: "Explanation", all_layers: bool = False) -> Tuple[List[str], List[List[str]]]:
    """Header and rows of the per-layer table, in the vocabulary every per-layer table shares
    (:mod:`swapwatch.report.layer_table`); consecutive identical layers of one stage fold into a range
    unless ``all_layers``. Each layer's patterns resolve on its own tree of the model family; an MTP layer
    (LayerSetting sets it as layer num_layers - 1; ``apply_ac`` as ``num_layers + i``) is a row of its own."""
    plan = ex.plan
    interleaved = any(plan.stage_of(layer, mtp)[1] for layer, mtp in plan.all_layers())
    rows = []
    for layer, mtp in plan.all_layers():
        stage, chunk = plan.stage_of(layer, mtp)
        cells = layer_table.cells(plan, layer, mtp, prefetch="column")
        rows.append(([layer], layer_table.stage_label(stage, chunk, interleaved), cells, mtp))
    if not all_layers:
        rows = layer_table.fold(rows, key=lambda r: (r[1], r[2]), layers=lambda r: r[0],
                                foldable=lambda r: not r[3])
    cols = layer_table.used_columns([r[2] for r in rows])
    prefetch = any(r[2].get("prefetch") for r in rows)
    header = ["layer", "stage"] + [layer_table.COLUMNS[a] for a in cols] + (["prefetch"] if prefetch else [])
    body = [[layer_table.layer_label(layers, mtp), stage] + [cells[a] for a in cols]
            + ([cells.get("prefetch", "")] if prefetch else [])
            for layers, stage, cells, mtp in rows]
    return header, body


def render_table(ex: "Explanation", all_layers: bool = False) -> str:
    plan = ex.plan
    out: List[str] = list(ex.header)
    out.append("")
    header, body = plan_rows(ex, all_layers=all_layers)
    out.extend(layer_table.grid(header, body))
    marks = layer_table.legend((c for row in body for c in row[2:]), plan.voided_legend)
    if "prefetch" in header:
        marks.append("prefetch → j: the layer whose swapped tensors are prefetched when this one runs forward")
    if marks:
        out.append("  " + "; ".join(marks))
    out.extend(layer_table.plan_summary(plan))
    out.append("")
    if ex.findings:
        out.extend(findings_block(ex.findings))
    else:
        out.extend(["Findings: none", ""])
    out.extend(ex.notes)
    while out and not out[-1]:
        out.pop()
    return "\n".join(line.rstrip() for line in out) + "\n"
