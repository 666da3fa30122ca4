"""The rules read the plan and the comparison typed by their view (``checks.CheckContext``, docs/DESIGN.md §1.2).

A LayerSetting rule reads ``ctx.static_plan`` / ``ctx.static_comparison``, an ``apply_ac`` rule
``ctx.pynative_plan`` / ``ctx.pynative_comparison``; ``Rule.views`` keeps the other view's plan from it, and a
rule that asks for the wrong one anyway is reported as crashed (one error finding naming it), never answered
with the wrong object. Real plans of real fixtures, real rules.
"""
from __future__ import annotations

import os
import shutil

import pytest

from swapwatch.checks import VARIANTS, CheckContext, Rule, _run_one, is_apply_ac, run_rules
from swapwatch.config import load_config
from swapwatch.paths import explain_pynative
from swapwatch.plan import Plan
from swapwatch.plan_view import APPLY_AC, LAYER_SETTING
from swapwatch import strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
PYN = os.path.join(CONFIGS, "pynative_qwen3_select.yaml")
STATIC = os.path.join(CONFIGS, "swap_case1.yaml")
PYN_LOGS = os.path.join(ROOT, "fixtures", "logs", "pynative_qwen3")


@pytest.fixture(scope="module")
def static():
    cfg = load_config(STATIC)
    return strategy.plan(cfg), cfg


@pytest.fixture(scope="module")
def pynative():
    ex = explain_pynative(PYN)
    return ex.plan, ex.config


def test_each_view_gets_its_own_plan_typed(static, pynative):
    plan, cfg = static
    ctx = CheckContext(plan=plan, config=cfg)
    assert ctx.view == LAYER_SETTING and ctx.static_plan is plan and isinstance(ctx.static_plan, Plan)
    assert not is_apply_ac(plan)
    with pytest.raises(TypeError, match="apply_ac rule read a plan of the layer_setting view"):
        _ = ctx.pynative_plan
    pplan, pcfg = pynative
    pctx = CheckContext(plan=pplan, config=pcfg)
    assert pctx.view == APPLY_AC and pctx.pynative_plan is pplan and is_apply_ac(pplan)
    with pytest.raises(TypeError, match="layer_setting rule read a plan of the apply_ac view"):
        _ = pctx.static_plan


def test_no_plan_reads_as_a_layer_setting_context_without_one():
    ctx = CheckContext(plan=None)
    assert ctx.view == LAYER_SETTING and ctx.static_plan is None and ctx.static_comparison is None
    assert not is_apply_ac(None)
    with pytest.raises(TypeError):
        _ = ctx.pynative_plan
    # every config rule of the LayerSetting view runs on it and finds nothing (none crashes)
    assert run_rules(ctx, needs=("config",)) == []


def test_each_view_gets_its_own_comparison_typed(tmp_path, pynative):
    from swapwatch.parsers import read_logs
    from swapwatch.pynative.verify import PynativeComparison, comparison

    pplan, pcfg = pynative
    run = tmp_path / "run"
    shutil.copytree(PYN_LOGS, run)
    runlog = read_logs([str(run)])
    pctx = CheckContext(plan=pplan, config=pcfg, runlog=runlog, comparison=comparison(pplan, runlog))
    assert isinstance(pctx.pynative_comparison, PynativeComparison)
    with pytest.raises(TypeError, match="layer_setting rule read the comparison of the apply_ac view"):
        _ = pctx.static_comparison


def test_a_rule_asking_for_the_other_views_plan_is_reported_crashed(static, pynative):
    """``Rule.views`` makes it impossible through ``run_rules``; called directly, the accessor refuses and the
    rule is reported as a crashed rule under its own code, not run on the wrong plan."""
    class WantsApplyAc(Rule):
        code, severity, title, needs = "SW997", "warning", "t", "config"

        def check(self, ctx):
            return [self.finding(str(len(ctx.pynative_plan.layers)))]

    plan, cfg = static
    found = _run_one(WantsApplyAc(), CheckContext(plan=plan, config=cfg))
    assert len(found) == 1 and found[0].code == "SW997" and found[0].severity == "error"
    assert "crashed" in found[0].message and "TypeError" in found[0].message
    # the SW5xx rules, which read pynative_plan, are never given a LayerSetting plan by run_rules
    codes = {f.code for f in run_rules(CheckContext(plan=plan, config=cfg), needs=("config",))}
    assert not any(c.startswith("SW5") for c in codes)
    pplan, pcfg = pynative
    pcodes = {f.code for f in run_rules(CheckContext(plan=pplan, config=pcfg), needs=("config",))}
    assert all(APPLY_AC in VARIANTS[c]["config"].views for c in pcodes)
