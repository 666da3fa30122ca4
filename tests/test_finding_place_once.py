"""A finding says its place once: one layer in ``Finding.layer`` (the renderers put it in front:
``layer 3: ...``), a set of layers in the text with no ``layer`` beside it. Checked on the rendered
explain / verify output of the fixtures that fire SW104 (config and log), SW106 and SW209."""
import os
import re

from click.testing import CliRunner

from swapwatch.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F = os.path.join(ROOT, "fixtures")


def _lines(*args):
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code in (0, 1), res.output
    return [ln.strip() for ln in res.output.splitlines()]


def _said_twice(line):
    """``layer N: ...`` followed by the same layer named again in the text."""
    m = re.match(r"(?:rank \d+ · )?layer (\d+): (.*)", line)
    return bool(m) and re.search(rf"\blayers? (?:[\d, -]*\b)?{m.group(1)}\b", m.group(2)) is not None


def test_each_finding_names_its_layer_once():
    outputs = {
        "SW104 config": _lines("explain", os.path.join(F, "configs", "llama32_swap_trap.yaml")),
        "SW104 log": _lines("verify", os.path.join(F, "logs", "families", "qwen2_5_qkv_concat.log")),
        "SW106": _lines("verify", os.path.join(F, "logs", "truncated.log"), "--config",
                        os.path.join(F, "configs", "swap_case3.yaml")),
        "SW209": _lines("explain", os.path.join(F, "configs", "swap_entries_overlap.yaml")),
    }
    expected = {
        "SW104 config": "select_recompute pattern 'attention\\.flash_atention' (applied on layers 12-13) matches",
        "SW104 log": "select recompute pattern 'feed_forward\\.w1\\.reshape' is applied on layers 7, 15 but",
        "SW106": "rank 0 · layer 0: the strategy block stops after this layer: the file is truncated; "
                 "layers 1-3 have no lines",
        "SW209": "layer 1: swap_config.layer_swap[1] names this layer too, already swapped by",
    }
    for name, lines in outputs.items():
        assert any(ln.startswith(expected[name]) for ln in lines), (name, lines)
        assert not [ln for ln in lines if _said_twice(ln)], name


def test_the_checker_sees_the_old_repetition():
    assert _said_twice("layer 12: select_recompute pattern 'x' (applied on layers 12-13) matches nothing")
    assert _said_twice("rank 0 · layer 0: the strategy block stops at layer 0: the file is truncated")
    assert not _said_twice("layer 1: swap_config.layer_swap[1] names this layer too")
