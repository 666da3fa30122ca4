"""plot memory: the drawn series are the parsed numbers; files are valid, readable and deterministic."""
import numpy as np
import pytest

from swapwatch.errors import InputError
from swapwatch.plot import memory_frame, peak_frame, plot_memory, rank_outliers, step_frame

from plot_helpers import MB, lines_by_gid, make_run, patches_by_gid, png_size, step_bytes, svg_texts


def test_frame_holds_every_event_in_bytes():
    rl = make_run("r", nranks=2, steps=3, peak_mb=183)
    f = memory_frame(rl)
    assert len(f) == 2 * 3 + 2 * 2
    per_step = f[f["step"].notna()].sort_values(["rank", "step"])
    assert list(per_step["bytes"]) == [step_bytes(r, s, 500) for r in (0, 1) for s in range(3)]
    whole = f[f["step"].isna()]
    assert set(whole["metric"]) == {"pool_peak", "pool_actual_peak"}
    assert set(f["source"]) >= {"worker_0.log:10", "worker_1.log:91"}


def test_per_rank_lines_equal_parsed_values_single_run():
    rl = make_run("r", nranks=4, steps=6, peak_mb=183)
    res = plot_memory(rl)
    fig = res.figure
    lines = lines_by_gid(fig)
    for r in range(4):
        ln = lines[f"steps|r|rank{r}"]
        assert list(ln.get_xdata()) == list(range(6))
        np.testing.assert_allclose(ln.get_ydata(), [step_bytes(r, s, 500) / MB for s in range(6)])
    # one peak bar per rank (single run, few ranks): height = used peak, hatched part = fragmentation
    bars = patches_by_gid(fig)
    assert bars["peak|rank 1|used"].get_height() == pytest.approx(184)
    assert bars["peak|rank 1|frag"].get_height() == pytest.approx(10)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("+10 MiB frag." in t for t in texts)


def test_several_runs_side_by_side_with_strategy_names():
    runs = [make_run("run-a", base_mb=590, strategy="none", peak_mb=590, frag_mb=7),
            make_run("run-b", base_mb=183, strategy="full", peak_mb=183, frag_mb=10),
            make_run("run-c", base_mb=462, strategy="select", peak_mb=462, frag_mb=8)]
    res = plot_memory(runs)
    fig = res.figure
    frame = res.frame
    assert list(frame["run"].cat.categories) == ["run-a (none)", "run-b (full)", "run-c (select)"]
    assert "run-a (none) vs run-b (full) vs run-c (select)" in fig._suptitle.get_text()
    lines = lines_by_gid(fig)
    for key, base in (("run-a (none)", 590), ("run-b (full)", 183), ("run-c (select)", 462)):
        med = lines[f"steps|{key}|median"]
        expect = [np.median([step_bytes(r, s, base) for r in (0, 1)]) / MB for s in range(5)]
        np.testing.assert_allclose(med.get_ydata(), expect)
    bars = patches_by_gid(fig)
    pk = peak_frame(frame)
    for key in frame["run"].cat.categories:
        sub = pk[pk["run"] == key]
        assert bars[f"peak|{key}|used"].get_height() == pytest.approx(sub["used"].max() / MB)
        assert bars[f"peak|{key}|frag"].get_height() == pytest.approx(
            (sub["actual"].max() - sub["used"].max()) / MB)
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert labels == ["run-a\n(none)", "run-b\n(full)", "run-c\n(select)"]


def test_128_ranks_aggregate_to_a_band_and_name_the_outlier():
    rl = make_run("big", nranks=128, steps=8, base_mb=40000, strategy="select", peak_mb=48874,
                  family="device", frag_mb=2000, outlier=17)
    res = plot_memory(rl)
    fig = res.figure
    lines = lines_by_gid(fig)
    # a median, and the one outlier rank drawn and named: not 128 lines
    assert set(lines) == {"steps|big (select)|median", "steps|big (select)|rank17"}
    per = {r: [step_bytes(r, s, 40000, 17) for s in range(8)] for r in range(128)}
    np.testing.assert_allclose(lines["steps|big (select)|median"].get_ydata(),
                               [np.median([per[r][s] for r in per]) / 2 ** 30 for s in range(8)])
    assert fig.axes[0].get_ylabel() == "allocated (device) per step (GiB)"
    notes = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert notes.count("rank 17") == 2            # named on both panels
    # the peak panel: one bar (max over ranks) and one dot per rank
    dots = [c for c in fig.axes[1].collections if c.get_gid() == "peak|big (select)|ranks"]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == 128
    assert "device peak" in fig.axes[1].get_title()


def test_rank_outliers_are_robust_and_quiet_on_noise():
    import pandas as pd

    assert rank_outliers(pd.Series([100.0 * MB + i for i in range(64)])) == []
    vals = pd.Series([100.0 * MB] * 64)
    vals[5] = 150.0 * MB
    vals[9] = 60.0 * MB
    assert rank_outliers(vals) == [5, 9]
    assert rank_outliers(pd.Series([1.0, 500.0 * MB])) == []       # two ranks: nothing to stand out from


def test_cpu_rss_fallback_is_labelled_and_zero_series_skipped():
    rl = make_run("cpu", nranks=1, steps=4, metric="rss", base_mb=555, peak_mb=1, frag_mb=0)
    for e in list(rl.ranks[0].events):          # CPU allocator API: always 0
        if e.step is not None:
            rl.ranks[0].events.append(type(e)(rank=0, source="w:1", metric="max_memory_allocated", bytes=0,
                                              step=e.step, origin="swapwatch"))
    steps = step_frame(memory_frame(rl))
    assert set(steps["metric"]) == {"rss"}
    res = plot_memory(rl)
    fig = res.figure
    # 555 MB growing 3 MB a step moves 1.6 %: flat, so the pool peak alone is drawn, with a note
    assert res.panels == ["peaks"] and "process RSS (CPU fallback) is flat" in fig._suptitle.get_text()
    # RSS that really moves keeps a (narrower) panel that does not start at 0, with the caveat
    moving = make_run("cpu", nranks=1, steps=4, metric="rss", base_mb=20, peak_mb=1, frag_mb=0)
    res = plot_memory(moving)
    fig = res.figure
    assert res.panels == ["steps", "peaks"] and "RSS" in fig.axes[0].get_ylabel()
    assert any("does not show" in t.get_text() for t in fig.axes[0].texts)
    assert fig.axes[0].get_ylim()[0] > 0
    assert fig.axes[0].get_position().width < fig.axes[1].get_position().width * 1.5


def test_ranks_filter_and_unknown_ranks():
    rl = make_run("r", nranks=8, steps=3, peak_mb=100)
    res = plot_memory(rl, ranks=[2, 5])
    fig = res.figure
    assert sorted(set(res.frame["rank"])) == [2, 5]
    assert set(lines_by_gid(fig)) == {"steps|r|rank2", "steps|r|rank5"}
    with pytest.raises(InputError, match=r"no memory figures for ranks 9-10 .*ranks 0-7"):
        plot_memory(rl, ranks=[9, 10])


def test_no_memory_at_all_says_how_to_get_it():
    rl = make_run("r", nranks=1, steps=0)
    with pytest.raises(InputError, match="swapwatch run.*GLOG_v=1"):
        plot_memory(rl)


def test_only_peaks_or_only_steps_draw_one_panel_and_say_what_is_missing():
    res = plot_memory(make_run("p", steps=0, peak_mb=100))
    fig = res.figure
    assert len(fig.axes) == 1 and "per-step" in fig._suptitle.get_text()
    res = plot_memory(make_run("s", steps=3))
    fig = res.figure
    assert len(fig.axes) == 1 and "GLOG_v=1" in fig._suptitle.get_text()


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_written_files_are_valid_and_deterministic(tmp_path, fmt):
    runs = [make_run("run-a", strategy="none", peak_mb=590), make_run("run-b", strategy="full", base_mb=183,
                                                                       peak_mb=183)]
    a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    plot_memory(runs).save(str(a))
    plot_memory(runs).save(str(b))
    assert a.read_bytes() == b.read_bytes()
    size = a.stat().st_size
    assert 5_000 < size < 400_000
    if fmt == "png":
        w, h = png_size(a)
        assert 900 <= w <= 2000 and 400 <= h <= 800
    elif fmt == "svg":
        texts = svg_texts(a)
        for label in ("run-a (none) vs run-b (full)", "step", "whole-run peak (MiB)", "used peak",
                      "fragmentation (actual − used)"):
            assert any(label in t for t in texts), label
    else:
        assert a.read_bytes().startswith(b"%PDF-")


def test_bad_output_paths_fail_before_writing(tmp_path):
    rl = make_run("r")
    with pytest.raises(InputError, match="does not exist"):
        plot_memory(rl).save(str(tmp_path / "missing" / "m.png"))
    with pytest.raises(InputError, match="cannot tell the image format"):
        plot_memory(rl).save(str(tmp_path / "m.jpg"))
    with pytest.raises(InputError, match="--format is svg"):
        plot_memory(rl).save(str(tmp_path / "m.png"), "svg")
    plot_memory(rl).save(str(tmp_path / "m.out"), "svg")
    assert svg_texts(tmp_path / "m.out")


def test_device_peak_is_preferred_over_current_allocation():
    rl = make_run("asc", nranks=1, steps=3, base_mb=1000)
    for e in [e for e in rl.ranks[0].events if e.step is not None]:
        rl.ranks[0].events.append(type(e)(rank=0, source=e.source, metric="max_memory_allocated_peak",
                                          bytes=e.bytes + 700 * MB, step=e.step, origin="swapwatch"))
    steps = step_frame(memory_frame(rl))
    assert set(steps["metric"]) == {"max_memory_allocated_peak"}
    res = plot_memory(rl)
    fig = res.figure
    np.testing.assert_allclose(lines_by_gid(fig)["steps|asc|rank0"].get_ydata(),
                               [step_bytes(0, s, 1000) / MB + 700 for s in range(3)])
    assert fig.axes[0].get_ylabel() == "peak allocated (device) per step (MiB)"


def test_used_and_actual_come_from_one_printed_block():
    from swapwatch.parsers.model import MemoryEvent

    rl = make_run("two-blocks", nranks=1, steps=1)
    ev = rl.ranks[0].events
    for metric, mb in (("used_peak", 23716), ("actual_peak", 26244), ("actual_peak", 48874)):
        ev.append(MemoryEvent(rank=0, source="x:1", metric=metric, bytes=mb * MB))
    pk = peak_frame(memory_frame(rl)).iloc[0]
    assert np.isnan(pk["used"]) and pk["actual"] == 48874 * MB         # never 23716 used + 48874 actual
    res = plot_memory(rl)
    fig = res.figure
    assert patches_by_gid(fig)["peak|rank 0|used"].get_height() == pytest.approx(48874 / 1024)
    assert any(t.get_text() == "actual 47.7 GiB" for t in fig.axes[1].texts)
    assert fig.axes[1].get_legend().get_texts()[0].get_text() == "actual peak"
    # CPU: the `Common mem pool info` line (peak only) and then the Dump line (peak + actual)
    rl = make_run("cpu", nranks=1, steps=1)
    for metric, mb in (("pool_peak", 54), ("pool_peak", 54), ("pool_actual_peak", 56)):
        rl.ranks[0].events.append(MemoryEvent(rank=0, source="x:1", metric=metric, bytes=mb * MB))
    pk = peak_frame(memory_frame(rl)).iloc[0]
    assert (pk["used"], pk["actual"]) == (54 * MB, 56 * MB)


def test_each_panel_has_its_own_unit_and_one_step_gets_one_tick():
    rl = make_run("mixed", nranks=1, steps=1, base_mb=555, peak_mb=48874, family="device")
    res = plot_memory(rl)
    fig = res.figure
    assert fig.axes[0].get_ylabel().endswith("(MiB)") and fig.axes[1].get_ylabel().endswith("(GiB)")
    assert list(fig.axes[0].get_xticks()) == [0]


def test_legends_stay_inside_the_figure_with_long_run_names(tmp_path):
    """Run names like 'baseline (demo_baseline)' once pushed the legend off both edges of the figure."""
    runs = [make_run("baseline", strategy="demo_baseline", peak_mb=62, frag_mb=2),
            make_run("recompute", strategy="demo_recompute", peak_mb=42, frag_mb=2)]
    res = plot_memory(runs)
    res.save(str(tmp_path / "m.png"))
    fig = res.figure
    renderer = fig.canvas.get_renderer()
    fig_box = fig.bbox
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 2
    for leg in legends:
        box = leg.get_window_extent(renderer)
        assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1, (box, fig_box)
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert any("−32% vs baseline" in t and "demo_baseline" not in t for t in texts), texts


def test_bar_legend_swatch_has_the_bars_colours():
    """Issue 16.11: the 'used peak' key was a grey square beside coloured bars."""
    from matplotlib.colors import to_rgba

    runs = [make_run("a", strategy="none", peak_mb=62), make_run("b", strategy="full", peak_mb=20)]
    res = plot_memory(runs)
    fig = res.figure
    bars = patches_by_gid(fig)
    colours = [to_rgba(bars[f"peak|{k}|used"].get_facecolor())[:3] for k in ("a (none)", "b (full)")]
    leg = fig.axes[1].get_legend()
    assert leg.get_texts()[0].get_text() == "used peak"
    # the key draws one swatch per bar colour (a tuple handle), filled like the bars
    from matplotlib.patches import Rectangle

    filled = [to_rgba(r.get_facecolor())[:3] for r in leg.findobj(Rectangle)
              if r.get_facecolor()[:3] != (1.0, 1.0, 1.0) and r.get_width() > 0]
    assert filled[:2] == colours


def test_runs_of_another_shape_are_not_comparable():
    """Issue 16.9: a 32-layer run beside a 4-layer one is not '-92 %'."""
    a = make_run("big", strategy="none", peak_mb=620)
    b = make_run("small", strategy="full", peak_mb=50)
    a.run_info["command"] = ["python", "train.py", "--layers", "32", "--seq", "4096"]
    b.run_info["command"] = ["python", "train.py", "--layers", "4", "--seq", "4096"]
    res = plot_memory([a, b])
    fig = res.figure
    assert res.incomparable == ["layers 32 vs 4"]
    label = next(t.get_text() for t in fig.axes[1].texts if t.get_gid() == "peak|small (full)|label")
    assert label.endswith("not comparable") and "%" not in label
    assert "runs not comparable (layers 32 vs 4)" in fig._suptitle.get_text()
    b.run_info["command"] = ["python", "train.py", "--layers", "32", "--seq", "4096"]
    res = plot_memory([a, b])
    fig = res.figure
    assert res.incomparable == [] and "%" in next(
        t.get_text() for t in fig.axes[1].texts if t.get_gid() == "peak|small (full)|label")
