"""A single legacy stage without gradient accumulation has no gradient buffer: its gradients are the
backward's own (docs/estimate.md "A single stage's gradients"). Checked block by block against what
DryRun L1's memory tracker named (fixtures/dryrun/findings/*.peak.json, tools/dryrun/tracker_summary.py);
the totals are checked stage by stage in tests/test_oracle_dryrun.py."""
import json
from pathlib import Path

import yaml

from swapwatch.memory.model import backward_end, estimate, head_bytes, stage_params
from swapwatch.memory.spec import spec_from_config
from swapwatch.config import load_config

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "fixtures" / "dryrun" / "cases"
FINDINGS = ROOT / "fixtures" / "dryrun" / "findings"
MIB = 1 << 20


def _finding(name):
    return json.loads((FINDINGS / f"{name}.peak.json").read_text())


def _group_mib(finding, *needles):
    return sum(g["mib"] for g in finding["groups"] if all(n in g["node"] for n in needles))


def test_qwen1_5_7b_peaks_at_the_backward_end_with_the_tracker_blocks():
    """Qwen1.5-7B finetune (O1, fp32 weights, full recompute, DP8 optimizer shard): the peak is the
    backward's end, where the tracker holds the layers' and head's whole fp32 gradients (Grad_Cast),
    the embedding's gradient and its AllReduce copy, and the ReduceScatter shards; none of it before
    the backward (the static part has no gradient)."""
    est = estimate(str(CASES / "qwen1_5_7b_finetune_r150_shipped.yaml"))
    st = est.stages[0]
    found = _finding("qwen1_5_7b_finetune_r150_shipped")
    assert st.phase == "backward_end"
    assert st.static["grads"] == 0
    held = _group_mib(found, "Grad_Cast/Cast")                      # layers (224 blocks) + head
    emb = _group_mib(found, "tok_embeddings", "UnsortedSegmentSum")
    emb_reduced = _group_mib(found, "tok_embeddings", "AllReduce")
    shards = _group_mib(found, "ReduceScatter")
    assert round(held) == 24704 + 2374 and emb == emb_reduced == 2374
    assert abs(st.backward_end / MIB - (held + emb + emb_reduced + shards)) < 8
    # the static part against the tracker's Weight blocks (weights and AdamW states)
    assert abs(st.static_total / MIB - found["by_kind_mib"]["Weight"]) < 8
    recorded = json.loads((CASES / "qwen1_5_7b_finetune_r150_shipped.json").read_text())
    used = recorded["stages"][0]["used_peak_mib"]
    assert abs(st.peak() / MIB - used) / used < 0.01


def test_whole_gradients_held_unless_o0_casts_each_shard_at_once(tmp_path):
    """The whole gradient lives until a compute kernel reads its reduction's output: at O0 with
    16-bit weights that is its own cast to fp32 right after (GLM3-6B: tens of task ticks); with fp32
    weights (no cast) or at O1 (the cast fused after the backward) it is the backward's end (the
    Qwen1.5-7B cuts: hundreds to thousands of ticks). The model holds them in exactly those cases."""
    glm3 = _finding("glm3_6b_multiturn_r150_shipped")["held_after_last_use"]["groups"]
    prompt = [g for g in glm3 if "Grad_MatMul/MatMul" in g["node"]]
    assert prompt and all(g["max_ticks"] < 400 for g in prompt)
    for cut in ("o1_fp32", "o0_fp32", "o1_fp16"):
        groups = _finding(f"qwen1_5_7b_l4_r150_{cut}")["held_after_last_use"]["groups"]
        big = [g for g in groups if g["mib"] > 100]
        assert big and all(g["median_ticks"] > 600 for g in big), cut
    for cut in ("o1_fp32", "o0_fp32", "o1_fp16"):
        est = estimate(str(FINDINGS / f"qwen1_5_7b_l4_r150_{cut}.yaml"))
        emb = est.spec.symbols()["v"] * est.spec.hidden * est.spec.param_bytes
        # all three hold them: the held whole gradients set the phase above the embedding's and the shards'
        assert est.stages[0].backward_end > 4 * emb, cut
    g = estimate(str(CASES / "glm3_6b_multiturn_r150_shipped.yaml"))
    spec = g.spec
    assert spec.jit_level == "O0" and spec.param_bytes == 2
    # only the embedding's gradient and the shards, cast to fp32: nothing whole of the layers
    params, whole = stage_params(spec, g.fam, 0, spec.num_layers)
    emb = spec.symbols()["v"] * spec.hidden
    assert g.stages[0].backward_end == emb * 2 + (params - whole) * 4 // spec.shard + whole * 2
    assert g.stages[0].backward_end < (params - emb) * 2
    # without data parallel nothing reduces a gradient early: all of them wait for the optimizer
    data = yaml.safe_load((CASES / "glm3_6b_multiturn_r150_shipped.yaml").read_text())
    data["parallel_config"]["data_parallel"] = 1
    (tmp_path / "dp1.yaml").write_text(yaml.safe_dump(data))
    one = estimate(str(tmp_path / "dp1.yaml"))
    assert one.spec.dp == 1 and one.stages[0].backward_end == params * 2


def test_the_o1_cut_peaks_at_the_backward_end_as_measured():
    """The 4-layer O1 cut (not used to design the term): the backward's end is its peak, and the
    model's figure is the tracker's Kernel blocks there (10893 MiB) to 1 %."""
    est = estimate(str(FINDINGS / "qwen1_5_7b_l4_r150_o1_fp32.yaml"))
    found = _finding("qwen1_5_7b_l4_r150_o1_fp32")
    st = est.stages[0]
    assert st.phase == "backward_end"
    assert abs(st.backward_end / MIB - found["by_kind_mib"]["Kernel"]) / found["by_kind_mib"]["Kernel"] < 0.01


def test_buffers_stay_in_the_static_part(tmp_path):
    """Pipeline stages, gradient accumulation and the mcore path keep a gradient buffer: the whole
    gradients stay in the static part and there is no backward-end phase."""
    est = estimate(str(CASES / "qwen2_5_7b_l8_pp2_full.yaml"))
    assert all(st.static["grads"] > 0 and st.backward_end == 0 for st in est.stages)
    data = yaml.safe_load((CASES / "qwen1_5_7b_finetune_r150_shipped.yaml").read_text())
    data["runner_config"]["gradient_accumulation_steps"] = 2
    (tmp_path / "ga2.yaml").write_text(yaml.safe_dump(data))
    spec = spec_from_config(load_config(str(tmp_path / "ga2.yaml"), check_rules=False))
    assert spec.grad_buffer
    est = estimate(str(CASES / "qwen1_5_7b_finetune_r150_shipped.yaml"))
    assert backward_end(spec, est.fam, 0, 32) == 0


def test_o0_loss_holds_four_fp32_tensors_per_logit():
    """GLM3-6B (O0, fp16): the loss holds OneHot, _LogSoftmax's Sub, _NLLLoss' Exp and Sub, each fp32
    [tokens, vocab] (4 x 4064 MiB at its peak); O1 fuses three of them (the Qwen2.5 last stage: 3)."""
    g = estimate(str(CASES / "glm3_6b_multiturn_r150_shipped.yaml"))
    found = _finding("glm3_6b_multiturn_r150_shipped")
    loss = _group_mib(found, "loss-CrossEntropyLoss")
    assert round(loss) == 4 * 4064
    spec = g.spec
    tokens_vocab = spec.batch * spec.seq * spec.vocab
    assert head_bytes(spec, 0) - tokens_vocab * 16 < 256 * MIB
    spec.jit_level = "O1"
    assert head_bytes(spec, 0) - tokens_vocab * 12 < 256 * MIB
