"""verify end to end: worker logs -> parsers -> strategy engine -> rules -> exit code.

The logs are the parser fixtures made by real MindFormers 2.1.0 (``fixtures/logs/*.log``, see
``make_oracle_logs.py``) for the documented swap cases and the 48-layer recompute example, copied
into msrun-style log dirs; mutated copies (a deleted line, a changed prefetch, a moved layer id, a
truncated file, a disagreeing rank) must fail with the right code; and the real tiny-Llama runs of
``fixtures/plot_runs`` must verify clean.
"""
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from swapwatch.cli import main                      # noqa: E402
from swapwatch.commands.verify import verify                 # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ENV = {"ENABLE_LAZY_INLINE_NO_PIPELINE": "1"}       # the documented swap runs set it (no pp)
SCENARIOS = ["swap_case1", "swap_case2", "swap_case3", "swap_case4", "recompute_48l"]


STEPS = "".join(
    f"2026-11-22 04:03:1{s},00{s} - mindformers/tmp/swapwatch_fixture_mf_logs"
    f"[mindformers/core/callback/callback.py:529] - INFO - {{ Epoch:[  1/  1], step:[    {s}/    3], "
    f"loss: 10.{640 - s}, per_step_time: 1200ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, "
    f"global_norm: [4.4]\n" for s in (1, 2, 3))


def make_run(tmp_path: Path, name: str, ranks=(0, 1)) -> Path:
    """An msrun log dir whose every worker log is the MindFormers-made fixture log of ``name``
    followed by three training steps (the fixture stops after model building; a real job goes on,
    which is what tells a finished strategy block from a cut-off one)."""
    src = FIXTURES / "logs" / f"{name}.log"
    logs = tmp_path / "msrun_log"
    logs.mkdir()
    text = src.read_text(encoding="utf-8")
    for r in ranks:
        (logs / f"worker_{r}.log").write_text(text.rstrip("\n") + "\n" + STEPS, encoding="utf-8")
    return logs


def config(name: str) -> str:
    return str(FIXTURES / "configs" / f"{name}.yaml")


def edit(path: Path, fn) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(fn(lines)), encoding="utf-8")


def line_no(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


# --- genuine logs verify clean -----------------------------------------------------------------

@pytest.mark.parametrize("name", SCENARIOS)
def test_documented_runs_verify_clean_against_their_configs(tmp_path, name):
    logs = make_run(tmp_path, name)
    r = verify([str(logs)], config_path=config(name), env=ENV)
    errors = [(f.code, f.rank, f.layer, f.message) for f in r.findings if f.severity == "error"]
    assert errors == [] and r.verdict == "pass" and r.ranks == [0, 1]
    mine = {f.code for f in r.findings} - {"SW303"}
    # the 48-layer worked example: selects shadowed by full recompute (SW105), and its select set is
    # MindFormers' legacy default (feed_forward.mul + w1.activation.silu), which frees nothing (SW211)
    assert mine == ({"SW105", "SW211"} if name == "recompute_48l" else set())


@pytest.mark.parametrize("name", SCENARIOS)
def test_documented_runs_verify_clean_from_the_logs_own_config(tmp_path, name):
    logs = make_run(tmp_path, name)
    r = verify([str(logs)], env=ENV)
    assert [f for f in r.findings if f.severity == "error"] == [] and r.verdict == "pass"
    assert r.config_source.startswith("rank 0 log")


def test_without_config_and_without_initial_lines_is_exit_2(tmp_path, capsys):
    logs = make_run(tmp_path, "swap_case3")
    for p in logs.iterdir():
        edit(p, lambda ls: [x for x in ls if "from dict" not in x])
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(logs)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--config" in err and len(err.strip().splitlines()) == 1


# --- mutated copies fail with the right code ---------------------------------------------------

def _verify(tmp_path, logs, name, **kw):
    return verify([str(logs)], config_path=config(name), env=ENV, **kw)


def test_deleted_set_line_is_sw101(tmp_path):
    logs = make_run(tmp_path, "recompute_48l")
    w0 = logs / "worker_0.log"
    edit(w0, lambda ls: [x for x in ls if "Set select recompute on at layer 25:" not in x])
    r = _verify(tmp_path, logs, "recompute_48l")
    bad = [(f.code, f.rank, f.layer, f.op) for f in r.findings if f.severity == "error"]
    assert ("SW101", 0, 25, "feed_forward.w1.matmul") in bad
    assert {c for c, *_ in bad} == {"SW101", "SW401"} and r.exit_code == 1
    f = next(f for f in r.findings if f.code == "SW101")
    assert re.fullmatch(r"(.*/)?worker_0\.log:\d+", f.source)


def test_changed_prefetch_is_sw103_with_file_and_line(tmp_path):
    logs = make_run(tmp_path, "swap_case3", ranks=(0,))
    w0 = logs / "worker_0.log"
    edit(w0, lambda ls: [x.replace(".feed_forward, value=15", ".feed_forward, value=5")
                         if "at layer 2:" in x else x for x in ls])
    r = _verify(tmp_path, logs, "swap_case3")
    f = next(f for f in r.findings if f.code == "SW103")
    assert (f.rank, f.layer, f.op, str(f.expected), str(f.actual)) == (0, 2, "feed_forward", "15", "5")
    assert f.source.endswith(f"worker_0.log:{line_no(w0, 'Set op_swap at layer 2')}")


def test_changed_layer_id_is_sw102_and_sw101(tmp_path):
    logs = make_run(tmp_path, "swap_case2", ranks=(0,))
    edit(logs / "worker_0.log", lambda ls: [x.replace("Set layer swap at layer 3", "Set layer swap at layer 2")
                                            for x in ls])
    r = _verify(tmp_path, logs, "swap_case2")
    assert {(f.code, f.layer) for f in r.findings if f.severity == "error"} == {("SW102", 2), ("SW101", 3)}


def test_truncated_log_is_sw106(tmp_path):
    logs = make_run(tmp_path, "recompute_48l")
    w1 = logs / "worker_1.log"
    cut = line_no(w1, "Set select recompute on at layer 30:")
    data = w1.read_bytes()
    w1.write_bytes(b"".join(data.splitlines(keepends=True)[:cut])[:-7])   # mid-line, no newline
    r = _verify(tmp_path, logs, "recompute_48l")
    codes = {f.code for f in r.findings if f.severity == "error"}
    assert "SW106" in codes and "SW101" not in codes
    assert next(f for f in r.findings if f.code == "SW106").rank == 1


def test_rank_that_disagrees_is_sw401(tmp_path):
    logs = make_run(tmp_path, "swap_case1", ranks=(0, 1, 2))
    edit(logs / "worker_2.log", lambda ls: [x.replace("value=10", "value=3") if "at layer 1:" in x else x
                                            for x in ls])
    r = _verify(tmp_path, logs, "swap_case1")
    assert {(f.code, f.rank, f.layer) for f in r.findings if f.severity == "error"} == {
        ("SW401", 2, 1), ("SW103", 2, 1)}


def test_missing_rank_is_sw402_warning(tmp_path):
    logs = make_run(tmp_path, "swap_case1", ranks=(0, 1, 3))
    r = _verify(tmp_path, logs, "swap_case1")
    assert [(f.code, f.rank) for f in r.findings if f.code == "SW402"] == [("SW402", 2)]
    assert r.verdict == "pass" and _verify(tmp_path, logs, "swap_case1", strict=True).verdict == "fail"


def test_log_of_another_config_is_sw109_once(tmp_path):
    # issue 16: the log of another config is one SW109 (it stands in for the per-key SW107s)
    logs = make_run(tmp_path, "swap_case3")
    r = verify([str(logs)], config_path=config("swap_case4"), env=ENV)
    sw109 = [f for f in r.findings if f.code == "SW109"]
    assert len(sw109) == 1 and r.exit_code == 1 and "ranks 0-1" in sw109[0].message
    assert "recompute_config.select_recompute" in sw109[0].message
    assert not [f for f in r.findings if f.code == "SW107"]


# --- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "json", "junit", "markdown"])
def test_cli_formats_parse_and_exit_codes(tmp_path, fmt, capsys):
    logs = make_run(tmp_path, "swap_case3")
    edit(logs / "worker_1.log", lambda ls: [x.replace("value=10", "value=11") for x in ls])
    args = ["verify", str(logs), "--config", config("swap_case3"), "--format", fmt,
            "--env", "ENABLE_LAZY_INLINE_NO_PIPELINE=1"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr().out
    assert exc.value.code == 1
    if fmt == "json":
        doc = json.loads(out)
        assert doc["verdict"] == "fail" and doc["ranks"] == [0, 1] and doc["layers"] == 4
        assert any(f["code"] == "SW103" and f["rank"] == 1 and f["layer"] == 3 for f in doc["findings"])
    elif fmt == "junit":
        assert ET.fromstring(out).tag == "testsuites"
    elif fmt == "markdown":
        assert out.startswith("### swapwatch verify: ❌ fail")
    else:
        assert out.rstrip().splitlines()[-1].startswith("FAIL:")
    with pytest.raises(SystemExit) as exc:
        main(args + ["--ignore", "SW103", "--ignore", "SW401", "-o", str(tmp_path / "r.txt")])
    assert exc.value.code == 0 and (tmp_path / "r.txt").read_text()


# --- real runs of the tiny Llama (swapwatch run, MindSpore 2.10 CPU; fixtures/plot_runs) -------

REAL = FIXTURES / "plot_runs"


@pytest.mark.parametrize("run, config", [("none", "none"), ("select", "select"), ("full", "full"),
                                         ("select-2ranks", "select")])
def test_real_runs_verify_clean(run, config):
    r = verify([str(REAL / run)], config_path=str(REAL / "configs" / f"{config}.yaml"))
    assert [(f.code, f.message) for f in r.findings if f.severity == "error"] == []
    assert r.verdict == "pass"
    r = verify([str(REAL / run)])                     # the config the log printed
    assert r.verdict == "pass", [(f.code, f.message) for f in r.findings]


def test_real_run_against_another_config_fails(tmp_path):
    r = verify([str(REAL / "select-2ranks")], config_path=str(REAL / "configs" / "full.yaml"))
    codes = [f.code for f in r.findings if f.severity == "error"]
    assert codes == ["SW109"] and r.exit_code == 1          # one cause, said once (issue 16)


# --- the comparison: made once per verify, the same object for the rules, the map and the plot ---

def test_comparison_is_made_once_and_shared_by_rules_result_and_plot(tmp_path, monkeypatch):
    import swapwatch.engine.compare as compare_mod
    import swapwatch.plot.strategy_map as strategy_map
    from swapwatch.checks import VARIANTS, load_rules

    logs = make_run(tmp_path, "recompute_48l")
    edit(logs / "worker_0.log", lambda ls: [x for x in ls if "Set select recompute on at layer 25:" not in x])
    made, seen_by_rules = [], []
    real = compare_mod.compare

    def counting(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    # verify.evaluate takes compare from swapwatch.engine.compare when it runs (imported while the logs
    # are scanned, not before the workers start), so patching it there covers verify too
    monkeypatch.setattr(compare_mod, "compare", counting)
    load_rules()
    rule = VARIANTS["SW101"]["run"]
    check = type(rule).check

    def spy(self, ctx):
        seen_by_rules.append(ctx.comparison)
        return check(self, ctx)

    monkeypatch.setattr(type(rule), "check", spy)
    r = _verify(tmp_path, logs, "recompute_48l")
    assert len(made) == 1 and r.comparison is made[0] and seen_by_rules == [made[0]]
    assert any(f.code == "SW101" for f in r.findings)

    def no_second_comparison(*a, **kw):
        raise AssertionError("the plot compared again")

    # the plot reaches compare only through its CodePath (engine.codepaths: compare.compare, looked up when called)
    monkeypatch.setattr(compare_mod, "compare", no_second_comparison)
    res = strategy_map.plot_strategy(r, rank=0)
    assert set(res.diff["kind"]) == {"missing"} and set(res.diff["layer"]) == {25}
    assert len(res.diff) == len(r.comparison.ranks[0].missing)


def test_sw107_and_sw401_agree_on_what_the_same_value_is(tmp_path):
    """One canonical form (compare.canon): key order in a logged dict is no difference, False is
    not 0 (MindFormers tells bools from counts). SW107 (log vs --config) and SW401 (rank vs rank)
    say the same about the same pair of values."""
    import verify_helpers as vh
    from swapwatch.checks.sw107_log_config_differs import LogConfigDiffers
    from swapwatch.checks.sw401_ranks_disagree import RanksDisagree
    from swapwatch.config import load_config
    from swapwatch.parsers import read_logs
    from swapwatch.engine.strategy import plan as make_plan

    first = "{'op_name': 'attention', 'backward_prefetch': 20, 'layers': [0, 1, 2]}"
    reordered = "{'layers': [0, 1, 2], 'backward_prefetch': 20, 'op_name': 'attention'}"
    cfg = load_config(config("swap_case3"))

    def codes(logs):
        ctx = vh.context(make_plan(cfg), read_logs([str(logs)]), config=cfg)
        return ({f.rank for f in LogConfigDiffers().check(ctx)},
                {f.rank for f in RanksDisagree().check(ctx) if f.layer is None})

    (tmp_path / "a").mkdir()
    logs = make_run(tmp_path / "a", "swap_case3")
    edit(logs / "worker_1.log", lambda ls: [x.replace(first, reordered) for x in ls])
    assert any(reordered in x for x in (logs / "worker_1.log").read_text().splitlines())
    assert codes(logs) == (set(), set())          # key order: the same value for both rules

    (tmp_path / "b").mkdir()
    logs = make_run(tmp_path / "b", "swap_case3")
    edit(logs / "worker_1.log", lambda ls: [x.replace("{'recompute': False,", "{'recompute': 0,") for x in ls])
    assert codes(logs) == ({1}, {1})              # False vs 0: a difference for both rules
