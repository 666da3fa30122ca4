"""SW107: the config the run printed is not the config you verify against."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable

from ..engine.compare import ValueTexts, canon
from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of
from ._logged_config import (GEOMETRY, PerLoggedValues, config_sections, formative_differences, geometry_values,
                             initial_config_differences, short, source_of)

if TYPE_CHECKING:
    from ..parsers.model import RankLog

#: Logged geometry lines -> Geometry attributes.
@register
class LogConfigDiffers(Rule):
    """The config printed in the log differs from ``--config``.

    **What it means.** MindFormers prints what it really used: the layer split (``num_layers per
    stage`` ...), the normalised strategy (``Formative layer_recompute`` / ``select_recompute`` /
    ``layer swap`` / ``op swap`` ...) and the raw sections (``initial recompute_config /
    swap_config / parallel_config from dict``). This rule compares those lines with what
    ``--config`` gives after the same normalisation, key by key, on every rank (once per rank and
    key). Values are compared after MindFormers' own normalisation, so ``True`` in the YAML and
    the per-stage table it becomes do not differ; keys MindFormers fills with defaults are
    compared with their defaults.

    **Why it matters.** Every other finding is relative to ``--config``: when the job ran another
    config, verify against that one (or without ``--config``, which uses the log's own).

    **How to fix it.** Find the YAML the job really used (``swapwatch run`` records its path and
    hash in ``run.json``), or verify without ``--config``::

        swapwatch verify output/msrun_log            # uses the config the log printed
    """

    code = "SW107"
    severity = "error"
    title = "the config in the log (initial ... from dict) differs from --config"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if ctx.runlog is None or plan is None:
            return
        geometry = geometry_values(plan.geometry)
        formative = plan.formative or {}
        sections = config_sections(config_of(ctx))
        same = ValueTexts().same          # the config's values made canonical once, not per rank

        def differences(logged: Dict[str, Any], initial: Dict[str, Any], form: Dict[str, Any]) -> list:
            out = []
            for what, attr in GEOMETRY:
                if what in logged and not same(logged[what], geometry[attr]):
                    out.append(("geometry", what, geometry[attr], logged[what]))
                    break           # one geometry finding per rank: the rest follows from it
            raw = [("initial_config", key, want, got)
                   for key, want, got in initial_config_differences(initial, sections, same)]
            out += raw
            if not raw:             # else the Formative differences follow from these
                out += [("formative", key, want, got)
                        for _logged_key, key, want, got in formative_differences(formative, form, same)]
            return out

        per_rank = PerLoggedValues(differences)
        for rank, rank_log in sorted(ctx.runlog.ranks.items()):
            for kind, key, want, got in per_rank(rank_log):
                yield self._differs(rank, rank_log, kind, key, want, got)

    def _differs(self, rank: int, rank_log: "RankLog", kind: str, key: str, want: Any, got: Any) -> Finding:
        label = {"geometry": "layer split", "formative": f"Formative {key}",
                 "initial_config": key}[kind]
        return self.finding(
            f"the log's {label} is {short(got)}, --config gives {short(want)}",
            rank=rank, op=key, expected=canon(want), actual=canon(got),
            source=source_of(rank_log, kind, key))
