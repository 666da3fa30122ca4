"""Whole-cell select recompute on the fine-grain interleaved Llama layer, as DryRun L1 showed it on the
Llama2-70B cut (fine_grain_interleave 2, TP4 sequence parallel; fixtures/dryrun/cases/llama2_70b_l8_pp2_sel_*):

* ``feed_forward`` (the cell): MindSpore 2.10 fails to compile ("Graph cycle exists" after the pass
  MicroInterleavedOrderControl). SW310 says so before launch; ``plan`` never writes it.
* ``attention`` (the cell): the layer calls the cell's methods, never the cell, so the mark does nothing
  (the same peak as without it). SW211 says so; the estimate credits nothing; ``plan`` drops the level.

The first DryRun of ``plan``'s Llama2-70B answer (select ``feed_forward`` on one layer and ``attention`` on
17) found both: its stage 0 did not compile and its stage 1 was 10.5 % above the estimate.
"""
from __future__ import annotations

import json
import os

import yaml

from cli_helpers import fx, sw
from swapwatch.memory.model import estimate
from swapwatch.memory.tensor_table import TensorTable

CASES = fx("dryrun", "cases")


def _record(name: str) -> dict:
    with open(os.path.join(CASES, name + ".json"), encoding="utf-8") as fh:
        return json.load(fh)


def _findings(path: str, capsys) -> list:
    code, out, err = sw("explain", path, "--format", "json", capsys=capsys)
    assert code in (0, 1), err
    return json.loads(out)["findings"]


def test_the_records_say_what_the_table_says():
    """The DryRun facts the table's uncompilable_select / uncalled_cells stand on."""
    for name in ("llama2_70b_l8_pp2_sel_ff1", "llama2_70b_l8_pp2_sel_attn4_ff1"):
        rec = _record(name)
        assert rec["stages"] == [] and "Graph cycle exists" in " ".join(rec["compile_error"]["lines"])
        assert "MicroInterleavedOrderControl" in " ".join(rec["compile_error"]["lines"])
    attn, none = _record("llama2_70b_l8_pp2_sel_attn4"), _record("llama2_70b_l8_pp2_none")
    assert attn["stages"][0]["used_peak_mib"] == none["stages"][0]["used_peak_mib"]


def test_sw310_names_the_cell_mindspore_cannot_compile(capsys, tmp_path):
    for name in ("llama2_70b_l8_pp2_sel_ff1", "llama2_70b_l8_pp2_sel_attn4_ff1"):
        found = [f for f in _findings(os.path.join(CASES, name + ".yaml"), capsys) if f["code"] == "SW310"]
        assert len(found) == 1 and found[0]["severity"] == "error", found
        assert "feed_forward" in found[0]["message"] and "layer(s) 0 " in found[0]["message"]
    # the YAML that compiled, and the same cell on the plain layer: no SW310
    assert not [f for f in _findings(os.path.join(CASES, "llama2_70b_l8_pp2_sel_attn4.yaml"), capsys)
                if f["code"] == "SW310"]
    doc = yaml.safe_load(open(os.path.join(CASES, "llama2_70b_l8_pp2_sel_ff1.yaml"), encoding="utf-8"))
    doc["model"]["model_config"]["fine_grain_interleave"] = 1
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(doc))
    assert not [f for f in _findings(str(plain), capsys) if f["code"] == "SW310"]


def test_an_uncalled_cell_frees_nothing_and_sw211_says_why(capsys):
    attn = estimate(os.path.join(CASES, "llama2_70b_l8_pp2_sel_attn4.yaml"))
    none = estimate(os.path.join(CASES, "llama2_70b_l8_pp2_none.yaml"))
    assert attn.stages[0].peak() == none.stages[0].peak()
    found = [f for f in _findings(os.path.join(CASES, "llama2_70b_l8_pp2_sel_attn4.yaml"), capsys)
             if f["code"] == "SW211"]
    assert len(found) == 1 and "never calls the attention cell" in found[0]["message"], found


def test_plan_offers_no_such_level_on_the_interleaved_layer():
    """The select groups on the interleaved layer: no ``mlp`` (uncompilable); ``attention`` costs as none,
    so the search's chains drop it; MindFormers' default set (the SiLU-Mul product) is a level. On the
    plain layer ``mlp`` and ``attention`` are levels and the default set is dropped (frees nothing)."""
    from swapwatch.memory.model import plan_of
    from swapwatch.memory.search import chains

    _, _, spec = plan_of(os.path.join(CASES, "llama2_70b_l8_pp2_none.yaml"))
    fam = TensorTable(spec, "llama")
    assert spec.fine_grain > 1 and "mlp" not in dict(fam.groups)
    for chain in chains(fam):
        pats = {p for lv in chain for p in lv.patterns}
        assert "feed_forward" not in pats and "attention" not in pats, [lv.label for lv in chain]
        assert any("feed_forward\\.mul" in lv.patterns for lv in chain)
    spec.fine_grain = 1
    plain = TensorTable(spec, "llama")
    labels = {lv.label for chain in chains(plain) for lv in chain}
    assert "select:attention" in labels and "select:feed_forward" in labels
    assert not any("feed_forward\\.mul" in lb for lb in labels)
