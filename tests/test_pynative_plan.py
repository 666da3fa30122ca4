"""``swapwatch plan`` on a PyNative (r2.x) YAML (swapwatch/pynative/planning.py, r2_writer.py): the search
fits the target with the least recompute, the written YAML differs only in its ``recompute:`` block, uses
MindFormers' spec syntax and explains clean; bad input and "nothing fits" in one line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.pynative import planning, r2_writer

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "fixtures" / "dryrun" / "pynative" / "qwen3_l4_b4_full01.yaml"
GIB = 1 << 30
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def _run(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    return r.returncode, r.stdout, r.stderr


def test_layer_specs_and_paths_are_mindformers_syntax():
    assert r2_writer.layer_specs([5, 0, 1, 2]) == ["0-2", "5"]
    assert r2_writer.layer_specs([]) == []
    assert r2_writer.path_regex("self_attention.core_attention") == r"self_attention\.core_attention"
    block = r2_writer.recompute_block([0, 1], {"mlp": [2, 3], "self_attention": []})
    assert block == "recompute:\n  mode: select\n  full_recompute_layer: ['0-1']\n  select_module:\n" \
                    "    'mlp': ['2-3']\n"
    assert r2_writer.recompute_block([0, 1, 2], {}) == "recompute:\n  mode: full\n  full_recompute_layer: ['0-2']\n"
    assert r2_writer.recompute_block([], {}) == 'recompute:\n  mode: "None"\n'


def test_only_the_recompute_block_changes():
    text = "# head\nmodel:\n  a: 1\nrecompute:\n  mode: full\n  full_recompute_layer: ['0']\n\n# kept\nswap:\n" \
           "  enable: true\n"
    out = r2_writer.write_strategy(text, 'recompute:\n  mode: "None"\n')
    assert out == "# head\nmodel:\n  a: 1\nrecompute:\n  mode: \"None\"\n\n# kept\nswap:\n  enable: true\n"
    # no block: appended at the end
    assert r2_writer.write_strategy("model:\n  a: 1", "recompute:\n  mode: full\n") == \
        "model:\n  a: 1\nrecompute:\n  mode: full\n"


@pytest.mark.parametrize("budget", [40, 30, 28, 25])
def test_plan_fits_its_target_and_spends_less_recompute_with_more_memory(budget):
    res = planning.plan_pynative(str(CASE), budget * GIB)
    assert res.fits and res.peak <= res.target == int(budget * GIB * 0.9)
    more = planning.plan_pynative(str(CASE), (budget + 4) * GIB)
    assert more.flops <= res.flops
    # the figure is the written YAML's own estimate
    text = CASE.read_text(encoding="utf-8")
    head = text.split("recompute:")[0]
    assert res.text.startswith(head)


def test_plan_writes_a_yaml_that_explains_clean(tmp_path):
    out = tmp_path / "planned.yaml"
    code, stdout, err = _run("plan", str(CASE), "--budget", "28GiB", "-o", str(out))
    assert code == 0 and f"wrote {out}" in err and "\nfits: predicted peak" in stdout
    code, stdout, err = _run("explain", str(out), "--format", "json")
    assert code in (0, 1), err
    js = json.loads(stdout)
    codes = {f["code"] for f in js["findings"]}
    assert codes <= {"SW501"}, codes        # one-card launches ignore apply_ac (the YAML asks for no parallel)
    # a second write without --force is refused, the file untouched
    before = out.read_text(encoding="utf-8")
    code, _, err = _run("plan", str(CASE), "--budget", "30GiB", "-o", str(out))
    assert code == 2 and out.read_text(encoding="utf-8") == before


def test_nothing_fits_says_the_lowest_peak_exit_1():
    code, out, err = _run("plan", str(CASE), "--budget", "10GiB")
    assert code == 1 and "nothing fits 10.00 GiB: the lowest peak is" in out and "lowest reachable peak" in out
    assert "Traceback" not in err


def test_plan_json_has_the_plan_fields():
    code, out, _ = _run("plan", str(CASE), "--budget", "30GiB", "--format", "json")
    js = json.loads(out)
    assert code == 0 and js["path"] == "pynative" and js["fits"] is True
    assert {"budget_bytes", "target_bytes", "margin", "recompute_flops"} <= set(js)


def test_a_family_without_a_table_is_refused_by_plan_in_one_line():
    code, out, err = _run("plan", str(ROOT / "fixtures" / "configs" / "pynative_dsv3_mtp.yaml"), "--budget", "60GiB")
    assert code == 2 and not out and err.count("\n") == 1 and "'deepseek_v3'" in err
