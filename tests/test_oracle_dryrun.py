"""Oracle tier for `estimate`: MindSpore's own DryRun (docs/estimate.md, "DryRun L1").

Two parts:

* **recorded** (fast, no DryRun): every case in ``fixtures/dryrun/cases/`` (a complete training YAML
  that was run through DryRun, and its JSON with DryRun's per-stage ``Used peak``; recorded by
  ``tools/dryrun/record_cases.py``, by any helper, for any family) is estimated by swapwatch from the
  same YAML, uncalibrated, and compared stage by stage. The agreement bound is issue 27's: within
  10 % of DryRun L1's used peak. Cases whose family has no tensor table yet, and stages the model
  still misses, are listed in ``KNOWN`` with the error measured when they were recorded: the test
  fails when such a figure moves (better or worse), so the list is kept honest.
* **live** (needs ``make dryrun``): a few recorded cases are run through DryRun again and must give
  the recorded bytes (DryRun is deterministic): the corpus is still what DryRun says. Skipped
  without the stand-ins, and a failure under ``SWAPWATCH_REQUIRE_ALL=1`` (``make test``).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.memory import dryrun
from swapwatch.memory.model import estimate

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "fixtures" / "dryrun" / "cases"
MIB = 1 << 20
TOLERANCE = 0.10
#: (case, stage) -> the relative error recorded when the model was last changed, for stages outside
#: TOLERANCE; the test asserts the error is still this one (to 0.5 %), so any change is seen
KNOWN: dict = {
    # r1.6.0's Mixtral-8x7B finetune, stage 0 as shipped (legacy LlamaForCausalLM with a top-level
    # moe_config: 8 experts, EP2; held out): DryRun L1 56882 MiB used where the dense llama table gave
    # 35330 (-37.9 %): the estimate refuses legacy MoE now (tensor_table: a table without expert rows)
    ("mixtral_8x7b_finetune_r160_s0", 0): None,
    # otherwise every stage of the corpus is within the bound. The maintainers' Qwen2.5-72B 32k finetune's
    # stage 0 (SeqPipe 8, select comm recompute on 6 of its 10 layers) was +244.5 % while SeqPipe was
    # unmodelled and +18.5 % after: its select comm patterns reach w_qkv's and w_gate_hidden's reshapes,
    # whose AllGathers comm recompute re-runs in backward on the plain layer (llama.yaml; measured on the
    # Qwen2.5-32B cut pair qwen2_5_32b_l4_pp2_none / _commreshape), -2.0 % held out since. The
    # Llama-3.1-70B finetune's stage 0 as
    # shipped (+27.4 %) came in with the fine-grain interleaved layer's gathered inputs, the select comm
    # recompute that frees them and the SiLU-Mul product its w2 reads (-1.8 %; docs/estimate.md
    # "Fine-grain interleave"). Before it, op swap of the whole MLP
    # cell on the 8k Qwen3-32B cut (-16.9 %), came in with the SwiGlu split's outputs left on device
    # (TensorTable.pinned) and the prefetch window of one layer net of the later layers' (model.
    # swap_window; docs/estimate.md "Swap under DryRun L1")
}
#: (none case, other case, stage) -> (model's saving, DryRun L1's saving) in MiB, for pairs outside the
#: bound: asserted to stay these figures (to 2 MiB). None: the last ones, the last stages' savings
#: (Qwen2.5, GLM4, Qwen3-32B) and Qwen3-MoE's first stage, came in with the loss apart from the layers'
#: backward (ModelSpec.loss_apart, the mcore head as DryRun L1 holds it) and the MoE layer's weight
#: copies (docs/estimate.md "The legacy last stage", "The mcore last stage", "The MoE layer's weight copies")
KNOWN_DELTA: dict = {}
#: the live subset: (case, stage), cheap 8-layer stages; the second one goes through the CLI
LIVE = [("qwen3_32b_l8_full", 0)]
LIVE_CLI = ("qwen3_32b_l8_none", 3)


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=1200)


def recorded():
    out = []
    for js in sorted(CASES.glob("*.json")):
        data = json.loads(js.read_text(encoding="utf-8"))
        for st in data["stages"]:
            out.append(pytest.param(js.stem, data, st, id=f"{js.stem}-stage{st['stage']}"))
    return out


def test_corpus_is_complete():
    """Every case JSON names its YAML beside it, its source maintainer YAML, and has the contract's keys."""
    cases = sorted(CASES.glob("*.json"))
    assert cases, "no DryRun cases recorded"
    for js in cases:
        data = json.loads(js.read_text(encoding="utf-8"))
        assert {"yaml", "source", "derived", "family", "rank_size", "stages", "mindspore", "mindformers"} <= set(data)
        assert (CASES / data["yaml"]).is_file(), js
        assert (ROOT / data["source"]).is_file(), js
        for st in data["stages"]:
            assert {"stage", "rank_id", "used_peak_mib", "actual_peak_mib", "seconds"} <= set(st)
            assert st["actual_peak_mib"] >= st["used_peak_mib"] > 0


@pytest.mark.parametrize("name,data,stage", recorded())
def test_estimate_agrees_with_dryrun(name, data, stage):
    """Uncalibrated peak_bytes of the case's YAML vs DryRun L1's used peak of that stage."""
    try:
        est = estimate(str(CASES / data["yaml"]))
    except InputError as exc:          # a family without a tensor table yet: must be listed as known
        assert (name, stage["stage"]) in KNOWN and KNOWN[(name, stage["stage"])] is None, exc.one_line()
        return
    used = stage["used_peak_mib"] * MIB
    pred = est.stages[stage["stage"]].peak()
    err = (pred - used) / used
    known = KNOWN.get((name, stage["stage"]))
    if known is not None:
        assert err == pytest.approx(known, abs=0.005), f"{name} stage {stage['stage']}: {err:+.1%} (was {known:+.1%})"
    else:
        assert abs(err) <= TOLERANCE, (f"{name} stage {stage['stage']}: predicted {pred / MIB:.0f}M, "
                                       f"DryRun L1 used {stage['used_peak_mib']}M: {err:+.1%}")


def deltas():
    """none -> full (and -> select) recompute pairs of the corpus: same YAML but recompute."""
    out = []
    for base in sorted(CASES.glob("*_none.json")):
        for other in ("full", "select"):
            js = base.with_name(base.name.replace("_none.json", f"_{other}.json"))
            if js.exists():
                out.append(pytest.param(base, js, id=f"{base.stem}->{other}"))
    return out


@pytest.mark.parametrize("none_js,other_js", deltas())
def test_recompute_delta_agrees(none_js, other_js):
    """What recompute saves per stage, model vs DryRun L1: within 10 % of DryRun's delta (or of
    1 % of the peak, when DryRun's delta is smaller than that: 10 % of a few MiB is noise)."""
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (none_js, other_js))
    ea, eb = estimate(str(CASES / a["yaml"])), estimate(str(CASES / b["yaml"]))
    sb = {s["stage"]: s for s in b["stages"]}
    for s in a["stages"]:
        if s["stage"] not in sb:
            continue
        dry = (s["used_peak_mib"] - sb[s["stage"]]["used_peak_mib"]) * MIB
        ours = ea.stages[s["stage"]].peak() - eb.stages[s["stage"]].peak()
        known = KNOWN_DELTA.get((none_js.stem, other_js.stem, s["stage"]))
        if known is not None:
            assert (abs(ours / MIB - known[0]) <= 2, dry // MIB) == (True, known[1]), \
                f"stage {s['stage']}: model saves {ours / MIB:.0f}M (was {known[0]}M), DryRun L1 {dry / MIB:.0f}M"
            continue
        slack = max(TOLERANCE * abs(dry), 0.01 * s["used_peak_mib"] * MIB)
        assert abs(ours - dry) <= slack, (f"stage {s['stage']}: model saves {ours / MIB:.0f}M, "
                                          f"DryRun L1 {dry / MIB:.0f}M")


def _require_dryrun():
    reason = dryrun.available()
    if reason:
        if os.environ.get("SWAPWATCH_REQUIRE_ALL") == "1":
            pytest.fail(f"SWAPWATCH_REQUIRE_ALL=1 but DryRun is not available: {reason}")
        pytest.skip(f"DryRun not available: {reason}")


@pytest.mark.parametrize("name,stage", LIVE)
def test_live_recorded_figures_are_still_dryruns(name, stage, tmp_path):
    """Re-run a recorded stage through the harness: the same used and actual peak (DryRun is
    deterministic), so the corpus the fast test compares with is DryRun's."""
    _require_dryrun()
    data = json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))
    want = next(s for s in data["stages"] if s["stage"] == stage)
    res = dryrun.measure(str(CASES / data["yaml"]), [stage], timeout=900, work_dir=str(tmp_path))
    got = res.stages[stage]
    assert got.rank_id == want["rank_id"]
    assert (got.used_bytes // MIB, got.actual_bytes // MIB) == (want["used_peak_mib"], want["actual_peak_mib"]), \
        got.log_path


def test_live_estimate_dryrun_cli_prints_dryrun_beside_the_model(tmp_path):
    """`swapwatch estimate --dryrun`: DryRun L1's used peak of the stage beside the model's, with the
    error, in the JSON (and the table names it)."""
    _require_dryrun()
    name, stage = LIVE_CLI
    data = json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))
    want = next(s for s in data["stages"] if s["stage"] == stage)
    r = cli("estimate", str(CASES / data["yaml"]), "--dryrun-stage", str(stage), "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    js = json.loads(r.stdout)
    assert js["dryrun"]["level"] == "DryRun L1"
    (row,) = js["dryrun"]["stages"]
    assert row["stage"] == stage and row["rank_id"] == want["rank_id"]
    assert row["used_peak_bytes"] == want["used_peak_mib"] * MIB
    model = js["stages"][stage]["peak_bytes"]
    assert row["model_peak_bytes"] == model
    assert row["error"] == round((model - row["used_peak_bytes"]) / row["used_peak_bytes"], 4)


def test_estimate_dryrun_without_cann_is_one_line_exit_2(tmp_path):
    """No stand-ins and no toolkit: one line saying what is missing, exit 2, nothing run."""
    r = cli("estimate", str(CASES / "qwen3_32b_l8_none.yaml"), "--dryrun",
            env={"SWAPWATCH_DRYRUN_STUBS": str(tmp_path / "nothing")})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "DryRun is not available" in r.stderr and "make dryrun" in r.stderr
    r = cli("estimate", str(CASES / "qwen3_32b_l8_none.yaml"), "--dryrun",
            env={"SWAPWATCH_DRYRUN_PYTHON": str(tmp_path / "no-python")})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no Python with MindSpore" in r.stderr


def test_measure_refuses_bad_input(tmp_path):
    with pytest.raises(InputError):
        dryrun.measure(str(tmp_path / "missing.yaml"))


def test_read_peaks():
    text = ("[WARNING] DEVICE(1,7f,python):2026 [ascend_memory_adapter.cc:1] DevMemStatistics] "
            "Used peak memory usage (without fragments): 8757M\n"
            "[WARNING] ... Actual peak memory usage (with fragments): 9738M\n")
    assert dryrun.read_peaks(text) == (8757 * MIB, 9738 * MIB)
    assert dryrun.read_peaks("nothing") == (None, None)


def test_what_dryrun_leaves_out_is_its_own_field(monkeypatch):
    """HCCL's buffers are outside DryRun L1's figure and outside peak_bytes: a field of their own,
    2 x HCCL_BUFFSIZE per communicator (5 on Qwen3-32B at TP4 PP4: the groups DryRun creates)."""
    est = estimate(str(CASES / "qwen3_32b_l8_none.yaml"))
    monkeypatch.delenv("HCCL_BUFFSIZE", raising=False)
    out = est.to_json()["not_in_peak"]
    assert out == {"communicators": 5, "hccl_buffsize_mb": 200, "communication_buffers_bytes": 5 * 2 * 200 * MIB,
                   "kernel_workspace_bytes": None}
    monkeypatch.setenv("HCCL_BUFFSIZE", "50")
    assert est.to_json()["not_in_peak"]["communication_buffers_bytes"] == 5 * 2 * 50 * MIB


def test_calibration_on_dryrun_records_predicts_what_it_did_not_see():
    """`--calibrate` takes DryRun records. Fitted on the none and full cuts (4 stages), the physical
    terms need little (residual 235 MiB, 2 % of the smallest peak; scale 0.964: the model's last
    stages are 0.7-1.1 % low, its first 0.3 % high, and the slope takes that up); a case it did not see
    is predicted from the same fit (held out: the default select set) within the issue's 5 %."""
    from swapwatch.memory.calibrate import calibrate

    cal, _ = calibrate([str(CASES / "qwen3_32b_l8_none.json"), str(CASES / "qwen3_32b_l8_full.json")])
    assert abs(cal.residual) < 256 * MIB and abs(cal.scale - 1) < 0.05
    assert all(abs(r["error"]) < 0.01 for r in cal.runs) and len(cal.runs) == 4
    data = json.loads((CASES / "qwen3_32b_l8_select.json").read_text(encoding="utf-8"))
    est = estimate(str(CASES / data["yaml"]), calibration=cal)
    errs = {s["stage"]: (est.stages[s["stage"]].peak(cal) - s["used_peak_mib"] * MIB) / (s["used_peak_mib"] * MIB)
            for s in data["stages"]}
    assert abs(errs[3]) < 0.05 and abs(errs[0]) < 0.05, errs


def test_only_loaders_the_harness_mocks_are_run(tmp_path):
    """The harness mocks the BlendedMegatron loader (mcore) and a legacy YAML's MindDataset
    (dryrun_child.py: legacy_mock_loader): both pass the check; anything else (here an mcore YAML
    reading a MindDataset) is exit 2 with the key that says why, before anything runs."""
    import yaml

    legacy = ROOT / "fixtures" / "configs" / "mindformers" / "finetune_qwen2_5_7b_8k.yaml"
    dryrun._check_data_loader(str(legacy))                       # pylint: disable=protected-access
    dryrun._check_data_loader(str(CASES / "qwen3_32b_l8_none.yaml"))  # pylint: disable=protected-access
    data = yaml.safe_load(legacy.read_text(encoding="utf-8"))
    data["use_legacy"] = False
    bad = tmp_path / "mcore_minddataset.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(InputError, match="use_legacy: False") as err:
        dryrun._check_data_loader(str(bad))                      # pylint: disable=protected-access
    assert "\n" not in err.value.one_line()
