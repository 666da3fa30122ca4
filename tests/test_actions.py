"""The action vocabulary (swapwatch.model.actions) is the one table every module reads, in MindFormers' order."""
from __future__ import annotations

from pathlib import Path

from swapwatch.model import actions, event_lines as events
from swapwatch.report import layer_table
from swapwatch.engine import strategy
from swapwatch.engine import compare
from swapwatch.hooks import apply
from swapwatch.parsers import iter_events
from swapwatch.parsers.model import ActionEvent
from swapwatch.plot import strategy_map

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def test_every_vocabulary_is_read_from_the_one_table():
    assert events.ACTIONS == actions.NAMES
    assert list(layer_table.COLUMNS) == list(actions.NAMES)
    assert layer_table.WALK_MODE is actions.WALK_MODE is strategy.WALK_MODE
    assert compare.ACTIONS is actions.NAMES
    assert not hasattr(compare, "WALK_MODE") and not hasattr(compare, "LABEL")   # no second copy
    assert [m for m, _, _ in strategy_map.MECHANISMS] == list(actions.NAMES)
    assert [k for k, _ in strategy.SELECT_KEYS] == list(actions.SELECT_ACTIONS)
    assert {apply._ACTION_OF_MODE[m] for m in actions.WALK_MODE.values()} == set(actions.PATTERN_ACTIONS)


def test_kinds_are_consistent():
    assert actions.SWAP_ACTIONS == ("layer_swap", "op_swap")
    assert actions.WHOLE_LAYER_ACTIONS == ("full_recompute", "layer_swap")
    assert all(actions.BY_NAME[a].walk_mode for a in actions.PATTERN_ACTIONS)
    assert {a for a in actions.NAMES if actions.BY_NAME[a].exclude} == {
        "select_recompute_exclude", "select_comm_recompute_exclude"}
    assert len(set(actions.COLUMNS.values())) == len(actions.NAMES)        # table headers are distinct
    assert actions.label("nonsense") == "nonsense"


def test_table_order_is_the_order_real_mindformers_logs_actions_in():
    """Within one layer, real MindFormers 2.1.0 (fixtures/logs, made by make_oracle_logs.py / make_family_logs.py)
    logs actions in the table's order."""
    order = {a: i for i, a in enumerate(actions.NAMES)}
    seen = set()
    for log in sorted(LOGS.glob("swap_case*.log")) + sorted((LOGS / "families").glob("*.log")):
        last = {}
        for ev in iter_events([str(log)], show_progress=False):
            if isinstance(ev, ActionEvent):
                seen.add(ev.action)
                key = (ev.rank, ev.layer)
                assert order[ev.action] >= last.get(key, -1), (log.name, ev.layer, ev.action)
                last[key] = order[ev.action]
    assert {"full_recompute", "select_recompute", "layer_swap", "op_swap"} <= seen
