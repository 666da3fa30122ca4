"""plot on real MindSpore run directories (fixtures/plot_runs, see its README): what is drawn is what the
workers printed, read back independently of the parsers (SWAPWATCH lines and the CPU pool lines)."""
import os
import re

import numpy as np
import pytest

from cli_helpers import sw
from swapwatch.model.event_lines import parse_event

from swapwatch.plot import peak_frame, plot_memory
from swapwatch.plot.memory import step_frame
from swapwatch.plot.inputs import load_runs

from plot_helpers import MB, patches_by_gid, png_size, svg_texts

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "..", "fixtures", "plot_runs")
POOL = re.compile(r"DumpDynamicMemPoolStateInfo.*?peak used mem:(\d+)M, actual peak used mem:(\d+)M")


def run_dir(name):
    return os.path.normpath(os.path.join(RUNS, name))


def raw_steps(path):
    """{step: bytes} of the SWAPWATCH memory events in one log, read with the event-line reader only."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            ev = parse_event(line)
            if ev and ev["kind"] == "memory":
                out[ev["step"]] = ev["bytes"]
    return out


def raw_pool(path):
    """(used MB, actual MB), the largest the file printed at exit."""
    found = [tuple(map(int, m.groups())) for m in POOL.finditer(open(path, encoding="utf-8").read())]
    return max(found)


def run_cli(args, capsys):
    return sw(*args, capsys=capsys)


def test_three_strategies_side_by_side_are_the_printed_numbers():
    runs = [rl for _, rl in load_runs([run_dir("none"), run_dir("select"), run_dir("full")])]
    res = plot_memory(runs)
    fig = res.figure
    frame = res.frame
    assert list(frame["run"].cat.categories) == ["none", "select", "full"]
    peaks = peak_frame(frame).set_index("run")
    bars = patches_by_gid(fig)
    for name in ("none", "select", "full"):
        used, actual = raw_pool(os.path.join(run_dir(name), "console.log"))
        assert peaks.loc[name, "used"] == used * MB
        assert peaks.loc[name, "actual"] == actual * MB
        assert bars[f"peak|{name}|used"].get_height() == pytest.approx(used)
        # per step: the RSS fallback, kept in the data exactly as the callback printed it ...
        raw = raw_steps(os.path.join(run_dir(name), "console.log"))
        steps = step_frame(frame)
        got = steps[steps["run"] == name].sort_values("step")
        assert list(got["step"]) == sorted(raw) and list(got["bytes"]) == [raw[s] for s in sorted(raw)]
    # ... but flat RSS carries no signal (issue 16.11): the figure is the pool peak, and says why
    assert res.panels == ["peaks"] and len(fig.axes) == 1
    assert "per-step panel left out: process RSS (CPU fallback) is flat" in fig._suptitle.get_text()
    # recompute shows in the pool peak: none > select > full, and each bar says by how much
    assert peaks.loc["none", "used"] > peaks.loc["select", "used"] > peaks.loc["full", "used"]
    labels = {t.get_gid(): t.get_text() for t in fig.axes[0].texts}
    assert labels["peak|none|label"].endswith("(baseline)")
    for name in ("select", "full"):
        pct = (peaks.loc[name, "used"] - peaks.loc["none", "used"]) / peaks.loc["none", "used"] * 100
        assert labels[f"peak|{name}|label"].endswith(f"−{abs(pct):.0f}% vs none")


def test_two_msrun_ranks_get_a_line_each():
    (_, rl), = load_runs([run_dir("select-2ranks")])
    assert sorted(rl.ranks) == [0, 1]
    res = plot_memory(rl)
    fig = res.figure
    steps = step_frame(res.frame)
    for r in (0, 1):
        raw = raw_steps(os.path.join(run_dir("select-2ranks"), "msrun_log", f"worker_{r}.log"))
        got = steps[steps["rank"] == r].sort_values("step")
        np.testing.assert_allclose(got["bytes"], [raw[s] for s in sorted(raw)])
        used, actual = raw_pool(os.path.join(run_dir("select-2ranks"), "msrun_log", f"worker_{r}.log"))
        bars = patches_by_gid(fig)
        assert bars[f"peak|rank {r}|used"].get_height() == pytest.approx(used)
        assert bars[f"peak|rank {r}|frag"].get_height() == pytest.approx(actual - used)


def test_cli_writes_the_comparison(tmp_path, capsys):
    out = tmp_path / "m.svg"
    code, stdout, err = run_cli(["plot", "memory", run_dir("none"), run_dir("select"), run_dir("full"),
                                 "-o", str(out)], capsys)
    assert code == 0, err
    assert stdout.strip() == f"wrote {out}: 3 runs, 1 rank"
    texts = svg_texts(out)
    assert any("none vs select vs full" in t for t in texts)
    png = tmp_path / "m.png"
    code, _, err = run_cli(["plot", "memory", run_dir("select-2ranks"), "--ranks", "1", "-o", str(png)], capsys)
    assert code == 0, err
    w, h = png_size(png)
    assert w >= 600 and h > 400


def test_cli_logs_without_memory_say_how_to_get_it(tmp_path, capsys):
    log = tmp_path / "worker_0.log"
    lines = [ln for ln in open(os.path.join(run_dir("none"), "console.log"), encoding="utf-8")
             if '"kind":"memory"' not in ln and "mem:" not in ln]
    log.write_text("".join(lines), encoding="utf-8")
    code, out, err = run_cli(["plot", "memory", str(log), "-o", str(tmp_path / "m.png")], capsys)
    assert code == 2
    msg = [ln for ln in err.splitlines() if ln.strip()]
    assert len(msg) == 1 and "no memory figures" in msg[0] and "swapwatch run" in msg[0] and "GLOG_v=1" in msg[0]
    assert not (tmp_path / "m.png").exists()


def test_cli_strategy_from_logs_and_against_another_config(tmp_path, capsys):
    out = tmp_path / "s.png"
    code, stdout, err = run_cli(["plot", "strategy", run_dir("select"), "-o", str(out)], capsys)
    assert code == 0, err
    assert "identical to the config" in stdout
    png_size(out)
    code, stdout, err = run_cli(["plot", "strategy", run_dir("select"), "--config",
                                 os.path.join(RUNS, "configs", "full.yaml"), "-o", str(out), "--force"], capsys)
    assert code == 0, err
    # the select run is not a run of full.yaml: plot says what verify says (SW109, issue 21.1)
    assert "not a run of this config (SW109)" in stdout and "verify: FAIL" in stdout
    code, stdout, err = run_cli(["plot", "strategy", os.path.join(RUNS, "configs", "select.yaml"),
                                 "-o", str(tmp_path / "c.svg")], capsys)
    assert code == 0, err
    assert any(r"attention\.flash_attention" in t for t in svg_texts(tmp_path / "c.svg"))


LOGS = os.path.join(HERE, "..", "fixtures", "logs")


def test_strategy_differences_match_verify_on_the_quirks_fixture(tmp_path, capsys):
    """Every finding verify reports as missing/unasked is an outlined cell, and nothing else is."""
    from swapwatch.plot import plot_strategy
    from swapwatch.engine.strategy import plan as make_plan
    from swapwatch.config import config_from_log
    from swapwatch.commands.verify import verify

    path = os.path.join(LOGS, "quirks.log")
    (_, rl), = load_runs([path])
    res = plot_strategy(rl, plan=make_plan(config_from_log(rl)[0]))
    fig = res.figure
    findings = [f for f in verify([path]).findings if f.code in ("SW101", "SW102", "SW103")]
    assert len(res.diff) == len(findings) > 0
    outlined = {g for g in patches_by_gid(fig) if g.startswith("diff|")}
    assert len(outlined) == len(findings)              # each difference lands on a drawn row
    code, out, err = run_cli(["plot", "strategy", path, "-o", str(tmp_path / "q.png")], capsys)
    assert code == 0 and f"{len(findings)} differences" in out


def test_truncated_log_is_never_called_identical(tmp_path, capsys):
    out = tmp_path / "t.svg"
    code, stdout, err = run_cli(["plot", "strategy", os.path.join(LOGS, "truncated.log"), "-o", str(out)], capsys)
    assert code == 0, err
    assert "identical" not in stdout and "the log stops at layer" in stdout
    texts = svg_texts(out)
    assert any("config (intended)" in t for t in texts)
    assert any("not in the log (it stops here)" in t for t in texts)


def test_cli_says_when_runs_are_not_comparable(tmp_path, capsys):
    """Issue 16.9: the same model at another sequence length is no baseline for a saving."""
    import json
    import shutil

    other = tmp_path / "none-seq512"
    shutil.copytree(run_dir("none"), other)
    info = json.loads((other / "run.json").read_text())
    info["command"][info["command"].index("--seq") + 1] = "512"
    (other / "run.json").write_text(json.dumps(info))
    code, out, err = run_cli(["plot", "memory", str(other), run_dir("full"), "-o", str(tmp_path / "m.svg")],
                             capsys)
    assert code == 0, err
    assert "swapwatch: warning: these runs are not comparable (seq length 512 vs 256)" in err
    texts = svg_texts(tmp_path / "m.svg")
    assert any("not comparable" in t for t in texts) and not any("% vs" in t for t in texts)
