"""What a swap costs (swapwatch/memory/swap_cost.py): MindSpore's offload schedule, checked on the
execution order a real DryRun compiled, and the timing model on cases whose answer is known by hand."""
from __future__ import annotations

import collections
import csv
import gzip
import io
import re
from pathlib import Path

import pytest

from swapwatch.errors import InputError
from swapwatch.memory import swap_cost
from swapwatch.memory.model import layer_families, memory_family, plan_of
from swapwatch.memory.swap_cost import (BWD_KERNELS_PER_OP, FWD_KERNELS_PER_OP, LayerProgram, Link,
                                        SwapItem, make_link, parse_rate, plan_swaps, program, simulate,
                                        swap_items)

ROOT = Path(__file__).resolve().parents[1]
SCHED = ROOT / "fixtures" / "dryrun" / "swap_schedule"
ORDER = SCHED / "qwen2_5_l4_pp2_swap.execute_order.csv.gz"
YAML = SCHED / "qwen2_5_l4_pp2_swap.yaml"


def link(bw: float = 1e9, flops: float = 1e12) -> Link:
    return Link(d2h=bw, h2d=bw, flops=flops, ranks_per_node=8, host_memory=None, bandwidth_from="test",
                flops_from="test")


# --- the recorded execution order -------------------------------------------------------------

EVENTS = ("StreamSend", "StreamRecv")


def _order():
    rows = list(csv.DictReader(io.TextIOWrapper(gzip.open(ORDER), encoding="utf-8")))
    nodes = []
    for r in rows:
        info = r["node_info"]
        m = re.match(r"@\w+:(\S+?)\{(.*)\}$", info)
        prim = re.search(r"\[0\]: ValueNode<Primitive> (\w+)", info)
        layer = re.search(r"layers-CellList/(\d+)-", r["node_name"])
        nodes.append({"cid": m.group(1) if m else None,
                      "ins": re.findall(r"\[\d+\]: ([\w]+)", m.group(2)) if m else [],
                      "prim": prim.group(1) if prim else r["node_name"].split("/")[-1].split("-")[0],
                      "to_cpu": "StringImm> CPU" in info, "layer": int(layer.group(1)) if layer else None,
                      "grad": r["node_name"].startswith("Gradients/"), "stream": r["stream_id"],
                      "event": r["event_id"]})
    return nodes


def _kernel(n) -> bool:
    return n["prim"] not in EVENTS and n["prim"] != "MoveTo"


def test_copies_out_are_waited_for_three_prefetches_later():
    # offload_activation.cc puts a MoveTo(CPU) after each offloaded output; the compute stream
    # waits for it 3 x backward_prefetch places later, the copies counted (AclStreamAssign::
    # AddDelayedSendRecvKernel): layer 0's layer swap has prefetch 5, layer 1's op swap 3
    nodes = _order()
    seen = collections.Counter()
    for i, n in enumerate(nodes):
        if n["prim"] != "MoveTo" or not n["to_cpu"]:
            continue
        sends = [m["event"] for m in nodes[i + 1:i + 4] if m["prim"] == "StreamSend" and m["stream"] == n["stream"]]
        wait = next(j for j in range(i + 1, len(nodes)) if nodes[j]["prim"] == "StreamRecv"
                    and nodes[j]["event"] in sends and nodes[j]["stream"] == "0")
        places = sum(1 for m in nodes[i + 1:wait] if m["prim"] not in EVENTS)
        seen[(n["layer"], places)] += 1
    # 18 tensors x 2 micro-batches on layer 0: at 15 places, or the first compute kernel after them
    # when the 15th is a copy on another stream (the loop of AddDelayedSendRecvKernel)
    assert seen[(0, 15)] >= 29 and seen[(1, 9)] == 2
    assert {places for layer, places in seen if layer == 0} <= set(range(15, 19))
    assert sum(seen.values()) == 38


def test_copies_back_start_prefetch_kernels_before_their_user():
    # InsertPreFetchDepend: the MoveTo(Ascend) runs after the kernel prefetch + 1 before its first
    # user (MoveTo not counted): `backward_prefetch` counts kernels, not layers
    nodes = _order()
    users = collections.defaultdict(list)
    for j, n in enumerate(nodes):
        for x in n["ins"]:
            users[x].append(j)
    gaps = collections.Counter()
    for i, n in enumerate(nodes):
        if n["prim"] == "MoveTo" and not n["to_cpu"] and n["layer"] is not None:
            after = [j for j in users[n["cid"]] if j > i]
            if not after:
                continue                          # its user names it through a Depend: not matched here
            u = min(after)
            gaps[(n["layer"], sum(1 for m in nodes[i + 1:u] if _kernel(m)))] += 1
    # prefetch 5 on layer 0: 28 of its 30 matched copies have exactly the 5 kernels before their user
    # (2 start 10 before: two tensors whose users share a node); prefetch 3 on layer 1
    assert gaps[(0, 5)] == 28 and gaps[(0, 10)] == 2
    assert gaps[(1, 3)] + gaps[(1, 2)] == 2
    assert max(g for (_, g) in gaps) <= 10       # never a layer (~60 kernels) ahead


def test_kernel_ratios_are_those_of_the_recorded_graph():
    # the table's program against the real execution order of one layer (forward of layer 0, backward
    # of layer 1 less the pipeline's receive / send): the ratios swap_cost uses
    nodes = _order()
    f0 = next(i for i, n in enumerate(nodes) if n["layer"] == 0 and not n["grad"])
    f1 = next(i for i in range(f0, len(nodes)) if nodes[i]["layer"] == 1 and not nodes[i]["grad"])
    b1 = next(i for i, n in enumerate(nodes) if n["layer"] == 1 and n["grad"])
    b0 = next(i for i in range(b1, len(nodes)) if nodes[i]["layer"] == 0 and nodes[i]["grad"])
    mask = {"GraphKernel_Mul_Sub_fusion", "PrimFunc_ExpandDims", "PrimFunc_Cast"}   # the causal mask's
    fwd_real = sum(1 for n in nodes[f0:f1] if _kernel(n)) - 4
    bwd_real = sum(1 for n in nodes[b1:b0] if _kernel(n) and n["prim"] not in ("Send", "Receive"))
    assert mask                                   # the 4 mask kernels interleaved in layer 0's forward
    _, plan, spec = plan_of(str(YAML))
    fam = memory_family(spec, plan)
    prog = program(fam, fam.effective(*fam.marks(plan.layers[0])[1:]))
    assert (len(prog.fwd), len(prog.bwd)) == (31, 40)
    assert fwd_real / len(prog.fwd) == pytest.approx(FWD_KERNELS_PER_OP, rel=0.02)
    assert bwd_real / len(prog.bwd) == pytest.approx(BWD_KERNELS_PER_OP, rel=0.02)


def test_layer_swap_moves_what_the_compiled_graph_copies_out():
    # DryRun's graph copies out no weight (the compute-dtype cast of a parameter is hoisted out of the
    # layer) and not the layer input: the items move the layer's own kept activations
    _, plan, spec = plan_of(str(YAML))
    fam = memory_family(spec, plan)
    tables, _ = layer_families(spec, plan, fam)
    items = swap_items(tables[0], plan.layers[0])
    names = {t for it in items for t, _ in it.tensors}
    assert [it.what for it in items] == ["layer"] and items[0].prefetch == 5
    assert not names & fam.weight_copies and "x" not in names
    assert {"qr", "kr", "v", "o4", "stats", "o", "xn1", "xn2", "g", "u", "act", "mr"} <= names
    # the add's output is read by the preset-recomputed ffn_norm cast: MindFormers' rule 2 keeps it
    assert "h1" not in names
    assert sum(it.bytes for it in items) == tables[0].layer_choice(plan.layers[0])[1].host
    op = swap_items(tables[1], plan.layers[1])
    assert [(it.what, [t for t, _ in it.tensors]) for it in op] == [("feed_forward\\.w2", ["mr"])]


# --- the link -----------------------------------------------------------------------------------

def test_rates_and_devices():
    assert parse_rate("30GB/s") == 30e9 and parse_rate("1GiB/s") == 1 << 30 and parse_rate("3e10") == 3e10
    lk = make_link("910c", host_memory=1 << 40)
    assert (lk.d2h, lk.h2d, lk.ranks_per_node) == (29e9, 33e9, 16) and "assumed" in lk.bandwidth_from
    lk = make_link("20GB/s,40GB/s", host_memory=1 << 40, flops=(1e14, "run x"))
    assert (lk.d2h, lk.h2d, lk.flops, lk.flops_from) == (20e9, 40e9, 1e14, "run x")
    assert "20 GB/s out, 40 GB/s back" in lk.line()
    for bad in ("fast", "-3GB/s", "0", "1,2,3", "30GB/h"):
        with pytest.raises(InputError, match="--host-bandwidth"):
            make_link(bad)


def test_default_host_memory_is_this_machines_and_said():
    lk = make_link()
    assert lk.host_memory == swap_cost.local_memory() and "this machine" in lk.host_memory_from
    assert "910b default, assumed" in lk.line() and "--calibrate" in lk.line()


# --- the timing model on hand-made layers -------------------------------------------------------

def _layer(n_fwd: int, flops: float, tensor: str = "a") -> LayerProgram:
    """A layer of ``n_fwd`` kernels of ``flops`` each; its first kernel makes ``tensor``, which its
    last backward kernel reads."""
    fwd = tuple((flops, frozenset([tensor]) if i == 0 else frozenset()) for i in range(n_fwd))
    bwd = tuple((2 * flops, frozenset([tensor]) if i == n_fwd - 1 else frozenset()) for i in range(n_fwd))
    return LayerProgram(fwd=fwd, bwd=bwd)


def test_a_swap_inside_its_window_hides_and_one_outside_is_exposed_by_the_difference():
    prog = _layer(100, 1e9)                     # 1 ms a forward kernel at 1 TFLOP/s, 2 ms backward
    layers = [(0, prog), (1, prog)]
    item = SwapItem(0, "layer", 10, (("a", 5_000_000),))      # 5 ms at 1 GB/s
    # forward: the wait is 30 places (16-17 table kernels) after the copy starts: 16 ms > 5 ms
    # backward: the copy back starts 10 / 1.5 ~ 7 table kernels (14 ms) before its user
    res = simulate(layers, [item], link(1e9))
    (c,) = res.costs
    assert c.hides and c.exposed_seconds == 0 and c.d2h_seconds == pytest.approx(5e-3)
    assert c.backward_window_seconds == pytest.approx(7 * 2e-3)
    # at 100 MB/s the copy takes 50 ms: exposed by what the windows leave
    c = simulate(layers, [item], link(1e8)).costs[0]
    assert not c.hides
    fwd_window, bwd_window = c.forward_window_seconds, c.backward_window_seconds
    assert c.exposed_seconds == pytest.approx((0.05 - fwd_window) + (0.05 - bwd_window), rel=1e-6)


def test_a_longer_prefetch_hides_more():
    prog = _layer(60, 1e9)
    layers = [(i, prog) for i in range(4)]
    exposed = []
    for p in (1, 4, 16, 64):
        items = [SwapItem(1, "layer", p, (("a", 30_000_000),))]
        exposed.append(simulate(layers, items, link(1e9)).exposed_seconds)
    assert exposed == sorted(exposed, reverse=True) and exposed[0] > 0 and exposed[-1] == 0


def test_copies_share_the_link_in_order():
    # two swapped layers back to back: alone each hides, together the second waits for the first
    prog = _layer(10, 1e9)                       # 10 ms a layer forward, each copy 40 ms
    one = [SwapItem(3, "layer", 40, (("a", 40_000_000),))]
    two = one + [SwapItem(4, "layer", 40, (("a", 40_000_000),))]
    layers = [(i, prog) for i in range(10)]
    assert simulate(layers, one, link(1e9)).exposed_seconds == 0
    assert simulate(layers, two, link(1e9)).exposed_seconds > 0


def test_plan_swaps_of_the_recorded_case():
    _, plan, spec = plan_of(str(YAML))
    fam = memory_family(spec, plan)
    tables, _ = layer_families(spec, plan, fam)
    out = plan_swaps(plan.layers, tables, plan.geometry, make_link(host_memory=1 << 40))
    assert sorted(out) == [0, 1]
    lay = next(c for c in out[0].costs if c.what == "layer")
    # ~1.5 GiB a micro-batch at 30 GB/s: 54 ms each way, behind a 24 ms forward: exposed
    assert lay.bytes > 1 << 30 and not lay.hides and lay.forward_window_seconds < lay.d2h_seconds
    js = lay.to_json()
    assert {"bytes", "transfer_seconds", "window_seconds", "hides", "exposed_seconds"} <= set(js)
