"""A PyNative (r2.x) YAML where the static path's words do not fit: ``--model`` naming no PyNative
layer paths is the option's mistake (not ``model.model_type``'s), and estimate / plan, which do not
model the PyNative path, say so at the section that makes the YAML PyNative (one line, exit 2)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYN = os.path.join(ROOT, "fixtures", "configs", "pynative_qwen3_select.yaml")
TINY = os.path.join(ROOT, "fixtures", "configs", "plan_tiny.yaml")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def _run(*args):
    """The installed console script (InputError -> one line on stderr, exit 2)."""
    res = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    return res.returncode, res.stdout + res.stderr


def _line(path, text):
    return next(i for i, ln in enumerate(open(path, encoding="utf-8"), 1) if ln.rstrip() == text)


def test_explain_model_option_unknown_on_pynative_names_the_option():
    code, out = _run("explain", PYN, "--model", "nosuch")
    assert code == 2 and len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert "--model: no PyNative layer paths known for 'nosuch'" in out and "model.model_type" not in out
    assert "known: deepseek_v3, deepseek_v3_mtp, qwen3, tinyllama" in out
    code, out = _run("explain", PYN, "--model", "qwen3")
    assert code in (0, 1) and "4 layers" in out


def test_estimate_and_plan_on_a_pynative_yaml_without_sizes_name_the_key():
    # estimate and plan size the PyNative path (swapwatch/pynative/sizing.py, planning.py): this YAML has no
    # sizes, so both name the r2.x key in one line, never the static loader's "layer count"
    for args in (("estimate", PYN), ("plan", PYN, "--budget", "1GiB")):
        code, out = _run(*args)
        assert code == 2 and len(out.strip().splitlines()) == 1 and "Traceback" not in out
        assert f"{PYN}:3: model.hidden_size: needed to estimate memory" in out
        assert "layer count" not in out
    code, out = _run("estimate", TINY)                 # a static YAML is not touched
    assert code == 0 and "tinyllama, 4 layers" in out


def test_diff_of_two_pynative_yamls_sizes_them_on_the_pynative_path(tmp_path, capsys):
    # diff's memory lines come from the same dispatch as `estimate` (codepaths: cp.size): a PyNative pair is
    # sized by pynative/sizing.py, not refused as a static YAML without model.model_config.num_layers
    from cli_helpers import fx, sw

    a = fx("configs", "pynative_qwen3_sized.yaml")
    text = open(a, encoding="utf-8").read()
    assert "full_recompute_layer: ['0']" in text
    b = tmp_path / "b.yaml"
    b.write_text(text.replace("full_recompute_layer: ['0']", "full_recompute_layer: []"), encoding="utf-8")
    code, out, err = sw("diff", a, b, capsys=capsys)
    assert code == 1 and "Traceback" not in err, (code, err)
    est_a = sw("estimate", a, "--format", "json", capsys=capsys)[1]
    est_b = sw("estimate", b, "--format", "json", capsys=capsys)[1]
    import json

    pa, pb = (json.loads(e)["stages"][0]["peak_bytes"] for e in (est_a, est_b))
    assert pb > pa                                 # full recompute dropped: more kept
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("stage 0 peak"))
    assert "num_layers" not in out and "no memory estimate" not in out
    assert f"{pa / 2**30:.1f} GiB -> {pb / 2**30:.1f} GiB" in line, line
