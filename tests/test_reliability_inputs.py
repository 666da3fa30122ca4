"""No input reaches exit 3, a hang or the machine's memory; bad input is exit 2 with one line
(issue 22 items 7-17; docs/reliability.md).

Every test is one shortfall of the reliability review, run through the real CLI in a subprocess
whose address space is capped (RLIMIT_AS), so a regression fails as a MemoryError / exit 3 / a
timeout instead of taking the shared machine with it.
"""
import gzip
import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swapwatch.config import MAX_ALIAS_VALUES, parse_yaml
from swapwatch.commands.explain import explain
from swapwatch.errors import InputError
from swapwatch.model.patterns import MAX_EXPANSION, PatternError, check_size, expansion, validate

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "fixtures" / "configs"
LOGS = ROOT / "fixtures" / "logs"
CONFLICT = CONFIGS / "conflict.yaml"
PY = sys.executable
#: address space of each command below (virtual: numpy and MindSpore map much more than they use;
#: one BLAS thread keeps that small on many-core machines): the failures took 2.7-24 GB resident
CAP = 3 << 30
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _cap():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def sw(*args, stdin=None, stdout=subprocess.PIPE, timeout=120, **kw):
    return subprocess.run([PY, "-m", "swapwatch.cli", *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                          stdin=stdin, timeout=timeout, preexec_fn=_cap, cwd=ROOT, text=True, env=ENV, **kw)


def one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("swapwatch: error: "), r.stderr[-500:]
    for w in words:
        assert w in r.stderr, r.stderr


# ---- item 7: a pattern cannot take the machine at compile time -------------------------------------

@pytest.mark.parametrize("pattern", ["a{1000000000}", "a{10000000}", "(a{1000}){1000}", "x{4294967294}"])
def test_a_repetition_bomb_in_a_config_is_one_line(tmp_path, pattern):
    f = tmp_path / "rep.yaml"
    f.write_text(f"recompute_config:\n  select_recompute:\n    '{pattern}': True\n")
    r = sw("explain", f, "--num-layers", 4)
    one_line_exit_2(r, "rep.yaml:3", "too large to compile")


def test_a_repetition_bomb_in_a_logged_config_is_one_line(tmp_path):
    log = tmp_path / "r.log"
    text = (LOGS / "swap_case2.log").read_text()
    assert "'select_recompute': False," in text
    log.write_text(text.replace("'select_recompute': False,", "'select_recompute': {'a{1000000000}': [1]},"))
    one_line_exit_2(sw("verify", log), "too large to compile")


def test_a_repetition_bomb_in_a_pynative_config_is_one_line(tmp_path):
    f = tmp_path / "pyn.yaml"
    text = (CONFIGS / "pynative_qwen3_select.yaml").read_text()
    assert "    'nothing': ['1']\n" in text
    f.write_text(text.replace("    'nothing': ['1']\n", "    'a{1000000000}': ['1']\n"))
    one_line_exit_2(sw("explain", f), "pyn.yaml", "select_module.a{1000000000}", "too large to compile")


def test_pattern_expansion_bound():
    assert expansion("feed_forward\\.w1") < 20 and expansion("a{3}") == 3 and expansion("(ab){2}c") == 5
    assert expansion("((a{10}){10}){10}") == 1000 and expansion("[a-z]{2}\\p{L}{3}") == 5
    assert validate("a{1000000000}") and "too large" in validate("a{1000000000}")
    assert validate(".*attention.*") is None
    check_size("a{%d}" % MAX_EXPANSION)
    with pytest.raises(PatternError):
        check_size("a{%d}" % (MAX_EXPANSION + 1))


# ---- item 8: a YAML alias bomb is refused in one line, fast, for every command --------------------

def _bomb(tmp_path, levels=9):
    lines = ["a0: &a0 [" + ",".join(["x"] * 10) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    f = tmp_path / "bomb.yaml"
    f.write_text(CONFLICT.read_text() + "\n".join(lines) + "\n")
    return f


@pytest.mark.parametrize("cmd", [
    ["explain", "{bomb}"], ["estimate", "{bomb}"], ["diff", "{bomb}", str(CONFLICT)],
    ["plan", "{bomb}", "--budget", "58GiB", "-o", "{out}"],
    ["verify", str(LOGS / "msrun_2ranks"), "--config", "{bomb}"]])
def test_an_alias_bomb_is_one_line_for_every_command(tmp_path, cmd):
    bomb = _bomb(tmp_path)
    args = [a.format(bomb=bomb, out=tmp_path / "out.yaml") for a in cmd]
    one_line_exit_2(sw(*args, timeout=60), "alias bomb")
    assert not (tmp_path / "out.yaml").exists()


def test_aliases_share_one_object_and_keep_the_anchors_lines():
    text = "base: &b\n  recompute: [1, 0]\n  select_recompute: False\nrecompute_config: *b\nother: *b\n"
    data, lines = parse_yaml(text)
    assert data["recompute_config"] is data["base"] is data["other"]       # as PyYAML's SafeLoader
    assert lines["recompute_config"] == 4 and lines["base.recompute"] == 2
    assert "recompute_config.recompute" not in lines                       # line marks are not expanded


def test_aliases_below_the_bound_load():
    # 10 x 10 x 10 x 10 = 10,000 values through aliases: well below the bound, loads as PyYAML does
    text = "a0: &a0 [" + ",".join(["1"] * 10) + "]\n" + "".join(
        f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 4))
    data, _ = parse_yaml(text)
    assert data["a3"][9][9][9][9] == 1 and MAX_ALIAS_VALUES > 10 ** 4


def test_a_recursive_alias_is_one_line():
    with pytest.raises(InputError, match="contains it"):
        parse_yaml("x: &x [1, *x]\n")


# ---- item 10: a device or an endless input is refused -------------------------------------------

@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_config_is_refused_at_once(dev):
    one_line_exit_2(sw("explain", dev, timeout=30), "not a regular file or a pipe")


def test_an_endless_pipe_as_config_is_bounded():
    with subprocess.Popen(["yes", "a: 1"], stdout=subprocess.PIPE) as yes:
        r = sw("explain", "/dev/stdin", stdin=yes.stdout, timeout=60)
        yes.kill()
    one_line_exit_2(r, "larger than 16 MiB")


# ---- item 11: what used to be exit 3 -------------------------------------------------------------

def test_a_5000_digit_integer_in_a_yaml_is_exit_2_with_its_line(tmp_path):
    f = tmp_path / "h.yaml"
    text = CONFLICT.read_text()
    assert "num_layers: 4" in text
    f.write_text(text.replace("num_layers: 4", "num_layers: " + "9" * 5000))
    one_line_exit_2(sw("explain", f), "h.yaml:", "num_layers", "5,000 characters")


def test_a_310_digit_batch_size_is_exit_2(tmp_path):
    f = tmp_path / "b.yaml"
    text = (CONFIGS / "plan_tiny.yaml").read_text()
    assert "batch_size: 2" in text
    f.write_text(text.replace("batch_size: 2", "batch_size: " + "9" * 310))
    one_line_exit_2(sw("estimate", f), "runner_config.batch_size", "too large")


def test_a_309_digit_budget_is_exit_2(tmp_path):
    one_line_exit_2(sw("plan", CONFIGS / "plan_qwen64.yaml", "--budget", "9" * 309, "-o", tmp_path / "p.yaml"),
                    "--budget")


def test_a_30000_deep_offset_is_exit_2():
    one_line_exit_2(sw("explain", CONFLICT, "--offset", "[" * 30000 + "]" * 30000), "--offset")


def test_a_symlink_loop_beside_a_log_is_skipped(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(LOGS / "swap_case2.log", d / "worker_0.log")
    os.symlink("b", d / "a")
    os.symlink("a", d / "b")
    r = sw("verify", d, "--config", CONFIGS / "swap_case2.yaml")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stderr


def test_a_5000_digit_layer_in_a_log_is_no_internal_error(tmp_path):
    log = tmp_path / "l.log"
    text = (LOGS / "swap_case2.log").read_text()
    assert "Set layer swap at layer 3" in text
    log.write_text(text.replace("Set layer swap at layer 3", "Set layer swap at layer " + "9" * 5000))
    r = sw("verify", log)
    assert r.returncode in (0, 1, 2) and "internal error" not in r.stderr, r.stderr


def test_stdout_on_a_full_disk_is_exit_2():
    with open("/dev/full", "w") as full:
        r = sw("explain", CONFLICT, stdout=full)
    one_line_exit_2(r, "No space left on device")


# ---- item 12: every input is read once -----------------------------------------------------------

def test_a_config_through_a_pipe_reads_as_the_file():
    want = sw("explain", CONFLICT)
    with open(CONFLICT, "rb") as fh:
        got = sw("explain", "/dev/stdin", stdin=fh)            # a regular file behind stdin
    cat = subprocess.Popen(["cat", str(CONFLICT)], stdout=subprocess.PIPE)
    piped = sw("explain", "/dev/stdin", stdin=cat.stdout)
    cat.wait()
    assert want.returncode == got.returncode == piped.returncode == 1, piped.stderr
    assert piped.stdout.replace("/dev/stdin", str(CONFLICT)) == want.stdout


def test_diff_of_a_piped_config_is_a_config():
    cat = subprocess.Popen(["cat", str(CONFLICT)], stdout=subprocess.PIPE)
    r = sw("diff", "/dev/stdin", CONFIGS / "swap_case1.yaml", stdin=cat.stdout)
    cat.wait()
    assert r.returncode in (0, 1) and "a run" not in r.stdout + r.stderr, r.stdout + r.stderr


# ---- item 13: duplicate keys: the last one wins, its line is cited (plan too) ---------------------

def test_a_duplicate_key_error_cites_the_line_of_the_value_used(tmp_path):
    f = tmp_path / "dup.yaml"
    text = CONFLICT.read_text()
    assert "  recompute: [0, 1]\n" in text
    f.write_text(text.replace("  recompute: [0, 1]\n", "  recompute: [0, 1]\n  recompute: \"yes\"\n"))
    line = f.read_text().splitlines().index('  recompute: "yes"') + 1
    one_line_exit_2(sw("explain", f), f"dup.yaml:{line}:", "'yes'")


def test_plan_accepts_a_duplicate_key_and_keeps_the_last(tmp_path):
    f = tmp_path / "pd.yaml"
    f.write_text((CONFIGS / "plan_tiny.yaml").read_text() + "seed: 1\nseed: 2\n")
    r = sw("plan", f, "--budget", "60MiB", "-o", tmp_path / "po.yaml")
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "po.yaml").read_text()
    # only the strategy's lines change (the user's other lines stay as written), and the copy reads
    # back as MindFormers reads it: the last one wins
    assert out.endswith("seed: 1\nseed: 2\n") and yaml.safe_load(out)["seed"] == 2


def test_plan_writes_the_strategy_into_the_duplicate_that_wins(tmp_path):
    """A second recompute_config section (last wins, as in MindFormers' loader): plan's edit lands in
    that one and the first stays as written, so the copy means what plan says it does."""
    base = (CONFIGS / "plan_tiny.yaml").read_text()
    f = tmp_path / "pd.yaml"
    f.write_text(base + "recompute_config:\n  recompute: True\n  select_recompute: False\n")
    r = sw("plan", f, "--budget", "60MiB", "-o", tmp_path / "po.yaml")
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "po.yaml").read_text()
    assert out.startswith(base) and out != f.read_text()
    planned = yaml.safe_load(out)["recompute_config"]
    assert planned != {"recompute": True, "select_recompute": False}
    assert explain(str(tmp_path / "po.yaml")).findings == []


# ---- item 14: control characters are escaped -----------------------------------------------------

def test_control_characters_in_an_error_line_are_escaped(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text('recompute_config:\n  "x\\e]0;owned\\a\\r": 1\n')
    r = sw("explain", f, "--num-layers", 4)
    one_line_exit_2(r, "x\\x1b]0;owned\\x07\\x0d")
    assert not any(c in r.stderr for c in "\x1b\x07\r")


# ---- item 15: a strategy line behind a progress bar's CR or NULs is found -------------------------

@pytest.mark.parametrize("junk", [b" 45%|###  | 9/20\r", b"\0" * 4096, b"\0", b"\xff\xfe\0"])
def test_a_strategy_line_behind_junk_is_verified(tmp_path, junk):
    lines = (LOGS / "swap_case2.log").read_bytes().splitlines(True)
    assert b"Set layer swap" in lines[17] or b"Set " in lines[17]
    log = tmp_path / "cr.log"
    log.write_bytes(b"".join(lines[:17]) + junk + b"".join(lines[17:]))
    r = sw("verify", log, "--config", CONFIGS / "swap_case2.yaml")
    assert r.returncode == 0 and "PASS" in r.stdout and "truncated" not in r.stdout, r.stdout


# ---- item 16: one truncated .gz rank is that rank's finding, not the run's exit 2 -----------------

def test_a_truncated_gz_rank_is_reported_on_its_own(tmp_path):
    g = tmp_path / "g"
    g.mkdir()
    shutil.copy(LOGS / "msrun_2ranks" / "worker_0.log", g)
    whole = gzip.compress((LOGS / "msrun_2ranks" / "worker_1.log").read_bytes())
    (g / "worker_1.log.gz").write_bytes(whole[:len(whole) // 2])
    r = sw("verify", g, "--config", CONFIGS / "swap_case3.yaml")
    assert r.returncode == 1, r.stderr
    assert "SW106" in r.stdout and "rank 1" in r.stdout and "2 rank(s)" in r.stdout


# ---- item 17: -o honours the umask, keeps a mode, never names an input ----------------------------

def test_o_files_follow_the_umask_and_force_keeps_the_mode(tmp_path):
    out = tmp_path / "v.md"
    args = ["verify", LOGS / "swap_case2.log", "--config", CONFIGS / "swap_case2.yaml", "--format", "markdown",
            "-o", out]
    old = os.umask(0o022)
    try:
        assert sw(*args).returncode == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        out.chmod(0o640)
        assert sw(*args, "--force").returncode == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_o_naming_an_input_is_refused_even_with_force(tmp_path):
    log = tmp_path / "in.log"
    shutil.copy(LOGS / "swap_case2.log", log)
    before = log.read_bytes()
    one_line_exit_2(sw("verify", log, "--config", CONFIGS / "swap_case2.yaml", "-o", log, "--force"),
                    "one of this command's inputs")
    assert log.read_bytes() == before
    cfg = tmp_path / "pin.yaml"
    shutil.copy(CONFIGS / "plan_tiny.yaml", cfg)
    os.symlink("pin.yaml", tmp_path / "link.yaml")
    one_line_exit_2(sw("plan", cfg, "--budget", "60MiB", "-o", tmp_path / "link.yaml", "--force"),
                    "one of this command's inputs")
    assert cfg.read_bytes() == (CONFIGS / "plan_tiny.yaml").read_bytes()


def test_o_naming_a_log_found_in_a_dir_or_through_a_link_is_refused(tmp_path):
    # the discovery remembers each log by the stat it already took (a file that is no link) or by
    # what the link names: -o can name neither the log in the directory nor the link's target
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(LOGS / "swap_case2.log", job / "worker_0.log")
    target = tmp_path / "real.log"
    shutil.copy(LOGS / "swap_case2.log", target)
    os.symlink(target, tmp_path / "via_link.log")
    cfg = CONFIGS / "swap_case2.yaml"
    one_line_exit_2(sw("verify", job, "--config", cfg, "-o", job / "worker_0.log", "--force"),
                    "one of this command's inputs")
    one_line_exit_2(sw("verify", tmp_path / "via_link.log", "--config", cfg, "-o", target, "--force"),
                    "one of this command's inputs")
    assert (job / "worker_0.log").read_bytes() == target.read_bytes() == (LOGS / "swap_case2.log").read_bytes()


# ---- (review note on Y7) a Python tag on a collection is refused as MindFormers' SafeLoader does -----

@pytest.mark.parametrize("value", ["!!python/tuple [1, 2]", "!!python/object/apply:os.system ['touch {marker}']"])
def test_a_python_tag_on_a_collection_is_refused_with_its_line(tmp_path, value):
    marker = tmp_path / "PWNED"
    f = tmp_path / "t.yaml"
    f.write_text("recompute_config:\n  recompute: " + value.format(marker=marker) + "\n")
    one_line_exit_2(sw("explain", f, "--num-layers", 4), "t.yaml:2", "could not determine a constructor")
    assert not marker.exists()


def test_run_with_a_piped_config_keeps_the_bytes(tmp_path):
    """run reads --config for its sha256, preflight, environment and copy: a pipe yields once."""
    yaml_bytes = (CONFIGS / "swap_case2.yaml").read_bytes()
    cat = subprocess.Popen(["cat", str(CONFIGS / "swap_case2.yaml")], stdout=subprocess.PIPE)
    r = sw("run", "--no-verify", "--config", "/dev/stdin", "--run-dir", tmp_path / "r", "--", "true",
           stdin=cat.stdout)
    cat.wait()
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r" / "config.yaml").read_bytes() == yaml_bytes
