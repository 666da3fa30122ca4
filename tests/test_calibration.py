"""Calibration that generalises (issue 27 point 4; swapwatch/memory/calibrate.py, docs/estimate.md
"Calibration"): fitted on a few measured peaks, the model predicts strategies and shapes it was not
fitted on. The CPU peaks are real MindSpore pool peaks of the tiny Llama recorded by
bench/record_cpu_memory.py (fixtures/cpu_memory); the runtime test re-measures one of them. The
DryRun log is a real DryRun L1 log (swapwatch.memory.dryrun.measure on an 8-layer Qwen3-32B cut)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.memory.calibrate import calibrate, dryrun_case, dryrun_log, fit_terms
from swapwatch.memory.model import estimate

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "fixtures" / "cpu_memory"
CASES = ROOT / "fixtures" / "dryrun" / "cases"
LOG = ROOT / "fixtures" / "dryrun_logs" / "qwen3_32b_l8_pp2_none.stage1.log"
MiB = 1 << 20
sys.path.insert(0, str(ROOT / "bench"))


def _bench_plan():
    """bench/plan.py (the calibration sets and bounds `make bench-plan` uses), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("swapwatch_bench_plan", ROOT / "bench" / "plan.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_B = _bench_plan()
CPU_BOUND, CPU_CALIBRATION, DRYRUN_BOUND = _B.CPU_BOUND, _B.CPU_CALIBRATION, _B.DRYRUN_BOUND
DRYRUN_CALIBRATION = _B.DRYRUN_CALIBRATION
QWEN3 = DRYRUN_CALIBRATION["qwen3_32b"]
#: (record, stage) -> the held-out error measured when it was last looked at, for held-out records outside
#: DRYRUN_BOUND after their family's calibration; asserted to stay that figure (to 0.5 %). None: the
#: last ones, the Llama2 cut with the plain layer (-6.5 / -5.6 % calibrated), came in with its
#: sequence-parallel gathered inputs (docs/estimate.md "The plain Llama layer under sequence parallel")
CALIBRATED_KNOWN: dict = {}


def _errors(cal, records):
    out = {}
    for js in records:
        m = dryrun_case(str(js))
        est = estimate(m.config, calibration=cal)
        for stage, used in m.used.items():
            out[(js.stem, stage)] = (est.stages[stage].peak(cal) - used) / used
    return out


def test_cpu_records_are_the_grid_the_recorder_writes():
    """Every strategy x shape of bench/record_cpu_memory.py is recorded, with its YAML beside it
    (what the YAML says is what ran: the recorder writes both)."""
    from record_cpu_memory import SHAPES, STRATEGIES, case_yaml

    for shape, (seq, batch) in SHAPES.items():
        for strategy in STRATEGIES:
            rec = json.loads((CPU / f"{strategy}_{shape}.json").read_text())
            assert (CPU / rec["yaml"]).read_text() == case_yaml(strategy, seq, batch)
            assert rec["stages"][0]["used_peak_bytes"] > 0


def test_two_cpu_runs_predict_every_held_out_strategy_and_shape_within_10_percent():
    """Calibrated on none + full at the YAML's shape (two runs, two fitted scales; the CPU pool
    holds no static part and no separate workspace, which is not fitted), the model predicts the
    other strategies (three select sets) and shapes (twice and half the sequence, twice the
    micro-batch: 18 peaks) within 10 %; on its own two runs it is exact."""
    cal, measured = calibrate([str(CPU / f"{n}.json") for n in CPU_CALIBRATION])
    assert all(m.cpu_pool for m in measured.values())
    assert (cal.static_scale, cal.workspace_scale, cal.residual) == (0.0, 0.0, 0.0)
    assert cal.transient_scale is not None and 1.0 < cal.scale < 2.0 and 1.0 < cal.transient_scale < 2.0
    assert all(abs(r["error"]) < 0.005 for r in cal.runs)
    held = {k: e for k, e in _errors(cal, sorted(CPU.glob("*.json"))).items() if k[0] not in CPU_CALIBRATION}
    assert len(held) == 18
    assert max(map(abs, held.values())) < CPU_BOUND, held
    # the 2x-sequence select case one activation scale missed by 12.9 % (docs/estimate.md)
    assert abs(held[("sel_mlp_s512_b2", 0)]) < 0.05


def test_one_scale_over_the_whole_peak_does_not_generalise_on_cpu():
    """The fit this replaces (residual + one scale over every dynamic term, the device fit), on the
    same two runs: exact on them, beyond the bound at twice the sequence (+26 % on full recompute).
    Why the CPU pool gets its own terms."""
    from swapwatch.memory.calibrate import fit
    from swapwatch.memory.model import Calibration

    pts = []
    for n in CPU_CALIBRATION:
        st = estimate(str(CPU / f"{n}.yaml")).stages[0]
        pts.append((st.static_total, st.dynamic, dryrun_case(str(CPU / f"{n}.json")).used[0]))
    r, a = fit(pts)
    cal = Calibration(residual=r, scale=a, fitted=True)
    errs = _errors(cal, [CPU / "full_s512_b2.json", CPU / "sel_mlp_s512_b2.json"])
    assert max(map(abs, errs.values())) > CPU_BOUND, errs


def test_fit_pool_recovers_known_scales_and_falls_back_to_one():
    """On the real model's terms of CPU cases with peaks built from known scales, fit_pool returns
    those scales; one point (or points of one case) give one scale over both, never two."""
    from swapwatch.memory.calibrate import _split, fit_pool

    pts = []
    for name in ("none_s256_b2", "full_s256_b2", "sel_mlp_s512_b2"):
        kept, step = _split(estimate(str(CPU / f"{name}.yaml")).stages[0], workspace=False)
        pts.append((kept, step, 1.3 * kept + 1.5 * step))
    a, t = fit_pool(pts)
    assert abs(a - 1.3) < 1e-9 and abs(t - 1.5) < 1e-9
    a1, t1 = fit_pool(pts[:1])
    assert t1 is None and abs(a1 * (pts[0][0] + pts[0][1]) - pts[0][2]) < 1
    assert fit_pool([pts[1]] * 2)[1] is None


def test_fit_terms_recovers_known_terms_and_refuses_what_is_not_pinned_down():
    """On the real model's terms of three CPU cases with measured peaks built from known terms, the
    fit returns those terms; with two points, or three points of one case, it returns None."""
    pts = []
    r, a, t = -30 * MiB, 1.2, 0.8
    for name in ("none_s256_b2", "full_s256_b2", "full_s512_b2", "sel_mlp_s256_b4"):
        st = estimate(str(CPU / f"{name}.yaml")).stages[0]
        kept, step = st.activations + st.swap_window, st.transient + st.workspace + st.head + st.gathered
        pts.append((st.static_total, kept, step, st.static_total + r + a * kept + t * step))
    got = fit_terms(pts)
    assert got is not None
    assert abs(got[0] - r) < 1024 and abs(got[1] - a) < 1e-6 and abs(got[2] - t) < 1e-6
    assert fit_terms(pts[:2]) is None
    assert fit_terms([pts[0]] * 3) is None


def test_dryrun_records_predict_held_out_strategies_and_shapes_within_5_percent():
    """DryRun L1 records of the Qwen3-32B cut: calibrated on none + full (two records: residual and
    one scale), the other strategies, shapes and layouts (select, per-stage counts, 8k sequence, 8
    micro-batches, PP2, TP8 with sequence parallel and comm recompute, the shipped 64-layer YAML)
    within 5 %."""
    cal, _ = calibrate([str(CASES / f"{n}.json") for n in QWEN3])
    assert cal.transient_scale is None
    recs = [js for js in sorted(CASES.glob("qwen3_32b_*.json")) if js.stem not in QWEN3]
    errs = _errors(cal, recs)
    assert len(errs) >= 11 and max(map(abs, errs.values())) < DRYRUN_BOUND, errs


@pytest.mark.parametrize("family", sorted(DRYRUN_CALIBRATION))
def test_every_family_calibrates_on_none_and_full_and_predicts_its_other_records(family):
    """Issue 27 point 4 on every family of the corpus (``make bench-plan`` prints the same tables):
    calibrated on the family's none + full cut, every other record of the family within 5 %, but
    those whose YAML has a key the model leaves out (a bound: SeqPipe, the accumulation shard), which
    bench/plan.py names, and the pinned ``CALIBRATED_KNOWN``."""
    cases = _B.dryrun_cases(family)
    on = DRYRUN_CALIBRATION[family]
    assert all(n in cases for n in on), family
    cal, _ = calibrate([cases[n][0] for n in on])
    unbounded = _B.unmodelled_beyond(cases, on)
    assert all(estimate(cases[n][1]).unmodelled for n in unbounded)
    errs = _errors(cal, [Path(cases[n][0]) for n in cases if n not in on and n not in unbounded])
    for key, err in errs.items():
        if key in CALIBRATED_KNOWN:
            assert err == pytest.approx(CALIBRATED_KNOWN[key], abs=0.005), (key, err)
        else:
            assert abs(err) < DRYRUN_BOUND, (key, err)
    # the records calibration was fitted on come back within the bound too (two terms, four peaks)
    fitted = _errors(cal, [Path(cases[n][0]) for n in on])
    assert max(map(abs, fitted.values())) < 0.065, fitted


def test_three_dryrun_records_fit_three_terms_and_still_predict_within_5_percent():
    """Three device sources pin three terms (residual, saved-activation scale, per-step scale): on
    DryRun L1 (none, full, 8k sequence) both scales stay near 1 (the physical terms hold on the
    Ascend allocator) and the held-out cases of the cut stay within 5 %."""
    names = ("qwen3_32b_l8_none", "qwen3_32b_l8_full", "qwen3_32b_l8_s8k_none")
    cal, _ = calibrate([str(CASES / f"{n}.json") for n in names])
    assert cal.transient_scale is not None and cal.static_scale == 1.0
    assert abs(cal.scale - 1) < 0.05 and abs(cal.transient_scale - 1) < 0.1
    recs = [js for js in sorted(CASES.glob("qwen3_32b_*.json")) if js.stem not in names]
    errs = _errors(cal, recs)
    assert len(errs) >= 8 and max(map(abs, errs.values())) < DRYRUN_BOUND, errs


def test_a_raw_dryrun_log_calibrates_like_its_record():
    """The raw log of DryRun's stage 1 (rank 4 of 8) of the PP2 cut: its Used / Actual peak lines are
    stage 1's peaks (the record of the same YAML says the same), whether the YAML is named
    (CONFIG=LOG) or is the one being estimated."""
    yml = CASES / "qwen3_32b_l8_pp2_none.yaml"
    m = dryrun_log(str(LOG), str(yml))
    rec = json.loads((CASES / "qwen3_32b_l8_pp2_none.json").read_text())
    st1 = next(s for s in rec["stages"] if s["stage"] == 1)
    assert m.used == {1: st1["used_peak_mib"] * MiB} and m.actual == {1: st1["actual_peak_mib"] * MiB}
    named, _ = calibrate([f"{yml}={LOG}"])
    own, _ = calibrate([str(LOG)], config=str(yml))
    from_record, _ = calibrate([str(CASES / "qwen3_32b_l8_pp2_none.json")])
    assert named.runs[0]["stage"] == own.runs[0]["stage"] == 1
    assert named.residual == own.residual
    assert named.runs[0]["measured_bytes"] == from_record.runs[1]["measured_bytes"]


def test_bad_calibration_sources_are_one_line_exit_2(tmp_path):
    """A log of another YAML (another rank count), a log without the YAML, a file that is no source
    at all: InputError naming the file, and through the CLI one line on stderr, exit 2."""
    other = CASES / "qwen3_32b_l8_tp8_sp_none.yaml"
    with pytest.raises(InputError, match="simulated ranks"):
        calibrate([f"{other}={LOG}"])
    with pytest.raises(InputError, match="does not name the YAML"):
        calibrate([str(LOG)])
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    with pytest.raises(InputError, match="not a calibration source"):
        calibrate([str(junk)])
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "estimate", str(other), "--calibrate", str(LOG)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(LOG.name) in r.stderr


def test_estimate_cli_with_a_raw_log_shows_the_measured_peak():
    """`swapwatch estimate YAML --calibrate LOG`: the log is a DryRun of YAML, its stage-1 peak is
    printed beside the prediction (JSON: measured_peak_bytes) and the calibration lists it."""
    yml = CASES / "qwen3_32b_l8_pp2_none.yaml"
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "estimate", str(yml), "--calibrate", str(LOG),
                        "--format", "json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert js["stages"][1]["measured_peak_bytes"] == 17017 * MiB
    assert js["calibration"]["runs"][0]["run"].endswith(LOG.name)


@pytest.mark.runtime
def test_one_cpu_record_re_measures(tmp_path):
    """The recorder re-run on one case (full recompute at twice the micro-batch: real MindSpore on
    CPU) gives the recorded pool peak again (the pool peak is deterministic to the MiB)."""
    pytest.importorskip("mindspore")
    from runtime_helpers import env_with_venv

    from swapwatch.memory.calibrate import measure

    name = "full_s256_b4"
    rec = json.loads((CPU / f"{name}.json").read_text())
    yml = tmp_path / f"{name}.yaml"
    yml.write_text((CPU / rec["yaml"]).read_text())
    rd = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "run", "--config", str(yml), "--run-dir", str(rd),
                        "--", sys.executable, "-m", "swapwatch.examples.train", "--config", str(yml),
                        "--steps", str(rec["steps"])], capture_output=True, text=True, env=env_with_venv(),
                       cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    m = measure(str(rd), 1)
    assert m.cpu_pool and abs(m.used[0] - rec["stages"][0]["used_peak_bytes"]) <= MiB


def test_bench_plan_names_the_held_out_misses(capsys):
    """`make bench-plan`'s table (bench/plan.py): every case with calibrated on? / predicted /
    measured / error; the held-out cases beyond the bound come back (main exits 1 on them): none at
    10 %, some at a bound of 1 %, and never a calibration run."""
    cases = _B.recorded_cpu_cases()
    assert _B.held_out_table("cpu", cases, CPU_CALIBRATION, CPU_BOUND) == []
    tight = _B.held_out_table("cpu", cases, CPU_CALIBRATION, 0.01)
    assert tight and not {n for n, _, _ in tight} & set(CPU_CALIBRATION)
    out = capsys.readouterr().out
    assert "| sel_mlp_s512_b2 | 0 | no |" in out and "| none_s256_b2 | 0 | yes |" in out and "MISSES 1%" in out
