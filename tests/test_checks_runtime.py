"""Run-time rules (SW101-SW108, SW202, SW401, SW402): each fires on its defect and stays quiet
on genuine logs, including where MindFormers under-reports what it applied."""
import copy

import pytest

from swapwatch.checks import REGISTRY, CheckContext, Rule, VARIANTS, register, run_rules
from swapwatch.parsers.model import ActionEvent, ExitEvent, NoticeEvent, RunLog

import verify_helpers as vh


def run(plan, runlog, env=None, only=None):
    ctx = vh.context(plan, runlog, env=env or {})
    found = run_rules(ctx, needs=("config", "run"))
    return [f for f in found if only is None or f.code in only]


def codes(findings):
    return sorted({f.code for f in findings})


MINE = ("SW101", "SW102", "SW103", "SW104", "SW105", "SW106", "SW107", "SW108", "SW202", "SW401",
        "SW402")


# --- genuine logs are clean ------------------------------------------------------------------

@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_documented_swap_cases_are_clean(case):
    plan = vh.swap_case(case)
    assert run(plan, vh.runlog_for(plan, ranks=(0, 1)), only=MINE) == []


def test_48_layer_example_is_clean_except_the_documented_shadowed_pattern():
    plan = vh.recompute_48l()
    found = run(plan, vh.runlog_for(plan, ranks=(0, 1, 2, 3)), only=MINE)
    # feed_forward\.w3\.matmul targets layers 0, 4, 24 - all fully recomputed (docs/mindspore-facts.md §1.1)
    assert [(f.code, f.severity, f.op) for f in found] == [("SW105", "warning", vh.W3M)]


# --- SW101 ------------------------------------------------------------------------------------

def test_sw101_deleted_select_line_names_rank_layer_op_and_source():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan, ranks=(0,))
    rl = runlog.ranks[0]
    line = vh.actions(rl, layer=2, action="select_recompute")[0]
    vh.drop(rl, line)
    found = run(plan, runlog, only=("SW101",))
    assert {(f.rank, f.layer, f.op) for f in found} == {
        (0, 2, "feed_forward.w1.activation.silu"), (0, 2, "feed_forward.mul")}
    f = found[0]
    assert f.severity == "error" and f.actual == "(not logged)" and f.expected == f.op
    assert f.source and f.source.startswith("worker_0.log:")


def test_sw101_deleted_full_recompute_line():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan)
    vh.drop(runlog.ranks[0], vh.actions(runlog.ranks[0], layer=24, action="full_recompute")[0])
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.layer, f.op) for f in found if f.severity == "error"] == [
        ("SW101", 24, "full_recompute")]


def test_sw101_quiet_when_leaf_multi_match_logs_only_the_last_sibling():
    pat = r"feed_forward\.w[123]"     # EX8: applies to w1, w2, w3, logs feed_forward.w3
    plan = vh.plan_of([[4]], {i: {"select_recompute": [pat]} for i in range(4)}, swap=False)
    runlog = RunLog(ranks={0: vh.RankLog(rank=0, files=["worker_0.log"], complete=True, events=[
        ActionEvent(0, f"worker_0.log:{10 + i}", layer=i, action="select_recompute",
                    paths=["feed_forward.w3"]) for i in range(4)])})
    assert run(plan, runlog, only=MINE) == []


def test_sw101_quiet_for_swap_mode_recompute_true_which_logs_no_line():
    plan = vh.plan_of([[4]], {i: {"full_recompute": True, "full_recompute_logged": False,
                                  "layer_swap": "Auto"} for i in range(4)},
                      swap=True, formative={"layer_recompute": True})
    runlog = vh.runlog_for(plan)
    assert not vh.actions(runlog.ranks[0], action="full_recompute")
    assert run(plan, runlog, only=("SW101", "SW102")) == []


def test_sw101_all_lines_of_a_layout_matching_pattern_deleted_is_sw101_not_sw104():
    plan = vh.swap_case(1)
    runlog = vh.runlog_for(plan)
    for a in vh.actions(runlog.ranks[0], action="op_swap"):
        vh.drop(runlog.ranks[0], a)
    runlog.ranks[0].events.append(ActionEvent(0, "worker_0.log:99", layer=0, action="full_recompute"))
    found = run(plan, runlog, only=("SW101", "SW104"))
    assert codes(found) == ["SW101"] and len(found) == 4


# --- SW102 / SW103 --------------------------------------------------------------------------

def test_sw102_and_sw101_for_a_changed_layer_id():
    plan = vh.swap_case(2)
    runlog = vh.runlog_for(plan)
    line = vh.actions(runlog.ranks[0], layer=3, action="layer_swap")[0]
    line.layer = 2
    found = run(plan, runlog, only=MINE)
    assert {(f.code, f.layer) for f in found} == {("SW102", 2), ("SW101", 3)}
    extra = next(f for f in found if f.code == "SW102")
    assert extra.actual == 20 and extra.source == line.source and extra.rank == 0


def test_sw102_unasked_select_path():
    plan = vh.swap_case(4)
    runlog = vh.runlog_for(plan)
    runlog.ranks[0].events.append(ActionEvent(0, "worker_0.log:77", layer=1, action="select_recompute",
                                              paths=["feed_forward"], swap_mode=True))
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.layer, f.op, f.source) for f in found] == [
        ("SW102", 1, "feed_forward", "worker_0.log:77")]


def test_sw103_changed_op_swap_prefetch():
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan)
    a = vh.actions(runlog.ranks[0], layer=1, action="op_swap")[0]
    a.values["feed_forward"] = 16
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.rank, f.layer, f.op, f.expected, f.actual, f.source) for f in found] == [
        ("SW103", 0, 1, "feed_forward", 15, 16, a.source)]


def test_sw103_changed_layer_swap_prefetch_and_text_values_compare_equal():
    plan = vh.swap_case(2)
    runlog = vh.runlog_for(plan)
    a0 = vh.actions(runlog.ranks[0], layer=0, action="layer_swap")[0]
    a3 = vh.actions(runlog.ranks[0], layer=3, action="layer_swap")[0]
    a0.value = "20"                  # a text parser may keep the number as text: still equal
    a3.value = 2
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.layer, f.expected, f.actual) for f in found] == [("SW103", 3, 20, 2)]


# --- SW104 ------------------------------------------------------------------------------------

def test_sw104_typo_pattern_matches_nothing_anywhere():
    typo = r"attention\.flash attention"
    plan = vh.plan_of([[4]], {i: {"select_recompute": [typo, vh.MUL]} for i in range(4)}, swap=False)
    runlog = RunLog(ranks={0: vh.RankLog(rank=0, files=["worker_0.log"], complete=True, events=[
        ActionEvent(0, f"worker_0.log:{10 + i}", layer=i, action="select_recompute",
                    paths=["feed_forward.mul"]) for i in range(4)])})
    found = run(plan, runlog, only=MINE)
    # about a set of layers: they are in the text, so no single ``layer`` beside them
    assert [(f.code, f.severity, f.op, f.layer) for f in found] == [("SW104", "warning", typo, None)]
    assert "is applied on layers 0-3 but" in found[0].message


def test_sw104_other_model_family_judged_by_its_logs():
    # an mcore model: paths unknown to the Llama layout, so the layout is not trusted
    plan = vh.plan_of([[2]], {i: {"select_recompute": [r"mlp\.mul", r".*\.norm"]} for i in range(2)},
                      swap=False)
    runlog = RunLog(ranks={0: vh.RankLog(rank=0, files=["w.log"], complete=True, events=[
        ActionEvent(0, f"w.log:{i}", layer=i, action="select_recompute", paths=["mlp.mul"])
        for i in range(2)])})
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.op) for f in found] == [("SW104", r".*\.norm")]


def test_sw104_quiet_when_pattern_logged_somewhere():
    plan = vh.swap_case(3)
    assert run(plan, vh.runlog_for(plan), only=("SW104",)) == []


# --- SW105 ------------------------------------------------------------------------------------

def test_sw105_quiet_when_pattern_applies_on_some_layer():
    plan = vh.recompute_48l()
    plan.layers[5].select_recompute.append(vh.W3M)       # W3M now lands on a layer outside the window
    assert run(plan, vh.runlog_for(plan), only=("SW105",)) == []


def test_sw105_swap_mode_ids_all_fully_recomputed():
    shadowed = {"select_shadowed": {"select_recompute": [vh.MUL]}}
    plan = vh.plan_of([[4]], {0: {"full_recompute": True, **shadowed}, 1: {"full_recompute": True, **shadowed}},
                      swap=True, formative={"layer_recompute": [0, 1], "select_recompute": {vh.MUL: [1, 0]}})
    found = run(plan, vh.runlog_for(plan), only=MINE)
    assert [(f.code, f.op) for f in found] == [("SW105", vh.MUL)]


# --- SW106 / SW108 -------------------------------------------------------------------------

def test_sw106_truncated_log_reports_once_and_no_sw101_for_unreached_layers():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan, ranks=(0, 1))
    vh.truncate_after_layer(runlog.ranks[1], 30)
    found = run(plan, runlog, only=MINE)
    assert codes([f for f in found if f.severity == "error"]) == ["SW106"]
    f = next(f for f in found if f.code == "SW106")
    assert f.rank == 1 and f.layer == 30 and "31-47" in f.message and f.source.startswith("worker_1.log:")


def test_sw106_traceback_inside_the_strategy_block():
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan, steps=0)
    rl = runlog.ranks[0]
    idx = rl.events.index(vh.actions(rl, layer=1)[0])
    del rl.events[idx + 1:]
    rl.events.append(NoticeEvent(0, "worker_0.log:500", what="traceback",
                                 data={"text": "IndexError: index 1 is out of bounds"}))
    found = run(plan, runlog, only=MINE)
    assert codes(found) == ["SW106"]
    assert found[0].source == "worker_0.log:500" and "IndexError" in found[0].message


def test_sw106_failed_before_any_strategy_line():
    plan = vh.swap_case(1)
    rl = vh.RankLog(rank=0, files=["worker_0.log"], events=[
        vh.InitialConfigEvent(0, "worker_0.log:3", section="swap_config", value={"swap": True}),
        NoticeEvent(0, "worker_0.log:9", what="config_error", data={"text": "ValueError: bad offset"}),
        ExitEvent(0, "worker_0.log:10", code=1)])
    found = run(plan, RunLog(ranks={0: rl}), only=MINE)
    assert [(f.code, f.source) for f in found] == [("SW106", "worker_0.log:9")]


def test_sw106_quiet_on_complete_logs_and_after_a_crash_in_training():
    plan = vh.swap_case(2)
    runlog = vh.runlog_for(plan)
    runlog.ranks[0].events.append(ExitEvent(0, "worker_0.log:900", code=7))   # crashed at step 3
    assert run(plan, runlog, only=("SW106",)) == []


def test_sw108_silent_rank_warning_or_info_with_stdout_devices():
    plan = vh.swap_case(1)
    runlog = vh.runlog_for(plan, ranks=(0,))
    runlog.ranks[1] = vh.silent_rank(1)
    found = run(plan, runlog, only=MINE)
    assert [(f.code, f.severity, f.rank) for f in found] == [("SW108", "warning", 1)]
    found = run(plan, runlog, env={"STDOUT_DEVICES": "(0,)"}, only=MINE)
    assert [(f.code, f.severity, f.rank) for f in found] == [("SW108", "info", 1)]
    assert run(vh.swap_case(1), vh.runlog_for(vh.swap_case(1), ranks=(0, 1)), only=("SW108",)) == []


def test_sw106_when_no_rank_printed_anything():
    plan = vh.swap_case(1)
    found = run(plan, RunLog(ranks={0: vh.silent_rank(0)}), only=MINE)
    assert [(f.code, f.rank) for f in found] == [("SW106", 0)]


# --- SW107 ------------------------------------------------------------------------------------

def test_sw107_the_run_used_another_recompute_config():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan, ranks=(0, 1))
    for rl in runlog.ranks.values():
        f = next(e for e in rl.events if getattr(e, "key", None) == "layer_recompute")
        f.value = [[3, 1, 0, 0, 0], [1, 0, 0, 0, 0]]
    found = run(plan, runlog, only=("SW107",))
    assert [(f.rank, f.op, f.expected, f.actual) for f in found] == [
        (r, "layer_recompute", [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]], [[3, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
        for r in (0, 1)]
    assert found[0].source.startswith("worker_0.log:")


def test_sw107_initial_sections_differ_key_by_key():
    from swapwatch.config import config_from_dicts
    plan = vh.swap_case(1)
    runlog = vh.runlog_for(plan)
    logged = dict(vh.SWAP_DEFAULTS, swap=True, default_prefetch=5)
    vh.initial_config(runlog.ranks[0], "swap_config", logged)
    cfg = config_from_dicts({}, {"swap": True, "default_prefetch": 10}, num_layers=4, pipeline_stage=1)
    found = [f for f in run_rules(vh.context(plan, runlog, config=cfg), needs=("run",))
             if f.code == "SW107"]
    assert [(f.op, f.expected, f.actual, f.source) for f in found] == [
        ("swap_config.default_prefetch", 10, 5, "worker_0.log:3")]
    logged["default_prefetch"] = 10
    assert [f for f in run_rules(vh.context(plan, runlog, config=cfg), needs=("run",))
            if f.code == "SW107"] == []


def test_sw107_the_run_had_another_layer_split():
    plan = vh.swap_case(2)
    runlog = vh.runlog_for(vh.plan_of([[2, 2]], {0: {"layer_swap": 20}, 3: {"layer_swap": 20}}, swap=True,
                                      formative=plan.formative))
    found = run(plan, runlog, only=("SW107",))
    assert [(f.rank, f.op, f.actual) for f in found] == [(0, "layer_list", [[2, 2]])]


def test_sw107_quiet_when_formative_prints_the_same_values_in_numpy_dress():
    import numpy as np
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan)
    f = next(e for e in runlog.ranks[0].events if getattr(e, "key", None) == "layer_recompute")
    f.value = [np.array([2, 1, 0, 0, 0], dtype=np.int32), (1, 0, 0, 0, 0)]
    assert run(plan, runlog, only=("SW107",)) == []


# --- SW202 ------------------------------------------------------------------------------------

def test_sw202_swapped_op_feeds_select_recomputed_consumer():
    w3 = r"feed_forward\.w3"
    plan = vh.plan_of([[4]], {2: {"op_swap": {w3: 1}, "select_recompute": [vh.MUL]},
                              3: {"op_swap": {w3: 1}}}, swap=True)
    found = run(plan, None, only=("SW202",))
    assert [(f.layer, f.op) for f in found] == [(2, w3)]
    assert "feed_forward.w3 -> feed_forward.mul" in found[0].message


def test_sw202_full_layer_case_layer_swap_feeds_fully_recomputed_next_layer():
    plan = vh.plan_of([[4]], {0: {"layer_swap": 2}, 1: {"full_recompute": True}}, swap=True)
    found = run(plan, None, only=("SW202",))
    assert [(f.layer, f.op) for f in found] == [(0, "(whole layer)")]
    assert "layer 1 attention_norm" in found[0].message


def test_sw202_layer_swap_with_select_recomputed_op_inside():
    plan = vh.plan_of([[2]], {0: {"layer_swap": 2, "select_recompute": [vh.MUL]}}, swap=True)
    found = run(plan, None, only=("SW202",))
    assert len(found) == 1 and "feed_forward.w3 -> feed_forward.mul" in found[0].message


def test_sw202_quiet_when_consumer_not_recomputed_and_without_swap():
    assert run(vh.swap_case(4), None, only=("SW202",)) == []
    plan = vh.plan_of([[4]], {2: {"op_swap": {r"feed_forward\.w3": 1}, "select_recompute": [vh.SILU]}},
                      swap=True)
    assert run(plan, None, only=("SW202",)) == []


# --- SW401 / SW402 --------------------------------------------------------------------------

def test_sw401_a_rank_that_disagrees():
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan, ranks=(0, 1, 2))
    a = vh.actions(runlog.ranks[2], layer=3, action="op_swap")[0]
    a.values["attention"] = 20
    found = run(plan, runlog, only=("SW401",))
    assert [(f.rank, f.layer, f.op, f.expected, f.actual, f.source) for f in found] == [
        (2, 3, "attention", "attention=10", "attention=20", a.source)]


def test_sw401_without_config_and_formative_disagreement():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan, ranks=(0, 1, 2))
    f = next(e for e in runlog.ranks[1].events if getattr(e, "key", None) == "layer_recompute")
    f.value = [[3, 1, 0, 0, 0], [1, 0, 0, 0, 0]]
    found = run(plan, runlog, only=("SW401",))
    assert [(x.rank, x.op) for x in found] == [(1, "layer_recompute")]


def test_sw401_quiet_on_identical_ranks_and_truncated_tail():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan, ranks=(0, 1))
    vh.truncate_after_layer(runlog.ranks[1], 40)
    assert run(plan, runlog, only=("SW401",)) == []


def test_sw402_gap_in_rank_numbers_and_expected_ranks():
    plan = vh.swap_case(1)
    runlog = vh.runlog_for(plan, ranks=(0, 1, 3))
    assert [(f.rank, f.severity) for f in run(plan, runlog, only=("SW402",))] == [(2, "warning")]
    runlog = vh.runlog_for(plan, ranks=(0, 1))
    runlog.expected_ranks = [0, 1, 2, 3]
    assert [f.rank for f in run(plan, runlog, only=("SW402",))] == [2, 3]
    runlog.expected_ranks = [0, 1]
    assert run(plan, runlog, only=("SW402",)) == []


# --- the registry ----------------------------------------------------------------------------

def test_every_rule_has_metadata_and_an_explanation_with_yaml():
    run_rules(CheckContext(plan=None))      # loads every module
    for code, variants in VARIANTS.items():
        for rule in variants.values():
            assert rule.code == code and rule.severity in ("error", "warning") and rule.title
            assert rule.needs in ("config", "run", "ir")
            doc = type(rule).__doc__ or ""
            assert "matters" in doc and "fix" in doc and ":" in doc, code


def test_run_time_variant_supersedes_config_variant():
    calls = []

    class ConfigSide(Rule):
        code, severity, title, needs = "SW998", "warning", "t", "config"

        def check(self, ctx):
            calls.append("config")
            return []

    class RunSide(ConfigSide):
        needs = "run"

        def check(self, ctx):
            calls.append("run")
            return []

    try:
        register(ConfigSide)
        register(RunSide)
        with pytest.raises(ValueError):
            register(copy.copy(RunSide))
        run_rules(CheckContext(plan=None), needs=("config",))
        run_rules(CheckContext(plan=None), needs=("config", "run"))
        assert calls == ["config", "run"]
    finally:
        VARIANTS.pop("SW998", None)
        REGISTRY.pop("SW998", None)
