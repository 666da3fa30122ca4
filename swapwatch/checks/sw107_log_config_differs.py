"""SW107: the config the run printed is not the config you verify against."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, Optional, Tuple

from ..compare import ValueTexts, canon, canon_text
from ..parsers.model import FormativeEvent, InitialConfigEvent
from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of

if TYPE_CHECKING:
    from ..config import TrainingConfig
    from ..parsers.model import RankLog
    from ..plan import Geometry

#: Logged geometry lines -> Geometry attributes.
GEOMETRY = (("layer_list", "layer_list"), ("layer_accu", "layer_accu"),
            ("pp_ids", "pp_ids"), ("interleave_ids", "interleave_ids"))


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
        geometry = _geometry_values(plan.geometry)
        formative = plan.formative or {}
        sections = _config_sections(config_of(ctx))
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
            f"the log's {label} is {_short(got)}, --config gives {_short(want)}",
            rank=rank, op=key, expected=canon(want), actual=canon(got),
            source=_source(rank_log, kind, key))


class PerLoggedValues:
    """An answer that depends only on what a rank logged of its config (``geometry()``,
    ``initial_config()``, ``formative()``), worked out once per distinct set of logged value
    objects: ranks that share parsed objects (the packed ranks of one worker batch do) share the
    answer, so 10,000 ranks cost a few hundred comparisons with ``--config``, not 10,000. Each
    entry holds the values it was keyed by, so their ids are not reused while it is remembered."""

    def __init__(self, answer: Callable[[Dict[str, Any], Dict[str, Any], Dict[str, Any]], Any]) -> None:
        self.answer = answer
        self.known: Dict[tuple, Tuple[Any, ...]] = {}

    def __call__(self, rank_log: "RankLog") -> Any:
        logged = (rank_log.geometry(), rank_log.initial_config() or {}, rank_log.formative())
        key = tuple((*d, *map(id, d.values())) for d in logged)
        got = self.known.get(key)
        if got is None:
            got = self.known[key] = (logged, self.answer(*logged))
        return got[1]


def initial_config_differences(logged: Dict[str, Any], sections: Optional[Dict[str, Dict[str, Any]]],
                               same: Callable[[Any, Any], bool]) -> Iterator[Tuple[str, Any, Any]]:
    """``(section.key, configured, logged)`` for every value one rank's ``initial ... from dict``
    lines (``logged``: its ``initial_config()``) print differently from ``--config``'s
    ``sections`` (SW107 reports each one, SW109 sums them up as "not a run of this config")."""
    for section, value in logged.items():
        want = (sections or {}).get(section)
        if not isinstance(value, dict) or not isinstance(want, dict):
            continue
        for key in sorted(set(value) & set(want)):
            if not same(value[key], want[key]):
                yield f"{section}.{key}", want[key], value[key]


def formative_differences(formative: Dict[str, Any], logged: Dict[str, Any],
                          same: Callable[[Any, Any], bool]) -> Iterator[Tuple[str, str, Any, Any]]:
    """``(logged key, plan key, configured, logged)`` for every ``Formative ...`` value one rank
    logged (``logged``: its ``formative()``) differently from the plan's (a logged "op swap" is
    the plan's "op_swap")."""
    for logged_key, value in logged.items():
        key = logged_key.replace(" ", "_")
        if key not in formative:
            key = logged_key
        if key in formative and not same(value, formative[key]):
            yield logged_key, key, formative[key], value


def _config_sections(config: Optional["TrainingConfig"]) -> Optional[Dict[str, Dict[str, Any]]]:
    """The config's sections as MindFormers prints them in ``initial ... from dict`` (with its
    defaults filled in: :meth:`swapwatch.config.TrainingConfig.initial_dicts`)."""
    return None if config is None else config.initial_dicts()


def _geometry_values(g: "Geometry") -> Dict[str, Any]:
    """The :class:`~swapwatch.plan.Geometry` fields :data:`GEOMETRY` compares with the log, by name."""
    return {"layer_list": g.layer_list, "layer_accu": g.layer_accu, "pp_ids": g.pp_ids,
            "interleave_ids": g.interleave_ids}


def _source(rank_log: "RankLog", kind: str, key: str) -> Optional[str]:
    for e in rank_log.events:
        if e.kind != kind:
            continue
        if kind == "geometry" or (isinstance(e, FormativeEvent) and e.key == key) or (
                isinstance(e, InitialConfigEvent) and key.startswith(f"{e.section}.")):
            return e.source
    return rank_log.files[0] if rank_log.files else None


def _short(v: Any, limit: int = 120) -> str:
    text = canon_text(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."
