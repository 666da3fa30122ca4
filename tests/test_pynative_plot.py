"""plot strategy for PyNative (r2.x) configs and runs: the cells drawn are the plan's / the log's, the
differences are verify's."""
from __future__ import annotations

import shutil
from pathlib import Path

from swapwatch.parsers import read_logs
from swapwatch.plot.commands import strategy_command
from swapwatch.plot.strategy_map import NOT_EFFECTIVE, plot_strategy, strategy_frame
from swapwatch.pynative import config as pconfig
from swapwatch.pynative.explain import explain_tree

REPO = Path(__file__).resolve().parents[1]
CFG = REPO / "fixtures" / "configs" / "pynative_qwen3_select.yaml"
LOGS = REPO / "fixtures" / "logs" / "pynative_qwen3"


def _plan():
    data, lines = pconfig.read_yaml(str(CFG))
    return explain_tree(data, lines, str(CFG)).plan


def test_config_frame_holds_the_plan_cells():
    f = strategy_frame(_plan())
    cells = {(r.layer, r.mechanism, r.item): r for r in f.itertuples()}
    assert (0, "full_recompute", None) in cells and (2, "layer_swap", None) in cells
    assert cells[(2, "layer_swap", None)].value == "→3"
    assert cells[(0, "op_swap", "mlp.linear_fc1")].overridden                 # SW504: wraps nothing
    assert cells[(2, "select_comm_recompute", "self_attention")].effect == NOT_EFFECTIVE
    assert (1, "select_recompute", "mlp.linear_fc1") not in cells               # deduped under mlp
    assert f.attrs["voided"] == "op swap listed in the swap map that wraps nothing (SW504)"   # the plan's legend


def test_logs_equal_to_config_draw_one_panel(tmp_path):
    res = plot_strategy(read_logs([str(LOGS)]), plan=_plan())
    res.save(str(tmp_path / "s.png"))
    assert res.diff.empty and len(res.frames) == 1 and (tmp_path / "s.png").stat().st_size > 0


def test_a_deleted_line_is_outlined(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(LOGS, d)
    for p in d.glob("worker_*.log"):
        p.write_text("".join(l for l in p.read_text().splitlines(True) if "Set layer swap at layer 2" not in l))
    res = plot_strategy(read_logs([str(d)]), plan=_plan())
    assert [(r.layer, r.mechanism, r.kind) for r in res.diff.itertuples()] == [(2, "layer_swap", "missing")]
    assert len(res.frames) == 2


def test_cli_command_for_config_and_logs(tmp_path):
    assert "PyNative (r2.x) path" in strategy_command(str(CFG), None, str(tmp_path / "c.png"))
    # a run against its YAML goes through verify, as on the LayerSetting paths: the same summary
    said = strategy_command(str(LOGS), str(CFG), str(tmp_path / "l.png"))
    assert "identical to the config" in said and "verify: PASS" in said, said
    assert (tmp_path / "c.png").exists() and (tmp_path / "l.png").exists()
