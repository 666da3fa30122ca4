"""The tiny model has MindFormers' cell tree, and hooks.apply makes the calls and says what it did.

Real MindSpore cells (no compile needed): the applied attributes are read back from the primitives
and cells themselves, and the text lines are compared with what the layout-driven walk predicts.
"""
import pytest

ms = pytest.importorskip("mindspore")

from runtime_helpers import REPO, single_stage_plan  # noqa: E402
from swapwatch.model import patterns  # noqa: E402
from swapwatch.engine import strategy  # noqa: E402
from swapwatch.model.event_lines import parse_event  # noqa: E402
from swapwatch.examples.tinyllama import TinyLlama  # noqa: E402
from swapwatch.hooks.apply import ApplyError, CellAdapter, apply  # noqa: E402
from swapwatch.layouts import load_layout  # noqa: E402

pytestmark = pytest.mark.runtime


def _paths(adapter, cell, prefix=""):
    out = [(prefix + name, "prim") for name, _ in adapter.leaf_attrs(cell)]
    for name, child in adapter.children(cell):
        out.append((prefix + name, "cell"))
        out.extend(_paths(adapter, child, prefix + name + "."))
    return out


@pytest.fixture
def net():
    return TinyLlama(n_layers=4)


def test_real_layer_tree_equals_layout_yaml(net):
    assert _paths(CellAdapter(), net.layers[0]) == load_layout("tinyllama").paths()


@pytest.mark.parametrize("pattern, mode", [
    (r".*\.norm", "comm"), (r"feed_forward\.w[123]", "recompute"), (r".*\.flash_attention", "swap"),
    ("attention", "swap"), (r"feed_forward\.w1\.activation\.silu", "recompute"), (r"attention\.w.\.reshape", "exclude"),
])
def test_walk_over_real_cells_equals_walk_over_layout(net, pattern, mode):
    real = patterns.walk(CellAdapter(), net.layers[0], pattern, mode)
    layout = patterns.walk_layout(load_layout("tinyllama"), pattern, mode)
    assert real.raw_log == layout.raw_log
    assert [(t.path, t.kind) for t in real.targets] == [(t.path, t.kind) for t in layout.targets]


def _events(applied, kind="apply"):
    return [e for e in map(parse_event, applied.events) if e["kind"] == kind]


def test_non_swap_order_text_and_events(net):
    plan = single_stage_plan(4, layers={
        0: {"full_recompute": True, "select_recompute_exclude": [r"feed_forward\.mul"]},
        1: {"select_recompute": [r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu"],
            "select_comm_recompute": [r".*\.norm"], "select_comm_recompute_exclude": [r"attention_norm\.norm"]},
        2: {"select_recompute": [r"feed_forward\.w[123]"]},
    })
    out = apply(net.layers, plan, rank=3)
    set_lines = [ln for ln in out.lines if ln.startswith("Set ")]
    assert set_lines == [
        "Set full recompute at layer 0",
        "Set select recompute exclude at layer 0: feed_forward.mul",
        "Set select recompute on at layer 1: feed_forward.mul, feed_forward.w1.activation.silu",
        "Set select comm recompute on at layer 1: ffn_norm.norm, attention_norm.norm",
        "Set select comm recompute exclude at layer 1: attention_norm.norm",
        "Set select recompute on at layer 2: feed_forward.w3",      # MindFormers logs the last leaf only
    ]
    ev = _events(out)
    assert all(e["rank"] == 3 for e in ev)
    assert [(e["layer"], e["action"]) for e in ev] == [
        (0, "full_recompute"), (0, "select_recompute_exclude"), (1, "select_recompute"), (1, "select_recompute"),
        (1, "select_comm_recompute"), (1, "select_comm_recompute_exclude"), (2, "select_recompute")]
    assert ev[-1]["paths"] == ["feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]   # ALL paths
    assert _events(out, "plan")[0]["num_layers"] == 4
    # what MindSpore now holds
    l0, l1, l2 = net.layers[0], net.layers[1], net.layers[2]
    assert l0._scope.startswith("recompute_") and l0.feed_forward.mul.attrs["recompute"] is False
    assert l1.feed_forward.mul.attrs["recompute"] is True
    assert l1.feed_forward.w1.activation.silu.attrs["recompute"] is True
    assert l1.ffn_norm.norm.attrs["recompute_comm_op"] is True
    assert l1.attention_norm.norm.attrs["recompute_comm_op"] is False
    assert all(getattr(l2.feed_forward, w)._scope.startswith("recompute_") for w in ("w1", "w2", "w3"))
    assert not net.layers[3]._scope or not net.layers[3]._scope.startswith("recompute_")


def test_swap_mode_quirks_match_mindformers_bytes(net):
    """A swap-mode scenario run on real MindFormers 2.1.0 (LayerSetting): same lines, byte for byte."""
    plan = single_stage_plan(4, swap=True, layers={
        0: {"layer_swap": 1},
        1: {"select_recompute": [r"feed_forward\.mul"], "op_swap": {r".*\.flash_attention": 2}},
        2: {"select_recompute": [r"feed_forward\.w1\.activation\.silu", r"feed_forward\.mul"],
            "op_swap": {r".*\.flash_attention": 2}},
        3: {"full_recompute": True, "op_swap": {r"feed_forward\.w2": 3}},
    }, formative={"layer_recompute": [3], "layer_swap": [{"backward_prefetch": 1, "layers": [0]}]})
    out = apply(net.layers, plan, quirks=True)
    assert [ln for ln in out.lines if ln.startswith("Set ")] == [
        "Set layer swap at layer 0                             and value is: 1",
        "Set select recompute at layer 1: feed_forward.mul",
        "Set op_swap at layer 1:  attention.flash_attention, value=2",
        "Set select recompute at layer 2: feed_forward.w1.activation.silu, feed_forward.mul",
        "Set op_swap at layer 2:  attention.flash_attention, value=2",
        "Set full recompute at layer 3",
        "Set op_swap at layer 3:  feed_forward.w2, value=3",
    ]
    assert "Formative layer swap: [{'backward_prefetch': 1, 'layers': [0]}]" in out.lines
    # layer 0: every primitive offloaded with prefetch 1; layer 3: w2 prims with 3, and fully recomputed
    l0, l3 = net.layers[0], net.layers[3]
    assert l0.attention.wq.matmul.attrs["offload"] is True and l0.attention.wq.matmul.attrs["backward_prefetch"] == 1
    assert l3.feed_forward.w2.matmul.attrs["backward_prefetch"] == 3 and l3._scope.startswith("recompute_")
    assert net.layers[1].attention.flash_attention.softmax.attrs["backward_prefetch"] == 2


def test_swap_mode_normalised_text(net):
    plan = single_stage_plan(4, swap=True, layers={1: {"op_swap": {"attention": 20, "feed_forward": 15}}})
    out = apply(net.layers, plan)
    assert "Set op_swap at layer 1: attention, value=20, feed_forward, value=15" in out.lines
    quirky = apply(TinyLlama(n_layers=4).layers, plan, quirks=True)
    assert "Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15" in quirky.lines


def test_recompute_true_under_swap_logs_no_full_line(net):
    # the engine decides that swap mode + `recompute: True` recomputes every layer silently
    # (LayerSetting.set_recompute_select_layer_index)
    from swapwatch.config import config_from_dicts
    from swapwatch.engine.strategy import plan as make_plan
    plan = make_plan(config_from_dicts({"recompute": True}, {"swap": True, "layer_swap": [], "op_swap": []},
                                       num_layers=2, pipeline_stage=1))
    assert [lp.full_recompute for lp in plan.layers] == [True, True]
    out = apply(TinyLlama(n_layers=2).layers, plan)
    assert not [ln for ln in out.lines if ln.startswith("Set full")]
    assert any("All layers and ops that are enabled swap do not work!" in ln for ln in out.lines)
    assert [e["action"] for e in _events(out)] == ["full_recompute", "full_recompute"]


def test_cell_match_for_comm_is_skipped_with_mindformers_info_line(net):
    plan = single_stage_plan(4, layers={0: {"select_comm_recompute": ["attention"]}})
    out = apply(net.layers, plan)
    assert ("For communication recompute, attention is expected to be operation but got cell, "
            "this configuration will not be effective.") in out.lines
    assert not _events(out)


def test_layer_count_mismatch_is_a_clear_error(net):
    with pytest.raises(ApplyError, match="4 decoder layers but the plan has 2"):
        apply(net.layers, single_stage_plan(2))


def test_logger_prefix_is_mindformers_format(net, capsys):
    apply(net.layers, single_stage_plan(4, layers={0: {"full_recompute": True}}))
    line = [ln for ln in capsys.readouterr().out.splitlines() if "Set full recompute" in ln][0]
    import re
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - swapwatch\[swapwatch/hooks/apply\.py:\d+\] - INFO - "
                    r"Set full recompute at layer 0$", line)


def test_with_the_real_engine_events_match_the_plan(tmp_path):
    from swapwatch.config import load_config
    from pathlib import Path
    cfg = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "demo_recompute.yaml"
    plan = strategy.plan(load_config(str(cfg)))
    out = apply(TinyLlama(n_layers=plan.geometry.num_layers).layers, str(cfg))
    got = {(e["layer"], e["action"]) for e in _events(out)}
    want = set()
    for lp in plan.layers:
        if lp.full_recompute:
            want.add((lp.layer, "full_recompute"))
        for action in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                       "select_comm_recompute_exclude"):
            if getattr(lp, action):
                want.add((lp.layer, action))
    assert got == want
    assert _events(out, "plan")[0]["config_sha256"]


@pytest.mark.parametrize("name", ["swap_case1", "swap_case2", "swap_case3", "swap_case4",
                                  "select_recompute", "conflict", "demo_recompute"])
def test_hook_text_is_byte_identical_to_the_engines_mindformers_text(name):
    # The engine's text is checked against real MindFormers 2.1.0 (tests/test_oracle.py); the hooks
    # walk real MindSpore cells through the same function, so with quirks they must log the same.
    from swapwatch.config import load_config
    from swapwatch.engine.strategy import layer_setting_lines, plan as make_plan
    plan = make_plan(load_config(str(REPO / "fixtures" / "configs" / f"{name}.yaml")))
    out = apply(TinyLlama(n_layers=len(plan.layers)).layers, plan, quirks=True)
    assert out.lines == layer_setting_lines(plan)
    assert any(ln.startswith("Set ") for ln in out.lines)
