"""Issue 21: verify says PASS only when it verified, and says the run and the config apart.

Every log here is a genuine MindFormers 2.1.0 fixture (fixtures/logs/README.md says how each was
made); the one exception is the rank log without a single MindFormers line, which is what a
launcher prints when the job is not a MindFormers job (``swapwatch run ... -- echo LAUNCHED``).
"""
from __future__ import annotations

import glob
import json
import os
from xml.etree import ElementTree as ET

import pytest

from cli_helpers import fx, sw
from swapwatch.commands.verify import verify
from swapwatch.report.verify import render



#: every genuine MindFormers log with the config it was made from
GENUINE = {fx("logs", "families", os.path.basename(p)): fx("configs", "families", os.path.basename(p)[:-4] + ".yaml")
           for p in glob.glob(fx("logs", "families", "*.log"))}
GENUINE.update({fx("logs", f"swap_case{n}.log"): fx("configs", f"swap_case{n}.yaml") for n in (1, 2, 3, 4)})
GENUINE[fx("logs", "recompute_48l.log")] = fx("configs", "recompute_48l.yaml")
GENUINE[fx("logs", "pynative_qwen3")] = fx("configs", "pynative_qwen3_select.yaml")
GENUINE[fx("logs", "pynative_dsv3_mtp")] = fx("configs", "pynative_dsv3_mtp.yaml")
GENUINE[fx("logs", "pynative_pp2")] = fx("configs", "pynative_pp2.yaml")
CONFIGS = sorted(glob.glob(fx("configs", "*.yaml")) + glob.glob(fx("configs", "families", "*.yaml")))


def applied(config: str):
    """What a config makes MindFormers apply, per layer (explain's JSON), or None if unreadable."""
    from swapwatch.errors import InputError
    from swapwatch.commands.explain import explain

    try:
        ex = explain(config)
    except (InputError, ValueError):
        return None
    if hasattr(ex, "to_json"):
        doc = ex.to_json()
    else:                                           # a PyNative explanation
        from swapwatch.pynative.explain import to_json

        doc = to_json(ex)
    fam = doc.get("family") if isinstance(doc.get("family"), dict) else None
    known = fam is None or fam.get("known", True)
    out = {k: json.dumps(doc.get(k), sort_keys=True, default=str) for k in ("path", "layers", "num_layers",
                                                                            "pipeline_stage")}
    # what swapwatch cannot tell for a family it has no tree for: anything
    out["family"] = (fam or {}).get("name") if known else None
    out["mtp"] = json.dumps(doc.get("mtp"), default=str) if known else None
    return out


def same_applied(a, b) -> bool:
    """Do two configs apply the same strategy (a value swapwatch cannot tell, None, matches any)?"""
    if a is None or b is None:
        return a is b
    return all(a[k] == b[k] or a[k] is None or b[k] is None for k in a)


def test_dsv3_log_against_a_qwen3_config_is_sw109_once_and_plot_agrees(capsys, tmp_path):
    """21.1: PASS with 0 findings while the map marked layers ✗ and plot counted 6 differences."""
    log, cfg = fx("logs", "families", "deepseek_v3_mtp.log"), fx("configs", "families", "qwen3_select.yaml")
    code, out, _ = sw("verify", log, "--config", cfg, capsys=capsys)
    assert code == 1 and "FAIL:" in out and "PASS" not in out
    assert out.count("is not a run of this config:") == 1 and "run: differs from the config on 1/1 ranks: 1 error (SW109)" in out
    assert "no qwen3 layer has" in out and "MTP block" in out and "the log fits deepseek_v3" in out
    code, out, _ = sw("plot", "strategy", log, "--config", cfg, "-o", tmp_path / "s.png", capsys=capsys)
    assert code == 0 and "not a run of this config (SW109)" in out and "verify: FAIL" in out


def test_the_map_never_marks_a_cell_no_failing_finding_names():
    """21.1: any ✗ in the layer map is a failing finding (one comparison decides both)."""
    from swapwatch.report.verify import layer_map

    for log in GENUINE:
        for cfg in CONFIGS:
            r = verify([log], config_path=cfg)
            if r.comparison is None:
                continue
            for rank, diff in r.comparison.ranks.items():
                for layer, action in r.comparison.cells(diff):
                    assert any(f.rank == rank and f.layer == layer and r.failing(f) for f in r.findings), \
                        (log, cfg, rank, layer, action)
            rows = layer_map(r)
            if any(row.differs for row in rows):
                assert r.verdict == "fail", (log, cfg)


def test_no_genuine_log_passes_against_a_config_that_applies_something_else():
    """Done-when: every genuine fixture log with every other fixture config whose applied
    strategy differs never PASSes (and each passes or fails its own config as expected)."""
    checked = 0
    for log, own in sorted(GENUINE.items()):
        mine = applied(own)
        assert verify([log], config_path=own).run_verdict == "applied", log
        for cfg in CONFIGS:
            if cfg == own or same_applied(applied(cfg), mine):
                continue
            try:
                r = verify([log], config_path=cfg)
            except Exception as exc:        # noqa: BLE001 - a bad-input answer is not a PASS
                from swapwatch.errors import InputError
                assert isinstance(exc, InputError), (log, cfg, exc)
                continue
            assert r.verdict != "pass", (log, cfg)
            checked += 1
    assert checked > 150


@pytest.fixture
def silent_log(tmp_path):
    """A rank log with no MindFormers line at all (the launcher ran something else)."""
    p = tmp_path / "worker_0.log"
    p.write_text("LAUNCHED\n")
    return str(p)


@pytest.mark.parametrize("config", [fx("configs", "families", "qwen3_moe_ignored_swap.yaml"),
                                    fx("configs", "families", "glm4_select.yaml"),
                                    fx("configs", "families", "qwen3_select.yaml"),
                                    fx("configs", "swap_case1.yaml"),
                                    fx("configs", "pynative_qwen3_select.yaml"),
                                    fx("configs", "demo_baseline.yaml")])
@pytest.mark.parametrize("strict", [False, True])
def test_a_log_without_mindformers_lines_is_not_verified_whatever_the_config(silent_log, config, strict, capsys):
    """21.2: PASSed with a Qwen3-MoE YAML (also --strict), SW106 with others: now the same SW106
    finding and NOT VERIFIED, exit 4, in every format."""
    args = ["verify", silent_log, "--config", config] + (["--strict"] if strict else [])
    code, out, _ = sw(*args, capsys=capsys)
    assert code == 4, out
    assert "PASS" not in out and out.rstrip().splitlines()[-1].startswith("NOT VERIFIED:")
    assert "run: NOT VERIFIED: no rank's log shows what MindFormers applied (0/1 ranks verified)" in out
    assert "no MindFormers line at all (no strategy, no steps); nothing could be verified" in out
    r = verify([silent_log], config_path=config, strict=strict)
    doc = json.loads(render(r, "json"))
    assert (doc["verdict"], doc["run_verdict"], doc["verified_ranks"]) == ("not_verified", "not_verified", [])
    assert [f["code"] for f in doc["findings"] if f["question"] == "run"] == ["SW106"]
    suite = ET.fromstring(render(r, "junit").split("?>", 1)[1]).find("testsuite")
    assert any(c.find("failure") is not None and c.find("failure").get("type") == "NOT_VERIFIED"
               for c in suite.findall("testcase"))
    assert "not verified" in render(r, "markdown").splitlines()[0]


def test_every_command_on_a_log_without_mindformers_lines_answers_clearly(silent_log, tmp_path, capsys):
    """Done-when: every command run on such a rank log says so (one line, or NOT VERIFIED)."""
    cfg = fx("configs", "swap_case1.yaml")
    code, _, err = sw("verify", silent_log, capsys=capsys)
    assert code == 2 and "no MindFormers line at all" in err and len(err.strip().splitlines()) == 1
    code, out, _ = sw("verify", silent_log, "--config", cfg, "--format", "json", capsys=capsys)
    assert code == 4 and json.loads(out)["verdict"] == "not_verified"
    code, out, err = sw("events", silent_log, capsys=capsys)
    assert code == 0 and out == "" and "no event in these logs" in err
    for args in (["plot", "memory", silent_log], ["plot", "strategy", silent_log],
                 ["plot", "strategy", silent_log, "--config", cfg], ["diff", silent_log, silent_log],
                 ["diff", silent_log, fx("logs", "swap_case1.log")], ["explain", silent_log],
                 ["estimate", silent_log], ["plan", silent_log, "--budget", "1G"]):
        if args[0] == "plot":
            args = args + ["-o", str(tmp_path / "x.png"), "--force"]
        code, out, err = sw(*args, capsys=capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (args, err)


def test_run_and_config_findings_are_said_apart(capsys):
    """21.3: the run applied what MindFormers does; the config's swap_config is ignored (SW306)."""
    log, cfg = fx("logs", "families", "qwen3_moe_ignored_swap.log"), fx("configs", "families", "qwen3_moe_ignored_swap.yaml")
    code, out, _ = sw("verify", log, "--config", cfg, capsys=capsys)
    assert code == 1
    assert "run: applied as configured on 1/1 ranks" in out
    assert "config: 1 error (SW306)" in out
    r = verify([log], config_path=cfg)
    assert (r.verdict, r.run_verdict, r.config_verdict) == ("fail", "applied", "errors")
    assert r.config_counts["error"] == 1 and r.run_counts["error"] == 0 and r.verified_ranks == [0]
    md = render(r, "markdown")
    assert "- run: applied as configured on 1/1 ranks" in md and "- config: 1 error (SW306)" in md
    props = {p.get("name"): p.get("value") for p in ET.fromstring(render(r, "junit").split("?>", 1)[1]).iter("property")}
    assert (props["run_verdict"], props["config_verdict"], props["verified_ranks"]) == ("applied", "errors", "1")


def test_a_rank_without_mindformers_lines_beside_verified_ones_is_counted(capsys):
    code, out, _ = sw("verify", fx("logs", "stdout_devices"), capsys=capsys)
    assert code == 0
    assert "run: applied as configured on 1/2 ranks; 3 warnings (SW108, SW112); 1 rank(s) not verified" in out


def test_verify_run_dir_uses_the_runs_own_config(tmp_path, capsys, monkeypatch):
    """21.4: `swapwatch verify RUN_DIR` of a `swapwatch run --config` run asked for --config."""
    monkeypatch.chdir(tmp_path)
    cfg = fx("configs", "families", "qwen3_moe_ignored_swap.yaml")
    code, out, _ = sw("run", "--config", cfg, "--run-dir", "rd", "--force", "--", "echo", "LAUNCHED", capsys=capsys)
    assert code == 4 and "NOT VERIFIED" in out                       # 21.2 through `run` too
    code, out, _ = sw("verify", "rd", capsys=capsys)
    assert code == 4
    assert ("config from rd/config.yaml (the run's own config as launched, named in run.json; "
            "--config to use another)") in out
    assert "config: 1 error (SW306)" in out
    code, out, _ = sw("verify", "rd", "--format", "json", capsys=capsys)
    assert json.loads(out)["config"]["path"] == "rd/config.yaml"


def test_a_run_dir_of_the_fixtures_verifies_against_its_config(capsys):
    code, out, _ = sw("verify", fx("logs", "cpu_swap"), capsys=capsys)
    assert code == 0 and "cpu_swap/config.yaml (the run's own config" in out


def test_diff_of_two_pynative_configs_is_per_layer(capsys):
    """21.11: `swapwatch diff` of PyNative configs exited 3 (AttributeError on LayerActions)."""
    a, b = fx("configs", "pynative_mixed.yaml"), fx("configs", "pynative_qwen3_select.yaml")
    code, out, err = sw("diff", a, b, capsys=capsys)
    assert code == 1 and err == ""
    assert "PyNative (r2.x) path" in out and "DIFFER: 4 of 4 layers" in out
    assert "recompute keys are layer ids" not in out            # a static-path note, not apply_ac's
    row1 = next(ln for ln in out.splitlines() if ln.startswith("1 "))
    assert "✗ yes → -" in row1 and "✗ - → mlp" in row1
    code, out, _ = sw("diff", b, b, "--format", "json", capsys=capsys)
    doc = json.loads(out)
    assert code == 0 and doc["same"] and doc["layers"][0]["a"]["full_recompute"] == "yes"


@pytest.mark.parametrize("pair", [("pynative_mixed.yaml", "conflict.yaml"), ("conflict.yaml", "pynative_pp2.yaml")])
def test_diff_of_a_pynative_and_a_static_config_is_one_line_exit_2(pair, capsys):
    code, out, err = sw("diff", *(fx("configs", p) for p in pair), capsys=capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "is a PyNative (r2.x) config and" in err and "static-graph (LayerSetting)" in err


def test_plot_strategy_and_verify_never_disagree():
    """21.1: verify and `plot strategy` read one comparison: the plot outlines a difference on a
    rank exactly where verify's map marks ✗, and draws no comparison where verify made none."""
    from swapwatch.plot.strategy_map import frame_differences, pick_rank

    pairs = 0
    for log in GENUINE:
        for cfg in CONFIGS:
            r = verify([log], config_path=cfg)
            if r.comparison is None:
                continue
            if not any(d.has_strategy_lines for d in r.comparison.ranks.values()):
                continue            # nothing logged: plot says so in one line (the test above)
            rank = pick_rank(r.runlog)
            diffs = frame_differences(r.plan, r.runlog, rank, r.comparison)
            comp = r.comparison
            cells = comp.cells(comp.ranks[rank])
            if comp.union is not None and comp.ranks[rank].has_strategy_lines:
                # each rank logs only its own stage (apply_ac): missing items are judged on all ranks together
                cells |= {(e.layer, e.action) for e in comp.union.missing if comp.missing_differs(e)}
            assert {(int(d.layer), d.mechanism) for d in diffs.itertuples()} == cells, (log, cfg)
            pairs += 1
    assert pairs > 50
