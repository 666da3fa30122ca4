"""SW304: pp_interleave_num > 1 without parallel.pipeline_config.pipeline_interleave: True."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where


@register
class InterleaveIgnored(Rule):
    """``pp_interleave_num`` > 1 is ignored without ``pipeline_interleave: True``.

    **What it means.** MindFormers' LayerSetting only uses ``model.model_config.pp_interleave_num``
    when MindSpore's auto-parallel context has ``pipeline_interleave`` on (YAML:
    ``parallel.pipeline_config.pipeline_interleave: True``); otherwise it silently uses 1. Every
    per-stage count in ``recompute_config`` is then read against a different layer split than you
    planned (and a 2-D ``offset`` is rejected outright).

    **Why it matters.** The layers that get recomputed are not the ones you chose.

    **How to fix it.**::

        parallel:
          pipeline_config:
            pipeline_interleave: True
            pipeline_scheduler: '1f1b'
    """

    code = "SW304"
    severity = "warning"
    title = "pp_interleave_num > 1 is ignored without pipeline_interleave: True"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        cfg = config_of(ctx)
        if cfg is None:
            return
        if cfg.pp_interleave_num > 1 and not cfg.pipeline_interleave:
            yield self.finding(f"model.model_config.pp_interleave_num is {cfg.pp_interleave_num} but "
                               "parallel.pipeline_config.pipeline_interleave is not True, so MindFormers uses 1",
                               source=where(cfg, "model.model_config.pp_interleave_num"),
                               expected=f"pp_interleave_num {cfg.pp_interleave_num}", actual="1")
