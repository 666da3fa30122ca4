"""verify's verdict, exit code and the four output formats, on hand-built runs."""
import json
import os
from xml.etree import ElementTree as ET

import pytest

from swapwatch.errors import InputError
from swapwatch.commands.verify import evaluate, normalise_codes, parse_env
from swapwatch.report.verify import document, layer_map, render

import verify_helpers as vh


def _mutated_case3():
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan, ranks=(0, 1))
    vh.actions(runlog.ranks[1], layer=1, action="op_swap")[0].values["feed_forward"] = 16
    return plan, runlog


def test_clean_run_passes():
    plan = vh.swap_case(1)
    r = evaluate(plan, vh.runlog_for(plan, ranks=(0, 1)), config_source="swap_case1.yaml")
    assert (r.verdict, r.exit_code, r.findings) == ("pass", 0, [])
    doc = document(r)
    # DESIGN §3.3's fields are unchanged; the added ones come beside them
    assert {k: doc[k] for k in ("verdict", "ranks", "layers", "findings")} == \
        {"verdict": "pass", "ranks": [0, 1], "layers": 4, "findings": []}
    assert doc["counts"] == {"error": 0, "warning": 0, "info": 0} and doc["num_layers"] == 4


def test_failing_run_and_json_shape():
    plan, runlog = _mutated_case3()
    r = evaluate(plan, runlog)
    assert (r.verdict, r.exit_code) == ("fail", 1)
    doc = json.loads(render(r, "json"))
    assert set(doc) == {"verdict", "ranks", "layers", "findings", "counts", "num_layers", "config",
                        "layer_map", "run_verdict", "config_verdict", "verified_ranks", "run_counts",
                        "config_counts"}
    assert (doc["run_verdict"], doc["config_verdict"], doc["verified_ranks"]) == ("differs", "ok", [0, 1])
    sw103 = next(f for f in doc["findings"] if f["code"] == "SW103")
    assert sw103 == {"code": "SW103", "severity": "error", "rank": 1, "layer": 1, "op": "feed_forward",
                     "expected": 15, "actual": 16, "message": sw103["message"],
                     "source": sw103["source"], "question": "run"}
    assert sw103["source"].startswith("worker_1.log:")
    assert {f["code"] for f in doc["findings"]} == {"SW103", "SW401"}


def test_warnings_pass_unless_strict_and_ignore_silences():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan)
    assert evaluate(plan, runlog).verdict == "pass"                     # SW105 is a warning
    strict = evaluate(plan, runlog, strict=True)
    assert (strict.verdict, strict.exit_code) == ("fail", 1)
    # the worked example's select set is MindFormers' default, which frees nothing on the legacy
    # layer (SW211, a warning too)
    quiet = evaluate(plan, runlog, strict=True, ignore=["sw105", "sw211"])
    assert (quiet.verdict, quiet.findings) == ("pass", [])


def test_unknown_ignore_code_and_bad_env_are_input_errors():
    with pytest.raises(InputError, match="SW777"):
        normalise_codes(["SW777"])
    assert normalise_codes(["sw101,SW102", " "]) == {"SW101", "SW102"}
    assert parse_env(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_env(["NOVALUE"])


def test_table_marks_differences_groups_findings_and_ends_with_verdict():
    plan, runlog = _mutated_case3()
    text = render(evaluate(plan, runlog, config_source="case3.yaml"), "table")
    lines = text.rstrip("\n").splitlines()
    assert lines[-1].startswith("FAIL: 2 error(s), 0 warning(s); 2 rank(s) [0-1], 4 layers")
    assert "Per-layer strategy, rank 1" in text
    row1 = next(line for line in lines if line.startswith("1 "))
    assert "✗ attention p=20, feed_forward p=15 → attention p=20, feed_forward p=16" in row1
    assert "  SW103 error: swap backward_prefetch differs from the config (1)  → swapwatch rules SW103" in text
    assert "[worker_1.log:" in text


def test_table_says_a_finding_every_rank_shares_once_json_keeps_all():
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan, ranks=tuple(range(8)))
    for rank in range(8):
        if rank != 5:                       # rank 5 differs from the others in its own way
            vh.actions(runlog.ranks[rank], layer=1, action="op_swap")[0].values["feed_forward"] = 16
    r = evaluate(plan, runlog)
    sw103 = [f for f in r.findings if f.code == "SW103"]
    assert sorted(f.rank for f in sw103) == [0, 1, 2, 3, 4, 6, 7]
    text = render(r, "table")
    lines = [ln for ln in text.splitlines() if "backward_prefetch" in ln or ln.startswith("    ranks")]
    assert "  SW103 error: swap backward_prefetch differs from the config (7)  → swapwatch rules SW103" in text
    folded = [ln for ln in text.splitlines() if ln.startswith("    ranks 0-4, 6-7 · layer 1:")]
    assert len(folded) == 1 and "[worker_0.log:" in folded[0] and "+6 more]" in folded[0], lines
    assert not any(ln.startswith("    rank 3 ") for ln in text.splitlines())
    assert len([f for f in json.loads(render(r, "json"))["findings"] if f["code"] == "SW103"]) == 7


def test_table_folds_identical_layers():
    plan = vh.recompute_48l()
    rows = layer_map(evaluate(plan, vh.runlog_for(plan)))
    labels = [r.label() for r in rows]
    assert labels[:3] == ["0-1", "2-3", "4"] and "25" in labels and len(rows) < 20


def test_table_marks_unreached_layers_of_a_truncated_log():
    plan = vh.swap_case(2)
    runlog = vh.runlog_for(plan)
    vh.truncate_after_layer(runlog.ranks[0], 0)
    r = evaluate(plan, runlog)
    row3 = next(x for x in layer_map(r) if 3 in x.layers)
    assert row3.cells["layer_swap"].text() == "p=20 ?"
    assert [f.code for f in r.findings] == ["SW106"]


def test_junit_one_testcase_per_rank_and_family():
    plan, runlog = _mutated_case3()
    root = ET.fromstring(render(evaluate(plan, runlog), "junit"))
    cases = root.findall("./testsuite/testcase")
    names = {(c.get("classname"), c.get("name")[:5]) for c in cases}
    assert ("swapwatch.rank_0", "SW1xx") in names and ("swapwatch.rank_1", "SW4xx") in names
    failed = {(c.get("classname"), c.get("name")[:5]) for c in cases if c.find("failure") is not None}
    assert failed == {("swapwatch.rank_1", "SW1xx"), ("swapwatch.rank_1", "SW4xx")}
    assert root.get("failures") == "2" and int(root.get("tests")) == len(cases)
    fail = next(c for c in cases if c.find("failure") is not None).find("failure")
    assert fail.get("type") in ("SW103", "SW401") and "worker_1.log:" in fail.text


def test_junit_warnings_are_output_not_failures_unless_strict():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan)
    root = ET.fromstring(render(evaluate(plan, runlog), "junit"))
    assert root.get("failures") == "0"
    assert any("SW105" in (o.text or "") for o in root.iter("system-out"))
    root = ET.fromstring(render(evaluate(plan, runlog, strict=True, ignore=["sw211"]), "junit"))
    assert root.get("failures") == "1"


def test_markdown_for_a_pr_comment():
    plan, runlog = _mutated_case3()
    md = render(evaluate(plan, runlog), "markdown")
    assert md.startswith("### swapwatch verify: ❌ fail")
    row = next(ln for ln in md.splitlines() if ln.startswith("| SW103 "))
    assert row.startswith("| SW103 | error | 1 | 1 | 1 | op swap feed_forward ran with backward_prefetch 16")
    assert "`worker_1.log:" in row and row.endswith("| `swapwatch rules SW103` |")
    assert "<details><summary>Per-layer strategy, rank 1" in md
    plan = vh.swap_case(4)
    assert "No findings." in render(evaluate(plan, vh.runlog_for(plan)), "markdown")


# ---------------------------------------------------------------------------------------------
# Issue 16.4: a rank that cannot be verified shows ?, never ✗ beside a pass
# ---------------------------------------------------------------------------------------------

def test_stdout_devices_run_shows_no_difference_beside_a_pass(capsys):
    """The user's command: `swapwatch verify fixtures/logs/stdout_devices` (rank 1 printed nothing)."""
    from swapwatch.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["verify", vh_fixture("stdout_devices")])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.rstrip().splitlines()[-1].startswith("PASS")
    assert "✗" not in out                                   # no difference marked beside the pass
    assert "Per-layer strategy, rank 0:" in out            # the map shows a rank that logged
    assert "not verified (no strategy lines): rank(s) 1" in out


def test_unverifiable_rank_map_is_all_question_marks():
    from swapwatch.commands.verify import verify

    r = verify([vh_fixture("stdout_devices")])
    rows = layer_map(r, rank=1, fold=False)
    assert rows and all(not row.differs for row in rows)
    assert {c.text().split()[-1] for row in rows for c in row.cells.values()} == {"?"}
    assert render(r, "json").count('"verified": true') == 1    # the shown rank (0) is verified


def vh_fixture(name):
    import os
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "logs", name)


# ---------------------------------------------------------------------------------------------
# Issue 16.12: JSON gains counts, config path + sha256, the per-layer map; JUnit properties first
# ---------------------------------------------------------------------------------------------

def test_json_has_counts_config_hash_and_layer_map(tmp_path):
    import hashlib
    import shutil

    from swapwatch.commands.verify import verify

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = tmp_path / "full.yaml"
    shutil.copy(os.path.join(root, "fixtures/plot_runs/configs/full.yaml"), cfg)
    run = os.path.join(root, "fixtures/plot_runs/select-2ranks")
    # the log is not a run of this config (SW109): the per-layer comparison, and so the map, is skipped
    doc = json.loads(render(verify([run], config_path=str(cfg)), "json"))
    assert [f["code"] for f in doc["findings"]] == ["SW109"] and doc["layer_map"]["layers"] == []
    # compared anyway (--ignore SW109): every difference is in the map
    r = verify([run], config_path=str(cfg), ignore=["SW109"])
    doc = json.loads(render(r, "json"))
    assert doc["counts"]["error"] == sum(f["severity"] == "error" for f in doc["findings"]) > 0
    assert doc["counts"]["warning"] == sum(f["severity"] == "warning" for f in doc["findings"])
    assert doc["config"] == {"path": str(cfg), "source": str(cfg),
                             "sha256": hashlib.sha256(cfg.read_bytes()).hexdigest()}
    assert doc["layers"] == doc["num_layers"] == 4           # `layers` stays the int it was
    lm = doc["layer_map"]
    assert lm["rank"] == 0 and [x["layer"] for x in lm["layers"]] == [0, 1, 2, 3]
    first = lm["layers"][0]
    assert first["expected"]["full_recompute"] == "yes" and "full_recompute" not in first["actual"]
    assert first["actual"]["select_recompute"] == "attention.flash_attention"
    assert set(first["differs"]) == {"full_recompute", "select_recompute"}
    assert first["ranks_differing"] == [0, 1]


def test_json_config_from_the_log_has_no_path():
    from swapwatch.commands.verify import verify

    doc = json.loads(render(verify([vh_fixture("msrun_2ranks")]), "json"))
    assert doc["config"]["path"] is None and doc["config"]["sha256"] is None
    assert doc["config"]["source"].startswith("rank 0 log (")


def test_junit_properties_come_before_the_testcases():
    plan, runlog = _mutated_case3()
    root = ET.fromstring(render(evaluate(plan, runlog, config_source="case3.yaml"), "junit"))
    suite = root.find("testsuite")
    tags = [child.tag for child in suite]
    assert tags[0] == "properties" and set(tags[1:]) == {"testcase"}
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["verdict"] == "fail" and props["errors"] == "2" and props["warnings"] == "0"


# ---------------------------------------------------------------------------------------------
# Issue 12.4: outputs that scale to 10,000 ranks; JSON keeps every finding
# ---------------------------------------------------------------------------------------------

def _many_ranks(n, own_value_every=0):
    """``n`` ranks of swap case 3: every 7th rank ran feed_forward with prefetch 16; ranks 5 and
    77 lost layer 3's op swap line; with ``own_value_every``, those ranks each used a prefetch of
    their own (a cause per rank: nothing to fold)."""
    plan = vh.swap_case(3)
    runlog = vh.runlog_for(plan, ranks=tuple(range(n)))
    for r in range(0, n, 7):
        vh.actions(runlog.ranks[r], layer=1, action="op_swap")[0].values["feed_forward"] = 16
    if own_value_every:
        for r in range(1, n, own_value_every):
            vh.actions(runlog.ranks[r], layer=2, action="op_swap")[0].values["feed_forward"] = 100 + r
    for r in (5, 77):
        vh.drop(runlog.ranks[r], vh.actions(runlog.ranks[r], layer=3, action="op_swap")[0])
    return evaluate(plan, runlog, config_source="case3.yaml")


@pytest.fixture(scope="module")
def ranks_10000():
    return _many_ranks(10_000)


@pytest.mark.scale
def test_10000_ranks_table_is_short_names_ranges_and_the_worst_ranks(ranks_10000):
    r = ranks_10000
    text = render(r, "table")
    lines = text.splitlines()
    assert len(lines) < 40 and max(len(x) for x in lines) < 400
    sw103 = next(x for x in lines if x.startswith("    ranks 0, 7, 14"))
    assert "(1429 in all) · layer 1:" in sw103 and "(1429) [worker_0.log:" in sw103
    assert any(x.startswith("    ranks 5, 77 · layer 3: op swap attention is configured") for x in lines)
    worst = next(x for x in lines if x.startswith("  ranks with failing findings: 1430;"))
    assert "rank 77 (4)" in worst                          # the rank hit hardest is named first
    assert lines[-1].startswith("FAIL:") and "10000 rank(s) [0-9999]" in lines[-1]
    doc = json.loads(render(r, "json"))
    assert len(doc["findings"]) == len(r.findings) == 2 * 1429 + 2 * 2   # JSON keeps every one


def test_markdown_groups_by_cause_and_fits_a_pr_comment_at_1024_ranks():
    r = _many_ranks(1024)
    md = render(r, "markdown")
    rows = [x for x in md.splitlines() if x.startswith("| SW")]
    assert len(rows) == 4 and len(md) < 65_536              # one row per cause, not per rank x layer
    assert any("| 0, 7, 14, 21, 28, …, 1022 (147 in all) | 1 | 147 |" in x for x in rows)
    # a cause per rank cannot fold: the report still fits, and says how many causes it left out
    many = _many_ranks(1024, own_value_every=1)
    md = render(many, "markdown")
    assert len(md) < 65_536 and "more causes" in md and "`--format json` has them all" in md


def test_junit_one_testcase_per_family_per_rank_group_at_10000_ranks(ranks_10000):
    r = ranks_10000
    root = ET.fromstring(render(r, "junit"))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) < 20
    names = [c.get("classname") for c in cases]
    assert "swapwatch.ranks_1-4,_6,_8-13,_15-20,_22-27,_…,_9997-9999_(8570_in_all)" in names
    failed = [c for c in cases if c.find("failure") is not None]
    assert root.get("failures") == str(len(failed)) and len(failed) >= 3


def test_verify_map_speaks_in_paths_in_every_column_and_marks_voided_swaps():
    """Issue 16.10: the map showed a regex in its 'swap overridden' column and paths elsewhere."""
    from swapwatch.commands.verify import verify

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = verify([vh_fixture("mtp_select.log")], config_path=os.path.join(root, "fixtures/configs/conflict.yaml"),
               ignore=["SW109"])          # another config's log, compared layer by layer on purpose
    text = render(r, "table")
    table = text[:text.index("Findings")]
    header = next(ln for ln in table.splitlines() if ln.startswith("layer "))
    assert header.split("  ")[:3] == ["layer", "stage", "full"] and "overridden" not in header
    assert "\\" not in table                                   # no regex anywhere in the map
    row2 = next(ln for ln in table.splitlines() if ln.startswith("2 "))
    assert "✗ !feed_forward.w1 p=1 → -" in row2                # the voided swap, marked as in explain
    assert "stage 0: layers 0-3 (4), full 2, select 1, comm 0, swap 3, voided swap 2" in table


def test_messages_carry_no_place_the_renderers_add_it_from_the_fields():
    """A message says what; rank and layer are fields, and the table, JUnit and Markdown put them
    in front from the fields alone (a "rank 9" inside a message is never read back)."""
    import re

    from swapwatch.report import finding_groups
    from swapwatch.checks import Finding

    plan, runlog = _mutated_case3()
    r = evaluate(plan, runlog)
    assert r.findings and all(not re.match(r"(rank|layer) \d", f.message) for f in r.findings)
    f = next(f for f in r.findings if f.code == "SW103")
    assert (f.rank, f.layer) == (1, 1) and finding_groups.line(f) == f"rank 1 · layer 1: {f.message}"
    assert f"    {finding_groups.line(f)} [" in render(r, "table")
    assert f'message="{finding_groups.line(f)}"' in render(r, "junit")
    assert f"| SW103 | error | 1 | 1 | 1 | {f.message} |" in render(r, "markdown")
    # the where comes from the fields, whatever the text says
    odd = [Finding("SW101", "error", "rank 9: looks placed", rank=r_, layer=2) for r_ in (0, 1, 2)]
    (g,) = finding_groups.group(odd)
    assert g.text() == "ranks 0-2 · layer 2: rank 9: looks placed"
    assert finding_groups.line(Finding("SW305", "warning", "config-wide")) == "config-wide"


def test_explain_findings_have_the_layer_as_a_field_and_in_front_of_the_table_line():
    from swapwatch.commands.explain import explain
    from swapwatch.report.explain import render_table

    ex = explain("fixtures/configs/conflict.yaml")
    sw201 = [f for f in ex.findings if f.code == "SW201"]
    assert [f.layer for f in sw201] == [0, 2] and all(f.message.startswith("swap has no effect") for f in sw201)
    assert "    layer 0: swap has no effect: layer swap (prefetch 2)" in render_table(ex)
