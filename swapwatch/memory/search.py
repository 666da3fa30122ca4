"""Choose per layer none / select / full (/ swap) so that every stage fits the budget at the least
recompute cost: the search behind ``swapwatch plan``.

The model (:mod:`swapwatch.memory.model`) makes a stage's peak

    static + residual + scale * (sum over chunks of inflight_c * sum of kept bytes
                                 + max recompute transient + max swap window + fixed)

where the transient is what one layer regenerates during its backward, the window what a layer
swap's prefetch brings back, and ``fixed`` the backward workspace and the head. Where the loss is
apart in time from the layers' backward (``ModelSpec.loss_apart``: the head is counted against the
recompute and workspace, the larger side) the head leaves ``fixed`` and becomes the transient's
*floor* (``max(transient, head - workspace)``), which every transient term below takes. Stages are
independent, so each is solved alone:

* the choices are *levels*: none, the family's select groups nested in one order (``g1``, then
  ``g1+g2`` ...), full, and with swap ``swap:p``. Nesting is what MindFormers' count tables force
  (a pattern with count N applies to the first N layers of each chunk), and searching every order
  of the groups covers every count table of those patterns;
* layers of one chunk are identical to the model, so a chunk's choice is how many layers take each
  level; the Pareto front (kept bytes, FLOPs) of those count vectors is built level by level, and
  the chunks' fronts are combined the same way;
* the two max terms are handled exactly by trying each pair of distinct values as caps (only
  levels at or below them allowed) and keeping the cheapest feasible answer.

The answer is exact for the model: :func:`brute_force` (tests) enumerates every per-layer
assignment of small cases and finds the same cost. A stage with one chunk and no swap (the common
case) is solved by enumerating every count vector of every nesting order with numpy, which is fast
even for 128 layers in one stage; interleaved chunks and swap use the Pareto search.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, TypeVar

from .tensor_table import TensorTable, LayerCost
from .model import (NO_CALIBRATION, Calibration, inflight, stage_memory)
from .swap_cost import Link, make_link, swap_choices
from .spec import ModelSpec


@dataclass(frozen=True)
class Level:
    """One per-layer choice: a label, the select patterns it applies (in group order), whether it is
    full recompute or a layer swap (with its prefetch), and what it costs the model."""

    label: str
    patterns: Tuple[str, ...]
    full: bool
    swap: Optional[int]
    cost: LayerCost
    rank: int                        # position in its chain (0 = none): nesting order for emission
    #: op swaps ``(op_name pattern, backward_prefetch)`` (memory.swap_cost prices them)
    op_swap: Tuple[Tuple[str, int], ...] = ()
    #: swapped bytes on the device at once on MindSpore's schedule, every layer of the chunk taking
    #: this level (swap_cost.SwapChoice.window)
    swap_window: int = 0

    @property
    def window(self) -> int:
        """The swap window this level adds to the stage's peak (a max over the stage's levels)."""
        return self.swap_window

    @property
    def swaps(self) -> bool:
        return self.swap is not None or bool(self.op_swap)


@dataclass
class StagePlan:
    stage: int
    fits: bool
    levels: Dict[int, Level] = field(default_factory=dict)     # layer -> level
    dynamic: float = 0      # bytes; a float once calibrated (Calibration.per_step)
    static: int = 0
    flops: float = 0.0


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
    if lv.patterns:
        marked, boundary = f.ops_reached(lv.patterns)
        return f.cost(marked | f.preset_ops | f.preset_select_ops, boundary)
    return f.cost(f.preset_ops, frozenset(), frozenset(), lv.swap is not None)


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


def stage_parts(spec: ModelSpec, geo, stage: int, kinds: Kinds) -> Tuple[int, float, int, float]:
    """(static, fixed, optimizer step, transient floor) of ``stage`` with its layers' kinds:
    stage_memory's figures with no activation kept (fixed and floor: :func:`step_terms`, in bytes)."""
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    st = stage_memory(spec, kinds.mem, geo, stage, [zero] * len(kinds.layers), (), kinds.layers,
                      [(mf, zero) for mf in kinds.mtp])
    fixed, floor = step_terms(st.workspace, st.head, st.gathered, st.loss_apart, NO_CALIBRATION)
    return st.static_total, fixed, st.optimizer, floor


def fam_parts(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration) -> Tuple[int, float, int, float]:
    """(static, fixed, optimizer step, transient floor) of ``stage`` with every layer priced on
    ``fam``: static and the step are stage_memory's own figures (the per-row optimizer shard and the
    states on host of model.static_parts / swap_optimizer_step included), so the search and
    ``estimate`` agree; fixed and floor are :func:`step_terms` of the backward workspace, the head and
    the gathered weights, calibrated.
    The fine-grain interleave's early copies (TensorTable.early_bound) count as if no layer recomputed
    the tensors they copy: a bound, so a plan the search accepts fits the estimate too."""
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    n = sum(sum(row) for row in geo.layer_list)
    st = stage_memory(spec, fam, geo, stage, [zero] * n)
    n_layers = sum(geo.layer_list[v][stage] for v in range(geo.pp_interleave_num))
    fixed, floor = step_terms(fam.workspace + n_layers * fam.early_bound if n_layers else 0, st.head, st.gathered,
                              st.loss_apart, cal)
    return st.static_total, fixed, st.optimizer, floor


@dataclass(frozen=True)
class SwapOffer:
    """What swap levels the search may take: priced with ``link``, and (when the plan's host memory
    did not fit a node) only those that move at most ``max_host`` bytes per layer and micro-batch."""

    link: Link
    max_host: Optional[int] = None


def swap_levels(fam: TensorTable, allow_swap: Any, layers: int) -> List[Level]:
    """The swap levels of ``fam`` (``swap_cost.swap_choices``: each hides its copies on MindSpore's
    schedule at the link, every layer of a ``layers``-layer chunk taking it, with the least prefetch
    that does). ``allow_swap``: a :class:`SwapOffer` or a ``swap_cost.Link`` (True: the 910B's
    defaults, assumed)."""
    if not allow_swap:
        return []
    offer = allow_swap if isinstance(allow_swap, SwapOffer) else \
        SwapOffer(allow_swap if isinstance(allow_swap, Link) else make_link(host_memory=0))
    return [Level(c.label, c.patterns, False, c.layer_swap, c.cost, -1, c.op_swap, c.window)
            for c in swap_choices(fam, offer.link, layers)
            if offer.max_host is None or c.cost.host <= offer.max_host]


def chains(fam: TensorTable, allow_swap: Any = False, layers: int = 16) -> List[List[Level]]:
    """Every nesting order of the family's select groups as a list of levels none < ... < full
    (plus the swap levels, which sit beside the chain: swap mode takes layer ids, no nesting;
    ``allow_swap``: False, True or the ``swap_cost.Link`` they are priced with)."""
    out = []
    none = Level("none", (), False, None, fam.cost(frozenset()), 0)
    full = Level("full", (), True, None, fam.cost(fam.all_ops, fam.layer_boundary), 10 ** 6)
    swaps = swap_levels(fam, allow_swap, layers)
    seen = set()
    for order in itertools.permutations(fam.groups):
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
            out.append(chain + [full] + swaps)
    return out


def _same(a: LayerCost, b: LayerCost) -> bool:
    return (a.kept, a.regen, a.host, a.flops) == (b.kept, b.regen, b.host, b.flops)


Front = List[Tuple[float, float, Tuple[int, ...]]]       # (weight, flops, counts per level)
#: a front's third member: counts per level (:data:`Front`), or one count key per chunk (a stage's combined front)
_Counts = TypeVar("_Counts", Tuple[int, ...], Tuple[Tuple[int, ...], ...])


def _prune(points: List[Tuple[float, float, _Counts]], cap: float) -> List[Tuple[float, float, _Counts]]:
    """Pareto front (smaller weight and smaller cost are better) of the points within ``cap``."""
    pts = sorted((p for p in points if p[0] <= cap + 1e-9), key=lambda p: (p[0], p[1]))
    out: List[Tuple[float, float, _Counts]] = []
    best = float("inf")
    for p in pts:
        if p[1] < best - 1e-9:
            out.append(p)
            best = p[1]
    return out


def chunk_front(levels: Sequence[Level], n: int, cap: float) -> Front:
    """Pareto front over count vectors of ``n`` identical layers spread over ``levels``."""
    start: Front = [(0.0, 0.0, ())]
    fronts: List[Front] = [start] + [[] for _ in range(n)]
    for lv in levels:
        w, c = float(lv.cost.kept), float(lv.cost.flops)
        new: List[Front] = [[] for _ in range(n + 1)]
        for m in range(n + 1):
            cand: Front = []
            for used in range(m + 1):
                k = m - used
                for pw, pc, cnt in fronts[used]:
                    cand.append((pw + k * w, pc + k * c, cnt + (k,)))
            new[m] = _prune(cand, cap)
        fronts = new
    return fronts[n]


def combine(a: List[Tuple[float, float, _Counts]], b: List[Tuple[float, float, _Counts]],
            cap: float) -> List[Tuple[float, float, _Counts]]:
    return _prune([(x[0] + y[0], x[1] + y[1], x[2] + y[2]) for x in a for y in b], cap)


def solve_stage(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration, budget: int,
                allow_swap: bool = False, kinds: Optional[Kinds] = None) -> StagePlan:
    """The cheapest per-layer levels of ``stage`` whose predicted peak is <= ``budget``.
    ``kinds``: each layer's own table (:func:`kinds_of`); a stage of one chunk without swap is then
    searched with every layer priced on its kind and the MTP layer on its own (the interleaved and
    swap searches take every layer as ``fam``'s, the heaviest kind: cautious)."""
    P, V = geo.pipeline_stage, geo.pp_interleave_num
    counts = inflight(P, V, spec.micro_batch_num, stage)
    chunks = [(list(range(geo.chunk_starts[v][stage], geo.chunk_starts[v][stage] + geo.layer_list[v][stage])),
               counts[v]) for v in range(V)]
    all_chains = chains(fam, allow_swap, max(len(c[0]) for c in chunks))
    fixed: float            # stage_parts' bytes with kinds, calibrated (a float) without
    if kinds is not None and V == 1 and not allow_swap and chunks[0][0]:
        static, fixed, opt, floor = stage_parts(spec, geo, stage, kinds)
        if cal.peak(static, opt) > budget:
            return StagePlan(stage=stage, fits=False, static=static)
        room = (budget - static - cal.residual) / cal.scale - fixed
        return _solve_kinds_chunk(stage, static, fixed, room, chunks[0][0], counts[0], spec.micro_batch_num,
                                  all_chains, kinds, stage == P - 1, floor)
    static, fixed, opt, floor = fam_parts(spec, fam, geo, stage, cal)
    room = (budget - cal.static_scale * static - cal.residual) / cal.scale - fixed   # 0 x static: CPU pool
    if cal.peak(static, opt) > budget:
        return StagePlan(stage=stage, fits=False, static=static)   # the optimizer step alone is over
    if V == 1 and not allow_swap and chunks[0][0]:
        return _solve_single_chunk(stage, static, fixed, room, chunks[0][0], counts[0], spec.micro_batch_num,
                                   all_chains, floor)
    # the largest recompute transient and the largest swap window of the stage add to the peak:
    # try every pair of caps (levels above a cap not allowed) and keep the cheapest that fits
    caps = sorted({(r, w) for r in {lv.cost.regen for ch in all_chains for lv in ch}
                   for w in {lv.window for ch in all_chains for lv in ch}}, key=lambda rw: max(rw[0], floor) + rw[1])
    best: Optional[Tuple[float, float, List[Tuple[List[Level], Tuple[int, ...]]]]] = None
    for cap_r, cap_w in caps:
        cap_extra = max(cap_r, floor) + cap_w
        cap = room - cap_extra
        if cap < 0:
            break
        total: List[Tuple[float, float, Tuple[Tuple[int, ...], ...]]] = [(0.0, 0.0, ())]
        picks: List[Dict[Tuple[int, ...], List[Level]]] = []
        for layers, w in chunks:
            if not layers:
                picks.append({})
                continue
            merged: Front = []
            owner: Dict[Tuple[int, ...], List[Level]] = {}
            for ci, ch in enumerate(all_chains):
                allowed = [lv for lv in ch if lv.cost.regen <= cap_r and lv.window <= cap_w]
                for kw, kc, cnt in chunk_front(allowed, len(layers), cap / w):
                    key = (ci,) + cnt
                    owner[key] = allowed
                    merged.append((kw * w, kc * spec.micro_batch_num, key))
            front = _prune(merged, cap)
            picks.append(owner)
            total = combine(total, [(p[0], p[1], (p[2],)) for p in front], cap)
        # the front is sorted by weight, so its last point is the cheapest that fits
        if total and (best is None or total[-1][1] < best[1] - 1e-9):
            kw, kc, keys = total[-1]
            chosen = [(picks[v][key], key[1:]) for v, key in enumerate(keys)] if keys else []
            best = (kw + cap_extra, kc, chosen)
    out = StagePlan(stage=stage, fits=best is not None, static=static)
    if best is None:
        return out
    out.flops = best[1]
    ki = 0
    for layers, _ in chunks:
        if not layers:
            continue
        allowed, cnt = best[2][ki]
        ki += 1
        # MindFormers' order inside a chunk: full first, then the deeper select levels, none last;
        # swap levels take layer ids, put after the recompute prefix
        ordered = sorted(zip(allowed, cnt), key=lambda x: -x[0].rank if not x[0].swaps else 10 ** 7)
        pos = 0
        for lv, k in ordered:
            for _ in range(k):
                out.levels[layers[pos]] = lv
                pos += 1
    out.dynamic = fixed + extra_of(out.levels.values(), floor) + sum(
        w * sum(out.levels[i].cost.kept for i in layers) for layers, w in chunks)
    return out


#: Rows of count vectors held at once: the enumeration goes block by block, in the same
#: lexicographic order as one array would hold them, so memory stays flat whatever the layer count
#: (one (n+1)**(k-1) array was 4.1 GB at 500 layers per stage, 22 GiB at 1,000; docs/reliability.md).
BLOCK_ROWS = 1 << 16


@functools.lru_cache(maxsize=64)
def _small(n: int, k: int):
    import numpy as np

    if k == 1:
        return np.array([[n]], dtype=np.int64)
    if k == 3:              # the common block, built directly in O(rows): (a, b, n - a - b), lexicographic
        a = np.repeat(np.arange(n + 1, dtype=np.int64), np.arange(n + 1, 0, -1))
        starts = np.concatenate([[0], np.cumsum(np.arange(n + 1, 0, -1))[:-1]])
        b = np.arange(len(a), dtype=np.int64) - starts[a]
        return np.stack([a, b, n - a - b], axis=1)
    grids = np.indices((n + 1,) * (k - 1), dtype=np.int64).reshape(k - 1, -1).T
    grids = grids[grids.sum(axis=1) <= n]
    return np.concatenate([grids, n - grids.sum(axis=1, keepdims=True)], axis=1)


def compositions(n: int, k: int, rows: Optional[int] = None):
    """Every k-tuple of non-negative ints summing to n, as (m, k) int64 blocks in lexicographic
    order; a block holds at most about ``2 * rows`` rows (:data:`BLOCK_ROWS`), or ``n + 1`` when
    ``rows`` is smaller."""
    import numpy as np

    rows = BLOCK_ROWS if rows is None else rows

    if k <= 2 or (n + 1) ** (k - 1) <= 4 * rows:      # the grid _small filters stays small
        yield _small(n, k)
        return
    for first in range(n + 1):
        for block in compositions(n - first, k - 1, rows):
            yield np.concatenate([np.full((len(block), 1), first, dtype=np.int64), block], axis=1)


def block_transient(block_levels: Sequence[Level], counts) -> "Any":
    """The largest recompute transient among the levels a count row uses (numpy over rows)."""
    import numpy as np

    regen = np.array([lv.cost.regen for lv in block_levels], dtype=np.float64)
    return np.where(counts > 0, regen, 0.0).max(axis=1)


def _solve_single_chunk(stage: int, static: int, fixed: float, room: float, layers: List[int], w: int, micro: int,
                        all_chains: List[List[Level]], floor: float = 0.0) -> StagePlan:
    """One chunk, no swap: every count vector of every chain, exactly as the estimate counts it
    (every micro-batch in flight keeps everything, plus the largest transient, at least ``floor``)."""
    import numpy as np

    best = None
    for ch in all_chains:
        blocks = sorted(ch, key=lambda lv: -lv.rank)              # MindFormers' order: full first
        kept = np.array([lv.cost.kept for lv in blocks], dtype=np.float64)
        flops = np.array([lv.cost.flops for lv in blocks], dtype=np.float64)
        mine = None                   # this chain's first (cost, dyn) minimum in enumeration order
        for cnt in compositions(len(layers), len(blocks)):
            dyn = w * (cnt @ kept) + np.maximum(block_transient(blocks, cnt), floor)
            ok = np.nonzero(dyn <= room + 1e-6)[0]
            if not len(ok):
                continue
            cost = (cnt[ok] @ flops) * micro
            mine = _cheapest(mine, ok, dyn, cost, cnt)
        best = _better(best, mine, blocks)
    return _stage_plan(stage, static, best, layers, fixed)


def _kind_tables(kinds: Kinds, layers: List[int], blocks: Sequence[Level], with_mtp: bool):
    """Per level (rows, in ``blocks`` order) over the chunk's positions: prefix sums of kept bytes
    and FLOPs, the largest transient over every position range ``[a, b)``, and the MTP layers'
    kept / transient / FLOPs at that level (0 off the last stage)."""
    import numpy as np

    n, L = len(layers), len(blocks)
    kept = np.zeros((L, n + 1))
    flops = np.zeros((L, n + 1))
    regen = np.zeros((L, n + 1, n + 1))
    mtp = np.zeros((3, L))
    for b, lv in enumerate(blocks):
        costs = [kinds.cost(kinds.layers[i], lv) for i in layers]
        kept[b, 1:] = np.cumsum([c.kept for c in costs])
        flops[b, 1:] = np.cumsum([c.flops for c in costs])
        r = np.array([c.regen for c in costs], dtype=np.float64)
        for a in range(n):
            regen[b, a, a + 1:] = np.maximum.accumulate(r[a:])
        if with_mtp and kinds.mtp:
            mc = [kinds.cost(mf, lv) for mf in kinds.mtp]
            mtp[:, b] = (sum(c.kept for c in mc), max(c.regen for c in mc), sum(c.flops for c in mc))
    return kept, flops, regen, mtp


def _rows(tables, cnt, w: int, floor: float = 0.0):
    """(dynamic bytes, FLOPs per micro-batch) of count rows ``cnt`` (levels in MindFormers' order:
    the first ``cnt[0]`` positions take the first level ...); the MTP layers take the level of the
    chunk's last position (the last decoder layer's)."""
    import numpy as np

    kept, flops, regen, mtp = tables
    ends = np.cumsum(cnt, axis=1)
    starts = ends - cnt
    idx = np.arange(cnt.shape[1])[None, :]
    k = (kept[idx, ends] - kept[idx, starts]).sum(axis=1)
    f = (flops[idx, ends] - flops[idx, starts]).sum(axis=1)
    tr = regen[idx, starts, ends].max(axis=1)
    last = cnt.shape[1] - 1 - np.argmax(cnt[:, ::-1] > 0, axis=1)
    k = k + mtp[0][last]
    tr = np.maximum(np.maximum(tr, mtp[1][last]), floor)
    return w * k + tr, f + mtp[2][last]


def _solve_kinds_chunk(stage: int, static: int, fixed: float, room: float, layers: List[int], w: int, micro: int,
                       all_chains: List[List[Level]], kinds: Kinds, last_stage: bool, floor: float = 0.0) -> StagePlan:
    """:func:`_solve_single_chunk` with each layer priced on its own kind (and the MTP layers on
    theirs): every count vector of every chain, as the estimate counts the written YAML."""
    import numpy as np

    best = None
    for ch in all_chains:
        blocks = sorted(ch, key=lambda lv: -lv.rank)              # MindFormers' order: full first
        tables = _kind_tables(kinds, layers, blocks, last_stage)
        mine = None
        for cnt in compositions(len(layers), len(blocks)):
            dyn, fl = _rows(tables, cnt, w, floor)
            ok = np.nonzero(dyn <= room + 1e-6)[0]
            if not len(ok):
                continue
            cost = fl[ok] * micro
            mine = _cheapest(mine, ok, dyn, cost, cnt)
        best = _better(best, mine, blocks)
    return _stage_plan(stage, static, best, layers, fixed)


def extra_of(levels, floor: float = 0.0) -> float:
    """The stage's transient term: largest recompute transient (at least ``floor``: :func:`step_terms`)
    plus largest swap window."""
    levels = list(levels)
    return max(max(lv.cost.regen for lv in levels), floor) + max(lv.window for lv in levels)


def lowest_peak(spec: ModelSpec, fam: TensorTable, geo, stage: int, cal: Calibration, allow_swap: bool = False,
                kinds: Optional[Kinds] = None) -> int:
    """The least predicted peak ``stage`` can reach with these choices: for each transient cap,
    every layer at the level that keeps least among those the cap allows (``kinds``: as
    :func:`solve_stage`)."""
    P, V = geo.pipeline_stage, geo.pp_interleave_num
    counts = inflight(P, V, spec.micro_batch_num, stage)
    layers = list(range(geo.chunk_starts[0][stage], geo.chunk_starts[0][stage] + geo.layer_list[0][stage]))
    fixed: float            # as in solve_stage
    if kinds is not None and V == 1 and not allow_swap and layers:
        import numpy as np

        static, fixed, opt, floor = stage_parts(spec, geo, stage, kinds)
        best_dyn = float("inf")
        for ch in chains(fam):
            blocks = sorted(ch, key=lambda lv: -lv.rank)
            tables = _kind_tables(kinds, layers, blocks, stage == P - 1)
            for cnt in compositions(len(layers), len(blocks)):
                best_dyn = min(best_dyn, float(np.min(_rows(tables, cnt, counts[0], floor)[0])))
        return max(cal.peak(static, best_dyn + fixed), cal.peak(static, opt))
    static, fixed, opt, floor = fam_parts(spec, fam, geo, stage, cal)
    weight = sum(counts[v] * geo.layer_list[v][stage] for v in range(V))
    if V == 1 and not allow_swap and weight:
        import numpy as np

        best_dyn = min(float(np.min(counts[0] * (cnt @ np.array([lv.cost.kept for lv in blocks], dtype=np.float64))
                                    + np.maximum(block_transient(blocks, cnt), floor)))
                       for blocks in (sorted(ch, key=lambda lv: -lv.rank) for ch in chains(fam))
                       for cnt in compositions(geo.layer_list[0][stage], len(blocks)))
        return max(cal.peak(static, best_dyn + fixed), cal.peak(static, opt))
    levels = [lv for ch in chains(fam, allow_swap, max(geo.layer_list[v][stage] for v in range(V))) for lv in ch]
    best = min(weight * min(lv.cost.kept for lv in levels if lv.cost.regen <= r and lv.window <= w) + max(r, floor) + w
               for r in {lv.cost.regen for lv in levels} for w in {lv.window for lv in levels}
               if any(lv.cost.regen <= r and lv.window <= w for lv in levels))
    return max(cal.peak(static, best + fixed), cal.peak(static, opt))


def brute_force(levels: Sequence[Level], layer_weights: Sequence[int], micro: int, room: float,
                floor: float = 0.0) -> Optional[float]:
    """Least total FLOPs over every per-layer assignment of ``levels`` with
    ``sum(weight * kept) + extra_of(levels, floor) <= room`` (tests check :func:`solve_stage` against it)."""
    best = None
    for combo in itertools.product(levels, repeat=len(layer_weights)):
        dyn = sum(w * lv.cost.kept for w, lv in zip(layer_weights, combo)) + extra_of(combo, floor)
        if dyn <= room + 1e-9:
            cost = micro * sum(lv.cost.flops for lv in combo)
            best = cost if best is None else min(best, cost)
    return best


def _cheapest(mine: Any, ok: Any, dyn: Any, cost: Any, cnt: Any) -> Any:
    """The cheapest of the compositions ``cnt[ok]`` (then the lowest peak), kept when it beats ``mine``:
    ``(cost, dynamic bytes, composition)``."""
    import numpy as np

    pick = np.lexsort((dyn[ok], cost))[0]
    j, c = ok[pick], float(cost[pick])
    if mine is None or (c, float(dyn[j])) < (mine[0], mine[1]):
        return (c, float(dyn[j]), cnt[j].copy())
    return mine


def _better(best: Any, mine: Any, blocks: Sequence["Level"]) -> Any:
    """``best`` over the block orders so far, or this order's ``mine`` when it is cheaper (then lower)."""
    if mine is None:
        return best
    c, d, row = mine
    if best is None or c < best[0] - 1e-9 or (abs(c - best[0]) <= 1e-9 and d < best[1]):
        return (c, d, blocks, row)
    return best


def _stage_plan(stage: int, static: int, best: Any, layers: List[int], fixed: float) -> "StagePlan":
    """The stage's answer from the search's ``best`` ``(cost, dynamic, blocks, composition)``: each
    layer's level, in the blocks' order over the stage's ``layers``."""
    out = StagePlan(stage=stage, fits=best is not None, static=static)
    if best is None:
        return out
    out.flops, dyn, blocks, cnt = best[0], best[1], best[2], best[3]
    pos = 0
    for lv, k in zip(blocks, cnt):
        for _ in range(int(k)):
            out.levels[layers[pos]] = lv
            pos += 1
    out.dynamic = int(round(dyn + fixed))
    return out
