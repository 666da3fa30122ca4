"""estimate / plan on the real model families: the family is the one explain detects, every family
explain knows has a tensor table for every layer kind (issue 27), an unknown family is one line and
exit 2, and the legacy Llama table counts what the MindFormers 2.1.0 module code keeps for backward
(counted by hand below, not from the table)."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import pytest

from swapwatch.commands.explain import explain
from swapwatch.memory.tensor_table import tables
from swapwatch.memory.model import estimate
from swapwatch.memory.planner import make_plan

FAMILY_FIXTURES = sorted(glob.glob("fixtures/configs/families/*.yaml"))
WITH_TABLE = [p for p in FAMILY_FIXTURES if explain(p).plan.family.name in tables()]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True)


def test_every_family_explain_knows_has_a_table_for_every_layer_kind():
    from swapwatch.memory.tensor_table import kind_data, layout_kinds, table_for
    from swapwatch.layouts import families

    assert set(families()) <= set(tables())
    for fam in families():
        table, _ = table_for(fam)
        for kind in layout_kinds(fam):
            assert kind_data(table, kind), (fam, kind)
    assert {os.path.basename(p) for p in WITH_TABLE} >= {
        "llama2_70b_select.yaml", "qwen2_5_qkv_concat.yaml", "qwen3_select.yaml", "qwen3_moe_ignored_swap.yaml",
        "glm4_select.yaml", "deepseek_v3_mtp.yaml"}


@pytest.mark.parametrize("path", WITH_TABLE)
def test_estimate_uses_the_family_explain_detects(path):
    ex = explain(path)
    est = estimate(path)
    assert est.family == ex.plan.family.name == est.fam.layout_family
    # every layer's choice is the one explain resolves on that family's tree
    assert [lp.full_recompute for lp in est.plan.layers] == [lp.full_recompute for lp in ex.plan.layers]
    assert [lp.select_recompute for lp in est.plan.layers] == [lp.select_recompute for lp in ex.plan.layers]
    r = cli("estimate", path)
    assert r.returncode == 0, r.stderr
    table = "" if est.fam.table == est.family else f" (tensor table {est.fam.table})"
    assert r.stdout.splitlines()[0].startswith(f"{path}: {ex.plan.family.name}{table}, ")


@pytest.mark.parametrize("command", [("estimate",), ("plan", "--budget", "60GiB"), ("plot", "estimate")])
def test_an_unknown_family_is_one_line_and_exit_2(command, tmp_path, nosuch):
    args = [*command, nosuch] + (["-o", str(tmp_path / "e.png")] if command[0] == "plot" else [])
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and not (tmp_path / "e.png").exists()
    said = " ".join(command[:2]) if command[0] == "plot" else command[0]
    assert f"{said} does not model model family 'nosuch_moe'" in r.stderr and "no memory model for it" in r.stderr


def test_moe_and_mtp_layers_are_sized_on_their_own_kind():
    # the bug this replaces: a Qwen3-MoE YAML planned on the tiny Llama tree, then refused
    est = estimate("fixtures/configs/families/qwen3_moe_ignored_swap.yaml")
    assert est.family == "qwen3_moe" and est.fam.table == "qwen3_moe" and any(op.path == "mlp.experts.swiglu" for op in est.fam.ops)
    est = estimate("fixtures/configs/families/deepseek_v3_mtp.yaml")
    kinds = {row.get("mtp", False) for row in est.layers}
    assert kinds == {False, True}
    assert any(row["choice"].startswith("mtp:") for row in est.layers)
    make_plan("fixtures/configs/families/qwen3_moe_ignored_swap.yaml", 60 << 30)


def test_model_option_overrides_and_unknown_model_is_bad_input():
    path = "fixtures/configs/families/llama2_70b_select.yaml"
    assert estimate(path, "llama_qkv_concat").family == "llama_qkv_concat"
    r = cli("estimate", path, "--model", "nosuch")
    assert r.returncode == 2 and "--model: unknown model family 'nosuch'" in r.stderr


# ---- the legacy Llama table against a count from the MindFormers code ---------------------------

B, S, H, A, KV, F = 2, 32, 64, 4, 2, 96
D = H // A


def tiny_llama(tmp_path, flash: bool, concat: bool = False) -> str:
    p = tmp_path / f"l_{flash}_{concat}.yaml"
    p.write_text(textwrap.dedent(f"""\
        model:
          arch: {{type: LlamaForCausalLM}}
          model_config:
            type: LlamaConfig
            hidden_size: {H}
            num_heads: {A}
            n_kv_heads: {KV}
            intermediate_size: {F}
            seq_length: {S}
            vocab_size: 100
            num_layers: 2
            compute_dtype: float16
            use_flash_attention: {flash}
            qkv_concat: {concat}
        runner_config: {{batch_size: {B}}}
        recompute_config: {{recompute: False}}
        parallel_config: {{pipeline_stage: 1}}
        """))
    return str(p)


def llama_none_bytes(flash: bool) -> int:
    """What one LLamaDecodeLayer keeps for backward without recompute (fp16 compute, fp32 norm and
    softmax), module by module from models/llama/llama_transformer.py and llama_layer.py."""
    norms = 2 * (4 * B * S * H + 4 * B * S)             # LlamaRMSNorm x2: fp32 input copy + rstd
    qkv_in = 2 * B * S * H                               # wq/wk/wv share their input
    wo_in = 2 * B * S * A * D                            # merged heads
    if flash:                                            # FlashAttentionScore: q, k, v, out, max/sum
        attn = 2 * B * S * (A * D + 2 * KV * D + A * D) + 2 * 4 * B * A * S * 8
    else:                                                # _attn on repeated k/v: q, k, probs fp32+fp16, v
        attn = 2 * B * S * A * D * 3 + (4 + 2) * B * A * S * S
    ffn = 2 * B * S * H + 4 * 2 * B * S * F              # ffn_norm out; w1 out, silu out, w3 out, mul out
    return norms + qkv_in + attn + wo_in + ffn


@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize("concat", [False, True])
def test_llama_none_and_full_match_the_module_count(tmp_path, flash, concat):
    est = estimate(tiny_llama(tmp_path, flash, concat))
    assert est.family == "llama" + ("_qkv_concat" if concat else "") + ("" if flash else "_noflash")
    fam = est.fam
    assert fam.cost(frozenset()).kept == llama_none_bytes(flash)
    # MindFormers marks the two LlamaRMSNorm input casts for recompute when it builds the layer
    # (the layout's preset): their fp32 copies come back in backward from the fp16 input, which
    # is kept instead (x, h1)
    preset = {fam.ops[i].path for i in fam.preset_ops}
    assert preset == {"attention_norm.cast", "ffn_norm.cast"}
    assert [r["activation_bytes"] for r in est.layers] == [llama_none_bytes(flash) - 2 * (4 - 2) * B * S * H] * 2
    full = fam.cost(fam.all_ops, fam.layer_boundary)
    assert full.kept == 2 * B * S * H                    # the layer input only
    # ... and everything the backwards need comes back (the input itself is saved by no op:
    # the norm keeps its fp32 copy)
    assert full.regen == llama_none_bytes(flash)


def test_llama_select_groups_drop_what_their_ops_produce(tmp_path):
    fam = estimate(tiny_llama(tmp_path, flash=False)).fam
    none = fam.cost(frozenset()).kept
    attn = fam.cost(*fam.ops_reached(["attention"]))
    # everything the attention cell made but its output: q and the repeated k, v; both copies of the
    # probabilities; the merged heads wo keeps (its input, the attention_norm output, stays)
    assert none - attn.kept == 4 * 2 * B * S * A * D + (4 + 2) * B * A * S * S
    # its primitives alone recompute nothing: the bmm's output feeds the unmarked transpose
    core = r"attention\.(batch_matmul_q_k|mul|add|cast_attn|softmax|cast|batch_matmul)"
    assert fam.cost(*fam.ops_reached([core])).flops == 0
    mlp = fam.cost(*fam.ops_reached(["feed_forward"]))
    # w1/silu/w3/mul outputs go, the ffn_norm output (the cell's input) stays
    assert none - mlp.kept == 4 * 2 * B * S * F
    # the mul + silu select MindFormers YAMLs ship recomputes nothing (SW110's rule)
    assert fam.cost(*fam.ops_reached([r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu"])).flops == 0


@pytest.mark.parametrize("path", WITH_TABLE)
def test_plan_on_each_family_fixture_reexplains_clean(path, tmp_path):
    base = estimate(path)
    first = make_plan(path, 1)
    floor = max(first.lowest.values())                          # full recompute everywhere
    budget = (floor + 3 * max(st.peak() for st in base.stages)) // 4
    # no margin: a stage at its optimizer-step floor (DeepSeek-V3's, docs/estimate.md) has no room for one
    res = make_plan(path, budget, margin=0.0)
    assert res.fits, res.message()
    assert res.family == base.family and res.estimate.family == base.family
    out = tmp_path / "planned.yaml"
    out.write_text(res.text)
    again = explain(str(out))
    assert again.plan.family.name == base.family
    # no error the input did not already have (qwen3_moe_ignored_swap's SW306 is its point)
    before = {f.code for f in explain(path).findings if f.severity == "error"}
    assert not [f for f in again.findings if f.severity == "error" and f.code not in before]
    assert max(st.peak() for st in estimate(str(out)).stages) <= budget


# ---- the mcore Qwen3 table against a count from the MindFormers code ---------------------------

QD = 32                                                  # head_dim given apart from hidden / heads


def tiny_qwen3(tmp_path, fp32_residual: bool, flash: bool = True) -> str:
    p = tmp_path / f"q_{fp32_residual}_{flash}.yaml"
    p.write_text(textwrap.dedent(f"""\
        use_legacy: False
        model:
          model_config:
            model_type: qwen3
            hidden_size: {H}
            num_attention_heads: {A}
            num_key_value_heads: {KV}
            head_dim: {QD}
            intermediate_size: {F}
            seq_length: {S}
            vocab_size: 100
            num_hidden_layers: 2
            use_flash_attention: {flash}
            fp32_residual_connection: {fp32_residual}
        runner_config: {{batch_size: {B}}}
        recompute_config: {{recompute: False}}
        parallel_config: {{pipeline_stage: 1}}
        """))
    return str(p)


def qwen3_none_bytes(fp32_residual: bool) -> int:
    """One mcore TransformerLayer of Qwen3 without recompute (bf16 compute, fp32 norms), module by
    module from parallel_core/training_graph (transformer_layer.py, norm.py, attention.py,
    flash_attention.py, tensor_parallel/layers.py, mlp.py)."""
    r = 4 if fp32_residual else 2                        # dtype of the residual stream and the MLP
    hq, hkv = A * QD, KV * QD
    norms = 2 * (4 * B * S * H + 4 * B * S)              # input_layernorm, pre_mlp_layernorm
    qkv_in = 2 * B * S * H                               # linear_qkv's bf16 input
    qk_norms = 4 * B * S * (hq + hkv) + 4 * B * S * (A + KV)   # per-head RmsNorm: fp32 copy + rstd
    fa = 2 * B * S * (hq + 2 * hkv + hq) + 2 * 4 * B * A * S * 8   # BNSD q, k, v, out; max / sum
    proj_in = 2 * B * S * hq
    mlp = 2 * B * S * H + r * B * S * F * 3 + 2 * B * S * F    # fc1's bf16 input; silu in, its out,
    # up; fc2's bf16 input. Each linear's bf16 copy of its fp32 weight (ColumnParallelLinear.construct
    # casts it; the matmul's backward keeps it), as DryRun L1 shows (tests/test_oracle_dryrun.py)
    weights = 2 * (H * (hq + 2 * hkv) + hq * H + 3 * H * F)
    return norms + qkv_in + qk_norms + fa + proj_in + mlp + weights


@pytest.mark.parametrize("fp32_residual", [False, True])
def test_qwen3_none_and_full_match_the_module_count(tmp_path, fp32_residual):
    est = estimate(tiny_qwen3(tmp_path, fp32_residual))
    assert est.family == "qwen3" and est.fam.table == "qwen3"
    fam = est.fam
    assert [r["activation_bytes"] for r in est.layers] == [qwen3_none_bytes(fp32_residual)] * 2
    full = fam.cost(fam.all_ops, fam.layer_boundary)
    assert full.kept == 2 * B * S * H                    # the layer input (bf16: the layer's last cast)
    mlp = fam.cost(*fam.ops_reached(["mlp"]))
    r = 4 if fp32_residual else 2
    # the mlp cell keeps its input (pre_mlp_layernorm's output, which no op keeps without recompute)
    # (in the residual dtype) and drops the rest of its own: fc1's bf16 input, silu's input and
    # output, up, fc2's bf16 input
    assert qwen3_none_bytes(fp32_residual) - mlp.kept == \
        2 * B * S * H + 3 * r * B * S * F + 2 * B * S * F - r * B * S * H + 2 * 3 * H * F


def test_qwen3_without_flash_attention_keeps_the_repeated_kv(tmp_path):
    # mcore's training graph still runs FlashAttention without flash, on k / v repeated to every
    # query head (SelfAttention._repeat_kv): the kernel keeps 2 * (A - KV) * D more per token
    flash = estimate(tiny_qwen3(tmp_path, True)).layers[0]["activation_bytes"]
    plain = estimate(tiny_qwen3(tmp_path, True, flash=False)).layers[0]["activation_bytes"]
    assert KV < A and plain - flash == 2 * B * S * (A - KV) * QD * 2


def test_a_swap_plan_on_the_mcore_path_is_written_where_mcore_reads_it(tmp_path):
    # mcore LayerSetting takes swap from model.model_config (cpu_offloading, cpu_offloading_num_layers,
    # op_swap: swapwatch.config.MCORE_SWAP_KEYS); a top-level swap_config would be ignored (SW306)
    from swapwatch.memory.emit import emit
    from swapwatch.memory.tensor_table import LayerCost
    from swapwatch.memory.search import Level, StagePlan

    path = "fixtures/configs/families/qwen3_swap_conflict.yaml"      # has cpu_offloading + op_swap
    geo = explain(path).plan.geometry
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    levels = {0: Level("full", (), True, None, zero, 3), 1: Level("swap:1", (), False, 1, zero, 1),
              2: Level("swap:2", (), False, 2, zero, 1), 3: Level("none", (), False, None, zero, 0)}
    text = emit(open(path).read(), path, geo, [StagePlan(stage=0, fits=True, levels=levels)])
    out = tmp_path / "swap.yaml"
    out.write_text(text)
    ex = explain(str(out))
    assert [(lp.full_recompute, lp.layer_swap) for lp in ex.plan.layers] == \
        [(True, None), (False, 1), (False, 2), (False, None)]
    assert not [f for f in ex.findings if f.severity == "error"], [f.code for f in ex.findings]
    import yaml

    data = yaml.safe_load(text)
    assert "swap_config" not in data or not (data["swap_config"] or {}).get("swap")
    mc = data["model"]["model_config"]
    assert mc["cpu_offloading"] is True and mc["op_swap"] is None
    assert mc["cpu_offloading_num_layers"] == [{"backward_prefetch": 1, "layers": [1]},
                                               {"backward_prefetch": 2, "layers": [2]}]


# ---- the DryRun cases this table work recorded (fixtures/dryrun/cases) --------------------------

MY_CASES = ["qwen3_moe_l8_full", "qwen3_moe_l8_none", "deepseek_v3_l4_full", "deepseek_v3_l4_none"]


@pytest.mark.parametrize("name", MY_CASES)
def test_dryrun_cases_are_estimated_on_their_family(name):
    import json

    path = f"fixtures/dryrun/cases/{name}.yaml"
    est = estimate(path)
    assert est.family == name.rsplit("_l", 1)[0]
    rec = f"fixtures/dryrun/cases/{name}.json"
    if os.path.exists(rec):
        with open(rec, encoding="utf-8") as fh:
            case = json.load(fh)
        assert case["yaml"] == f"{name}.yaml" and case["family"] == est.family
        assert case["source"].startswith("fixtures/configs/mindformers/") and os.path.exists(case["source"])
        assert {st["stage"] for st in case["stages"]} <= {st.stage for st in est.stages}
        for st in case["stages"]:
            assert st["actual_peak_mib"] >= st["used_peak_mib"] > 0


def test_qwen3_moe_layer_keeps_the_weight_copies_dryrun_shows(tmp_path):
    """The mcore Qwen3-MoE layer keeps, per micro-batch in flight, the bf16 copies of its experts'
    weights that FFNGroupedGEMM casts and reshapes inside its Morph (moe/ffn.py:FFNGroupedGEMM.construct,
    forward_func), and of its attention weights (docs/estimate.md "The MoE layer's weight copies").
    Counted from the module code here; the layer's total against DryRun L1's tracker on a 4-layer cut
    of the same YAML: 464.9 MiB of blocks from one micro-batch's forward alive at the first backward."""
    mib = 1 << 20
    path = "fixtures/dryrun/cases/qwen3_moe_l8_none.yaml"
    est = estimate(path)
    fam = est.fam
    local, h, fm = 128 // 4, 2048, 768                   # num_experts / expert_parallel, hidden, moe_intermediate_size
    hq, hkv = 32 * 128 // 4, 4 * 128 // 4                # heads x head_dim / tp, kv heads x head_dim / tp
    kept = dict(fam.cost(frozenset()).by_tensor)
    assert kept["w1_r"] == 2 * local * h * 2 * fm == 192 * mib
    assert kept["w2_r"] == 2 * local * fm * h == 96 * mib
    assert kept["wqkv_c"] + kept["wproj_c"] == 2 * (h * (hq + 2 * hkv) + hq * h) == 9 * mib
    assert "xr32" not in kept                            # the tracker holds no fp32 copy of the router's input
    layer = est.layers[0]["activation_bytes"]
    assert abs(layer - 464.9 * mib) <= 0.01 * 464.9 * mib, layer / mib
    # full recompute regenerates them with the layer
    full = fam.cost(fam.all_ops, fam.layer_boundary)
    assert full.kept < 5 * mib and full.regen >= 297 * mib
    # bf16 parameters: the casts return the parameter, no copy
    text = open(path, encoding="utf-8").read().replace("params_dtype: float32", "params_dtype: bfloat16")
    (tmp_path / "bf16.yaml").write_text(text, encoding="utf-8")
    assert layer - estimate(str(tmp_path / "bf16.yaml")).layers[0]["activation_bytes"] == 297 * mib
