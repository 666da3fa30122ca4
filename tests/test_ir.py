"""IR evidence from the trimmed real dumps in fixtures/ir/ (see fixtures/ir/make_ir.py): no MindSpore needed."""
from pathlib import Path

import pytest

from swapwatch.checks import CheckContext, run_rules
from swapwatch.errors import InputError
from swapwatch.parsers.ir import cell_path, iter_nodes, offload_outside_lazy_inline, read_ir

IR = Path(__file__).resolve().parents[1] / "fixtures" / "ir"


def _ev(name):
    return list(read_ir(IR / name))[0]


def test_scope_to_layer_and_cell_path():
    assert cell_path("recompute_Default/network-WithLoss/net-TinyLlama/layers-CellList/3-LLamaDecodeLayer/"
                     "feed_forward-LlamaFeedForward/w1-Linear/activation-LlamaSiLU") == (3, "feed_forward.w1.activation")
    assert cell_path("Default/network-WithLoss/net-TinyLlama/lm_head-Linear") == (None, "")


def test_no_strategy_no_evidence():
    ev = _ev("none")
    assert sum(ev.clones.values()) == 0 and not ev.marked and not ev.offload


def test_full_recompute_layers_0_and_2():
    ev = _ev("full")
    assert ev.recomputed_layers() == [0, 2] == ev.cell_recompute_layers()
    assert ev.clone_count() == 86 and ev.clone_count(1) == 0
    assert "attention.flash_attention" in ev.recomputed_paths(0)


def test_select_recompute_clones_flash_attention_but_not_the_mul_silu_marks():
    ev = _ev("select")
    assert ev.clone_count() == 16
    assert all(ev.recomputed_paths(i) == ["attention.flash_attention"] for i in range(4))
    assert {(k[0], ev.op_path(k)) for k, _ in ev.ineffective_prim_marks()} == {
        (i, p) for i in range(4) for p in ("feed_forward.mul", "feed_forward.w1.activation.silu")}


def test_sw110_fires_on_dropped_prim_recompute_and_stays_quiet_on_effective_ones():
    for quiet in ("none", "full"):
        assert not run_rules(CheckContext(plan=None, ir=read_ir(IR / quiet)), needs=("ir",))
    found = run_rules(CheckContext(plan=None, ir=read_ir(IR / "prim")), needs=("ir",))
    assert {f.code for f in found} == {"SW110"} and len(found) == 8
    assert all(f.severity == "error" and f.source and ".ir:" in f.source for f in found)


def test_sw110_when_a_planned_full_recompute_has_no_clones():
    from runtime_helpers import single_stage_plan
    plan = single_stage_plan(4, layers={1: {"full_recompute": True}})
    found = run_rules(CheckContext(plan=plan, ir=read_ir(IR / "full")), needs=("ir",))
    assert [(f.code, f.layer) for f in found] == [("SW110", 1)]


def test_offload_marks_outside_lazy_inline_are_reported():
    ev = _ev("offload")
    assert ev.offload_layers() == {1: ["2"], 3: ["1"]} and not ev.moveto
    lines = offload_outside_lazy_inline(ev)
    assert len(lines) == 2 and "layer 1: 33 node(s)" in lines[0] and "no MoveTo" in lines[0]
    found = run_rules(CheckContext(plan=None, ir=read_ir(IR / "offload")), needs=("ir",))
    assert [(f.code, f.layer) for f in found] == [("SW111", 1), ("SW111", 3)]


def test_per_rank_layout_and_bad_paths(tmp_path):
    import shutil
    for r in (0, 1):
        shutil.copytree(IR / "full", tmp_path / f"rank_{r}")
    assert sorted(read_ir(tmp_path).ranks) == [0, 1]
    with pytest.raises(InputError):
        read_ir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*add_recomputation"):
        read_ir(tmp_path / "empty")


def test_nodes_stream_with_their_scopes():
    nodes = list(iter_nodes(next((IR / "full").glob("*add_recomputation*.ir"))))
    assert nodes and all(n.line > 0 for n in nodes)
    assert any(n.duplicated and n.scope.startswith("recompute_") for n in nodes)
