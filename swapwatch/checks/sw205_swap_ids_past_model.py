"""SW205: with swap on, layer ids outside the model are dropped without a word."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import swap_id_lists, swap_mode, where
from ..text import ranges

@register
class SwapIdsPastModel(Rule):
    """A layer id in a swap-mode list lies outside the model, and MindFormers drops it silently.

    **What it means.** With ``swap_config.swap: True``, the ``layers`` of every ``layer_swap`` /
    ``op_swap`` entry and the lists in ``recompute_config`` (``recompute``, and the ``{pattern:
    [ids]}`` values of ``select_recompute`` / ``select_comm_recompute``) are *global layer ids*.
    MindFormers' ``LayerSetting`` asks, layer by layer, whether that layer's id is in the list,
    so an id past ``num_layers - 1`` (or a negative one) is never asked about: it is accepted and
    ignored, with no message. ``op_swap`` ``layers: [8, 9, 10, 40]`` on a 32-layer model swaps
    layers 8-10 only.

    **Why it matters.** Usually the id is a typo or the list was written for a deeper model; the
    layer you meant gets no swap, and the memory you planned for is not saved.

    **How to fix it.** Use ids from 0 to ``num_layers - 1`` (``swapwatch explain`` prints every
    layer with its stage)::

        swap_config:
          swap: True
          op_swap:
            - op_name: 'feed_forward\\.w1'
              backward_prefetch: 1
              layers: [8, 9, 10, 30]     # was 40: a 32-layer model has layers 0-31
    """

    code = "SW205"
    severity = "warning"
    title = "with swap on, layer ids past the model are dropped silently"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        got = swap_mode(ctx)
        if got is None:
            return
        plan, cfg = got
        n = plan.geometry.num_layers
        for key, ids in swap_id_lists(cfg):
            out = [(i, x) for i, x in enumerate(ids) if not 0 <= x < n]
            if not out:
                continue
            kept = sorted({x for x in ids if 0 <= x < n})
            bad = [x for _, x in out]
            shown = ", ".join(map(str, bad))
            yield self.finding(
                f"{key}: layer{'s' if len(bad) > 1 else ''} {shown} of {ids} "
                f"{'are' if len(bad) > 1 else 'is'} outside the model (layers 0-{n - 1}) and "
                f"{'are' if len(bad) > 1 else 'is'} dropped; it applies to "
                + (f"layer{'s' if len(kept) > 1 else ''} {ranges(kept)} only" if kept else "no layer at all"),
                op=key, expected=f"layer ids 0-{n - 1}", actual=bad,
                source=where(cfg, f"{key}[{out[0][0]}]"))
