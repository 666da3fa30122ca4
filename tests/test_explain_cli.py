"""``swapwatch explain`` end to end: exit codes, formats, one-line errors (never a traceback)."""
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from swapwatch.engine import strategy
from swapwatch.cli import cli
from swapwatch.config import load_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def run(*args):
    """The installed console script (main(): InputError -> one line, exit 2)."""
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def cfg(name):
    return os.path.join(CONFIGS, name)


@pytest.mark.parametrize("name", ["swap_case1.yaml", "swap_case2.yaml", "swap_case3.yaml", "swap_case4.yaml",
                                  "recompute_48l.yaml", "select_recompute.yaml"])
def test_clean_examples_exit_0(name):
    r = CliRunner().invoke(cli, ["explain", cfg(name)], standalone_mode=False)
    assert r.exception is None, r.output
    assert r.return_value == 0
    assert "Findings" in r.output


def test_conflict_exit_1_and_marks():
    r = run("explain", "fixtures/configs/conflict.yaml")
    assert r.returncode == 1, r.stderr
    row0 = next(ln for ln in r.stdout.splitlines() if ln.startswith("0 "))
    row2 = next(ln for ln in r.stdout.splitlines() if ln.startswith("2 "))
    assert row0.split()[3:] == ["-", "!p=2", "-"] and row2.endswith("!feed_forward.w1 p=1")
    assert "SW201 error" in r.stdout and "conflict.yaml:" in r.stdout


def test_swap_case3_table():
    r = run("explain", "fixtures/configs/swap_case3.yaml")
    assert r.returncode == 0
    rows = [ln.split(None, 3) for ln in r.stdout.splitlines() if ln[:1].isdigit()]
    assert [row[0] for row in rows] == ["0", "1-2", "3"]            # layers 1 and 2 fold
    assert [row[3] for row in rows] == ["attention p=20", "attention p=20, feed_forward p=15",
                                        "attention p=10"]
    r = run("explain", "fixtures/configs/swap_case3.yaml", "--all-layers")
    rows = [ln.split(None, 3) for ln in r.stdout.splitlines() if ln[:1].isdigit()]
    assert [row[0] for row in rows] == ["0", "1", "2", "3"]


def test_json_format_matches_plan():
    r = run("explain", "fixtures/configs/conflict.yaml", "--format", "json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["swap"] is True and doc["num_layers"] == 4
    assert doc["layers"][0]["swap_overridden"] == ["layer_swap"]
    assert [f["code"] for f in doc["findings"]] == ["SW201", "SW201"]
    assert doc["findings"][0]["layer"] == 0 and doc["findings"][0]["severity"] == "error"


def test_formative_format_is_the_layer_setting_block():
    r = run("explain", "fixtures/configs/recompute_48l.yaml", "--format", "formative")
    assert r.returncode == 0
    expected = strategy.layer_setting_lines(strategy.plan(load_config(cfg("recompute_48l.yaml"))))
    assert r.stdout.splitlines() == expected
    assert "Formative select_recompute: {'feed_forward\\\\.w1\\\\.activation\\\\.silu'" in r.stdout
    assert "Set full recompute at layer 24" in r.stdout


def test_overrides_for_a_fragment(tmp_path):
    p = tmp_path / "frag.yaml"
    p.write_text("recompute_config:\n  recompute: [1, 1]\n")
    r = run("explain", str(p), "--num-layers", "10", "--pipeline-stage", "2", "--offset", "[1, -1]",
            "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [lp["stage"] for lp in doc["layers"]] == [0] * 6 + [1] * 4
    assert [lp["layer"] for lp in doc["layers"] if lp["full_recompute"]] == [0, 6]


def test_env_option_enables_sw302():
    r = run("explain", "fixtures/configs/swap_case1.yaml", "--env", "PATH=/bin")
    assert r.returncode == 1 and "SW302" in r.stdout
    r = run("explain", "fixtures/configs/swap_case1.yaml", "--env", "ENABLE_LAZY_INLINE_NO_PIPELINE=1")
    assert r.returncode == 0 and "SW302" not in r.stdout
    r = run("explain", "fixtures/configs/swap_case1.yaml")      # unknown env: said, not silently passed
    assert r.returncode == 0 and r.stdout.rstrip().splitlines()[-1].startswith("not checked (needs --env): SW302")
    r = run("explain", "fixtures/configs/recompute_48l.yaml")   # swap off: nothing to say
    assert "SW302" not in r.stdout


@pytest.mark.parametrize("text, args, expected", [
    ("recompute_config:\n  recompute: [1\n", [], "bad.yaml:3: YAML syntax error"),
    ("model: {model_config: {num_layers: 4}}\nrecompute_config:\n  select_recompte: True\n", [],
     "bad.yaml:3: recompute_config.select_recompte: unknown key; did you mean 'select_recompute'?"),
    ("model: {model_config: {num_layers: [4]}}\n", [], "bad.yaml:1: model.model_config.num_layers: expected a "
                                                       "positive integer"),
    ("model: {model_config: {num_layers: 10}}\nparallel_config: {pipeline_stage: 4}\n", [],
     "model.model_config.offset: the offsets add up to 0"),
    ("recompute_config: {recompute: True}\n", [], "the layer count is unknown"),
    ("recompute_config: {recompute: True}\n", ["--offset", "{"], "--offset must be JSON"),
    ("recompute_config: {recompute: True}\n", ["--num-layers", "-3"], "--num-layers: expected a positive integer"),
    ("recompute_config: {recompute: True}\n", ["--env", "NOEQUALS"], "--env 'NOEQUALS': expected KEY=VALUE"),
    ("recompute_config: {recompute: True}\n", ["--model", "gpt"], "unknown model family 'gpt'"),
    ("\x00\x01", [], "bad.yaml"),
])
def test_bad_input_one_line_exit_2(tmp_path, text, args, expected):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    r = run("explain", str(p), *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    err = r.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("swapwatch: error: ") and expected in err, err


def test_missing_file_and_bad_format(tmp_path):
    r = run("explain", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "cannot read config" in r.stderr and "Traceback" not in r.stderr
    r = run("explain", "fixtures/configs/swap_case1.yaml", "--format", "xml")
    assert r.returncode == 2 and "Traceback" not in r.stderr


# ---- issue 11.1 / 16.10: fold like verify, one vocabulary, a per-stage summary ---------------

def _yaml_64(tmp_path):
    p = tmp_path / "llama64.yaml"
    p.write_text("model:\n  model_config:\n    num_layers: 64\nparallel_config:\n  pipeline_stage: 4\n"
                 "recompute_config:\n  recompute: [6, 4, 2, 0]\n  select_recompute: ['feed_forward\\.mul']\n")
    return p


def test_64_layer_table_folds_and_all_layers_expands(tmp_path):
    p = _yaml_64(tmp_path)
    r = run("explain", str(p))
    assert r.returncode == 0, r.stderr
    rows = [ln.split()[:2] for ln in r.stdout.splitlines() if ln[:1].isdigit()]
    assert rows == [["0-5", "0"], ["6-15", "0"], ["16-19", "1"], ["20-31", "1"], ["32-33", "2"],
                    ["34-47", "2"], ["48-63", "3"]]
    summary = [ln for ln in r.stdout.splitlines() if ln.startswith("stage ")]
    assert summary[0] == "stage 0: layers 0-15 (16), full 6, select 10, comm 0, swap 0"
    assert summary[3] == "stage 3: layers 48-63 (16), full 0, select 16, comm 0, swap 0"
    full = run("explain", str(p), "--all-layers")
    assert [ln.split()[0] for ln in full.stdout.splitlines() if ln[:1].isdigit()] == [str(i) for i in range(64)]


def test_explain_and_verify_tables_share_one_vocabulary():
    """The same plan read before launch (explain) and after (verify, clean run) prints the same
    per-layer rows: column names, stage label, '-' for nothing, op paths rather than regexes."""
    from swapwatch.commands.verify import verify

    ex = run("explain", "fixtures/configs/recompute_48l.yaml").stdout.splitlines()
    ve = subprocess.run([EXE, "verify", "fixtures/logs/recompute_48l.log", "--config",
                         "fixtures/configs/recompute_48l.yaml"], capture_output=True, text=True,
                        cwd=ROOT, timeout=120).stdout.splitlines()

    def table(lines):
        start = next(i for i, ln in enumerate(lines) if ln.startswith("layer "))
        end = next(i for i, ln in enumerate(lines) if ln.startswith("stage 4:"))
        return lines[start:end + 1]

    assert table(ex) == table(ve)
    assert table(ex)[0].split("  ")[:3] == ["layer", "stage", "full"]
    assert "0 v1" in table(ex)[9] and "·" not in "\n".join(ve)
    assert verify  # imported: the library path is the one the CLI uses


def test_findings_end_with_where_the_fix_is():
    r = run("explain", "fixtures/configs/conflict.yaml")
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("  SW201 error"))
    assert header.endswith("→ swapwatch rules SW201")
