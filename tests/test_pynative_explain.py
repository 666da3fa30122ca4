"""explain on PyNative (r2.x) YAMLs: path detection, the plan's contents, SW501-SW508 fire/quiet, exit codes.

What MindFormers does and logs is checked against its own code in ``test_pynative_oracle.py``; here the
user-facing side: that the CLI picks the path, says it, shows per layer what ``apply_ac`` applies, raises the
traps as findings, and refuses (exit 2, one line, MindFormers' text) what MindFormers refuses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import example, given, settings, strategies as st

from swapwatch.cli import cli
from swapwatch.pynative import config as pconfig
from swapwatch.pynative.explain import explain_tree
from swapwatch.pynative.layer_spec import Refusal, layer_ids, validate_specs

REPO = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")
CONFIGS = REPO / "fixtures" / "configs"
Q = {"model": {"model_type": "qwen3", "num_hidden_layers": 4}, "parallelism": {"tensor_parallel": 2}}


def ex(**sections):
    tree = dict(Q)
    tree.update(sections)
    return explain_tree(tree, {}, "x.yaml")


def codes(e):
    return sorted({f.code for f in e.findings})


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def swapwatch(*args):
    """The installed command, so exit codes and stderr are what a user gets."""
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


# ---- path detection -------------------------------------------------------------------------

@pytest.mark.parametrize("tree,path", [
    ({"recompute": {"mode": "full"}}, "pynative"),
    ({"swap": {"enable": True}, "recompute_config": {"recompute": True}}, "pynative"),
    ({"parallelism": {"tensor_parallel": 2}, "training": {"steps": 1}}, "pynative"),
    ({"recompute_config": {"recompute": True}}, "legacy"),
    ({"recompute_config": {"recompute": True}, "use_legacy": False}, "mcore"),
    ({"model": {"model_config": {"num_layers": 4}}, "training": {"steps": 1}}, "legacy"),
])
def test_detect_path(tree, path):
    assert pconfig.detect_path(tree) == path


def test_header_names_the_path_and_static_yaml_is_unchanged():
    out = run("explain", str(CONFIGS / "pynative_qwen3_select.yaml")).output
    assert "path: PyNative (r2.x" in out.splitlines()[0]
    static = run("explain", str(CONFIGS / "select_recompute.yaml")).output
    assert "PyNative" not in static and "pipeline_stage 1" in static.splitlines()[0]


# ---- the plan -------------------------------------------------------------------------------

def test_plan_of_the_qwen3_fixture():
    e = explain_tree(*_load("pynative_qwen3_select.yaml"))
    la = {x.layer: x for x in e.plan.layers}
    assert la[0].full and not la[0].select
    assert [la[i].select for i in (1, 2, 3)] == [["mlp"]] * 3            # mlp.linear_fc1 deduped under mlp
    assert la[2].layer_swap and not la[0].layer_swap                       # layer_swap[1] ignored
    assert la[0].op_swap_void == ["mlp.linear_fc1"] and la[1].op_swap_void == ["mlp.linear_fc1"]
    assert la[2].comm_cells == ["self_attention"] and la[1].comm == ["self_attention.reshape"]
    assert e.plan.prefetch_pairs == [(0, 1), (1, 2), (2, 3)]
    assert e.plan.maps["Swap"] == {0: ["mlp.linear_fc1"], 1: ["mlp.linear_fc1"]}


def test_mtp_layer_is_num_layers_plus_i_with_its_own_paths():
    e = explain_tree(*_load("pynative_dsv3_mtp.yaml"))
    mtp = e.plan.layers[4]
    assert mtp.mtp and "transformer_layer.mlp" in mtp.select and "final_layernorm" in mtp.select
    assert e.plan.layers[0].select[0] == "input_layernorm"                  # dense layer 0: its own list
    assert e.plan.layers[1].select == ["mlp.experts"]


def test_json_has_layers_maps_pairs_lines_and_findings():
    res = run("explain", "--format", "json", str(CONFIGS / "pynative_dsv3_mtp.yaml"))
    data = json.loads(res.output)
    assert data["path"] == "pynative" and data["total_layers"] == 5
    assert data["maps"]["Swap"]["3"] == ["self_attention.linear_proj"]
    assert data["prefetch_pairs"] == [[0, 1], [1, 2], [2, 3], [3, 4]]
    assert data["layers"][4]["mtp"] is True
    assert any(ln["text"] == "Set select swap at layer 3: self_attention.linear_proj" for ln in data["log_lines"])
    assert {f["code"] for f in data["findings"]} == {"SW104", "SW507"}


def test_formative_prints_the_lines_apply_ac_logs():
    out = run("explain", "--format", "formative", str(CONFIGS / "pynative_qwen3_select.yaml")).output
    assert "INFO - Set full recompute at layer 0\n" in out
    assert out.index("Final Recompute") < out.index("Set full recompute") < out.index("Final Swap")


# ---- findings: each fires and stays quiet ---------------------------------------------------

def test_sw501_single_card():
    assert "SW501" in codes(ex(parallelism={}, recompute={"mode": "full", "full_recompute_layer": ["0"]}))
    assert "SW501" not in codes(ex(recompute={"mode": "full", "full_recompute_layer": ["0"]}))
    assert "SW501" not in codes(ex(parallelism={}))                      # nothing enabled: nothing ignored


def test_sw502_extra_layer_swap_entries():
    two = ex(swap={"enable": True, "layer_swap": [{"layers": ["0"]}, {"layers": ["1"]}]})
    assert "SW502" in codes(two) and not two.plan.layers[1].layer_swap
    assert "SW502" not in codes(ex(swap={"enable": True, "layer_swap": [{"layers": ["0-1"]}]}))


def test_sw503_unchecked_select_past_model():
    fired = ex(recompute={"mode": "select", "full_recompute_layer": ["0"], "select_module": {"mlp": ["1-6"]}})
    assert "SW503" in codes(fired)
    assert [f.actual for f in fired.findings if f.code == "SW503"] == [[4, 5, 6]]
    assert "SW503" not in codes(ex(recompute={"mode": "select", "full_recompute_layer": ["0"],
                                              "select_module": {"mlp": ["1-3"]}}))
    with pytest.raises(Refusal, match="layer id 6 out of range"):     # without full the spec IS checked
        ex(recompute={"mode": "select", "select_module": {"mlp": ["1-6"]}})


def test_sw504_op_swap_on_full_layer():
    fired = ex(recompute={"mode": "full", "full_recompute_layer": ["1"]},
               swap={"enable": True, "op_swap": [{"op_name": "mlp", "layers": ["0-1"]}]})
    assert [f.layer for f in fired.findings if f.code == "SW504"] == [1]
    assert fired.plan.layers[0].op_swap == ["mlp"] and fired.plan.prefetch_pairs == [(0, 1), (1, 2)]
    assert "SW504" not in codes(ex(recompute={"mode": "full", "full_recompute_layer": ["2"]},
                                   swap={"enable": True, "op_swap": [{"op_name": "mlp", "layers": ["0-1"]}]}))


def test_sw505_mixed_surfaces():
    assert "SW505" in codes(explain_tree(*_load("pynative_mixed.yaml")))
    assert "SW505" not in codes(explain_tree(*_load("pynative_qwen3_select.yaml")))


def test_sw506_exclude_without_mode():
    assert "SW506" in codes(ex(recompute={"exclude_op": {"mlp": ["0"]}}, swap={"enable": True}))
    assert "SW506" not in codes(ex(recompute={"mode": "full", "full_recompute_layer": ["0"],
                                              "exclude_op": {"mlp": ["0"]}}))


def test_sw507_comm_cell():
    assert "SW507" in codes(ex(recompute_comm={"enable": True, "select_module": {"mlp": ["0"]}}))
    assert "SW507" not in codes(ex(recompute_comm={"enable": True, "select_module": {"mlp\\.linear_fc1\\.matmul": ["0"]}}))


def test_sw508_repeated_op_name():
    same = ex(swap={"enable": True, "op_swap": [{"op_name": "mlp", "layers": ["0-1"]},
                                                 {"op_name": "mlp", "layers": ["2"]}]})
    assert "SW508" in codes(same) and sorted(same.plan.maps["Swap"]) == [2]
    assert "SW508" not in codes(ex(swap={"enable": True, "op_swap": [{"op_name": "mlp", "layers": ["0-1"]}]}))


def test_sw104_no_match_pattern():
    fired = ex(recompute={"mode": "select", "select_module": {"mlp.linear": ["0"], "mlp": ["1"]}})
    assert [f.op for f in fired.findings if f.code == "SW104"] == ["mlp.linear"]   # fullmatch, not search


# ---- refusals: exit 2, one line, MindFormers' words -----------------------------------------

@pytest.mark.parametrize("sections,text", [
    ({"recompute": {"mode": "select"}},
     "TrainConfig.recompute: mode is 'select' but select_module is missing or empty"),
    ({"recompute": {"mode": "full", "full_recompute_layer": ["0", "0-2"]}},
     "TrainConfig.recompute_config.recompute.full_recompute_layer: layer specs must be in strictly ascending "
     "order; spec[1] '0-2' starts at 0 but previous spec ends at 0"),
    ({"swap": {"enable": True, "layer_swap": [{"layers": ["3"]}]}},
     "TrainConfig.swap_config.layer_swap[0].layers: max layer id 3 plus prefetch 1 exceeds num_layers (4); "
     "max allowed layer id is 2"),
    ({"parallelism": {"pipeline_parallel": 2}, "swap": {"enable": True}}, "swap is not supported with pipeline parallel"),
    ({"swap": {"enable": True, "default_prefetch": 4}},
     "TrainConfig.swap_config.default_prefetch: value 4 out of range [1, 3]"),
    ({"recompute": {"modes": "full"}}, "Unknown configuration keys for RecomputeConfig: ['modes']"),
])
def test_refusals_exit_2_with_mindformers_text(tmp_path, sections, text):
    tree = dict(Q)
    tree.update(sections)
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(tree))
    res = swapwatch("explain", str(p))
    assert res.returncode == 2, res.stdout + res.stderr
    assert text in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert str(p) in res.stderr and res.stdout == ""


def test_missing_layer_count_is_one_line(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("model:\n  model_type: qwen3\nrecompute:\n  mode: full\n")
    res = swapwatch("explain", str(p))
    assert res.returncode == 2 and "model.num_hidden_layers" in res.stderr
    res = swapwatch("explain", "--num-layers", "2", str(p))
    assert res.returncode == 2 and "full_recompute_layer is missing or empty" in res.stderr


def test_unknown_family_is_one_line(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("model:\n  model_type: gpt9\n  num_hidden_layers: 2\nrecompute:\n  mode: full\n"
                 "  full_recompute_layer: ['0']\n")
    res = swapwatch("explain", str(p))
    assert res.returncode == 2 and "gpt9" in res.stderr and "qwen3" in res.stderr


# ---- the layer-spec grammar, as properties ---------------------------------------------------

@st.composite
def ascending_specs(draw):
    total = draw(st.integers(1, 64))
    cuts = sorted(draw(st.sets(st.integers(0, total - 1), max_size=8)))
    specs, prev = [], -1
    for c in cuts:
        if c <= prev:
            continue
        hi = draw(st.integers(c, total - 1))
        if draw(st.booleans()) and hi == c:
            specs.append(c if draw(st.booleans()) else f" {c} ")
        else:
            specs.append(f"{c}-{hi}")
        prev = hi
        if prev >= total - 1:
            break
    return total, specs


@given(ascending_specs())
@settings(max_examples=200, deadline=None)
def test_valid_lists_normalize_and_cover_their_ids(case):
    total, specs = case
    norm = validate_specs(list(specs), "L", total)
    assert norm == [str(s).strip() for s in specs]
    ids = layer_ids(norm)
    want = set()
    for s in norm:
        a, _, b = s.partition("-")
        want.update(range(int(a), int(b or a) + 1))
    assert ids == want and all(0 <= i < total for i in ids)


@given(ascending_specs(), st.integers(0, 7))
@settings(max_examples=200, deadline=None)
def test_swapping_two_specs_is_refused(case, k):
    total, specs = case
    if len(specs) < 2:
        return
    i = k % (len(specs) - 1)
    bad = list(specs)
    bad[i], bad[i + 1] = bad[i + 1], bad[i]
    with pytest.raises(Refusal, match=f"spec\\[{i + 1}\\] .* starts at .* but previous spec ends at"):
        validate_specs(bad, "L", total)


@given(st.text(max_size=8))
@example("\U00011730")
@settings(max_examples=300, deadline=None)
def test_anything_outside_the_grammar_is_refused_with_the_spec_shown(text):
    import re
    # MindFormers' pattern is a str regex: ``\d`` takes any Unicode decimal digit and ``int`` reads it
    # (activation_checkpoint.py:_validate_layer_id_range accepts '\U00011730', layer 0): so does swapwatch
    ok = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip()) is not None
    try:
        validate_specs([text], "L", 10 ** 9)
    except Refusal as exc:
        assert not ok or "range start must be <= end" in exc.mf_message or "out of range" in exc.mf_message
        if not ok:
            assert exc.mf_message == (f"L[0]: invalid layer spec {text!r}; expected one non-negative integer or "
                                      "'start-end' (e.g. '5', '0-19')")
    else:
        assert ok


@given(ascending_specs(), st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_prefetch_bound(case, prefetch):
    total, specs = case
    if not specs:
        return
    top = max(layer_ids(validate_specs(list(specs), "L", total)))
    if top + prefetch >= total:
        with pytest.raises(Refusal, match=f"max allowed layer id is {total - prefetch - 1}") as exc:
            validate_specs(list(specs), "L", total, prefetch)
        assert exc.value.tag == "[Swap Config]"
    else:
        validate_specs(list(specs), "L", total, prefetch)


def _load(name):
    path = CONFIGS / name
    data, lines = pconfig.read_yaml(str(path))
    return data, lines, str(path)


def test_static_yaml_with_a_pynative_section_is_read_as_pynative_and_says_what_it_ignores():
    tree = {"model": {"model_type": "qwen3", "model_config": {"num_layers": 2}},
            "parallel_config": {"recompute": True}, "recompute": {"mode": "full", "full_recompute_layer": ["1"]}}
    e = explain_tree(tree, {}, "x.yaml")
    assert e.config.num_layers == 2 and e.plan.layers[1].full
    sw505 = [f for f in e.findings if f.code == "SW505"]
    assert sw505 and "parallel_config.recompute, model.model_config" in sw505[0].message



_VALS = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 9)
    | st.sampled_from(["0", "1-2", "3-1", "x", "mlp", ".*", "mlp(", "9", "None", "full", "select", ""]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["mlp", "layers", "op_name", ".*norm", "self_attention", 5]), c, max_size=3),
    max_leaves=8)


def _sec(keys):
    return st.dictionaries(st.sampled_from(keys), _VALS, max_size=4)


@given(_sec(["mode", "full_recompute_layer", "select_module", "exclude_op"]), _sec(["enable", "select_module"]),
       _sec(["enable", "default_prefetch", "layer_swap", "op_swap"]), st.integers(1, 3),
       st.sampled_from(["qwen3", "deepseek_v3"]))
@settings(max_examples=300, deadline=None)
def test_any_sections_give_a_plan_or_a_one_line_refusal(r, c, s, pp, fam):
    """Property: whatever the sections hold, explain gives a plan or a ConfigError, never a crash (exit 3)."""
    tree = {"model": {"model_type": fam, "num_hidden_layers": 4, "num_nextn_predict_layers": int(fam != "qwen3")},
            "parallelism": {"pipeline_parallel": pp}, "recompute": r, "recompute_comm": c, "swap": s}
    try:
        e = explain_tree(tree, {}, "x.yaml")
    except pconfig.ConfigError as exc:
        assert "\n" not in exc.one_line()
    else:
        assert len(e.plan.layers) == 4 + int(fam != "qwen3")
