"""``swapwatch diff``'s output: the per-layer table with its per-stage summary (:func:`stage_changes`: what
changed, in words), and the JSON document (DESIGN §3.2), of a :class:`swapwatch.model.results.DiffResult`. A
renderer: it reads the result, never a command module."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from ..model import actions
from ..model.results import DiffResult, LayerDiff, Side
from ..text import fmt_bytes
from . import formats, layer_table

FORMATS = formats.DIFF


def render(result: DiffResult, fmt: str = "table", all_layers: bool = False) -> str:
    if fmt == "json":
        return json.dumps(to_json(result), indent=1, ensure_ascii=False) + "\n"
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}")
    return render_table(result, all_layers)


def render_table(result: DiffResult, all_layers: bool = False) -> str:
    out = [f"A: {result.a.describe()}", f"B: {result.b.describe()}"]
    if result.shape:
        out.append("not the same model or run shape: " + ", ".join(result.shape))
    if not result.a.swap_keys_become_ids and result.a.swap != result.b.swap:
        out.append(f"swap {'ON' if result.a.swap else 'off'} → {'ON' if result.b.swap else 'off'}")
    elif result.a.swap != result.b.swap and None not in (result.a.swap, result.b.swap):
        out.append(f"swap {'ON' if result.a.swap else 'off'} → {'ON' if result.b.swap else 'off'} "
                   "(with swap ON, recompute keys are layer ids, not per-stage counts)")
    out.append("")
    rows = [([ld.layer], ld.stage, ld) for ld in result.layers]
    if not all_layers:
        rows = layer_table.fold(rows, key=lambda r: (r[1], tuple(sorted(r[2].cells.items()))),
                                layers=lambda r: r[0])
    cols = layer_table.used_columns([r[2].cells for r in rows])
    header = ["layer", "stage"] + [layer_table.COLUMNS[a] for a in cols]
    body = [[layer_table.layer_label(ls), stage] + [ld.cells[a] for a in cols] for ls, stage, ld in rows]
    out.extend(layer_table.grid(header, body))
    marks = [f"{layer_table.DIFF} = differs (A → B)"] if any(ld.differs for ld in result.layers) else []
    marks += layer_table.legend((c for row in body for c in row[2:]), result.voided_legend)
    if marks:
        out.append("  " + "; ".join(marks))
    out.append("")
    out.extend(stage_changes(result))
    if result.estimates:
        out.append("")
        out.append("predicted (swapwatch estimate, uncalibrated):")
        out.extend("  " + line for line in estimate_changes(result))
    elif result.estimate_note:
        out.append("")
        out.append(result.estimate_note)
    n = sum(1 for ld in result.layers if ld.differs)
    out.append("")
    out.append("SAME: the two strategies are identical layer by layer" if result.same else
               f"DIFFER: {n} of {len(result.layers)} layers" + (", and the shape" if result.shape else ""))
    return "\n".join(line.rstrip() for line in out) + "\n"


def to_json(result: DiffResult) -> Dict[str, Any]:
    """``{"same", "a", "b", "shape_differences", "stages", "layers"}``; per layer the two sides'
    column texts (only filled columns) and the columns that differ."""
    def side_json(s: Side) -> Dict[str, Any]:
        return {"path": s.path, "kind": s.kind, "rank": s.rank, "swap": s.swap, "shape": dict(s.shape)}

    return {"same": result.same, "a": side_json(result.a), "b": side_json(result.b),
            "shape_differences": list(result.shape),
            "stages": stage_changes(result),
            "layers": [{"layer": ld.layer,
                        "stage": {"a": _stage_of(result.a, ld.layer), "b": _stage_of(result.b, ld.layer)},
                        "a": {k: v for k, v in ld.a.items() if v},
                        "b": {k: v for k, v in ld.b.items() if v},
                        "differs": list(ld.differs)} for ld in result.layers],
            # addition (issue 24): the predicted peak and recompute cost per stage of both configs
            "estimate": [{"stage": st, "a_peak_bytes": a, "b_peak_bytes": b, "a_recompute_flops": fa,
                          "b_recompute_flops": fb} for st, a, b, fa, fb in result.estimates],
            "estimate_note": result.estimate_note or None}


def _stage_of(s: Side, layer: int) -> Optional[Dict[str, Any]]:
    if layer not in s.stages:
        return None
    st, inter = s.stages[layer]
    return {"stage": st, "interleave": inter}


def estimate_changes(result: DiffResult) -> List[str]:
    """``stage 0 peak 33.5 -> 57.9 GiB, recompute -90 %`` per stage (predicted, uncalibrated)."""
    out = []
    for stage, a, b, fa, fb in result.estimates:
        if fa == fb:
            rc = "recompute unchanged"
        elif fa == 0:
            rc = f"recompute none -> {fb / 1e9:.3g} GFLOP"
        else:
            rc = f"recompute {100.0 * (fb - fa) / fa:+.0f} %"
        out.append(f"stage {stage} peak {_gib(a)} -> {_gib(b)}, {rc}")
    return out


def _gib(n: int) -> str:
    return fmt_bytes(n, digits=1)


# ---------------------------------------------------------------------------------------------
# What changed, in words (the table, the JSON document and the HTML report show these)
# ---------------------------------------------------------------------------------------------

def kind(cells: Dict[str, str]) -> str:
    """A layer's strategy in a word or two: ``full``, ``select``, ``select+swap``, ``none``."""
    if cells.get("full_recompute"):
        parts = ["full"]
    else:
        parts = [w for a, w in (("select_recompute", "select"), ("select_comm_recompute", "comm"))
                 if cells.get(a)]
    if any(cells.get(a) for a in actions.SWAP_ACTIONS):
        parts.append("swap")
    return "+".join(parts) or "none"


def stage_changes(result: DiffResult) -> List[str]:
    """Per stage of A, the changed layers grouped by what they change from and to, e.g.
    ``stage 0: layers 4-5 full → none``; ``stage 2: no change``."""
    by_stage: "OrderedDict[str, List[LayerDiff]]" = OrderedDict()
    for ld in sorted(result.layers, key=lambda x: (_stage_key(result, x.layer), x.layer)):
        by_stage.setdefault(_stage_name(result, ld.layer), []).append(ld)
    out = []
    for stage, lds in by_stage.items():
        changes: "OrderedDict[str, List[int]]" = OrderedDict()
        for ld in lds:
            if not ld.differs:
                continue
            ka, kb = kind(ld.a), kind(ld.b)
            if ld.layer not in result.a.cells:
                what = "only in B"
            elif ld.layer not in result.b.cells:
                what = "only in A"
            elif ka != kb:
                what = f"{ka} → {kb}"
            else:
                cols = ", ".join(layer_table.COLUMNS[a] for a in ld.differs if a in layer_table.COLUMNS)
                what = f"{ka}: {cols} differ"
            changes.setdefault(what, []).append(ld.layer)
        if not changes:
            out.append(f"{stage}: no change")
        else:
            out.append(f"{stage}: " + "; ".join(
                f"{'layer' if len(ls) == 1 else 'layers'} {layer_table.ranges(ls)} {what}"
                for what, ls in changes.items()))
    return out


def _stage_key(result: DiffResult, layer: int) -> Tuple[int, int]:
    st, inter = result.a.stages.get(layer) or result.b.stages.get(layer) or (None, 0)
    return (st if st is not None else 1 << 30, inter or 0)


def _stage_name(result: DiffResult, layer: int) -> str:
    st, _ = result.a.stages.get(layer) or result.b.stages.get(layer) or (None, 0)
    return "stage ?" if st is None else f"stage {st}"
