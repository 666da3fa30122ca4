"""The plain legacy Llama layer under sequence parallel (docs/estimate.md, "The plain Llama layer
under sequence parallel"): the gathered inputs its column-parallel linears keep, sized against DryRun
L1's memory tracker on the recorded cut ``llama2_70b_l8_pp2_fgi1_none`` (Llama2-70B, TP4, sequence
parallel, ``fine_grain_interleave: 1``), and gated off where MindFormers does not keep them (no
sequence parallel, TP1). The fine-grain interleaved layer keeps them too, per part:
tests/test_estimate_interleave_shard.py."""
import json
from pathlib import Path

import pytest

from swapwatch.commands.explain import explain
from swapwatch.memory.model import estimate, memory_family, plan_of

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "fixtures" / "dryrun" / "cases"
MIB = 1 << 20


def layer_zero(name):
    """(table, cost of layer 0 as the YAML sets it) for a recorded case."""
    _, plan, spec = plan_of(str(CASES / f"{name}.yaml"))
    fam = memory_family(spec, plan)
    return fam, fam.layer_choice(plan.layers[0])[1]


def test_plain_layer_keeps_the_gathered_inputs_dryrun_names():
    """DryRun L1's tracker at stage 0's peak (no recompute, 2 micro-batches in flight): per layer and
    micro-batch one `wv-Linear/AllGather` and one `w1-Linear/AllGather` block of 64 MiB ([b, s, h] in
    fp16 at seq 4096, hidden 8192) and no kept norm output beside them. The table: the local
    [b, s / 4, h] part (16 MiB) plus the gathered rest (48 MiB), once per input, not per linear."""
    fam, cost = layer_zero("llama2_70b_l8_pp2_fgi1_none")
    kept = dict(cost.by_tensor)
    assert kept["xn1"] + kept["xn1g"] == 64 * MIB and kept["xn2"] + kept["xn2g"] == 64 * MIB
    assert kept["xn1g"] == 48 * MIB
    # the layer's kept bytes: what the tracker shows per layer and micro-batch, 440 MiB (the FFN
    # blocks [s, 28672 / 4] fp16 are 56 MiB: spec.llama_ffn)
    assert cost.kept == 440 * MIB + 8 * 1024        # + the two norms' rstd
    # full recompute regenerates them with the layer (mp_comm_recompute: True): not kept
    full = fam.cost(fam.all_ops, fam.layer_boundary)
    assert not {"xn1g", "xn2g"} & {t for t, _ in full.by_tensor}
    # the gather is an op of the linear's cell (the tracker's scope `wv-Linear/AllGather`): a select
    # recompute of the attention or the MLP regenerates it from the local part, which stays
    for group, local, gathered in (("attention", "xn1", "xn1g"), ("feed_forward", "xn2", "xn2g")):
        sel = dict(fam.cost(*fam.ops_reached([group])).by_tensor)
        assert sel[local] == 16 * MIB and gathered not in sel, group


@pytest.mark.parametrize("name,why", [
    ("llama2_70b_l8_pp2_full_nosp_noslice", "no sequence parallel: the linears' input is whole already"),
    ("qwen2_5_7b_l8_pp2_none", "model_parallel 1: nothing to gather"),
])
def test_no_gathered_rows_where_mindformers_keeps_none(name, why):
    fam, cost = layer_zero(name)
    assert fam.bytes["xn1g"] == fam.bytes["xn2g"] == 0, why


def test_plain_layer_cut_within_three_percent_of_dryrun():
    """The case the rows were found on: it was -8.5 / -6.4 % (stage 0 / 1) without them."""
    data = json.loads((CASES / "llama2_70b_l8_pp2_fgi1_none.json").read_text(encoding="utf-8"))
    est = estimate(str(CASES / data["yaml"]))
    for st in data["stages"]:
        err = est.stages[st["stage"]].peak() / (st["used_peak_mib"] * MIB) - 1
        assert abs(err) <= 0.03, (st["stage"], err)


def swap_yaml(tmp_path, recompute, swapped):
    """fixtures/configs/plan_qwen64.yaml (legacy Llama, 64 layers on 4 stages: 16 each) with swap on,
    ``recompute`` as layer ids and a layer swap of ``swapped``."""
    src = (ROOT / "fixtures" / "configs" / "plan_qwen64.yaml").read_text(encoding="utf-8")
    text = src.replace('memory_optimize_level: "O1"', 'memory_optimize_level: "O0"')
    text = text.replace("recompute_config:\n  recompute: True", f"recompute_config:\n  recompute: {recompute}")
    text = text.replace("swap_config:\n  swap: False", "swap_config:\n  swap: True\n  layer_swap:\n"
                        f"    - {{backward_prefetch: 1, layers: [{swapped}]}}")
    assert text.count("layer_swap") == 1 and f"recompute: {recompute}" in text
    out = tmp_path / f"swap_{swapped}.yaml"
    out.write_text(text, encoding="utf-8")
    return str(out)


def test_sw202_next_layer_only_on_the_same_stage(tmp_path):
    """A swapped layer whose next layer is recomputed: SW202 on the same stage (the next layer's
    norm consumes its output), none across a stage boundary, where the last layer's output goes
    to the Send to the next stage, which nothing recomputes. `plan --allow-swap` on plan_qwen64
    swaps layer 15 (stage 0's last) under layer 16's full recompute (tests/test_plan_search.py)."""
    # (a backward_prefetch of 1 cannot hide the layer's copies: SW212 warns of that on both, issue 34)
    within = explain(swap_yaml(tmp_path, "[15]", 14))
    codes = [f.code for f in within.findings if f.code != "SW212"]
    assert codes == ["SW202"] and [f for f in within.findings if f.code == "SW202"][0].layer == 14
    across = explain(swap_yaml(tmp_path, "[16]", 15))
    assert across.exit_code == 0 and [f.code for f in across.findings] == ["SW212"]
