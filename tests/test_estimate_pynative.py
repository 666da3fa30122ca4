"""``swapwatch estimate`` on a PyNative (r2.x) YAML (swapwatch/pynative/sizing.py, docs/estimate.md "The
PyNative path"): what each ``apply_ac`` action changes in a layer, the static estimate's output shape, bad
input in one line, and the figure against the example model's real PyNative runs on CPU
(fixtures/pynative_memory/, recorded by tools/pynative_memory.py)."""
import glob
import json
import os
import subprocess
import sys

import pytest

from swapwatch.pynative import sizing
from swapwatch.pynative.layer_spec import Refusal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REC = os.path.join(ROOT, "fixtures", "pynative_memory")
SIZED = os.path.join(ROOT, "fixtures", "configs", "pynative_qwen3_sized.yaml")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")
MiB = 1 << 20
#: the error bound met on every recorded case (docs/estimate.md, The PyNative path: the measured table)
BOUND = 0.10
#: cases the bound is not met on, with their error as measured (the test fails when it moves): none since
#: the backward order counts only the gradients made before the peak and the example's own keeps
#: (``sizing.PYNATIVE_KEEPS``, ``REENTRANT_CHECKPOINT``) are sized (mixed was +16.7 %, full_01 +14.7 %)
KNOWN: dict = {}


def _run(*args, cwd=ROOT):
    res = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    return res.returncode, res.stdout, res.stderr


def _records():
    out = []
    for path in sorted(glob.glob(os.path.join(REC, "*.json"))):
        with open(path, encoding="utf-8") as fh:
            out.append(json.load(fh))
    return out


def _write(tmp_path, text, name="x.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# -- what each action changes -------------------------------------------------------------------

def test_each_layer_action_is_sized_as_apply_ac_applies_it():
    """On the PyNative Qwen3 layer table (pynative/tables/qwen3.yaml): full keeps the layer's input, select
    mlp frees what the MLP's ops save and keeps its input, a layer swap sends the whole keep to host."""
    est = sizing.estimate_pynative(SIZED)
    rows = {r["layer"]: r for r in est.to_json()["layers"]}
    assert [rows[i]["choice"] for i in range(4)] == ["full", "select:mlp", "swap", "none"]
    tab = est.fam
    t, h = est.spec.batch * est.spec.seq, est.spec.hidden
    assert rows[0]["activation_bytes"] == t * h * 2 == tab.layer_input
    none, mlp = rows[3]["activation_bytes"], rows[1]["activation_bytes"]
    mlp_saves = {x for op in tab.ops if op.path.startswith("mlp.") for x in op.saves}
    outside = {x for op in tab.ops if not op.path.startswith("mlp.") for x in op.saves}
    assert {"xn2", "gh", "act", "m"} <= mlp_saves     # xn2: linear_fc1's input, the MLP's input from outside
    assert none == sum(tab.bytes[x] for x in outside | mlp_saves)
    assert mlp == sum(tab.bytes[x] for x in outside | {"xn2"}) < none
    assert rows[2]["activation_bytes"] == 0 and rows[2]["host_bytes"] == none
    st = est.to_json()["stages"][0]
    assert st["breakdown"]["gathered_weights"] == 0
    assert st["peak_bytes"] == st["components"]["static"] + st["components"]["activations"] + \
        st["components"]["other"]


def test_the_model_reproduces_the_tracker_figures_it_was_built_on():
    """fixtures/dryrun/pynative/qwen3_l4_b4_none (one step, tracker): 2946.6 MiB a layer, the loss at the
    forward's end the peak; the 2-layer real-vocabulary cut peaks at the AdamW update of the output layer."""
    from swapwatch.pynative import memory_model as mm

    def shape(b, layers, v):
        return mm.Shape(b=b, s=4096, h=4096, heads=32, kv_heads=8, head_dim=128, ffn=12288, vocab=v, layers=layers)
    sh = shape(4, 4, 32000)
    tab = mm.LayerTable("qwen3", sh)
    assert round(tab.cost().kept / MiB, 1) == 2946.6
    ph = mm.phases(sh, tab, [tab.cost()] * 4, None)
    assert ph.phase(steady=False) == "loss" and round(ph.peak(steady=False) / MiB) == 21693
    sh = shape(1, 2, 151936)
    tab = mm.LayerTable("qwen3", sh)
    ph = mm.phases(sh, tab, [tab.cost(full=True)] * 2, None)
    assert ph.phase(steady=False) == "optimizer" and abs(ph.peak(steady=False) / MiB - 33797) < 40


def test_a_select_checkpoint_is_not_voided_by_its_consumers(tmp_path):
    """The graph pass drops a mark whose output feeds an unmarked op (TensorTable.effective); a PyNative
    checkpoint of an op keeps its input and frees what the op saves whatever consumes it."""
    text = open(SIZED).read().split("recompute:")[0] + (
        "recompute:\n  mode: select\n  select_module:\n    'self_attention\\.core_attention': ['0-3']\n")
    est = sizing.estimate_pynative(_write(tmp_path, text))
    none = sizing.estimate_pynative(_write(tmp_path, text.split("recompute:")[0], "n.yaml"))
    kept = est.to_json()["layers"][0]["activation_bytes"]
    base = none.to_json()["layers"][0]["activation_bytes"]
    assert est.to_json()["layers"][0]["choice"] == "select:self_attention.core_attention" and kept < base


def test_op_swap_on_a_full_layer_moves_nothing(tmp_path):
    text = open(SIZED).read().replace("  layer_swap:\n    - layers: ['2']\n",
                                      "  op_swap:\n    - op_name: 'mlp'\n      layers: ['0-1']\n")
    rows = sizing.estimate_pynative(_write(tmp_path, text)).to_json()["layers"]
    assert rows[0]["choice"] == "full" and rows[0]["host_bytes"] == 0           # op_swap_void on a full layer
    # SwapWrapper(CheckpointWrapper(mlp)): what the checkpoint keeps (the MLP's input) goes to host
    tab = sizing.estimate_pynative(SIZED).fam
    assert rows[1]["choice"] == "select:mlp+op_swap:mlp" and rows[1]["host_bytes"] == tab.bytes["xn2"] > 0


# -- the command --------------------------------------------------------------------------------

def test_estimate_command_table_and_json_have_the_static_shape_plus_unchecked():
    code, out, err = _run("estimate", SIZED)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith(f"{SIZED}: qwen3 (tensor table pynative/qwen3), 4 layers, hidden 4096")
    assert lines[2].startswith("PyNative (r2.x) path, unchecked: checked against PyNative DryRun L1 of one rank")
    assert "sharding across ranks" in lines[2]
    code, out, err = _run("estimate", SIZED, "--format", "json")
    js = json.loads(out)
    static = json.loads(_run("estimate", os.path.join(ROOT, "fixtures", "configs", "plan_tiny.yaml"),
                             "--format", "json")[1])
    assert set(js) == set(static) | {"path", "unchecked"} and js["path"] == "pynative"
    assert set(js["stages"][0]) == set(static["stages"][0])
    assert any("PyNative DryRun L1" in u for u in js["unchecked"])


def test_missing_size_names_the_r2x_key_in_one_line(tmp_path):
    code, out, err = _run("estimate", os.path.join(ROOT, "fixtures", "configs", "pynative_qwen3_select.yaml"))
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert "pynative_qwen3_select.yaml:3: model.hidden_size: needed to estimate memory" in err
    text = open(SIZED).read()
    bad = _write(tmp_path, text.replace("  vocab_size: 151936\n", ""))
    code, out, err = _run("estimate", bad)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "model.vocab_size" in err and "Traceback" not in err
    bad = _write(tmp_path, text.replace("tensor_parallel: 2", "tensor_parallel: 3"), "tp.yaml")
    code, out, err = _run("estimate", bad)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "tensor_parallel" in ln)
    assert code == 2 and f"tp.yaml:{line}: parallelism.tensor_parallel: num_heads 32 is not a multiple" in err
    bad = _write(tmp_path, text.replace("local_batch_size: 1", "local_batch_size: 0"), "b.yaml")
    code, out, err = _run("estimate", bad)
    assert code == 2 and "training.local_batch_size: expected a positive integer, got 0" in err
    # what apply_ac refuses, and a family without PyNative paths: explain's one line, on the YAML's line
    bad = _write(tmp_path, text.replace("default_prefetch: 1", "default_prefetch: 9"), "pf.yaml")
    code, out, err = _run("estimate", bad)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pf.yaml:26: swap: MindFormers refuses this" in err
    bad = _write(tmp_path, text.replace("model_type: qwen3", "model_type: llama"), "ll.yaml")
    code, out, err = _run("estimate", bad)
    assert code == 2 and "ll.yaml:4: model.model_type: no PyNative layer paths known for model_type 'llama'" in err


def test_calibrate_is_refused_and_dryrun_of_a_sharded_yaml_is_refused_on_pynative():
    """--calibrate has no PyNative form (the command named, one line); --dryrun runs one rank, so a YAML with
    tensor parallel 2 and an FSDP shard of 4 is refused at that key, in one line, before anything runs."""
    code, out, err = _run("estimate", SIZED, "--calibrate", SIZED)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "estimate --calibrate does not model the PyNative (r2.x) path yet" in err
    code, out, err = _run("estimate", SIZED, "--dryrun")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert "parallelism.tensor_parallel" in err and "shards the model across ranks" in err


def test_sizes_from_pretrained_model_dir(tmp_path):
    text = open(SIZED).read()
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"hidden_size": 4096, "vocab_size": 151936}))
    cfg = _write(tmp_path, text.replace("  hidden_size: 4096\n", "  pretrained_model_dir: hf\n")
                 .replace("  vocab_size: 151936\n", ""))
    a = sizing.estimate_pynative(cfg).to_json()["stages"][0]["peak_bytes"]
    assert a == sizing.estimate_pynative(SIZED).to_json()["stages"][0]["peak_bytes"]


# -- against the example model's real PyNative runs ---------------------------------------------

def test_recorded_cases_are_within_the_bound():
    recs = [r for r in _records() if r["mode"] == "PYNATIVE_MODE"]      # the *_graph records: for the docs only
    assert len(recs) >= 8
    errors = {}
    for rec in recs:
        est = sizing.estimate_pynative(os.path.join(ROOT, rec["yaml"]))
        pred = est.to_json()["stages"][0]["peak_bytes"]
        meas = rec["pool_peak_mib"] * MiB
        errors[rec["case"]] = err = (pred - meas) / meas
        if rec["case"] in KNOWN:
            assert round(err, 3) == KNOWN[rec["case"]], (rec["case"], err)
        else:
            assert abs(err) <= BOUND, (rec["case"], pred / MiB, rec["pool_peak_mib"], err)
    # recompute's saving, model vs measured (none -> full at both sequences)
    by = {r["case"]: r["pool_peak_mib"] for r in recs}
    for none, full in (("none", "full"), ("none_seq512", "full_seq512")):
        pn = sizing.estimate_pynative(os.path.join(REC, f"{none}.yaml")).to_json()["stages"][0]["peak_bytes"]
        pf = sizing.estimate_pynative(os.path.join(REC, f"{full}.yaml")).to_json()["stages"][0]["peak_bytes"]
        assert pn > pf and by[none] > by[full]


@pytest.mark.runtime
def test_one_case_rerun_for_real_matches_its_record():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import pynative_memory
    finally:
        sys.path.pop(0)
    with open(os.path.join(REC, "select_mlp.json"), encoding="utf-8") as fh:
        rec = json.load(fh)
    res = pynative_memory.run(os.path.join(ROOT, rec["yaml"]))
    assert res["pynative_lines"] == rec["pynative_lines"] > 0
    assert abs(res["pool_peak_mib"] - rec["pool_peak_mib"]) <= 1, (res, rec)


def test_pipeline_and_mtp_layers_are_placed(tmp_path):
    """PP: apply_pp's split (pynative.config.stage_split: PpLayerSetting's 'auto' even split, which refuses
    what does not divide, or the YAML's explicit ranges), micro-batches from the global batch (said in
    ``unchecked``); DeepSeek-V3: dense / MoE / MTP layers each on their own kind's table, MTP on the last stage."""
    def pp_yaml(n: int, extra: str = "") -> str:
        return open(os.path.join(ROOT, "fixtures", "configs", "pynative_pp2.yaml")).read().replace(
            "  num_hidden_layers: 4\n", f"  num_hidden_layers: {n}\n  hidden_size: 1024\n  num_attention_heads: 8\n"
            "  intermediate_size: 3072\n  vocab_size: 32000\n  seq_length: 2048\n"
            "training:\n  local_batch_size: 1\n  global_batch_size: 8\n").replace(
            "  pipeline_parallel: 2\n", "  pipeline_parallel: 2\n" + extra)
    js = sizing.estimate_pynative(_write(tmp_path, pp_yaml(6))).to_json()
    assert [s["layers"] for s in js["stages"]] == [[0, 1, 2], [3, 4, 5]]
    assert [r["stage"] for r in js["layers"]] == [0, 0, 0, 1, 1, 1]
    assert any("global_batch_size / (dp x local_batch_size) = 8" in u for u in js["unchecked"])
    # 5 layers on 2 stages: PpLayerSetting._compute_auto raises; explicit ranges place them
    with pytest.raises(Refusal, match=r"Number of layers \(5\) is not divisible by total stages \(2\)"):
        sizing.estimate_pynative(_write(tmp_path, pp_yaml(5), "five.yaml"))
    js = sizing.estimate_pynative(_write(tmp_path, pp_yaml(5, "  pipeline_parallel_layers_per_stage: ['0-1', "
                                                          "'2-4']\n"), "five_ranges.yaml")).to_json()
    assert [s["layers"] for s in js["stages"]] == [[0, 1], [2, 3, 4]]
    # a family with no PyNative layer table (DeepSeek-V3) is refused in one line naming it, exit 2
    code, out, err = _run("estimate", os.path.join(ROOT, "fixtures", "configs", "pynative_dsv3_mtp.yaml"))
    assert code == 2 and not out and err.count("\n") == 1
    assert "does not model model family 'deepseek_v3'" in err and "model.model_type" in err
