"""Helpers the config-time rules share: the config behind a plan and where its keys are."""
from __future__ import annotations

from typing import Any, Optional


def config_of(ctx: Any) -> Any:
    """The TrainingConfig of a check context (given explicitly, or the one the plan was made from)."""
    cfg = getattr(ctx, "config", None)
    if cfg is None and getattr(ctx, "plan", None) is not None:
        cfg = getattr(ctx.plan, "config", None)
    return cfg


def where(cfg: Any, key: str) -> Optional[str]:
    """``file:line`` of ``key`` in the config's YAML, when the config came from a file."""
    fn = getattr(cfg, "where", None)
    return fn(key) if fn else None


def was_given(cfg: Any, section: str, key: str) -> bool:
    """Did the user write ``section.key`` (as opposed to a template default)?"""
    fn = getattr(cfg, "was_given", None)
    return bool(fn(section, key)) if fn else False
