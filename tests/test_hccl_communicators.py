"""model.communicators against the HCCL groups DryRun's ranks run collectives on (issue 35 pt 1;
docs/estimate.md "The communicators a rank opens"). The records are fixtures/dryrun/hccl_groups.json,
written by tools/dryrun/hccl_groups.py from DryRun L1 logs and their comm_execute_order.csv: the
Mixtral-8x7B and Qwen2-57B cuts in fixtures/dryrun/hccl/ were run for this, the others are the
oracle tier's and the plan records' runs."""
from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict

import pytest

from swapwatch.memory.budget import CARD_HBM, DEFAULT_CARD, card_check
from swapwatch.memory.model import communicators, not_in_dryrun
from swapwatch.memory.spec import load_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = os.path.join(ROOT, "fixtures", "dryrun", "hccl_groups.json")
CUTS = os.path.join(ROOT, "fixtures", "dryrun", "hccl")
BASE = os.path.join(ROOT, "fixtures", "configs", "mindformers", "pretrain_qwen3_32b_4k.yaml")
MIB = 1 << 20


def records():
    with open(RECORDS, encoding="utf-8") as f:
        return json.load(f)


def with_buffers(record) -> int:
    """The communicators HCCL gives buffers: a collective on it, more than one rank."""
    return sum(1 for g in record["groups"] if g["ops"] and g["ranks"] > 1)


def spec_of(record):
    p = record["parallel"]
    return dataclasses.replace(load_spec(BASE), dp=p["dp"], tp=p["tp"], pp=p["pp"], cp=p["cp"], ep=p["ep"],
                               vocab_emb_dp=p["vocab_emb_dp"], mcore=not record["use_legacy"])


def test_the_count_is_each_layouts_busiest_recorded_rank():
    """Per parallel layout (sizes, vocab_emb_dp, code path), the count is the most any recorded rank
    gives buffers (the card check is per rank and the worst one decides), and no recorded rank
    needs more."""
    by_layout = defaultdict(list)
    for r in records():
        p = r["parallel"]
        by_layout[(p["dp"], p["tp"], p["pp"], p["cp"], p["ep"], p["vocab_emb_dp"], r["use_legacy"])].append(r)
    assert len(records()) == 23 and len(by_layout) >= 15
    for recs in by_layout.values():
        n = communicators(spec_of(recs[0]))
        assert n == max(with_buffers(r) for r in recs), [r["job"] for r in recs]
    # the one rank below its layout's count: mcore's second tensor-parallel group idles on a dense
    # model's last stage (its gathers are the first stage's: qwen3_32b_l8_tp4_sp_select_comm)
    below = [(r["job"], r["rank"]) for r in records() if with_buffers(r) < communicators(spec_of(r))]
    assert below == [("qwen3_32b_l8_none (stage 3)", 12)]


def test_created_is_not_allocated():
    """What the count leaves out, as recorded: groups MindSpore creates that no collective uses (the
    legacy path's one-rank group on every record that creates a group at all, mcore's own dp- group)
    and so never get buffers; and a group over every rank is the world's (Llama2-7B at DP8: every
    collective on hccl_world_group)."""
    recs = records()
    legacy = [r for r in recs if r["use_legacy"] and len(r["groups"]) > 1]
    assert legacy and all(any(g["ranks"] == 1 and not g["ops"] for g in r["groups"]) for r in legacy)
    dp8 = next(r for r in recs if r["job"] == "llama2_7b_finetune_r150_shipped")
    assert [(g["name"], g["ranks"]) for g in dp8["groups"]] == [("hccl_world_group", 8)]
    assert {"AllGather", "ReduceScatter", "AllReduce"} <= set(dp8["groups"][0]["ops"])
    ds = next(r for r in recs if r["job"] == "deepseek_v3_shipped_l16")
    assert [g["ops"] for g in ds["groups"] if g["name"].startswith("dp-")] == [{}]
    # legacy MoE's all-to-all rides the data-parallel group (expert_parallel = data_parallel)
    for r in recs:
        if r["use_legacy"] and r["parallel"]["ep"] > 1:
            a2a = [g for g in r["groups"] if "AllToAll" in g["ops"]]
            assert [g["ranks"] for g in a2a] == [r["parallel"]["dp"]], r["job"]


@pytest.mark.parametrize("cut, job, count, mdm, left_mib", [
    ("mixtral_8x7b_l2.yaml", "mixtral_8x7b_l2", 7, "58GB", -110),
    ("qwen2_57b_pretrain_l4.yaml", "qwen2_57b_pretrain_l4", 6, "58GB", 290),
    ("qwen2_57b_finetune_l2.yaml", "qwen2_57b_finetune_l2", 6, "58GB", 290),
    ("qwen1_5_7b_pretrain_l2.yaml", "qwen1_5_7b_pretrain_l2", 1, "60GB", 242),
])
def test_the_maintainer_shapes_above_their_card(monkeypatch, cut, job, count, mdm, left_mib):
    """The shapes docs/estimate.md had above their card: Mixtral-8x7B keeps its 7 communicators
    (vocab_emb_dp: the inputs' broadcast has a group of its own), so 58 GiB + 2800 MiB of HCCL + the
    runtime is still 110 MiB over a 910B's 62432 MiB; Qwen2-57B's two open 6 (their broadcast rides
    the tensor-parallel group, and expert = data parallel adds none): 290 MiB to spare; Qwen1.5-7B's
    pretrain at TP8 on one stage opens the world alone (3 counted before: 558 MiB over its 60GB)."""
    monkeypatch.delenv("HCCL_BUFFSIZE", raising=False)
    spec = load_spec(os.path.join(CUTS, cut))
    rec = next(r for r in records() if r["job"].startswith(job + " "))
    assert communicators(spec) == with_buffers(rec) == count
    hccl = not_in_dryrun(spec)["communication_buffers_bytes"]
    assert hccl == count * 2 * 200 * MIB
    card = card_check({"max_device_memory": mdm}, 58 << 30, hccl)
    assert card.hbm == CARD_HBM[DEFAULT_CARD] and card.left == left_mib * MIB and card.fits is (left_mib >= 0)


def test_vocab_emb_dp_is_read_with_mindformers_default(tmp_path):
    """parallel_config.vocab_emb_dp: TransformerOpParallelConfig's default True when absent."""
    src = os.path.join(CUTS, "mixtral_8x7b_l2.yaml")
    assert load_spec(src).vocab_emb_dp is True
    assert load_spec(os.path.join(CUTS, "qwen2_57b_finetune_l2.yaml")).vocab_emb_dp is False
    text = open(src, encoding="utf-8").read()
    assert "  vocab_emb_dp: true\n" in text
    p = tmp_path / "no_vocab_emb_dp.yaml"
    p.write_text(text.replace("  vocab_emb_dp: true\n", ""), encoding="utf-8")
    assert load_spec(str(p)).vocab_emb_dp is True and communicators(load_spec(str(p))) == 7
