"""Config-time rules: each fires on the case it is about and stays quiet otherwise."""

import pytest

from swapwatch.engine import strategy
from swapwatch.checks import CheckContext, rule_variants, run_rules
from swapwatch.config import config_from_dicts

ALL4 = [{"op_name": "attention", "backward_prefetch": 20, "layers": True}]


def findings(rc=None, sc=None, env=None, context=None, code=None, **geo):
    geo.setdefault("num_layers", 4)
    cfg = config_from_dicts(rc or {}, sc or {}, context=context, **geo)
    plan = strategy.plan(cfg)
    out = run_rules(CheckContext(plan=plan, config=cfg, env=dict(env or {})), needs=("config",))
    return [f for f in out if code is None or f.code == code]


def test_registered_with_docstrings():
    for code in ("SW104", "SW201", "SW203", "SW301", "SW302", "SW303", "SW304", "SW305"):
        rule = rule_variants(code)[0]
        assert rule.needs == "config" and rule.title and "How to fix it" in (type(rule).__doc__ or "")
    for code, needs in (("SW109", "run"), ("SW112", "run"), ("SW204", "config"), ("SW205", "config"),
                        ("SW206", "config"), ("SW403", "run")):         # issue 16's rules
        rule = rule_variants(code)[0]
        doc = type(rule).__doc__ or ""
        assert rule.needs == needs and rule.title and rule.severity in ("error", "warning")
        assert all(h in doc for h in ("**What it means.**", "**Why it matters.**", "**How to fix it.**")), code


def test_sw201_fires_on_full_and_same_op():
    f = findings({"recompute": [0], "select_recompute": {"attention": [1]}},
                 {"swap": True, "op_swap": ALL4 + [{"op_name": r"attention\.wq", "backward_prefetch": 2,
                                                    "layers": [2]}]}, code="SW201")
    assert [x.layer for x in f] == [0, 1]
    assert "the whole layer is recomputed" in f[0].message
    assert "select recompute 'attention' recomputes it" in f[1].message and f[1].severity == "error"


def test_sw201_cell_recompute_covers_child_swap():
    f = findings({"select_recompute": {"feed_forward": [0]}},
                 {"swap": True, "op_swap": [{"op_name": r"feed_forward\.w1", "backward_prefetch": 1, "layers": [0]}]},
                 code="SW201")
    assert len(f) == 1 and f[0].layer == 0


def test_sw201_quiet():
    assert not findings({"recompute": [0]}, {"swap": True, "op_swap": [
        {"op_name": "attention", "backward_prefetch": 1, "layers": [1, 2]}]}, code="SW201")
    assert not findings({"recompute": True}, code="SW201")          # no swap at all


def test_sw203():
    f = findings({"select_recompute_exclude": {r"feed_forward\.mul": [1]}}, {"swap": True}, code="SW203")
    assert len(f) == 1 and f[0].severity == "warning" and "never applied" in f[0].message
    assert not findings({"select_recompute_exclude": {r"feed_forward\.mul": [1]}}, code="SW203")
    assert not findings({}, {"swap": True}, code="SW203")


def test_sw301():
    f = findings({}, {"swap": True}, context={"memory_optimize_level": "O1"}, code="SW301")
    assert len(f) == 1 and f[0].actual == "O1"
    assert not findings({}, {"swap": True}, context={"memory_optimize_level": "O0"}, code="SW301")
    assert not findings({}, {"swap": False}, context={"memory_optimize_level": "O1"}, code="SW301")


def test_sw302_only_when_env_known():
    assert not findings({}, {"swap": True}, code="SW302")
    assert findings({}, {"swap": True}, env={"HOME": "/root"}, code="SW302")
    assert not findings({}, {"swap": True}, env={"ENABLE_LAZY_INLINE_NO_PIPELINE": "1"}, code="SW302")
    assert not findings({}, {"swap": True}, env={"HOME": "/root"}, code="SW302", num_layers=4, pipeline_stage=2)


def test_sw303():
    f = findings({}, {"swap": True}, context={"device_target": "CPU", "mode": 1, "jit_config": {"jit_level": "O2"}}, code="SW303")
    assert len(f) == 3 and all(x.severity == "warning" for x in f)
    assert not findings({}, {"swap": True}, context={"device_target": "Ascend", "mode": 0}, code="SW303")
    assert not findings({}, {}, context={"device_target": "CPU"}, code="SW303")


def test_sw304():
    f = findings({}, {}, code="SW304", num_layers=8, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=False)
    assert len(f) == 1
    assert not findings({}, {}, code="SW304", num_layers=8, pipeline_stage=2, pp_interleave_num=2,
                        pipeline_interleave=True)


def test_sw305():
    f = findings({}, {"swap": True, "default_prefetch": 5, "op_swap": ALL4}, code="SW305")
    assert len(f) == 1 and "op_swap" in f[0].message
    assert not findings({}, {"swap": True, "default_prefetch": 5}, code="SW305")
    assert not findings({}, {"swap": True, "op_swap": ALL4}, code="SW305")


def test_sw104_config_time():
    f = findings({"select_recompute": {r"attention\.flash attention": True, r"feed_forward\.mul": True},
                  "select_comm_recompute_exclude": {"attention": True}}, code="SW104")
    msgs = {x.op: x.message for x in f}
    assert set(msgs) == {r"attention\.flash attention", "attention"}
    assert "nothing in the tinyllama layer" in msgs[r"attention\.flash attention"]
    assert "only reaches cell(s) attention" in msgs["attention"]
    assert not findings({"select_recompute": True}, code="SW104")
    f = findings({}, {"swap": True, "op_swap": [{"op_name": r"nothing\.here", "backward_prefetch": 1,
                                                 "layers": True}]}, code="SW104")
    assert len(f) == 1 and f[0].layer is None and "(applied on layers 0-3)" in f[0].message


def test_findings_cite_yaml_lines(tmp_path):
    from swapwatch.commands.explain import explain

    p = tmp_path / "c.yaml"
    p.write_text("model: {model_config: {num_layers: 2}}\ncontext:\n  memory_optimize_level: O1\n"
                 "swap_config:\n  swap: True\n")
    ex = explain(str(p))
    f = [x for x in ex.findings if x.code == "SW301"]
    assert f and f[0].source == f"{p}:3" and ex.exit_code == 1


def test_a_crashing_rule_is_one_finding_and_the_others_still_run(monkeypatch):
    """A bug in one rule does not sink the report: one error finding names the rule and the
    exception, every other rule's findings are still there, and explain exits as for an error."""
    from swapwatch import checks
    from swapwatch.commands.explain import explain

    before = explain("fixtures/configs/conflict.yaml")
    rule = checks.VARIANTS["SW201"]["config"]

    def boom(ctx):
        raise ZeroDivisionError("division by zero")
        yield  # pragma: no cover

    monkeypatch.setattr(rule, "check", boom)
    monkeypatch.delenv("SWAPWATCH_DEBUG", raising=False)
    after = explain("fixtures/configs/conflict.yaml")
    crashed = [f for f in after.findings if f.code == "SW201"]
    assert len(crashed) == 1 and crashed[0].severity == "error"
    assert "crashed" in crashed[0].message and "ZeroDivisionError" in crashed[0].message
    others = sorted((f.code, f.message) for f in before.findings if f.code != "SW201")
    assert sorted((f.code, f.message) for f in after.findings if f.code != "SW201") == others
    assert after.exit_code == 1
    monkeypatch.setenv("SWAPWATCH_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        explain("fixtures/configs/conflict.yaml")
