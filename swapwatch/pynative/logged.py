"""The ``apply_ac`` path's side of the one plan-vs-log comparison (:mod:`swapwatch.engine.compare`).

What a :class:`~swapwatch.pynative.resolve.PynativePlan` makes a PyNative (r2.x) run log (:func:`expected_log`) and
how its log reads back (:data:`APPLY_AC_LOG`): ``apply_ac`` logs the module paths it wrapped (``Set ... at layer i:
a, b``, in :mod:`swapwatch.model.setting_lines`' words), so each configured item is a resolved path matched as written
(``Expected.literal``); its "Final ... Configuration Map" entries are items too (action ``map:<label>``), and its
notices (MindFormers refused the strategy, a pattern matched no module, the trainer's world size) are the rank's
:class:`~swapwatch.engine.compare.Notices`. With pipeline parallel each stage runs ``apply_ac`` on its own chunk of
layers (``apply_pp``), so a rank logs only its own stage's layers (``ExpectedLog.per_stage``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..model import actions
from ..engine.compare import Expected, ExpectedLog, Notices, Seen, seen_items
from ..parsers.model import NoticeEvent
from ..model.setting_lines import MAP_ACTION
from .layer_paths import layer_lists

if TYPE_CHECKING:
    from ..parsers.model import RankLog
    from .resolve import PynativePlan


def expected_log(plan: "PynativePlan") -> ExpectedLog:
    """Per global layer id, what ``apply_ac`` logs for ``plan``: its ``Set ...`` lines' paths (whole-layer
    actions as one item) and its maps' entries, in ``apply_recompute`` / ``apply_swap`` order."""
    items: Dict[int, List[Expected]] = {}
    for la in plan.layers:
        row: List[Expected] = []
        for action, paths in la.actions().items():
            if action in actions.WHOLE_LAYER_ACTIONS:
                row.append(Expected(la.layer, action))
            else:
                row.extend(Expected(la.layer, action, p, None, [p], resolved=True, literal=True) for p in paths)
        items[la.layer] = row
    for label, entries in plan.maps.items():
        for layer, paths in entries.items():
            items.setdefault(layer, []).extend(
                Expected(layer, MAP_ACTION + label, p, None, [p], resolved=True, literal=True) for p in paths)
    cfg = plan.config
    known = frozenset(p for ps in layer_lists(cfg.family, cfg.num_layers, cfg.mtp_layers, cfg.first_k_dense).values()
                      for p in ps)
    return ExpectedLog(items, known, per_stage=cfg.pipeline_parallel > 1, unmatched=frozenset(plan.no_match))


class _ApplyAcLog:
    """A PyNative rank's log read back: the ``Set ...`` lines (the parsers' action events) and the map entries as
    items, and its notices."""

    def seen(self, rank_log: "RankLog") -> Dict[int, List[Seen]]:
        out = seen_items(rank_log)
        label: Optional[str] = None
        for e in rank_log.events:
            if not isinstance(e, NoticeEvent):
                continue
            if e.what == "pyn_map_start":
                label = e.data["label"]
            elif e.what == "pyn_map_end":
                label = None
            elif e.what == "pyn_map_entry" and label is not None:
                layer = e.data["layer"]
                row = out.setdefault(layer, [])
                action = MAP_ACTION + label
                done = {s.path for s in row if s.action == action}
                row.extend(Seen(layer, action, p, True, e.source) for p in e.data["paths"] if p not in done)
        return out

    def notices(self, rank_log: "RankLog") -> Notices:
        found: List[Any] = [e for e in rank_log.events if isinstance(e, NoticeEvent)]
        world = [n.data["n"] for n in found if n.what == "world_size"]
        return Notices(refused=tuple(n for n in found if n.what == "pyn_config_error"
                                     and n.data.get("level") in ("ERROR", None)),
                       no_match=tuple(n for n in found if n.what == "pattern_no_match"),
                       applies=not (world and world[-1] == 1),
                       any=bool(found))


#: the ``apply_ac`` path's reader (``codepaths.ApplyAc.logged``)
APPLY_AC_LOG = _ApplyAcLog()
