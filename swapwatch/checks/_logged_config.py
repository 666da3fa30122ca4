"""What SW107 (the logged config differs from --config) and SW109 (the log is not a run of this config) both
read: the config's sections as MindFormers logs them, the differences between logged and configured values, and
where in a rank's log a value was printed. A library of the rules, not a rule (a rule module is never imported by
another).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Tuple

from ..engine.compare import canon_text
from ..parsers.model import FormativeEvent, InitialConfigEvent

if TYPE_CHECKING:
    from ..config import TrainingConfig
    from ..parsers.model import RankLog
    from ..model.plan import Geometry

GEOMETRY = (("layer_list", "layer_list"), ("layer_accu", "layer_accu"),
            ("pp_ids", "pp_ids"), ("interleave_ids", "interleave_ids"))



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


def config_sections(config: Optional["TrainingConfig"]) -> Optional[Dict[str, Dict[str, Any]]]:
    """The config's sections as MindFormers prints them in ``initial ... from dict`` (with its
    defaults filled in: :meth:`swapwatch.config.TrainingConfig.initial_dicts`)."""
    return None if config is None else config.initial_dicts()


def geometry_values(g: "Geometry") -> Dict[str, Any]:
    """The :class:`~swapwatch.model.plan.Geometry` fields :data:`GEOMETRY` compares with the log, by name."""
    return {"layer_list": g.layer_list, "layer_accu": g.layer_accu, "pp_ids": g.pp_ids,
            "interleave_ids": g.interleave_ids}


def source_of(rank_log: "RankLog", kind: str, key: str) -> Optional[str]:
    for e in rank_log.events:
        if e.kind != kind:
            continue
        if kind == "geometry" or (isinstance(e, FormativeEvent) and e.key == key) or (
                isinstance(e, InitialConfigEvent) and key.startswith(f"{e.section}.")):
            return e.source
    return rank_log.files[0] if rank_log.files else None


def short(v: Any, limit: int = 120) -> str:
    text = canon_text(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."
