"""SW103: a swap's backward_prefetch in the log differs from the config."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ..engine.compare import describe


@register
class PrefetchDiffers(Rule):
    """A layer swap or op swap ran with another ``backward_prefetch`` than the config says.

    **What it means.** ``Set layer swap at layer N and value is: P`` or ``Set op_swap at layer N:
    path, value=P`` shows a prefetch P different from the one the config assigns to that layer.
    MindFormers takes, per layer, the *first* ``layer_swap`` entry (and per op pattern the first
    ``op_swap`` entry) whose ``layers`` contain it, and collapses a pattern's entries to the first
    prefetch when any entry says ``layers: True``; a later entry for the same layer never wins.

    **Why it matters.** The prefetch decides when the offloaded activation comes back: too small
    stalls the backward pass, too large holds device memory early. A different value is a
    different memory/speed trade-off than the one you tuned.

    **How to fix it.** Make the intended entry the first one that covers the layer, and keep one
    prefetch per op pattern when any of its entries uses ``layers: True``::

        swap_config:
          swap: True
          op_swap:
            - {op_name: 'attention', backward_prefetch: 10, layers: [3]}   # first match wins
            - {op_name: 'attention', backward_prefetch: 20, layers: [0, 1, 2, 3]}
    """

    code = "SW103"
    severity = "error"
    title = "swap backward_prefetch differs from the config"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        comp = ctx.comparison
        if comp is None:
            return
        for rank, diff in comp.ranks.items():
            for e, s in diff.value_diffs:
                what = describe(s.action, s.path)
                yield self.finding(
                    f"{what} ran with backward_prefetch {s.value}, "
                    f"the config says {e.value}",
                    rank=rank, layer=s.layer, op=s.path or e.pattern or s.action,
                    expected=e.value, actual=s.value, source=s.source)
