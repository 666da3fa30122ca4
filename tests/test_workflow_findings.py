"""Issue 16, what a MindFormers user did and expected: every silent drop becomes a warning with the
YAML line (SW205, SW206), the swap trap has its own rule (SW204), SW105 names the resolved layers.

Each test runs the command the user ran on a realistic 32-layer, pipeline_stage-4 Llama YAML
(``fixtures/configs/llama32_*.yaml``) or a small variant of it, and asserts the finding they wanted.
"""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from swapwatch.cli import cli
from swapwatch.commands.explain import explain
from swapwatch.report.finding_groups import line

TRAP = "fixtures/configs/llama32_swap_trap.yaml"
CAPPED = "fixtures/configs/llama32_counts_capped.yaml"


def _line_of(path, text):
    with open(path) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line and not line.lstrip().startswith("#"))


def _variant(tmp_path, src, old, new, name="c.yaml"):
    with open(src) as fh:
        body = fh.read()
    assert old in body
    p = tmp_path / name
    p.write_text(body.replace(old, new))
    return str(p)


def _codes(ex, code):
    return [f for f in ex.findings if f.code == code]


# ---- (1) op_swap layer past the model: SW205 --------------------------------------------------

def test_op_swap_layer_past_model_is_a_warning_with_its_line():
    res = CliRunner().invoke(cli, ["explain", TRAP])
    line = _line_of(TRAP, "layers: [8, 9, 10, 40]")
    assert "  SW205 warning: " in res.output
    assert f"    swap_config.op_swap[0].layers: layer 40 of [8, 9, 10, 40] is outside the model " \
           f"(layers 0-31) and is dropped; it applies to layers 8-10 only [{TRAP}:{line}]" in res.output
    data = json.loads(CliRunner().invoke(cli, ["explain", TRAP, "--format", "json"]).output)
    sw205 = [f for f in data["findings"] if f["code"] == "SW205"]
    assert sw205 and sw205[0]["severity"] == "warning" and sw205[0]["actual"] == [40]
    # the plan itself is MindFormers' (layer 40 simply never applies)
    assert [lay["layer"] for lay in data["layers"] if lay["op_swap"]] == [8, 9, 10]


def test_swap_ids_past_model_in_layer_swap_and_recompute_ids(tmp_path):
    p = _variant(tmp_path, TRAP, "  recompute: [6, 4, 2, 0]",
                 "  recompute: [0, 33]\n  select_comm_recompute:\n    '.*\\.norm': [-1]")
    p = _variant(tmp_path, p, "  swap: True\n", "  swap: True\n  layer_swap:\n    backward_prefetch: 2\n"
                                                "    layers: [31, 32]\n", "e.yaml")
    f = _codes(explain(p), "SW205")
    assert sorted(x.op for x in f) == ["recompute_config.recompute", "recompute_config.select_comm_recompute..*\\.norm",
                                       "swap_config.layer_swap.layers", "swap_config.op_swap[0].layers"]
    by = {x.op: x for x in f}
    assert by["recompute_config.recompute"].actual == [33]
    assert "applies to no layer at all" in by["recompute_config.select_comm_recompute..*\\.norm"].message
    assert by["swap_config.layer_swap.layers"].source.endswith(f":{_line_of(p, 'layers: [31, 32]')}")


def test_sw205_quiet_when_ids_fit_or_swap_off(tmp_path):
    ok = _variant(tmp_path, TRAP, "layers: [8, 9, 10, 40]", "layers: [8, 9, 10, 31]")
    assert not _codes(explain(ok), "SW205")
    off = _variant(tmp_path, TRAP, "  swap: True", "  swap: False", "off.yaml")
    assert not _codes(explain(off), "SW205")           # without swap, op_swap is never applied


# ---- (1) recompute counts capped: SW206 --------------------------------------------------------

def test_recompute_counts_capped_at_stage_layers():
    ex = explain(CAPPED)
    f = _codes(ex, "SW206")
    assert len(f) == 1 and f[0].severity == "warning" and ex.exit_code == 0
    assert f[0].message == ("recompute_config.recompute: [9, 4, 2, 0] asks for 9 layers on stage 0, which has 8; "
                            "MindFormers applies it to those 8 (the count is capped without a word)")
    assert f[0].source == f"{CAPPED}:{_line_of(CAPPED, 'recompute: [9, 4, 2, 0]')}"
    assert [lp.layer for lp in ex.plan.layers if lp.full_recompute][:9] == list(range(8)) + [8]
    assert sum(lp.full_recompute for lp in ex.plan.layers if lp.stage == 0) == 8


def test_sw206_2d_table_and_pattern_dict(tmp_path):
    p = _variant(tmp_path, CAPPED, "  recompute: [9, 4, 2, 0]",
                 "  recompute: [[9, 0, 0, 0]]\n  select_recompute:\n    'feed_forward\\.mul': [1, 12, 0, 0]")
    f = sorted(_codes(explain(p), "SW206"), key=lambda x: x.op)
    assert [(x.op, x.actual, x.expected) for x in f] == [
        ("recompute_config.recompute", 9, "at most 8"),
        ("recompute_config.select_recompute.feed_forward\\.mul", 12, "at most 8")]
    assert "on interleave 0, stage 0" in f[0].message and "on stage 1" in f[1].message


def test_sw206_quiet(tmp_path):
    for text in ("  recompute: [8, 4, 2, 0]", "  recompute: True", "  recompute: [True, 0, 0, 0]"):
        p = _variant(tmp_path, CAPPED, "  recompute: [9, 4, 2, 0]", text)
        assert not _codes(explain(p), "SW206"), text


# ---- (2) the swap trap: SW204, and SW105 names the layers it means ------------------------------

def test_swap_trap_per_stage_counts_read_as_layer_ids():
    ex = explain(TRAP)
    f = _codes(ex, "SW204")
    assert len(f) == 1
    assert "with swap on it lists layer ids: it selects layers 0, 2, 4, 6" in f[0].message
    assert "(as counts it would mean layers 0-5, 8-11, 16-17)" in f[0].message
    assert f[0].source == f"{TRAP}:{_line_of(TRAP, 'recompute: [6, 4, 2, 0]')}"
    assert [lp.layer for lp in ex.plan.layers if lp.full_recompute] == [0, 2, 4, 6]


def test_sw204_quiet_on_real_layer_ids_and_without_swap(tmp_path):
    for text in ("  recompute: [0, 8, 16, 24]", "  recompute: [0, 1]", "  recompute: True"):
        assert not _codes(explain(_variant(tmp_path, TRAP, "  recompute: [6, 4, 2, 0]", text)), "SW204"), text
    off = _variant(tmp_path, TRAP, "  swap: True", "  swap: False", "off.yaml")
    assert not _codes(explain(off), "SW204")


def test_sw105_prints_the_resolved_layer_set(tmp_path):
    p = _variant(tmp_path, TRAP, "  recompute: [6, 4, 2, 0]\n  select_recompute:\n    'attention\\.flash_atention': [12, 13]",
                 "  recompute: [2]\n  select_recompute:\n    'attention\\.flash_attention': [2, 2, 2, 2]")
    f = _codes(explain(p), "SW105")
    assert len(f) == 1 and "(layer 2)" in f[0].message and "[2, 2, 2, 2]" not in f[0].message
    line = _line_of(p, "'attention\\.flash_attention'")
    assert f[0].source == f"{p}:{line}"
    sw204 = _codes(explain(p), "SW204")
    assert len(sw204) == 1 and "it selects layer 2" in sw204[0].message


# ---- (13) every finding says where; SW104 suggests the real path; plain wording ------------------

def test_sw104_suggests_the_nearest_real_path(tmp_path):
    f = _codes(explain(TRAP), "SW104")
    assert len(f) == 1 and f[0].message.endswith("(did you mean 'attention\\.flash_attention'?)")
    p = _variant(tmp_path, TRAP, "'attention\\.flash_atention'", "'.*\\.flash_atention'")
    assert _codes(explain(p), "SW104")[0].message.endswith("(did you mean '.*\\.flash_attention'?)")
    far = _variant(tmp_path, TRAP, "'attention\\.flash_atention'", "'nothing\\.here'", "far.yaml")
    assert "did you mean" not in _codes(explain(far), "SW104")[0].message


def test_every_finding_of_the_fixtures_says_where():
    import glob

    from swapwatch.commands.verify import verify

    seen = set()
    for cfg in sorted(glob.glob("fixtures/configs/*.yaml")):
        for f in explain(cfg).findings:
            seen.add(f.code)
            assert f.source and f.source.startswith(cfg + ":"), (cfg, f.code, f.message)
    runs = [("fixtures/logs/msrun_missing_rank", None), ("fixtures/logs/stdout_devices", None),
            ("fixtures/logs/cpu_swap", None), ("fixtures/logs/truncated.log", "fixtures/configs/swap_case3.yaml"),
            ("fixtures/plot_runs/select-2ranks", "fixtures/plot_runs/configs/full.yaml")]
    for path, cfg in runs:
        for f in verify([path], config_path=cfg).findings:
            seen.add(f.code)
            whole_file = f.code == "SW108"          # "this log has no MindFormers line": the file is the place
            assert f.source and re.search(r":\d+$|\(missing\)$" + (r"|\.log$" if whole_file else ""),
                                          f.source), (path, f.code, f.source)
    assert {"SW104", "SW105", "SW109", "SW112", "SW201", "SW204", "SW205", "SW402"} <= seen


def test_sw202_and_sw402_name_their_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model: {model_config: {num_layers: 4}}\nrecompute_config:\n  select_recompute:\n"
                 "    'feed_forward\\.mul': [2, 3]\nswap_config:\n  swap: True\n  op_swap:\n"
                 "    - {op_name: 'feed_forward\\.w3', backward_prefetch: 1, layers: [2, 3]}\n")
    f = _codes(explain(str(p)), "SW202")
    assert [x.layer for x in f] == [2, 3] and {x.source for x in f} == {f"{p}:8"}
    from swapwatch.commands.verify import verify

    f = _codes(verify(["fixtures/logs/msrun_missing_rank"]), "SW402")
    assert f[0].source.endswith("msrun_missing_rank/worker_1.log (missing)")


def test_wording_of_sw107_and_sw305(tmp_path):
    from swapwatch.checks import CheckContext
    from swapwatch.checks.sw107_log_config_differs import LogConfigDiffers

    p = _variant(tmp_path, "fixtures/configs/conflict.yaml", "  swap: True\n", "  swap: True\n  default_prefetch: 3\n")
    f = _codes(explain(p), "SW305")
    assert f[0].message.endswith("is ignored because layer_swap and op_swap are set")
    from swapwatch.parsers import read_logs
    from swapwatch.config import load_config
    from swapwatch.engine import strategy

    cfg = load_config(CAPPED)
    found = list(LogConfigDiffers().check(CheckContext(plan=strategy.plan(cfg), config=cfg,
                                                       runlog=read_logs(["fixtures/plot_runs/select"]))))
    geo = [x for x in found if x.op == "layer_list"]
    assert geo and geo[0].rank == 0 and geo[0].message.startswith("the log's layer split is [[4]], --config gives")
    assert line(geo[0]).startswith("rank 0: the log's layer split is [[4]]")


def test_sw202_doc_cites_the_mindformers_documentation():
    from swapwatch.report.rules import explain_rule

    text = explain_rule("SW202")
    assert "Fine-Grained Activations SWAP" in text and "Used together with Recomputation" in text
    assert "if its output is used by an operator with recomputation enabled" in text


# ---- (1) the drops are MindFormers' own: the real LayerSetting accepts and drops / caps ----------

@pytest.mark.oracle
def test_real_mindformers_drops_layer_40_and_caps_the_count_silently():
    import os

    import pytest

    if not os.path.exists(".oracle-venv/.ready"):
        pytest.skip("no MindFormers oracle venv (.oracle-venv/.ready)")
    import sys

    sys.path.insert(0, "tests")
    from test_oracle import mf_lines, run_oracle

    drop = dict(num_layers=32, pipeline_stage=4, recompute_config={"recompute": [6, 4, 2, 0]},
                swap_config={"swap": True, "op_swap": [{"op_name": r"feed_forward\.w1", "backward_prefetch": 1,
                                                         "layers": [8, 9, 10, 40]}]})
    cap = dict(num_layers=32, pipeline_stage=4, recompute_config={"recompute": [9, 4, 2, 0]})
    got_drop, got_cap = run_oracle([drop, cap])
    assert "error" not in got_drop and "error" not in got_cap          # MindFormers accepts both
    lines = mf_lines(got_drop)
    assert [int(re.search(r"layer (\d+)", ln).group(1)) for ln in lines if ln.startswith("Set op_swap")] == [8, 9, 10]
    assert [int(ln.rsplit(" ", 1)[1]) for ln in lines if ln.startswith("Set full recompute")] == [0, 2, 4, 6]
    assert not any("layer 40" in ln for ln in lines)                      # not a word about layer 40
    full = [int(ln.rsplit(" ", 1)[1]) for ln in mf_lines(got_cap) if ln.startswith("Set full recompute")]
    assert full == list(range(8)) + list(range(8, 12)) + [16, 17]        # stage 0: 8 of the 9 asked
    # and swapwatch's warnings say exactly that
    ex = {f.code: f for f in explain(TRAP).findings}
    assert "applies to layers 8-10 only" in ex["SW205"].message and "layers 0, 2, 4, 6" in ex["SW204"].message


def test_verify_reports_the_drop_from_the_config_the_log_printed(tmp_path):
    """verify without --config: the YAML is the one the log printed (its ``initial swap_config``)."""
    from swapwatch.commands.verify import verify

    log = tmp_path / "worker_0.log"
    with open("fixtures/logs/swap_case3.log") as fh:
        text = fh.read()
    assert "'layers': [0, 1, 2]}" in text
    log.write_text(text.replace("'layers': [0, 1, 2]}", "'layers': [0, 1, 2, 40]}"))
    res = verify([str(log)])
    f = _codes(res, "SW205")
    assert len(f) == 1 and "layer 40 of [0, 1, 2, 40] is outside the model (layers 0-3)" in f[0].message
    assert f[0].source.startswith(str(log) + ":") and res.verdict == "pass"
