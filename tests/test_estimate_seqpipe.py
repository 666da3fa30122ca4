"""SeqPipe (legacy ``parallel_config.seq_split_num`` > 1 under MindSpore's seqpipe scheduler): the chunks in
flight (``model.seqpipe_inflight``, MindSpore's ``SeqpipeScheduler``), the layer tensors of one sequence chunk,
the attention's whole-sequence key / value and the key / value caches, on the real model code and the corpus
YAMLs (docs/estimate.md "SeqPipe"). The DryRun L1 records that check the figures
(``llama2_70b_l8_pp2_seqpipe_none``, ``qwen2_5_72b_32k_s0``, the held-out ``qwen2_5_72b_32k_l16_split4``)
are compared by tests/test_oracle_dryrun.py.
"""
from __future__ import annotations


import pytest
import yaml

from swapwatch.config import load_config
from swapwatch.memory.keys import MODELLED, SEQ_SPLIT_KEY, UNMODELLED, classify
from swapwatch.memory.model import estimate, inflight, seqpipe_inflight
from swapwatch.memory.spec import load_spec
from case_helpers import CASES, variant

SCHEDULER = "parallel.pipeline_config.pipeline_scheduler"


def test_chunks_in_flight_follow_the_seqpipe_warm_up():
    # no interleave: (P - 1 - p) + (n - 1) forwards before the first backward, one more with it
    assert seqpipe_inflight(8, 1, 8, 0, 8) == (15,)          # the 72B finetune's first stage: 15 chunks of 4k
    assert seqpipe_inflight(8, 1, 8, 7, 8) == (8,)           # the last stage: one micro-batch's chunks
    assert seqpipe_inflight(2, 1, 4, 0, 2) == (3,)           # the Llama2-70B cut: 3 chunks of 2k
    assert seqpipe_inflight(4, 1, 1, 0, 2) == (2,)           # capped at every chunk of every micro-batch
    assert inflight(8, 1, 8, 0, 8) == [15]
    assert inflight(1, 1, 8, 0, 8) == [1]                    # no pipeline: no seqpipe schedule


@pytest.mark.parametrize("P,m", [(2, 2), (2, 4), (4, 4), (4, 8), (8, 16)])
def test_one_sequence_chunk_with_interleave_is_the_interleaved_1f1b_count(P, m):
    # with seq_split_num 1 and m a multiple of P, SeqpipeScheduler's warm-up is the interleaved 1F1B one
    for p in range(P):
        assert list(seqpipe_inflight(P, 2, m, p, 1)) == inflight(P, 2, m, p)


def test_interleave_chunks_and_uneven_rounds():
    # ComputeCycleList: 6 micro-batches on 4 stages is one round of 6; warm-up (3 * 2) + 6 * 2 + 1 = 19,
    # so 20 forwards: the first interleave chunk's 12, then 8 of the second's
    assert seqpipe_inflight(4, 2, 6, 0, 2) == (12, 8)
    assert sum(seqpipe_inflight(4, 2, 6, 3, 2)) == 0 * 2 + 6 * 2 + 2


def test_the_keys_are_modelled_only_under_the_seqpipe_scheduler(tmp_path):
    sized = CASES / "llama2_70b_l8_pp2_seqpipe_none.yaml"
    rep = classify(load_config(str(sized), check_rules=False).tree)
    assert SEQ_SPLIT_KEY in rep.by_kind[MODELLED] and SCHEDULER in rep.by_kind[MODELLED]
    assert load_spec(str(sized)).seq_split == 2
    # the default 1F1B scheduler: MindSpore runs each micro-batch's chunks one after another, not sized
    plain = variant(tmp_path, "llama2_70b_l8_pp2_seqpipe_none.yaml", {SCHEDULER: "1f1b"})
    rep = classify(yaml.safe_load(open(plain)))
    assert SEQ_SPLIT_KEY in rep.by_kind[UNMODELLED]
    spec = load_spec(plain)
    assert spec.seq_split == 1 and SEQ_SPLIT_KEY in spec.unmodelled


def test_the_layers_hold_one_chunk_plus_the_whole_key_and_value():
    """The Llama2-70B cut (TP4, 8 kv heads, 4096 tokens, fp16, 4 layers a stage) with seq_split_num 2
    against the same cut without it: every layer tensor is half, the attention keeps the key and value
    of the other half beside them, the four caches are static, and stage 0 holds 3 chunks, not 2
    micro-batches."""
    one = estimate(str(CASES / "llama2_70b_l8_pp2_none.yaml"))
    two = estimate(str(CASES / "llama2_70b_l8_pp2_seqpipe_none.yaml"))
    b, hkv, seq, c = 1, 8 * 128 // 4, 4096, 2
    whole_kv = b * hkv * seq * c
    for a, z in zip(one.layers, two.layers):
        assert z["activation_bytes"] == a["activation_bytes"] // 2 + 2 * whole_kv // 2
    st1, st2 = one.stages[0], two.stages[0]
    assert st2.static["kv_caches"] == 4 * len(st2.layers) * whole_kv
    assert {k: v for k, v in st2.static.items() if k != "kv_caches"} == st1.static
    kept = sum(r["activation_bytes"] for r in two.layers if r["stage"] == 0)
    assert st2.activations == 3 * kept
    assert "parallel_config.seq_split_num" not in two.unmodelled


def test_recompute_set_at_all_is_refused_and_plan_never_offers_full_under_seqpipe(tmp_path):
    """``_wrap_network_with_tool_cells_legacy`` raises on ``if recompute_config.recompute`` with SeqPipe:
    per-stage counts too, even zeros. So the planner's levels on a SeqPipe YAML stop at select."""
    from swapwatch.memory.keys import REFUSED
    from swapwatch.memory.search import chains

    for value in (True, [1, 0], [0, 0]):
        bad = variant(tmp_path, "llama2_70b_l8_pp2_seqpipe_none.yaml", {"recompute_config.recompute": value})
        assert classify(yaml.safe_load(open(bad))).by_kind.get(REFUSED) == [SEQ_SPLIT_KEY], value
    levels = [lv for chain in chains(estimate(str(CASES / "llama2_70b_l8_pp2_seqpipe_none.yaml")).fam) for lv in chain]
    assert levels and not any(lv.full for lv in levels)
    assert any(lv.full for chain in chains(estimate(str(CASES / "llama2_70b_l8_pp2_none.yaml")).fam) for lv in chain)


def test_the_last_stage_holds_every_chunk_of_its_micro_batch_through_the_loss():
    """On the last stage every chunk of the micro-batch runs forward before the first backward: the
    chunks before the last keep the head matmul's input and _NLLLoss.bprop's two fp32 inputs, the last
    is at the loss' peak (model.head_bytes; the held-out stage 7 of qwen2_5_72b_32k_l16_split4 was
    25.6 % low with one chunk's head)."""
    from swapwatch.memory.model import head_bytes

    spec = load_spec(str(CASES / "qwen2_5_72b_32k_l16_split4.yaml"))
    sym = spec.symbols()
    assert (spec.seq_split, sym["s"], sym["skv"]) == (4, 8192, 32768)
    last = spec.pp - 1
    kept = sym["b"] * sym["s"] * (spec.hidden * spec.compute_bytes + sym["v"] * 8)
    assert head_bytes(spec, last, 4) - head_bytes(spec, last) == 3 * kept
    est = estimate(str(CASES / "qwen2_5_72b_32k_l16_split4.yaml"))
    assert est.stages[last].head == head_bytes(spec, last, seqpipe_inflight(8, 1, 8, last, 4)[-1])
    assert seqpipe_inflight(8, 1, 8, last, 4) == (4,)


def test_seqpipe_stages_set_the_margin_of_seqpipe_plans_only(monkeypatch):
    """memory/model_error.json keeps the SeqPipe stages' worst apart (calibrate.corpus_errors): a plan of
    a SeqPipe YAML takes it beside the table's (the larger of the two), any other plan of the table does
    not."""
    from swapwatch.memory import budget as bd
    from swapwatch.memory.planner import make_plan

    row = bd.model_errors()["tables"]["llama"]
    assert row["seqpipe_stages"] >= 3 and row["worst_error"] <= 0 and row["seqpipe_worst_error"] <= 0
    plain, why = bd.table_error("llama", "llama2")
    seq, swhy = bd.table_error("llama", "llama2", seqpipe=True)
    assert plain == -row["worst_error"] and seq == max(plain, -row["seqpipe_worst_error"])
    assert "SeqPipe stage(s) apart" in why and "SeqPipe stage(s) among them" in swhy
    # each YAML's error part counts the stages leaving out no lever key it has not (table_error's
    # ``unmodelled``): these two leave out none, so the plain-layer select comm stages are apart
    lever = [-v["worst_error"] for k, v in row["by_unmodelled"].items() if not k]
    res = make_plan(str(CASES / "llama2_70b_l8_pp2_seqpipe_none.yaml"), 60 << 30, margin=None)
    assert res.parts is not None and res.parts.error == max(lever + [-row["seqpipe_worst_error"]])
    res = make_plan(str(CASES / "llama2_70b_l8_pp2_none.yaml"), 60 << 30, margin=None)
    assert res.parts is not None and res.parts.error == max(lever) < plain
    # a SeqPipe worst beyond the table's is what a SeqPipe plan takes, and only it
    worse = dict(bd.model_errors(), tables={"llama": dict(row, seqpipe_worst_error=row["worst_error"] - 0.05)})
    monkeypatch.setattr(bd, "model_errors", lambda: worse)
    assert bd.table_error("llama", "llama2", seqpipe=True)[0] == pytest.approx(plain + 0.05)
    assert bd.table_error("llama", "llama2")[0] == plain
