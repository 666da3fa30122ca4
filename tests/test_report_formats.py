"""Every output format is one name in swapwatch/report/formats.py and one function in the result's renderer:
the CLI offers exactly those names, and every renderer answers each of them (and refuses any other), on real
fixtures of both code paths."""
from __future__ import annotations

import json
import os

import click
import pytest

from swapwatch.cli import cli
from swapwatch.commands.diff import diff
from swapwatch.commands.explain import explain
from swapwatch.commands.verify import verify
from swapwatch.report import diff as diff_render
from swapwatch.report import explain as explain_render
from swapwatch.report import formats
from swapwatch.report import verify as verify_render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
LOGS = os.path.join(ROOT, "fixtures", "logs")


def _choices(*path: str):
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    opt = next(p for p in cmd.params if p.name == "fmt")
    assert isinstance(opt.type, click.Choice)
    return tuple(opt.type.choices)


@pytest.mark.parametrize("command,names", [
    (("explain",), formats.EXPLAIN), (("verify",), formats.VERIFY), (("diff",), formats.DIFF),
    (("events",), formats.EVENTS), (("estimate",), formats.ESTIMATE), (("plan",), formats.PLAN),
    (("tune",), formats.TUNE)])
def test_the_cli_offers_exactly_the_formats_the_table_names(command, names):
    assert _choices(*command) == tuple(names)


@pytest.mark.parametrize("config", ["swap_case2.yaml", "pynative_qwen3_select.yaml"])
def test_explain_renders_every_format_of_both_paths(config):
    ex = explain(os.path.join(CONFIGS, config))
    out = {fmt: explain_render.render(ex, fmt) for fmt in formats.EXPLAIN}
    assert json.loads(out["json"]) and out["table"].startswith(os.path.join(CONFIGS, config))
    assert out["formative"].strip()
    with pytest.raises(ValueError):
        explain_render.render(ex, "nosuch")


@pytest.mark.parametrize("logs,config", [("swap_case1.log", "swap_case1.yaml"),
                                         ("pynative_qwen3", "pynative_qwen3_select.yaml")])
def test_verify_renders_every_format_of_both_paths(logs, config):
    res = verify([os.path.join(LOGS, logs)], config_path=os.path.join(CONFIGS, config))
    out = {fmt: verify_render.render(res, fmt) for fmt in formats.VERIFY}
    assert json.loads(out["json"])["verdict"] == res.verdict
    assert out["junit"].startswith("<?xml") and out["markdown"].startswith("### swapwatch verify")
    assert "Per-layer strategy" in out["table"]
    with pytest.raises(ValueError):
        verify_render.render(res, "nosuch")


def test_diff_renders_every_format():
    res = diff(os.path.join(CONFIGS, "swap_case1.yaml"), os.path.join(CONFIGS, "swap_case2.yaml"))
    out = {fmt: diff_render.render(res, fmt) for fmt in formats.DIFF}
    assert json.loads(out["json"]) and out["table"].startswith("A: ")
    with pytest.raises(ValueError):
        diff_render.render(res, "nosuch")
