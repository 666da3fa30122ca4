"""verify on PyNative (r2.x) runs: the fixture logs (MindFormers' own apply_ac + logger) pass, and a deleted,
added or altered strategy line is caught with its rank and layer, in every output format."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.parsers import read_logs
from swapwatch.parsers.model import ActionEvent, NoticeEvent
from swapwatch.commands.verify import verify

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "fixtures" / "logs"
CONFIGS = REPO / "fixtures" / "configs"
QWEN = str(CONFIGS / "pynative_qwen3_select.yaml")
DSV3 = str(CONFIGS / "pynative_dsv3_mtp.yaml")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def codes(result, severity=None):
    return sorted({f.code for f in result.findings if severity is None or f.severity == severity})


def edited(tmp_path, src, edit):
    """A copy of fixture run ``src`` whose worker_1.log went through ``edit(lines) -> lines``."""
    d = tmp_path / src
    shutil.copytree(LOGS / src, d)
    p = d / "worker_1.log"
    p.write_text("\n".join(edit(p.read_text().splitlines())) + "\n")
    return str(d)


def test_parsers_read_every_pynative_line():
    run = read_logs([str(LOGS / "pynative_dsv3_mtp")])
    ev = run.ranks[0].events
    acts = {(e.layer, e.action): e.paths for e in ev if isinstance(e, ActionEvent)}
    assert acts[(3, "select_recompute_exclude")] == ["self_attention.core_attention"]
    assert acts[(3, "op_swap")] == ["self_attention.linear_proj"]
    assert acts[(4, "select_recompute")][0] == "final_layernorm"
    notes = [e for e in ev if isinstance(e, NoticeEvent)]
    assert [n.data["label"] for n in notes if n.what == "pyn_map_start"] == [
        "Recompute", "ExcludeOp", "Comm Select Recompute", "Swap"]
    assert [n.data for n in notes if n.what == "pattern_no_match"] == [{"label": "op_swap", "pattern": "eh_proj"}]
    assert [n.data for n in notes if n.what == "world_size"] == [{"n": 2}]
    assert any(n.what == "cell_not_op" and n.data["path"] == "mlp.experts.activation_func" for n in notes)
    qwen = read_logs([str(LOGS / "pynative_qwen3")]).ranks[1].events
    assert any(isinstance(e, ActionEvent) and e.action == "layer_swap" and e.layer == 2 for e in qwen)


@pytest.mark.parametrize("logs,cfg", [("pynative_qwen3", QWEN), ("pynative_dsv3_mtp", DSV3)])
def test_genuine_logs_pass(logs, cfg):
    r = verify([str(LOGS / logs)], config_path=cfg)
    assert r.verdict == "pass" and not codes(r, "error") and r.ranks == [0, 1]
    assert "SW104" in codes(r)                       # both runs log a no-match warning


def test_deleted_set_line_is_sw101_with_rank_and_layer(tmp_path):
    d = edited(tmp_path, "pynative_qwen3", lambda ls: [l for l in ls if "Set full recompute at layer 0" not in l])
    r = verify([d], config_path=QWEN)
    assert r.verdict == "fail"
    assert [(f.code, f.rank, f.layer, f.op) for f in r.findings if f.severity == "error"] == [
        ("SW101", 1, 0, "full_recompute"), ("SW401", 1, 0, "full_recompute")]
    # SW401 is an error here as on the static path: rank 1 runs another graph than rank 0
    assert [(f.rank, f.expected, f.actual, f.severity) for f in r.findings if f.code == "SW401"] == [
        (1, "on", "(nothing)", "error")]


def test_added_line_is_sw102(tmp_path):
    def add(ls):
        i = next(i for i, l in enumerate(ls) if "Set layer swap at layer 2" in l)
        return ls[:i + 1] + [ls[i].replace("layer 2", "layer 3")] + ls[i + 1:]
    r = verify([edited(tmp_path, "pynative_qwen3", add)], config_path=QWEN)
    errs = [(f.code, f.rank, f.layer) for f in r.findings if f.severity == "error"]
    assert errs == [("SW102", 1, 3), ("SW401", 1, 3)]       # rank 1 now differs from rank 0, at layer 3


def test_altered_paths_and_map_entries(tmp_path):
    def alter(ls):
        out = []
        for l in ls:
            if l.endswith("Set select recompute at layer 2: mlp"):
                l = l.replace(": mlp", ": mlp.linear_fc1")
            if l.endswith("INFO - layer1: mlp.linear_fc1"):
                continue                            # a Final Swap map entry deleted
            out.append(l)
        return out
    r = verify([edited(tmp_path, "pynative_qwen3", alter)], config_path=QWEN)
    got = sorted((f.code, f.rank, f.layer, f.op) for f in r.findings if f.severity == "error")
    # a map entry is an item of the comparison like a Set line's path (named in setting_lines' words)
    assert got == [("SW101", 1, 1, "mlp.linear_fc1"), ("SW101", 1, 2, "mlp"), ("SW102", 1, 2, "mlp.linear_fc1"),
                   ("SW401", 1, 1, "mlp.linear_fc1"), ("SW401", 1, 2, "mlp, mlp.linear_fc1")]
    assert next(f.message for f in r.findings if f.code == "SW101" and f.layer == 1).startswith(
        "'Final Swap Configuration Map' entry mlp.linear_fc1 is configured")


def test_single_card_and_refusal_and_silent_rank(tmp_path):
    r = verify([str(LOGS / "pynative_single_card")], config_path=QWEN)
    assert [(f.code, f.rank) for f in r.findings if f.code == "SW501" and f.rank is not None] == [("SW501", 0)]
    silent = edited(tmp_path, "pynative_qwen3", lambda ls: ls[:1])
    r = verify([silent], config_path=QWEN)
    assert [(f.code, f.rank) for f in r.findings if f.severity == "error"] == [("SW106", 1)]
    refusal = ("2026-11-23 23:48:29,360 - mindformers/tmp/output/log[mindformers/pynative/distributed/"
               "activation_checkpoint.py:390] - ERROR - [Swap Config] swap is not supported with pipeline parallel")
    r = verify([edited(tmp_path / "b", "pynative_qwen3", lambda ls: ls[:1] + [refusal])], config_path=QWEN)
    assert [(f.code, f.rank) for f in r.findings if f.severity == "error"] == [("SW106", 1)]
    assert any("swap is not supported with pipeline parallel" in f.message for f in r.findings if f.code == "SW106")


@pytest.mark.parametrize("fmt", ["table", "json", "junit", "markdown"])
def test_every_format_names_rank_and_layer(tmp_path, fmt):
    d = edited(tmp_path, "pynative_qwen3", lambda ls: [l for l in ls if "Set select recompute at layer 3" not in l])
    out = subprocess.run([EXE, "verify", d, "--config", QWEN, "--format", fmt], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stderr
    assert "SW101" in out.stdout
    if fmt in ("table", "junit"):
        assert "rank 1 · layer 3: select recompute" in out.stdout
    if fmt == "markdown":
        assert "| SW101 | error | 1 | 3 |" in out.stdout
    if fmt == "json":
        f = [x for x in json.loads(out.stdout)["findings"] if x["code"] == "SW101"]
        assert f[0]["rank"] == 1 and f[0]["layer"] == 3


def test_pynative_log_without_config_asks_for_it():
    out = subprocess.run([EXE, "verify", str(LOGS / "pynative_qwen3")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--config" in out.stderr and "Traceback" not in out.stderr


def test_pipeline_stages_each_log_their_own_layers(tmp_path):
    pp2 = str(CONFIGS / "pynative_pp2.yaml")
    r = verify([str(LOGS / "pynative_pp2")], config_path=pp2)
    assert r.verdict == "pass" and codes(r) == [], [f.message for f in r.findings]    # stage-local no-match: not SW104
    d = edited(tmp_path, "pynative_pp2", lambda ls: [l for l in ls if "Set select recompute at layer 3" not in l])
    r = verify([d], config_path=pp2)
    # missing is judged on all ranks together (rank None): each path of the lost line, nothing else
    assert {(f.code, f.rank, f.layer) for f in r.findings if f.severity == "error"} == {("SW101", None, 3)}
    assert sorted(f.op for f in r.findings if f.code == "SW101") == ["mlp", "self_attention.linear_proj"]


def test_layer_map_in_table_and_json(tmp_path):
    """verify's one per-layer map (verify_render, from the one Comparison) on a PyNative run."""
    d = edited(tmp_path, "pynative_qwen3", lambda ls: [l for l in ls if "Set full recompute at layer 0" not in l])
    r = verify([d], config_path=QWEN)
    from swapwatch.report.verify import layer_map_json, render_table
    m = layer_map_json(r)
    assert m["rank"] == 1 and m["layers"][0]["differs"] == ["full_recompute"]
    row = m["layers"][2]
    assert {k: row["actual"][k] for k in ("select_recompute", "select_comm_recompute", "layer_swap")} == \
        {"select_recompute": "mlp", "select_comm_recompute": "self_attention.reshape", "layer_swap": "yes"}
    assert row["expected"]["select_recompute"] == "mlp" and row["expected"]["layer_swap"].startswith("yes")
    assert not row["differs"] and [x["stage"] for x in m["layers"]] == [0, 0, 0, 0]
    text = render_table(r)
    assert "Per-layer strategy, rank 1:" in text and "✗ yes → -" in text
    out = subprocess.run([EXE, "verify", d, "--config", QWEN, "--format", "json"], capture_output=True, text=True,
                         timeout=120)
    assert json.loads(out.stdout)["layer_map"]["layers"][0]["differs"] == ["full_recompute"]
