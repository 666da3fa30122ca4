"""``swapwatch explain`` for a PyNative (r2.x) YAML: the plan, the SW5xx/SW104 findings, the table and JSON.

Kept beside the static path's :mod:`swapwatch.explain` so that the static results cannot change: the CLI
and :func:`swapwatch.explain.explain` send a YAML here when :func:`.config.detect_path` says "pynative".
The table uses the vocabulary of every per-layer table (:mod:`swapwatch.layer_table`): ``-`` for nothing,
``!`` for a swap that recompute voids, consecutive identical layers folded into ranges.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import layer_table
from ..checks import CheckContext, Finding
from ..text import severity_rank
from . import config as pconfig
from .resolve import PynativePlan, plan_tree


@dataclass
class PynativeExplanation:
    config: pconfig.PynativeConfig
    plan: PynativePlan
    findings: List[Finding] = field(default_factory=list)
    path: str = "pynative"

    @property
    def exit_code(self) -> int:
        return 1 if any(f.severity == "error" for f in self.findings) else 0

    def to_json(self) -> Dict[str, Any]:
        """The ``explain --format json`` document."""
        return self.plan.to_json(self.findings)

    def shape(self) -> Dict[str, int]:
        """The shape ``diff`` compares: layers (MTP apart) and pipeline stages."""
        cfg = self.config
        shape = {"num_layers": cfg.num_layers, "pipeline_stage": cfg.pipeline_parallel}
        if cfg.mtp_layers:
            shape["mtp_layers"] = cfg.mtp_layers
        return shape

    def render(self, fmt: str, all_layers: bool = False) -> str:
        """explain's output in ``fmt`` (the static explanation's counterpart: ``results.Explanation.render``)."""
        return render(self, fmt, all_layers=all_layers)


def explain_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
                 num_layers: Optional[int] = None, family: Optional[str] = None) -> PynativeExplanation:
    """Plan and findings for a parsed PyNative YAML; :class:`~.layer_spec.Refusal` (exit 2) when MindFormers
    refuses it."""
    from ..checks.sw5xx_pynative import pynative_findings

    cfg, plan = plan_tree(data, lines, source, num_layers=num_layers, family=family)
    findings = sorted(pynative_findings(CheckContext(plan=plan, config=cfg)),
                      key=lambda f: (severity_rank(f.severity), f.code, -1 if f.layer is None else f.layer))
    return PynativeExplanation(cfg, plan, findings)


def layer_cells(la) -> Dict[str, str]:
    """One layer's cells in the shared column names (:meth:`.resolve.LayerActions.cells`)."""
    return la.cells()


def rows(plan: PynativePlan, all_layers: bool = False):
    """(header, body) of the per-layer table; ``kind`` is ``decoder`` or ``mtp``."""
    raw = [([la.layer], "mtp" if la.mtp else "decoder", layer_cells(la)) for la in plan.layers]
    if not all_layers:
        raw = layer_table.fold(raw, key=lambda r: (r[1], r[2]), layers=lambda r: r[0])
    cols = [c for c in list(layer_table.COLUMNS) + ["prefetch"]
            if c == "full_recompute" or any(r[2].get(c) for r in raw)]
    names = dict(layer_table.COLUMNS, prefetch="prefetch")
    header = ["layer", "kind"] + [names[c] for c in cols]
    body = [[layer_table.layer_label(ls), kind] + [cells[c] for c in cols] for ls, kind, cells in raw]
    return header, body


def header_lines(ex: PynativeExplanation) -> List[str]:
    cfg, plan = ex.config, ex.plan
    ids = (f"id {cfg.num_layers}" if cfg.mtp_layers == 1 else f"ids {cfg.num_layers}-{cfg.total_layers - 1}")
    mtp = f" + {cfg.mtp_layers} MTP (layer {ids})" if cfg.mtp_layers else ""
    out = [f"{cfg.source or 'config'}: path: {pconfig.PATH_NAMES['pynative']}",
           f"{cfg.num_layers} layers{mtp}, model paths: {cfg.family}, pipeline_parallel {cfg.pipeline_parallel}; "
           f"recompute mode {cfg.recompute['mode']}, recompute_comm {'on' if cfg.recompute_comm['enable'] else 'off'}, "
           f"swap {'on (default_prefetch ' + str(cfg.swap['default_prefetch']) + ')' if cfg.swap['enable'] else 'off'}"]
    if not plan.applied:
        out.append("nothing is enabled: apply_ac returns at once and logs nothing")
    if cfg.pipeline_parallel > 1:
        from ..text import ranges

        on: Dict[int, List[int]] = {}
        for layer in range(cfg.total_layers):
            on.setdefault(cfg.stage_of(layer)[0], []).append(layer)
        split = "; ".join(f"stage {st}: layers {ranges(ids)}" for st, ids in sorted(on.items()))
        out.append(f"pipeline_parallel > 1: each stage applies and logs only its own layers ({split})")
    return out


def render_table(ex: PynativeExplanation, all_layers: bool = False) -> str:
    from ..verify_render import findings_block
    out = header_lines(ex)
    out.append("")
    header, body = rows(ex.plan, all_layers)
    out.extend(layer_table.grid(header, body))
    if any(la.op_swap_void for la in ex.plan.layers):
        out.append(f"  {layer_table.VOIDED} = op swap listed in the swap map that wraps nothing (SW504)")
    if ex.plan.prefetch_pairs:
        out.append("  prefetch → j: SwapManager prefetches layer j's swapped tensors when layer i runs forward")
    out.append("")
    out.extend(findings_block(ex.findings) if ex.findings else ["Findings: none", ""])
    while out and not out[-1]:
        out.pop()
    return "\n".join(line.rstrip() for line in out) + "\n"


def to_json(ex: PynativeExplanation) -> Dict[str, Any]:
    return ex.plan.to_json(ex.findings)


def render(ex: PynativeExplanation, fmt: str, all_layers: bool = False) -> str:
    if fmt == "json":
        return json.dumps(to_json(ex), indent=1) + "\n"
    if fmt == "formative":
        # the PyNative counterpart of the formative lines: what apply_ac will log, in order
        return "".join(f"{ln.level} - {ln.text}\n" for ln in ex.plan.lines)
    return render_table(ex, all_layers=all_layers)
