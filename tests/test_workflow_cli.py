"""Issue 16 (14), what a user typed and expected: ``swapwatch rules SW201`` reads as text in a
terminal (bold headings, no reST markup), ``rules 201`` / ``rules sw201`` work, ``--help`` shows
whole command summaries, ``events`` filters by ``--kind`` / ``--rank``."""
from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from swapwatch.checks import REGISTRY, load_rules
from swapwatch.cli import cli
from swapwatch.report.rules import render_doc

LOGS = "fixtures/logs/msrun_2ranks"


def invoke(*args, color=False):
    return CliRunner().invoke(cli, list(args), color=color)


@pytest.mark.parametrize("code", ["SW201", "201", "sw201", " Sw201 "])
def test_rules_accepts_code_forms(code):
    r = invoke("rules", code)
    assert r.exit_code == 0 and r.output.startswith("SW201 (error, decided from the config alone)")


def test_rules_renders_markup_plain_when_piped():
    load_rules()
    for code in sorted(REGISTRY):
        out = invoke("rules", code).output
        prose = "\n".join(ln for ln in out.splitlines() if not ln.startswith(" "))
        assert "**" not in prose and "``" not in prose and "\x1b[" not in out, code
        assert "\nWhat it means. " in out and "\nHow to fix it." in out, code
    out = invoke("rules", "SW201").output
    assert "it logs Set layer swap / Set op_swap for" in out
    assert "recompute wins (MindFormers' SWAP documentation)" in out
    # the YAML fix is kept exactly, regex backslashes and all
    assert "        - op_name: '.*\\.flash_attention'\n" in out


def test_rules_bold_headings_on_a_terminal():
    out = invoke("rules", "SW201", color=True).output
    assert "\x1b[1mWhat it means.\x1b[0m" in out and "\x1b[1mHow to fix it.\x1b[0m" in out
    assert "**" not in out


def test_render_doc_literal_block_and_double_colon():
    doc = "**How to fix it.** Use ``x``::\n\n    a: ``kept``\n\nText with ``a\nb`` and *emph*::\n\n    y"
    assert render_doc(doc) == "How to fix it. Use x:\n\n    a: ``kept``\n\nText with a\nb and emph:\n\n    y"


def test_help_shows_whole_summaries():
    out = invoke("--help").output
    commands = out.split("Commands:")[1]
    assert not any(ln.rstrip().endswith("...") for ln in commands.splitlines()) and "(e.g.\n" not in out
    flat = " ".join(out.split())
    assert "rules List every rule, or explain one: `swapwatch rules SW201` (also `201`, `sw201`)." in flat
    assert "verify Check that worker logs show exactly the strategy the config asks for." in flat
    plot = invoke("plot", "--help").output.split("Commands:")[1]
    assert not any(ln.rstrip().endswith("...") for ln in plot.splitlines())


def test_events_kind_and_rank_filters():
    rows = [json.loads(x) for x in invoke("events", LOGS, "--kind", "step", "--rank", "1").output.splitlines()]
    assert rows and {(r["kind"], r["rank"]) for r in rows} == {("step", 1)}
    both = [json.loads(x) for x in invoke("events", LOGS, "--kind", "step", "--kind", "notice",
                                          "--rank", "0-1").output.splitlines()]
    assert {r["kind"] for r in both} == {"step", "notice"} and {r["rank"] for r in both} == {0, 1}
    assert len(both) > len(rows)
    plural = invoke("events", LOGS, "--kind", "steps", "--rank", "1").output
    assert plural == invoke("events", LOGS, "--kind", "step", "--rank", "1").output


def test_events_csv_of_one_kind_has_its_columns():
    out = invoke("events", LOGS, "--format", "csv", "--kind", "memory").output
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["kind", "rank", "source", "metric", "bytes", "step", "origin"]
    assert {r["kind"] for r in rows} == {"memory"} and all(int(r["bytes"]) > 0 for r in rows)


@pytest.mark.parametrize("args, needle", [
    (["--kind", "bogus"], "--kind bogus: unknown event kind; known: action,"),
    (["--rank", "3-1"], "--rank 3-1: 3-1 is not a rank or an increasing range"),
    (["--rank", "x"], "--rank x: expected rank numbers like 0,1,4-7"),
])
def test_events_bad_filters_exit_2(args, needle, capsys):
    from swapwatch.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["events", LOGS, *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1
