"""Oracle tier: real MindFormers 2.1.0 LayerSetting vs swapwatch's engine, line for line.

Skipped unless ``.oracle-venv/.ready`` exists (``make oracle`` builds it; docs/mindspore-facts.md
§6). For every case, MindFormers builds its config objects and LayerSetting, then sets every
layer of a cell tree built from ``swapwatch/layouts/tinyllama.yaml``; whatever its logger printed is
compared with :func:`swapwatch.engine.strategy.layer_setting_lines` (the Formative block, removals,
conflict warnings, and every ``Set ...`` / "got cell" line, whitespace runs included). numpy>=2
in the oracle venv prints ``np.int64(0)``; the engine reproduces numpy<2 (the real MindSpore
case), so the oracle text is normalised for that one difference. When MindFormers raises,
swapwatch must raise ConfigError.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from swapwatch.config import config_from_dicts
from swapwatch.errors import ConfigError
from swapwatch.engine import strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE_PY = os.path.join(ROOT, ".oracle-venv", "bin", "python")
READY = os.path.join(ROOT, ".oracle-venv", ".ready")
SCRIPT = os.path.join(ROOT, "tests", "oracle", "mf_layer_setting.py")
MARK = "@@SWAPWATCH_ORACLE@@"
N_RANDOM = int(os.environ.get("SWAPWATCH_ORACLE_CASES", "150"))

sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
from cases import HAND, random_cases  # noqa: E402

pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not (os.path.exists(READY) and os.path.exists(ORACLE_PY)),
                                                     reason="no MindFormers oracle venv (.oracle-venv/.ready)")]

CASES = HAND + random_cases(N_RANDOM)
NP_SCALAR = re.compile(r"np\.(?:int|uint|float)\d+\((-?[\d.]+)\)")


def run_oracle(cases):
    proc = subprocess.run([ORACLE_PY, SCRIPT], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=1800, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    assert line is not None, f"oracle failed: {proc.stderr[-2000:]}"
    return json.loads(line[len(MARK):])


@pytest.fixture(scope="module")
def oracle():
    return run_oracle(CASES)


def ours(case):
    """swapwatch's engine on one case: (lines, None) or (None, ConfigError)."""
    try:
        cfg = config_from_dicts(case.get("recompute_config"), case.get("swap_config"),
                                num_layers=case["num_layers"], pipeline_stage=case.get("pipeline_stage", 1),
                                pp_interleave_num=case.get("pp_interleave_num", 1),
                                offset=case.get("offset", 0),
                                pipeline_interleave=case.get("pipeline_interleave", False), check_rules=False)
        return strategy.layer_setting_lines(strategy.plan(cfg)), None
    except ConfigError as exc:
        return None, exc


def mf_lines(result):
    return [NP_SCALAR.sub(r"\1", msg) for _, msg in result["lines"]]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_engine_matches_mindformers(oracle, index):
    case, mf = CASES[index], oracle[index]
    lines, error = ours(case)
    if "error" in mf:
        assert error is not None, f"MindFormers raised {mf['error']!r}; swapwatch accepted {case!r}"
        return
    assert error is None, f"swapwatch rejected what MindFormers runs: {error.one_line()} ({case!r})"
    assert lines == mf_lines(mf), f"case {case!r}"
