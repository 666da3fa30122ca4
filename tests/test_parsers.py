"""Every line family on real-format fixtures (MindFormers 2.1.0 oracle output and documented excerpts).

The expected values are what MindFormers printed (fixtures/logs/*.log, see its README) or what the
MindFormers / MindSpore docs quote (docs/mindspore-facts.md §2-§3); round trips are exact: values equal the repr in the line minus numpy wrappers.
"""
import os

import pytest

from swapwatch.parsers import iter_events, read_logs
from swapwatch.parsers.classify import classify
from swapwatch.parsers.layersetting import parse_op_swap_items, split_paths
from swapwatch.parsers.prefix import split
from swapwatch.parsers.values import Unparsed, literal, rewrite_numpy

LOGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs")


def log(name):
    return os.path.join(LOGS, name)


def events(name, **kw):
    return list(iter_events([log(name)], show_progress=False, **kw))


def of(evs, kind, **match):
    return [e for e in evs if e.kind == kind and all(getattr(e, k) == v for k, v in match.items())]


# ---- the four documented swap cases (real MindFormers 2.1.0 output) ---------------------------

def test_swap_case1_default_strategy_double_space_items():
    evs = events("swap_case1.log")
    acts = of(evs, "action")
    assert [(a.layer, a.action, a.paths, a.values) for a in acts] == [
        (i, "op_swap", ["attention.flash_attention"], {"attention.flash_attention": 10}) for i in range(4)]
    fm = {e.key: e.value for e in of(evs, "formative")}
    assert fm["op swap"] == {".*\\.flash_attention": [{"backward_prefetch": 10, "layers": True}]}
    assert fm["layer swap"] == [] and fm["layer_recompute"] == []


def test_swap_case2_layer_swap_whitespace_run():
    evs = events("swap_case2.log")
    assert [(a.layer, a.action, a.value, a.swap_mode) for a in of(evs, "action")] == [
        (0, "layer_swap", 20, True), (3, "layer_swap", 20, True)]
    assert {e.key: e.value for e in of(evs, "formative")}["layer swap"] == [{"backward_prefetch": 20, "layers": [0, 3]}]


def test_swap_case3_one_segment_items_with_dots():
    evs = events("swap_case3.log")
    got = [(a.layer, a.paths, a.values) for a in of(evs, "action")]
    assert got == [(0, ["attention"], {"attention": 20}),
                   (1, ["attention", "feed_forward"], {"attention": 20, "feed_forward": 15}),
                   (2, ["attention", "feed_forward"], {"attention": 20, "feed_forward": 15}),
                   (3, ["attention"], {"attention": 10})]
    init = {e.section: e.value for e in of(evs, "initial_config")}
    assert init["swap_config"]["op_swap"][1] == {"op_name": "attention", "backward_prefetch": 10, "layers": [3]}
    assert set(init) == {"moe_config", "swap_config", "recompute_config", "parallel_config"}


def test_swap_case4_cell_select_recompute_without_on():
    evs = events("swap_case4.log")
    sel = of(evs, "action", action="select_recompute")
    assert [(a.layer, a.paths, a.swap_mode) for a in sel] == [(0, ["feed_forward"], True), (3, ["feed_forward"], True)]


def test_geometry_numpy2_reprs_round_trip():
    evs = events("swap_case3.log")
    geo = {e.what: e.value for e in of(evs, "geometry")}
    assert geo == {"layer_list": [[4]], "layer_accu": [[4]], "pp_ids": [0, 0, 0, 0], "interleave_ids": [0, 0, 0, 0]}


# ---- the 48-layer recompute example (docs/mindspore-facts.md §1.1) ----------------------------

def test_recompute_48l_matches_reference_simulation():
    run = read_logs([log("recompute_48l.log")], show_progress=False)
    r = run.ranks[0]
    assert r.complete and not r.truncated and r.layer_settings == 1
    full = sorted(a.layer for a in r.actions if a.action == "full_recompute")
    assert full == [0, 1, 4, 24]
    sel = {a.layer: a.paths for a in r.actions if a.action == "select_recompute"}
    assert set(sel) == set(range(48)) - {0, 1, 4, 24}
    assert sel[25] == ["feed_forward.w1.activation.silu", "feed_forward.mul", "feed_forward.w1.matmul"]
    assert sel[2] == ["feed_forward.w1.activation.silu", "feed_forward.mul"]
    assert all(a.swap_mode is False for a in r.actions if a.action.startswith("select"))
    g = r.geometry()
    assert g["layer_list"] == [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]
    assert g["interleave_ids"] == [0] * 24 + [1] * 24
    assert r.formative()["select_recompute"]["feed_forward\\.w3\\.matmul"] == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]
    assert r.initial_config()["recompute_config"]["select_comm_recompute"] == ["ffn_norm\\.norm", "attention_norm\\.norm"]


def test_mtp_second_block_is_counted_and_complete():
    r = read_logs([log("mtp_select.log")], show_progress=False).ranks[0]
    assert r.layer_settings == 2 and r.complete and not r.truncated
    assert [a.layer for a in r.actions if a.action == "select_recompute"] == [1, 2, 3, 3]


# ---- grammar variants (quirks.log: exact whitespace-run texts, docs/old wordings) ---------------

@pytest.fixture(scope="module")
def quirks():
    return events("quirks.log")


def test_swap_conflict_warnings_all_forms(quirks):
    c = [(e.data["scope"], e.data.get("op"), e.data.get("layer")) for e in of(quirks, "notice", what="swap_conflict")]
    assert c == [("layer", "All", 0), ("layer", "feed_forward\\.w1", 2), ("all_layers", "feed_forward\\.mul", None),
                 ("recompute_true", "All", None), ("op", "feed_forward\\.w1", None)]


def test_set_line_variants(quirks):
    acts = [(a.layer, a.action, a.paths, a.value, a.values) for a in of(quirks, "action", origin="text")]
    assert (0, "layer_swap", [], 2, {}) in acts
    assert (1, "layer_swap", [], "Auto", {}) in acts
    assert (3, "op_swap", ["feed_forward.w1", "feed_forward.mul"], 3, {"feed_forward.w1": 3, "feed_forward.mul": 3}) in acts
    # several inner matches of one multi-segment pattern share one value=
    assert (3, "op_swap", ["ffn_norm.norm", "attention_norm.norm"], 1,
            {"ffn_norm.norm": 1, "attention_norm.norm": 1}) in acts
    assert (0, "op_swap", ["mlp"], "Auto", {"mlp": "Auto"}) in acts
    # the pre-2025-03-25 'off' word is the exclude action
    assert (1, "select_recompute_exclude", ["feed_forward.mul"], None, {}) in acts
    assert (1, "select_comm_recompute_exclude", ["attention_norm.norm"], None, {}) in acts


def test_notices(quirks):
    assert [e.data for e in of(quirks, "notice", what="pattern_removed")] == [
        {"pattern": "feed_forward\\.mul", "key": "select_recompute"}, {"pattern": ".*\\.norm", "key": "select_comm_recompute"}]
    assert [(e.data["path"], e.data["for"]) for e in of(quirks, "notice", what="cell_not_op")] == [
        ("attention", "exclude"), ("feed_forward.w1", "comm")]
    assert of(quirks, "notice", what="pp_interleave_reset")
    tb = of(quirks, "notice", what="traceback")[0]
    assert tb.data["exception"] == "ValueError" and tb.data["frames"] == 2
    ce = of(quirks, "notice", what="config_error")[0]
    assert ce.data["check"] == "offset_sum" and ce.source.endswith("quirks.log:58")


def test_old_pipeline_wording_and_info_log_format(quirks):
    geo = of(quirks, "geometry")
    assert geo[2].what == "pp_ids" and geo[2].source.endswith(":3")      # v1.3 'Pipeline id list:'
    assert [g.value for g in geo if g.source.endswith(":30")] == [[[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]]


def test_step_lines_both_generations(quirks):
    s = {e.step: e for e in of(quirks, "step", origin="text")}
    assert (s[1].loss, s[1].ms, s[1].lr, s[1].overflow, s[1].loss_scale, s[1].throughput) == (10.649, 103328.0, 0.0,
                                                                                             False, 1.0, 2.896)
    assert (s[92].steps, s[92].lr, s[92].loss_scale, s[92].global_norm) == (25880, 9.92268e-06, 262144.0, None)
    assert (s[2].loss, s[2].overflow, s[2].loss_scale) == (10.512345, True, None)       # non-sink, unavailable
    assert (s[3].loss, s[3].lr) == (10.4, None)                                         # mcore separate losses, no lr


def test_ascend_memory_blocks_each_line_once(quirks):
    mem = [(e.metric, e.bytes // 2 ** 20) for e in of(quirks, "memory", origin="text")]
    assert mem == [("device_size", 65536), ("used_size", 59392), ("used_peak", 23716), ("actual_peak", 26244),
                   ("device_size", 62432), ("used_size", 59392), ("static", 1024), ("dynamic", 2048),
                   ("actual_peak", 48874), ("graph_dynamic", 512)]
    assert of(quirks, "notice", what="oom")[0].data == {"request_bytes": 1073741824}


def test_exit_and_swapwatch_events(quirks):
    assert [(e.code, e.pid) for e in of(quirks, "exit")] == [(7, 12299), (3, None)]
    sw = of(quirks, "action", origin="swapwatch")[0]
    assert (sw.layer, sw.action, sw.paths, sw.value, sw.pattern) == (2, "op_swap", ["feed_forward.w1"], 1,
                                                                    "feed_forward\\.w1")
    assert [(e.metric, e.bytes, e.step) for e in of(quirks, "memory", origin="swapwatch")] == [
        ("rss", 593920000, 1), ("rss_peak", 600000000, 1)]
    assert of(quirks, "notice", what="malformed_swapwatch")
    assert all(e.rank == 5 for e in quirks)          # SWAPWATCH rank names the file's rank


def test_swapwatch_events_are_authoritative():
    r = read_logs([log("quirks.log")], show_progress=False).ranks[5]
    assert {a.origin for a in r.actions} == {"swapwatch"}
    assert {s.origin for s in r.steps} == {"swapwatch"}


# ---- CPU memory, offload, ranks in msrun worker logs --------------------------------------------

def test_msrun_worker_cpu_memory_and_offload():
    evs = events("msrun_2ranks/worker_1.log")
    assert {(e.metric, e.bytes // 2 ** 20) for e in of(evs, "memory")} == {
        ("pool_peak", 183), ("pool_actual_peak", 193), ("pool_total", 1024)}
    off = of(evs, "notice", what="offload_outside_lazy_inline")
    assert off and off[0].data["node"] == "@1473_tinyllama_WithLoss_construct_88:CNode_89"
    assert len(of(evs, "step")) == 3 and all(e.rank == 1 for e in evs)


# ---- unit pieces -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("[array([4, 5, 5, 5, 5], dtype=int32), [0, 1]]", [[4, 5, 5, 5, 5], [0, 1]]),
    ("[[np.int32(2), np.int32(2)], [0, 0]]", [[2, 2], [0, 0]]),
    ("{'a\\\\.b': array([[1, 2], [3, 4]], dtype=int64)}", {"a\\.b": [[1, 2], [3, 4]]}),
    ("[np.True_, np.float64(1.5)]", [True, 1.5]),
    ("[[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]", [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]),
])
def test_numpy_repr_round_trip(text, value):
    assert literal(text) == value
    assert repr(literal(text)) == rewrite_numpy(text).replace("np.True_", "True")


def test_unparsable_repr_is_kept_verbatim():
    v = literal("{'a': inf")
    assert isinstance(v, Unparsed) and v == "{'a': inf"


def test_op_swap_items_and_paths():
    assert parse_op_swap_items(" attention.flash_attention, value=10") == (
        ["attention.flash_attention"], {"attention.flash_attention": 10})
    assert parse_op_swap_items(".attention, value=20, .feed_forward, value=15") == (
        ["attention", "feed_forward"], {"attention": 20, "feed_forward": 15})
    assert parse_op_swap_items(" a.x, b.x") == (["a.x", "b.x"], {})     # cut-off line: no value
    assert split_paths("feed_forward.w1.activation.silu, feed_forward.mul") == [
        "feed_forward.w1.activation.silu", "feed_forward.mul"]


@pytest.mark.parametrize("line, fmt, level", [
    ("2026-07-14 06:47:08,133 - mindformers/lgsl/output/log[mindformers/parallel_core/training_graph/transformer/"
     "utils.py:172] - INFO - num_layers per stage: [[4]]", "mindformers", "INFO"),
    ("2025-04-07 15:34:27,308 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:", "mindformers_trimmed",
     "INFO"),
    ("[INFO] 2025-07-24 10:00:00,123 [mindformers/models/utils.py:205] __init__: num_layers per stage: [[4]]",
     "mindformers_file", "INFO"),
    ("[WARNING] DEVICE(56203,ffffa4786be0,python):2026-07-14-06:47:05.560.475 [mindspore/ccsrc/x.cc:48] "
     "SetMemPoolBlockSize] Memory pool block size", "mindspore_cpp", "WARNING"),
    ("[WARNING] ME(56203:281473441098720,MainProcess):2026-07-14-06:47:11.450.00 [mindspore/context.py:907] For x",
     "mindspore_py", "WARNING"),
    ("-INFO - Set op_swap at layer 0: .mlp, value=Auto", "level_only", "INFO"),
    ("Set full recompute at layer 3", "raw", None),
])
def test_prefix_formats(line, fmt, level):
    got = split(line)
    assert (got.fmt, got.level) == (fmt, level)


def test_raw_lines_in_prefixed_logs_are_not_mindformers():
    raw = "Set full recompute at layer 3"
    assert classify(raw, 0, "x:1", prefixed=True) == []
    assert classify(raw, 0, "x:1", prefixed=False)[0].layer == 3
