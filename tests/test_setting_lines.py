"""Round trip of MindFormers' per-layer LayerSetting lines (swapwatch.model.setting_lines): every line the
writer produces for a plan, in MindFormers' exact form and in the hooks' plain form, reads back
through the log grammar to that plan's per-layer actions (same kinds, paths, prefetch values), in
order. Fixture configs (every family) go through the whole reader (prefix, prefilter heads, rows);
random plans through the grammar's rows directly."""
from __future__ import annotations

import glob
import os
from typing import Any, List, Tuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from swapwatch.model import actions, families, patterns, setting_lines
from swapwatch.engine import strategy
from swapwatch.config import config_from_dicts, load_config
from swapwatch.errors import ConfigError
from swapwatch.parsers import iter_events
from swapwatch.parsers import layersetting
from swapwatch.parsers.grammar import LAYERSETTING
from swapwatch.parsers.model import ActionEvent, NoticeEvent
from swapwatch.parsers.prefix import collapse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = ("2026-01-01 00:00:00,000 - mindformers[mindformers/parallel_core/training_graph/transformer/utils.py:1]"
          " - INFO - ")


def _static_configs() -> List[str]:
    """Every fixture YAML on the LayerSetting path (the PyNative ones have their own engine)."""
    out = []
    for path in sorted(glob.glob(os.path.join(REPO, "fixtures", "configs", "**", "*.yaml"), recursive=True)):
        try:
            cfg = load_config(path)
            strategy.plan(cfg)
        except ConfigError:
            continue
        out.append(path)
    return out


def expected(plan: strategy.Plan) -> List[Tuple[Any, ...]]:
    """What each layer's lines must say, from the plan and the walks alone (not from any text)."""
    out: List[Tuple[Any, ...]] = []
    if plan.legacy_recompute is not None:
        return out
    for lp, mtp in strategy.all_layer_plans(plan):
        walker = plan.walker(lp.layer, mtp)
        i = lp.layer
        if lp.full_recompute and lp.full_recompute_logged:
            out.append(("full_recompute", i, [], None))
        keys = [k for k in actions.SELECT_ACTIONS if not (plan.swap and actions.BY_NAME[k].exclude)]
        for key in keys:
            mode = actions.WALK_MODE[key]
            paths: List[str] = []
            for pat in getattr(lp, key):
                res = walker(pat, mode)
                for cell in res.skipped_cells:
                    out.append(("cell_not_op", cell, "comm" if mode == "comm" else "exclude"))
                paths += patterns.logged_paths(res.raw_log)
            if paths:
                out.append((key, i, paths, None))
        if plan.swap:
            if lp.layer_swap is not None:
                out.append(("layer_swap", i, [], str(lp.layer_swap)))
            values = {}
            for pat, p in lp.op_swap.items():
                for path in patterns.logged_paths(walker(pat, "swap").raw_log):
                    values[path] = str(p)
            if values:
                out.append(("op_swap", i, list(values), values))
    return out


def read_back(events: List[Any], swap: bool) -> List[Tuple[Any, ...]]:
    out: List[Tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, ActionEvent):
            assert e.swap_mode in (swap, None) if e.action == "full_recompute" else e.swap_mode is swap
            if e.action == "op_swap":
                out.append(("op_swap", e.layer, list(e.paths), {k: str(v) for k, v in e.values.items()}))
            elif e.action == "layer_swap":
                out.append(("layer_swap", e.layer, [], str(e.value)))
            else:
                out.append((e.action, e.layer, list(e.paths), None))
        elif isinstance(e, NoticeEvent) and e.what == "cell_not_op":
            out.append(("cell_not_op", e.data["path"], e.data["for"]))
    return out


def written(plan: strategy.Plan) -> List[setting_lines.SettingLine]:
    return [ln for lp, mtp in strategy.all_layer_plans(plan)
            for ln in strategy.layer_lines(plan, lp, plan.walker(lp.layer, mtp))]


def test_grammar_rows_come_from_the_writer_module():
    rows = {r.name: r for r in LAYERSETTING}
    for kind in setting_lines.KINDS:
        assert rows[kind.name] == (kind.name, kind.regex, kind.head, kind.needle, kind.versions)


#: Cells where only operations are expected: the "got cell" line (no fixture YAML has one).
GOT_CELL = ({"select_comm_recompute": ["feed_forward", r"attention\.wq", "attention"],
             "select_recompute_exclude": [r"feed_forward\.w1", "attention"]}, {})
GOT_CELL_SWAP = ({"select_comm_recompute": {"feed_forward": [0, 1], r"attention\.wq": [1]}},
                 {"swap": True, "op_swap": [{"op_name": "attention", "backward_prefetch": 3, "layers": [1]}]})


def _plan(case: Any) -> strategy.Plan:
    if isinstance(case, str):
        return strategy.plan(load_config(case))
    return strategy.plan(config_from_dicts(case[0], case[1], num_layers=2))


CASES = _static_configs() + [GOT_CELL, GOT_CELL_SWAP]


@pytest.mark.parametrize("case", CASES, ids=lambda c: os.path.relpath(c, REPO) if isinstance(c, str) else "got_cell")
def test_fixture_config_lines_read_back_through_the_log_reader(case, tmp_path):
    plan = _plan(case)
    lines = written(plan)
    want = expected(plan)
    for form in ("text", "plain"):
        log = tmp_path / form / "worker_0.log"
        log.parent.mkdir()
        log.write_text("".join(PREFIX + getattr(ln, form) + "\n" for ln in lines), encoding="utf-8")
        got = read_back(list(iter_events([str(log)], show_progress=False)), plan.swap)
        assert got == want, form
    # the engine's expected log is the writer's exact text
    engine = [m for msgs in strategy.layer_messages(plan).values() for _, m in msgs]
    assert engine + [m for _, m in strategy.mtp_messages(plan)] == [ln.text for ln in lines]


def test_the_cases_cover_every_line_kind_and_every_family():
    kinds, fams = set(), set()
    for case in CASES:
        plan = _plan(case)
        kinds |= {ln.kind for ln in written(plan)}
        fams.add(plan.family.name)
    assert kinds == {k.name for k in setting_lines.KINDS}
    assert {"llama", "qwen3", "qwen3_moe", "deepseek_v3", "glm4", "telechat3"} <= fams


PATTERNS = [r"feed_forward\.mul", r"feed_forward\.w[123]", "attention", r".*\.norm", r"feed_forward\.m.l",
            r"attention\.flash_attention", "feed_forward", r"feed_forward\.w1\.activation\.silu",
            r"mlp\.mul", "mlp", r"self_attention\.core_attention", r"mlp\..*", r"nothing\.here", r".*_layernorm"]
ids = st.one_of(st.booleans(), st.lists(st.integers(0, 9), max_size=4))
counts = st.one_of(st.booleans(), st.lists(st.integers(0, 6), max_size=3))


@st.composite
def plans(draw):
    swap = draw(st.booleans())
    value = ids if swap else counts
    rc = {"recompute": draw(value)}
    for key in actions.SELECT_ACTIONS:
        if draw(st.booleans()):
            rc[key] = draw(st.dictionaries(st.sampled_from(PATTERNS), value, max_size=3))
    sc: dict = {"swap": swap}
    if swap and draw(st.booleans()):
        sc["layer_swap"] = [{"backward_prefetch": draw(st.integers(0, 4)), "layers": draw(ids)}]
    if swap and draw(st.booleans()):
        sc["op_swap"] = draw(st.lists(st.fixed_dictionaries({
            "op_name": st.sampled_from(PATTERNS), "backward_prefetch": st.one_of(st.integers(1, 4), st.just("Auto")),
            "layers": ids}), max_size=3))
    P = draw(st.integers(1, 3))
    V = draw(st.integers(1, 2))
    return dict(rc=rc, sc=sc, num_layers=draw(st.integers(P * V, 10)), pipeline_stage=P, pp_interleave_num=V,
                model=draw(st.sampled_from(families.known_families())))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plans())
def test_random_plans_lines_read_back_through_the_grammar(c):
    try:
        cfg = config_from_dicts(c["rc"], c["sc"], num_layers=c["num_layers"], pipeline_stage=c["pipeline_stage"],
                                pp_interleave_num=c["pp_interleave_num"], pipeline_interleave=True)
        plan = strategy.plan(cfg, model=c["model"])
    except ConfigError:
        assume(False)
        return
    want = expected(plan)
    for form in ("text", "plain"):
        events = [layersetting.parse(collapse(getattr(ln, form)), 0, "x") for ln in written(plan)]
        assert all(e is not None for e in events)
        assert read_back(events, plan.swap) == want, form


def test_plain_form_drops_quirks_only():
    line = setting_lines.op_swap(3, [(".attention", 20), (" a.x, a.y", "Auto")])
    assert line.text == "Set op_swap at layer 3: .attention, value=20,  a.x, value=Auto, a.y, value=Auto"
    assert line.plain == "Set op_swap at layer 3: attention, value=20, a.x, value=Auto, a.y, value=Auto"
    line = setting_lines.layer_swap(0, 2, all_layers=True)
    assert line.text == "Set layer swap at layer 0" + " " * 33 + "and value is: 2"
    assert line.plain == "Set layer swap at layer 0 and value is: 2"
    line = setting_lines.cell_not_op(1, "feed_forward", one_segment=True, comm=True)
    assert line.text.startswith("For communication recompute, .feed_forward is expected")
    assert line.plain.startswith("For communication recompute, feed_forward is expected")
