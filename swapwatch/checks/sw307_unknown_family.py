"""SW307: the YAML names a model family swapwatch has no layer tree for."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of

if TYPE_CHECKING:
    from ..config import TrainingConfig


@register
class UnknownFamily(Rule):
    """Unknown model family: the patterns could not be resolved.

    **What it means.** What a recompute / swap pattern reaches depends on the layer's real cell
    tree, and swapwatch has the trees of the families ``swapwatch families`` lists (extracted from
    MindFormers 2.1.0's classes). The YAML names another model (``model.arch.type`` on the legacy
    path, ``model.model_config.model_type`` / ``architectures`` with ``use_legacy: False``), so
    the per-layer plan is right but no pattern was checked: none is reported as matching
    nothing, and ``verify`` cannot tell which paths to expect. swapwatch never silently uses
    another family's tree instead.

    **Why it matters.** A pattern that reaches nothing (or a primitive that crashes the build)
    goes unnoticed until the run.

    **How to fix it.** Pick the closest family explicitly, if its layer is the same::

        swapwatch explain x.yaml --model qwen3

    or add the family: ``tools/extract_layouts.py`` builds it from MindFormers' classes.
    """

    code = "SW307"
    severity = "warning"
    title = "unknown model family: patterns not resolved"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        fam = plan.family if plan is not None else None
        if fam is None or fam.known:
            return
        cfg = config_of(ctx)
        from ..model.families import known_families

        yield self.finding(f"unknown model family {fam.name!r} ({fam.origin}): patterns could not be resolved "
                           f"on its layers; known families: {', '.join(known_families())} (--model to pick one)",
                           source=_where(cfg), expected="a known family", actual=fam.name)


def _where(cfg: Optional["TrainingConfig"]) -> Optional[str]:
    """``file:line`` of the key that named the model (or of the model section), else the file."""
    if cfg is None:
        return None
    for key in ("model.model_config.model_type", "model.model_config.architectures", "model.arch.type",
                "model.model_config.type", "model.model_config", "model"):
        if key in cfg.lines:                # the key the YAML has (``where`` falls back to its parent)
            return cfg.where(key)
    return cfg.source
