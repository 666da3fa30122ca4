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


def _explained_and_planned(tmp_path, text: str) -> Path:
    """``text`` as a YAML that explain reads (exit 0) and plan writes back at 60MiB (exit 0): the file
    written."""
    cfg = tmp_path / "styled.yaml"
    cfg.write_text(text)
    assert sw("explain", cfg).returncode == 0
    out = tmp_path / "out.yaml"
    r = sw("plan", cfg, "--budget", "60MiB", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("variant", sorted(FLOW_VARIANTS))
def test_plan_writes_back_a_flow_style_recompute_config(tmp_path, variant):
    """Y30: a flow mapping ``recompute_config: {recompute: False, ...}`` was read by explain and
    refused by plan's writer ("cannot re-read the YAML for writing")."""
    import re

    import yaml

    src = (CONFIGS / "plan_tiny.yaml").read_text()
    text = re.sub(r"recompute_config:\n(  .*\n)+", FLOW_VARIANTS[variant], src)
    assert text != src
    out = _explained_and_planned(tmp_path, text)
    written = out.read_text()
    planned = yaml.safe_load(written)["recompute_config"]
    # the levels are the search's (since plan35's pool check at 60 MiB: select on some layers, full on
    # one): what matters here is that the flow mapping was written back as block lines
    assert planned["select_recompute"] and (planned["recompute"] is False or isinstance(planned["recompute"], list)), \
        planned
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


# ---- item 5: a total over every pattern a config compiles --------------------------------------------

def sw_cap(cap, *args, timeout=120):
    """The CLI under an address-space cap of ``cap`` bytes."""
    return subprocess.run([PY, "-m", "swapwatch.cli", *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, cwd=ROOT, text=True, env=ENV,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))


def _huge_patterns(n):
    return "".join(f"    'a{{99990}}b{i}': True\n" for i in range(n))


@pytest.mark.parametrize("n", [100, 400])
def test_many_patterns_each_under_the_segment_bound_are_one_line(tmp_path, n):
    """N23b: 100 patterns just under the per-segment bound took 1.5 GB, 400 (a 10 KB YAML) exit 3
    MemoryError; their total is bounded: one line, exit 2, before anything is compiled."""
    f = tmp_path / "p.yaml"
    f.write_text("recompute_config:\n  select_recompute:\n" + _huge_patterns(n))
    r = sw_cap(2 << 30, "explain", f, "--num-layers", 4)
    one_line_exit_2(r, "p.yaml", "recompute_config", "positions in all when compiled", "1,000,000")


def test_many_patterns_in_a_logged_config_are_one_line(tmp_path):
    """The same patterns through a log's ``initial recompute_config from dict`` line (N62)."""
    log = tmp_path / "r.log"
    text = (LOGS / "swap_case2.log").read_text()
    pats = ", ".join(f"'a{{99990}}b{i}': [1]" for i in range(300))
    log.write_text(text.replace("'select_recompute': False,", f"'select_recompute': {{{pats}}},"))
    one_line_exit_2(sw_cap(2 << 30, "verify", log), "positions in all when compiled")


def test_many_patterns_in_a_pynative_config_are_one_line(tmp_path):
    f = tmp_path / "pyn.yaml"
    text = (CONFIGS / "pynative_qwen3_select.yaml").read_text()
    keys = "".join(f"    'a{{99990}}b{i}': ['1']\n" for i in range(300))
    f.write_text(text.replace("    'nothing': ['1']\n", keys))
    one_line_exit_2(sw_cap(2 << 30, "explain", f), "pyn.yaml", "select_module", "positions in all when compiled")


def test_a_single_oversized_segment_keeps_its_own_line(tmp_path):
    f = tmp_path / "rep.yaml"
    f.write_text("recompute_config:\n  select_recompute:\n    'ok': True\n    'a{1000000000}': True\n")
    one_line_exit_2(sw("explain", f, "--num-layers", 4), "rep.yaml:4", "too large to compile")


def test_the_total_counts_each_distinct_segment_once():
    from swapwatch.model import patterns

    shared = ["feed_forward\\.w%d" % i for i in range(1000)]
    total, segs, single = patterns.total_expansion(shared)
    assert segs == 1001 and not single                        # 'feed_forward' once, and 1,000 'wN'
    assert total == len("feed_forward") + sum(len("w%d" % i) for i in range(1000))
    patterns.check_total(shared)
    with pytest.raises(patterns.PatternError, match="positions in all"):
        patterns.check_total([f"x{{99990}}y{i}" for i in range(11)])


def test_the_compiled_pattern_cache_is_bounded_by_positions():
    from swapwatch.model import patterns

    for i in range(40):                       # 40 x 99,990 positions: four times the budget
        assert patterns.segment_fullmatch(f"a{{99990}}b{i}", "x") is False
    assert patterns._COMPILED.total <= patterns.MAX_TOTAL_EXPANSION
    assert patterns.segment_fullmatch("a{3}", "aaa") is True


@pytest.mark.scale
def test_20000_patterns_walk_each_layer_kind_once(tmp_path, monkeypatch):
    """N60: 20,000 patterns ran past 60 s (2,000 took 2.3 s): the walk memo held 4,096 and thrashed,
    so every layer walked every pattern again. The work is counted, not timed: one walk per
    pattern, mode and layer kind."""
    from swapwatch.model import families, patterns
    from swapwatch.commands.explain import explain

    src = (CONFIGS / "conflict.yaml").read_text().replace("swap: True", "swap: False").replace(
        "  recompute: [0, 1]", "  recompute: False")
    n = 20_000
    f = tmp_path / "pats.yaml"
    f.write_text(src.replace("    'feed_forward\\.w1': [1, 2]\n",
                             "".join(f"    'attention\\.wq{i}': True\n" for i in range(n))))
    calls = {"walk": 0}
    real = patterns.walk_layout

    def counted(*a, **k):
        calls["walk"] += 1
        return real(*a, **k)

    monkeypatch.setattr(patterns, "walk_layout", counted)
    families._walk.cache_clear()
    ex = explain(str(f))
    kinds = 1                                              # a dense model: one layer kind
    assert calls["walk"] <= (n + 10) * kinds * 3, calls    # recompute / exclude / comm walks at most
    assert sum(f.code == "SW104" for f in ex.findings) == n


# ---- item 7: a log of 10**6 strategy lines is bounded -------------------------------------------------

def _many_layers_log(path, n):
    lines = (LOGS / "swap_case2.log").read_text().splitlines(True)
    with open(path, "w") as fh:
        fh.write("".join(lines[:16]))
        for i in range(n):
            fh.write(lines[16].replace("layer 0 ", f"layer {i} ", 1))


def test_strategy_lines_past_the_layer_ceiling_are_counted_not_kept(tmp_path):
    """N19: a log of 10**6 ``Set layer swap at layer N`` lines was 2.5 GB (one event and one SW102
    finding per layer) and past 90 s with --config. Layers past swapwatch's own ceiling (no config
    it reads has more) are counted in one notice; the rest is at most the ceiling's worth."""
    from swapwatch.config import MAX_LAYERS
    from swapwatch.parsers import read_logs
    from swapwatch.parsers.reader import LAYER_CEILING

    assert LAYER_CEILING == MAX_LAYERS
    log = tmp_path / "n19.log"
    _many_layers_log(log, 30_000)
    run = read_logs([str(log)], show_progress=False)
    (rank,) = run.ranks.values()
    actions = [e for e in rank.events if e.kind == "action"]
    assert len(actions) == LAYER_CEILING
    (n,) = [e for e in rank.events if e.kind == "notice" and e.what == "past_layer_ceiling"]
    assert n.data == {"count": 20_000, "first_layer": 10_000, "last_layer": 29_999, "ceiling": 10_000}
    assert n.source == f"n19.log:{16 + 10_000 + 1}" or n.source.endswith(f":{16 + 10_000 + 1}")
    for args in ([], ["--config", CONFIGS / "swap_case2.yaml"]):
        r = sw("verify", log, *args)
        assert r.returncode == 1, r.stderr
        assert "the log shows 20,000 strategy line(s) for layers 10000-29999, past any layer count" in r.stdout
        assert r.stdout.count("\n") < 40                           # findings grouped, not one per layer


# ---- item 11: what a .gz or a log without strategy lines really is -------------------------------------

def test_a_corrupt_gz_is_said_to_be_no_valid_gzip(tmp_path):
    import gzip

    good = gzip.compress((LOGS / "swap_case2.log").read_bytes())
    bad = bytearray(good)
    bad[40:60] = b"\xff" * 20
    (tmp_path / "corrupt.log.gz").write_bytes(bytes(bad))
    (tmp_path / "plain.log.gz").write_bytes(b"this is no gzip\n" * 10)
    for name in ("corrupt.log.gz", "plain.log.gz"):
        for cmd in ("verify", "events"):
            one_line_exit_2(sw(cmd, tmp_path / name), name, "not valid gzip data")


def test_a_gz_cut_before_its_data_says_so(tmp_path):
    import gzip

    good = gzip.compress((LOGS / "swap_case2.log").read_bytes())
    (tmp_path / "cut.log.gz").write_bytes(good[:30])
    one_line_exit_2(sw("verify", tmp_path / "cut.log.gz"), "the gzip data of", "ends before its first line",
                    "a .gz cut short")


def test_mindformers_records_without_a_strategy_line_say_what_is_missing(tmp_path):
    """"no MindFormers line at all" was printed for logs full of MindFormers records with no
    strategy line (nothing enabled): say what is missing, not what is not."""
    keep = [ln for ln in (LOGS / "swap_case2.log").read_text().splitlines(True)
            if not any(w in ln for w in ("Set ", "Formative", "initial ", "num_layers", "Pipeline id",
                                         "Interleave id", "configuration of"))]
    log = tmp_path / "quiet.log"
    log.write_text("".join(keep) + "".join(
        f"2026-11-22 04:02:{40 + i},000 - mindformers/x[mindformers/trainer/base_trainer.py:1] - INFO - "
        f"building the dataset, part {i}\n" for i in range(12)))
    r = sw("verify", log)
    one_line_exit_2(r, "these logs hold MindFormers records, but no strategy line")
    assert "no MindFormers line at all" not in r.stderr


# ---- item 12: the same rank in two directories ---------------------------------------------------------

def test_the_same_rank_in_two_directories_is_said_as_such(tmp_path):
    """N72: two copies of one passing rank-0 log were read as one log with a second LayerSetting
    block: FAIL, SW109 "an MTP block"."""
    for d in ("dupA", "dupC"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "worker_0.log").write_bytes((LOGS / "swap_case2.log").read_bytes())
    r = sw("verify", tmp_path / "dupA", tmp_path / "dupC", "--config", CONFIGS / "swap_case2.yaml")
    one_line_exit_2(r, "rank 0 appears twice", "dupA/worker_0.log", "dupC/worker_0.log")
    assert "SW109" not in r.stdout + r.stderr
    assert sw("verify", tmp_path / "dupA", "--config", CONFIGS / "swap_case2.yaml").returncode == 0


# ---- item 13: another tool's YAML, and no option a command does not have ----------------------------

FOREIGN = {"k8s.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\nspec:\n  containers: []\n",
           "mkdocs.yml": (ROOT / "mkdocs.yml").read_text(), "empty.yaml": ""}


@pytest.mark.parametrize("name", sorted(FOREIGN))
@pytest.mark.parametrize("cmd", [["explain"], ["estimate"], ["plan", "--budget", "58GiB"], ["verify-config"]])
def test_another_tools_yaml_is_not_a_mindformers_yaml(tmp_path, name, cmd):
    f = tmp_path / name
    f.write_text(FOREIGN[name])
    args = ["verify", LOGS / "swap_case2.log", "--config", f] if cmd == ["verify-config"] else [cmd[0], f, *cmd[1:]]
    r = sw(*args)
    one_line_exit_2(r, "not a MindFormers training YAML")
    assert "num_layers" not in r.stderr


@pytest.mark.parametrize("cmd", [["estimate"], ["plan", "--budget", "58GiB"], ["verify-config"]])
def test_no_error_suggests_an_option_the_command_lacks(tmp_path, cmd):
    f = tmp_path / "frag.yaml"
    f.write_text("recompute_config:\n  recompute: True\n")
    args = ["verify", LOGS / "swap_case2.log", "--config", f] if cmd == ["verify-config"] else [cmd[0], f, *cmd[1:]]
    r = sw(*args)
    one_line_exit_2(r, "the layer count is unknown")
    assert "pass --num-layers" not in r.stderr and "explain also takes --num-layers" in r.stderr


# ---- item 8: sizes whose products pass int64 -----------------------------------------------------------

@pytest.mark.parametrize("key,value,words", [
    ("vocab_size", 2 ** 63 - 1, "the embedding table"),
    ("hidden_size", (2 ** 62 // 40) * 40, "hidden_size 4,611,686,018,427,387,880 makes"),
    ("seq_length", 3_037_000_500, "the attention scores")])
@pytest.mark.parametrize("cmd", [["estimate"], ["plan", "--budget", "58GiB"]])
def test_sizes_whose_products_pass_int64_are_one_line(tmp_path, cmd, key, value, words):
    """N31: each size fit int64, their product did not: a peak of 10**14 GiB and exit 0."""
    import re

    src = (CONFIGS / "plan_qwen64.yaml").read_text()
    text, n = re.subn(rf"(?m)^(\s*){key}: .*$", rf"\g<1>{key}: {value}", src)
    assert n == 1
    f = tmp_path / "ovf.yaml"
    f.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip().startswith(f"{key}:"))
    one_line_exit_2(sw(cmd[0], f, *cmd[1:]), f"ovf.yaml:{line}: model.model_config.{key}:", words,
                    "past int64")


# ---- item 15: GB as MindSpore reads max_device_memory ----------------------------------------------------

def test_a_budget_in_gb_is_what_max_device_memory_means():
    """N (unchanged note of 11-25): ``--budget 58GB`` planned against 54.02 GiB (10**9) while
    ``max_device_memory: "58GB"`` is 58 x 2**30 bytes to MindSpore."""
    from swapwatch.memory.planner import parse_size

    assert parse_size("58GB") == parse_size("58GiB") == parse_size("58G") == 58 << 30
    assert parse_size("3.5GB") == 7 << 29 and parse_size("45MB") == 45 << 20
    a = sw("plan", CONFIGS / "plan_qwen64.yaml", "--budget", "58GB")
    b = sw("plan", CONFIGS / "plan_qwen64.yaml", "--budget", "58GiB")
    # the table says the budget under the stages since plan35 (the pool check): "within 58.00 GiB"
    assert a.returncode == b.returncode and a.stdout == b.stdout and "within 58.00 GiB" in a.stdout


# ---- item 16: the newcomer's small ones ---------------------------------------------------------------

def test_sw211_shows_the_patterns_as_the_yaml_has_them():
    r = sw("explain", CONFIGS / "select_recompute.yaml")
    (line,) = [ln for ln in r.stdout.splitlines() if "frees nothing on layer" in ln]
    assert "select_recompute 'feed_forward\\.mul', 'feed_forward\\.w1\\.activation\\.silu' frees" in line
    assert "\\\\" not in line                       # copy-pasteable into a YAML: one backslash


def test_a_report_memory_row_is_in_one_unit():
    from swapwatch.report.html import _row_unit
    from swapwatch.text import GIB, fmt_bytes

    used, actual = 15.7 * GIB, 16.7 * GIB
    unit = _row_unit(used, actual)
    cells = [fmt_bytes(v, unit) for v in (used, actual, actual - used)]
    assert cells == ["15.7 GiB", "16.7 GiB", "1 GiB"]
    assert _row_unit(float("nan"), None, 5 << 20)[0] == "MiB"


def test_a_strategy_map_of_10000_layers_folds_what_looks_the_same(tmp_path):
    """N61: plot strategy at swapwatch's 10,000-layer ceiling ran past 60 s (313 bands of 32)."""
    from swapwatch.plot.strategy_map import MAX_BANDS, plot_strategy
    from swapwatch.engine.strategy import plan as make_plan
    from swapwatch.config import load_config

    text = (CONFIGS / "plan_qwen64.yaml").read_text().replace("num_layers: 64", "num_layers: 10000").replace(
        "pipeline_stage: 4", "pipeline_stage: 8")
    f = tmp_path / "L10k.yaml"
    f.write_text(text)
    res = plot_strategy(make_plan(load_config(str(f))))
    (frame,) = res.frames.values()
    assert frame["layer"].nunique() == 10_000                      # the data is every layer
    maps = [ax for ax in res.figure.axes if ax.get_yticklabels()]
    assert len(maps) <= MAX_BANDS
    labels = [t.get_text() for ax in maps for t in ax.get_xticklabels()]
    assert labels == [f"{s * 1250}-{s * 1250 + 1249}" for s in range(8)]     # one column a stage
    assert "one column" in res.figure._suptitle.get_text()


@pytest.mark.parametrize("kinds,ranks", [((), None), (("memory",), None), ((), "1"), ((), "7"), (("action",), "0-3")])
def test_events_of_a_file_in_pieces_is_spooled_and_the_same(tmp_path, kinds, ranks):
    """``swapwatch events`` held every event of a big file until its end (its rank is known only
    then): 1.1 GB for a 220 MB log of 10**6 strategy lines. A file cut into pieces is written to a
    spool as it comes; the JSONL is the same as when the file is read whole."""
    from swapwatch.commands.events import event_filter
    from swapwatch.parsers import iter_event_text
    from swapwatch.parsers import reader

    src = (RUNS / "select-2ranks" / "msrun_log" / "worker_1.log").read_text()
    (tmp_path / "worker_1.log").write_text(src * 20)                 # SWAPWATCH rank 1 inside
    (tmp_path / "worker_7.log").write_text((LOGS / "swap_case2.log").read_text() * 50)   # rank from the name
    sel = event_filter(kinds, ranks)
    spooled = []
    real = reader._Spool.add

    def add(self, events):
        spooled.append(len(events))
        return real(self, events)

    reader._Spool.add = add
    try:
        cut = "".join(iter_event_text([str(tmp_path)], sel, piece=8192, jobs=1, show_progress=False))
    finally:
        reader._Spool.add = real
    whole = "".join(iter_event_text([str(tmp_path)], sel, piece=10 ** 9, jobs=1, show_progress=False))
    assert len(spooled) > 10 and cut == whole


def _restyled(flow_keys, whole=False, json_doc=False):
    """plan_tiny.yaml with the top-level sections ``flow_keys`` written in flow style (``whole``: the
    whole document one flow mapping; ``json_doc``: JSON, which YAML reads too)."""
    import json as _json

    import yaml

    doc = yaml.safe_load((CONFIGS / "plan_tiny.yaml").read_text())
    if json_doc:
        return _json.dumps(doc, indent=1)
    if whole:
        return "# a header comment\n" + yaml.safe_dump(doc, default_flow_style=True, width=10 ** 6)
    parts = []
    for k, v in doc.items():
        if k in flow_keys and isinstance(v, (dict, list)):
            parts.append(f"{k}: " + yaml.safe_dump(v, default_flow_style=True, width=10 ** 6).strip() + "\n")
        else:
            parts.append(yaml.safe_dump({k: v}, default_flow_style=False, width=10 ** 6, sort_keys=False))
    return "".join(parts)


@pytest.mark.parametrize("variant", ["whole document", "JSON", "recompute_config", "recompute_config+model",
                                     "every section"])
def test_plan_writes_back_every_style_explain_reads(tmp_path, variant):
    import yaml

    sections = list(yaml.safe_load((CONFIGS / "plan_tiny.yaml").read_text()))
    text = {"whole document": lambda: _restyled((), whole=True), "JSON": lambda: _restyled((), json_doc=True),
            "recompute_config": lambda: _restyled({"recompute_config"}),
            "recompute_config+model": lambda: _restyled({"recompute_config", "model"}),
            "every section": lambda: _restyled(set(sections))}[variant]()
    out = _explained_and_planned(tmp_path, text)
    planned, given = yaml.safe_load(out.read_text()), yaml.safe_load(text)
    assert planned["recompute_config"]["select_recompute"]
    assert {k: v for k, v in planned.items() if k != "recompute_config"} == \
        {k: v for k, v in given.items() if k != "recompute_config"}            # nothing else changed
    assert sw("explain", out).returncode == 0
    if variant == "whole document":
        assert out.read_text().startswith("# a header comment\n")
