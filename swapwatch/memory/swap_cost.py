"""What a swap costs: the bytes it moves to host and back, the time the host link takes for them, and
the compute it can hide behind, on MindSpore's own schedule of the offload (docs/plan.md, "Swap").

MindSpore's schedule (docs/mindspore-facts.md §7, read from MindSpore 2.10's source and seen in a
DryRun's compiled graph):

* every output of a primitive marked for offload (``Cell.offload`` marks every primitive of the cell,
  ``Primitive._offload`` one) that the cell's backward reads is copied out by a ``MoveTo(CPU)`` right
  after its producer and copied back by a ``MoveTo(Ascend)`` before its first backward user; the
  layer's input, made by the previous cell, is not. ``backward_prefetch: "Auto"`` counts as 1;
* the copy back starts after the kernel ``backward_prefetch + 1`` places before that user in the
  execution order: the copy has the ``backward_prefetch`` kernels before the user to hide in, and the
  user waits for it. ``backward_prefetch`` counts *kernels* (operators), not layers;
* the copy out goes on a copy-out stream; the compute stream waits for it ``3 x backward_prefetch``
  kernels later (in execution order, the copies counted), and the device memory is freed then;
* copies out and copies back run on two streams of their own, each in order (FIFO): PCIe and HCCS
  carry both directions at once.

A swap *hides* when no kernel waits for it; what the waits add to a step is its *exposed* time.
:func:`simulate` plays one forward and one backward pass of a stage's layers (1F1B alternates them)
on that schedule, the kernels timed by their FLOPs at the device's achieved throughput: exact for
the model, which is the tensor table's ops as kernels (each op one forward kernel; its backward two
when it has a weight, else one, at twice its forward FLOPs). The real graph has more kernels than the
table (casts, the gradient sums, communication), so a ``backward_prefetch`` of N reaches fewer
FLOPs than N table kernels: :data:`FWD_KERNELS_PER_OP` / :data:`BWD_KERNELS_PER_OP` convert (counted on a
DryRun-compiled graph).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..errors import InputError
from ..text import fmt_size


# ---------------------------------------------------------------------------------------------
# The device and its host link
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Device:
    """What a swap is priced with on one kind of device, each figure with where it comes from
    (docs/plan.md, "What a swap is priced with")."""

    name: str
    d2h: float                 # bytes/s device -> host, sustained
    h2d: float                 # bytes/s host -> device, sustained
    flops: float               # FLOP/s a training step achieves (not the peak)
    ranks_per_node: int        # NPUs (ranks) sharing one host's memory
    why: str


#: The documented defaults. Neither figure is measured here (no NPU): each is said as assumed in the
#: output, and ``--host-bandwidth`` / ``--calibrate`` replace them.
DEVICES: Dict[str, Device] = {
    "910b": Device("910b", 30e9, 30e9, 2.0e14, 8,
                   "Atlas A2 (910B): host link PCIe 5.0 x16, at most 64 GB/s a direction; no sustained 910B "
                   "figure is published, the one measured Ascend host copy (A3, 29-43 GB/s) puts 30 GB/s "
                   "within reach; 8 NPUs per server"),
    "910c": Device("910c", 29e9, 33e9, 2.0e14, 16,
                   "Atlas A3 (910C): host copies over HCCS, measured 33-36 GB/s host to device and 29-43 GB/s "
                   "device to host (the lower ends taken); 16 NPUs per server"),
}
DEVICES["a2"] = DEVICES["910b"]
DEVICES["a3"] = DEVICES["910c"]
DEFAULT_DEVICE = "910b"

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([KMGT]?i?B)?\s*(?:/\s*s)?\s*$", re.IGNORECASE)
_RATE_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
               "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def parse_rate(text: str, flag: str = "--host-bandwidth") -> float:
    """``30GB/s`` / ``28GiB/s`` / ``3e10`` (bytes/s) -> bytes/s; GB is 10**9, GiB 2**30 (docs/units.md)."""
    m = _RATE.match(str(text))
    if not m or (m.group(2) or "").upper() not in _RATE_UNITS:
        raise InputError(f"{flag}: {text!r} is not a bandwidth (e.g. 30GB/s, 28GiB/s, 3e10) nor a device "
                         f"({', '.join(sorted(DEVICES))})")
    value = float(m.group(1)) * _RATE_UNITS[(m.group(2) or "").upper()]
    if not value > 0 or math.isinf(value):
        raise InputError(f"{flag}: {text!r} must be a positive bandwidth")
    return value


@dataclass(frozen=True)
class Link:
    """The host link and the throughput a plan's swaps are priced with, and where each came from."""

    d2h: float
    h2d: float
    flops: float
    ranks_per_node: int
    #: host memory of one node, bytes (``--host-memory``; default this machine's): swap's host bytes
    #: per rank x ranks per node must fit it
    host_memory: Optional[int]
    bandwidth_from: str
    flops_from: str
    host_memory_from: str = ""

    def seconds(self, flops: float) -> float:
        return flops / self.flops

    def to_json(self) -> Dict[str, Any]:
        return {"d2h_bytes_per_second": self.d2h, "h2d_bytes_per_second": self.h2d,
                "flops_per_second": self.flops, "ranks_per_node": self.ranks_per_node,
                "host_memory_bytes": self.host_memory, "bandwidth_from": self.bandwidth_from,
                "flops_from": self.flops_from, "host_memory_from": self.host_memory_from}

    def line(self) -> str:
        """One line saying what the swaps were priced with."""
        bw = (f"{self.d2h / 1e9:.4g} GB/s" if self.d2h == self.h2d
              else f"{self.d2h / 1e9:.4g} GB/s out, {self.h2d / 1e9:.4g} GB/s back")
        host = ""
        if self.host_memory is not None:
            host = f"; host memory {fmt_size(self.host_memory)} a node ({self.host_memory_from})"
        return (f"{bw} host link ({self.bandwidth_from}) and {self.flops / 1e12:.4g} TFLOP/s "
                f"achieved ({self.flops_from}){host}")


def make_link(host_bandwidth: Optional[str] = None, host_memory: Optional[int] = None,
              flops: Optional[Tuple[float, str]] = None) -> Link:
    """The :class:`Link` for ``--host-bandwidth`` (a device name or a rate, ``D2H,H2D`` for two),
    ``--host-memory`` (bytes per node; default this machine's memory, said as such) and the achieved
    throughput a calibration measured (``(FLOP/s, where)``; else the device's documented default)."""
    dev = DEVICES[DEFAULT_DEVICE]
    text = (host_bandwidth or "").strip()
    if not text:
        d2h, h2d = dev.d2h, dev.h2d
        why = f"{dev.name} default, assumed: --host-bandwidth sets it"
    elif text.lower() in DEVICES:
        dev = DEVICES[text.lower()]
        d2h, h2d = dev.d2h, dev.h2d
        why = f"{dev.name} default, assumed"
    else:
        parts = [p for p in text.split(",")]
        if len(parts) > 2:
            raise InputError(f"--host-bandwidth: {text!r}: one bandwidth, or two as D2H,H2D")
        d2h = parse_rate(parts[0])
        h2d = parse_rate(parts[-1])
        why = "--host-bandwidth"
    if flops is not None:
        rate, flops_why = flops
    else:
        rate, flops_why = dev.flops, f"{dev.name} default, assumed: --calibrate with a run's step time measures it"
    mem_why = "--host-memory"
    if host_memory is None:
        host_memory = local_memory()
        mem_why = "this machine's, taken as a node's: --host-memory sets it"
    return Link(d2h=d2h, h2d=h2d, flops=rate, ranks_per_node=dev.ranks_per_node, host_memory=host_memory,
                bandwidth_from=why, flops_from=flops_why, host_memory_from=mem_why if host_memory else "")


def local_memory() -> Optional[int]:
    """This machine's memory (``MemTotal`` of /proc/meminfo), None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# ---------------------------------------------------------------------------------------------
# A layer as kernels
# ---------------------------------------------------------------------------------------------

#: Real kernels in MindSpore's execution order per kernel of the tensor table's program, forward and
#: backward (the real graph adds reshapes, casts, transposes, the sums of a gradient used twice and
#: the pipeline's send / receive): a ``backward_prefetch`` of N reaches N / ratio table kernels. Counted
#: on the DryRun-compiled graph of a legacy Qwen2.5 (Llama) layer with flash attention: 55 forward and
#: 61 backward kernels where the table's program has 31 and 40 (docs/mindspore-facts.md §7,
#: tests/test_swap_cost.py reads that graph's recorded execution order).
FWD_KERNELS_PER_OP = 55 / 31
BWD_KERNELS_PER_OP = 61 / 40


@dataclass(frozen=True)
class LayerProgram:
    """One layer's kernels in execution order: forward ``(FLOPs, tensors made)`` and backward
    ``(FLOPs, tensors read)`` (the recomputed ops' forward again, placed before the first backward
    kernel that reads what they make)."""

    fwd: Tuple[Tuple[float, FrozenSet[str]], ...]
    bwd: Tuple[Tuple[float, FrozenSet[str]], ...]

    @property
    def fwd_flops(self) -> float:
        return sum(f for f, _ in self.fwd)

    @property
    def bwd_flops(self) -> float:
        return sum(f for f, _ in self.bwd)


def program(table: Any, recomputed: FrozenSet[int]) -> LayerProgram:
    """The kernels of one layer of ``table`` (a :class:`~swapwatch.memory.tensor_table.TensorTable`)
    whose ops ``recomputed`` are recomputed (``TensorTable.effective``)."""
    return _program(table, recomputed)


@functools.lru_cache(maxsize=256)
def _program(table: Any, recomputed: FrozenSet[int]) -> LayerProgram:
    ops = table.ops
    weight = table.weight_copies
    fwd = tuple((table.op_flops[i], frozenset(op.outs)) for i, op in enumerate(ops))
    # backward in reverse op order; a recomputed segment runs again just before the first backward
    # kernel (in backward order) that reads what it makes (TensorTable._net_regen's rule)
    segments = list(table._segments(recomputed)) if recomputed else []
    seg_made = [frozenset(t for i in seg for t in ops[i].outs) for seg in segments]
    pending = list(range(len(segments)))
    bwd: List[Tuple[float, FrozenSet[str]]] = []
    for i in reversed(range(len(ops))):
        op = ops[i]
        reads = frozenset(op.saves)
        for s in list(pending):
            if reads & seg_made[s] or (i in segments[s] and i == min(segments[s])):
                for j in sorted(segments[s]):
                    bwd.append((table.op_flops[j], frozenset(ops[j].ins)))
                pending.remove(s)
        n = 2 if weight & set(op.ins) else 1
        for k in range(n):
            bwd.append((2.0 * table.op_flops[i] / n, reads if k == 0 else frozenset()))
    return LayerProgram(fwd=fwd, bwd=tuple(bwd))


# ---------------------------------------------------------------------------------------------
# Swaps and what they cost
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SwapItem:
    """One swap MindFormers applies on one layer: the layer swap (``what`` = ``layer``) or one
    op_swap pattern, with its prefetch and the tensors it moves (name -> bytes)."""

    layer: int
    what: str
    prefetch: int
    tensors: Tuple[Tuple[str, int], ...]

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.tensors)


def prefetch_kernels(value: Any) -> int:
    """``backward_prefetch`` as MindSpore takes it: an int, ``"Auto"`` (and anything not an int) 1
    (offload_activation.cc: kDefaultPrefetch; docs/mindspore-facts.md §7)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


@dataclass
class SwapCost:
    """What one :class:`SwapItem` costs, per micro-batch: the bytes it moves, the copy times each way,
    the compute windows the copies have on MindSpore's schedule, and the time kernels waited for it."""

    layer: int
    what: str
    prefetch: int
    bytes: int
    d2h_seconds: float
    h2d_seconds: float
    #: compute from the first copy out to the last wait for one (forward), from the first copy back
    #: to the last use (backward): where the copies can run
    forward_window_seconds: float = 0.0
    backward_window_seconds: float = 0.0
    exposed_seconds: float = 0.0

    @property
    def hides(self) -> bool:
        return self.exposed_seconds <= 1e-9

    @property
    def transfer_seconds(self) -> float:
        return max(self.d2h_seconds, self.h2d_seconds)

    @property
    def window_seconds(self) -> float:
        return min(self.forward_window_seconds, self.backward_window_seconds)

    def to_json(self) -> Dict[str, Any]:
        return {"layer": self.layer, "swap": self.what, "backward_prefetch": self.prefetch, "bytes": self.bytes,
                "transfer_seconds": round(self.transfer_seconds, 9),
                "d2h_seconds": round(self.d2h_seconds, 9), "h2d_seconds": round(self.h2d_seconds, 9),
                "window_seconds": round(self.window_seconds, 9),
                "forward_window_seconds": round(self.forward_window_seconds, 9),
                "backward_window_seconds": round(self.backward_window_seconds, 9),
                "exposed_seconds": round(self.exposed_seconds, 9), "hides": self.hides}


@dataclass
class _Entry:
    secs: float
    layer: int
    tensors: FrozenSet[str]
    out: Optional[Tuple[int, str, int]] = None        # a MoveTo(CPU): (item index, tensor, bytes)


@dataclass
class StageSwaps:
    """:func:`simulate`'s answer for one stage and one micro-batch's forward and backward."""

    costs: List[SwapCost] = field(default_factory=list)
    forward_seconds: float = 0.0       # the compute of the forward pass
    backward_seconds: float = 0.0

    @property
    def exposed_seconds(self) -> float:
        return sum(c.exposed_seconds for c in self.costs)


class Schedule:
    """One forward and one backward pass of a stage's layers (``(layer id, program)`` in forward
    order) with ``items`` placed on MindSpore's offload schedule: where each copy out is waited for and
    where each copy back starts. Structure only (kernel positions): :meth:`window_bytes` needs no
    timing, :func:`simulate` times it."""

    def __init__(self, layers: Sequence[Tuple[int, LayerProgram]], items: Sequence[SwapItem],
                 fwd_ratio: float = FWD_KERNELS_PER_OP, bwd_ratio: float = BWD_KERNELS_PER_OP):
        self.items = list(items)
        by_layer: Dict[int, List[Tuple[int, SwapItem]]] = {}
        for k, it in enumerate(self.items):
            by_layer.setdefault(it.layer, []).append((k, it))
        # the execution order: forward kernels, each MoveTo(CPU) right after its producer, then backward
        fwd: List[_Entry] = []
        for lid, prog in layers:
            moved = {t: (k, b) for k, it in by_layer.get(lid, []) for t, b in it.tensors}
            done = set()
            for flops, made in prog.fwd:
                fwd.append(_Entry(flops, lid, made))
                for t in sorted(made):
                    if t in moved and t not in done:
                        done.add(t)
                        k, b = moved[t]
                        fwd.append(_Entry(0.0, lid, frozenset(), (k, t, b)))
        bwd = [_Entry(flops, lid, reads) for lid, prog in reversed(list(layers)) for flops, reads in prog.bwd]
        self.fwd_len = len(fwd)
        self.cycle = cycle = fwd + bwd
        n = len(cycle)
        compute_idx = [i for i, e in enumerate(cycle) if e.out is None]       # the order without MoveTo
        pos_wo = {i: j for j, i in enumerate(compute_idx)}
        #: compute index -> the copies out waited for after it: 3 x prefetch places after the MoveTo
        #: (the copies counted, a table kernel as fwd_ratio real ones), on a compute kernel
        self.wait_at: Dict[int, List[Tuple[int, str]]] = {}
        for i, e in enumerate(cycle):
            if e.out is not None:
                k, t, _ = e.out
                want, j, seen = 3 * self.items[k].prefetch, i, 0.0
                while j < n - 1 and seen + 1e-9 < want:
                    j += 1
                    seen += 1.0 if cycle[j].out is not None else (fwd_ratio if j < self.fwd_len else bwd_ratio)
                while j < n - 1 and cycle[j].out is not None:
                    j += 1
                self.wait_at.setdefault(j, []).append((k, t))
        self.moved_of = {(it.layer, t): k for k, it in enumerate(self.items) for t, _ in it.tensors}
        self.bytes_of = {(it.layer, t): b for it in self.items for t, b in it.tensors}
        first_use: Dict[Tuple[int, str], int] = {}
        self.last_use: Dict[Tuple[int, str], int] = {}
        for i in range(self.fwd_len, n):
            e = cycle[i]
            for t in e.tensors:
                key = (e.layer, t)
                if key in self.moved_of:
                    first_use.setdefault(key, i)
                    self.last_use[key] = i
        #: compute index -> the copies back started after it: prefetch + 1 places before the first
        #: user (MoveTo not counted, a table kernel as bwd_ratio real ones); before the cycle: at its start
        self.issue_after: Dict[int, List[Tuple[int, str]]] = {}
        self.issue_at_start: List[Tuple[int, str]] = []
        for key, u in sorted(first_use.items(), key=lambda kv: kv[1]):
            p = max(0, round(self.items[self.moved_of[key]].prefetch / bwd_ratio))
            j = pos_wo[u] - 1 - p
            if j < 0:
                self.issue_at_start.append(key)
            else:
                self.issue_after.setdefault(compute_idx[j], []).append(key)


def simulate(layers: Sequence[Tuple[int, LayerProgram]], items: Sequence[SwapItem], link: Link,
             fwd_ratio: float = FWD_KERNELS_PER_OP, bwd_ratio: float = BWD_KERNELS_PER_OP) -> StageSwaps:
    """Play a forward pass of ``layers`` (``(layer id, program)`` in forward order) and then their
    backward pass, twice (the second is the steady state 1F1B repeats), with ``items`` copied out and
    back on MindSpore's schedule (:class:`Schedule`); the waits of the second cycle are each swap's
    exposed time."""
    sc = Schedule(layers, items, fwd_ratio, bwd_ratio)
    cycle, items = sc.cycle, sc.items
    costs = [SwapCost(it.layer, it.what, it.prefetch, it.bytes, it.bytes / link.d2h, it.bytes / link.h2d)
             for it in items]
    out = StageSwaps(costs=costs, forward_seconds=link.seconds(sum(e.secs for e in cycle[:sc.fwd_len])),
                     backward_seconds=link.seconds(sum(e.secs for e in cycle[sc.fwd_len:])))
    t = 0.0
    d2h_free = h2d_free = 0.0
    for rep in range(2):
        last = rep == 1
        copy_end: Dict[Tuple[int, str], float] = {}
        arrival: Dict[Tuple[int, str], float] = {}
        f_first: Dict[int, float] = {}
        f_last: Dict[int, float] = {}
        b_first: Dict[int, float] = {}
        b_last: Dict[int, float] = {}
        busy = 0.0                                  # compute seconds run so far in this cycle
        for key in sc.issue_at_start:
            h2d_free = arrival[key] = max(t, h2d_free, copy_end.get(key, 0.0)) + sc.bytes_of[key] / link.h2d
            b_first.setdefault(sc.moved_of[key], busy)
        for i, e in enumerate(cycle):
            if e.out is not None:
                k, tn, b = e.out
                start = max(t, d2h_free)
                d2h_free = start + b / link.d2h
                copy_end[(e.layer, tn)] = d2h_free
                f_first.setdefault(k, busy)
                continue
            if i >= sc.fwd_len:
                for tn in e.tensors:                  # a backward kernel waits for what it reads
                    key = (e.layer, tn)
                    if key in arrival:
                        k = sc.moved_of[key]
                        stall = max(0.0, arrival.pop(key) - t)
                        t += stall
                        b_last[k] = busy
                        if last:
                            costs[k].exposed_seconds += stall
            secs = link.seconds(e.secs)
            t += secs
            busy += secs
            for k, tn in sc.wait_at.get(i, ()):
                stall = max(0.0, copy_end.get((items[k].layer, tn), 0.0) - t)
                t += stall
                f_last[k] = busy
                if last:
                    costs[k].exposed_seconds += stall
            for key in sc.issue_after.get(i, ()):     # the copy back waits for its copy out, in order
                h2d_free = arrival[key] = max(t, h2d_free, copy_end.get(key, 0.0)) + sc.bytes_of[key] / link.h2d
                b_first.setdefault(sc.moved_of[key], busy)
        if last:
            for k, c in enumerate(costs):
                c.forward_window_seconds = max(0.0, f_last.get(k, 0.0) - f_first.get(k, 0.0))
                c.backward_window_seconds = max(0.0, b_last.get(k, 0.0) - b_first.get(k, 0.0))
    return out


# ---------------------------------------------------------------------------------------------
# A plan's swaps
# ---------------------------------------------------------------------------------------------

def swap_items(table: Any, lp: Any) -> List[SwapItem]:
    """The swaps MindFormers applies at one layer (``lp``, a LayerPlan) on ``table``: its op_swap
    patterns, each moving the kept outputs of the ops it reaches, and the layer swap moving the rest of
    what the layer's ops make and keep (``TensorTable.cost`` puts the same tensors on host). Swaps
    recompute voids move nothing. ``LayerSetting.set_swap`` offloads the layer cell first and then
    each op pattern, so a pattern's prefetch is the one its primitives keep (the last pattern wins)."""
    _, marked, boundary = table.marks(lp)
    recomputed = table.effective(marked, boundary)
    kept = table.kept(recomputed, table.comm_freed(lp))
    movable = table.movable(kept, recomputed)
    claimed: Dict[str, str] = {}
    live = [p for p in (lp.op_swap or {}) if not lp.op_swap_voided(p)]
    for pat in live:
        outs = table.outputs_of(table.ops_reached([pat], "swap")[0])
        for t in movable:
            if t in outs:
                claimed[t] = pat
    out: List[SwapItem] = []
    if lp.layer_swap is not None and not lp.layer_swap_voided:
        rest = tuple((t, table.bytes[t]) for t in movable if t not in claimed and table.bytes[t])
        if rest:
            out.append(SwapItem(lp.layer, "layer", prefetch_kernels(lp.layer_swap), rest))
    for pat in live:
        mine = tuple((t, table.bytes[t]) for t in kept if claimed.get(t) == pat and table.bytes[t])
        if mine:
            out.append(SwapItem(lp.layer, pat, prefetch_kernels(lp.op_swap[pat]), mine))
    return out


def chunks(layers: Sequence[Any], tables: Sequence[Any], geo: Any):
    """Per (stage, chunk): the stage, its layers' ``(id, program)`` and their swap items."""
    by_id = {lp.layer: (lp, t) for lp, t in zip(layers, tables)}
    for stage in range(geo.pipeline_stage):
        for v in range(geo.pp_interleave_num):
            start, n = geo.chunk_starts[v][stage], geo.layer_list[v][stage]
            chunk = [by_id[i] for i in range(start, start + n) if i in by_id]
            items = [it for lp, t in chunk for it in swap_items(t, lp)]
            if items:
                yield stage, [(lp.layer, program(t, t.effective(*t.marks(lp)[1:]))) for lp, t in chunk], items


def plan_swaps(layers: Sequence[Any], tables: Sequence[Any], geo: Any, link: Link) -> Dict[int, StageSwaps]:
    """What the swaps of a plan cost, per pipeline stage (its chunks simulated one after the other):
    ``layers`` the plan's LayerPlans, ``tables`` each layer's tensor table (same order), ``geo`` the
    plan's geometry. Stages without a swap are left out."""
    out: Dict[int, StageSwaps] = {}
    for stage, progs, items in chunks(layers, tables, geo):
        res = simulate(progs, items, link)
        total = out.setdefault(stage, StageSwaps())
        total.costs += res.costs
        total.forward_seconds += res.forward_seconds
        total.backward_seconds += res.backward_seconds
    return out


#: the ``backward_prefetch`` values tried for a swap that does not hide (kernels; a legacy Llama layer's
#: backward is ~60 of them, so the last reaches about four layers ahead)
PREFETCH_CANDIDATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def prefetch_that_hides(layers: Sequence[Tuple[int, LayerProgram]], items: Sequence[SwapItem],
                        which: Sequence[int], link: Link) -> Optional[int]:
    """The least ``backward_prefetch`` (of :data:`PREFETCH_CANDIDATES`, above the items' own) that
    makes the items ``which`` (indices into ``items``) hide, the others unchanged; None when none does."""
    floor = max(items[k].prefetch for k in which)
    for p in PREFETCH_CANDIDATES:
        if p <= floor:
            continue
        trial = [SwapItem(it.layer, it.what, p, it.tensors) if k in which else it for k, it in enumerate(items)]
        res = simulate(layers, trial, link)
        if all(res.costs[k].hides for k in which):
            return p
    return None


# ---------------------------------------------------------------------------------------------
# The swaps a planner may choose
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SwapChoice:
    """One per-layer choice with a swap in it, as ``plan --allow-swap`` offers it: the select recompute
    patterns of the layer, its layer swap's prefetch or its op swaps ``(pattern, prefetch)``, and
    what it costs per micro-batch: ``cost`` (kept, host and regenerated bytes, the FLOPs recomputed),
    what it adds to the peak (``window``: its host bytes, back while its layer runs its backward, the
    most ``model.swap_window`` counts for a stage's layer), the time kernels wait for its copies
    (``exposed``) and the seconds it takes of the host link out and back (``link``)."""

    label: str
    patterns: Tuple[str, ...]
    layer_swap: Optional[int]
    op_swap: Tuple[Tuple[str, int], ...]
    cost: Any                                  # tensor_table.LayerCost
    window: int
    exposed: float
    link: Tuple[float, float]

    @property
    def copy_seconds(self) -> float:
        return max(self.link)


#: layers on each side of the swapped one when a choice is priced (:func:`price_choice`): the copy
#: back's window may reach several layers back (PREFETCH_CANDIDATES' last is ~4 layers' backward)
NEIGHBOURS = 4


def _targets(table: Any) -> List[Tuple[str, Tuple[str, ...]]]:
    """What a swap may move on ``table``'s layer: the whole layer, each select group's patterns, and
    MindFormers' default op swap pattern where it reaches something."""
    from ..config import DEFAULT_OP_SWAP

    out: List[Tuple[str, Tuple[str, ...]]] = [("layer", ())]
    for name, pats in table.groups:
        out.append((name, tuple(pats)))
    if table.ops_reached([DEFAULT_OP_SWAP], "swap")[0] and all(DEFAULT_OP_SWAP not in p for _, p in out):
        out.append(("default", (DEFAULT_OP_SWAP,)))
    return out


@functools.lru_cache(maxsize=64)
def swap_choices(table: Any, link: Link, layers: int = 16) -> List[SwapChoice]:
    """Every swap choice for a layer of ``table`` whose copies hide at ``link``, each with the least
    ``backward_prefetch`` (of :data:`PREFETCH_CANDIDATES`) that hides it: a layer swap, an op swap of
    one select group's cell (or of MindFormers' default ``.*\\.flash_attention``), each alone or beside
    the select recompute of the groups it does not touch. A choice is priced with every one of
    ``layers`` layers (a chunk of the stage) taking it (:func:`price_choice`): the steady state of a
    stage that swaps every layer, so a choice that hides there hides wherever the planner puts it and
    whatever else swaps beside it (fewer swaps only free the link). What this gives up: the swaps that
    hide only because their neighbours do not swap (a whole layer every third one at 30 GB/s). Not
    offered: what no prefetch hides, what recompute would void (its swapped op recomputed,
    MindFormers' rule 1, or read by a recomputed op, rule 2: SW201 / SW202), a layer swap beside select
    recompute (MindFormers voids that part of it)."""
    import itertools

    out: List[SwapChoice] = []
    groups = list(table.groups)
    for name, target in _targets(table):
        for r in range(len(groups) + 1):
            for combo in itertools.combinations(groups, r):
                if name == "layer" and combo:
                    continue
                pats = tuple(p for _, gp in combo for p in gp)
                choice = price_choice(table, link, target if name != "layer" else None, pats, layers=layers)
                if choice is not None and choice.exposed <= 1e-9:
                    out.append(choice)
    return out


def _moves(table: Any, target: Optional[Tuple[str, ...]], pats: Tuple[str, ...]):
    """(marked, boundary, recomputed, tensors moved) of the choice: None when recompute voids it."""
    if pats:
        marked, boundary = table.ops_reached(pats)
        marked = marked | table.preset_ops | table.preset_select_ops
    else:
        marked, boundary = table.preset_ops, frozenset()
    recomputed = table.effective(marked, boundary)
    kept = table.kept(recomputed)
    if target is None:
        moved = set(table.movable(kept, recomputed))      # rule 2: not what a recomputed op reads
    else:
        swapped_ops = table.ops_reached(list(target), "swap")[0]
        if swapped_ops & recomputed or swapped_ops & (marked - table.preset_ops):
            return None                                   # rule 1: recompute wins, the swap is void
        outs = set(table.outputs_of(swapped_ops))
        if any(t in table.ops[i].ins for i in recomputed for t in outs & set(kept)):
            return None                                   # rule 2: a recomputed op reads what it swaps
        moved = set(table.movable(kept, recomputed)) & outs
    if not moved or not sum(table.bytes[t] for t in moved):
        return None
    return marked, boundary, recomputed, moved


def price_choice(table: Any, link: Link, target: Optional[Tuple[str, ...]], pats: Tuple[str, ...],
                 prefetch: Optional[int] = None, layers: Optional[int] = None) -> Optional[SwapChoice]:
    """The swap of ``target`` (op swap patterns; None: the layer swap) beside the select recompute of
    ``pats`` on a layer of ``table``, at ``prefetch`` (None: the least of :data:`PREFETCH_CANDIDATES`
    that hides it, else the last), played on ``layers`` layers that all take it (None: on one swapped
    layer among :data:`NEIGHBOURS` unswapped ones each side, their preset marks alone); None when
    recompute voids it or it moves nothing. Its ``exposed`` is the waits per swapped layer."""
    got = _moves(table, target, pats)
    if got is None:
        return None
    marked, boundary, recomputed, moved = got
    cost = table.cost(marked, boundary, frozenset(moved) if target is not None else frozenset(), target is None)
    tensors = tuple((t, table.bytes[t]) for t in sorted(moved) if table.bytes[t])
    what = "layer" if target is None else ",".join(target)
    mine = program(table, recomputed)
    if layers is not None:
        swapped = list(range(max(1, layers)))
        played = [(i, mine) for i in swapped]
    else:
        plain = program(table, table.effective(table.preset_ops, frozenset()))
        swapped = [NEIGHBOURS]
        played = [(i, mine if i == NEIGHBOURS else plain) for i in range(2 * NEIGHBOURS + 1)]

    def run(p: int) -> StageSwaps:
        return simulate(played, [SwapItem(i, what, p, tensors) for i in swapped], link)

    if prefetch is None:
        # the least prefetch that hides, by bisection over the candidates (a longer one never waits
        # more), at most half the layer's own backward: model.swap_window's reading (a swapped layer is
        # back only while it runs its backward) is what DryRun L1 measured, at a few kernels' prefetch
        reach = len(mine.bwd) * BWD_KERNELS_PER_OP / 2
        cands = [p for p in PREFETCH_CANDIDATES if p <= reach] or [PREFETCH_CANDIDATES[0]]
        lo, hi = 0, len(cands) - 1
        if run(cands[hi]).exposed_seconds <= 1e-9:
            while lo < hi:
                mid = (lo + hi) // 2
                if run(cands[mid]).exposed_seconds <= 1e-9:
                    hi = mid
                else:
                    lo = mid + 1
        prefetch = cands[hi]
    res = run(prefetch)
    c = res.costs[0]
    exposed = res.exposed_seconds / len(swapped)
    sel = ("select:" + ",".join(pats) + "+") if pats else ""
    label = f"{sel}swap:{prefetch}" if target is None else \
        f"{sel or 'none+'}op_swap:" + ",".join(f"{t}={prefetch}" for t in target)
    return SwapChoice(label=label, patterns=pats, layer_swap=prefetch if target is None else None,
                      op_swap=tuple((t, prefetch) for t in target) if target is not None else (),
                      cost=cost, window=cost.host, exposed=exposed, link=(c.d2h_seconds, c.h2d_seconds))


def link_capacity(tables: Sequence[Any], link: Link) -> Tuple[float, float]:
    """Seconds of host link a stage has per micro-batch, out and back: the compute of its layers'
    forward pass (a copy out waited for in the forward) and backward pass (twice the forward), the
    layers ``tables`` (one entry per layer) at the link's throughput."""
    fwd = sum(t.forward_flops() for t in tables) / link.flops
    return fwd, 2 * fwd
