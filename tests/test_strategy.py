"""The engine pinned to worked examples: MindFormers' documented ones (docs/mindspore-facts.md §1) and
hand-written recompute (EX1b-EX8 + misc) and swap (SW1-SW9) scenarios.

Every expected value here is what MindFormers 2.1.0 prints or does (the oracle tier re-checks these
and hundreds of random configs against the real thing).
"""
import pytest

from swapwatch.engine import strategy
from swapwatch.config import config_from_dicts
from swapwatch.errors import ConfigError

OFFSET_48 = [[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
SEL_26 = {r"feed_forward\.w1\.activation\.silu": True, r"feed_forward\.mul": True,
          r"feed_forward\.w1\.matmul": [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]],
          r"feed_forward\.w3\.matmul": [2, 1, 0, 0, 0]}


def make(rc=None, sc=None, check_rules=True, **geo):
    geo.setdefault("num_layers", 4)
    return strategy.plan(config_from_dicts(rc or {}, sc or {}, check_rules=check_rules, **geo))


def formative(p):
    return {m.split(":", 1)[0]: m for m in strategy.formative_lines(p) if m.startswith("Formative")}


def full(p):
    return {lp.layer for lp in p.layers if lp.full_recompute}


def applied(p, key, pattern):
    return {lp.layer for lp in p.layers if pattern in getattr(lp, key)}


def lines(p):
    return strategy.expected_lines(p)


def p48(**rc):
    return make(rc, num_layers=48, pipeline_stage=5, pp_interleave_num=2, pipeline_interleave=True,
                offset=OFFSET_48)


# ---------------------------------------------------------------------------------------------
# the 48-layer example of MindFormers' recompute docs (docs/mindspore-facts.md §1.1)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seed():
    return p48(recompute=[[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]], select_recompute=SEL_26,
               select_comm_recompute=[r"ffn_norm\.norm", r"attention_norm\.norm"])


def test_26_geometry(seed):
    g = seed.geometry
    assert g.layer_list == [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]
    assert g.layer_accu == [[4, 9, 14, 19, 24], [29, 34, 39, 44, 48]]
    assert g.chunk_starts == [[0, 4, 9, 14, 19, 24], [24, 29, 34, 39, 44, 48]]
    assert g.pp_ids == [0] * 4 + [1] * 5 + [2] * 5 + [3] * 5 + [4] * 5 + [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5 + [4] * 4
    assert g.interleave_ids == [0] * 24 + [1] * 24
    init = strategy.formative_lines(seed)
    assert init[0] == "num_layers per stage: [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]"
    assert init[1] == "Accumulated num_layers per stage: [[4, 9, 14, 19, 24], [29, 34, 39, 44, 48]]"
    assert init[2].startswith("Pipeline id list with start_stage: [0, 0, 0, 0, 1, 1, 1, 1, 1, 2,")


def test_26_formative(seed):
    f = formative(seed)
    assert f["Formative layer_recompute"] == "Formative layer_recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]"
    assert f["Formative select_recompute"] == (
        "Formative select_recompute: {'feed_forward\\\\.w1\\\\.activation\\\\.silu': [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]], "
        "'feed_forward\\\\.mul': [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]], "
        "'feed_forward\\\\.w1\\\\.matmul': [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]], "
        "'feed_forward\\\\.w3\\\\.matmul': [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]}")
    assert f["Formative select_comm_recompute"] == (
        "Formative select_comm_recompute: {'ffn_norm\\\\.norm': [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]], "
        "'attention_norm\\\\.norm': [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]}")
    assert f["Formative select_recompute_exclude"] == "Formative select_recompute_exclude: {}"
    assert f["Formative select_comm_recompute_exclude"] == "Formative select_comm_recompute_exclude: {}"


def test_26_per_layer(seed):
    assert full(seed) == {0, 1, 4, 24}
    rest = set(range(48)) - {0, 1, 4, 24}
    assert applied(seed, "select_recompute", r"feed_forward\.w1\.activation\.silu") == rest
    assert applied(seed, "select_recompute", r"feed_forward\.mul") == rest
    assert applied(seed, "select_recompute", r"feed_forward\.w1\.matmul") == {25, 29}
    assert applied(seed, "select_recompute", r"feed_forward\.w3\.matmul") == set()     # shadowed
    assert applied(seed, "select_comm_recompute", r"ffn_norm\.norm") == rest
    assert seed.layers[0].select_recompute == []          # absent on fully recomputed layers
    ln = lines(seed)
    assert ln[0] == ["Set full recompute at layer 0"]
    assert ln[2] == ["Set select recompute on at layer 2: feed_forward.w1.activation.silu, feed_forward.mul",
                     "Set select comm recompute on at layer 2: ffn_norm.norm, attention_norm.norm"]
    assert ln[25][0] == ("Set select recompute on at layer 25: feed_forward.w1.activation.silu, "
                         "feed_forward.mul, feed_forward.w1.matmul")


def test_26_default_comm_order():
    p = make({"select_comm_recompute": True})
    assert lines(p)[0] == ["Set select comm recompute on at layer 0: ffn_norm.norm, attention_norm.norm"]


# ---------------------------------------------------------------------------------------------
# recompute scenarios, counts -> global layer ids
# ---------------------------------------------------------------------------------------------

def test_ex1b_interleave_off_with_2d_offset():
    with pytest.raises(ConfigError, match=r"offset has 2 rows but pp_interleave_num is 1 .*pipeline_interleave"):
        make({"recompute": True}, num_layers=48, pipeline_stage=5, pp_interleave_num=2,
             pipeline_interleave=False, offset=OFFSET_48)


def test_ex2_round_robin():
    p = p48(recompute=[3, 2, 1, 0, 0], select_recompute=[7, True, False, 0, 0])
    f = formative(p)
    assert f["Formative layer_recompute"] == "Formative layer_recompute: [[2, 1, 1, 0, 0], [1, 1, 0, 0, 0]]"
    assert f["Formative select_recompute"] == (
        "Formative select_recompute: {'feed_forward\\\\.mul': [[4, 5, 0, 0, 0], [3, 5, 0, 0, 0]], "
        "'feed_forward\\\\.w1\\\\.activation\\\\.silu': [[4, 5, 0, 0, 0], [3, 5, 0, 0, 0]]}")
    assert f["Formative select_comm_recompute"] == (
        "Formative select_comm_recompute: {'.*\\\\.norm': [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]}")
    assert full(p) == {0, 1, 4, 9, 24, 29}
    assert applied(p, "select_recompute", r"feed_forward\.mul") == {2, 3, 5, 6, 7, 8, 25, 26, 30, 31, 32, 33}


def test_ex3():
    p = make({"recompute": [1, 0], "select_recompute": True, "select_comm_recompute": [2]},
             num_layers=8, pipeline_stage=2)
    f = formative(p)
    assert f["Formative layer_recompute"].endswith("[[1, 0]]")
    assert f["Formative select_recompute"].endswith("[[4, 4]], 'feed_forward\\\\.w1\\\\.activation\\\\.silu': [[4, 4]]}")
    assert f["Formative select_comm_recompute"].endswith("{'.*\\\\.norm': [[2, 0]]}")
    assert full(p) == {0}
    assert applied(p, "select_recompute", r"feed_forward\.mul") == set(range(1, 8))
    assert applied(p, "select_comm_recompute", r".*\.norm") == {1}


def test_ex4_and_ex4b():
    p = make({"recompute": True}, num_layers=10, pipeline_stage=4, offset=[1, 0, 0, 1])
    assert p.geometry.layer_list == [[3, 2, 2, 3]]
    assert p.geometry.pp_ids == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert full(p) == set(range(10))
    assert all(lines(p)[i][0] == f"Set full recompute at layer {i}" for i in range(10))
    p = make({"recompute": [3, 1, 0, 9]}, num_layers=10, pipeline_stage=4, offset=[1, 0, 0, 1])
    assert formative(p)["Formative layer_recompute"].endswith("[[3, 1, 0, 3]]")
    assert full(p) == {0, 1, 2, 3, 7, 8, 9}


def test_ex5_numpy_reprs():
    p = make({"recompute": [[9, True], [0, False]], "select_recompute": {r"feed_forward\.mul": [True, [0, 1]]}},
             num_layers=8, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=True)
    f = formative(p)
    assert f["Formative layer_recompute"] == "Formative layer_recompute: [[2, 2], [0, 0]]"
    assert f["Formative select_recompute"] == (
        "Formative select_recompute: {'feed_forward\\\\.mul': [array([2, 2], dtype=int32), [0, 1]]}")
    assert full(p) == {0, 1, 2, 3}
    assert applied(p, "select_recompute", r"feed_forward\.mul") == {6}
    assert p.to_json()["formative"]["select_recompute"] == {r"feed_forward\.mul": [[2, 2], [0, 1]]}


def test_ex6_exclude_removes_select_everywhere():
    p = make({"select_recompute": {r"feed_forward\.mul": True, r"feed_forward\.w1\.activation\.silu": True},
              "select_recompute_exclude": {r"feed_forward\.m.l": [2]},
              "select_comm_recompute_exclude": {r"attention_norm\.norm": True, "attention": [1]}})
    init = strategy.formative_lines(p)
    assert ("The pattern feed_forward\\.mul in select_recompute conflicts with select_recompute_exclude "
            "and will be removed.") in init
    assert ("The pattern .*\\.norm in select_comm_recompute conflicts with select_comm_recompute_exclude "
            "and will be removed.") in init
    f = formative(p)
    assert f["Formative select_recompute"].endswith("{'feed_forward\\\\.w1\\\\.activation\\\\.silu': [[4]]}")
    assert f["Formative select_recompute_exclude"].endswith("{'feed_forward\\\\.m.l': [[2]]}")
    ln = lines(p)
    assert "Set select recompute exclude at layer 0: feed_forward.mul" in ln[0]
    assert "Set select recompute exclude at layer 1: feed_forward.mul" in ln[1]
    assert not any("Set select recompute exclude at layer 2" in x for x in ln[2])
    assert ("For select recompute/comm_recompute exclude, .attention is expected to be operation but got cell, "
            "this configuration will not be effective.") in ln[0]
    assert not any("got cell" in x for x in ln[1])
    assert all(f"Set select comm recompute exclude at layer {i}: attention_norm.norm" in ln[i] for i in range(4))
    assert applied(p, "select_recompute", r"feed_forward\.mul") == set()


def test_ex7_offset_sum():
    with pytest.raises(ConfigError) as e:
        make({}, num_layers=10, pipeline_stage=4)
    assert "add up to 0" in str(e.value) and "10 % (4 * 1) = 2" in str(e.value)


def test_ex8_leaf_under_reporting():
    p = make({"select_recompute": {r"feed_forward\.w[123]": True}})
    assert lines(p)[0] == ["Set select recompute on at layer 0: feed_forward.w3"]
    assert strategy.pattern_targets(p.fam.layout(p.layout_key(0)), r"feed_forward\.w[123]", "recompute") == [
        "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]


def test_misc_short_list():
    p = make({"recompute": [3]}, num_layers=8, pipeline_stage=2)
    assert formative(p)["Formative layer_recompute"].endswith("[[3, 0]]")
    assert full(p) == {0, 1, 2}


def test_misc_long_dict_value():
    with pytest.raises(ConfigError, match=r"select_recompute.*3 per-stage entries but there are only 2"):
        make({"select_recompute": {r"feed_forward\.mul": [1, 1, 1]}}, num_layers=8, pipeline_stage=2)


def test_misc_long_list_is_a_check_rules_error():
    with pytest.raises(ConfigError, match=r"recompute_config.recompute: has 3 per-stage counts"):
        make({"recompute": [1, 1, 1]}, num_layers=8, pipeline_stage=2)


def test_misc_2d_too_few_rows():
    cfg = config_from_dicts({"recompute": [[1, 1]]}, {}, num_layers=8, pipeline_stage=2, pp_interleave_num=2,
                            pipeline_interleave=True)
    with pytest.raises(ConfigError, match=r"interleave 1, stage 0 \(needed by layer 4\)"):
        strategy.plan(cfg)


def test_2d_table_for_default_patterns_crashes_mindformers():
    with pytest.raises(ConfigError, match="edited in place"):
        make({"select_recompute": [[1, True], [0, 5]]}, num_layers=8, pipeline_stage=2, pp_interleave_num=2,
             pipeline_interleave=True)


def test_same_primitive_recomputed_twice_crashes():
    with pytest.raises(ConfigError, match="feed_forward.mul"):
        make({"select_recompute": {r"feed_forward\.mul": True, r"feed_forward\.m.l": True}})


def test_negative_count_rejected():
    with pytest.raises(ConfigError, match="negative"):
        make({"select_recompute": {r"feed_forward\.mul": [-1]}})


# ---------------------------------------------------------------------------------------------
# swap scenarios (SW1-SW4: MindFormers' documented swap cases, docs/mindspore-facts.md §1.2)
# ---------------------------------------------------------------------------------------------

CASE3 = [{"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
         {"op_name": "attention", "backward_prefetch": 10, "layers": [3]},
         {"op_name": "feed_forward", "backward_prefetch": 15, "layers": [1, 2]}]


def test_sw1_default_strategy():
    p = make({}, {"swap": True, "default_prefetch": 10})
    assert formative(p)["Formative op swap"] == (
        "Formative op swap: {'.*\\\\.flash_attention': [{'backward_prefetch': 10, 'layers': True}]}")
    assert formative(p)["Formative layer swap"] == "Formative layer swap: []"
    for i in range(4):
        assert lines(p)[i] == [f"Set op_swap at layer {i}:  attention.flash_attention, value=10"]
        assert p.layers[i].op_swap == {r".*\.flash_attention": 10}


def test_sw2_layer_swap():
    p = make({}, {"swap": True, "layer_swap": [{"backward_prefetch": 20, "layers": [0, 3]}]})
    f = formative(p)
    assert f["Formative layer swap"] == "Formative layer swap: [{'backward_prefetch': 20, 'layers': [0, 3]}]"
    assert f["Formative op swap"] == "Formative op swap: {}"
    assert lines(p)[0] == ["Set layer swap at layer 0" + " " * 29 + "and value is: 20"]
    assert lines(p)[3] == ["Set layer swap at layer 3" + " " * 29 + "and value is: 20"]
    assert lines(p)[1] == []
    assert [lp.layer_swap for lp in p.layers] == [20, None, None, 20]


def test_sw3_op_swap_regrouped():
    p = make({}, {"swap": True, "op_swap": CASE3})
    assert formative(p)["Formative op swap"] == (
        "Formative op swap: {'attention': [{'backward_prefetch': 20, 'layers': [0, 1, 2]}, "
        "{'backward_prefetch': 10, 'layers': [3]}], 'feed_forward': [{'backward_prefetch': 15, 'layers': [1, 2]}]}")
    assert lines(p)[1] == ["Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15"]
    assert lines(p)[3] == ["Set op_swap at layer 3: .attention, value=10"]
    assert p.layers[3].op_swap == {"attention": 10}


def test_sw4_cell_select_in_swap_mode():
    p = make({"select_recompute": {"feed_forward": [0, 3]}}, {"swap": True, "op_swap": CASE3})
    assert lines(p)[0][0] == "Set select recompute at layer 0: feed_forward"
    assert all(not lp.swap_overridden for lp in p.layers)


def test_sw5_conflicts():
    p = make({"recompute": [0, 1], "select_recompute": {r"feed_forward\.w1": [1, 2], r"feed_forward\.mul": True}},
             {"swap": True, "layer_swap": [{"backward_prefetch": 2, "layers": True}],
              "op_swap": [{"op_name": r"feed_forward\.w1", "backward_prefetch": 1, "layers": [2, 3]}]},
             check_rules=False)
    tail = "is enabled swap do not work! Because it is enabled recompute."
    assert p.warnings == [
        f"All operator in layer 0 that{' ' * 31}{tail}",
        f"All operator in layer 1 that{' ' * 31}{tail}",
        f"feed_forward\\.w1 operator in layer 1 that{' ' * 31}{tail}",
        f"feed_forward\\.w1 operator in layer 2 that{' ' * 31}{tail}",
        f"feed_forward\\.w1 operator in layer 2 that{' ' * 35}{tail}",
        f"feed_forward\\.mul operator in all layers that is enabled swap do not work!{' ' * 35}"
        f"Because it is enabled recompute."]
    assert full(p) == {0, 1}
    ln = lines(p)
    assert ln[0] == ["Set full recompute at layer 0", "Set layer swap at layer 0" + " " * 33 + "and value is: 2"]
    assert ln[2] == ["Set select recompute at layer 2: feed_forward.w1, feed_forward.mul",
                     "Set layer swap at layer 2" + " " * 33 + "and value is: 2",
                     "Set op_swap at layer 2:  feed_forward.w1, value=1"]
    assert p.layers[0].swap_overridden == [strategy.Override("layer", "layer_swap", None,
                                                             "the whole layer is recomputed")]
    assert strategy.Override("op", "op_swap", r"feed_forward\.w1", r"select recompute 'feed_forward\.w1' recomputes it") \
        in p.layers[2].swap_overridden
    assert [o.entry for o in p.layers[2].swap_overridden] == [r"feed_forward\.w1", r"layer_swap[feed_forward\.w1]",
                                                              r"layer_swap[feed_forward\.mul]"]
    assert p.layers[2].op_swap_voided(r"feed_forward\.w1") and not p.layers[2].layer_swap_voided
    assert p.layers[2].layer_swap_touched


def test_sw6_recompute_true_is_silent():
    p = make({"recompute": True}, {"swap": True, "layer_swap": [{"backward_prefetch": "Auto", "layers": [1]}]},
             check_rules=False)
    assert p.warnings == ["All layers and ops that are enabled swap do not work!" + " " * 27 +
                          "Because recompute = True."]
    assert formative(p)["Formative layer_recompute"] == "Formative layer_recompute: True"
    ln = lines(p)
    assert ln[0] == [] and ln[1] == ["Set layer swap at layer 1" + " " * 29 + "and value is: Auto"]
    assert full(p) == {0, 1, 2, 3} and not p.layers[1].full_recompute_logged
    assert [o.entry for o in p.layers[1].swap_overridden] == ["layer_swap"] and p.layers[1].layer_swap_voided


def test_sw6_auto_rejected_on_legacy_path():
    with pytest.raises(ConfigError, match="Auto"):
        make({"recompute": True}, {"swap": True, "layer_swap": [{"backward_prefetch": "Auto", "layers": [1]}]})


def test_sw7_op_name_list_and_multi_segment_text():
    p = make({}, {"swap": True, "op_swap": [{"op_name": [r"feed_forward\.w1", r"feed_forward\.mul"],
                                             "backward_prefetch": 3, "layers": True}]})
    assert lines(p)[0] == ["Set op_swap at layer 0:  feed_forward.w1, value=3,  feed_forward.mul, value=3"]


def test_swap_value_on_every_leaf():
    p = make({}, {"swap": True, "op_swap": [{"op_name": r".*\.norm", "backward_prefetch": 2, "layers": True}]})
    assert lines(p)[0] == ["Set op_swap at layer 0:  ffn_norm.norm, value=2, attention_norm.norm, value=2"]


def test_sw8_layer_ids():
    p = make({"recompute": [2, 1]}, {"swap": True}, num_layers=8, pipeline_stage=2)
    assert formative(p)["Formative layer_recompute"] == "Formative layer_recompute: [2, 1]"
    assert full(p) == {1, 2}
    assert lines(p)[1][0] == "Set full recompute at layer 1"


def test_sw9_exclude_formatted_never_applied():
    p = make({"select_recompute": {r"feed_forward\.mul": [0, 1]},
              "select_recompute_exclude": {r"feed_forward\.w1\.activation\.silu": [3]}}, {"swap": True})
    assert formative(p)["Formative select_recompute_exclude"].endswith(
        "{'feed_forward\\\\.w1\\\\.activation\\\\.silu': [[3]]}")
    assert all(lp.select_recompute_exclude == [] for lp in p.layers)
    assert lines(p)[0] == ["Set select recompute at layer 0: feed_forward.mul",
                           "Set op_swap at layer 0:  attention.flash_attention, value=1"]


def test_sw10_exclude_count_list_has_no_patterns():
    # One might expect an IndexError here, but the exclude keys have no default patterns, so a
    # bare list formats to {} and MindFormers 2.1.0 runs (confirmed by the oracle tier).
    p = make({"select_recompute_exclude": [1, 2]}, {"swap": True})
    assert formative(p)["Formative select_recompute_exclude"] == "Formative select_recompute_exclude: {}"


def test_comm_on_cell_is_skipped_with_info_line():
    p = make({"select_comm_recompute": {"attention": True}})
    assert lines(p)[0] == ["For communication recompute, .attention is expected to be operation but got cell, "
                           "this configuration will not be effective."]


def test_legacy_bool_recompute_logs_nothing():
    cfg = config_from_dicts({"recompute": [1]}, {}, parallel_config={"recompute": True, "pipeline_stage": 1},
                            num_layers=3)
    p = strategy.plan(cfg)
    assert full(p) == {0, 1, 2} and p.formative == {}
    assert all(x == [] for x in lines(p).values())
    assert len(strategy.formative_lines(p)) == 4       # geometry only


def test_to_json_shape():
    p = make({"select_recompute": {r"feed_forward\.mul": True}},
             {"swap": True, "op_swap": [{"op_name": "attention", "backward_prefetch": 20, "layers": True}]},
             check_rules=False)
    doc = p.to_json()
    assert set(doc) == {"num_layers", "pipeline_stage", "pp_interleave_num", "swap", "formative", "layers", "findings",
                        "family", "mtp"}
    assert doc["layers"][0] == {"layer": 0, "stage": 0, "interleave": 0, "full_recompute": False,
                                "select_recompute": [r"feed_forward\.mul"], "select_comm_recompute": [],
                                "select_recompute_exclude": [], "select_comm_recompute_exclude": [],
                                "layer_swap": None, "op_swap": {"attention": 20}, "swap_overridden": []}
    assert set(doc["formative"]) == {"layer_recompute", "select_recompute", "select_comm_recompute",
                                     "select_recompute_exclude", "select_comm_recompute_exclude",
                                     "layer_swap", "op_swap"}


def test_mf_repr_is_numpy1_style():
    import numpy as np

    assert strategy.mf_repr([np.int32(4), np.int64(0)]) == "[4, 0]"
    assert strategy.mf_repr({"a\\.b": np.array([1, 2], np.int32)}) == "{'a\\\\.b': array([1, 2], dtype=int32)}"
