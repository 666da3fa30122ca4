"""SW307: the YAML names a model family swapwatch has no layer tree for."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of


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
        fam = getattr(ctx.plan, "family", None)
        if fam is None or fam.known:
            return
        cfg = config_of(ctx)
        from ..families import known_families

        yield self.finding(f"unknown model family {fam.name!r} ({fam.origin}): patterns could not be resolved "
                           f"on its layers; known families: {', '.join(known_families())} (--model to pick one)",
                           source=_where(cfg), expected="a known family", actual=fam.name)


def _where(cfg) -> object:
    """``file:line`` of the key that named the model (or of the model section), else the file."""
    fn, lines = getattr(cfg, "where", None), getattr(cfg, "lines", None) or {}
    if callable(fn):
        for key in ("model.model_config.model_type", "model.model_config.architectures", "model.arch.type",
                    "model.model_config.type", "model.model_config", "model"):
            if key in lines:                # the key the YAML has (``where`` falls back to its parent)
                return fn(key)
    return getattr(cfg, "source", None)
