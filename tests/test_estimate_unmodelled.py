"""Nothing ignored in silence (issue 27 item 5) and one config read with explain (item 6): every key
of every maintainer YAML is modelled, irrelevant to memory, or reported as `unmodelled`; an
auto-parallel YAML is refused with the reason; estimate reads the config object explain reads,
``pretrained_model_dir/config.json`` included; LoRA's frozen base carries no gradients."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from swapwatch.config import load_config
from swapwatch.errors import ConfigError
from swapwatch.memory.keys import (IRRELEVANT, MODELLED, REFUSED, UNMODELLED, Context, classify, context, leaves,
                                   rule_for)
from swapwatch.memory.model import estimate

MAINTAINER = sorted(glob.glob("fixtures/configs/mindformers/*.yaml"))
#: maintainer fixtures the model puts above the 64 GB card with nothing unmodelled, by a model error
#: that a DryRun record of that very YAML shows (tests/test_oracle_dryrun.py KNOWN pins it): fixture ->
#: its case in fixtures/dryrun/cases/. An entry the model no longer puts above fails, so the list stays
#: honest (docs/estimate.md "The maintainer YAMLs above their card")
#: (empty since the single-stage gradient phase: r1.5.0's four DP8 YAMLs are within their card, each
#: within 1 % of its record: docs/estimate.md "A single stage's gradients")
ABOVE_BY_MODEL_ERROR: dict = {}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True)


def test_the_maintainer_yamls_are_there():
    assert len(MAINTAINER) >= 7


@pytest.mark.parametrize("path", MAINTAINER)
def test_every_key_of_a_maintainer_yaml_is_classified_by_a_rule(path):
    tree = load_config(path, check_rules=False).tree
    rep = classify(tree)
    seen = {k for ks in rep.by_kind.values() for k in ks}
    for key, _value in leaves(tree):
        assert any(key == k or key.startswith(k + ".") for k in seen), key
    # no key falls through to the "not known" default: each has a rule saying why
    unknown = [k for k in rep.unmodelled if rep.why[k] == "not known to the memory model"]
    assert not unknown, unknown
    assert set(rep.by_kind) <= {MODELLED, IRRELEVANT, UNMODELLED}
    assert rep.by_kind[MODELLED] and rep.by_kind[IRRELEVANT]


#: maintainer YAMLs the estimate refuses in one line (a legacy Llama with a top-level moe_config: the dense
#: table would size its experts as one MLP; DryRun L1 of Mixtral-8x7B's stage 0 is 37.9 % above that)
MOE_REFUSED = {"r1.5.0_finetune_qwen2_57b.yaml", "r1.5.0_pretrain_qwen2_57b.yaml", "r1.6.0_finetune_mixtral-8x7b.yaml"}


@pytest.mark.parametrize("path", MAINTAINER)
def test_what_is_not_modelled_is_in_the_header_and_the_json(path):
    r = cli("estimate", path, "--format", "json")
    if os.path.basename(path) in MOE_REFUSED:
        assert r.returncode == 2 and "does not model mixture of experts" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        return
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    rep = classify(load_config(path, check_rules=False).tree)
    assert js["unmodelled"] == rep.unmodelled
    # every maintainer YAML is sized, and none above the 64 GB card it was written for without a
    # named reason: a key left out, or a model error its DryRun record shows (the YAML within the card)
    peak = max(st["peak_bytes"] for st in js["stages"]) if js["stages"] else 0
    case = ABOVE_BY_MODEL_ERROR.get(os.path.basename(path))
    if case is None:
        assert js["stages"] and (peak <= 64 * 10 ** 9 or js["unmodelled"])
    else:
        with open(f"fixtures/dryrun/cases/{case}.json", encoding="utf-8") as fh:
            rec = json.load(fh)
        assert rec["source"] == path and peak > 64 * 10 ** 9 and not js["unmodelled"]
        assert max(st["used_peak_mib"] for st in rec["stages"]) << 20 <= 64 * 10 ** 9
    text = cli("estimate", path).stdout
    if rep.unmodelled:
        line = next(ln for ln in text.splitlines() if ln.startswith("unmodelled: "))
        assert all(k in line for k in rep.unmodelled) and "bound" in line
    else:
        assert "unmodelled: " not in text


def test_value_aware_keys_matter_only_at_values_that_change_memory():
    assert rule_for("micro_batch_interleave_num", 1).kind == IRRELEVANT
    assert rule_for("micro_batch_interleave_num", 2).kind == MODELLED     # legacy; refused on mcore (classify)
    assert rule_for("recompute_config.recompute_slice_activation", False).kind != UNMODELLED
    full_tp = Context(full_bool=True, tp=4)
    assert rule_for("recompute_config.recompute_slice_activation", True, full_tp).kind == MODELLED
    assert rule_for("recompute_config.recompute_slice_activation", False, full_tp).kind == IRRELEVANT
    assert rule_for("parallel.pipeline_config.pipeline_scheduler", "seqpipe").kind == UNMODELLED
    assert rule_for("parallel.pipeline_config.pipeline_scheduler", "1f1b").kind == MODELLED
    assert rule_for("parallel_config.seq_split_num", 8).kind == UNMODELLED
    # SeqPipe the model sizes: the legacy Llama layer with stages under the seqpipe scheduler (keys.context)
    sized = Context(llama_legacy=True, pp=True, seqpipe=True)
    assert rule_for("parallel.pipeline_config.pipeline_scheduler", "seqpipe", sized).kind == MODELLED
    assert rule_for("parallel_config.seq_split_num", 8, sized).kind == MODELLED
    assert rule_for("parallel_config.seq_split_num", 1, sized).kind == rule_for("parallel_config.seq_split_num", 1).kind
    assert rule_for("a.key.nobody.knows", 3) is None          # classify reports it as unmodelled
    assert classify({"a": {"key": 3}}).unmodelled == ["a.key"]



def test_the_table_alone_says_what_a_key_is_on_each_path():
    """The path cases are rules of keys.RULES (``where=``), not code after the lookup: rule_for in a
    config's Context gives what classify gives in that config."""
    fgi, swap = "model.model_config.fine_grain_interleave", "optimizer.swap"
    llama, mcore = Context(llama_legacy=True), Context(mcore=True)
    assert rule_for(fgi, 2, llama).kind == MODELLED
    assert rule_for(fgi, 2, mcore).kind == IRRELEVANT
    assert rule_for(fgi, 2, Context(glm=True)).kind == UNMODELLED
    assert rule_for(fgi, 1, llama).kind == MODELLED            # the size key, value 1: the plain layer
    assert rule_for(swap, True, mcore).kind == MODELLED
    assert rule_for(swap, True).kind == UNMODELLED
    assert rule_for(swap, False, mcore).kind == IRRELEVANT
    threshold = "parallel.parallel_optimizer_config.parallel_optimizer_threshold"
    assert rule_for(threshold, 64).kind == IRRELEVANT              # the parallel optimizer is off
    assert rule_for(threshold, 64, Context(shard=True)).kind == MODELLED
    acc = "parallel.parallel_optimizer_config.gradient_accumulation_shard"
    assert rule_for(acc, True, Context(shard=True)).kind == UNMODELLED
    assert rule_for(acc, True).why == "the parallel optimizer is off"
    # every key of every maintainer YAML, on both code paths: classify is the table's walk (plus what
    # MindFormers rejects at launch, refused before the table is read)
    for path in MAINTAINER:
        tree = load_config(path, check_rules=False).tree
        for legacy in (True, False):
            t = dict(tree, use_legacy=legacy)
            rep, ctx = classify(t), context(t)
            for key, value in leaves(t):
                if key in rep.why and rep.why[key] != "not known to the memory model" and key not in (
                        rep.by_kind.get(REFUSED) or []):
                    rule = rule_for(key, value, ctx)
                    assert rule is not None and (rule.kind, rule.why) == (
                        next(k for k, ks in rep.by_kind.items() if key in ks), rep.why[key]), (path, key)

def small_yaml(tmp_path, extra: str = "", mc_extra: str = "") -> str:
    p = tmp_path / "small.yaml"
    p.write_text(textwrap.dedent("""\
        model:
          arch: {type: LlamaForCausalLM}
          model_config:
            type: LlamaConfig
            hidden_size: 256
            num_heads: 4
            seq_length: 128
            vocab_size: 1000
            num_layers: 2
        %s
        runner_config: {batch_size: 1}
        parallel_config: {data_parallel: 2, pipeline_stage: 1}
        recompute_config: {recompute: False}
        %s
        """) % (textwrap.indent(textwrap.dedent(mc_extra), "    "), extra))
    return str(p)


def test_auto_parallel_is_refused_with_the_reason(tmp_path):
    path = small_yaml(tmp_path, "parallel: {parallel_mode: 2, search_mode: sharding_propagation}")
    with pytest.raises(ConfigError, match="searches the sharding strategy at compile time"):
        estimate(path)
    r = cli("estimate", path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "parallel.parallel_mode" in r.stderr
    assert REFUSED in classify(yaml.safe_load(open(path))).by_kind


def test_lora_base_weights_carry_no_gradients_or_optimizer_states(tmp_path):
    full_est = estimate(small_yaml(tmp_path))
    full = full_est.stages[0].static
    (tmp_path / "l").mkdir()
    lora = estimate(small_yaml(tmp_path / "l", mc_extra="""\
        pet_config: {pet_type: lora, lora_rank: 8, lora_alpha: 16, target_modules: '.*wq|.*wv'}
        """))
    st = lora.stages[0].static
    assert st["weights"] == full["weights"] > 0
    # the gradients: in the static part with a gradient buffer, the backward's end without one (one
    # legacy stage: memory/model.py:backward_end); LoRA's base has none in either
    assert st["grads"] == st["optimizer_states"] == lora.stages[0].backward_end == 0
    assert full["grads"] + full_est.stages[0].backward_end > 0
    assert lora.spec.frozen_base and "model.model_config.pet_config.pet_type" not in lora.unmodelled


def test_finetune_sizes_come_from_pretrained_model_dir_like_explain(tmp_path):
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({
        "model_type": "qwen3", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "intermediate_size": 512, "num_hidden_layers": 4, "vocab_size": 1000,
        "seq_length": 128}))
    path = tmp_path / "ft.yaml"
    path.write_text(textwrap.dedent(f"""\
        use_legacy: False
        pretrained_model_dir: {hf}
        model:
          model_config:
            compute_dtype: bfloat16
        runner_config: {{batch_size: 1}}
        parallel_config: {{pipeline_stage: 2}}
        recompute_config: {{recompute: True}}
        """))
    est = estimate(str(path))
    assert est.family == "qwen3" and est.spec.hidden == 256 and est.spec.num_layers == 4
    assert len(est.stages) == 2
    # a bad size in config.json is reported at config.json, not at a YAML line
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": "big",
                                                "num_attention_heads": 4, "num_hidden_layers": 4,
                                                "vocab_size": 1000, "seq_length": 128}))
    r = cli("estimate", str(path))
    assert r.returncode == 2 and "config.json" in r.stderr and "hidden_size" in r.stderr, r.stderr


def test_memory_reads_the_config_explain_reads(monkeypatch):
    # one read of the YAML: the sizes come from the TrainingConfig's merged tree, not a second parse
    import swapwatch.config.tree as config

    calls = []
    real = config.read_yaml
    monkeypatch.setattr(config, "read_yaml", lambda *a, **k: calls.append(a) or real(*a, **k))
    estimate("fixtures/configs/mindformers/pretrain_qwen3_32b_4k.yaml")
    assert len(calls) == 1


# ---- a select set that frees nothing is a finding before launch, and estimate credits the fix ----

def llama_select(tmp_path, patterns) -> str:
    p = tmp_path / f"sel{len(list(tmp_path.iterdir()))}.yaml"
    sel = "\n".join(f"    '{pat}': True" for pat in patterns)
    p.write_text(textwrap.dedent("""\
        model:
          arch: {type: LlamaForCausalLM}
          model_config: {type: LlamaConfig, hidden_size: 256, num_heads: 4, seq_length: 128, vocab_size: 1000,
                         num_layers: 2, use_flash_attention: False}
        runner_config: {batch_size: 1}
        parallel_config: {pipeline_stage: 1}
        recompute_config:
          recompute: False
          select_recompute:
        """) + sel + "\n")
    return str(p)


DEFAULT = [r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu"]


def test_mindformers_default_select_frees_nothing_and_explain_says_so(tmp_path):
    from swapwatch.commands.explain import explain

    path = llama_select(tmp_path, DEFAULT)
    none = estimate(llama_select(tmp_path, [r"nothing\.matches"])).layers[0]
    est = estimate(path)
    assert est.layers[0]["activation_bytes"] == none["activation_bytes"]
    assert est.layers[0]["recompute_flops"] == none["recompute_flops"]        # the presets' only
    codes = [f.code for f in explain(path).findings]
    assert "SW211" in codes
    r = cli("explain", path)
    assert "SW211" in r.stdout


def test_mindformers_default_select_frees_the_product_on_the_interleaved_layer(tmp_path):
    """On the fine-grain interleaved layer (fine_grain_interleave 2 at model_parallel 2) w2 reads the
    SiLU-Mul product itself, so the default set is recomputed and SW211 stays silent: DryRun L1 of the
    Llama-3.1-70B cut frees the product there (8569 -> 8177 MiB) and nothing on the plain layer."""
    from swapwatch.commands.explain import explain

    def interleaved(path: str, fgi: int) -> str:
        text = open(path).read().replace("num_layers: 2,", f"num_layers: 2, fine_grain_interleave: {fgi},")
        text = text.replace("parallel_config: {pipeline_stage: 1}", "parallel_config: {pipeline_stage: 1, model_parallel: 2}")
        out = tmp_path / f"fgi{fgi}_{os.path.basename(path)}"
        out.write_text(text)
        return str(out)

    base = llama_select(tmp_path, DEFAULT)
    none = llama_select(tmp_path, [r"nothing\.matches"])
    two, one = interleaved(base, 2), interleaved(base, 1)
    assert estimate(two).spec.fine_grain == 2 and estimate(one).spec.fine_grain == 1
    assert estimate(two).layers[0]["activation_bytes"] < estimate(interleaved(none, 2)).layers[0]["activation_bytes"]
    assert estimate(one).layers[0]["activation_bytes"] == estimate(interleaved(none, 1)).layers[0]["activation_bytes"]
    assert "SW211" not in [f.code for f in explain(two).findings]
    assert "SW211" in [f.code for f in explain(one).findings]


def test_a_malformed_fine_grain_interleave_is_no_crash_in_sw211(tmp_path):
    """SW211 reads fine_grain_interleave from the tree as written (families.interleaved_layer): a list
    there is the plain layer to it, not an exception (exit 3); estimate refuses the value in one line."""
    from swapwatch.commands.explain import explain

    text = open(llama_select(tmp_path, DEFAULT)).read().replace("num_layers: 2,", "num_layers: 2, fine_grain_interleave: [2],")
    bad = tmp_path / "bad_fgi.yaml"
    bad.write_text(text.replace("parallel_config: {pipeline_stage: 1}", "parallel_config: {pipeline_stage: 1, model_parallel: 2}"))
    assert "SW211" in [f.code for f in explain(str(bad)).findings]
    r = cli("estimate", str(bad))
    assert r.returncode == 2 and "fine_grain_interleave" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("fix", [[r"feed_forward\.w2\.reshape"], [r"feed_forward\.w2"], ["feed_forward"]])
def test_the_fix_sw110_and_sw210_suggest_is_credited(tmp_path, fix):
    # SW110's fix (the consumer's reshape: clones measured in the compiled IR) and SW211's (the
    # consumer's cell, or the MLP cell) free the activation and the product
    from swapwatch.commands.explain import explain

    path = llama_select(tmp_path, DEFAULT + fix)
    est = estimate(path)
    none = estimate(llama_select(tmp_path, [r"nothing\.matches"])).layers[0]["activation_bytes"]
    assert est.layers[0]["activation_bytes"] < none
    assert "SW211" not in [f.code for f in explain(path).findings]


# -- comm recompute and slice activation: read per code path (docs/estimate.md "Comm recompute and
# slice activation") --------------------------------------------------------------------------------

def _oracle_python():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    py = root / ".oracle-venv" / "bin" / "python"
    if not (root / ".oracle-venv" / ".ready").exists():
        if os.environ.get("SWAPWATCH_REQUIRE_ALL") == "1":
            pytest.fail("SWAPWATCH_REQUIRE_ALL=1 but the MindFormers oracle venv is missing (make oracle)")
        pytest.skip("the MindFormers oracle venv .oracle-venv is missing (make oracle)")
    return str(py), root


def test_what_layer_setting_hands_mindspore_for_the_comm_and_slice_keys(tmp_path):
    """Real MindFormers 2.1.0 (tests/oracle/mf_comm_keys.py): LayerSetting.set_recompute passes
    recompute_slice_activation only with recompute the bool True, never mp_comm_recompute nor
    parallel_optimizer_comm_recompute; select_comm_recompute marks the matched primitives; the mcore
    config refuses recompute_slice_activation. The rules of swapwatch/memory/keys.py say the same."""
    py, root = _oracle_python()
    cases = [
        {"recompute": True, "mp_comm_recompute": False, "parallel_optimizer_comm_recompute": True,
         "recompute_slice_activation": True},
        {"recompute": [1], "recompute_slice_activation": True},
        {"recompute": False, "select_comm_recompute": True, "mp_comm_recompute": False},
    ]
    r = subprocess.run([py, str(root / "tests" / "oracle" / "mf_comm_keys.py")], input=json.dumps(cases),
                       capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)})
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("@@SWAPWATCH_ORACLE@@"))
    out = json.loads(line[len("@@SWAPWATCH_ORACLE@@"):])
    full, listed, comm = (c["layers"] for c in out["cases"])
    # bool True: the slice reaches every primitive of every layer; mp / optimizer comm recompute do not
    assert all(lay["slice_activation"] == [True, True] for lay in full)
    assert all(lay["recompute_comm_op"] == [None, None] and lay["po_comm_recompute"] is False for lay in full)
    # per-layer form: layer.recompute() without kwargs, the slice is dropped
    assert all(lay["slice_activation"] == [None, None] for lay in listed)
    # select_comm_recompute's default pattern marks the norm primitive only, mp_comm_recompute: False aside
    assert all(lay["recompute_comm_op"] == [None, True] for lay in comm)
    assert "not supported in Mcore" in out["mcore_slice"]
    legacy_full = Context(full_bool=True, tp=4)
    assert rule_for("recompute_config.mp_comm_recompute", False, legacy_full).kind == IRRELEVANT
    assert rule_for("recompute_config.parallel_optimizer_comm_recompute", True,
                    Context(shard=True, tp=4)).kind == IRRELEVANT
    assert rule_for("recompute_config.recompute_slice_activation", True,
                    Context(full_bool=False, tp=4)).kind == IRRELEVANT
    assert rule_for("recompute_config.recompute_slice_activation", True,
                    Context(mcore=True, full_bool=True, tp=4)).kind == REFUSED


def test_comm_and_slice_keys_follow_the_config_they_are_in(tmp_path):
    # the maintainer YAMLs that set them: nothing left unmodelled for them
    for path, key in (("fixtures/configs/mindformers/finetune_qwen2_5_7b_8k.yaml", "mp_comm_recompute"),
                      ("fixtures/configs/mindformers/pretrain_telechat3_36b.yaml", "mp_comm_recompute"),
                      ("fixtures/configs/mindformers/pretrain_qwen3_32b_4k.yaml", "parallel_optimizer_comm_recompute"),
                      ("fixtures/configs/mindformers/pretrain_llama2_70b.yaml", "recompute_slice_activation"),
                      ("fixtures/configs/mindformers/finetune_glm4_9b.yaml", "recompute_slice_activation")):
        rep = classify(load_config(path, check_rules=False).tree)
        assert rep.why["recompute_config." + key] and "recompute_config." + key in rep.by_kind[IRRELEVANT], path
    # GLM reads parallel_optimizer_comm_recompute (models/glm2/glm2.py); Llama does not
    glm = context({"model": {"arch": {"type": "ChatGLM2ForConditionalGeneration"}},
                   "parallel": {"enable_parallel_optimizer": True}})
    assert glm.glm and glm.shard and not glm.mcore
    assert rule_for("recompute_config.parallel_optimizer_comm_recompute", True, glm).kind != IRRELEVANT
    assert not context({"use_legacy": False, "model": {"arch": {"type": "ChatGLM2ForConditionalGeneration"}}}).glm
    # mcore with recompute_slice_activation: True is refused, one line, exit 2
    p = tmp_path / "mcore_slice.yaml"
    p.write_text(textwrap.dedent("""\
        use_legacy: False
        model:
          model_config:
            model_type: qwen3
            hidden_size: 256
            num_attention_heads: 4
            num_key_value_heads: 2
            head_dim: 64
            intermediate_size: 512
            num_hidden_layers: 2
            vocab_size: 1000
            seq_length: 128
        runner_config: {batch_size: 1}
        parallel_config: {model_parallel: 2}
        recompute_config: {recompute: True, recompute_slice_activation: True}
        """))
    r = cli("estimate", str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "recompute_config.recompute_slice_activation" in r.stderr and "not supported in Mcore" in r.stderr


#: DryRun pairs that differ in one comm / slice key only (fixtures/dryrun/cases, recorded by
#: tools/dryrun/record_cases.py): (base, other, stage) -> None when the model's delta must be within
#: 10 % of DryRun L1's (or 1 % of the peak, when DryRun's delta is smaller than that), or (model's
#: delta, DryRun's delta) in MiB pinned with the measured reason (docs/estimate.md "Comm recompute and
#: slice activation")
KEY_PAIRS = {
    # recompute_slice_activation under sequence parallel (Llama2-70B, TP4, full recompute): the layer
    # input is already split over model_parallel; DryRun L1 moves by 60 MiB (0.7 % of the peak)
    ("llama2_70b_l8_pp2_full_noslice", "llama2_70b_l8_pp2_full", 0): None,
    # the same without sequence parallel (fine_grain_interleave 1, which MindFormers requires then):
    # the kept layer input is [b, s, h] and DryRun L1 does not move at all
    ("llama2_70b_l8_pp2_full_nosp_noslice", "llama2_70b_l8_pp2_full_nosp_slice", 0): None,
    # select_comm_recompute (default .*\\.norm) at TP8 with sequence parallel, Qwen3-32B: the
    # attention's gathered input (xn1g) is re-gathered in backward, the MLP's stays (qwen3.yaml)
    ("qwen3_32b_l8_tp8_sp_none", "qwen3_32b_l8_tp8_sp_comm", 0): None,
    # parallel_optimizer_comm_recompute: True on GLM4-9B (the one model that reads it), optimizer
    # shard on: DryRun L1 does not move (the gathered weights stay for the step either way)
    ("glm4_9b_l8_pp2_none", "glm4_9b_l8_pp2_none_comm", 0): None,
    # parallel_optimizer_comm_recompute: True and mp_comm_recompute: False on Llama2-70B (legacy,
    # TP4, optimizer shard): neither is read there (keys.py), and DryRun L1 does not move
    ("llama2_70b_l8_pp2_none", "llama2_70b_l8_pp2_none_comm", 0): None,
}


@pytest.mark.parametrize("base,other,stage", sorted(KEY_PAIRS))
def test_a_comm_or_slice_key_moves_the_estimate_as_it_moves_dryrun(base, other, stage):
    from pathlib import Path

    cases = Path(__file__).resolve().parents[1] / "fixtures" / "dryrun" / "cases"
    a, b = (json.loads((cases / f"{n}.json").read_text(encoding="utf-8")) for n in (base, other))
    ea, eb = estimate(str(cases / a["yaml"])), estimate(str(cases / b["yaml"]))
    used = {n: next(s["used_peak_mib"] for s in js["stages"] if s["stage"] == stage) for n, js in ((base, a), (other, b))}
    dry = used[other] - used[base]
    ours = (eb.stages[stage].peak() - ea.stages[stage].peak()) / (1 << 20)
    known = KEY_PAIRS[(base, other, stage)]
    if known is not None:
        assert (round(ours), dry) == pytest.approx(known, abs=2), f"model {ours:+.0f}M, DryRun L1 {dry:+d}M"
        return
    slack = max(0.10 * abs(dry), 0.01 * used[base])
    assert abs(ours - dry) <= slack, f"model {ours:+.0f}M, DryRun L1 {dry:+d}M"


def test_select_comm_recompute_frees_the_gathered_copy_the_table_names(tmp_path):
    """TensorTable.comm_freed: the norm before linear_qkv frees xn1g (re-gathered in backward), the
    MLP's norm nothing; an exclude takes it back; a fully recomputed layer gets none (LayerSetting
    skips select passes there); without sequence parallel the gathered copy is 0 bytes."""
    from swapwatch.memory.keys import sizes_comm_recompute

    case = "fixtures/dryrun/cases/qwen3_32b_l8_tp8_sp_comm.yaml"
    est = estimate(case)
    lp = est.plan.layers[0]
    assert lp.select_comm_recompute and not lp.full_recompute
    assert est.fam.comm_freed(lp) == frozenset({"xn1g"}) and est.fam.bytes["xn1g"] == 7 * 512 * 5120 * 2
    kept = dict(est.fam.layer_choice(lp)[1].by_tensor)
    assert "xn1g" not in kept and "xn2g" in kept and "xn1" in kept
    text = open(case).read()
    excl = tmp_path / "excl.yaml"
    excl.write_text(text.replace("  select_comm_recompute: true",
                                 "  select_comm_recompute: true\n  select_comm_recompute_exclude: ['input_layernorm\\.norm']"))
    e2 = estimate(str(excl))
    assert e2.fam.comm_freed(e2.plan.layers[0]) == frozenset()
    assert e2.stages[0].peak() == estimate("fixtures/dryrun/cases/qwen3_32b_l8_tp8_sp_none.yaml").stages[0].peak()
    full = tmp_path / "full.yaml"
    full.write_text(text.replace("  recompute: false", "  recompute: true"))
    e3 = estimate(str(full))
    assert e3.fam.comm_freed(e3.plan.layers[0]) == frozenset()
    norms = (r".*\.norm",)
    assert sizes_comm_recompute("qwen3", False, norms) and sizes_comm_recompute("qwen3_moe", False, norms)
    assert not sizes_comm_recompute("llama", False, norms) and not sizes_comm_recompute("deepseek_v3", False, norms)
    # legacy Llama's table: the norms' pattern frees the gathered copies on the fine-grain interleaved layer
    # (DryRun L1: llama3_1_70b_l4_pp2_comm frees them) and adds a cast it does not size on the plain one
    # (_fgi1_comm); the reshapes at the Linear's input free them on the plain layer (qwen2_5_32b_l4_pp2_none
    # -> _commreshape: 5796 -> 5242 MiB), so those alone are modelled there
    assert sizes_comm_recompute("llama", True, norms)
    reshapes = (r".*\.w_qkv\.reshape", r".*\.w_gate_hidden\.reshape")
    assert sizes_comm_recompute("llama_qkv_concat_bias", False, reshapes)
    assert not sizes_comm_recompute("llama_qkv_concat_bias", False, reshapes + norms)
    rep = classify(load_config("fixtures/dryrun/cases/llama2_70b_l8_pp2_none.yaml", check_rules=False).tree)
    assert "recompute_config.select_comm_recompute" not in rep.unmodelled
    llama = yaml.safe_load(open("fixtures/dryrun/cases/llama2_70b_l8_pp2_none.yaml"))
    llama["recompute_config"]["select_comm_recompute"] = True
    assert "recompute_config.select_comm_recompute" in classify(llama).by_kind[MODELLED]
    llama["model"]["model_config"]["fine_grain_interleave"] = 1
    assert "recompute_config.select_comm_recompute" in classify(llama).unmodelled
    assert "recompute_config.select_comm_recompute" in classify(
        load_config(case, check_rules=False).tree).by_kind[MODELLED]


def test_select_comm_on_the_plain_layers_reshapes_frees_both_gathers():
    """The pair qwen2_5_32b_l4_pp2_none / _commreshape (DryRun L1, the plain Qwen2.5 layer at TP8 with
    sequence parallel): comm recompute on w_qkv's and w_gate_hidden's reshape frees both gathered inputs
    per layer and micro-batch (the AllGather MindSpore inserts before that reshape is re-run in backward);
    the estimate is that much lower, and the key is modelled; with the norms' pattern too it is not (the
    cast), and the estimate frees the same."""
    none = estimate("fixtures/dryrun/cases/qwen2_5_32b_l4_pp2_none.yaml")
    cut = estimate("fixtures/dryrun/cases/qwen2_5_32b_l4_pp2_commreshape.yaml")
    both = estimate("fixtures/dryrun/cases/qwen2_5_32b_l4_pp2_comm72.yaml")
    lp = cut.plan.layers[0]
    assert cut.fam.comm_freed(lp) == frozenset({"xn1g", "xn2g"})
    gathered = cut.fam.bytes["xn1g"] + cut.fam.bytes["xn2g"]
    in_flight = 2 * 2                       # 2 layers on stage 0 x 2 micro-batches in flight
    assert none.stages[0].peak() - cut.stages[0].peak() == in_flight * gathered
    assert "recompute_config.select_comm_recompute" not in cut.unmodelled
    assert "recompute_config.select_comm_recompute" in both.unmodelled
    assert both.stages[0].peak() == cut.stages[0].peak()
