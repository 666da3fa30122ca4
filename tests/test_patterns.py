"""The shared matcher reproduces MindFormers' walk and its log text quirks
(``LayerSetting.set_pattern_recompute`` / ``set_pattern_swap``; docs/mindspore-facts.md §1.3)."""
import pytest

from swapwatch.model import patterns
from swapwatch.model.patterns import LayoutNode, log_item, walk_layout
from swapwatch.layouts import load_layout


@pytest.fixture(scope="module")
def llama():
    return load_layout("tinyllama")


@pytest.mark.parametrize("pattern, mode, logged, targets", [
    # comm default pattern: inner-segment matches joined, in creation order (ffn_norm first)
    (r".*\.norm", "comm", "ffn_norm.norm, attention_norm.norm", ["ffn_norm.norm", "attention_norm.norm"]),
    # EX8 leaf under-reporting: all three applied, only the last logged
    (r"feed_forward\.w[123]", "recompute", "feed_forward.w3", ["feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]),
    (r"feed_forward\.w1\.activation\.silu", "recompute", "feed_forward.w1.activation.silu",
     ["feed_forward.w1.activation.silu"]),
    # swap keeps the leading char: space for multi-segment, dot for one segment
    (r".*\.flash_attention", "swap", " attention.flash_attention", ["attention.flash_attention"]),
    ("attention", "swap", ".attention", ["attention"]),
    ("feed_forward", "recompute", "feed_forward", ["feed_forward"]),
    # the typo from the official performance guide matches nothing: no item at all
    (r"attention\.flash attention", "recompute", "", []),
])
def test_walk_layout_log_text(llama, pattern, mode, logged, targets):
    r = walk_layout(llama, pattern, mode)
    assert log_item(r.raw_log, mode) == logged
    assert [t.path for t in r.targets] == targets


def test_exclude_skips_cells(llama):
    r = walk_layout(llama, "attention", "exclude")
    assert r.targets == [] and r.skipped_cells == ["attention"] and not r.matched


def test_path_matches_and_overlap():
    assert patterns.path_matches(r"feed_forward\.w1\.activation\.silu", "feed_forward.w1.activation.silu")
    assert not patterns.path_matches(r"feed_forward\.mul", "feed_forward.w1.mul")
    assert patterns.patterns_overlap(r"feed_forward\.m.l", r"feed_forward\.mul")
    assert not patterns.patterns_overlap(r"feed_forward\.w1", r"feed_forward\.w1\.activation")


def test_pathological_pattern_times_out_instead_of_hanging():
    assert not patterns.segment_fullmatch("(a|aa)+c", "a" * 40, timeout=0.05)     # no match, no hang
    assert patterns.segment_fullmatch("(a|aa)+", "a" * 40, timeout=0.05)


def test_invalid_pattern_is_reported():
    assert patterns.validate("feed_forward\\.w1(") is not None
    with pytest.raises(patterns.PatternError):
        patterns.segment_fullmatch("w1(", "w1")


def test_layout_paths_order():
    node = LayoutNode.from_data("layer", {"prims": ["b", "a"], "cells": {"x": {"prims": ["p"]}}})
    assert node.paths() == [("a", "prim"), ("b", "prim"), ("x", "cell"), ("x.p", "prim")]


def test_under_is_the_one_path_nesting_test():
    from swapwatch.model.patterns import under

    assert under("feed_forward.w1.matmul", "feed_forward") and under("feed_forward", "feed_forward")
    assert not under("feed_forward", "feed_forward", strict=True)
    assert not under("feed_forward_x.mul", "feed_forward")          # a name prefix is not a parent
    assert under("attention.wq", "") and under("", "", strict=True)  # the layer itself holds everything
