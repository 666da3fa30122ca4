"""Model families: the family from the YAML, each layer on its own tree, the mcore config surface,
MTP, and the rules that come with them (SW207, SW306, SW307, SW308), on maintainer YAMLs of the
MindFormers repository (``fixtures/configs/mindformers``) and on logs of real MindFormers 2.1.0
builds (``fixtures/logs/families``, made by ``fixtures/logs/make_family_logs.py``)."""
import os
import subprocess
import sys

import pytest
import yaml

from swapwatch.engine import strategy
from swapwatch.config import load_config
from swapwatch.errors import ConfigError, InputError
from swapwatch.commands.explain import explain
from swapwatch.model.families import ModelFamily, family_table, known_families
from swapwatch.layouts import family_data, load_flows, load_layout
from swapwatch.commands.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MF = os.path.join(ROOT, "fixtures", "configs", "mindformers")
FAM_CFG = os.path.join(ROOT, "fixtures", "configs", "families")
FAM_LOG = os.path.join(ROOT, "fixtures", "logs", "families")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def edited(tmp_path, base, name="x.yaml", recompute=None, model_config=None, swap_config=None, drop=(), **top):
    with open(os.path.join(MF, base), encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    mc = data["model"]["model_config"]
    for key in drop:
        mc.pop(key, None)
    mc.update(model_config or {})
    if recompute is not None:
        data["recompute_config"] = recompute
    if swap_config is not None:
        data["swap_config"] = swap_config
    data.update(top)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(p)


# ---- the family from the YAML ---------------------------------------------------------------

@pytest.mark.parametrize("base, family, path, kinds", [
    ("pretrain_qwen3_32b_4k.yaml", "qwen3", "mcore", {"dense"}),
    ("pretrain_qwen3_30b_a3b_4k.yaml", "qwen3_moe", "mcore", {"moe"}),
    ("pretrain_deepseek3_671b.yaml", "deepseek_v3", "mcore", {"dense", "moe"}),
    ("finetune_glm4_9b.yaml", "glm4", "legacy", {"dense"}),
    ("pretrain_telechat3_36b.yaml", "telechat3", "mcore", {"dense"}),
])
def test_maintainer_yaml_names_its_family(base, family, path, kinds):
    ex = explain(os.path.join(MF, base))
    fam = ex.plan.family
    assert (fam.name, fam.path, fam.known) == (family, path, True)
    assert {ex.plan.layout_key(lp.layer).split(":")[1] for lp in ex.plan.layers} == kinds
    header = cli("explain", os.path.join(MF, base)).stdout.splitlines()[1]
    assert f"model family: {family} ({path};" in header and f"{base}:" in header


def test_deepseek_layers_dense_then_moe_and_mtp():
    ex = explain(os.path.join(MF, "pretrain_deepseek3_671b.yaml"))
    keys = [ex.plan.layout_key(i) for i in range(5)]
    # DeepseekV3Config's defaults: first_k_dense_replace 3, one MTP layer
    assert keys == ["deepseek_v3:dense"] * 3 + ["deepseek_v3:moe"] * 2
    assert len(ex.plan.mtp) == 1 and ex.plan.mtp[0].layer == ex.plan.geometry.num_layers - 1
    assert ex.plan.layout_key(ex.plan.mtp[0].layer, mtp=True) == "deepseek_v3:mtp"
    # MTP on mcore is a second block: num_layers is not increased by the MTP depth
    assert ex.plan.geometry.num_layers == 61


def test_llama_variants_from_flags(tmp_path):
    base = {"model": {"arch": {"type": "LlamaForCausalLM"},
                      "model_config": {"type": "LlamaConfig", "num_layers": 2}}}
    for flags, name in (({}, "llama"), ({"qkv_concat": True}, "llama_qkv_concat"),
                        ({"qkv_concat": True, "qkv_has_bias": True}, "llama_qkv_concat_bias"),
                        ({"qkv_has_bias": True}, "llama_qkv_bias")):
        data = yaml.safe_load(yaml.safe_dump(base))
        data["model"]["model_config"].update(flags)
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(data))
        assert explain(str(p)).plan.family.name == name


def test_structural_variants(tmp_path):
    """Flash attention off (legacy Llama: no attention.flash_attention cell, so the default op swap
    reaches nothing) and DeepSeek-V3 with q_lora_rank null (one linear_q_proj) have their own trees."""
    p = tmp_path / "noflash.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"},
                                           "model_config": {"num_layers": 2, "use_flash_attention": False}},
                                 "swap_config": {"swap": True}}))
    ex = explain(str(p))
    assert ex.plan.family.name == "llama_noflash"
    assert any(f.code == "SW104" and f.op == r".*\.flash_attention" for f in ex.findings)
    p = edited(tmp_path, "pretrain_deepseek3_671b.yaml", model_config={"q_lora_rank": None},
               recompute={"select_recompute": [r"self_attention\.linear_q_proj", r"self_attention\.linear_q_up_proj"]})
    ex = explain(p)
    assert ex.plan.family.name == "deepseek_v3_no_q_lora" and len(ex.plan.mtp) == 1
    assert [f.op for f in ex.findings if f.code == "SW104"] == [r"self_attention\.linear_q_up_proj"]


def test_qkv_concat_tree_has_no_w1(tmp_path):
    """Qwen2.5-style Llama (qkv_concat True): feed_forward\\.w1\\..* reaches nothing (SW104), the
    fused w_gate_hidden does."""
    p = tmp_path / "q25.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"},
                                           "model_config": {"num_layers": 2, "qkv_concat": True}},
                                 "recompute_config": {"select_recompute": [r"feed_forward\.w1\.activation\.silu",
                                                                           r"feed_forward\.w_gate_hidden"]}}))
    ex = explain(str(p))
    assert [f.op for f in ex.findings if f.code == "SW104"] == [r"feed_forward\.w1\.activation\.silu"]


def test_model_option_overrides_and_unknown_is_exit_2(tmp_path):
    p = os.path.join(MF, "pretrain_qwen3_32b_4k.yaml")
    r = cli("explain", p, "--model", "telechat3")
    assert r.returncode == 0 and "model family: telechat3 (mcore; --model)" in r.stdout
    r = cli("explain", p, "--model", "gpt5")
    assert r.returncode == 2 and "unknown model family 'gpt5'" in r.stderr and "\n" not in r.stderr.strip()


def test_families_command_lists_classes():
    r = cli("families")
    assert r.returncode == 0
    for name in ("qwen3", "qwen3_moe", "deepseek_v3", "glm4", "llama_qkv_concat", "telechat3"):
        assert any(line.startswith(name + " ") for line in r.stdout.splitlines())
    assert "MultiTokenPredictionLayer" in r.stdout and "ChatGLM2Block" in r.stdout
    assert family_table() == r.stdout


def test_every_flow_path_exists_in_its_layout():
    for name in known_families():
        for kind in family_data(name)["layouts"]:
            paths = {p for p, _ in load_layout(f"{name}:{kind}").paths()}
            flows = load_flows(f"{name}:{kind}")
            assert flows, f"{name}:{kind} has no flows (SW202)"
            for src, dsts in flows.items():
                assert src in paths and all(d in paths for d in dsts), (name, kind, src, dsts)


# ---- SW307 unknown family -------------------------------------------------------------------

def test_sw307_fires_on_unknown_family_and_resolves_nothing(tmp_path):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", model_config={"model_type": "mamba9",
                                                                      "architectures": ["Mamba9ForCausalLM"]},
               recompute={"select_recompute": [r"nothing\.here"]})
    ex = explain(p)
    codes = [f.code for f in ex.findings]
    assert codes == ["SW307"], codes           # no SW104: nothing could be resolved
    assert "mamba9" in ex.findings[0].message and ex.findings[0].severity == "warning"
    assert not ex.plan.family.known


def test_sw307_quiet_on_known_family():
    assert not [f for f in explain(os.path.join(MF, "pretrain_qwen3_32b_4k.yaml")).findings if f.code == "SW307"]


# ---- SW306 / SW308: the mcore swap surface ---------------------------------------------------

def test_sw306_fires_on_top_level_swap_config(tmp_path):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", recompute={"recompute": [2]},
               swap_config={"swap": True, "layer_swap": [{"backward_prefetch": 1, "layers": [0]}]})
    ex = explain(p)
    f = [x for x in ex.findings if x.code == "SW306"]
    assert len(f) == 1 and f[0].severity == "error" and ex.exit_code == 1
    assert "swap_config has no effect on use_legacy: False models" in f[0].message
    # nothing is swapped, and recompute keeps its counts meaning
    assert not ex.plan.swap and all(lp.layer_swap is None for lp in ex.plan.layers)


def test_sw306_quiet_when_the_top_level_swap_is_off(tmp_path):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", swap_config={"swap": False, "default_prefetch": 2})
    assert not [f for f in explain(p).findings if f.code == "SW306"]


def test_sw306_quiet_with_model_config_keys(tmp_path):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", recompute={"recompute": [2]},
               model_config={"swap": True, "layer_swap": [{"backward_prefetch": 2, "layers": [5]}]})
    ex = explain(p)
    assert not [f for f in ex.findings if f.code in ("SW306", "SW308")]
    assert ex.plan.swap and ex.plan.layers[5].layer_swap == 2 and ex.plan.layers[2].full_recompute


def test_sw308_fires_on_default_prefetch_and_is_quiet_without(tmp_path):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", model_config={"cpu_offloading": True, "default_prefetch": 4})
    ex = explain(p)
    assert [f.code for f in ex.findings if f.code == "SW308"] == ["SW308"]
    assert ex.plan.formative["op_swap"] == {r".*\.flash_attention": [{"backward_prefetch": 1, "layers": True}]}
    # the default op swap reaches nothing on an mcore layer: SW104 says so
    assert any(f.code == "SW104" and f.op == r".*\.flash_attention" for f in ex.findings)
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", name="y.yaml", model_config={"cpu_offloading": True})
    assert not [f for f in explain(p).findings if f.code == "SW308"]


def test_mcore_auto_prefetch_accepted_but_legacy_refuses(tmp_path):
    op = [{"op_name": r"self_attention\.core_attention", "backward_prefetch": "Auto", "layers": True}]
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", model_config={"cpu_offloading": True, "op_swap": op})
    assert explain(p).plan.layers[0].op_swap == {r"self_attention\.core_attention": "Auto"}
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(yaml.safe_dump({"model": {"model_config": {"num_layers": 2}},
                                      "swap_config": {"swap": True, "op_swap": op}}))
    with pytest.raises(ConfigError):
        load_config(str(legacy))


@pytest.mark.parametrize("recompute, model_config, words", [
    ({"recompute": [1, 2]}, {"cpu_offloading": True}, "only 4 pipeline stage"),
    ({"recompute": [[1]]}, {"cpu_offloading": True}, "flat list of layer ids"),
    ({"recompute_slice_activation": True}, {}, "not supported in Mcore"),
    ({}, {"swap": True, "cpu_offloading": False}, "aliases"),
])
def test_mcore_refusals_exit_2(tmp_path, recompute, model_config, words):
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", recompute=recompute, model_config=model_config)
    if recompute.get("recompute") == [1, 2]:
        # pipeline_stage 4 in the maintainer YAML: 5 per-stage entries are too many
        p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", recompute={"recompute": [1, 2, 0, 0, 1]},
                   model_config=model_config)
    r = cli("explain", p)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert words in r.stderr and "Traceback" not in r.stderr


# ---- SW207: preset / shared primitives ------------------------------------------------------

def test_sw207_fires_on_preset_and_shared_primitives(tmp_path):
    p = edited(tmp_path, "pretrain_deepseek3_671b.yaml",
               recompute={"select_recompute": [r"mlp\.experts\.swiglu", r"mlp\.router\.gating_activation"]})
    found = [f for f in explain(p).findings if f.code == "SW207"]
    assert {f.op for f in found} == {"mlp.experts.swiglu", "mlp.router.gating_activation"}
    preset = next(f for f in found if f.op == "mlp.experts.swiglu")
    shared = next(f for f in found if f.op == "mlp.router.gating_activation")
    assert preset.layer == 3                   # the first MoE layer (first_k_dense_replace 3)
    assert shared.layer == 4                   # the second layer that reaches the shared object


def test_sw207_fires_on_legacy_llama_norm_cast(tmp_path):
    p = tmp_path / "l.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"}, "model_config": {"num_layers": 2}},
                                 "recompute_config": {"select_recompute": [r"attention_norm\.cast"]}}))
    assert [f.op for f in explain(str(p)).findings if f.code == "SW207"] == ["attention_norm.cast"]


def test_sw207_quiet_on_default_select(tmp_path):
    p = edited(tmp_path, "pretrain_deepseek3_671b.yaml", recompute={"select_recompute": True,
                                                                     "select_comm_recompute": True})
    ex = explain(p)
    assert not [f for f in ex.findings if f.code in ("SW207", "SW104")], [f.message for f in ex.findings]


# ---- MTP ------------------------------------------------------------------------------------

def test_mtp_formative_block_logged_twice_and_mtp_layer_on_its_tree():
    cfg = load_config(os.path.join(FAM_CFG, "deepseek_v3_mtp.yaml"))
    plan = strategy.plan(cfg)
    lines = strategy.layer_setting_lines(plan)
    assert lines.count("num_layers per stage: [[4]]") == 2
    assert lines[-1] == "Set select comm recompute on at layer 3: enorm.norm, hnorm.norm, final_layernorm.norm"
    assert strategy.formative_lines(plan) == [m for _, m in strategy.init_messages(plan)] * 2
    doc = plan.to_json()
    assert doc["mtp"][0]["layer"] == 3 and doc["mtp"][0]["layout"] == "deepseek_v3:mtp"


def test_mtp_row_in_explain_table():
    r = cli("explain", os.path.join(FAM_CFG, "deepseek_v3_mtp.yaml"))
    assert any(line.startswith("3 (MTP)") for line in r.stdout.splitlines()), r.stdout


# ---- verify on real MindFormers 2.1.0 logs ---------------------------------------------------

@pytest.mark.parametrize("name, codes", [
    ("qwen3_select", set()),
    ("deepseek_v3_mtp", set()),
    ("glm4_select", set()),
    # besides the conflict, its op swap of the attention core at backward_prefetch 1 cannot hide its
    # copies at the 910B's host link (SW212, issue 34); the config read from the log alone has no sizes
    ("qwen3_swap_conflict", {"SW201", "SW212"}),
    ("qwen3_moe_ignored_swap", {"SW306", "SW104"}),
    # MindFormers' default select set (feed_forward.mul + w1.activation.silu) frees the SiLU-Mul
    # product on the fine-grain interleaved layer this YAML builds (w2 reads it itself): no SW211 (on
    # the plain layer it frees nothing: tests/test_estimate_unmodelled.py)
    ("llama2_70b_select", set()),
    # the w1 patterns reach nothing on the fused FFN: a warning, no SW101; the maintainer YAML's
    # per-stage counts exceed the stage's layers (capped by MindFormers without a word: SW206)
    ("qwen2_5_qkv_concat", {"SW104", "SW206"}),
])
def test_verify_real_family_logs(name, codes):
    res = verify([os.path.join(FAM_LOG, f"{name}.log")], config_path=os.path.join(FAM_CFG, f"{name}.yaml"))
    assert {f.code for f in res.findings if f.severity in ("error", "warning")} == codes, \
        [f.message for f in res.findings]


@pytest.mark.parametrize("name, codes, family", [
    ("qwen3_select", set(), "qwen3"),
    ("deepseek_v3_mtp", set(), "deepseek_v3"),
    ("glm4_select", set(), "glm4"),
    ("llama2_70b_select", set(), "llama"),
    ("qwen2_5_qkv_concat", {"SW104", "SW206"}, "llama_qkv_concat_bias"),
    ("qwen3_swap_conflict", {"SW201"}, "qwen3"),
    ("qwen3_moe_ignored_swap", {"SW306", "SW104"}, "qwen3_moe"),
])
def test_verify_real_family_logs_without_config(name, codes, family):
    """Without --config the log's own config is used, read on the family its lines show (and on
    mcore with the swap LayerSetting really used, from its Formative lines)."""
    res = verify([os.path.join(FAM_LOG, f"{name}.log")])
    assert res.plan.family.name == family, res.plan.family
    assert {f.code for f in res.findings if f.severity in ("error", "warning")} == codes, \
        [f.message for f in res.findings]


def test_verify_mcore_conflict_layer():
    res = verify([os.path.join(FAM_LOG, "qwen3_swap_conflict.log")],
                 config_path=os.path.join(FAM_CFG, "qwen3_swap_conflict.yaml"))
    assert [f.layer for f in res.findings if f.code == "SW201"] == [0]


def test_unknown_family_is_not_llama():
    fam = ModelFamily("mamba9", origin="test", known=False)
    assert fam.layout_key(0) is None and not fam.walk(None, r"feed_forward\.mul", "recompute").matched


def test_input_error_for_unknown_layout_key():
    with pytest.raises(InputError):
        load_layout("qwen3:mtp")


def test_readme_family_outputs_are_real():
    """docs/families.md's `swapwatch families` and DeepSeek-V3 explain blocks are what the commands
    print (every other transcript: tests/test_docs_transcripts.py)."""
    with open(os.path.join(ROOT, "docs", "families.md"), encoding="utf-8") as fh:
        readme = fh.read()
    assert family_table().rstrip("\n") in readme
    ex = cli("explain", "fixtures/configs/families/deepseek_v3_bad.yaml").stdout.splitlines()
    shown = "\n".join(ex[:2] + ["..."] + ex[ex.index(next(x for x in ex if x.startswith("Findings"))):])
    assert shown in readme


# ---- SW202 on a generated family's flows ------------------------------------------------------

def test_sw202_follows_the_family_flows(tmp_path):
    """Qwen3 (mcore): the core attention's output feeds linear_proj; recomputing linear_proj on a
    layer where core_attention is swapped voids the swap there, and only there."""
    op = [{"op_name": r"self_attention\.core_attention", "backward_prefetch": 1, "layers": [1, 2]}]
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", recompute={"select_recompute": {r"self_attention\.linear_proj": [1]}},
               model_config={"cpu_offloading": True, "op_swap": op})
    found = [f for f in explain(p).findings if f.code == "SW202"]
    assert [f.layer for f in found] == [1]
    assert "self_attention.core_attention -> self_attention.linear_proj" in found[0].message
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", name="y.yaml",
               recompute={"select_recompute": {r"mlp\.linear_fc2": [1]}},
               model_config={"cpu_offloading": True, "op_swap": op})
    assert not [f for f in explain(p).findings if f.code == "SW202"]


def test_pretrained_model_dir_config_json(tmp_path):
    """A finetune YAML takes the model from pretrained_model_dir/config.json (the YAML's own
    model_config keys win, as MindFormers' merge_model_config does)."""
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text('{"model_type": "qwen3_moe", "num_hidden_layers": 8, "num_experts": 8}')
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", drop=("model_type", "architectures", "num_hidden_layers"),
               pretrained_model_dir=str(hf))
    ex = explain(p)
    assert ex.plan.family.name == "qwen3_moe" and ex.plan.geometry.num_layers == 8
    assert str(hf / "config.json") in ex.plan.family.origin
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", name="y.yaml", pretrained_model_dir=str(hf))
    assert explain(p).plan.family.name == "qwen3"        # the YAML's model_type wins


def test_mcore_swap_errors_name_the_model_config_key(tmp_path):
    """TransformerSwapConfig's refusal of the model_config swap keys points at those keys."""
    p = edited(tmp_path, "pretrain_qwen3_32b_4k.yaml", model_config={
        "swap": True, "layer_swap": [{"backward_prefetch": 1, "layers": True}, {"backward_prefetch": 2, "layers": [1]}]})
    r = cli("explain", p)
    assert r.returncode == 2 and "model.model_config.layer_swap[1]: " in r.stderr, r.stderr
    assert "Invalid layer_swap configuration at index 1" in r.stderr


def test_sw207_conditional_preset_of_llama_without_flash_attention(tmp_path):
    """LLamaAttention without flash attention recomputes its core ops itself as soon as
    select_recompute is set; a select pattern on one of them crashes the build."""
    p = tmp_path / "nf.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"},
                                           "model_config": {"num_layers": 2, "use_flash_attention": False}},
                                 "recompute_config": {"select_recompute": [r"attention\.softmax"]}}))
    assert [f.op for f in explain(str(p)).findings if f.code == "SW207"] == ["attention.softmax"]
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"},
                                           "model_config": {"num_layers": 2, "use_flash_attention": False}},
                                 "recompute_config": {"select_recompute": [r"feed_forward\.mul"]}}))
    assert not [f for f in explain(str(p)).findings if f.code == "SW207"]
