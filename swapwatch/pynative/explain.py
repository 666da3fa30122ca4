"""``explain`` of a PyNative (r2.x) YAML: the ``apply_ac`` plan, the config-time findings (the rules of its view:
SW5xx, SW104) and what this path says about them, as the one :class:`~swapwatch.model.results.Explanation`.

``codepaths.ApplyAc.explain`` calls :func:`explain_tree`; ``report/explain.py`` renders the result as it renders a
LayerSetting one. The words about the plan here are this path's: its header (the path, the model paths, the
modes, ``apply_pp``'s stage split) and the lines ``apply_ac`` logs (explain's ``formative`` output).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..checks import CheckContext, run_rules
from ..model.results import Explanation
from ..text import ranges, severity_rank
from . import config as pconfig
from .resolve import PynativePlan, plan_tree


def explain_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
                 num_layers: Optional[int] = None, family: Optional[str] = None) -> Explanation:
    """Plan and findings for a parsed PyNative YAML; :class:`~.layer_spec.Refusal` (exit 2) when MindFormers
    refuses it."""
    cfg, plan = plan_tree(data, lines, source, num_layers=num_layers, family=family)
    findings = sorted(run_rules(CheckContext(plan=plan, config=cfg), needs=("config",)),
                      key=lambda f: (severity_rank(f.severity), f.code, -1 if f.layer is None else f.layer))
    return Explanation(cfg, plan, findings, header=header_lines(cfg, plan),
                       log_lines=[f"{ln.level} - {ln.text}" for ln in plan.lines], shape=shape(cfg))


def shape(cfg: pconfig.PynativeConfig) -> Dict[str, int]:
    """The shape ``diff`` compares: layers (MTP apart) and pipeline stages."""
    out = {"num_layers": cfg.num_layers, "pipeline_stage": cfg.pipeline_parallel}
    if cfg.mtp_layers:
        out["mtp_layers"] = cfg.mtp_layers
    return out


def header_lines(cfg: pconfig.PynativeConfig, plan: PynativePlan) -> List[str]:
    """What ``explain`` says about the plan above its table: the path, the layers (MTP ids), the model paths,
    the modes, and with pipeline parallel which stage applies and logs which layers."""
    ids = (f"id {cfg.num_layers}" if cfg.mtp_layers == 1 else f"ids {cfg.num_layers}-{cfg.total_layers - 1}")
    mtp = f" + {cfg.mtp_layers} MTP (layer {ids})" if cfg.mtp_layers else ""
    out = [f"{cfg.source or 'config'}: path: {pconfig.PATH_NAMES['pynative']}",
           f"{cfg.num_layers} layers{mtp}, model paths: {cfg.family}, pipeline_parallel {cfg.pipeline_parallel}; "
           f"recompute mode {cfg.recompute['mode']}, recompute_comm {'on' if cfg.recompute_comm['enable'] else 'off'}, "
           f"swap {'on (default_prefetch ' + str(cfg.swap['default_prefetch']) + ')' if cfg.swap['enable'] else 'off'}"]
    if not plan.applied:
        out.append("nothing is enabled: apply_ac returns at once and logs nothing")
    if cfg.pipeline_parallel > 1:
        on: Dict[int, List[int]] = {}
        for layer in range(cfg.total_layers):
            on.setdefault(cfg.stage_of(layer)[0], []).append(layer)
        split = "; ".join(f"stage {st}: layers {ranges(ls)}" for st, ls in sorted(on.items()))
        out.append(f"pipeline_parallel > 1: each stage applies and logs only its own layers ({split})")
    return out
