"""Issue 21.5-21.9: rules that named the wrong thing or nothing at all, each as the user met it.

Point 7 is decided by the MindFormers 2.1.0 oracle (``tests/oracle/mf_layer_setting.py`` runs the
real ``LayerSetting``): what it does with a per-stage list shorter (or longer) than
``pipeline_stage`` is what swapwatch's engine must do, and SW210 says it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from cli_helpers import ROOT, fx, sw
from swapwatch.config import config_from_dicts
from swapwatch.errors import ConfigError
from swapwatch.engine import strategy

ORACLE_PY = os.path.join(ROOT, ".oracle-venv", "bin", "python")
READY = os.path.join(ROOT, ".oracle-venv", ".ready")
MARK = "@@SWAPWATCH_ORACLE@@"
NP_SCALAR = re.compile(r"np\.(?:int|uint|float)\d+\((-?[\d.]+)\)")     # as tests/test_oracle.py reads them


SHORT_CASES = [
    dict(num_layers=32, pipeline_stage=8, recompute_config={"recompute": [4, 4, 2, 0]}),
    dict(num_layers=32, pipeline_stage=8,
         recompute_config={"recompute": [4, 4, 2, 0], "select_recompute": {"feed_forward\\.mul": [1, 1]}}),
    dict(num_layers=32, pipeline_stage=4, recompute_config={"recompute": [4, 4, 2, 0, 1, 1]}),
    dict(num_layers=32, pipeline_stage=4, pp_interleave_num=2, pipeline_interleave=True,
         recompute_config={"recompute": [[2, 2, 1, 0]]}),
]


def _ours(case):
    try:
        cfg = config_from_dicts(case.get("recompute_config"), case.get("swap_config"),
                                num_layers=case["num_layers"], pipeline_stage=case.get("pipeline_stage", 1),
                                pp_interleave_num=case.get("pp_interleave_num", 1),
                                pipeline_interleave=case.get("pipeline_interleave", False), check_rules=False)
        return strategy.layer_setting_lines(strategy.plan(cfg)), None
    except ConfigError as exc:
        return None, exc


@pytest.mark.skipif(not (os.path.exists(READY) and os.path.exists(ORACLE_PY)),
                    reason="no MindFormers oracle venv (.oracle-venv/.ready)")
def test_a_short_per_stage_list_is_padded_with_zeros_as_mindformers_does():
    """21.7 on the oracle: MindFormers 2.1.0 pads a short list with 0 (no warning, no error) and
    crashes on a longer one or a missing interleave row; the engine does exactly that."""
    proc = subprocess.run([ORACLE_PY, os.path.join(ROOT, "tests", "oracle", "mf_layer_setting.py")],
                          input=json.dumps(SHORT_CASES), capture_output=True, text=True, timeout=900, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    assert line is not None, proc.stderr[-2000:]
    mf = json.loads(line[len(MARK):])
    padded = [msg for _, msg in mf[0]["lines"] if msg.startswith("Formative layer_recompute")]
    assert padded == ["Formative layer_recompute: [[4, 4, 2, 0, 0, 0, 0, 0]]"]
    assert not [lvl for lvl, _ in mf[0]["lines"] if lvl != "INFO"]            # silently
    for case, result in zip(SHORT_CASES, mf):
        lines, error = _ours(case)
        if "error" in result:
            assert error is not None, (case, result["error"])
        else:
            assert error is None and lines == [NP_SCALAR.sub(r"\1", msg) for _, msg in result["lines"]], case


def test_explain_warns_that_the_later_stages_get_no_recompute(capsys):
    """21.7: `Findings: none` while stages 4-7 quietly got no recompute."""
    code, out, _ = sw("explain", fx("configs", "recompute_short_list.yaml"), capsys=capsys)
    assert code == 0
    assert ("recompute_config.recompute: [4, 4, 2, 0] has 4 per-stage counts for 8 pipeline stages; "
            "MindFormers pads it with 0 without a word, so stages 4-7 (layers 16-31) get no full recompute "
            "[" + fx("configs", "recompute_short_list.yaml") + ":38]") in out
    assert "stage 4: layers 16-19 (4), full 0" in out


def test_a_swapped_cell_with_a_recomputed_primitive_inside_is_sw201(capsys):
    """21.5: `op_swap` on `mlp` and `mlp\\.activation_func\\.silu` select-recomputed was SW202
    ("the consumer is recomputed"); it is the same operator swapped and recomputed: SW201 alone."""
    cfg = fx("configs", "families", "qwen3_swap_cell_select.yaml")
    code, out, _ = sw("explain", cfg, capsys=capsys)
    assert code == 1
    assert ("op swap 'mlp' (prefetch 1): select recompute 'mlp\\.activation_func\\.silu' recomputes "
            "mlp.activation_func.silu inside the swapped cell: the same operator is swapped and recomputed") in out
    assert "SW201 error" in out and "SW202" not in out
    assert "!mlp p=1" in out                                         # the voided swap, marked


def test_mcore_default_op_swap_is_sw104_not_a_false_sw201(capsys):
    """21.6: on mcore, swap on with no layer swap / op swap gets '.*\\.flash_attention', which
    reaches nothing there: nothing is offloaded, so recompute voids nothing (no SW201), SW104 says
    it, and explain marks the default as MindFormers' (the user never wrote it)."""
    code, out, _ = sw("explain", fx("configs", "families", "qwen3_swap_default.yaml"), capsys=capsys)
    assert "SW201" not in out and code == 0
    assert ("note: swap is on with no layer_swap / op_swap: MindFormers applies its default op swap "
            "'.*\\.flash_attention' on every layer (you did not write it)") in out
    assert ("it is MindFormers' default op swap (swap on, no layer_swap / op_swap given), and nothing in the "
            "qwen3 layer is named like that (did you mean 'self_attention\\.core_attention'? the mcore path's "
            "name): nothing is offloaded") in out
    assert "stage 0: layers 0-3 (4), full 1, select 0, comm 0, swap 0" in out


def test_legacy_names_on_mcore_get_a_did_you_mean_to_the_mcore_path(capsys):
    """21.8: `feed_forward\\.mul` and `attention\\.flash_attention` on mcore had no suggestion."""
    code, out, _ = sw("explain", fx("configs", "families", "qwen3_legacy_names.yaml"), capsys=capsys)
    assert "pattern 'feed_forward\\.mul' (applied on layers 1-2) matches nothing" in out
    assert "(did you mean 'mlp\\.mul'? the mcore path's name)" in out
    assert "(did you mean 'self_attention\\.core_attention\\.flash_attention'? the mcore path's name)" in out
    assert "stage 0: layers 0-3 (4), full 1, select 0, comm 0, swap 0" in out     # nothing applies


def test_qwen3_moe_select_true_defaults_are_not_counted_as_select(capsys):
    """21.8: `select_recompute: True` on Qwen3-MoE expands to four defaults that match nothing;
    SW104 said so while every stage summary still counted them as select."""
    code, out, _ = sw("explain", fx("configs", "families", "qwen3_moe_ignored_swap.yaml"), capsys=capsys)
    assert "SW104" in out and "stage 0: layers 0-2 (3), full 0, select 0, comm 0, swap 0" in out


def test_dsv3_research_yaml_on_the_legacy_path_says_why_unknown_and_applies_no_tree(capsys):
    """21.9: `model.arch.type DeepseekV3ForCausalLM` on the legacy path was a bare "UNKNOWN"
    although `swapwatch families` lists deepseek_v3; `--model deepseek_v3` there is refused."""
    cfg = fx("configs", "dsv3_legacy_arch.yaml")
    code, out, _ = sw("explain", cfg, capsys=capsys)
    assert "model family: DeepseekV3ForCausalLM (UNKNOWN: model.arch.type DeepseekV3ForCausalLM at" in out
    assert ("on the legacy path (no use_legacy: False): swapwatch has deepseek_v3's layer tree for the mcore "
            "path only") in out and "set use_legacy: False and model_type: deepseek_v3" in out
    assert "SW307" in out
    code, out, err = sw("explain", cfg, "--model", "deepseek_v3", capsys=capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--model deepseek_v3: an mcore-path family, but the YAML is on the legacy" in err


def test_mcore_yaml_without_model_type_says_what_to_add(capsys):
    """21.9: an mcore YAML without model_type naming the model only in model.arch.type."""
    cfg = fx("configs", "dsv3_no_model_type.yaml")
    code, out, _ = sw("explain", cfg, capsys=capsys)
    assert ("use_legacy: False but model.model_config has no model_type / architectures; model.arch.type "
            "DeepseekV3ForCausalLM at") in out
    assert "add model.model_config.model_type: deepseek_v3, or pass --model deepseek_v3" in out
    code, out, _ = sw("explain", cfg, "--model", "deepseek_v3", capsys=capsys)
    assert "model family: deepseek_v3 (mcore; --model)" in out


def test_the_genuine_logs_of_these_configs_verify_as_the_rules_say(capsys):
    """The same three configs built by real MindFormers 2.1.0 (fixtures/logs/make_family_logs.py):
    the run applied what MindFormers does, the config findings are apart."""
    def verify_own(name):
        return sw("verify", fx("logs", "families", f"{name}.log"), "--config",
                  fx("configs", "families", f"{name}.yaml"), capsys=capsys)

    code, out, _ = verify_own("qwen3_swap_cell_select")
    assert code == 1 and "run: applied as configured on 1/1 ranks" in out and "config: 4 errors (SW201)" in out
    assert "SW202" not in out
    code, out, _ = verify_own("qwen3_swap_default")      # MindFormers logs no op swap line: nothing offloaded
    assert code == 0 and "config: 1 warning (SW104)" in out and "SW201" not in out
    code, out, _ = verify_own("qwen3_legacy_names")
    assert code == 0 and "config: 2 warnings (SW104)" in out and "the mcore path's name" in out
