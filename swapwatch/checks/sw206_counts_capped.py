"""SW206: recompute counts larger than the layers of their stage are capped without a word."""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of, count_entries, where
from ..engine.strategy import jsonable


@register
class CountsCapped(Rule):
    """A recompute count asks for more layers than its pipeline stage has; MindFormers caps it.

    **What it means.** Without swap, ``recompute`` and the select keys take *counts*: "the first N
    layers of each stage" (a 1-D list, one count per stage) or of each interleave x stage chunk (a
    2-D table). MindFormers' ``LayerSetting`` silently caps every count at the number of layers
    there: ``recompute: [9, 4, 2, 0]`` with 8 layers per stage recomputes 8 layers of stage 0, and
    the log shows only the capped table (``Formative layer_recompute``). This rule compares what
    you wrote with the table swapwatch's engine builds, the same way MindFormers does.

    **Why it matters.** The count no longer means what the YAML says; often the stage split
    changed (``pipeline_stage``, ``offset``, ``num_layers``) and the counts were written for the
    old one, so the other stages' counts are probably stale too.

    **How to fix it.** Write the counts for the current split (``swapwatch explain`` prints
    ``layers per chunk``), or ``True`` for "every layer of the model"::

        recompute_config:
          recompute: [8, 4, 2, 0]        # stage 0 has 8 layers
    """

    code = "SW206"
    severity = "warning"
    title = "recompute counts capped at the layers of their stage"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        entries = count_entries(ctx)
        plan, cfg = ctx.static_plan, config_of(ctx)
        if not entries or plan is None or cfg is None:
            return
        formative = plan.formative or {}
        for key, name, pat, raw in entries:
            if name == "recompute":
                table = formative.get("layer_recompute")
            else:
                tables = formative.get(name) or {}
                # one value for the default patterns: they share its table
                table = tables.get(pat) if pat is not None else next(iter(tables.values()), None)
            if table is None:
                continue
            for index, where_, asked, got in _capped(raw, jsonable(table)):
                yield self.finding(
                    f"{key}: {_show(raw)} asks for {asked} layers on {where_}, which has {got}; "
                    f"MindFormers applies it to those {got} (the count is capped without a word)",
                    op=key, expected=f"at most {got}", actual=asked, source=where(cfg, f"{key}{index}"))


def _capped(raw: Any, table: Any) -> Iterator[Tuple[str, str, int, int]]:
    """(index suffix, "stage j" / "interleave i, stage j", asked, applied) of every capped count."""
    if not isinstance(raw, (list, tuple)) or not isinstance(table, list):
        return
    if all(_count(x) or isinstance(x, bool) for x in raw):            # 1-D: one count per stage
        for j, x in enumerate(raw):
            if _count(x) and j < len(table[0]):
                got = sum(int(row[j]) for row in table)
                if x > got:
                    yield f"[{j}]", f"stage {j}", x, got
        return
    for i, row in enumerate(raw):                                     # 2-D: interleave x stage
        if not isinstance(row, (list, tuple)) or i >= len(table) or not isinstance(table[i], list):
            continue
        for j, x in enumerate(row):
            if _count(x) and j < len(table[i]) and x > int(table[i][j]):
                yield f"[{i}][{j}]", f"interleave {i}, stage {j}", x, int(table[i][j])


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _show(raw: Any) -> str:
    return str(jsonable(raw))
