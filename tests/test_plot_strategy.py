"""plot strategy: the map draws exactly the Plan / the logged actions, overridden swaps and differences marked."""
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.model.plan import Override
from swapwatch.plot import frame_differences, plot_strategy, strategy_frame

from plot_helpers import make_plan, make_strategy_log, patches_by_gid, png_size, svg_texts

REPO = Path(__file__).resolve().parent.parent


def cells(fig, source):
    """{(layer, mechanism, item)} of the filled cells drawn for one source."""
    out = set()
    for gid in patches_by_gid(fig):
        parts = gid.split("|")
        if parts[0] == "cell" and parts[1] == source:
            out.add((int(parts[2]), parts[3], None if parts[4] == "None" else parts[4]))
    return out


def frame_cells(frame):
    return {(int(r.layer), r.mechanism, r.item) for r in frame.itertuples()}


def test_plan_frame_is_what_mindformers_applies_per_layer():
    plan = make_plan()
    f = strategy_frame(plan)
    assert set(f["source"]) == {"config"}
    full = f[f["mechanism"] == "full_recompute"]
    assert list(full["layer"]) == [0, 1] and full["item"].isna().all()
    op = f[f["mechanism"] == "op_swap"]
    assert list(op["layer"]) == [4, 5, 6, 7] and set(op["value"]) == {2}
    ls = f[f["mechanism"] == "layer_swap"].iloc[0]
    assert (ls.layer, ls.value, bool(ls.overridden)) == (1, 1, True)
    assert not f[f["mechanism"] != "layer_swap"]["overridden"].any()
    assert list(f[f["mechanism"] == "select_comm_recompute"]["layer"]) == [6]


def test_config_map_draws_every_frame_row_once():
    plan = make_plan()
    res = plot_strategy(plan)
    fig = res.figure
    assert cells(fig, "config") == frame_cells(strategy_frame(plan))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["full recompute", r"select recompute · feed_forward\.mul",
                      r"select recompute · feed_forward\.w1\.activation\.silu", r"comm recompute · .*\.norm",
                      "layer swap", r"op swap · .*\.flash_attention"]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("2") == 4 and "1" in texts            # prefetch written in swap cells
    assert {"stage 0", "stage 1"} <= set(texts)
    # the overridden layer swap is crossed out: two red strokes on layer 1's cell
    red = [ln for ln in ax.get_lines() if ln.get_color() == "#d62728"]
    assert len(red) == 2 and all(0.5 < min(ln.get_xdata()) < 1.5 for ln in red)


def test_logs_map_names_paths_by_the_configured_pattern():
    plan = make_plan()
    log = make_strategy_log(plan)
    f = strategy_frame(log, plan=plan)
    assert frame_cells(f) == frame_cells(strategy_frame(plan))
    comm = f[f["mechanism"] == "select_comm_recompute"].iloc[0]
    assert comm["item"] == r".*\.norm" and comm["paths"] == ("ffn_norm.norm", "attention_norm.norm")
    # without a plan the logged paths themselves are the rows
    bare = strategy_frame(log)
    assert "feed_forward.mul" in set(bare["item"])
    # the swap_conflict WARNING marks the logged layer swap as overridden
    assert bool(f[f["mechanism"] == "layer_swap"]["overridden"].iloc[0])


def test_identical_logs_give_one_map_that_says_so():
    plan = make_plan()
    res = plot_strategy(make_strategy_log(plan), plan=plan)
    fig = res.figure
    assert res.diff.empty
    assert len(fig.axes) == 1
    assert "config = logs, rank 0" in fig.axes[0].get_title(loc="left")


def test_differences_give_both_maps_with_the_differing_cells_outlined():
    plan = make_plan()
    log = make_strategy_log(plan, drop_select_at=3, prefetch_at={5: 3})
    diff = frame_differences(plan, log, 0)
    got = {(r.layer, r.mechanism, r.item, r.kind) for r in diff.itertuples()}
    assert got == {(3, "select_recompute", r"feed_forward\.mul", "missing"),
                   (3, "select_recompute", r"feed_forward\.w1\.activation\.silu", "missing"),
                   (5, "op_swap", r".*\.flash_attention", "value")}
    res = plot_strategy(log, plan=plan)
    fig = res.figure
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title(loc="left") == "config (intended)"
    assert "3 differences outlined" in fig.axes[1].get_title(loc="left")
    outlined = {g for g in patches_by_gid(fig) if g.startswith("diff|")}
    assert outlined == {r"diff|missing|3|select_recompute|feed_forward\.mul",
                        r"diff|missing|3|select_recompute|feed_forward\.w1\.activation\.silu",
                        r"diff|value|5|op_swap|.*\.flash_attention"}
    assert (5, "op_swap", r".*\.flash_attention") in cells(fig, "logs")
    assert "3" in [t.get_text() for t in fig.axes[1].texts]     # the logged prefetch is the one shown


def test_rank_choice():
    plan = make_plan()
    log = make_strategy_log(plan, rank=3)
    assert set(strategy_frame(log)["rank"]) == {3}
    with pytest.raises(InputError, match="rank 0 is not in the logs"):
        strategy_frame(log, rank=0)


def test_logs_without_actions_say_how_to_get_them():
    from swapwatch.parsers.model import RankLog, RunLog

    with pytest.raises(InputError, match="swapwatch run"):
        plot_strategy(RunLog(ranks={0: RankLog(rank=0)}))


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_strategy_files(tmp_path, fmt):
    plan = make_plan()
    log = make_strategy_log(plan, drop_select_at=3)
    a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    plot_strategy(log, plan=plan).save(str(a))
    plot_strategy(log, plan=plan).save(str(b))
    assert a.read_bytes() == b.read_bytes()
    if fmt == "png":
        w, h = png_size(a)
        assert 700 <= w <= 2000 and 300 <= h <= 1500
    else:
        texts = svg_texts(a)
        for label in ("layer", "config (intended)", "op swap (number: backward_prefetch)",
                      "swap voided by recompute on that layer (SW201)", "in config, missing from logs"):
            assert any(label in t for t in texts), label


def test_partial_layer_swap_override_is_one_stroke():
    plan = make_plan()
    lp = plan.layers[3]                          # select recompute feed_forward.mul inside a swapped layer
    lp.layer_swap = 4
    lp.swap_overridden = [Override.part_of_layer(r"feed_forward\.mul", r"select recompute 'feed_forward\.mul' recomputes it")]
    f = strategy_frame(plan)
    row = f[(f["mechanism"] == "layer_swap") & (f["layer"] == 3)].iloc[0]
    assert row["overridden"] and row["partial"] and "select recompute" in row["why"]
    full = f[(f["mechanism"] == "layer_swap") & (f["layer"] == 1)].iloc[0]
    assert full["overridden"] and not full["partial"]
    res = plot_strategy(plan)
    fig = res.figure
    red = [ln for ln in fig.axes[0].get_lines() if ln.get_color() == "#d62728"]
    per_layer = {}
    for ln in red:
        per_layer[round(sum(ln.get_xdata()) / 2)] = per_layer.get(round(sum(ln.get_xdata()) / 2), 0) + 1
    assert per_layer == {1: 2, 3: 1}
    assert any("partly overridden" in t.get_text() for t in fig.legends[0].get_texts())


# ---- issue 16.11: what the strategy map must not hide or blur ---------------------------------

def _config_plot(tmp_path, text, name="x.yaml"):
    from swapwatch.config import load_config
    from swapwatch.engine.strategy import plan as make_plan

    p = tmp_path / name
    p.write_text(text)
    plan = make_plan(load_config(str(p)))
    res = plot_strategy(plan)
    res.save(str(tmp_path / "s.png"))
    return plan, res.figure


TYPO = """\
model:
  model_config:
    num_layers: 4
recompute_config:
  recompute: [0]
  select_recompute:
    'flash_atention': [1, 2]
context:
  memory_optimize_level: O0
swap_config:
  swap: True
  layer_swap:
    - backward_prefetch: 12
      layers: [0, 3]
"""


def test_a_pattern_that_matches_nothing_is_not_drawn_as_a_select_box(tmp_path):
    plan, fig = _config_plot(tmp_path, TYPO)
    f = strategy_frame(plan)
    typo = f[f["item"] == "flash_atention"]
    assert list(typo["layer"]) == [1, 2] and set(typo["effect"]) == {"no_match"}
    boxes = patches_by_gid(fig)
    cell = boxes["cell|config|1|select_recompute|flash_atention"]
    assert cell.get_fill() is False or cell.get_facecolor()[3] == 0       # hollow, not a filled box
    assert cell.get_linestyle() in ("--", "dashed")
    ax = fig.axes[0]
    assert "select recompute · flash_atention (matches nothing)" in [t.get_text() for t in ax.get_yticklabels()]
    assert any("matches nothing" in t.get_text() for t in fig.legends[0].get_texts())


def test_voided_select_rows_are_shown(tmp_path):
    """recompute_48l: feed_forward\\.w3\\.matmul is configured only where layers are fully
    recomputed (SW105); its row used to be missing from the map."""
    import os

    from swapwatch.config import load_config
    from swapwatch.engine.strategy import plan as make_plan

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = load_config(os.path.join(root, "fixtures", "configs", "recompute_48l.yaml"))
    plan = make_plan(cfg)
    f = strategy_frame(plan)                  # the engine recorded it on the plan: no config needed
    w3 = f[f["item"] == r"feed_forward\.w3\.matmul"]
    assert sorted(w3["layer"]) == [0, 4, 24] and set(w3["effect"]) == {"voided"}
    assert all(plan.layers[i].full_recompute for i in w3["layer"])
    res = plot_strategy(plan)
    fig = res.figure
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert r"select recompute · feed_forward\.w3\.matmul (voided: full recompute)" in labels


def test_prefetch_under_a_red_cross_sits_on_its_own_label(tmp_path):
    plan, fig = _config_plot(tmp_path, TYPO.replace("recompute: [0]", "recompute: [0, 3]"))
    ax = fig.axes[0]
    crossed = [t for t in ax.texts if t.get_text() == "12" and t.get_bbox_patch() is not None]
    assert len(crossed) == 2                        # layers 0 and 3: layer swap under full recompute
    assert all(t.get_zorder() > 2 and t.get_color() == "black" for t in crossed)


def test_48_layers_wrap_into_bands_of_a_sensible_aspect(tmp_path):
    import os

    from swapwatch.config import load_config
    from swapwatch.engine.strategy import plan as make_plan

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    plan = make_plan(load_config(os.path.join(root, "fixtures", "configs", "recompute_48l.yaml")))
    out = tmp_path / "s48.png"
    res = plot_strategy(plan)
    res.save(str(out))
    fig = res.figure
    assert [ax.get_xlim() for ax in fig.axes] == [(-0.5, 23.5), (23.5, 47.5)]
    w, h = png_size(out)
    assert w <= 1400 and w / h < 2.5, (w, h)        # was 1952 x 382
    drawn = {int(g.split("|")[2]) for g in patches_by_gid(fig) if g.startswith("cell|")}
    assert drawn == set(range(48))


@pytest.mark.parametrize("name,swap_ids", [("recompute_48l.yaml", None), ("llama32_swap_trap.yaml", None),
                                           ("llama32_swap_trap.yaml", "  recompute: [2]\n  select_recompute:\n"
                                            "    'attention\\.flash_attention': [2, 2, 2, 2]"),
                                           ("conflict.yaml", None)])
def test_engine_sw105_and_map_agree_on_shadowed_selects(tmp_path, name, swap_ids):
    """One decision of "select pattern shadowed by full recompute": the engine records it on the
    LayerPlan; the map draws those cells as voided and SW105 reports the patterns applied nowhere
    else. Cross-checked against the engine run with full recompute off (where the patterns land)."""
    import dataclasses
    import os

    from swapwatch.checks import CheckContext, run_rules
    from swapwatch.config import load_config
    from swapwatch.engine.strategy import plan as make_plan

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "fixtures", "configs", name)
    if swap_ids:
        text = open(path).read()
        old = "  recompute: [6, 4, 2, 0]\n  select_recompute:\n    'attention\\.flash_atention': [12, 13]"
        assert old in text
        path = str(tmp_path / name)
        open(path, "w").write(text.replace(old, swap_ids))
    cfg = load_config(path)
    plan = make_plan(cfg)
    recorded = {(lp.layer, k, p) for lp in plan.layers for k, ps in lp.select_shadowed.items() for p in ps}
    bare = make_plan(dataclasses.replace(cfg, recompute_config=dict(cfg.recompute_config, recompute=False)))
    rerun = {(lp.layer, k, p) for lp, alt in zip(plan.layers, bare.layers) if lp.full_recompute
             for k in ("select_recompute", "select_comm_recompute") for p in getattr(alt, k)}
    assert recorded == rerun
    f = strategy_frame(plan)
    voided = f[f["effect"] == "voided"]
    assert set(zip(voided["layer"], voided["mechanism"], voided["item"])) == recorded
    applied = {(k, p) for lp in plan.layers for k in ("select_recompute", "select_comm_recompute")
               for p in getattr(lp, k)}
    sw105 = [x for x in run_rules(CheckContext(plan=plan, config=cfg), needs=("config",)) if x.code == "SW105"]
    assert sorted(x.op for x in sw105) == sorted({p for _, k, p in recorded if (k, p) not in applied})
    if name == "recompute_48l.yaml":
        assert [x.op for x in sw105] == [r"feed_forward\.w3\.matmul"]
    elif swap_ids:
        assert recorded and sw105 and "(layer 2)" in sw105[0].message


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "fixtures/configs/families").glob("*.yaml")))
def test_map_resolves_each_layer_on_its_own_tree(name):
    """A pattern is drawn as reaching nothing exactly where explain's table says ``(no match)`` on
    that layer: each layer on its own family tree (a MoE layer's is not the dense one's, and no
    family is drawn on the Llama tree)."""
    from swapwatch.report import layer_table
    from swapwatch.engine import strategy
    from swapwatch.commands.explain import explain
    from swapwatch.plot import strategy_map as sm

    plan = explain(str(REPO / "fixtures/configs/families" / name)).plan
    drawn = {(r[2], r[5], r[6]) for r in sm._plan_rows(plan) if r[-1] == sm.NO_MATCH}
    expected = set()
    for lp in plan.layers:
        walk = layer_table.layer_walk(plan, lp)
        for mech in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                     "select_comm_recompute_exclude"):
            for pat in getattr(lp, mech) or []:
                if layer_table.pattern_text(walk, pat, strategy.WALK_MODE[mech]) == [f"{pat} (no match)"]:
                    expected.add((lp.layer, mech, pat))
        for pat in lp.op_swap or {}:
            if layer_table.pattern_text(walk, pat, strategy.WALK_MODE["op_swap"]) == [f"{pat} (no match)"]:
                expected.add((lp.layer, "op_swap", pat))
    assert drawn == expected
