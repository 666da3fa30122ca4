"""``plot strategy`` for PyNative (r2.x) configs and runs: the rows and differences the shared map draws.

:mod:`swapwatch.plot.strategy_map` draws the layer × mechanism map; this module gives it a PyNative plan's
rows (one per applied path: items are module paths, not regexes, since ``apply_ac`` logs paths), the swap
cells' label (``→j``: the layer whose tensors are prefetched with it) and the config-vs-log differences,
taken from verify's comparison (:mod:`swapwatch.compare`) so that the plot and ``swapwatch verify`` cannot disagree.
An op swap that recompute makes wrap nothing (SW504) is crossed out; a comm path that is a cell (SW507) is
drawn as voided. Stages are not drawn: ``apply_ac`` works on global layer ids.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import pandas as pd

from .. import actions

if TYPE_CHECKING:
    from .resolve import PynativePlan

_WHOLE = actions.WHOLE_LAYER_ACTIONS


def _row(layer: int, mech: str, item: Any, value: Any = True, overridden: bool = False, why: str = "",
         effect: str = "") -> tuple:
    return ("config", None, layer, 0, 0, mech, item, value, overridden, False, why, (), effect)


def config_rows(plan: PynativePlan) -> List[tuple]:
    """Rows in ``strategy_map.FRAME_COLUMNS`` order for every layer of ``plan``."""
    from ..plot.strategy_map import NOT_EFFECTIVE
    rows = []
    for la in plan.layers:
        arrow = f"→{la.prefetch_to}" if la.prefetch_to is not None else ""
        if la.full:
            rows.append(_row(la.layer, "full_recompute", None))
        rows += [_row(la.layer, "select_recompute", p) for p in la.select]
        rows += [_row(la.layer, "select_comm_recompute", p) for p in la.comm]
        rows += [_row(la.layer, "select_comm_recompute", p, why="a cell: comm recompute wraps only operations "
                      "(SW507)", effect=NOT_EFFECTIVE) for p in la.comm_cells]
        rows += [_row(la.layer, "select_recompute_exclude", p) for p in la.exclude]
        if la.layer_swap:
            rows.append(_row(la.layer, "layer_swap", None, arrow))
        rows += [_row(la.layer, "op_swap", p, arrow) for p in la.op_swap]
        rows += [_row(la.layer, "op_swap", p, arrow, True, "listed in the swap map, wraps nothing: recompute "
                      "wrapped the layer or a cell on the path first (SW504)") for p in la.op_swap_void]
    return rows


def log_values(frame: pd.DataFrame, plan: PynativePlan) -> pd.DataFrame:
    """PyNative swap lines carry no prefetch: label logged swap cells with the plan's ``→j`` instead."""
    if frame.empty:
        return frame
    to = {la.layer: la.prefetch_to for la in plan.layers}
    frame = frame.copy()
    frame.attrs["pynative"] = True
    swap = frame["mechanism"].isin(list(actions.SWAP_ACTIONS))
    if not swap.any():
        return frame
    frame["value"] = frame["value"].astype(object)
    frame.loc[swap, "value"] = [f"→{to[int(layer)]}" if to.get(int(layer)) is not None else ""
                                for layer in frame.loc[swap, "layer"]]
    return frame


def differences(plan: PynativePlan, runlog: Any, rank: int) -> pd.DataFrame:
    """Cells where ``rank``'s log differs from the plan (``missing`` / ``extra``), map entries left out: verify's
    comparison (``compare.compare`` on this path's expected log and reader)."""
    from ..compare import compare
    from .logged import APPLY_AC_LOG, expected_log

    comp = compare(expected_log(plan), runlog, APPLY_AC_LOG)
    diff = comp.ranks[rank]
    #: layer, mechanism, item (None: the whole action), missing/extra, expected, actual (None: not a path row's side)
    rows: List[Tuple[int, str, Optional[str], str, Optional[bool], Optional[bool]]] = []
    for e in (comp.union or diff).missing:
        if e.action in _WHOLE:
            rows.append((e.layer, e.action, None, "missing", True, False))
        elif e.action in actions.NAMES:
            rows.append((e.layer, e.action, e.pattern, "missing", True, None))
    for s in diff.extra:
        if s.action in _WHOLE:
            rows.append((s.layer, s.action, None, "extra", False, True))
        elif s.action in actions.NAMES:
            rows.append((s.layer, s.action, s.path, "extra", None, True))
    rows.sort(key=lambda r: (r[0], r[1], r[2] or ""))
    return pd.DataFrame(rows, columns=["layer", "mechanism", "item", "kind", "expected", "actual"])
