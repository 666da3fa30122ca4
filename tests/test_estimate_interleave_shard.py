"""Issue 27 pt 5 (keysB): the fine-grain interleaved layer, the parallel optimizer's
threshold (its accumulation shard measured and left unmodelled), and what MindFormers 2.1.0 itself rejects (SeqPipe and
micro-batch interleave on mcore). The DryRun L1 pairs that check the figures are corpus cases
(``fixtures/dryrun/cases/llama2_70b_l8_pp2_fgi1_*``, ``*_shard_*``) compared by
tests/test_oracle_dryrun.py; here: the terms' arithmetic on the real model code, and the key rules.

Sizes are those of the Llama2-70B cut (``llama2_70b_l8_pp2_none``): TP4, dp 2, 4096 tokens, hidden
8192, FFN 28672, fp16, 4 layers per stage.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from swapwatch.config import load_config
from swapwatch.memory.keys import IRRELEVANT, MODELLED, REFUSED, UNMODELLED, classify
from swapwatch.memory.model import estimate
from case_helpers import CASES, ROOT, variant

MIB = 1 << 20
FGI = "model.model_config.fine_grain_interleave"
POC = "parallel.parallel_optimizer_config."


# per layer, one micro-batch: the gathered rest [s - s / tp, h] of the q / k / v and the w1 / w3 inputs
# (llama.yaml xn1g / xn2g; docs/estimate.md "Fine-grain interleave"), bf16, on the Llama-3.1-70B cut
# (TP8, 8192 tokens, hidden 8192)
GATHERED_L31 = 2 * (8192 - 8192 // 8) * 8192 * 2
# the SiLU output and the SiLU-Mul product, [s, ffn / tp] bf16 each (FFN 28672 at TP8: spec.llama_ffn)
PRODUCT_L31 = 2 * 8192 * (28672 // 8) * 2


@pytest.mark.parametrize("case", ["llama2_70b_l8_pp2_none", "llama2_70b_l8_pp2_full"])
def test_fine_grain_interleave_keeps_what_the_plain_layer_keeps(tmp_path, case):
    """The interleaved layer keeps its parts' gathered inputs as the plain layer keeps them whole, and
    each backward copy concatenating parts is made as its parts are freed (DryRun L1's tracker), so
    both layers size alike without select recompute: DryRun L1 peaks within 12 MiB of each other on
    this cut (11984 / 11972 MiB, first stage)."""
    two = estimate(str(CASES / f"{case}.yaml"))
    one = estimate(variant(tmp_path, f"{case}.yaml", {FGI: 1}))
    assert two.spec.fine_grain == 2 and one.spec.fine_grain == 1
    for a, b in zip(two.stages, one.stages):
        assert (a.static, a.activations, a.workspace, a.transient) == \
            (b.static, b.activations, b.workspace, b.transient)


@pytest.mark.parametrize("tag,freed", [("select", PRODUCT_L31), ("comm", GATHERED_L31),
                                       ("select_comm", PRODUCT_L31 + GATHERED_L31)])
def test_select_and_comm_sets_free_on_the_interleaved_layer_only(tmp_path, tag, freed):
    """MindFormers' default select set (SiLU + Mul) and select comm set (the norms) free the SiLU-Mul
    product and the gathered inputs on the interleaved layer (its w2 reads the product itself; its
    norms' communication is re-run in backward), and nothing on the plain one: the DryRun L1 cuts
    ``llama3_1_70b_l4_pp2_*`` (stage 0: 2 layers, 2 micro-batches in flight), 8569 / 8177 / 7737 /
    7723 MiB interleaved, 8485 MiB plain with and without the select set."""
    none, other = (estimate(str(CASES / f"llama3_1_70b_l4_pp2_{t}.yaml")).stages[0] for t in ("none", tag))
    assert none.activations - other.activations == 2 * len(none.layers) * freed
    plain = [estimate(variant(tmp_path, f"llama3_1_70b_l4_pp2_{t}.yaml", {FGI: 1}, f"{t}.yaml")).stages[0]
             for t in ("none", tag)]
    assert plain[0].activations == plain[1].activations


@pytest.mark.parametrize("changes", [
    {"parallel_config.model_parallel": 1, "parallel_config.data_parallel": 8},   # check_fine_grain_interleave_valid
    {"use_legacy": False, "recompute_config.recompute_slice_activation": False},  # mcore layers do not read it
])
def test_fine_grain_interleave_is_nothing_where_mindformers_builds_the_plain_layer(tmp_path, changes):
    path = variant(tmp_path, "llama2_70b_l8_pp2_none.yaml", changes)
    cfg = load_config(path, check_rules=False)
    from swapwatch.memory.spec import spec_from_config

    assert spec_from_config(cfg).fine_grain == 1


def test_fine_grain_interleave_key_is_modelled_on_the_legacy_llama_only():
    tree = load_config(str(CASES / "llama2_70b_l8_pp2_none.yaml"), check_rules=False).tree
    rep = classify(tree)
    assert FGI in rep.by_kind[MODELLED] and FGI not in rep.unmodelled
    glm = {"model": {"arch": {"type": "ChatGLM2ForConditionalGeneration"},
                     "model_config": {"fine_grain_interleave": 2}}}
    assert classify(glm).unmodelled == [FGI]
    assert FGI in classify({"use_legacy": False, "model": {"model_config": {"fine_grain_interleave": 2}}}
                           ).by_kind[IRRELEVANT]


def _static(path: str, stage: int = 0) -> dict:
    return estimate(path).stages[stage].static


def test_parallel_optimizer_threshold_keeps_small_slices_whole(tmp_path):
    """MindSpore compares the whole parameter's bytes with the threshold (KB). The default 64 KB keeps
    the norms whole (16 KB each in fp16 at hidden 8192); 40000 KB keeps wk / wv (16384 KB whole,
    4096 KB slices at TP4) whole as well, whose gathered copies then go, but not wq / wo (131072 KB
    whole, though their 32768 KB slices are below it: DryRun L1's llama2_70b_l8_pp2_shard_th40m_none
    says which)."""
    base = CASES / "llama2_70b_l8_pp2_none.yaml"
    zero = estimate(variant(tmp_path, base.name, {POC + "parallel_optimizer_threshold": 0}, "t0.yaml"))
    dflt = estimate(str(base))
    big = estimate(variant(tmp_path, base.name, {POC + "parallel_optimizer_threshold": 40000}, "t40m.yaml"))
    norms = 4 * 2 * 8192                       # 4 layers x 2 norms, elements
    s0, s64, s40 = (e.stages[0] for e in (zero, dflt, big))
    assert s64.static["weights"] - s0.static["weights"] == norms * 2 // 2      # half of them was on the rank
    assert s64.static["optimizer_states"] - s0.static["optimizer_states"] == norms * 8 // 2
    assert s0.gathered - s64.gathered == norms * 2
    attn = 4 * 8192 * (256 + 256)               # wk, wv slices of the 4 layers
    assert s40.static["weights"] - s64.static["weights"] == attn * 2 // 2
    assert s40.static["optimizer_states"] - s64.static["optimizer_states"] == attn * 8 // 2
    assert s64.gathered - s40.gathered == attn * 2
    # the last stage's final norm too
    assert dflt.stages[1].static["weights"] - zero.stages[1].static["weights"] == (norms + 8192) * 2 // 2


def test_gradient_accumulation_shard_is_reported_not_sized(tmp_path):
    """DryRun L1 (llama2_70b_l8_pp2_shard_accu_none) saves 184 MiB on the first stage with the
    accumulation shard on, where splitting the accumulated gradients over dp 2 would save 810 MiB:
    the model leaves the figure as it is and names the key."""
    base = CASES / "llama2_70b_l8_pp2_none.yaml"
    on = CASES / "llama2_70b_l8_pp2_shard_accu_none.yaml"
    assert [s.peak() for s in estimate(str(on)).stages] == [s.peak() for s in estimate(str(base)).stages]
    rep = classify(load_config(str(on), check_rules=False).tree)
    assert POC + "gradient_accumulation_shard" in rep.unmodelled
    assert POC + "gradient_accumulation_shard" in classify(
        load_config(str(base), check_rules=False).tree).by_kind[IRRELEVANT]


def test_the_threshold_key_is_modelled():
    tree = load_config(str(CASES / "llama2_70b_l8_pp2_none.yaml"), check_rules=False).tree
    rep = classify(tree)
    assert POC + "parallel_optimizer_threshold" in rep.by_kind[MODELLED]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.mark.parametrize("changes,key", [
    ({"micro_batch_interleave_num": 2}, "micro_batch_interleave_num"),
    ({"parallel_config.seq_split_num": 4}, "parallel_config.seq_split_num"),
])
def test_what_mindformers_rejects_on_mcore_is_refused_with_the_reason(tmp_path, changes, key):
    path = variant(tmp_path, "qwen3_32b_l8_none.yaml", changes)
    assert REFUSED in classify(yaml.safe_load(open(path))).by_kind
    r = cli("estimate", path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert key in r.stderr and "MindFormers 2.1.0 rejects" in r.stderr and "Traceback" not in r.stderr


def test_seqpipe_without_the_seqpipe_scheduler_stays_unmodelled_and_full_recompute_is_refused(tmp_path):
    none = variant(tmp_path, "llama2_70b_l8_pp2_none.yaml", {"parallel_config.seq_split_num": 4}, "n.yaml")
    rep = classify(yaml.safe_load(open(none)))
    assert "parallel_config.seq_split_num" in rep.unmodelled
    full = variant(tmp_path, "llama2_70b_l8_pp2_full.yaml", {"parallel_config.seq_split_num": 4}, "f.yaml")
    assert classify(yaml.safe_load(open(full))).by_kind.get(REFUSED) == ["parallel_config.seq_split_num"]
    # with one stage MindFormers does not wrap SequenceSplit: nothing changes
    flat = variant(tmp_path, "llama2_70b_l8_pp2_full.yaml", {"parallel_config.seq_split_num": 4,
                                                             "parallel_config.pipeline_stage": 1}, "p.yaml")
    assert REFUSED not in classify(yaml.safe_load(open(flat))).by_kind
    assert UNMODELLED in classify(yaml.safe_load(open(flat))).by_kind


def test_micro_batch_interleave_multiplies_the_micro_batch_on_the_legacy_path(tmp_path):
    """Each micro-batch holds micro_batch_interleave_num x batch_size rows, all parts kept: the
    model sizes it as that batch (DryRun L1, llama2_70b_l8_pp2_mbi2_none: 15553 MiB, the model
    15458 MiB, predicted before the run)."""
    one = estimate(str(CASES / "llama2_70b_l8_pp2_none.yaml"))
    two = estimate(str(CASES / "llama2_70b_l8_pp2_mbi2_none.yaml"))
    assert (one.spec.batch, two.spec.batch) == (1, 2)
    assert two.stages[0].activations == 2 * one.stages[0].activations
    assert two.stages[0].static == one.stages[0].static
    rep = classify(load_config(str(CASES / "llama2_70b_l8_pp2_mbi2_none.yaml"), check_rules=False).tree)
    assert "micro_batch_interleave_num" in rep.by_kind[MODELLED]


def test_explain_says_before_launch_what_mindformers_rejects(tmp_path):
    # SW309: the keys estimate refuses because MindFormers 2.1.0 itself raises at build
    # (keys.rejected) are an error finding of explain, at the key's line; a legacy YAML with the same
    # micro-batch interleave is accepted (MindFormers builds it; DryRun ran it: the mbi2 corpus case)
    from swapwatch.commands.explain import explain

    src = ROOT / "fixtures" / "configs" / "mindformers" / "pretrain_qwen3_32b_4k.yaml"
    text = src.read_text(encoding="utf-8")
    assert "\nmicro_batch_interleave_num: 1\n" in text
    bad = tmp_path / "mbi2.yaml"
    bad.write_text(text.replace("\nmicro_batch_interleave_num: 1\n", "\nmicro_batch_interleave_num: 2\n"),
                   encoding="utf-8")
    found = [f for f in explain(str(bad)).findings if f.code == "SW309"]
    line = next(i for i, ln in enumerate(bad.read_text(encoding="utf-8").splitlines(), 1)
                if ln.startswith("micro_batch_interleave_num:"))
    assert len(found) == 1 and found[0].severity == "error", found
    assert "_wrap_network_with_tool_cells" in found[0].message and found[0].source.endswith(f":{line}")
    assert not [f for f in explain(str(src)).findings if f.code == "SW309"]
    legacy = ROOT / "fixtures" / "dryrun" / "cases" / "llama2_70b_l8_pp2_mbi2_none.yaml"
    assert not [f for f in explain(str(legacy)).findings if f.code == "SW309"]
