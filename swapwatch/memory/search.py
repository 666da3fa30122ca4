"""Choose per layer none / select / full (/ swap) so that every stage fits the budget at the least
time cost: the search behind ``swapwatch plan``.

The model (:mod:`swapwatch.memory.model`) makes a stage's peak

    static + residual + scale * (sum over chunks of inflight_c * sum of kept bytes
                                 + max recompute transient + max swap window + fixed)

where the transient is what one layer regenerates during its backward, the window what a layer
swap's prefetch brings back, and ``fixed`` the backward workspace and the head. Where the loss is
apart in time from the layers' backward (``ModelSpec.loss_apart``: the head is counted against the
recompute and workspace, the larger side) the head leaves ``fixed`` and becomes the transient's
*floor* (``max(transient, head - workspace)``), which every transient term below takes. Stages are
independent for a given layer split (:mod:`swapwatch.memory.offsets` searches the split itself).

**Levels.** A layer's choice is a :class:`Level`: none, the family's select groups nested in one
order (``g1``, then ``g1+g2`` ...), full, and with swap ``swap:p``. Nesting is what MindFormers'
count tables force (a pattern with count N applies to the first N layers of each chunk), and
searching every order of the groups (:func:`chains`) covers every count table of those patterns.
What a level costs on a layer of one tensor table is a :class:`Price` (:func:`price`): bytes kept per
micro-batch in flight, the recompute transient, the swap window, the bytes on host, and a **time
cost in seconds** per micro-batch (recomputed forward FLOPs at the device's throughput; a swap's
transfer time its prefetch window does not hide), so recompute and swap compare on one scale.

**The exact search.** Layers of one chunk and one tensor table are identical to the model, and
MindFormers gives levels by position (full first, then the deeper select sets, none last): a stage
is a few *slots* (a run of identical layers with the micro-batches its chunk holds in flight), and
the choice is how many layers of each slot take each level: a multiple-choice knapsack whose classes
come in identical copies. The two max terms are made linear by trying each distinct value as a cap
(levels above it not allowed) and keeping the cheapest answer that fits; kinds that differ by
position (DeepSeek-V3's dense layers, then MoE) enumerate the level at which one run hands over to
the next; the MTP layer, which takes the last decoder layer's level, enumerates that level. Each
knapsack (:func:`mckp`) is solved exactly by

1. its LP relaxation: each slot's lower convex hull of (kept, seconds), slots moved along their hull
   segments in order of seconds saved per byte (the classic greedy), which gives the multiplier
   ``lam`` and a lower bound ``LB``;
2. an incumbent ``U`` from rounding the LP down and filling what is left greedily;
3. the reduced cost ``d = seconds + lam * kept - g`` of each (slot, level) (``g`` the slot's least
   ``seconds + lam * kept``), so that any assignment costs at least ``LB + sum(count * d)``: only
   count vectors with ``sum(count * d) <= U - LB`` can beat the incumbent, and those are
   enumerated; the layers left over go to the levels with ``d = 0`` (the LP's hull pair), whose
   best split is a closed form.

This is exact for the model (:func:`brute_force` in the tests enumerates every per-layer assignment
of small cases and finds the same cost), and its work depends on the number of levels and slots and
on how far the integer answer is from the LP's, not on the number of layers: 1,000 or 10,000 layers
on a stage cost what 8 do (``make bench-plan-search``). The enumeration is bounded by the counts
when reduced costs are 0 off the hull pair (exactly collinear levels), the one case where its work
grows with the layer count.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .tensor_table import TensorTable, LayerCost
from .model import Calibration, inflight, stage_memory
from .spec import ModelSpec
from .swap_cost import Link, make_link, price_choice, swap_choices


#: What a level's time cost is priced with when nothing measured says otherwise (an Ascend
#: 910B-class device, assumed: docs/plan.md "Time cost"): sustained matmul throughput of one device
#: in FLOP/s and the host <-> device bandwidth in bytes/s, one direction.
DEVICE_FLOPS = 2.0e14
HOST_BYTES_PER_S = 2.4e10


@dataclass(frozen=True)
class Device:
    """The throughputs a level's time cost is priced with (:func:`price`); ``link``: the
    ``swap_cost.Link`` the swap levels were priced with (their copies on MindSpore's schedule)."""

    flops_per_s: float = DEVICE_FLOPS
    host_bytes_per_s: float = HOST_BYTES_PER_S
    link: Any = None


DEFAULT_DEVICE = Device()


@dataclass(frozen=True)
class Price:
    """What one layer at one level costs the model, per micro-batch: the search's numbers.

    ``kept``: bytes on device from forward to backward (times the micro-batches in flight);
    ``transient``: bytes regenerated during the layer's backward (the stage takes the largest);
    ``window``: bytes a swap's prefetch brings back during backward (the stage takes the largest);
    ``host``: bytes on host (summed: a host-memory budget); ``seconds``: the time cost (recompute
    at the device's throughput, a swap's exposed transfer); ``flops``: forward FLOPs recomputed
    (reported, not searched on)."""

    kept: float
    transient: float
    window: float
    host: float
    seconds: float
    flops: float
    #: per micro-batch, what the layer uses of each additive per-stage resource beside memory (e.g.
    #: seconds of the host link out and back), capped per stage by :attr:`Rooms.link`
    link: Tuple[float, ...] = ()
    #: bytes the stage holds once for the layer, whatever the micro-batches in flight (``LayerCost.once``)
    once: float = 0.0

    def held(self, weight: int) -> float:
        """Bytes the stage holds for this layer with ``weight`` micro-batches in flight."""
        return weight * self.kept + self.once


@dataclass(frozen=True)
class Rooms:
    """A stage's additive capacities beside device memory. ``host``: bytes one rank may hold on host
    (the stage's layers' ``Price.host`` times the micro-batches in flight, summed); ``link``: given
    the stage's :class:`StageShape`, the capacity of each entry of ``Price.link`` (summed over the
    stage's layers, one micro-batch)."""

    host: float = math.inf
    link: Optional[Callable[["StageShape"], Sequence[float]]] = None

    def caps(self, shape: "StageShape") -> Tuple[float, ...]:
        return (self.host,) + (tuple(self.link(shape)) if self.link is not None else ())


NO_ROOMS = Rooms()


@dataclass(frozen=True)
class Level:
    """One per-layer choice: a label, the select patterns it applies (in group order), whether it is
    full recompute or a layer swap (with its ``backward_prefetch``), what it costs on the planning
    family's table (``cost``), and its place in its chain (``rank``: 0 = none, higher recomputes
    more; MindFormers gives levels by position, highest rank first: :func:`position_order`).

    ``seconds``: the time cost per micro-batch on the planning family (None: the recomputed FLOPs
    at :data:`DEVICE_FLOPS`); ``window_bytes``: what its prefetch brings back (None: ``swap`` x
    host bytes). Levels of other kinds (op swap) add fields here and say how they are priced in
    :func:`price`; the search itself only reads :class:`Price`."""

    label: str
    patterns: Tuple[str, ...]
    full: bool
    swap: Optional[int]
    cost: LayerCost
    rank: int                        # position in its chain (0 = none): nesting order for emission
    seconds: Optional[float] = None
    window_bytes: Optional[int] = None
    #: op swaps ``(op_name pattern, backward_prefetch)`` (memory.swap_cost prices them)
    op_swap: Tuple[Tuple[str, int], ...] = ()
    #: per micro-batch, the seconds of the host link out and back its copies take (``Price.link``)
    link: Tuple[float, ...] = ()

    @property
    def swaps(self) -> bool:
        """A layer swap or an op swap: swap mode (layer ids), placed after the count-table levels."""
        return self.swap is not None or bool(self.op_swap)

    @property
    def window(self) -> int:
        """The prefetch window this level brings back during backward (its layers, identical)."""
        if self.window_bytes is not None:
            return self.window_bytes
        return 0 if self.swap is None else self.swap * self.cost.host

    @property
    def time(self) -> float:
        """Seconds per micro-batch on the planning family."""
        return self.cost.flops / DEVICE_FLOPS if self.seconds is None else self.seconds

    def price(self) -> Price:
        """:class:`Price` on the planning family (what ``cost`` says)."""
        c = self.cost
        return Price(kept=c.kept, transient=c.regen, window=self.window, host=c.host, seconds=self.time,
                     flops=c.flops, link=self.link, once=c.once)


def position_order(chain: Sequence[Level]) -> List[Level]:
    """The levels in the order MindFormers gives them over a chunk's layers: full first, the deeper
    select sets, none; swap levels (layer ids, no count table) after them: a stage's swapped layers
    are its last, after none, never before a fully recomputed layer (which would void them: SW202)."""
    return sorted(chain, key=lambda lv: (lv.swaps, -lv.rank, lv.swap or 0))


@dataclass
class StagePlan:
    stage: int
    fits: bool
    levels: Dict[int, Level] = field(default_factory=dict)     # layer -> level
    dynamic: float = 0      # bytes; a float once calibrated (Calibration.per_step)
    static: int = 0
    flops: float = 0.0      # forward FLOPs recomputed per step (every micro-batch)
    seconds: float = 0.0    # the time cost per step: recompute and exposed swap (the objective)
    exact: bool = True      # False: a knapsack stopped at search.NODE_LIMIT (capacities beside memory bound hard)


@dataclass
class Kinds:
    """Each layer's own tensor table, when a family's layers differ by kind (DeepSeek-V3: dense
    layers below ``first_k_dense_replace``, MoE layers above, and the MTP layer, which takes the
    last decoder layer's choice: ``strategy.plan`` copies that layer's LayerPlan to it).

    The levels are still the planning family's (its select patterns, nested); what a level costs
    on a layer is priced on that layer's kind exactly as ``TensorTable.layer_choice`` prices what the
    written YAML does there (the kind's preset marks included), and the stage's static part, fixed
    part and optimizer step are :func:`swapwatch.memory.model.stage_memory`'s own, so the search
    and the estimate of the planned YAML count the same bytes."""

    mem: TensorTable                      # the family's own table (stage_memory sizes the static part with it)
    layers: List[TensorTable]             # by global layer id
    mtp: List[TensorTable]                # one per MTP layer (on the last stage)
    _memo: Dict[Tuple[int, str], LayerCost] = field(default_factory=dict)

    def cost(self, f: TensorTable, lv: "Level") -> LayerCost:
        key = (id(f), lv.label)
        if key not in self._memo:
            self._memo[key] = level_cost(f, lv)
        return self._memo[key]


def level_cost(f: TensorTable, lv: "Level") -> LayerCost:
    """What ``lv`` keeps on a layer of table ``f``, as ``TensorTable.layer_choice`` counts the layer the
    written YAML gives (full: the whole cell; select: the patterns' ops and the kind's preset marks;
    none / swap: the preset marks)."""
    if lv.full:
        return f.cost(f.all_ops, f.layer_boundary)
    swapped = f.outputs_of(f.ops_reached([p for p, _ in lv.op_swap], "swap")[0]) if lv.op_swap else frozenset()
    if lv.patterns:
        marked, boundary = f.ops_reached(lv.patterns)
        return f.cost(marked | f.preset_ops | f.preset_select_ops, boundary, swapped, lv.swap is not None)
    return f.cost(f.preset_ops, frozenset(), swapped, lv.swap is not None)


def price(f: TensorTable, lv: Level, device: Device = DEFAULT_DEVICE, own: bool = False,
          kinds: Optional[Kinds] = None) -> Price:
    """What ``lv`` costs on a layer of table ``f``. ``own``: ``f`` is the table the level was built
    on, its ``cost`` is the answer (the levels of :func:`chains`); else the layer is priced as the
    written YAML counts it (:func:`level_cost`). A recompute level's seconds are its FLOPs at the
    device's throughput, a swap's the transfer its prefetch window does not hide (:func:`swap_seconds`)."""
    if own and (device == DEFAULT_DEVICE or lv.swaps):
        return lv.price()                 # a swap level was priced on this table with device.link
    if lv.swaps:
        # another kind's table: the same swap at the same prefetch, played on this table
        # (swap_cost.price_choice); its waits, if any, are its time cost
        got = price_choice(f, device.link if device.link is not None else make_link(host_memory=0),
                           tuple(p for p, _ in lv.op_swap) or None, lv.patterns,
                           lv.swap if lv.swap is not None else lv.op_swap[0][1], layers=16)
        if got is None:                   # recompute voids it on this kind: priced as its select part
            c = level_cost(f, lv)
            return Price(kept=c.kept, transient=c.regen, window=0, host=c.host, seconds=c.flops / device.flops_per_s,
                         flops=c.flops, once=c.once)
        c = got.cost
        return Price(kept=c.kept, transient=c.regen, window=got.window, host=c.host,
                     seconds=c.flops / device.flops_per_s + got.exposed, flops=c.flops, link=got.link, once=c.once)
    c = lv.cost if own else (kinds.cost(f, lv) if kinds is not None else level_cost(f, lv))
    return Price(kept=c.kept, transient=c.regen, window=0, host=c.host, seconds=c.flops / device.flops_per_s,
                 flops=c.flops, once=c.once)


def kinds_of(spec: ModelSpec, plan) -> Optional[Kinds]:
    """:class:`Kinds` for ``plan`` when its layers differ by kind or it has MTP layers, else None
    (every layer is the family's own table: the search prices levels on it directly)."""
    from .model import layer_families, memory_family

    mem = memory_family(spec, plan)
    layers, mtp = layer_families(spec, plan, mem)
    if not mtp and all(f is mem for f in layers):
        return None
    return Kinds(mem=mem, layers=layers, mtp=mtp)


def step_terms(workspace: float, head: float, gathered: float, apart: bool,
               cal: Calibration) -> Tuple[float, float]:
    """(fixed, floor) of a stage's per-step bytes, calibrated (``Calibration.per_step``): the
    workspace, head and gathered weights, or, with the loss apart from the layers' backward
    (``StageMemory.step_parts``: ``max(transient + workspace, head)``), the workspace and gathered
    weights with ``head - workspace`` as the floor under the largest transient."""
    if not apart:
        return cal.per_step(workspace, head + gathered), 0.0
    return cal.per_step(workspace, gathered), max(0.0, cal.per_step(0, head) - cal.per_step(workspace, 0))


def stage_terms(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration,
                kinds: Optional[Kinds] = None) -> Tuple[int, float, int, float]:
    """(static, fixed, late phase, transient floor) of ``stage``: static and the late phase (the
    optimizer step, or the backward's end without a gradient buffer: ``StageMemory.late``)
    are :func:`swapwatch.memory.model.stage_memory`'s own figures with no activation kept (each layer
    on its kind's table with ``kinds``; the per-row optimizer shard and the states on host of
    model.static_parts / swap_optimizer_step included), so the search and ``estimate`` agree; fixed
    and floor are :func:`step_terms` of the backward workspace, the head and the gathered weights,
    calibrated."""
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    n = sum(sum(row) for row in geo.layer_list)
    if kinds is not None:
        st = stage_memory(spec, kinds.mem, geo, stage, [zero] * len(kinds.layers), (), kinds.layers,
                          [(mf, zero) for mf in kinds.mtp])
    else:
        st = stage_memory(spec, fam, geo, stage, [zero] * n)
    fixed, floor = step_terms(st.workspace, st.head, st.gathered, st.loss_apart, cal)
    return st.static_total, fixed, st.late, floor


def fam_parts(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration) -> Tuple[int, float, int, float]:
    """:func:`stage_terms` with every layer on ``fam``."""
    return stage_terms(spec, fam, geo, stage, cal)


@dataclass(frozen=True)
class SwapOffer:
    """What the search may swap: the levels of ``swap_cost.swap_choices`` at ``link``."""

    link: Any


def swap_levels(fam: TensorTable, allow_swap: Any, layers: int = 16) -> List[Level]:
    """The swap levels of ``fam``: each a ``swap_cost.SwapChoice`` (its copies hide on MindSpore's
    schedule at the link, with the least prefetch that does), its time cost the recompute of its
    select part. ``allow_swap``: a :class:`SwapOffer`, a ``swap_cost.Link``, or True (the 910B's
    defaults, assumed); ``layers``: the chunk's, every one of which takes the level when it is priced."""
    if not allow_swap:
        return []
    link = allow_swap.link if isinstance(allow_swap, SwapOffer) else \
        allow_swap if isinstance(allow_swap, Link) else make_link(host_memory=0)
    return [Level(c.label, c.patterns, False, c.layer_swap, c.cost, -1, seconds=c.cost.flops / link.flops,
                  window_bytes=c.window, op_swap=c.op_swap, link=c.link) for c in swap_choices(fam, link, layers)]


def chains(fam: TensorTable, allow_swap: Any = False, device: Device = DEFAULT_DEVICE,
           layers: int = 16, own: Sequence[Tuple[str, ...]] = ()) -> List[List[Level]]:
    """Every nesting order of the family's select groups as a list of levels none < ... < full
    (plus the swap levels, which sit beside the chain: swap mode takes layer ids, no nesting;
    ``allow_swap``: :func:`swap_levels`). ``own``: the YAML's own select sets (``own_select_sets``),
    each the first level of chains of its own, the family's groups nested above it: the user's
    strategy is a candidate layer by layer, not only whole (issue 35 point 3: the maintainers'
    Qwen2.5-72B 32k selects four cheap feed-forward ops on every layer, which no family group is)."""
    out = []
    none = Level("none", (), False, None, fam.cost(frozenset()), 0)
    full = Level("full", (), True, None, fam.cost(fam.all_ops, fam.layer_boundary), 10 ** 6)
    swaps = swap_levels(fam, allow_swap, layers)
    seen = set()
    firsts: List[Tuple[Tuple[str, Sequence[str]], ...]] = [()] + [(("own", pats),) for pats in own]
    for order in (first + rest for first in firsts for rest in itertools.permutations(fam.groups)):
        chain = [none]
        pats: Tuple[str, ...] = ()
        for _, gpats in order:
            marked, boundary = fam.ops_reached(pats + tuple(gpats))
            cost = fam.cost(marked, boundary)
            if _same(cost, chain[-1].cost):
                continue          # the group changes nothing here (e.g. a fused kernel keeps its output)
            pats = pats + tuple(gpats)
            chain.append(Level("select:" + ",".join(pats), pats, False, None, cost, len(chain)))
        key = tuple(lv.patterns for lv in chain)
        if key not in seen:
            seen.add(key)
            out.append(chain + ([full] if fam.full_allowed else []) + swaps)
    return out


def _same(a: LayerCost, b: LayerCost) -> bool:
    return (a.kept, a.once, a.regen, a.host, a.flops) == (b.kept, b.once, b.regen, b.host, b.flops)


# ---------------------------------------------------------------------------------------------
# The knapsack: slots of identical layers, one level each, least seconds within the room
# ---------------------------------------------------------------------------------------------

#: one (slot, level) choice: (kept bytes times the slot's in-flight weight, seconds, what it uses of
#: each additive resource (host bytes, link seconds ...: :func:`mckp`'s ``caps``), level index)
Item = Tuple[float, float, Tuple[float, ...], int]
#: a slot: (layers, its choices)
Slot = Tuple[int, List[Item]]


def _efficient(items: Sequence[Item]) -> List[Item]:
    """The items no other item beats on kept, seconds and every resource at once (a dominated level
    is never worth taking: the dominating one fits wherever it does and costs no more)."""
    out: List[Item] = []
    for it in sorted(items, key=lambda x: (x[0], x[1], x[2], x[3])):
        if any(o[0] <= it[0] and o[1] <= it[1] and all(a <= b for a, b in zip(o[2], it[2])) for o in out):
            continue
        out.append(it)
    return out


def _hull(items: Sequence[Item]) -> List[Item]:
    """The lower convex hull of (kept, seconds), kept ascending, seconds strictly descending."""
    pts: List[Item] = []
    for it in sorted(items, key=lambda x: (x[0], x[1])):
        if pts and it[1] >= pts[-1][1]:
            continue                                     # more kept, no cheaper: not on the frontier
        while len(pts) >= 2:
            (k1, c1, _, _), (k2, c2, _, _) = pts[-2], pts[-1]
            # pts[-1] above or on the segment pts[-2] -> it: not a hull vertex
            if (c2 - c1) * (it[0] - k1) >= (it[1] - c1) * (k2 - k1):
                pts.pop()
            else:
                break
        pts.append(it)
    return pts


@dataclass
class Answer:
    """The best assignment found: its seconds, kept bytes, resource use, and per slot level -> count."""

    seconds: float
    kept: float
    uses: Tuple[float, ...]
    counts: List[Dict[int, int]]
    #: False when the enumeration stopped at :data:`NODE_LIMIT` before proving this the least
    exact: bool = True


#: Most count vectors :func:`mckp` enumerates. Reached only when capacities beside memory bind hard
#: (the kept-bytes LP bound is then far from the answer and the enumeration wide): the best found so
#: far is the answer, marked ``exact=False`` (the planner says so). Never reached without them.
NODE_LIMIT = 20_000


def mckp(slots: Sequence[Slot], room: float, caps: Sequence[float] = ()) -> Optional[Answer]:
    """Least total seconds with every slot's layers at one of its levels each, total kept within
    ``room`` and the total of each additive resource within its cap (``caps[r]``: e.g. the host
    bytes a rank may hold, or the seconds a host link has per micro-batch); None when nothing fits.
    Exact (module docstring): the LP bound and reduced costs use kept alone, the caps are checked on
    every assignment enumerated and in the closed form."""
    caps = tuple(caps)
    R = len(caps)
    slots = [(n, _efficient([(it[0], it[1], tuple(it[2]) + (0.0,) * (R - len(it[2])), it[3]) for it in items]))
             for n, items in slots if n > 0]
    # a capacity no assignment can exceed (every layer at its level that uses most of it) binds nothing:
    # no constraint (a node's host memory against a few swapped layers; the dual's ascent is then skipped)
    caps = tuple(math.inf if sum(n * max(it[2][r] for it in items) for n, items in slots) <= c else c
                 for r, c in enumerate(caps))
    if not slots:
        return Answer(0.0, 0.0, (0.0,) * R, [])
    scale = max((abs(it[1]) for _, items in slots for it in items), default=1.0) or 1.0
    tol_c = 1e-9 * scale * sum(n for n, _ in slots)
    tol_k = 1e-6 + 1e-12 * abs(room)
    tol_r = [1e-9 + 1e-12 * abs(c) if not math.isinf(c) else 0.0 for c in caps]

    def within(uses: Sequence[float]) -> bool:
        return all(u <= c + t for u, c, t in zip(uses, caps, tol_r))

    by_idx = [{it[3]: it for it in items} for _, items in slots]

    # each slot at its cheapest level (least kept among equals): optimal when it fits
    cheap = [{min(items, key=lambda x: (x[1], x[0], x[2]))[3]: n} for n, items in slots]
    best = _evaluate(cheap, by_idx, room, within, tol_k, R)
    if best is not None:
        return best
    if sum(n * min(it[0] for it in items) for n, items in slots) > room + tol_k:
        return None

    # 1. the LP relaxation (kept only): every slot at its hull's least-kept vertex, then hull
    # segments in order of seconds saved per byte
    hulls = [_hull(items) for _, items in slots]
    segs = sorted(((-(h[i + 1][1] - h[i][1]) / (h[i + 1][0] - h[i][0]), j, i)
                   for j, h in enumerate(hulls) for i in range(len(h) - 1)), key=lambda s: -s[0])
    left = room - sum(n * h[0][0] for (n, _), h in zip(slots, hulls))
    at = [0] * len(slots)                     # hull vertex each slot's layers are at
    lam, brk, moved, brk_at = 0.0, None, 0, len(segs)
    for pos, (rho, j, i) in enumerate(segs):
        n = slots[j][0]
        dk = hulls[j][i + 1][0] - hulls[j][i][0]
        if n * dk <= left + tol_k:
            left -= n * dk
            at[j] = i + 1
            continue
        lam, brk, moved, brk_at = rho, (j, i), max(0, min(n, int(math.floor((left + tol_k) / dk)))), pos
        break

    # 2. an incumbent: the LP rounded down, then what is left filled greedily one layer at a time
    counts: List[Dict[int, int]] = []
    for j, (n, _) in enumerate(slots):
        h = hulls[j]
        if brk is not None and brk[0] == j:
            a, b = h[brk[1]], h[brk[1] + 1]
            counts.append({a[3]: n - moved, b[3]: moved} if moved else {a[3]: n})
        else:
            counts.append({h[at[j]][3]: n})
    best = _evaluate(counts, by_idx, room, within, tol_k, R)
    if best is not None and brk is not None:
        used = best.kept
        for _, j, i in segs[brk_at + 1:]:
            a, b = hulls[j][i], hulls[j][i + 1]
            have = counts[j].get(a[3], 0)
            dk = b[0] - a[0]
            m = min(have, int(math.floor((room - used + tol_k) / dk))) if dk > 0 else have
            if m <= 0:
                continue
            counts[j][a[3]] -= m
            counts[j][b[3]] = counts[j].get(b[3], 0) + m
            used += m * dk
        better = _evaluate(counts, by_idx, room, within, tol_k, R)
        if better is not None and (better.seconds, better.kept) < (best.seconds, best.kept):
            best = better

    # 3. reduced costs at lam (and, when a capacity binds, the multipliers of the Lagrangian dual:
    # _dual); the levels with none left to the closed form (the LP's vertex per slot, the break
    # slot's pair)
    mu = [0.0] * R
    if any(not math.isinf(c) for c in caps):
        # a binding capacity leaves the kept-only LP's incumbent out of reach: a greedy one that
        # respects every capacity, then the dual's picks and multipliers
        greedy = _greedy(slots, room, caps)
        if greedy is not None:
            got = _evaluate(greedy, by_idx, room, within, tol_k, R)
            if got is not None and (best is None or (got.seconds, got.kept) < (best.seconds, best.kept)):
                best = got
        lam, mu, more = _dual(slots, room, caps, lam, best)
        for cand in more:
            got = _evaluate(cand, by_idx, room, within, tol_k, R)
            if got is not None and (best is None or (got.seconds, got.kept) < (best.seconds, best.kept)):
                best = got

    def lagr(it: Item) -> float:
        return it[1] + lam * it[0] + sum(m * u for m, u in zip(mu, it[2]) if m)

    g = [min(lagr(it) for it in items) for _, items in slots]
    lb = sum(n * gj for (n, _), gj in zip(slots, g)) - lam * room - sum(m * c for m, c in zip(mu, caps) if m)
    pair: Optional[Tuple[int, Item, Item]] = None
    single: Dict[int, Item] = {}
    if brk is not None:
        j, i = brk
        hi, lo = hulls[j][i + 1], hulls[j][i]          # hi keeps more and costs less
        pair = (j, hi, lo)
    for j, h in enumerate(hulls):
        if pair is None or pair[0] != j:
            single[j] = h[at[j]] if brk is not None else min(slots[j][1], key=lambda x: (x[1], x[0], x[2]))
    variables: List[Tuple[int, Item, float]] = []
    for j, (_, items) in enumerate(slots):
        fixed_idx = {pair[1][3], pair[2][3]} if pair is not None and pair[0] == j else {single[j][3]}
        for it in items:
            if it[3] not in fixed_idx:
                variables.append((j, it, max(0.0, lagr(it) - g[j])))
    variables.sort(key=lambda v: -v[2])

    def leaf(rest: List[int], k: float, c: float, uses: List[float],
             chosen: List[Tuple[int, int, int]]) -> Optional[Answer]:
        uses = list(uses)
        for j, it in single.items():
            k += rest[j] * it[0]
            c += rest[j] * it[1]
            for r in range(R):
                uses[r] += rest[j] * it[2][r]
        x = 0
        if pair is not None:
            # the pair's r layers: x of them at hi; kept grows with x (hi keeps more), a resource
            # may grow or shrink; the seconds fall with x, so the largest x every cap allows
            j, hi, lo = pair
            n = rest[j]
            k += n * lo[0]
            c += n * lo[1]
            for r in range(R):
                uses[r] += n * lo[2][r]
            x_lo, x_hi = 0, min(n, int(math.floor((room - k + tol_k) / (hi[0] - lo[0]))))
            for r in range(R):
                d = hi[2][r] - lo[2][r]
                if math.isinf(caps[r]):
                    continue                       # no cap on this resource
                if d > 0:
                    x_hi = min(x_hi, int(math.floor((caps[r] - uses[r] + tol_r[r]) / d)))
                elif d < 0 and uses[r] > caps[r] + tol_r[r]:
                    x_lo = max(x_lo, int(math.ceil((uses[r] - caps[r] - tol_r[r]) / -d)))
            if x_lo > x_hi:
                return None
            x = x_hi
            k += x * (hi[0] - lo[0])
            c += x * (hi[1] - lo[1])
            for r in range(R):
                uses[r] += x * (hi[2][r] - lo[2][r])
        if k > room + tol_k or not within(uses):
            return None
        out: List[Dict[int, int]] = [dict() for _ in slots]
        for j, it in single.items():
            if rest[j]:
                out[j][it[3]] = rest[j]
        if pair is not None:
            j, hi, lo = pair
            if x:
                out[j][hi[3]] = x
            if rest[j] - x:
                out[j][lo[3]] = rest[j] - x
        for j, idx, m in chosen:
            out[j][idx] = out[j].get(idx, 0) + m
        return Answer(c, k, tuple(uses), out)

    nodes = [0]

    def walk(v: int, rest: List[int], k: float, c: float, uses: List[float], slack: float,
             chosen: List[Tuple[int, int, int]]) -> None:
        nonlocal best
        nodes[0] += 1
        if nodes[0] > NODE_LIMIT:
            return
        if v == len(variables):
            got = leaf(rest, k, c, uses, chosen)
            if got is not None and (best is None or got.seconds < best.seconds - tol_c
                                    or (got.seconds <= best.seconds + tol_c and got.kept < best.kept)):
                best = got
            return
        j, it, d = variables[v]
        top = rest[j]
        if d > 0 and best is not None:
            top = min(top, int(math.floor((best.seconds - lb - slack + tol_c) / d)))
        for m in range(0, top + 1):
            if m and best is not None and lb + slack + m * d > best.seconds + tol_c:
                break
            if k + m * it[0] > room + tol_k:
                break
            rest[j] -= m
            walk(v + 1, rest, k + m * it[0], c + m * it[1], [u + m * x for u, x in zip(uses, it[2])],
                 slack + m * d, chosen + [(j, it[3], m)] if m else chosen)
            rest[j] += m

    walk(0, [n for n, _ in slots], 0.0, 0.0, [0.0] * R, 0.0, [])
    if best is not None and nodes[0] > NODE_LIMIT:
        best.exact = False
    return best


def _greedy(slots: Sequence[Slot], room: float, caps: Sequence[float]) -> Optional[List[Dict[int, int]]]:
    """A feasible assignment under kept bytes and every capacity, when one is easy to find: each
    slot at the level using least of the constraints (each over its capacity), then layers moved to
    cheaper levels while everything fits, the move saving most seconds first."""
    R = len(caps)
    limits = [room] + list(caps)

    def use(it: Item) -> List[float]:
        return [it[0]] + list(it[2])

    def share(it: Item) -> float:
        return sum(u / c for u, c in zip(use(it), limits) if not math.isinf(c) and c > 0)

    counts = [{min(items, key=lambda it: (share(it), it[1]))[3]: n} for n, items in slots]
    by_idx = [{it[3]: it for it in items} for _, items in slots]
    total = [sum(n * use(by_idx[j][i])[r] for j, cnt in enumerate(counts) for i, n in cnt.items())
             for r in range(R + 1)]
    if any(t > c + 1e-6 * max(1.0, abs(c)) for t, c in zip(total, limits) if not math.isinf(c)):
        return None
    for _ in range(64):
        best_move = None
        for j, (_, items) in enumerate(slots):
            for a, m_a in counts[j].items():
                if not m_a:
                    continue
                ia = by_idx[j][a]
                for ib in items:
                    if ib[1] >= ia[1]:
                        continue
                    delta = [b - x for b, x in zip(use(ib), use(ia))]
                    m = m_a
                    for r in range(R + 1):
                        if delta[r] > 0 and not math.isinf(limits[r]):
                            m = min(m, int(math.floor((limits[r] - total[r] + 1e-9) / delta[r])))
                    if m > 0 and (best_move is None or m * (ia[1] - ib[1]) > best_move[0]):
                        best_move = (m * (ia[1] - ib[1]), j, a, ib[3], m, delta)
        if best_move is None:
            break
        _, j, a, b, m, delta = best_move
        counts[j][a] -= m
        counts[j][b] = counts[j].get(b, 0) + m
        total = [t + m * d for t, d in zip(total, delta)]
    return [{i: n for i, n in cnt.items() if n} for cnt in counts]


def _dual(slots: Sequence[Slot], room: float, caps: Sequence[float], lam: float,
          best: Optional[Answer]) -> Tuple[float, List[float], List[List[Dict[int, int]]]]:
    """Multipliers for kept bytes and each finite capacity that raise the Lagrangian bound
    ``sum_j n_j min_l (seconds + lam kept + mu . uses) - lam room - mu . caps`` (any multipliers
    >= 0 give a valid bound: a better one prunes the enumeration of :func:`mckp` more when a
    capacity binds, which the kept-only LP ignores), by subgradient ascent on scaled multipliers
    (each constraint divided by its capacity); and the assignments the Lagrangian picked on the
    way (all of a slot's layers at one level), which may fit: incumbents."""
    R = len(caps)
    scale = [c if not math.isinf(c) and c > 0 else 1.0 for c in caps]
    k_scale = room if room > 0 else 1.0
    x = [lam * k_scale] + [0.0] * R                  # scaled multipliers: seconds per whole capacity

    def value(x: List[float]) -> Tuple[float, List[Item], List[float]]:
        lam_, mu_ = x[0] / k_scale, [x[r + 1] / scale[r] if not math.isinf(caps[r]) else 0.0 for r in range(R)]
        total = -lam_ * room - sum(m * c for m, c in zip(mu_, caps) if m)
        picks: List[Item] = []
        grad = [-1.0] + [-1.0 if not math.isinf(caps[r]) else 0.0 for r in range(R)]
        for n, items in slots:
            it = min(items, key=lambda y: y[1] + lam_ * y[0] + sum(m * u for m, u in zip(mu_, y[2]) if m))
            total += n * (it[1] + lam_ * it[0] + sum(m * u for m, u in zip(mu_, it[2]) if m))
            picks.append(it)
            grad[0] += n * it[0] / k_scale
            for r in range(R):
                if not math.isinf(caps[r]):
                    grad[r + 1] += n * it[2][r] / scale[r]
        return total, picks, grad

    best_x, (best_v, picks, grad) = list(x), value(x)
    found = [[{it[3]: n} for (n, _), it in zip(slots, picks)]]
    theta, stall = 1.0, 0
    for _ in range(80):
        norm = sum(gr * gr for gr in grad)
        if norm <= 1e-18:
            break
        v = value(x)[0]
        target = best.seconds if best is not None else v + max(1.0, abs(v)) * 0.1
        step = theta * max(target - v, 1e-12 * max(1.0, abs(v))) / norm
        x = [max(0.0, xi + step * gi) for xi, gi in zip(x, grad)]
        v, picks, grad = value(x)
        found.append([{it[3]: n} for (n, _), it in zip(slots, picks)])
        if v > best_v + 1e-12 * max(1.0, abs(best_v)):
            best_v, best_x, stall = v, list(x), 0
        else:
            stall += 1
            if stall >= 5:
                theta, stall = theta / 2, 0
                if theta < 1e-4:
                    break
    return best_x[0] / k_scale, [best_x[r + 1] / scale[r] if not math.isinf(caps[r]) else 0.0
                                 for r in range(R)], found


def _evaluate(counts: List[Dict[int, int]], by_idx: List[Dict[int, Item]], room: float, within, tol: float,
              R: int) -> Optional[Answer]:
    """``counts`` as an :class:`Answer` when it fits, else None."""
    k = sum(m * by_idx[j][i][0] for j, cnt in enumerate(counts) for i, m in cnt.items())
    c = sum(m * by_idx[j][i][1] for j, cnt in enumerate(counts) for i, m in cnt.items())
    uses = tuple(sum(m * by_idx[j][i][2][r] for j, cnt in enumerate(counts) for i, m in cnt.items())
                 for r in range(R))
    if k > room + tol or not within(uses):
        return None
    return Answer(c, k, uses, [dict(x) for x in counts])


# ---------------------------------------------------------------------------------------------
# A stage: its slots, the caps on the max terms, the hand-over levels between kinds
# ---------------------------------------------------------------------------------------------

@dataclass
class _Run:
    """Consecutive layers of one chunk on one table: identical to the model."""

    chunk: int
    layers: List[int]
    table: TensorTable
    weight: int


@dataclass
class StageShape:
    """What the search needs of one stage: its runs of identical layers, in position order per
    chunk, the MTP layers that take its last decoder layer's level, and the fixed terms."""

    stage: int
    runs: List[_Run]
    mtp: List[TensorTable]            # priced at the last run's last layer's level
    mtp_weight: int
    static: int
    fixed: float
    late: int                         # StageMemory.late: the optimizer step or the backward's end
    floor: float


def stage_shape(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration,
                kinds: Optional[Kinds] = None) -> StageShape:
    P, V = geo.pipeline_stage, geo.pp_interleave_num
    counts = inflight(P, V, spec.micro_batch_num, stage, spec.seq_split)
    static, fixed, late, floor = stage_terms(spec, fam, geo, stage, cal, kinds)
    runs: List[_Run] = []
    for v in range(V):
        start, n = geo.chunk_starts[v][stage], geo.layer_list[v][stage]
        for i in range(start, start + n):
            t = kinds.layers[i] if kinds is not None else fam
            if runs and runs[-1].chunk == v and runs[-1].table is t:
                runs[-1].layers.append(i)
            else:
                runs.append(_Run(chunk=v, layers=[i], table=t, weight=counts[v]))
    mtp = list(kinds.mtp) if kinds is not None and stage == P - 1 and runs else []
    return StageShape(stage=stage, runs=runs, mtp=mtp, mtp_weight=counts[-1], static=static, fixed=fixed,
                      late=late, floor=floor)


@dataclass
class _Best:
    seconds: float
    dynamic: float
    assign: Dict[int, Level]
    flops: float
    exact: bool = True


def _caps(values: Sequence[float], floor: float = 0.0) -> List[float]:
    """The distinct values worth trying as a cap: those above ``floor`` and the largest under it
    (below the floor every cap adds the same)."""
    vals = sorted(set(values))
    under = [v for v in vals if v <= floor]
    return ([under[-1]] if under else []) + [v for v in vals if v > floor]


def _better(got: "_Best", best: Optional["_Best"], lowest: bool) -> bool:
    if best is None:
        return True
    if lowest:
        return got.dynamic < best.dynamic
    tol = 1e-12 * max(1.0, abs(best.seconds))
    return got.seconds < best.seconds - tol or (got.seconds <= best.seconds + tol and got.dynamic < best.dynamic)


def solve_shape(shape: StageShape, all_chains: Sequence[Sequence[Level]], room: float, micro: int,
                device: Device = DEFAULT_DEVICE, kinds: Optional[Kinds] = None, fam: Optional[TensorTable] = None,
                rooms: Rooms = NO_ROOMS, lowest: bool = False) -> Optional[_Best]:
    """The cheapest assignment of ``shape``'s layers whose dynamic bytes are within ``room`` (with
    ``lowest``: the assignment with the least dynamic bytes, whatever it costs). Each chunk takes
    its own nesting order (MindFormers' count tables are per chunk: 2-D with interleave)."""
    ordered = [position_order(ch) for ch in all_chains]
    # per run and chain: the price of each level; per MTP layer and chain
    run_prices = [[[price(run.table, lv, device, own=kinds is None and run.table is fam, kinds=kinds) for lv in ch]
                   for ch in ordered] for run in shape.runs]
    mtp_prices = [[[price(mf, lv, device, kinds=kinds) for lv in ch] for ch in ordered] for mf in shape.mtp]
    chunks = sorted({run.chunk for run in shape.runs})
    caps = rooms.caps(shape)
    best: Optional[_Best] = None
    inexact = False
    for pick in itertools.product(range(len(ordered)), repeat=len(chunks)):
        of_chunk = dict(zip(chunks, pick))
        chain_of = [of_chunk[run.chunk] for run in shape.runs]
        prices = [run_prices[r][c] for r, c in enumerate(chain_of)]
        mtp = [mp[chain_of[-1]] for mp in mtp_prices]
        trans = [p.transient for rp in prices for p in rp] + [p.transient for mp in mtp for p in mp]
        wins = [p.window for rp in prices for p in rp]
        for ranges in _handovers(shape, [len(ordered[c]) for c in chain_of]):
            last = len(shape.runs) - 1
            pins = range(ranges[last][0], ranges[last][1] + 1) if shape.mtp else [None]
            for pin in pins:
                for cap_t in _caps(trans, shape.floor):
                    for cap_w in _caps(wins):
                        got = _solve_caps(shape, [ordered[c] for c in chain_of], chain_of, prices, mtp, ranges, pin,
                                          cap_t, cap_w, room, micro, caps, lowest)
                        if got is not None:
                            inexact = inexact or not got.exact
                            if _better(got, best, lowest):
                                best = got
    if best is not None and inexact:
        best.exact = False
    return best


def _handovers(shape: StageShape, sizes: Sequence[int]) -> Iterator[List[Tuple[int, int]]]:
    """Per run, the range of level indices (position order of its chain, ``sizes[r]`` levels) it
    may take: within a chunk, a run's levels come after every level of the runs before it
    (MindFormers gives levels by position), so each run gets ``[b_{i-1}, b_i]`` for a non-decreasing
    hand-over sequence ``b``."""
    by_chunk: Dict[int, List[int]] = {}
    for r, run in enumerate(shape.runs):
        by_chunk.setdefault(run.chunk, []).append(r)
    per_chunk = []
    for rs in by_chunk.values():
        L = sizes[rs[0]]
        opts = []
        for b in itertools.combinations_with_replacement(range(L), len(rs) - 1):
            bounds = (0,) + b + (L - 1,)
            opts.append([(rs[i], (bounds[i], bounds[i + 1])) for i in range(len(rs))])
        per_chunk.append(opts)
    for combo in itertools.product(*per_chunk):
        ranges = [(0, 0)] * len(shape.runs)
        for part in combo:
            for r, rg in part:
                ranges[r] = rg
        yield ranges


def _solve_caps(shape: StageShape, chains_of: List[List[Level]], chain_of: List[int], prices: List[List[Price]],
                mtp_prices: List[List[Price]], ranges: List[Tuple[int, int]], pin: Optional[int], cap_t: float,
                cap_w: float, room: float, micro: int, caps: Tuple[float, ...], lowest: bool) -> Optional[_Best]:
    """One knapsack: levels within the caps and each run's hand-over range, the last run's last layer
    (and the MTP layers) at ``pin``."""
    def ok(p: Price) -> bool:
        return p.transient <= cap_t and p.window <= cap_w

    last = len(shape.runs) - 1
    extra = max(cap_t, shape.floor) + cap_w
    R = len(caps)

    def uses(p: Price, weight: int) -> Tuple[float, ...]:
        return (weight * p.host,) + tuple(p.link) + (0.0,) * (R - 1 - len(p.link))

    fixed_k = 0.0
    fixed_u = [0.0] * R
    if pin is not None:
        lp = prices[last][pin]
        if not ok(lp) or not all(ok(mp[pin]) for mp in mtp_prices):
            return None
        fixed_k = lp.held(shape.runs[last].weight) + sum(mp[pin].held(shape.mtp_weight) for mp in mtp_prices)
        for p, wt in [(lp, shape.runs[last].weight)] + [(mp[pin], shape.mtp_weight) for mp in mtp_prices]:
            fixed_u = [a + b for a, b in zip(fixed_u, uses(p, wt))]
    slots: List[Slot] = []
    keys: Dict[Tuple, int] = {}
    members: List[List[int]] = []
    for r, run in enumerate(shape.runs):
        lo, hi = ranges[r]
        n = len(run.layers)
        if pin is not None and r == last:
            hi, n = pin, n - 1
        # an item's level index is (chain, index) made one int: merged runs must share both
        base = chain_of[r] * 4096
        items = [(p.held(run.weight), p.kept if lowest else p.seconds, uses(p, run.weight), base + li)
                 for li, p in enumerate(prices[r]) if lo <= li <= hi and ok(p)]
        if n and not items:
            return None
        key = tuple(items)
        if key in keys:                          # identical runs (chunks alike): one slot
            s = keys[key]
            slots[s] = (slots[s][0] + n, slots[s][1])
            members[s].append(r)
        else:
            keys[key] = len(slots)
            slots.append((n, items))
            members.append([r])
    left = room - extra - fixed_k
    if left < -1e-6:
        return None
    ans = mckp(slots, math.inf if lowest else left, [c - f for c, f in zip(caps, fixed_u)])
    if ans is None:
        return None
    # per run: how many layers at each level (a merged slot's counts dealt run by run)
    per_run: Dict[int, Dict[int, int]] = {}
    live = [s for s, (n, _) in enumerate(slots) if n > 0]
    counts = {s: dict(ans.counts[i]) for i, s in enumerate(live)}
    for s, rs in enumerate(members):
        cnt = counts.get(s, {})
        for r in rs:
            n = len(shape.runs[r].layers) - (1 if pin is not None and r == last else 0)
            mine: Dict[int, int] = {}
            for key_li in sorted(cnt):
                take = min(n - sum(mine.values()), cnt[key_li])
                if take:
                    mine[key_li % 4096] = take
                    cnt[key_li] -= take
            if pin is not None and r == last:
                mine[pin] = mine.get(pin, 0) + 1
            per_run[r] = mine
    # the assignment, in position order, and what it really holds (its own max terms)
    assign: Dict[int, Level] = {}
    trans_used = max((mp[pin].transient for mp in mtp_prices), default=0.0) if pin is not None else 0.0
    win_used = 0.0
    kept = sum(mp[pin].held(shape.mtp_weight) for mp in mtp_prices) if pin is not None else 0.0
    secs = sum(mp[pin].seconds for mp in mtp_prices) if pin is not None else 0.0
    flops = sum(mp[pin].flops for mp in mtp_prices) if pin is not None else 0.0
    for r, run in enumerate(shape.runs):
        pos = 0
        mine = per_run.get(r, {})
        for li in sorted(mine):
            p, m = prices[r][li], mine[li]
            for _ in range(m):
                assign[run.layers[pos]] = chains_of[r][li]
                pos += 1
            trans_used = max(trans_used, p.transient)
            win_used = max(win_used, p.window)
            kept += p.held(run.weight) * m
            secs += p.seconds * m
            flops += p.flops * m
        if pos != len(run.layers):
            raise AssertionError(f"search dealt {pos} of {len(run.layers)} layers of a run")
    dynamic = kept + max(trans_used, shape.floor) + win_used
    if dynamic > room + 1e-6:
        return None
    return _Best(seconds=secs * micro, dynamic=dynamic, assign=assign, flops=flops * micro, exact=ans.exact)


def solve_stage(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration, budget: int,
                allow_swap: bool = False, kinds: Optional[Kinds] = None, device: Device = DEFAULT_DEVICE,
                rooms: Rooms = NO_ROOMS, shape: Optional["StageShape"] = None,
                own: Tuple[Tuple[str, ...], ...] = ()) -> StagePlan:
    """The cheapest per-layer levels of ``stage`` whose predicted peak is <= ``budget``.
    ``kinds``: each layer's own table (:func:`kinds_of`): every layer is priced on its kind and the
    MTP layer on its own. ``rooms``: the stage's capacities beside device memory (host bytes, link).
    ``shape``: the stage's :func:`stage_shape`, when the caller has it already. ``own``: the YAML's
    own select sets (:func:`own_select_sets`), levels beside the family's."""
    if shape is None:
        shape = stage_shape(spec, fam, geo, stage, cal, kinds)
    if cal.peak(shape.static, shape.late) > budget:
        return StagePlan(stage=stage, fits=False, static=shape.static)   # the late phase alone is over
    room = (budget - cal.static_scale * shape.static - cal.residual) / cal.scale - shape.fixed
    longest = max((geo.layer_list[v][stage] for v in range(geo.pp_interleave_num)), default=1)
    return plan_shape(shape, cached_chains(fam, allow_swap, device, longest, own), room, spec.micro_batch_num,
                      device, kinds, fam, rooms)


@functools.lru_cache(maxsize=32)
def cached_chains(fam: TensorTable, allow_swap: Any, device: Device, layers: int = 16,
                  own: Tuple[Tuple[str, ...], ...] = ()) -> List[List[Level]]:
    """:func:`chains`, once per table, swap offer, chunk length and own select sets (a plan's split
    search solves each stage many times; the swap levels are priced with every layer of the chunk
    taking them)."""
    return chains(fam, allow_swap, device=device, layers=layers, own=own)


def own_select_sets(fam: TensorTable, layers: Sequence[Any]) -> Tuple[Tuple[str, ...], ...]:
    """The YAML's own select sets as search levels: each distinct ``select_recompute`` pattern list
    of a layer that is not fully recomputed (``model.plan.LayerPlan``), without the patterns that
    reach nothing in the family's layer tree (SW104: writing them again would plan a silent no-op).
    A layer with an exclude pattern is left out (the search writes no excludes)."""
    out: List[Tuple[str, ...]] = []
    for lp in layers:
        if lp.full_recompute or not lp.select_recompute or lp.select_recompute_exclude:
            continue
        pats = tuple(p for p in lp.select_recompute if fam.matches(p))
        if pats and pats not in out:
            out.append(pats)
    return tuple(out)


def plan_shape(shape: StageShape, all_chains, room: float, micro: int, device: Device = DEFAULT_DEVICE,
               kinds: Optional[Kinds] = None, fam: Optional[TensorTable] = None,
               rooms: Rooms = NO_ROOMS) -> StagePlan:
    """:func:`solve_shape` as the stage's :class:`StagePlan`."""
    out = StagePlan(stage=shape.stage, fits=False, static=shape.static)
    if room < 0:
        return out
    if not shape.runs:
        out.fits = shape.floor <= room + 1e-6
        out.dynamic = shape.fixed + shape.floor
        return out
    best = solve_shape(shape, all_chains, room, micro, device, kinds, fam, rooms)
    if best is None:
        return out
    out.fits = True
    out.exact = best.exact
    out.levels = best.assign
    out.seconds = best.seconds
    out.flops = best.flops
    out.dynamic = best.dynamic + shape.fixed
    return out


def extra_of(levels, floor: float = 0.0) -> float:
    """The stage's transient term: largest recompute transient (at least ``floor``: :func:`step_terms`)
    plus largest swap window."""
    levels = list(levels)
    return max(max(lv.cost.regen for lv in levels), floor) + max(lv.window for lv in levels)


def lowest_dynamic(shape: StageShape, all_chains, device: Device = DEFAULT_DEVICE, kinds: Optional[Kinds] = None,
                   fam: Optional[TensorTable] = None) -> float:
    """The least dynamic bytes ``shape`` can reach with these levels (the fixed part included)."""
    if not shape.runs:
        return shape.fixed + shape.floor
    best = solve_shape(shape, all_chains, math.inf, 1, device, kinds, fam, lowest=True)
    return (best.dynamic if best is not None else math.inf) + shape.fixed


def lowest_peak(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration, allow_swap: bool = False,
                kinds: Optional[Kinds] = None) -> int:
    """The least predicted peak ``stage`` can reach with these choices (every transient cap tried,
    each layer at the level that keeps least among those the cap allows, as the search counts it)."""
    shape = stage_shape(spec, fam, geo, stage, cal, kinds)
    longest = max((geo.layer_list[v][stage] for v in range(geo.pp_interleave_num)), default=1)
    dyn = lowest_dynamic(shape, chains(fam, allow_swap, layers=longest), kinds=kinds, fam=fam)
    return max(cal.peak(shape.static, dyn), cal.peak(shape.static, shape.late))


def brute_force(levels: Sequence[Level], layer_weights: Sequence[int], micro: int, room: float,
                floor: float = 0.0) -> Optional[float]:
    """Least total seconds over every per-layer assignment of ``levels`` with
    ``sum(weight * kept + once) + extra_of(levels, floor) <= room`` (tests check :func:`solve_stage` against it)."""
    best = None
    for combo in itertools.product(levels, repeat=len(layer_weights)):
        dyn = sum(w * lv.cost.kept + lv.cost.once for w, lv in zip(layer_weights, combo)) + extra_of(combo, floor)
        if dyn <= room + 1e-9:
            cost = micro * sum(lv.time for lv in combo)
            best = cost if best is None else min(best, cost)
    return best


def smallest_level_step(config: str, model: Optional[str] = None) -> int:
    """The smallest per-layer step (bytes kept) between neighbouring levels of the YAML's family
    (``tune``'s bisection resolution, ``CodePath.level_step``); 0 when every step is 0."""
    from .model import memory_family, plan_of

    _, plan, spec = plan_of(config, model)
    fam = memory_family(spec, plan)
    steps = [abs(c[i].cost.kept - c[i + 1].cost.kept) for c in chains(fam) for i in range(len(c) - 1)]
    return min((s for s in steps if s > 0), default=0)
