"""The seam between the code paths (swapwatch/engine/codepaths.py, docs/DESIGN.md §1.2), through the real CLI and the real rules.

* ``diff`` of two PyNative YAMLs compares them layer by layer through the plans' view; a PyNative YAML against a
  LayerSetting one is refused by the seam in one line, exit 2, whichever side it is on;
* a PyNative run's findings come from the rules in ``checks/`` (one implementation per code), not from
  ``pynative/`` (which writes no finding at all).
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
PYN = os.path.join(CONFIGS, "pynative_qwen3_select.yaml")
PP2 = os.path.join(CONFIGS, "pynative_pp2.yaml")
STATIC = os.path.join(CONFIGS, "swap_case1.yaml")
LOGS = os.path.join(ROOT, "fixtures", "logs", "pynative_qwen3")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def _run(*args):
    res = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    return res.returncode, res.stdout, res.stderr


def test_diff_of_two_pynative_yamls_compares_their_layers():
    code, out, err = _run("diff", PP2, PYN)
    assert code == 1 and not err, err          # they differ
    lines = out.splitlines()
    assert lines[0].endswith("; PyNative (r2.x) path") and lines[1].endswith("; PyNative (r2.x) path")
    assert "pipeline stages 2 vs 1" in out and "swap off → ON" in out
    # each layer's stage is where apply_pp puts it (pynative.config.stage_split): 0-1 on stage 0, 2-3 on 1
    row0 = next(ln for ln in lines if ln.startswith("0 "))
    assert row0.split()[1] == "0" and "prefetch → 1" in row0
    row2 = next(ln for ln in lines if ln.startswith("2 "))
    assert "✗ 1 → 0" in row2 and "?" not in out
    code, out, err = _run("diff", PYN, PYN)
    assert code == 0 and not err and "DIFFER" not in out


def test_a_pynative_static_pair_is_refused_in_one_line_either_way():
    for a, b in ((PYN, STATIC), (STATIC, PYN)):
        code, out, err = _run("diff", a, b)
        assert code == 2 and not out and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
        assert f"{PYN} is a PyNative (r2.x) config and {STATIC} a static-graph (LayerSetting) one" in err


def test_pynative_run_findings_come_from_the_rules(tmp_path):
    """A rank whose log lost a ``Set select recompute`` line: SW101 (and SW401) are the
    checks/ rules' (their own severity and words), run by checks.run_rules on the PyNative comparison."""
    from swapwatch.engine import codepaths
    from swapwatch.checks import VARIANTS, CheckContext, run_rules
    from swapwatch.parsers import read_logs

    run = tmp_path / "run"
    shutil.copytree(LOGS, run)
    log = run / "worker_1.log"
    text = log.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(text) if "Set select recompute at layer 1: mlp" in ln)
    log.write_text("".join(text[:cut] + text[cut + 1:]), encoding="utf-8")
    doc, cp = codepaths.read(PYN)
    config, plan = cp.configure(doc)
    runlog = read_logs([str(run)])
    ctx = CheckContext(plan=plan, config=config, runlog=runlog, comparison=cp.compare(plan, runlog))
    found = run_rules(ctx, needs=("run",))
    sw101 = [f for f in found if f.code == "SW101"]
    assert sw101 and all(f.rank == 1 and f.layer == 1 for f in sw101)
    assert sw101[0].severity == VARIANTS["SW101"]["run"].severity
    # the rule's one sentence, whichever path (the static path's words)
    assert sw101[0].message == "select recompute mlp is configured but the log has no line for it"
    # the ranks now differ: SW401, on rank 1 only, at the rule's one severity (as on the static path)
    assert {(f.rank, f.severity) for f in found if f.code == "SW401"} == {(1, VARIANTS["SW401"]["run"].severity)}
    assert VARIANTS["SW401"]["run"].severity == "error"
    # the CLI's verify says the same, from the same rules
    code, out, err = _run("verify", str(run), "--config", PYN, "--format", "json")
    assert code == 1 and '"SW101"' in out and '"SW401"' in out


def test_pynative_writes_no_finding():
    """Findings are the rules' (checks/): no module of swapwatch/pynative builds one."""
    pkg = os.path.join(ROOT, "swapwatch", "pynative")
    for name in sorted(os.listdir(pkg)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(pkg, name), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        built = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Finding"]
        assert not built, f"swapwatch/pynative/{name} builds findings at lines {built}"
