"""The memory model's arithmetic against hand-worked cases (no MindSpore needed).

Shapes: b micro-batch, s sequence, h hidden, a heads, f ffn, t model_parallel. A Llama layer without
recompute keeps (in elements) the layer input, both norm outputs... written out per case below.
"""
from __future__ import annotations

import textwrap

import pytest

from swapwatch.errors import ConfigError
from swapwatch.memory.tensor_table import TensorTable, family_data, tables
from swapwatch.memory.model import estimate, inflight, static_parts
from swapwatch.memory.spec import llama_ffn, load_spec
from swapwatch.layouts import load_layout

TINY = "fixtures/configs/plan_tiny.yaml"
B, S, H, A, F, V = 2, 256, 256, 4, 688, 128


def write(tmp_path, body: str, name: str = "x.yaml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


def tiny_variant(tmp_path, **extra) -> str:
    """plan_tiny.yaml with lines replaced: key=value pairs patch `key: old` lines."""
    text = open(TINY).read()
    for key, value in extra.items():
        lines = text.splitlines()
        hit = [i for i, ln in enumerate(lines) if ln.strip().startswith(f"{key}:")]
        assert hit, key
        indent = lines[hit[0]][: len(lines[hit[0]]) - len(lines[hit[0]].lstrip())]
        lines[hit[0]] = f"{indent}{key}: {value}"
        text = "\n".join(lines) + "\n"
    return write(tmp_path, text)


def fam_of(path: str) -> TensorTable:
    return TensorTable(load_spec(path))


def cost_of(fam: TensorTable, patterns):
    return fam.cost(*fam.ops_reached(patterns))


def test_every_op_of_every_tensor_table_is_on_the_layout(tmp_path):
    # every table, on every layout family it serves, with and without flash attention (the
    # *_noflash trees have no flash_attention cell: MindFormers only takes them without it)
    assert {"tinyllama", "llama", "llama_qkv_concat_bias_noflash"} <= set(tables())
    for family, (table, _) in tables().items():
        paths = {p for p, _ in load_layout(family).paths()}
        flashes = (False,) if family.endswith("noflash") else (True,) if family_data(table).get("requires_flash") \
            else (False, True)
        for flash in flashes:
            spec = load_spec(TINY)
            spec.flash = flash
            fam = TensorTable(spec, family)
            assert fam.table == table and fam.ops
            for op in fam.ops:
                assert op.path in paths, (family, flash, op.path)
            for _, pats in fam.groups:       # every select group reaches ops of the table
                assert fam.ops_reached(pats)[0], (family, flash, pats)


def test_no_recompute_keeps_the_hand_counted_tensors():
    # x, xn1, q, k, v, o, h1, xn2 = 8 sbh; g, act, u, m = 4 sbf; probs = a s^2 b; fp32
    fam = fam_of(TINY)
    c = fam.cost(frozenset())
    assert c.kept == (8 * B * S * H + 4 * B * S * F + A * S * S * B) * 4 == 11927552
    assert c.regen == 0 and c.flops == 0


def test_full_recompute_keeps_the_layer_input_only():
    # Korthikanti's 2sbh in fp16 = the layer input; here fp32
    fam = fam_of(TINY)
    c = fam.cost(fam.all_ops, fam.layer_boundary)
    assert c.kept == B * S * H * 4
    assert c.regen == 11927552 - B * S * H * 4        # everything else comes back during backward
    assert c.flops == pytest.approx(fam.forward_flops() - B * S * H)   # the last add is the layer's output


def test_select_attention_core_drops_the_probabilities_only():
    # the cell's output (bmm_pv) is kept by MindSpore's cell recompute; softmax's output goes
    fam = fam_of(TINY)
    c = cost_of(fam, [r"attention\.flash_attention"])
    assert c.kept == 11927552 - A * S * S * B * 4
    assert c.regen == A * S * S * B * 4
    # bmm_qk (2 b a s s d) + mul + add (b a s s each) + softmax (5 b a s s)
    d = H // A
    assert c.flops == 2 * B * A * S * S * d + 7 * B * A * S * S


def test_select_mlp_cell_drops_the_four_ffn_tensors():
    fam = fam_of(TINY)
    c = cost_of(fam, [r"feed_forward"])
    assert c.kept == 11927552 - 4 * B * S * F * 4
    # w1, w3 matmuls + silu + mul are recomputed; w2 (the cell's output) is not
    assert c.flops == 2 * (2 * B * S * H * F) + 4 * B * S * F + B * S * F


def test_op_marks_whose_consumer_is_not_marked_do_nothing():
    # MindSpore: feed_forward.mul + silu alone clone nothing (their consumer w2 keeps them alive)
    fam = fam_of(TINY)
    c = cost_of(fam, [r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu"])
    assert c == fam.cost(frozenset())


def test_tensor_and_sequence_parallel_shard_the_hand_counted_tensors(tmp_path):
    t = 2
    path = write(tmp_path, open(TINY).read().replace("  pipeline_stage: 1", "  pipeline_stage: 1\n"
                                                   "  model_parallel: 2\n  use_seq_parallel: True"))
    fam = fam_of(path)
    # sequence-parallel region (x, xn1, h1, xn2) is split over s; q, k, v, o over heads; ffn over f
    want = (4 * B * (S // t) * H + 4 * B * S * (H // t) + 4 * B * S * (F // t) + B * (A // t) * S * S) * 4
    assert fam.cost(frozenset()).kept == want


def test_flash_attention_keeps_q_k_v_o_and_two_fp32_statistics(tmp_path):
    path = write(tmp_path, open(TINY).read().replace("    softmax_compute_type: float32",
                                                      "    softmax_compute_type: float32\n    use_flash_attention: True"))
    fam = fam_of(path)
    want = (8 * B * S * H + 4 * B * S * F) * 4 + 2 * B * A * S * 8 * 4
    assert fam.cost(frozenset()).kept == want


def test_static_memory_by_dtype_and_optimizer_shard(tmp_path):
    fam = fam_of(TINY)
    per_layer = 4 * H * H + 3 * H * F + 2 * H
    params = 4 * per_layer + V * H + (V * H + H)         # layers, embedding, head + final norm
    st = static_parts(load_spec(TINY), fam, 0, 4)
    assert st == {"weights": params * 4, "grads": params * 4, "optimizer_states": 0}   # SGD
    path = write(tmp_path, open(TINY).read().replace("type: SGD", "type: AdamW").replace(
        "  pipeline_stage: 1", "  pipeline_stage: 1\n  data_parallel: 4\n  optimizer_shard: True"))
    st = static_parts(load_spec(path), fam_of(path), 0, 4)
    # the norms (1 KB each) are below parallel_optimizer_threshold's default 64 KB: not sharded
    small = 4 * 2 * H + H
    assert st == {"weights": (params - small) * 4 // 4 + small * 4, "grads": params * 4,
                  "optimizer_states": (params - small) * 4 * 2 // 4 + small * 4 * 2}


def test_in_flight_micro_batches_of_1f1b_and_interleave():
    assert [inflight(4, 1, 16, p) for p in range(4)] == [[4], [3], [2], [1]]
    assert inflight(4, 1, 2, 0) == [2]                 # fewer micro-batches than stages
    assert inflight(1, 1, 8, 0) == [1]                 # no pipeline: accumulation runs one at a time
    # Megatron's interleaved warm-up: (P - p - 1) * 2 + (V - 1) * P forwards, then one more
    assert inflight(2, 2, 4, 0) == [3, 2]
    assert inflight(2, 2, 4, 1) == [2, 1]


def test_pipeline_stages_hold_their_in_flight_micro_batches(tmp_path):
    path = write(tmp_path, open(TINY).read().replace("  pipeline_stage: 1", "  pipeline_stage: 2\n  micro_batch_num: 4"))
    est = estimate(path)
    per_layer = 11927552
    assert est.stages[0].activations == 2 * 2 * per_layer     # 2 layers x 2 in flight
    assert est.stages[1].activations == 2 * 1 * per_layer
    # embedding on the first stage, head on the last
    assert est.stages[0].head == 0 and est.stages[1].head == B * S * H * 4 + B * S * V * (4 + 12)


def test_estimate_json_is_design_3_3a():
    est = estimate("fixtures/configs/demo_recompute.yaml")
    js = est.to_json()
    assert js["config"] == "fixtures/configs/demo_recompute.yaml" and js["family"] == "tinyllama"
    st = js["stages"][0]
    assert st["layers"] == [0, 1, 2, 3] and st["measured_peak_bytes"] is None
    assert st["peak_bytes"] == sum(st["components"].values())
    assert [r["choice"] for r in js["layers"]] == ["full"] + [r"select:attention\.flash_attention"] * 3
    assert js["layers"][0]["activation_bytes"] == B * S * H * 4


def test_llama_ffn_default_when_intermediate_size_is_absent():
    assert llama_ffn(4096) == 11008                      # Llama-2-7B
    assert llama_ffn(8192, 4096, 1.3) == 28672           # Llama-2-70B


def test_missing_size_is_one_line_naming_the_key(tmp_path):
    path = write(tmp_path, """\
        model:
          model_config:
            num_layers: 2
        """)
    with pytest.raises(ConfigError) as exc:
        load_spec(path)
    assert "model.model_config.hidden_size" in exc.value.one_line()
    path = write(tmp_path, open(TINY).read().replace("hidden_size: 256", "hidden_size: wide"), "y.yaml")
    with pytest.raises(ConfigError) as exc:
        load_spec(path)
    want = open(TINY).read().splitlines().index("    hidden_size: 256") + 1
    assert exc.value.line == want and "hidden_size" in exc.value.one_line()


def test_full_recompute_with_flash_attention_keeps_the_layer_input_only(tmp_path):
    # the fused kernel's softmax statistics are a side output for its own backward, not the layer's
    path = write(tmp_path, open(TINY).read().replace("    softmax_compute_type: float32",
                                                      "    softmax_compute_type: float32\n    use_flash_attention: True"))
    fam = fam_of(path)
    assert fam.cost(fam.all_ops, fam.layer_boundary).kept == B * S * H * 4
    # recomputing the attention cell regenerates q, k, v and the kernel's output
    c = cost_of(fam, [r"attention"])
    assert c.kept == fam.cost(frozenset()).kept - (4 * B * S * H * 4 + 2 * B * A * S * 8 * 4)
    # the fused kernel's cell alone is its own output: marking it recomputes nothing
    assert cost_of(fam, [r"attention\.flash_attention"]) == fam.cost(frozenset())


def test_hccl_buffers_only_on_ascend(tmp_path):
    """HCCL is Ascend's collective library: the same 2-way data-parallel job has its communication
    buffers named (and in ``not_in_peak``) with device_target Ascend, none on CPU (ModelSpec.hccl), in
    estimate as in plan (model.not_in_dryrun is the one place)."""
    from swapwatch.memory.model import estimate

    text = open("fixtures/configs/plan_tiny.yaml", encoding="utf-8").read()
    assert "parallel_config:\n  pipeline_stage: 1" in text
    text = text.replace("parallel_config:\n  pipeline_stage: 1", "parallel_config:\n  data_parallel: 2\n  pipeline_stage: 1")
    outs = {}
    for target in ("CPU", "Ascend"):
        p = tmp_path / f"{target}.yaml"
        p.write_text(text.replace('device_target: "CPU"', f'device_target: "{target}"'), encoding="utf-8")
        outs[target] = estimate(str(p)).to_json()["not_in_peak"]
    assert outs["CPU"]["communicators"] == 0 and outs["CPU"]["communication_buffers_bytes"] == 0
    assert outs["Ascend"]["communicators"] > 0 and outs["Ascend"]["communication_buffers_bytes"] > 0
