"""Issue 36, bad input and bounds on totals (the 2026-11-28 reliability review and the newcomer's
trial): every shortfall run through the real CLI in a subprocess whose address space is capped
(RLIMIT_AS), so a regression is a failed assertion, never the shared machine's memory.

The run-transparency half of the issue (stdin, stdout/stderr apart, every signal) is in
tests/test_run_transparency.py; the speed bounds are benchmarks (bench/) plus the scale tests here
that assert memory and a work count, never a time.
"""
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch import json_input
from swapwatch.errors import InputError, escape_controls

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "fixtures" / "configs"
LOGS = ROOT / "fixtures" / "logs"
RUNS = ROOT / "fixtures" / "plot_runs"
PY = sys.executable
CAP = 3 << 30
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _cap():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def sw(*args, timeout=120, **kw):
    return subprocess.run([PY, "-m", "swapwatch.cli", *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, preexec_fn=_cap, cwd=ROOT, text=True, env=ENV,
                          **kw)


def one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("swapwatch: error: "), r.stderr[-800:]
    for w in words:
        assert w in r.stderr, r.stderr


# ---- item 9 / 13: a directory given as the config, for every command that takes one ---------------

#: every command (and option) that takes a config path; ``{d}`` is the directory, ``{o}`` an output
DIR_AS_CONFIG = {
    "explain": ["explain", "{d}"],
    "estimate": ["estimate", "{d}"],
    "plan": ["plan", "{d}", "--budget", "58GiB", "-o", "{o}"],
    "verify --config": ["verify", str(LOGS / "swap_case2.log"), "--config", "{d}"],
    "report --config": ["report", str(RUNS / "full"), "--config", "{d}", "-o", "{o}"],
    "plot estimate": ["plot", "estimate", "{d}", "-o", "{o}"],
    "plot strategy --config": ["plot", "strategy", str(LOGS / "swap_case2.log"), "--config", "{d}", "-o", "{o}"],
    "diff (config B)": ["diff", str(CONFIGS / "swap_case2.yaml"), "{d}"],
    "events (a config dir is no log dir)": ["events", "{d}"],
}


@pytest.mark.parametrize("name", sorted(DIR_AS_CONFIG))
def test_a_directory_as_the_config_is_one_line(tmp_path, name):
    d = tmp_path / "adir.yaml"
    d.mkdir()
    args = [a.format(d=d, o=tmp_path / "out.png") for a in DIR_AS_CONFIG[name]]
    r = sw(*args, timeout=60)
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr
    assert r.stderr.startswith("swapwatch: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "no such file" not in r.stderr            # it exists: say what it is (report said "no such file")
    if name not in ("diff (config B)", "events (a config dir is no log dir)"):
        assert "Is a directory" in r.stderr, r.stderr
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("cmd", [["run", "--config", "{d}", "--", "true"], ["tune", "{d}", "--budget", "58GiB", "--",
                                                                          "true"]])
def test_a_directory_as_the_config_of_run_and_tune_is_refused(tmp_path, cmd):
    d = tmp_path / "adir.yaml"
    d.mkdir()
    r = sw(*[a.format(d=d) for a in cmd], timeout=60)
    assert r.returncode == 2 and "is a directory" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists()


# ---- item 6: every JSON a run dir or --calibrate reads -----------------------------------------------

def _run_dir(tmp_path, run_json=None, link=None):
    rd = tmp_path / "rd"
    rd.mkdir()
    (rd / "console.log").write_bytes((LOGS / "swap_case2.log").read_bytes())
    if link is not None:
        os.symlink(link, rd / "run.json")
    else:
        (rd / "run.json").write_text(run_json)
    return rd


#: the commands that read a run dir's run.json (``{rd}`` the dir, ``{o}`` an output file)
RUN_DIR_READERS = {
    "verify": ["verify", "{rd}"],
    "events": ["events", "{rd}"],
    "report": ["report", "{rd}", "-o", "{o}.html"],
    "diff": ["diff", "{rd}", str(RUNS / "full")],
    "plot memory": ["plot", "memory", "{rd}", "-o", "{o}.png"],
    "estimate --calibrate": ["estimate", str(CONFIGS / "plan_tiny.yaml"), "--calibrate", "{rd}"],
}
BAD_RUN_JSON = {
    "deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    "deep object": ('{"a":' * 50_000 + "1" + "}" * 50_000, "nested deeper than 64 levels"),
    "not an object": ("[]", "not a JSON object"),
    "wrong types": (json.dumps({"exit_code": {"x": 1}, "command": ["a"], "start": "2026-01-01"}),
                    "exit_code: run.json: expected an int or null, got an object"),
    "ranks not ints": (json.dumps({"ranks": [0, "1"]}), "ranks: run.json: expected a list of ints or null"),
    "config path a list": (json.dumps({"config": {"path": [1]}}), "config.path: run.json: expected a string"),
    "not UTF-8": (b"\xff\xfe{}".decode("latin-1"), ""),
    "5000 digits": ('{"pid": ' + "9" * 5000 + "}", "cannot read run.json"),
}


@pytest.mark.parametrize("bad", sorted(BAD_RUN_JSON))
@pytest.mark.parametrize("cmd", sorted(RUN_DIR_READERS))
def test_a_bad_run_json_is_one_line_for_every_reader(tmp_path, cmd, bad):
    text, words = BAD_RUN_JSON[bad]
    rd = _run_dir(tmp_path, text.encode("latin-1").decode("utf-8", "surrogateescape") if bad != "not UTF-8" else "")
    if bad == "not UTF-8":
        (rd / "run.json").write_bytes(b"\xff\xfe{}")
    args = [a.format(rd=rd, o=tmp_path / "out") for a in RUN_DIR_READERS[cmd]]
    one_line_exit_2(sw(*args, timeout=90), "run.json", words)


@pytest.mark.parametrize("cmd", sorted(RUN_DIR_READERS))
def test_a_run_json_that_is_a_device_is_refused_at_once(tmp_path, cmd):
    """N42a: ``run.json -> /dev/zero`` took 3.8 GB then exit 3; a device is refused before a read."""
    rd = _run_dir(tmp_path, link="/dev/zero")
    args = [a.format(rd=rd, o=tmp_path / "out") for a in RUN_DIR_READERS[cmd]]
    one_line_exit_2(sw(*args, timeout=60), "run.json", "a device has no end")


def test_a_huge_run_json_is_refused_at_its_bound(tmp_path):
    rd = _run_dir(tmp_path, '{"notes": ["' + "x" * (json_input.MAX_JSON_BYTES + 10) + '"]}')
    one_line_exit_2(sw("verify", rd, timeout=60), "run.json", "larger than 16 MiB")


@pytest.mark.parametrize("text,words", [("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
                                        ('{"yaml": "x.yaml", "stages": [{"stage": 0, "used_peak_mib": 1e999}]}',
                                         "not a DryRun record"),
                                        ('{"yaml": {}, "stages": 3}', "not a DryRun record")])
@pytest.mark.parametrize("cmd", [["estimate", str(CONFIGS / "plan_qwen64.yaml")],
                                 ["plan", str(CONFIGS / "plan_qwen64.yaml"), "--budget", "58GiB"]])
def test_a_bad_dryrun_record_is_one_line(tmp_path, cmd, text, words):
    """N40b: ``--calibrate deep.json`` was exit 3 RecursionError in estimate and plan."""
    f = tmp_path / "deep.json"
    f.write_text(text)
    one_line_exit_2(sw(*cmd, "--calibrate", f, timeout=60), words)


def test_json_depth_is_counted_without_recursion():
    deep: list = []
    cur = deep
    for _ in range(200_000):              # far past the interpreter's recursion limit
        cur.append([])
        cur = cur[0]
    assert json_input.depth(deep) == json_input.MAX_DEPTH + 1      # stops counting past the bound
    assert json_input.depth({"a": [1, {"b": 2}]}) == 3 and json_input.depth(5) == 0


def test_a_good_run_json_reads_as_it_was_written(tmp_path):
    info = json.loads((RUNS / "full" / "run.json").read_text())
    assert json_input.read_run_json(str(RUNS / "full")) == info
    assert json_input.read_run_json(str(tmp_path)) is None          # no run.json: not a run dir
    with pytest.raises(InputError, match="run.json: expected a list of strings"):
        json_input.check_run_json({"command": "python x.py"}, "run.json")


# ---- item 4: rank ranges stay ranges ----------------------------------------------------------------

@pytest.mark.parametrize("cmd", [["events", str(RUNS / "full"), "--rank", "0-1000000000000"],
                                 ["events", str(RUNS / "full"), "--rank", "5-50000000000,0"],
                                 ["plot", "memory", str(RUNS / "full"), "--ranks", "0-1000000000000", "-o", "{o}"]])
def test_a_huge_rank_range_is_flat_in_memory(tmp_path, cmd):
    """N38: ``--rank 0-1000000000000`` (17 bytes) was expanded into a list: MemoryError under the
    cap (exit 3), the OOM killer without one. A range is kept as a range."""
    r = sw(*[a.format(o=tmp_path / "m.png") for a in cmd], timeout=120)
    assert r.returncode == 0, r.stderr[-500:]
    if cmd[0] == "events":
        assert '"rank":0' in r.stdout.replace(" ", "")
    else:
        assert (tmp_path / "m.png").stat().st_size > 0


def test_a_rank_range_selects_what_it_names(tmp_path):
    r = sw("events", RUNS / "select-2ranks", "--rank", "1-100000000000", "--kind", "memory", timeout=120)
    ranks = {json.loads(ln)["rank"] for ln in r.stdout.splitlines()}
    assert r.returncode == 0 and ranks == {1}, (ranks, r.stderr)
    r = sw("plot", "memory", RUNS / "select-2ranks", "--ranks", "7-100000000000", "-o", tmp_path / "m.png",
           timeout=120)
    one_line_exit_2(r, "no memory figures for ranks 7-100000000000", "(the logs have memory figures for ranks 0-1)")


# ---- item 10: plan writes back every YAML explain accepts -------------------------------------------

FLOW_VARIANTS = {
    "one line": "recompute_config: {recompute: False, select_recompute: False}\n",
    "two lines and a comment": "recompute_config: {recompute: False,\n  select_recompute: False}  # flow\n",
    "empty select in flow": "recompute_config: {recompute: False, select_recompute: {}}   # keep me\n",
}


@pytest.mark.parametrize("variant", sorted(FLOW_VARIANTS))
def test_plan_writes_back_a_flow_style_recompute_config(tmp_path, variant):
    """Y30: a flow mapping ``recompute_config: {recompute: False, ...}`` was read by explain and
    refused by plan's writer ("cannot re-read the YAML for writing")."""
    import re

    import yaml

    src = (CONFIGS / "plan_tiny.yaml").read_text()
    text = re.sub(r"recompute_config:\n(  .*\n)+", FLOW_VARIANTS[variant], src)
    assert text != src
    cfg = tmp_path / "flow.yaml"
    cfg.write_text(text)
    assert sw("explain", cfg).returncode == 0
    out = tmp_path / "out.yaml"
    r = sw("plan", cfg, "--budget", "60MiB", "-o", out)
    assert r.returncode == 0, r.stderr
    written = out.read_text()
    planned = yaml.safe_load(written)["recompute_config"]
    assert planned["select_recompute"] and planned["recompute"] is False, planned
    # only the flow mapping became block lines: every other line of the file is as it was
    kept = [ln for ln in text.splitlines() if "recompute" not in ln and not ln.strip().startswith("select_")]
    assert [ln for ln in written.splitlines() if ln in kept] == kept
    assert "# keep me" not in text or "# keep me" in written
    assert sw("explain", out).returncode == 0


def test_plan_writes_back_a_flow_style_swap_config(tmp_path):
    import re

    import yaml

    src = (CONFIGS / "plan_qwen64.yaml").read_text()
    text = re.sub(r"swap_config:\n(  .*\n)+", "swap_config: {swap: False, default_prefetch: 1}\n", src)
    text = re.sub(r"recompute_config:\n(  .*\n)+", "recompute_config: {recompute: False}\n", text)
    assert "swap_config: {swap: False" in text
    cfg = tmp_path / "flow.yaml"
    cfg.write_text(text)
    out = tmp_path / "out.yaml"
    r = sw("plan", cfg, "--budget", "40GiB", "--allow-swap", "-o", out)
    assert r.returncode in (0, 1), r.stderr
    if r.returncode == 0:
        doc = yaml.safe_load(out.read_text())
        assert isinstance(doc["swap_config"], dict) and isinstance(doc["recompute_config"], dict)
        assert sw("explain", out).returncode in (0, 1)


# ---- item 14: bidi and zero-width characters are escaped like ESC/BEL ---------------------------------

def test_bidi_and_zero_width_characters_in_an_error_line_are_escaped(tmp_path):
    """N22: a key ``x\\u202egpj.exe\\u200b\\u2066`` printed raw shows as ``xexe.jpg``."""
    f = tmp_path / "n22.yaml"
    f.write_text("recompute_config:\n  \"x\u202egpj.exe\u200b\u2066\": True\n", encoding="utf-8")
    r = sw("explain", f, "--num-layers", 4)
    one_line_exit_2(r, "recompute_config.x\\u202egpj.exe\\u200b\\u2066: unknown key")
    assert not any(c in r.stderr for c in "\u202e\u200b\u2066")


def test_bidi_and_zero_width_characters_in_a_finding_are_escaped(tmp_path):
    f = tmp_path / "n22b.yaml"
    f.write_text("recompute_config:\n  select_recompute:\n    \"a\u200bb\u202e\ufeff\": True\n", encoding="utf-8")
    r = sw("explain", f, "--num-layers", 4)
    assert r.returncode in (0, 1) and "a\\u200bb\\u202e\\ufeff" in r.stdout, r.stdout
    assert not any(c in r.stdout + r.stderr for c in "\u202e\u200b\ufeff")


def test_every_invisible_character_is_escaped():
    """Every Unicode control (Cc), format (Cf) and line / paragraph separator (Zl, Zp) character
    of this Python's Unicode database, but tab, is written as an escape in an error line."""
    import unicodedata

    from swapwatch.text import escape

    missed = [hex(c) for c in range(0x110000)
              if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and chr(c) != "\t"
              and escape_controls(chr(c)) == chr(c)]
    assert missed == []
    assert escape_controls("a\tb\u200bc") == "a\tb\\u200bc" and escape("a\tb\U000e0041") == "a\\tb\\U000e0041"
    assert escape_controls("ok: 汉字 → é") == "ok: 汉字 → é"
