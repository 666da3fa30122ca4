"""SW112: the log's own MindSpore warnings say the offload (swap) did not take effect."""
from __future__ import annotations

from collections import Counter
from typing import Dict, Iterable, Tuple

from . import CheckContext, Finding, Rule, register

#: The NoticeEvent the parsers make of MindSpore's WarningOffloadOutsideLazyInline line.
NOTICE = "offload_outside_lazy_inline"


@register
class OffloadNotEffective(Rule):
    """MindSpore warned in the log that the offload does not take effect.

    **What it means.** When a swap (``Cell.offload`` / ``Primitive._offload``, which MindFormers'
    ``layer_swap`` and ``op_swap`` call) lands outside a ``lazy_inline`` cell, MindSpore's
    offload pass keeps the marks but inserts no copies, and prints one WARNING per marked node:
    ``Offload does not take effect outside the scope of the lazy_inline Cell. NOde: ...``
    (``offload_activation.cc``). This rule counts those lines per rank. The log text is
    enough; ``verify --ir`` (SW111) shows the same from the compiled graph. On CPU it always
    happens: ``lazy_inline`` does not work for training graphs there, so swap can be planned,
    logged and verified as *set*, but it moves no memory.

    **Why it matters.** The ``Set layer swap`` / ``Set op_swap`` lines look like success, and the
    strategy checks pass, yet the activations stay on the device: the memory you planned to save
    is still used.

    **How to fix it.** Run the swap on Ascend in graph mode; without pipeline parallel, export
    ``ENABLE_LAZY_INLINE_NO_PIPELINE=1`` so MindFormers' decoder layers are lazy-inlined (SW302);
    with pipeline parallel they are already::

        export ENABLE_LAZY_INLINE_NO_PIPELINE=1      # pipeline_stage: 1
        # context: {mode: 0, device_target: "Ascend", memory_optimize_level: "O0"}
    """

    code = "SW112"
    severity = "warning"
    title = "offload did not take effect (the log's MindSpore warnings)"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.runlog is None:
            return
        # the text depends only on the count and the tally per prim, which most ranks share:
        # written once per distinct tally, not once per rank (10,000 findings at 10,000 ranks)
        messages: Dict[Tuple[int, Tuple[Tuple[str, int], ...]], str] = {}
        for rank, rank_log in sorted(ctx.runlog.ranks.items()):
            tally = rank_log.notices(NOTICE)      # from the packed summary: no rank is unpacked here
            if not tally.n:
                continue
            key = (tally.n, tuple(tally.prims.items()))
            message = messages.get(key)
            if message is None:
                message = messages[key] = _message(tally.n, tally.prims)
            yield self.finding(message, rank=rank, expected="offload inside lazy_inline cells", actual=tally.n,
                               source=tally.first)


def _message(n: int, tally: Dict[str, int]) -> str:
    prims = Counter(tally)
    top = ", ".join(f"{p} x{k}" for p, k in prims.most_common(4))
    if len(prims) > 4:
        top += f", {len(prims) - 4} more kinds"
    return (f"MindSpore warned {n} time{'s' if n != 1 else ''} that the offload does not take "
            f"effect outside the scope of the lazy_inline Cell ({top}): swap is set but moves no memory")
