"""Which pipeline stage holds each layer of a PyNative (r2.x) YAML: ``pynative.config.stage_split``, the one split
PyNative explain and diff show (``PynativePlan.stage_of``) and the sizing places layers by. Checked against
MindFormers 2.1.0's own ``PpLayerSetting`` (tests/oracle/mf_pp_layers.py), and on the CLI's diff / explain /
estimate of a pp > 1 YAML."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swapwatch.errors import ConfigError
from swapwatch.pynative.config import load, stage_split
from swapwatch.pynative.layer_spec import Refusal

REPO = Path(__file__).resolve().parents[1]
ORACLE = REPO / ".oracle-venv" / "bin" / "python"
PP2 = str(REPO / "fixtures" / "configs" / "pynative_pp2.yaml")

#: (num_layers, pp, interleave, layers_per_stage): 'auto' splits that divide and that do not, interleaved chunks,
#: explicit ranges and each of PpLayerSetting._init_explicit's refusals
CASES = [
    (4, 2, 1, "auto"), (8, 2, 2, "auto"), (12, 4, 1, "auto"), (12, 3, 2, "auto"), (5, 2, 1, "auto"),
    (6, 2, 2, "auto"), (3, 4, 1, "auto"),
    (5, 2, 1, ["0-1", "2-4"]), (8, 2, 2, ["0-1,4-5", "2-3,6-7"]), (7, 3, 1, ["0", "1-5", "6"]),
    (5, 2, 1, ["0-4"]), (5, 2, 1, ["0-1,2", "3-4"]), (5, 2, 1, ["0-a", "2-4"]), (5, 2, 1, ["0-1", "4-2"]),
    (5, 2, 1, ["0-1", "2-3-4"]),
]


def ours(n, pp, v, per):
    """Per virtual stage, its (first, last) layer as our split places them, or the refusal's MindFormers text."""
    par = {"pipeline_parallel": pp, "pipeline_parallel_interleave_num": v, "pipeline_parallel_layers_per_stage": per}
    try:
        geo = stage_split(n, par)
    except Refusal as exc:
        return {"error": exc.mf_message}
    by_vs = {}
    for layer in range(n):
        vs = geo.interleave_ids[layer] * pp + geo.pp_ids[layer]
        by_vs.setdefault(vs, []).append(layer)
    assert sorted(by_vs) == list(range(pp * v))
    assert all(ids == list(range(ids[0], ids[-1] + 1)) for ids in by_vs.values())   # consecutive layers
    return {"ranges": [[by_vs[vs][0], by_vs[vs][-1]] for vs in range(pp * v)]}


def test_the_split_is_apply_pps():
    assert ours(8, 2, 2, "auto") == {"ranges": [[0, 1], [2, 3], [4, 5], [6, 7]]}   # virtual stage = chunk * pp + rank
    geo = stage_split(8, {"pipeline_parallel": 2, "pipeline_parallel_interleave_num": 2})
    assert geo.pp_ids == [0, 0, 1, 1, 0, 0, 1, 1] and geo.interleave_ids == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "not divisible" in ours(5, 2, 1, "auto")["error"]
    # without pipeline parallel apply_pp is not called: one stage whatever the other keys say
    assert stage_split(5, {"pipeline_parallel_interleave_num": 3}).pp_ids == [0] * 5


def test_a_split_that_does_not_cover_the_layers_once_is_refused():
    for per in (["0-1", "3-4"], ["0-1", "2-3"], ["0-2", "2-4"], [0, 1], "even"):
        with pytest.raises(ConfigError, match="pipeline_parallel_layers_per_stage") as info:
            stage_split(5, {"pipeline_parallel": 2, "pipeline_parallel_layers_per_stage": per}, "x.yaml",
                        {"parallelism.pipeline_parallel_layers_per_stage": 7})
        assert info.value.line == 7 and not isinstance(info.value, Refusal)


@pytest.mark.oracle
@pytest.mark.skipif(not (REPO / ".oracle-venv" / ".ready").exists(), reason="no oracle venv")
def test_the_split_matches_mindformers_pplayersetting():
    cases = [{"num_layers": n, "pp": pp, "interleave": v, "per_stage": per} for n, pp, v, per in CASES]
    out = subprocess.run([str(ORACLE), str(REPO / "tests" / "oracle" / "mf_pp_layers.py")],
                         input=json.dumps({"cases": cases}), capture_output=True, text=True, timeout=300)
    mark = "@@pp-layers-oracle@@"
    line = [ln for ln in out.stdout.splitlines() if ln.startswith(mark)]
    assert line, out.stderr[-2000:]
    theirs = json.loads(line[-1][len(mark):])
    assert sum("error" in t for t in theirs) == 8 and sum("ranges" in t for t in theirs) == 7
    for case, t in zip(CASES, theirs):
        assert ours(*case) == t, case


def cli(*args):
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "swapwatch"), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_diff_and_explain_show_the_stage_the_sizing_uses(tmp_path):
    b = tmp_path / "b.yaml"
    b.write_text(Path(PP2).read_text().replace("'mlp': ['0', '2-3']", "'mlp': ['0', '2']"))
    r = cli("diff", PP2, str(b), "--format", "json")
    assert r.returncode == 1, r.stderr
    js = json.loads(r.stdout)
    assert [(d["layer"], d["stage"]["a"]["stage"], d["stage"]["b"]["stage"]) for d in js["layers"]] == [
        (0, 0, 0), (1, 0, 0), (2, 1, 1), (3, 1, 1)]
    assert js["stages"] == ["stage 0: no change", "stage 1: layer 3 select: select recompute differ"]
    text = cli("diff", PP2, str(b)).stdout
    assert "stage ?" not in text and "stage 0: no change" in text
    r = cli("explain", PP2)
    assert r.returncode == 0 and "(stage 0: layers 0-1; stage 1: layers 2-3)" in r.stdout
    # the sizing puts each layer on that stage: the same function (config.stage_split) decides both
    sized = tmp_path / "sized.yaml"
    sized.write_text(Path(PP2).read_text().replace(
        "  num_hidden_layers: 4\n", "  num_hidden_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 8\n"
        "  intermediate_size: 3072\n  vocab_size: 32000\n  seq_length: 2048\n"))
    est = json.loads(cli("estimate", str(sized), "--format", "json").stdout)
    cfg = load(str(sized))
    assert [(row["layer"], row["stage"]) for row in est["layers"]] == [(i, cfg.stage_of(i)[0]) for i in range(4)]


def test_a_split_mindformers_refuses_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "five.yaml"
    bad.write_text(Path(PP2).read_text().replace("num_hidden_layers: 4", "num_hidden_layers: 5"))
    for cmd in ("explain", "diff"):
        r = cli(cmd, str(bad), *((PP2,) if cmd == "diff" else ()))
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert f"{bad}:6: parallelism.pipeline_parallel: MindFormers refuses this: ValueError: Number of layers " \
               "(5) is not divisible by total stages (2)." in r.stderr, r.stderr
