"""One comparison, the rules written once (``compare.Comparison``, ``checks``; docs/DESIGN.md §1.2).

Each code path says what its plan makes the log show and how its log reads back (``codepaths.CodePath``:
``expected_log`` / ``logged``); both make the same :class:`~swapwatch.engine.compare.Comparison`, and every run rule reads
that one type. A rule of LayerSetting plans reads them typed (``ctx.static_plan``); ``Rule.views`` keeps other
plans from it, and a rule that asks for the wrong one anyway is reported as crashed (one error finding naming it),
never answered with the wrong object. Real plans of real fixtures, real logs, real rules.
"""
from __future__ import annotations

import os
import shutil

import pytest

from swapwatch.engine import codepaths
from swapwatch.checks import VARIANTS, CheckContext, Rule, _run_one, run_rules
from swapwatch.engine.compare import Comparison
from swapwatch.parsers import read_logs
from swapwatch.model.plan import Plan
from swapwatch.model.plan_view import APPLY_AC, LAYER_SETTING, VIEWS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
PYN = os.path.join(CONFIGS, "pynative_qwen3_select.yaml")
STATIC = os.path.join(CONFIGS, "swap_case1.yaml")
PYN_LOGS = os.path.join(ROOT, "fixtures", "logs", "pynative_qwen3")
STATIC_LOG = os.path.join(ROOT, "fixtures", "logs", "swap_case1.log")


def _planned(path):
    doc, cp = codepaths.read(path)
    config, plan = cp.configure(doc)
    return cp, plan, config


@pytest.fixture(scope="module")
def static():
    return _planned(STATIC)


@pytest.fixture(scope="module")
def pynative():
    return _planned(PYN)


def test_each_path_makes_the_one_comparison(static, pynative, tmp_path):
    cp, plan, _ = static
    comp = cp.compare(plan, read_logs([STATIC_LOG]))
    assert type(comp) is Comparison and not comp.per_stage and comp.union is None
    assert all(not e.literal for items in comp.expected.values() for e in items)
    pcp, pplan, _ = pynative
    run = tmp_path / "run"
    shutil.copytree(PYN_LOGS, run)
    pcomp = pcp.compare(pplan, read_logs([str(run)]))
    assert type(pcomp) is Comparison and set(pcomp.ranks) == {0, 1}
    # apply_ac's items are the module paths it wrapped, matched as written; its maps are items too
    items = [e for row in pcomp.expected.values() for e in row]
    assert items and all(e.literal for e in items if e.pattern is not None)
    assert any(e.action.startswith("map:") for e in items)
    # the real run logged what the plan says: nothing missing, nothing extra, on both ranks
    assert all(not d.missing and not d.extra and d.has_strategy_lines for d in pcomp.ranks.values())
    assert [n.data["pattern"] for n in pcomp.no_match(pcomp.ranks[0])] == ["nothing"]


def test_each_view_gets_its_own_plan_typed(static, pynative):
    _, plan, cfg = static
    ctx = CheckContext(plan=plan, config=cfg)
    assert ctx.view == LAYER_SETTING and ctx.static_plan is plan and isinstance(ctx.static_plan, Plan)
    assert ctx.static_config is cfg
    _, pplan, pcfg = pynative
    pctx = CheckContext(plan=pplan, config=pcfg)
    assert pctx.view == APPLY_AC and pctx.static_config is None
    with pytest.raises(TypeError, match="layer_setting rule read a plan of the apply_ac view"):
        _ = pctx.static_plan


def test_no_plan_reads_as_a_layer_setting_context_without_one():
    ctx = CheckContext(plan=None)
    assert ctx.view == LAYER_SETTING and ctx.static_plan is None and ctx.comparison is None
    # every config rule of the LayerSetting view runs on it and finds nothing (none crashes)
    assert run_rules(ctx, needs=("config",)) == []


def test_a_rule_asking_for_the_other_views_plan_is_reported_crashed(static, pynative):
    """``Rule.views`` makes it impossible through ``run_rules``; called directly, the accessor refuses and the
    rule is reported as a crashed rule under its own code, not run on the wrong plan."""
    class WantsStatic(Rule):
        code, severity, title, needs = "SW997", "warning", "t", "config"

        def check(self, ctx):
            return [self.finding(str(len(ctx.static_plan.layers)))]

    _, pplan, pcfg = pynative
    found = _run_one(WantsStatic(), CheckContext(plan=pplan, config=pcfg))
    assert len(found) == 1 and found[0].code == "SW997" and found[0].severity == "error"
    assert "crashed" in found[0].message and "TypeError" in found[0].message
    # the SW5xx rules, which read the apply_ac plan, are never given a LayerSetting plan by run_rules
    _, plan, cfg = static
    codes = {f.code for f in run_rules(CheckContext(plan=plan, config=cfg), needs=("config",))}
    assert not any(c.startswith("SW5") for c in codes)
    pcodes = {f.code for f in run_rules(CheckContext(plan=pplan, config=pcfg), needs=("config",))}
    assert all(APPLY_AC in VARIANTS[c]["config"].views for c in pcodes)


def test_the_comparison_rules_are_written_once_for_every_path():
    """SW101/102/104/106/108/401 read every path's comparison with one implementation: no rule module asks
    which view it is given (its source has no view test)."""
    import inspect

    for code in ("SW101", "SW102", "SW104", "SW106", "SW108", "SW401"):
        rule = VARIANTS[code]["run"]
        assert rule.views == VIEWS, code
        src = inspect.getsource(type(rule))
        assert "ctx.view" not in src and "_apply_ac" not in src and "APPLY_AC" not in src, code
