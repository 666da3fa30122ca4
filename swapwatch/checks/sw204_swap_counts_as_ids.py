"""SW204: swap is on, and a recompute list reads like the per-stage counts of non-swap mode."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional

from . import CheckContext, Finding, Rule, register
from ._config_ctx import swap_id_lists, swap_mode, where
from ..text import ranges

if TYPE_CHECKING:
    from ..model.plan import Geometry


@register
class SwapCountsAsIds(Rule):
    """With swap on, a ``recompute`` list that looks like per-stage counts is read as layer ids.

    **What it means.** ``recompute_config`` changes meaning with ``swap_config.swap`` (MindFormers'
    documentation *Fine-Grained Activations SWAP*, "Used together with Recomputation": with
    ``swap=True`` the recompute keys are "pipeline stage-agnostic" and take layer indices): without
    swap, ``recompute: [6, 4, 2, 0]`` means "the first 6 layers of stage 0, 4 of stage 1, 2 of
    stage 2"; with swap on, MindFormers reads the same list as *layer ids* and recomputes layers
    0, 2, 4 and 6. This rule fires when swap is on and a recompute list has exactly one entry per
    pipeline stage and is not an ascending list of distinct ids (counts are usually written
    falling from the first stage; ids ascending), the classic leftover after turning swap on.

    **Why it matters.** The job runs and logs ``Set full recompute at layer 0/2/4/6``: nothing
    fails, but it recomputes (and therefore saves) something else than planned, and any swap on
    those layers is voided (SW201).

    **How to fix it.** Write the layer ids you mean (the finding lists the ids the counts stood
    for), or leave swap off::

        recompute_config:
          recompute: [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 16, 17]   # was [6, 4, 2, 0] on 8 layers per stage
        swap_config:
          swap: True
    """

    code = "SW204"
    severity = "warning"
    title = "swap on and a recompute list looks like per-stage counts"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        got = swap_mode(ctx)
        if got is None:
            return
        plan, cfg = got
        geo = plan.geometry
        stages = geo.pipeline_stage
        if stages < 2:
            return
        for key, ids in swap_id_lists(cfg):
            if not key.startswith("recompute_config.") or not _looks_like_counts(ids, stages):
                continue
            chosen = sorted({x for x in ids if 0 <= x < geo.num_layers})
            meant = _counted_layers(ids, geo)
            text = (f"{key}: {ids} has one entry per pipeline stage ({stages}) like per-stage counts, but "
                    f"with swap on it lists layer ids: it selects "
                    + (f"layer{'s' if len(chosen) > 1 else ''} {ranges(chosen)}" if chosen else "no layer"))
            if meant is not None:
                text += f" (as counts it would mean layers {ranges(meant) or 'none'})"
            yield self.finding(text, op=key, expected=meant, actual=chosen, source=where(cfg, key))


def _looks_like_counts(ids: List[int], stages: int) -> bool:
    """One entry per stage, and not the ascending distinct list a user writes for layer ids."""
    ascending = all(a < b for a, b in zip(ids, ids[1:]))
    return len(ids) == stages and not ascending


def _counted_layers(counts: List[int], geo: "Geometry") -> Optional[List[int]]:
    """The layers "the first N of each stage" picks, for a split without interleave (None otherwise)."""
    if geo.pp_interleave_num != 1 or any(c < 0 for c in counts):
        return None
    out: List[int] = []
    for p, c in enumerate(counts):
        start, size = geo.chunk_starts[0][p], geo.layer_list[0][p]
        out.extend(range(start, start + min(c, size)))
    return out
