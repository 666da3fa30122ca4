"""SW203: recompute-exclude keys set while swap is on (MindFormers never applies them)."""
from __future__ import annotations

from typing import Iterable

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, where

EXCLUDE_KEYS = ("select_recompute_exclude", "select_comm_recompute_exclude")


@register
class ExcludeIgnoredUnderSwap(Rule):
    """``select_recompute_exclude`` / ``select_comm_recompute_exclude`` are ignored with swap on.

    **What it means.** With ``swap_config.swap: True`` MindFormers sets each layer through its
    swap-mode path, which has no exclude step: the exclude keys are formatted (as per-stage counts,
    even though the other keys now mean layer ids) and logged in ``Formative ...``, but no
    ``Set select recompute exclude`` line ever follows. They still do one thing: an exclude
    pattern that overlaps a select pattern removes that select pattern from *every* layer.

    **Why it matters.** An op you meant to keep out of recompute is not kept out; and a select
    pattern may silently vanish because of an exclude that otherwise does nothing.

    **How to fix it.** Under swap, express the exception in the select value itself (list only the
    layers you want) and drop the exclude key::

        recompute_config:
          select_recompute:
            'feed_forward\\.mul': [0, 1]       # instead of excluding layers 2, 3
          # select_recompute_exclude: ...     # removed: ignored when swap is on
    """

    code = "SW203"
    severity = "warning"
    title = "recompute-exclude keys are ignored when swap is on"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if plan is None or not plan.swap:
            return
        cfg = config_of(ctx)
        rc = (cfg.recompute_config if cfg is not None else None) or {}
        removed = {p for k, p in plan.removed}
        for key in EXCLUDE_KEYS:
            value = rc.get(key)
            if value is False or value is None or value == {} or value == []:
                continue
            table = (plan.formative or {}).get(key) or {}
            shown = ", ".join("'%s'" % p for p in table) or repr(value)
            extra = ""
            if removed:
                names = ", ".join("'%s'" % p for p in sorted(removed))
                extra = f"; it still removed select pattern(s) {names} from every layer"
            yield self.finding(f"recompute_config.{key} ({shown}) is never applied because swap is on{extra}",
                               op=key, source=where(cfg, f"recompute_config.{key}"),
                               expected="exclude applied", actual="ignored in swap mode")
