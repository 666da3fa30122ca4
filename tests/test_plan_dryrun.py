"""`plan` on the maintainer YAMLs against MindSpore DryRun L1 (issue 35): the records of
bench/plan_dryrun.py (fixtures/dryrun/plans/) still describe what `plan` writes today, and on every
recorded stage the planned YAML fits by DryRun (its actual peak, fragments in, and the workspaces
within the budget) and recomputes no more than the maintainers' own strategy. No DryRun here (the
records are the measurement; bench/plan_dryrun.py re-records them)."""
from __future__ import annotations

import glob
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import plan_dryrun  # noqa: E402

from swapwatch.memory.model import estimate  # noqa: E402

MIB = 1 << 20
#: the plan records (``<name>.own.json`` are DryRuns of the maintainers' strategy, calibration sources)
RECORDS = sorted(p for p in glob.glob(os.path.join(plan_dryrun.PLANS, "*.json"))
                 if ".own." not in p and ".margin." not in p and ".failed." not in p)
#: plans made by the margin alone where the case is now planned with DryRun of the YAML itself
#: (``calibrate``), kept as held-out checks of the model (calibrate.plan_errors reads them)
MARGIN_RECORDS = sorted(glob.glob(os.path.join(plan_dryrun.PLANS, "*.margin.json")))
#: plans DryRun put over their budget, kept as evidence: their miss is their table's error part
#: (calibrate.plan_errors ``by_table``), so ``plan`` no longer writes them
FAILED_RECORDS = sorted(glob.glob(os.path.join(plan_dryrun.PLANS, "*.failed.json")))


#: cases of plan_dryrun.CASES whose plan has no DryRun record yet, and why (docs/plan.md says it too)
PENDING: dict = {
    "deepseek_v3": "its plan of no recompute failed by DryRun (deepseek_v3.failed.json: stages 1 and 4 held 115737 "
                   "and 89025 MiB where the estimate said 49643 and 48149): an MoE layer without recompute keeps "
                   "about 1110 MiB a micro-batch where the table has 315, and with that miss as the table's error "
                   "part no strategy fits",
}
#: recorded cases whose plan has stages not run yet (docs/plan.md names them)
PARTIAL: dict = {}
#: (case, stage) whose planned YAML DryRun L1 found over the budget, kept failing on purpose until the
#: margin is fixed and the case re-recorded (docs/plan.md says it): GLM4-9B's last stage held 8456 MiB
#: of fragments (actual 59393 vs used 50937 MiB) where the pool check's bound gave 4314 (15 % of the
#: peak above static)
KNOWN_OVER: set = set()
#: (case, stage) -> the estimate's error against DryRun's used peak, where it under-predicts by more
#: than the margin's error part; the test asserts the error is still this one, so any change is seen.
#: None now: Qwen3-30B-A3B's stage 1 (-1.1 %, held out, where qwen3_moe's 8 in-sample stages give
#: 0.48 %) was one until the error part took the plan records' held-out worst as its floor
#: (calibrate.plan_errors, budget.table_error): from that stage, so it is in-sample for the floor
KNOWN_UNDER: dict = {}


def _record(path: str):
    """(the record, its planned YAML's path, that YAML's text)."""
    with open(path, encoding="utf-8") as fh:
        rec = json.load(fh)
    planned = os.path.join(plan_dryrun.PLANS, rec["planned"])
    with open(planned, encoding="utf-8") as fh:
        return rec, planned, fh.read()


def test_the_maintainer_yamls_are_recorded():
    names = {os.path.basename(p)[:-5] for p in RECORDS}
    assert names <= set(plan_dryrun.CASES)
    # every case is recorded or said pending, and a recorded case is no longer pending
    assert names | set(PENDING) == set(plan_dryrun.CASES) and not names & set(PENDING), (names, PENDING)
    # a recorded case has every stage of its plan, but those said not run yet
    for path in RECORDS:
        with open(path, encoding="utf-8") as fh:
            rec = json.load(fh)
        planned = plan_dryrun.plan(rec["case"], rec.get("calibrate")).planned
        want = set(range(len(planned.stages))) - PARTIAL.get(rec["case"], set())
        assert {s["stage"] for s in rec["stages"]} == want, (rec["case"], want)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: os.path.basename(p)[:-5])
def test_each_stage_cut_is_what_dryrun_ran_and_sizes_its_stage_as_the_plan(path, tmp_path):
    """Each recorded stage ran the stage cut the harness writes today (byte for byte), and the model
    sizes stage p of that cut as it sizes stage p of the planned YAML: the cut kept everything the
    stage's peak depends on (its layers and their kinds, its micro-batches in flight, per chunk with
    interleave), so DryRun of the cut stands for the stage."""
    from swapwatch.memory.model import NO_CALIBRATION

    rec, planned, text = _record(path)
    whole = estimate(planned)
    for st in rec["stages"]:
        cut = plan_dryrun.stage_cut_text(text, planned, st["stage"])
        assert plan_dryrun.sha(cut) == st["ran_sha256"], (rec["case"], st["stage"])
        if cut == text:
            continue
        cut_path = tmp_path / f"s{st['stage']}.yaml"
        cut_path.write_text(cut)
        got = estimate(str(cut_path)).stages[st["stage"]].peak(NO_CALIBRATION)
        assert got == whole.stages[st["stage"]].peak(NO_CALIBRATION), (rec["case"], st["stage"])


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: os.path.basename(p)[:-5])
def test_plan_fits_by_dryrun_and_recomputes_no_more(path):
    with open(path, encoding="utf-8") as fh:
        rec = json.load(fh)
    name = rec["case"]
    derived = plan_dryrun.derived_path(name)
    with open(derived, encoding="utf-8") as fh:
        text = fh.read()
    # the derived YAML is the maintainer YAML with the case's edits, as the harness writes it
    assert plan_dryrun.derive_text(name) == text
    res = plan_dryrun.plan(name, rec.get("calibrate"))
    assert res.fits, res.message()
    # what plan writes today is what DryRun ran
    assert plan_dryrun.sha(plan_dryrun.planned_text(res)) == rec["planned_sha256"], \
        f"plan's answer changed: re-record with `python bench/plan_dryrun.py {name}`"
    assert rec["budget_bytes"] == res.budget
    for st in rec["stages"]:
        used = st["used_peak_mib"] * MIB
        fits = plan_dryrun.fits_by_dryrun(res, st["actual_peak_mib"])
        if (name, st["stage"]) in KNOWN_OVER:
            assert not fits, f"{name} stage {st['stage']} fits now: drop it from KNOWN_OVER"
        else:
            assert fits, (name, st)
        # the model's error allowance held on this stage: predicted peak x (1 + error) covers DryRun's used peak
        peak = res.planned.stages[st["stage"]].peak(res.calibration)
        err = res.parts.error if res.parts is not None else 0.0
        if (name, st["stage"]) in KNOWN_UNDER:
            assert (peak - used) / used == pytest.approx(KNOWN_UNDER[(name, st["stage"])], abs=0.002), (name, st)
            assert peak * (1 + err) < used
        else:
            # the YAML's own strategy is checked by DryRun of that YAML (its calibrate source) instead
            assert peak * (1 + err) >= used * (1 - 1e-9) or res.own_answer, (name, st, peak, used)
    # no more recompute than the maintainers (less wherever anything faster fits: the step time),
    # unless DryRun of the maintainers' own strategy (``<name>.own.json``) shows it over the budget
    own = estimate(derived)
    own_flops = sum(r["recompute_flops"] for r in own.layers) * own.spec.micro_batch_num
    over = plan_dryrun.own_over(name, res)
    if over:
        assert not res.own["fits"], (name, over)
    else:
        assert res.to_json()["recompute_flops"] <= own_flops * (1 + 1e-9)
        assert res.step <= res.own["step_time_seconds"] * (1 + 1e-9)


@pytest.mark.parametrize("path", MARGIN_RECORDS, ids=lambda p: os.path.basename(p)[:-5])
def test_margin_only_plans_kept_as_evidence_are_what_dryrun_ran_and_fit(path):
    """A margin-only plan's record still names the YAML DryRun ran (its planned YAML and each stage
    cut, byte for byte), and each stage fitted (actual peak plus the workspace bound within the
    budget): the model's miss on it counts in the held-out floor (test_plan_budget)."""
    from swapwatch.memory.budget import measured_need

    rec, planned, text = _record(path)
    assert plan_dryrun.sha(text) == rec["planned_sha256"]
    for st in rec["stages"]:
        assert plan_dryrun.sha(plan_dryrun.stage_cut_text(text, planned, st["stage"])) == st["ran_sha256"]
        assert measured_need(st["actual_peak_mib"] * MIB) <= rec["budget_bytes"], st


@pytest.mark.parametrize("path", FAILED_RECORDS, ids=lambda p: os.path.basename(p)[:-5])
def test_failed_plans_kept_as_evidence_are_what_dryrun_ran_and_are_not_planned_again(path):
    """A plan DryRun put over its budget: the record names the YAML and each stage cut DryRun ran
    (byte for byte), each recorded stage is over (actual peak plus the workspace bound), the miss is
    its table's error part (model_error.json ``held_out.by_table``), and ``plan`` no longer writes it."""
    from swapwatch.memory.budget import measured_need, model_errors

    rec, planned, text = _record(path)
    assert plan_dryrun.sha(text) == rec["planned_sha256"]
    over = [st for st in rec["stages"] if measured_need(st["actual_peak_mib"] * MIB) > rec["budget_bytes"]]
    assert over, rec["stages"]
    for st in rec["stages"]:
        assert plan_dryrun.sha(plan_dryrun.stage_cut_text(text, planned, st["stage"])) == st["ran_sha256"]
    table = estimate(planned).fam.table
    assert model_errors()["held_out"]["by_table"][table]["stages"] >= len(over)
    res = plan_dryrun.plan(rec["case"], rec.get("calibrate"))
    assert not res.fits or plan_dryrun.sha(plan_dryrun.planned_text(res)) != rec["planned_sha256"]
