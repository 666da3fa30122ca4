"""``swapwatch diff A B`` (issue 16.9): what changes per layer and per stage between two YAMLs'
plans, and between the strategies two real runs applied."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")
RUNS = os.path.join(ROOT, "fixtures", "plot_runs")

LLAMA32 = """\
model:
  model_config:
    num_layers: {layers}
parallel_config:
  pipeline_stage: 4
recompute_config:
  recompute: {recompute}
{extra}"""


def sw(*args):
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def yaml(tmp_path, name, recompute, layers=32, extra=""):
    p = tmp_path / name
    p.write_text(LLAMA32.format(layers=layers, recompute=recompute, extra=extra))
    return str(p)


def rows(stdout):
    return [ln for ln in stdout.splitlines() if ln[:1].isdigit()]


def test_per_stage_counts_change_shows_which_layers_go_from_full_to_none(tmp_path):
    """The user's example: recompute [6, 4, 2, 0] -> [4, 4, 2, 0] on 32 layers, 4 stages."""
    a = yaml(tmp_path, "a.yaml", "[6, 4, 2, 0]")
    b = yaml(tmp_path, "b.yaml", "[4, 4, 2, 0]")
    r = sw("diff", a, b)
    assert r.returncode == 1, r.stderr
    assert [ln.split()[:5] for ln in rows(r.stdout) if "✗" in ln] == [["4-5", "0", "✗", "yes", "→"]]
    stages = [ln for ln in r.stdout.splitlines() if ln.startswith("stage ")]
    assert stages == ["stage 0: layers 4-5 full → none", "stage 1: no change", "stage 2: no change",
                      "stage 3: no change"]
    assert r.stdout.rstrip().endswith("DIFFER: 2 of 32 layers")


def test_same_plans_exit_0(tmp_path):
    a = yaml(tmp_path, "a.yaml", "[6, 4, 2, 0]")
    b = yaml(tmp_path, "b.yaml", "[6,4,2,0]  # written differently, same plan")
    r = sw("diff", a, b)
    assert r.returncode == 0 and "SAME" in r.stdout and "✗" not in r.stdout


def test_json_names_the_changed_layers_and_columns(tmp_path):
    a = yaml(tmp_path, "a.yaml", "[6, 4, 2, 0]", extra="  select_recompute: ['feed_forward\\.mul']\n")
    b = yaml(tmp_path, "b.yaml", "[4, 4, 2, 0]", extra="  select_recompute: ['feed_forward\\.mul']\n")
    r = sw("diff", a, b, "--format", "json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    changed = [x for x in doc["layers"] if x["differs"]]
    assert [x["layer"] for x in changed] == [4, 5]
    assert changed[0]["differs"] == ["full_recompute", "select_recompute"]
    assert changed[0]["a"] == {"full_recompute": "yes"}
    assert changed[0]["b"] == {"select_recompute": "feed_forward.mul"}
    assert changed[0]["stage"] == {"a": {"stage": 0, "interleave": 0}, "b": {"stage": 0, "interleave": 0}}
    assert doc["stages"][0] == "stage 0: layers 4-5 full → select" and doc["same"] is False


def test_swap_turned_on_reads_the_same_list_as_layer_ids(tmp_path):
    """The swap trap: the same `recompute: [6, 4, 2, 0]` means layers {0, 2, 4, 6} with swap on."""
    a = yaml(tmp_path, "a.yaml", "[6, 4, 2, 0]")
    b = yaml(tmp_path, "b.yaml", "[6, 4, 2, 0]", extra="swap_config:\n  swap: True\n")
    r = sw("diff", a, b)
    assert r.returncode == 1
    assert "swap off → ON (with swap ON, recompute keys are layer ids" in r.stdout
    doc = json.loads(sw("diff", a, b, "--format", "json").stdout)
    full_b = [x["layer"] for x in doc["layers"] if x["b"].get("full_recompute")]
    assert full_b == [0, 2, 4, 6]


def test_another_layer_count_is_said_once(tmp_path):
    a = yaml(tmp_path, "a.yaml", "True", layers=32)
    b = yaml(tmp_path, "b.yaml", "True", layers=4)
    r = sw("diff", a, b)
    assert r.returncode == 1
    assert "not the same model or run shape: layers 32 vs 4" in r.stdout


def test_two_real_runs_compare_what_each_applied():
    r = sw("diff", os.path.join(RUNS, "select"), os.path.join(RUNS, "full"))
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("A: " + os.path.join(RUNS, "select") + " (run, rank 0: 4 layers")
    assert rows(r.stdout) == ["0-3    0      ✗ - → yes  ✗ attention.flash_attention → -"]
    assert "stage 0: layers 0-3 select → full" in r.stdout
    # the same strategy on 2 ranks under msrun: the same per-layer strategy, the same shape
    same = sw("diff", os.path.join(RUNS, "select"), os.path.join(RUNS, "select-2ranks"))
    assert same.returncode == 0 and "SAME" in same.stdout, same.stdout


def test_config_against_a_run_is_bad_input_pointing_to_verify(tmp_path):
    a = yaml(tmp_path, "a.yaml", "True", layers=4)
    r = sw("diff", a, os.path.join(RUNS, "full"))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "swapwatch verify" in r.stderr


def test_missing_path_and_bad_yaml_are_one_line_exit_2(tmp_path):
    r = sw("diff", "/no/such.yaml", yaml(tmp_path, "a.yaml", "True"))
    assert r.returncode == 2 and "/no/such.yaml: no such file or directory" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("recompute_config:\n  recompte: True\n")
    r = sw("diff", str(bad), yaml(tmp_path, "a.yaml", "True"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
