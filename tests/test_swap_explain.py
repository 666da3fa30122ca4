"""A swap YAML's costs said: SW212 in explain (a backward_prefetch that cannot hide its copies, with the
numbers), the swap table and JSON of estimate, the host memory it takes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from swapwatch.commands.explain import explain
from swapwatch.memory.model import estimate
from swapwatch.memory.swap_cost import make_link

SIZED = "fixtures/configs/swap_sized.yaml"
QWEN = "fixtures/configs/plan_qwen64.yaml"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True)


def test_sw212_fires_on_a_layer_swap_its_prefetch_cannot_hide():
    ex = explain(SIZED)
    found = [f for f in ex.findings if f.code == "SW212"]
    assert len(found) == 1 and ex.exit_code == 0                 # a warning
    f = found[0]
    # the layer swap (every 4th layer of stage 0, backward_prefetch 2), with its numbers and the fix
    assert f.layer == 0 and f.op == "layer" and f.source.endswith("swap_sized.yaml:68")
    for part in ("layer swap (backward_prefetch 2) on layer(s) 0,4,8,12 of stage 0", "206.3 MiB per micro-batch",
                 "ms out", "ms back at 30 / 30 GB/s", "kernels wait", "per step", "910b default, assumed",
                 "a backward_prefetch of 64 hides it"):
        assert part in f.message
    # the flash attention's op swap with prefetch 24 hides: no finding for it
    assert not any("flash_attention" in g.message for g in found)


def test_sw212_quiet_when_the_swaps_hide_or_nothing_can_be_timed(tmp_path):
    text = open(SIZED).read().replace("backward_prefetch: 2, layers: [0, 4, 8, 12]",
                                      "backward_prefetch: 64, layers: [0, 4, 8, 12]")
    hid = tmp_path / "hid.yaml"
    hid.write_text(text)
    assert not [f for f in explain(str(hid)).findings if f.code == "SW212"]
    # no sizes (the documented swap cases): nothing to time, no finding
    assert not [f for f in explain("fixtures/configs/swap_case2.yaml").findings if f.code == "SW212"]
    # no swap at all
    assert not [f for f in explain(QWEN).findings if f.code == "SW212"]


def test_estimate_prices_every_swap_and_says_with_what():
    est = estimate(SIZED, link=make_link("60GB/s", host_memory=1 << 40))
    js = est.to_json()["swap"]
    assert js["link"]["d2h_bytes_per_second"] == 60e9 and js["link"]["bandwidth_from"] == "--host-bandwidth"
    assert "assumed" in js["link"]["flops_from"] and js["host_fits"] is True and js["hides"] is False
    st0, st1 = js["stages"]
    assert [c["layer"] for c in st0["swaps"]] == [0, 4, 8, 12] and [c["layer"] for c in st1["swaps"]] == [16, 17, 18, 19]
    for c in st0["swaps"] + st1["swaps"]:
        assert {"bytes", "transfer_seconds", "window_seconds", "exposed_seconds", "hides"} <= set(c)
        assert c["transfer_seconds"] == pytest.approx(c["bytes"] / 60e9, abs=1e-9)
    assert all(not c["hides"] for c in st0["swaps"]) and all(c["hides"] for c in st1["swaps"])
    assert st0["exposed_seconds_per_step"] == pytest.approx(16 * sum(c["exposed_seconds"] for c in st0["swaps"]))
    # host: 4 micro-batches in flight on stage 0 x the 4 swapped layers' bytes, x 8 ranks a node
    assert st0["host_bytes_per_rank"] == 4 * sum(c["bytes"] for c in st0["swaps"])
    assert js["host_bytes_per_node"] == 8 * st0["host_bytes_per_rank"]
    # what the swaps add to the peak is the stage's swap window (model.swap_window): a swapped layer is
    # back during its own backward, when the later layers have freed more than it brings (0 here)
    assert [est.stages[st["stage"]].swap_window for st in (st0, st1)] == [st0["window_bytes"], st1["window_bytes"]]


def test_estimate_table_and_host_memory_over_a_node():
    r = cli("estimate", SIZED, "--host-memory", "16GiB")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "swaps, per micro-batch, at 30 GB/s host link (910b default, assumed: --host-bandwidth sets it)" in out
    assert "0,4,8,12  0      layer" in out and "hidden" in out
    assert "x 8 ranks a node = 25.78 GiB, OVER the 16.00 GiB a node has" in out
    assert "waits per step (the step is that much longer): stage 0" in out
    r = cli("estimate", SIZED, "--host-bandwidth", "fast")
    assert r.returncode == 2 and "--host-bandwidth: 'fast' is not a bandwidth" in r.stderr
    r = cli("estimate", SIZED, "--host-memory", "lots")
    assert r.returncode == 2 and "--host-memory: 'lots' is not a size" in r.stderr
    js = json.loads(cli("estimate", QWEN, "--format", "json").stdout)
    assert "swap" not in js                                  # no swap, no section
