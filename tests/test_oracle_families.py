"""Oracle tier for the model families: real MindFormers 2.1.0 models vs explain and verify.

Skipped unless ``.oracle-venv/.ready`` exists. Each case (``tests/oracle/family_cases.py``) is a
maintainer YAML of the MindFormers repository with a small layer count and a strategy; the real
network is built on CPU as ``BaseTrainer.create_network`` does (``tests/oracle/mf_models.py``), so
MindFormers' own LayerSetting sets the real decoder layers (dense, MoE) and the MTP layer. Then:

* explain's LayerSetting lines (geometry, Formative values, warnings, every ``Set ...`` line; the
  second block of the MTP layer included) equal what MindFormers logged, line for line;
* where MindFormers refuses the config, swapwatch refuses it (ConfigError, exit 2); where the build
  crashes on a preset / shared primitive, explain has an SW207 error naming it;
* ``verify`` on the real log of every genuine case reports no run-time error, and keeps SW201
  exactly where explain has it (a real swap/recompute conflict).

Also the drift test of the extracted layer trees (``tools/extract_layouts.py --check``).
"""
import json
import os
import re
import subprocess
import sys

import pytest

from swapwatch.config import load_config
from swapwatch.errors import ConfigError
from swapwatch.commands.explain import explain
from swapwatch.engine import strategy
from swapwatch.commands.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE_PY = os.path.join(ROOT, ".oracle-venv", "bin", "python")
READY = os.path.join(ROOT, ".oracle-venv", ".ready")
SCRIPT = os.path.join(ROOT, "tests", "oracle", "mf_models.py")
MARK = "@@SWAPWATCH_ORACLE@@"
N_RANDOM = int(os.environ.get("SWAPWATCH_FAMILY_CASES", "40"))
NP_SCALAR = re.compile(r"np\.(?:int|uint|float)\d+\((-?[\d.]+)\)")
#: run-time rules: none may fire on the log of a config MindFormers ran
RUN_RULES = {"SW101", "SW102", "SW103", "SW106", "SW107", "SW401"}

sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
from family_cases import CRASH, HAND, LEGACY, random_cases, write_yaml  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not (os.path.exists(READY) and os.path.exists(ORACLE_PY)),
                                                     reason="no MindFormers oracle venv (.oracle-venv/.ready)")]

CASES = HAND + random_cases(N_RANDOM)


def run_oracle(paths):
    proc = subprocess.run([ORACLE_PY, SCRIPT], input=json.dumps(paths), capture_output=True, text=True,
                          timeout=1800, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    assert line is not None, f"oracle failed: {proc.stderr[-3000:]}"
    return json.loads(line[len(MARK):])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("families")
    paths = [write_yaml(c, str(d / f"case{i}.yaml")) for i, c in enumerate(CASES)]
    crash_paths = [write_yaml(c, str(d / f"crash{i}.yaml")) for i, c in enumerate(CRASH)]
    every = paths + crash_paths
    # one process per code path: MindFormers' use_legacy context is process-wide
    legacy = [i for i, c in enumerate(CASES + CRASH) if c["family"] in LEGACY]
    mcore = [i for i in range(len(every)) if i not in legacy]
    results = [None] * len(every)
    for group in (legacy, mcore):
        if group:
            for i, r in zip(group, run_oracle([every[i] for i in group])):
                results[i] = r
    return d, paths, results[:len(paths)], crash_paths, results[len(paths):]


def mf_lines(result):
    return [NP_SCALAR.sub(r"\1", msg) for _, msg in result["lines"]]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_explain_matches_real_model(built, index):
    _, paths, results, _, _ = built
    case, mf = CASES[index], results[index]
    try:
        lines = strategy.layer_setting_lines(strategy.plan(load_config(paths[index])))
        error = None
    except ConfigError as exc:
        lines, error = None, exc
    if "error" in mf:
        assert error is not None, f"MindFormers raised {mf['error']!r}; swapwatch accepted {case!r}"
        return
    assert error is None, f"swapwatch refused what MindFormers builds: {error.one_line()} ({case!r})"
    assert lines == mf_lines(mf), f"case {case!r}"


def expected_state(plan, config, lp, mtp):
    """What the plan says LayerSetting leaves on one real layer, on that layer's own tree."""
    fam = plan.family
    key = plan.layout_key(lp.layer, mtp)
    shared = set(fam.shared(key))
    preset = fam.preset(key, bool(config.recompute_config.get("select_recompute")))
    cell_paths = {p for p, kind in fam.layout(key).paths() if kind == "cell"}
    rec = {p: v["recompute"] for p, v in preset.items() if "recompute" in v and p not in cell_paths}
    comm, cells, offload = {}, {""} if lp.full_recompute else set(), {}
    cells |= {p for p in preset if p in cell_paths}

    def targets(pats, mode):
        return [t for pat in pats for t in fam.walk(key, pat, mode).targets]

    for t in targets(lp.select_recompute, "recompute"):
        (cells.add(t.path) if t.kind == "cell" else rec.__setitem__(t.path, True))
    for t in targets(lp.select_recompute_exclude, "exclude"):
        rec[t.path] = False
    for t in targets(lp.select_comm_recompute, "comm"):
        comm[t.path] = True
    for t in targets(lp.select_comm_recompute_exclude, "comm_exclude"):
        comm[t.path] = False
    prims = [p for p, kind in fam.layout(key).paths() if kind == "prim"]
    for pat, prefetch in lp.op_swap.items():
        for t in fam.walk(key, pat, "swap").targets:
            # Cell.offload() marks every primitive inside the cell
            for p in ([t.path] if t.kind == "prim" else [p for p in prims if p.startswith(t.path + ".")]):
                offload[p] = prefetch                  # a later pattern's call wins
    # Cell.recompute() marks a whole subtree: only the outermost marked cells are reported
    cells = {c for c in cells if not any(o != c and (o == "" or c.startswith(o + ".")) for o in cells)}
    return {"recompute": rec, "comm": comm, "cells": cells, "offload": offload}, shared


@pytest.mark.parametrize("index", range(len(CASES)))
def test_each_real_layer_carries_what_the_plan_says(built, index):
    """Per layer (MTP included): the primitives and cells MindFormers marked on the real layer are
    exactly those the plan's patterns reach on that layer's tree (preset ones included; shared
    primitives, whose one object every layer marks, and offload under a whole-layer swap aside)."""
    _, paths, results, _, _ = built
    mf = results[index]
    if "error" in mf:
        pytest.skip("MindFormers refused this config (checked by the explain test)")
    config = load_config(paths[index])
    plan = strategy.plan(config)
    if plan.legacy_recompute is not None:
        pytest.skip("plain-bool parallel_config.recompute")
    plans = {(lp.layer, mtp): lp for lp, mtp in strategy.all_layer_plans(plan)}
    assert sorted((s["layer"], s["mtp"]) for s in mf["layers"]) == sorted(plans)
    for state in mf["layers"]:
        lp = plans[(state["layer"], state["mtp"])]
        want, shared = expected_state(plan, config, lp, state["mtp"])
        where = f"layer {lp.layer}{' (MTP)' if state['mtp'] else ''} of {CASES[index]!r}"
        for what in ("recompute", "comm"):
            got = {p: v for p, v in state[what].items() if p not in shared}
            assert got == {p: v for p, v in want[what].items() if p not in shared}, f"{what}: {where}"
        assert set(state["cells"]) == want["cells"], f"cells: {where}"
        if lp.layer_swap is None:
            got = {p: v for p, v in state["offload"].items() if p not in shared}
            assert {p: str(v) for p, v in got.items()} == {p: str(v) for p, v in want["offload"].items()}, \
                f"offload: {where}"


@pytest.mark.parametrize("index", range(len(CASES)))
def test_verify_real_log_clean(built, index):
    d, paths, results, _, _ = built
    mf = results[index]
    if "error" in mf:
        pytest.skip("MindFormers refused this config (checked by the explain test)")
    logdir = d / f"log{index}"
    logdir.mkdir(exist_ok=True)
    (logdir / "worker_0.log").write_text(mf["log"], encoding="utf-8")
    res = verify([str(logdir)], config_path=paths[index])
    run_errors = [f for f in res.findings if f.code in RUN_RULES and f.severity == "error"]
    assert not run_errors, [f.message for f in run_errors]
    ex = explain(paths[index])
    assert {f.layer for f in ex.findings if f.code == "SW201"} == \
        {f.layer for f in res.findings if f.code == "SW201"}
    # without --config: the log's own config, read on the family its lines show; a log that names
    # no path and is not recognisably mcore says nothing about its tree (read as before), and one
    # whose paths do not tell DeepSeek-V3's dense from MoE layers leaves that split a guess
    alone = verify([str(logdir)])
    origin = alone.plan.family.origin
    if origin.startswith("read from") and "guessed" not in origin:
        run_errors = [f for f in alone.findings if f.code in RUN_RULES and f.severity == "error"]
        assert not run_errors, [f.message for f in run_errors]


@pytest.mark.parametrize("index", range(len(CRASH)))
def test_build_crash_is_sw207(built, index):
    _, _, _, crash_paths, crash_results = built
    mf = crash_results[index]
    assert "'bool' object is not callable" in mf.get("error", ""), mf.get("error")
    ex = explain(crash_paths[index])
    hits = [f for f in ex.findings if f.code == "SW207" and f.severity == "error"]
    assert hits and all(CRASH[index]["primitive"] in f.message for f in hits), [f.message for f in ex.findings]
    assert ex.exit_code == 1


def test_extracted_layouts_match_mindformers():
    """Rebuild every family from MindFormers' classes: the stored trees must not drift."""
    proc = subprocess.run([ORACLE_PY, os.path.join(ROOT, "tools", "extract_layouts.py"), "--check"],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
