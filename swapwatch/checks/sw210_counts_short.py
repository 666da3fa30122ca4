"""SW210: a per-stage count list shorter than ``pipeline_stage``: the stages past it get 0."""
from __future__ import annotations

from typing import Any, Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, count_entries, where
from ..text import ranges
from ..engine.strategy import jsonable


@register
class CountsShort(Rule):
    """A per-stage count list has fewer entries than there are pipeline stages.

    **What it means.** Without swap, ``recompute`` and the select keys take one count per
    pipeline stage (``[4, 4, 2, 0]``: the first 4 layers of stage 0, ...). MindFormers 2.1.0's
    ``LayerSetting._alloc_recompute_layer`` (``parallel_core/training_graph/transformer/utils.py``,
    the one LayerSetting of the legacy and mcore paths) walks the counts you gave and leaves every
    later stage at 0, without a word: ``pipeline_stage: 8`` with ``recompute: [4, 4, 2, 0]`` logs
    ``Formative layer_recompute: [[4, 4, 2, 0, 0, 0, 0, 0]]`` and stages 4-7 recompute nothing
    (checked on the MindFormers 2.1.0 oracle, ``tests/test_issue21_rules.py``). A list *longer*
    than ``pipeline_stage`` is an IndexError at model build (exit 2 in ``explain``).

    **Why it matters.** It usually means ``pipeline_stage`` was raised and the list was written
    for the old split: the new stages run without the recompute the old ones had, and the memory
    estimate of those stages is off by their whole activation.

    **How to fix it.** Give one count per stage (``swapwatch explain`` prints the layers per stage),
    e.g. for 8 stages::

        recompute_config:
          recompute: [4, 4, 2, 0, 0, 0, 0, 0]    # or the counts the new stages need
    """

    code = "SW210"
    severity = "warning"
    title = "a per-stage count list is shorter than pipeline_stage: later stages get 0"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        entries = count_entries(ctx)
        plan, cfg = ctx.static_plan, config_of(ctx)
        if not entries or plan is None or cfg is None:
            return
        stages = sorted({lp.stage for lp in plan.layers if lp.stage is not None})
        n_stages = len(stages)
        for key, name, pat, raw in entries:
            what = "full recompute" if name == "recompute" else name.replace("_", " ") + (f" of '{pat}'" if pat else "")
            if not _one_d_counts(raw) or len(raw) >= n_stages:
                continue
            short = list(range(len(raw), n_stages))
            layers = [lp.layer for lp in plan.layers if lp.stage in short]
            yield self.finding(
                f"{key}: {jsonable(raw)} has {len(raw)} per-stage count{'s' if len(raw) != 1 else ''} for "
                f"{n_stages} pipeline stages; MindFormers pads it with 0 without a word, so stage"
                f"{'s' if len(short) > 1 else ''} {ranges(short)} (layers {ranges(layers, 6)}) get no {what}",
                op=key, expected=f"{n_stages} counts", actual=len(raw), source=where(cfg, key))


def _one_d_counts(raw: Any) -> bool:
    """A 1-D list of per-stage counts (ints; LayerSetting turns a bool item into 0 / all)."""
    return isinstance(raw, (list, tuple)) and bool(raw) and all(isinstance(x, (int, bool)) for x in raw) \
        and not all(isinstance(x, bool) for x in raw)
