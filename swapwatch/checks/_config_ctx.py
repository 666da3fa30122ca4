"""Helpers the config-time rules share: the config behind a plan and where its keys are."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..config import TrainingConfig

if TYPE_CHECKING:
    from ..model.plan import Plan
    from . import CheckContext

#: The recompute keys whose lists are layer ids when swap is on.
RECOMPUTE_ID_KEYS = ("recompute", "select_recompute", "select_comm_recompute")


def config_of(ctx: "CheckContext") -> Optional[TrainingConfig]:
    """The TrainingConfig of a check context (a Plan keeps none: explain and verify pass it);
    None without one (a PyNative YAML's config is not the static path's: these rules read
    ``recompute_config`` / ``swap_config``, which that path does not have)."""
    return ctx.config if isinstance(ctx.config, TrainingConfig) else None


def select_sets(plan: "Plan") -> Dict[Tuple[str, Tuple[str, ...]], List[int]]:
    """The layers of ``plan`` with select recompute (not fully recomputed), grouped by (layout key, the
    select patterns): what a rule sizing a select set on the family's tensor table judges once per
    group (SW211, SW310)."""
    groups: Dict[Tuple[str, Tuple[str, ...]], List[int]] = {}
    for lp in plan.layers:
        if lp.full_recompute or not lp.select_recompute:
            continue
        key = plan.layout_key(lp.layer)
        if key:
            groups.setdefault((key, tuple(lp.select_recompute)), []).append(lp.layer)
    return groups


def swap_mode(ctx: "CheckContext") -> Optional[Tuple["Plan", TrainingConfig]]:
    """(plan, config) when the config's recompute and swap keys are layer ids, i.e. swap is on and
    LayerSetting reads recompute_config (not the plain ``parallel_config.recompute`` bool); else None."""
    plan, cfg = ctx.static_plan, config_of(ctx)
    if plan is None or cfg is None or not plan.swap or plan.legacy_recompute is not None:
        return None
    return plan, cfg


def swap_key(cfg: Optional[TrainingConfig], key: str) -> str:
    """``key`` as the user wrote it. On the mcore path (``use_legacy: False``) the swap LayerSetting
    uses comes from ``model.model_config`` (``cpu_offloading`` / ``swap``, ``cpu_offloading_num_layers``
    / ``layer_swap``, ``op_swap``), so a ``swap_config.*`` key is named as that key, with the alias
    the YAML used (:meth:`swapwatch.config.TrainingConfig.mcore_swap_key`); other keys pass as they are.
    Every rule names and locates swap keys through this (and :func:`where`)."""
    return cfg.mcore_swap_key(key, applied=True) if cfg is not None else key


def where(cfg: Optional[TrainingConfig], key: str) -> Optional[str]:
    """``file:line`` of ``key`` in the config's YAML, when the config came from a file (a swap key
    on the mcore path: of the model_config key it came from, :func:`swap_key`)."""
    return cfg.applied_where(key) if cfg is not None else None


def was_given(cfg: Optional[TrainingConfig], section: str, key: str) -> bool:
    """Did the user write ``section.key`` (as opposed to a template default)?"""
    return cfg is not None and cfg.was_given(section, key)


def pattern_where(cfg: Optional[TrainingConfig], action: str, pattern: str) -> Optional[str]:
    """``file:line`` of a configured pattern (:meth:`TrainingConfig.pattern_where`)."""
    return cfg.pattern_where(action, pattern) if cfg is not None else None


def layer_swap_where(cfg: Optional[TrainingConfig], layer: int) -> Optional[str]:
    """``file:line`` of the ``layer_swap`` entry that swaps ``layer`` (first match wins, as in
    MindFormers), else of the ``layer_swap`` key."""
    raw = cfg.swap_config.get("layer_swap") if cfg is not None else None
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            ids = item.get("layers") if isinstance(item, dict) else None
            if ids is True or (isinstance(ids, list) and layer in ids):
                return where(cfg, f"swap_config.layer_swap[{i}]")
    return where(cfg, "swap_config.layer_swap")


def swap_id_lists(cfg: TrainingConfig) -> List[Tuple[str, List[int]]]:
    """(YAML key path, list of layer ids) of every swap-mode id list the user wrote, in file order."""
    out: List[Tuple[str, List[int]]] = []
    rc = cfg.recompute_config
    for key in RECOMPUTE_ID_KEYS:
        value: Any = rc.get(key)
        if _layer_ids(value):
            out.append((f"recompute_config.{key}", list(value)))
        elif isinstance(value, dict):
            out.extend((f"recompute_config.{key}.{pat}", list(ids)) for pat, ids in value.items() if _layer_ids(ids))
    sc = cfg.swap_config
    for key in ("layer_swap", "op_swap"):
        raw = sc.get(key)
        if isinstance(raw, dict):
            items = [(f"swap_config.{key}", raw)]
        elif isinstance(raw, list):
            items = [(f"swap_config.{key}[{i}]", item) for i, item in enumerate(raw)]
        else:
            items = []
        for path, item in items:
            if isinstance(item, dict) and _layer_ids(item.get("layers")):
                out.append((f"{path}.layers", list(item["layers"])))
    return out


def _layer_ids(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)


def count_entries(ctx: "CheckContext") -> List[Tuple[str, str, Optional[str], Any]]:
    """Every value of ``recompute_config`` that takes per-stage counts, as ``(key path, key, pattern
    or None, value)``: ``recompute`` (key ``recompute``), then each select key, one entry per pattern
    when it is a ``{pattern: counts}`` dict. None when counts do not apply: no config or plan, swap on
    (they are layer ids then), or the legacy ``recompute`` form. The one walk and gate SW206 (counts
    capped) and SW210 (a list shorter than the stages) share."""
    from ..engine.strategy import SELECT_KEYS

    plan, cfg = ctx.static_plan, config_of(ctx)        # the gate is swap_mode's, with swap off
    if plan is None or cfg is None or plan.swap or plan.legacy_recompute is not None:
        return []
    rc = cfg.recompute_config or {}
    out: List[Tuple[str, str, Optional[str], Any]] = [
        ("recompute_config.recompute", "recompute", None, rc.get("recompute"))]
    for key, _ in SELECT_KEYS:
        raw = rc.get(key)
        if isinstance(raw, dict):
            out.extend((f"recompute_config.{key}.{pat}", key, pat, v) for pat, v in raw.items())
        else:
            out.append((f"recompute_config.{key}", key, None, raw))
    return out
