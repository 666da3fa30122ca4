"""The pipeline's layer split searched together with recompute (issue 35 point 4): how many layers
each stage holds (``model.model_config.offset``), chosen with each stage's levels.

Why jointly: a stage's peak depends on its layer count (static memory grows with each layer, and
the first stages hold more micro-batches in flight), so moving a layer off a tight stage can save
more recompute than the layer costs where it lands; MindFormers' SAPP balances offset and recompute
together for the same reason. What is minimised is the step time the model predicts for the 1F1B
schedule,

    T = (m - 1) * max_p t_p + sum_p t_p

(``m`` micro-batches; every stage runs each micro-batch's forward and backward once, the slowest
stage paces the steady state, the others add their share of filling and draining the pipeline),
with ``t_p`` a stage's time per micro-batch: three times its layers' forward FLOPs (forward, and a
backward about twice the forward) and the head's on the last stage, at the device's throughput,
plus its recompute and exposed swap (:class:`swapwatch.memory.search.Price`). With the split fixed
every stage's least recompute also gives the least ``T``: without offsets the search is unchanged.

The search is exact over the splits it considers: every stage's answer for every layer count
(:func:`swapwatch.memory.search.solve_stage`, exact), combined by a dynamic programme over stages
whose states keep the Pareto front of (slowest stage, sum of stages) — ``T`` is not additive, the
front is what makes the combination exact. Considered: each stage within :func:`spread` layers of
the even split (at most :data:`MAX_SPREAD`), every stage at least one layer; one chunk per stage
(``pp_interleave_num`` 1: an interleaved pipeline keeps its offsets, said). Ties keep the YAML's
own split.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..plan import Geometry
from .search import DEFAULT_DEVICE, Device, Kinds, StagePlan
from .spec import ModelSpec
from .tensor_table import TensorTable

#: the most a stage's layer count is moved from the even split
MAX_SPREAD = 8


def spread(base: int) -> int:
    """How far from the even split (``base`` layers a stage) a stage's count is searched."""
    return max(2, min(MAX_SPREAD, base // 2))


def split_geometry(num_layers: int, counts: Sequence[int]) -> Geometry:
    """MindFormers' geometry (``swapwatch.strategy.compute_geometry``) of one chunk per stage with
    ``counts`` layers: ``offset[p] = counts[p] - num_layers // P`` (they add up to the remainder)."""
    P = len(counts)
    base = num_layers // P
    accu, starts, pp_ids = [], [0], []
    total = 0
    for p, n in enumerate(counts):
        total += n
        accu.append(total)
        starts.append(total)
        pp_ids += [p] * n
    return Geometry(num_layers=num_layers, pipeline_stage=P, pp_interleave_num=1,
                    offset=[[n - base for n in counts]], layer_list=[list(counts)], layer_accu=[accu],
                    chunk_starts=[starts], pp_ids=pp_ids, interleave_ids=[0] * num_layers)


def stage_geometry(num_layers: int, P: int, p: int, start: int, n: int) -> Geometry:
    """A geometry whose stage ``p`` holds layers ``[start, start + n)`` (the layers before it on
    stage 0, those after on the last stage): what a stage's search needs of a split."""
    counts = [0] * P
    counts[p] = n
    if p > 0:
        counts[0] += start
    if p < P - 1:
        counts[P - 1] += num_layers - start - n
    return split_geometry(num_layers, counts)


def layer_seconds(tables: Sequence[TensorTable], device: Device = DEFAULT_DEVICE) -> float:
    """Forward and backward of these layers, one micro-batch, at the device's throughput."""
    return sum(3.0 * t.forward_flops() for t in tables) / device.flops_per_s


def head_seconds(spec: ModelSpec, device: Device = DEFAULT_DEVICE) -> float:
    """The head's matmul on the last stage (``[b, s, h] x [h, v / tp]``), forward and backward."""
    sym = spec.symbols()
    return 3.0 * 2.0 * sym["b"] * sym["s"] * spec.hidden * sym["v"] / device.flops_per_s


def step_seconds(times: Sequence[float], micro: int) -> float:
    """The 1F1B step time of stages taking ``times`` per micro-batch (module docstring)."""
    return (micro - 1) * max(times) + sum(times) if times else 0.0


@dataclass
class Split:
    """The chosen split and each stage's plan on it."""

    counts: List[int]
    stages: List[StagePlan]
    step: float                      # the modelled step time, seconds
    geometry: Geometry


def search_split(num_layers: int, P: int, micro: int, own: Sequence[int],
                 solve: Callable[[int, int, int], Optional[Tuple[StagePlan, float]]],
                 realize: Optional[Callable[[int, int, int], StagePlan]] = None) -> Optional[Split]:
    """The split of ``num_layers`` over ``P`` stages with the least step time, each stage's plan
    from ``solve(stage, first layer, layer count)`` -> (plan, seconds per micro-batch) or None when
    nothing fits (``realize``: the chosen stages' plans, when ``solve``'s are not placed at their
    first layer); ``own``: the YAML's split (kept on ties). None when no split fits."""
    base = num_layers // P
    R = spread(base)
    lo = [max(1, base - R)] * P
    hi = [base + R] * P
    for p, n in enumerate(own):                # the YAML's own split is always among those tried
        lo[p], hi[p] = min(lo[p], n), max(hi[p], n)
    memo: Dict[Tuple[int, int, int], Optional[Tuple[StagePlan, float]]] = {}

    def stage(p: int, start: int, n: int) -> Optional[Tuple[StagePlan, float]]:
        key = (p, start, n)
        if key not in memo:
            memo[key] = solve(p, start, n)
        return memo[key]

    # front[k]: layers 0..k-1 placed on the stages so far -> Pareto list of (max, sum, counts)
    Front = List[Tuple[float, float, Tuple[int, ...]]]
    fronts: Dict[int, Front] = {0: [(0.0, 0.0, ())]}
    for p in range(P):
        nxt: Dict[int, Front] = {}
        left_min = sum(lo[q] for q in range(p + 1, P))
        left_max = sum(hi[q] for q in range(p + 1, P))
        for used, front in fronts.items():
            for n in range(lo[p], hi[p] + 1):
                k = used + n
                rest = num_layers - k
                if rest < left_min or rest > left_max:
                    continue
                got = stage(p, used, n)
                if got is None:
                    continue
                t = got[1]
                for mx, sm, cnt in front:
                    nxt.setdefault(k, []).append((max(mx, t), sm + t, cnt + (n,)))
        fronts = {k: _pareto(v, tuple(own)) for k, v in nxt.items()}
    final = fronts.get(num_layers, [])
    if not final:
        return None
    own_t = tuple(own)
    best = min(final, key=lambda x: ((micro - 1) * x[0] + x[1], x[2] != own_t))
    # the YAML's own split when it is as fast (to the float's precision)
    same = [x for x in final if x[2] == own_t]
    if same and (micro - 1) * same[0][0] + same[0][1] <= (micro - 1) * best[0] + best[1] + 1e-12 * max(1.0, best[1]):
        best = same[0]
    counts = list(best[2])
    starts = [sum(counts[:p]) for p in range(P)]
    stages = []
    for p in range(P):
        got = stage(p, starts[p], counts[p])
        assert got is not None
        stages.append(realize(p, starts[p], counts[p]) if realize is not None else got[0])
    return Split(counts=counts, stages=stages, step=step_seconds([stage(p, starts[p], counts[p])[1]  # type: ignore[index]
                                                                  for p in range(P)], micro),
                 geometry=split_geometry(num_layers, counts))


def _pareto(points: List[Tuple[float, float, Tuple[int, ...]]],
            own: Tuple[int, ...]) -> List[Tuple[float, float, Tuple[int, ...]]]:
    """The points no other beats on both the slowest stage and the sum (the YAML's own prefix kept
    on a tie)."""
    pts = sorted(points, key=lambda x: (x[0], x[1], x[2] != own[:len(x[2])]))
    out: List[Tuple[float, float, Tuple[int, ...]]] = []
    best = math.inf
    for pt in pts:
        if pt[1] < best - 1e-15 * max(1.0, abs(best) if best < math.inf else 1.0):
            out.append(pt)
            best = pt[1]
    return out


def stage_tables(fam: TensorTable, kinds: Optional[Kinds], layers: Sequence[int]) -> List[TensorTable]:
    return [kinds.layers[i] for i in layers] if kinds is not None else [fam] * len(layers)
