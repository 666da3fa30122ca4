"""verify's verdict, exit code and the four output formats, on hand-built runs."""
import json
from xml.etree import ElementTree as ET

import pytest

from swapwatch.errors import InputError
from swapwatch.verify import evaluate, normalise_codes, parse_env
from swapwatch.verify_render import layer_map, render

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
    assert r.to_json() == {"verdict": "pass", "ranks": [0, 1], "layers": 4, "findings": []}


def test_failing_run_and_json_shape():
    plan, runlog = _mutated_case3()
    r = evaluate(plan, runlog)
    assert (r.verdict, r.exit_code) == ("fail", 1)
    doc = json.loads(render(r, "json"))
    assert set(doc) == {"verdict", "ranks", "layers", "findings"}
    sw103 = next(f for f in doc["findings"] if f["code"] == "SW103")
    assert sw103 == {"code": "SW103", "severity": "error", "rank": 1, "layer": 1, "op": "feed_forward",
                     "expected": 15, "actual": 16, "message": sw103["message"],
                     "source": sw103["source"]}
    assert sw103["source"].startswith("worker_1.log:")
    assert {f["code"] for f in doc["findings"]} == {"SW103", "SW401"}


def test_warnings_pass_unless_strict_and_ignore_silences():
    plan = vh.recompute_48l()
    runlog = vh.runlog_for(plan)
    assert evaluate(plan, runlog).verdict == "pass"                     # SW105 is a warning
    strict = evaluate(plan, runlog, strict=True)
    assert (strict.verdict, strict.exit_code) == ("fail", 1)
    quiet = evaluate(plan, runlog, strict=True, ignore=["sw105"])
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
    assert "✗ attention=20, feed_forward=15 → attention=20, feed_forward=16" in row1
    assert "  SW103 error: swap backward_prefetch differs from the config (1)" in text
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
    assert "  SW103 error: swap backward_prefetch differs from the config (7)" in text
    folded = [ln for ln in text.splitlines() if ln.startswith("    ranks 0-4, 6-7 layer 1:")]
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
    root = ET.fromstring(render(evaluate(plan, runlog, strict=True), "junit"))
    assert root.get("failures") == "1"


def test_markdown_for_a_pr_comment():
    plan, runlog = _mutated_case3()
    md = render(evaluate(plan, runlog), "markdown")
    assert md.startswith("### swapwatch verify: ❌ fail")
    assert "| SW103 | error | 1 | 1 | feed_forward | 15 | 16 | `worker_1.log:" in md
    assert "<details><summary>Per-layer strategy, rank 1" in md
    plan = vh.swap_case(4)
    assert "No findings." in render(evaluate(plan, vh.runlog_for(plan)), "markdown")
