"""The layer split searched with the levels (issue 35 point 4, memory/offsets.py): exact over the
splits it considers (against enumerating them), written as `offset` where MindFormers reads it, and
read back to the same split."""
from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest
import yaml

from swapwatch.explain import explain
from swapwatch.memory.emit import splice
from swapwatch.memory.model import estimate
from swapwatch.memory.offsets import search_split, spread, split_geometry, step_seconds
from swapwatch.memory.planner import make_plan
from swapwatch.memory.search import StagePlan
from swapwatch.strategy import compute_geometry

QWEN = "fixtures/configs/plan_qwen64.yaml"
Q32 = "fixtures/configs/mindformers/pretrain_qwen3_32b_4k.yaml"


@pytest.mark.parametrize("seed", range(30))
def test_split_search_is_exact_over_the_splits_it_considers(seed):
    """A synthetic stage cost (time per micro-batch growing with the layer count, some counts not
    fitting): the search's split has the least 1F1B step time of every split within its range."""
    rng = random.Random(seed)
    P, L, micro = rng.choice([2, 3, 4]), rng.randint(6, 14), rng.choice([1, 4, 16])
    base, R = L // P, spread(L // P)
    cost = {(p, n): None if rng.random() < 0.15 else n * (1 + 0.3 * p) + rng.random() * 3
            for p in range(P) for n in range(0, L + 1)}
    own = [base + (1 if p < L % P else 0) for p in range(P)]
    for p, n in enumerate(own):
        cost[(p, n)] = n * (1 + 0.3 * p) + 5.0          # the YAML's split always fits (slowly)

    def solve(p, start, n):
        c = cost[(p, n)]
        return None if c is None else (StagePlan(stage=p, fits=True), c)

    got = search_split(L, P, micro, own, solve)
    lo = [min(max(1, base - R), own[p]) for p in range(P)]
    hi = [max(base + R, own[p]) for p in range(P)]
    best = None
    for counts in itertools.product(*[range(lo[p], hi[p] + 1) for p in range(P)]):
        if sum(counts) != L or any(cost[(p, n)] is None for p, n in enumerate(counts)):
            continue
        t = step_seconds([cost[(p, n)] for p, n in enumerate(counts)], micro)
        best = t if best is None else min(best, t)
    assert got is not None and best is not None
    assert got.step == pytest.approx(best)
    assert sum(got.counts) == L and got.geometry.layer_list == [got.counts]


def test_split_geometry_is_mindformers_own():
    for counts in ([16, 16, 16, 16], [15, 16, 16, 17], [17, 16, 15, 16]):
        mine = split_geometry(64, counts)
        cfg = type("C", (), {"num_layers": 64, "pipeline_stage": 4, "effective_interleave": 1, "layer_list": None,
                             "offset": mine.offset[0], "pipeline_interleave": False})()
        theirs = compute_geometry(cfg)
        assert mine == theirs


def heavy_last(tmp_path):
    """plan_qwen64.yaml with one layer moved onto the last stage (offset [0, 0, -1, 1])."""
    src = tmp_path / "heavy_last.yaml"
    src.write_text(splice(open(QWEN).read(), QWEN, [(("model", "model_config", "offset"), [0, 0, -1, 1])]))
    return src


def test_the_split_is_planned_and_written(tmp_path):
    """Under a budget the YAML's split cannot meet (its last stage holds a layer too many) but the
    even split can, `plan` moves the layer itself and writes the offset; the written YAML reads
    back to that split, explains clean and fits."""
    src = heavy_last(tmp_path)
    heavy = make_plan(str(src), 1, margin=0.0).lowest
    even = make_plan(QWEN, 1, margin=0.0).lowest
    budget = (max(even.values()) + heavy[3]) // 2
    assert not make_plan(str(src), budget, margin=0.0).fits
    res = make_plan(str(src), budget, margin=0.0, offsets=True)
    assert res.fits, res.message()
    assert res.to_json()["layer_split"] == res.estimate.plan.geometry.layer_list[0] != [16, 16, 15, 17]
    assert yaml.safe_load(res.text)["model"]["model_config"]["offset"] == \
        [n - 16 for n in res.to_json()["layer_split"]]
    out = tmp_path / "planned.yaml"
    out.write_text(res.text)
    assert not explain(str(out)).findings
    assert all(st.peak() <= budget for st in estimate(str(out)).stages)
    # --keep-offset keeps the YAML's split: nothing fits it
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "plan", str(src), "--budget", str(budget),
                        "--margin", "0", "--keep-offset"], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout
    r = subprocess.run([sys.executable, "-m", "swapwatch.cli", "plan", str(src), "--budget", str(budget),
                        "--margin", "0", "--format", "yaml"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == res.text


def test_the_split_moves_only_for_a_faster_step():
    # plenty of room, no recompute anywhere: a split other than the YAML's only when the modelled step
    # is shorter (the last stage also runs the head: a layer off it balances the stages)
    kept = make_plan(QWEN, 1 << 40, margin=0.0)
    moved = make_plan(QWEN, 1 << 40, margin=0.0, offsets=True)
    assert kept.fits and moved.fits and moved.to_json()["recompute_flops"] == kept.to_json()["recompute_flops"]
    if moved.to_json()["layer_split"] != [16, 16, 16, 16]:
        assert moved.step < kept.step
    # an exact tie keeps the YAML's own split
    def solve(p, start, n):
        return StagePlan(stage=p, fits=True), 1.0
    assert search_split(8, 2, 4, [5, 3], solve).counts == [5, 3]
    assert search_split(8, 2, 4, [4, 4], solve).counts == [4, 4]


def test_the_split_search_is_never_slower_than_the_yamls_split():
    """The Qwen3-32B maintainer YAML at its own max_device_memory: the plan with the split searched
    has a modelled step time no longer than with the YAML's split kept, and both than the
    maintainers' own full recompute."""
    kept = make_plan(Q32, None, margin=None)
    moved = make_plan(Q32, None, margin=None, offsets=True)
    assert kept.fits and moved.fits
    assert moved.step <= kept.step + 1e-12 < kept.own["step_time_seconds"]
    assert sum(moved.to_json()["layer_split"]) == 64


def test_an_interleaved_pipeline_keeps_its_split():
    res = make_plan("fixtures/configs/mindformers/pretrain_telechat3_36b.yaml", None, margin=None, offsets=True)
    assert any("interleaved pipeline's offsets are not searched" in n for n in res.notes)
