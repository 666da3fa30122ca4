"""`plan --allow-swap` (issue 34): per layer keep / select / full / op swap / layer swap, each swap with
the least backward_prefetch that hides its copies at the host link, under the device budget and the
host memory of a node; the YAML it writes is what MindFormers takes and explain accepts."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from swapwatch.commands.explain import explain
from swapwatch.memory.planner import make_plan
from swapwatch.memory.swap_cost import make_link

QWEN = "fixtures/configs/plan_qwen64.yaml"          # 64 layers, pp 4, 16 micro-batches, full recompute
GiB = 1 << 30
BUDGET = 15 * GiB                                    # needs recompute: none keeps far more


def cli(*args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def no_swap():
    return make_plan(QWEN, BUDGET, margin=None)


def _swaps(res):
    return [c for st in res.to_json()["swap"]["stages"] for c in st["swaps"]] if res.estimate.swaps else []


def test_a_fast_link_swaps_and_recomputes_less(no_swap, tmp_path):
    link = make_link("120GB/s", host_memory=2048 * GiB)
    res = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=link)
    assert res.fits and no_swap.fits
    js = res.to_json()
    assert js["recompute_flops"] < no_swap.to_json()["recompute_flops"] / 100      # 2.1 vs 100,000 GFLOP
    swaps = _swaps(res)
    assert len(swaps) >= 20 and all(c["hides"] for c in swaps)
    # swap writes memory_optimize_level O0: checked with O0's fragments (the YAML's O1 has none), and
    # still the faster plan (its modelled step against the best without swap at O1), said
    assert 'memory_optimize_level: "O0"' in res.text and res.parts.fragments > 0 and no_swap.parts.fragments == 0
    assert res.step < no_swap.step and any("O0's fragments" in n for n in res.notes)
    # per swap: the bytes, the copy's seconds and the window's (DESIGN §3.3a `swap`)
    for c in swaps:
        assert c["bytes"] > 0 and c["transfer_seconds"] == pytest.approx(c["bytes"] / 120e9, abs=1e-9)
        assert c["window_seconds"] > 0 and c["exposed_seconds"] == 0
    assert js["swap"]["link"]["bandwidth_from"] == "--host-bandwidth" and js["swap"]["host_fits"]
    # the written YAML: layer ids, one layer_swap entry per prefetch, and explain finds nothing at that link
    out = tmp_path / "planned.yaml"
    out.write_text(res.text)
    ex = explain(str(out), link=link)
    assert ex.exit_code == 0 and not ex.findings
    # `explain --format formative`: the `Set layer swap` lines MindFormers logs for it, one per swapped layer
    text = cli("explain", str(out), "--format", "formative", "--host-bandwidth", "120GB/s").stdout
    got = {int(m.group(1)): int(m.group(2))
           for m in re.finditer(r"Set layer swap at layer (\d+)\s+and value is: (\d+)", text)}
    assert got == {c["layer"]: c["backward_prefetch"] for c in swaps}


def test_a_slow_link_swaps_nothing_it_cannot_hide(no_swap):
    for bw in ("30GB/s", "8GB/s", "1GB/s"):
        res = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=make_link(bw, host_memory=2048 * GiB))
        assert res.fits
        assert all(c["hides"] for c in _swaps(res))                 # what it swaps hides, at any bandwidth
        assert res.to_json()["recompute_flops"] <= no_swap.to_json()["recompute_flops"]
    # at 1 GB/s even the attention's 53 MiB cannot hide: the plan is recompute only
    slow = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=make_link("1GB/s", host_memory=2048 * GiB))
    assert not slow.estimate.swaps and slow.parts.fragments == 0
    assert slow.to_json()["recompute_flops"] == no_swap.to_json()["recompute_flops"]
    assert any(n.startswith("swap (--allow-swap): none written") for n in slow.notes)


def test_op_swap_entries_are_what_mindformers_logs(tmp_path):
    # at 30 GB/s the whole layer cannot hide, the attention's outputs can (backward_prefetch 24)
    link = make_link("30GB/s", host_memory=2048 * GiB)
    res = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=link)
    assert res.fits and "op_swap:" in res.text and "layer_swap" not in res.text
    out = tmp_path / "op.yaml"
    out.write_text(res.text)
    ex = explain(str(out), link=link)
    assert ex.exit_code == 0 and not ex.findings
    text = cli("explain", str(out), "--format", "formative", "--host-bandwidth", "30GB/s").stdout
    lines = re.findall(r"Set op_swap at layer (\d+): (.*)", text)
    # each layer's entries as MindFormers logs them: the attention's outputs at prefetch 24 on most, and
    # (since MindFormers' default select set is a group) the SiLU-Mul product's two ops at 6 on a few
    want = {".attention, value=24", " feed_forward.mul, value=6,  feed_forward.w1.activation.silu, value=6"}
    assert lines and {items for _, items in lines} <= want, {items for _, items in lines}
    assert any(items == ".attention, value=24" for _, items in lines)
    assert {int(i) for i, _ in lines} == {c["layer"] for c in _swaps(res)}


def test_host_memory_of_a_node_bounds_the_swaps():
    link = make_link("120GB/s", host_memory=64 * GiB)
    res = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=link)
    js = res.to_json()["swap"]
    # the search keeps each rank's host bytes (in flight x swapped) within the node's over its 8 ranks
    assert res.fits and js["host_fits"] and js["host_bytes_per_node"] <= 64 * GiB
    assert all(st["host_bytes_per_rank"] <= 8 * GiB for st in js["stages"])
    unbounded = make_plan(QWEN, BUDGET, allow_swap=True, margin=None, link=make_link("120GB/s", host_memory=2048 * GiB))
    assert unbounded.to_json()["swap"]["host_bytes_per_node"] > 64 * GiB


def test_plan_cli_json_and_table(tmp_path):
    r = cli("plan", QWEN, "--budget", "15GiB", "--allow-swap", "--host-bandwidth", "120GB/s", "--host-memory",
            "2TiB", "--format", "json")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert js["swap"]["hides"] is True and js["swap"]["stages"][0]["swaps"][0]["backward_prefetch"] == 16
    r = cli("plan", QWEN, "--budget", "15GiB", "--allow-swap", "--host-bandwidth", "120GB/s", "--host-memory", "2TiB")
    assert "every swap hides behind compute" in r.stdout
    assert re.search(r"^4-15\s+0\s+layer\s+16\s+206.3 MiB\s+1.8 ms\s+>= \S+ ms\s+hidden$", r.stdout, re.M)
