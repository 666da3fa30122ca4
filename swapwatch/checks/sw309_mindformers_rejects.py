"""SW309: a key MindFormers 2.1.0 itself rejects at launch (the build raises ValueError)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where


@register
class MindFormersRejects(Rule):
    """A key MindFormers 2.1.0 rejects when it builds the network: the job dies at launch.

    **What it means.** Some keys are valid YAML and valid for one code path, but MindFormers' trainer
    refuses them on another before the first step (``trainer/base_trainer.py:
    BaseTrainer._wrap_network_with_tool_cells`` raises ``ValueError``): on the mcore path
    (``use_legacy: False``) ``micro_batch_interleave_num`` > 1, and ``seq_split_num`` > 1 (SeqPipe) with
    pipeline stages; on the legacy path SeqPipe with ``recompute_config.recompute`` set at all (any true value)
    (``_wrap_network_with_tool_cells_legacy``). The list is the one ``swapwatch estimate`` refuses with
    (``swapwatch/memory/keys.py``, docs/estimate.md "Nothing ignored in silence").

    **Why it matters.** The job fails after the cluster slot is allocated and every rank has loaded
    its data, with a traceback in each ``worker_N.log``.

    **How to fix it.** Drop the key (or set it to 1) on the path that rejects it, or move the model to
    the path that supports it::

        micro_batch_interleave_num: 1      # mcore: not supported in MindFormers 2.1.0
    """

    code = "SW309"
    severity = "error"
    title = "MindFormers rejects this key at launch"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        from ..memory.keys import rejected

        cfg = config_of(ctx)
        if cfg is None or not cfg.tree:
            return
        for key, why in rejected(cfg.tree):
            yield self.finding(f"{key}: {why}", source=where(cfg, key), op=key)
