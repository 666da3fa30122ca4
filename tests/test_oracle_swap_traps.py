"""Oracle tier for SW208 / SW209: what real MindFormers 2.1.0 does with swap entries it ignores or
shadows, on real models of both code paths, against explain's findings and plan.

Skipped unless ``.oracle-venv/.ready`` exists. Each case is a maintainer YAML with a small layer
count (``tests/oracle/family_cases.py:write_yaml``), built on CPU by ``tests/oracle/mf_models.py``
so that MindFormers' own ``LayerSetting`` sets the real decoder layers; the oracle reports what it
logged and the offload prefetch every primitive carries afterwards.

Established here (and stated in the rules' docs):
* SW208: with swap off (``swap_config.swap: False``; ``model_config.swap`` / ``cpu_offloading`` on
  mcore), ``layer_swap`` / ``op_swap`` mark nothing and MindFormers logs nothing about them; the
  same entries with swap on do offload (the control case), so the entries themselves are valid.
* SW209: a layer named by two ``layer_swap`` entries, or an op on a layer by two ``op_swap``
  entries, gets the *first* entry's prefetch, with no warning; swapwatch's plan keeps the first.
"""
import json
import os
import subprocess
import sys

import pytest

from swapwatch.config import load_config
from swapwatch.commands.explain import explain
from swapwatch.engine import strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE_PY = os.path.join(ROOT, ".oracle-venv", "bin", "python")
READY = os.path.join(ROOT, ".oracle-venv", ".ready")
SCRIPT = os.path.join(ROOT, "tests", "oracle", "mf_models.py")
MARK = "@@SWAPWATCH_ORACLE@@"
MCORE_FIXTURE = os.path.join(ROOT, "fixtures", "configs", "families", "qwen3_swap_entries.yaml")

sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
from family_cases import LEGACY, write_yaml  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not (os.path.exists(READY) and os.path.exists(ORACLE_PY)),
                                                     reason="no MindFormers oracle venv (.oracle-venv/.ready)")]

OFF_LEGACY = {"layer_swap": [{"backward_prefetch": 2, "layers": [0]}],
              "op_swap": [{"op_name": r"attention\.wq", "backward_prefetch": 1, "layers": [1]}]}
OFF_MCORE = {"layer_swap": [{"backward_prefetch": 2, "layers": [0]}],
             "op_swap": [{"op_name": r"mlp\.linear_fc1", "backward_prefetch": 1, "layers": [1]}]}
TWICE = [{"backward_prefetch": 2, "layers": [0, 1]}, {"backward_prefetch": 3, "layers": [1, 2]}]


def op_twice(op):
    return [{"op_name": op, "backward_prefetch": 1, "layers": [0, 1]},
            {"op_name": op, "backward_prefetch": 4, "layers": [1, 2]}]


def legacy(swap_config):
    return dict(family="qwen2_5", layers=3, recompute_config={"recompute": False}, swap_config=swap_config)


def mcore(model_config):
    return dict(family="qwen3", layers=3, recompute_config={"recompute": False}, model_config=model_config)


#: (name, case or fixture path, what it shows)
CASES = [
    ("legacy swap off", legacy(dict(OFF_LEGACY, swap=False)), "off"),
    ("legacy swap on (control)", legacy(dict(OFF_LEGACY, swap=True)), "on"),
    ("mcore swap off", mcore(dict(OFF_MCORE, swap=False)), "off"),
    ("mcore cpu_offloading off (fixture)", MCORE_FIXTURE, "off"),
    ("mcore swap on (control)", mcore(dict(OFF_MCORE, swap=True)), "on"),
    ("legacy layer_swap twice", legacy({"swap": True, "layer_swap": TWICE}), ("layer_swap", None)),
    ("legacy op_swap twice", legacy({"swap": True, "op_swap": op_twice(r"attention\.wq")}),
     ("op_swap", "attention.wq.")),
    ("mcore layer_swap twice", mcore({"swap": True, "layer_swap": TWICE}), ("layer_swap", None)),
    ("mcore op_swap twice", mcore({"cpu_offloading": True, "op_swap": op_twice(r"mlp\.linear_fc1")}),
     ("op_swap", "mlp.linear_fc1.")),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("swap_traps")
    paths = [c if isinstance(c, str) else write_yaml(c, str(d / f"case{i}.yaml")) for i, (_, c, _) in enumerate(CASES)]
    results = [None] * len(CASES)
    # one process per code path: MindFormers' use_legacy context is process-wide
    is_legacy = [not isinstance(c, str) and c["family"] in LEGACY for _, c, _ in CASES]
    for group in ([i for i, lg in enumerate(is_legacy) if lg], [i for i, lg in enumerate(is_legacy) if not lg]):
        proc = subprocess.run([ORACLE_PY, SCRIPT], input=json.dumps([paths[i] for i in group]), capture_output=True,
                              text=True, timeout=1800, cwd=ROOT)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
        assert line is not None, f"oracle failed: {proc.stderr[-3000:]}"
        for i, r in zip(group, json.loads(line[len(MARK):])):
            assert "error" not in r, (CASES[i][0], r["error"])
            results[i] = r
    return paths, results


def swap_lines(result):
    return [msg for _, msg in result["lines"] if "swap" in msg.lower()]


@pytest.mark.parametrize("index", [i for i, c in enumerate(CASES) if c[2] in ("off", "on")])
def test_sw208_swap_off_entries_do_nothing_in_mindformers(built, index):
    paths, results = built
    name, _, what = CASES[index]
    mf, path = results[index], paths[index]
    offloaded = {s["layer"]: s["offload"] for s in mf["layers"] if s["offload"]}
    sw208 = [f for f in explain(path).findings if f.code == "SW208"]
    plan = strategy.plan(load_config(path))
    planned = {lp.layer for lp in plan.layers if lp.layer_swap is not None or lp.op_swap}
    if what == "off":
        assert offloaded == {} and swap_lines(mf) == [], name                   # silent and ineffective
        assert not [lv for lv, _ in mf["lines"] if lv == "WARNING"], name
        assert len(sw208) == 1 and planned == set(), name
    else:
        assert sorted(offloaded) == [0, 1] and swap_lines(mf), name             # the same entries do work
        assert sw208 == [] and planned == {0, 1}, name


@pytest.mark.parametrize("index", [i for i, c in enumerate(CASES) if isinstance(c[2], tuple)])
def test_sw209_first_entry_wins_in_mindformers(built, index):
    paths, results = built
    name, _, (kind, prefix) = CASES[index]
    mf, path = results[index], paths[index]
    assert not [lv for lv, _ in mf["lines"] if lv == "WARNING"], name          # no warning about it
    state = next(s for s in mf["layers"] if s["layer"] == 1 and not s["mtp"])
    got = {v for p, v in state["offload"].items() if prefix is None or p.startswith(prefix)}
    (f,) = [f for f in explain(path).findings if f.code == "SW209"]
    assert got == {f.expected} and f.expected != f.actual, (name, got)        # the first entry's prefetch
    assert f.layer == 1 and f"{kind}[1]" in f.message
    lp = strategy.plan(load_config(path)).layers[1]
    assert (lp.layer_swap if kind == "layer_swap" else next(iter(lp.op_swap.values()))) == f.expected
