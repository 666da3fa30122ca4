"""The planner's knapsack (memory/search.py:mckp) and the stage search around it are exact: checked
against enumerating every assignment, on random instances and on stages whose layers differ by kind
(position hand-overs, the MTP layer pinned to the last layer's level)."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from swapwatch.memory import search
from swapwatch.memory.search import Level, Price, StageShape, _Run, mckp, solve_shape
from swapwatch.memory.tensor_table import LayerCost


def brute_mckp(slots, room, caps=()):
    """Every count vector of every slot: the least seconds within the room and every cap."""
    per_slot = []
    for n, items in slots:
        opts = []
        for combo in itertools.combinations_with_replacement(range(len(items)), n):
            uses = tuple(sum(items[i][2][r] for i in combo) for r in range(len(caps)))
            opts.append((sum(items[i][0] for i in combo), sum(items[i][1] for i in combo), uses))
        per_slot.append(opts)
    best = None
    for pick in itertools.product(*per_slot):
        k, c = sum(x[0] for x in pick), sum(x[1] for x in pick)
        uses = [sum(x[2][r] for x in pick) for r in range(len(caps))]
        if k <= room + 1e-6 and all(u <= cap + 1e-6 for u, cap in zip(uses, caps)) and (best is None or c < best):
            best = c
    return best


def random_slots(rng, n_slots, max_layers, n_levels, resources=0):
    slots = []
    for _ in range(n_slots):
        items = [(float(rng.randint(1, 40)), float(rng.randint(0, 30)),
                  tuple(float(rng.randint(0, 20)) for _ in range(resources)), li) for li in range(n_levels)]
        slots.append((rng.randint(1, max_layers), items))
    return slots


@pytest.mark.parametrize("seed", range(60))
def test_mckp_is_exact_on_random_instances(seed):
    rng = random.Random(seed)
    resources = seed % 3          # none; a host room; a host room and a link's seconds
    slots = random_slots(rng, rng.randint(1, 3), 5, rng.randint(2, 5), resources)
    lo = int(sum(n * min(it[0] for it in items) for n, items in slots))
    hi = int(sum(n * max(it[0] for it in items) for n, items in slots))
    caps = tuple(float(rng.randint(0, 60)) for _ in range(resources))
    for room in sorted({lo - 1, lo, (lo + hi) // 2, hi, rng.randint(lo, hi), rng.randint(lo, hi)}):
        want = brute_mckp(slots, room, caps)
        got = mckp(slots, room, caps)
        assert (got is None) == (want is None), (seed, room)
        if got is not None:
            assert got.seconds == pytest.approx(want), (seed, room)
            # the answer is what it says: counts per slot sum to its layers, within the room and caps
            assert [sum(c.values()) for c in got.counts] == [n for n, _ in slots]
            by = [{it[3]: it for it in items} for _, items in slots]
            assert sum(m * by[j][i][0] for j, c in enumerate(got.counts) for i, m in c.items()) <= room + 1e-6
            assert sum(m * by[j][i][1] for j, c in enumerate(got.counts) for i, m in c.items()) == \
                pytest.approx(got.seconds)
            for r, cap in enumerate(caps):
                assert sum(m * by[j][i][2][r] for j, c in enumerate(got.counts) for i, m in c.items()) <= cap + 1e-6


def test_mckp_with_many_identical_layers_is_the_closed_form_plus_few():
    # 10,000 identical layers over levels keeping 10 / 6 / 1 bytes at 0 / 3 / 10 s: the LP mixes the
    # hull pair; the integer answer is found without enumerating counts
    slots = [(10_000, [(10.0, 0.0, (), 0), (6.0, 3.0, (), 1), (1.0, 10.0, (), 2)])]
    got = mckp(slots, 77_777.0)
    # every layer at 6 bytes is 60,000: 17,777 bytes more buy 4,444 layers at 10 (4 bytes each), one
    # byte left; the rest stay at 6
    assert got is not None and got.counts == [{0: 4444, 1: 5556}] and got.seconds == 5556 * 3.0


def test_an_uncapped_resource_is_no_constraint():
    # host bytes with no host room (Rooms.host defaults to inf): the pair's closed form must not divide by it
    slots = [(4, [(10.0, 0.0, (5.0,), 0), (1.0, 10.0, (0.0,), 1)])]
    got = mckp(slots, 22.0, (math.inf,))
    assert got is not None and got.counts == [{0: 2, 1: 2}] and got.seconds == 20.0


def _level(label, kept, regen, flops, rank):
    return Level(label, (), label == "full", None, LayerCost(kept=kept, host=0, regen=regen, flops=flops), rank)


class _Table:
    """Stands for a tensor table: search.price asks a Kinds for the cost of a level on it."""


class _Kinds:
    def __init__(self, costs):
        self.costs = costs            # (table, label) -> LayerCost

    def cost(self, f, lv):
        return self.costs[(id(f), lv.label)]


@pytest.mark.parametrize("seed", range(25))
def test_stage_search_with_kinds_and_mtp_matches_every_assignment(seed):
    """Two kinds by position (dense then MoE) and an MTP layer that takes the last layer's level:
    the search's hand-over enumeration and pin against every monotone per-layer assignment."""
    rng = random.Random(seed)
    dense, moe, mtp = _Table(), _Table(), _Table()
    chain = [_level("none", 0, 0, 0.0, 0), _level("select:a", 0, 0, 0.0, 1), _level("full", 0, 0, 0.0, 10 ** 6)]
    costs = {}
    for t in (dense, moe, mtp):
        kept = sorted((rng.randint(5, 60) for _ in chain), reverse=True)
        flops = sorted(rng.randint(0, 50) * 1e12 for _ in chain)
        for lv, k, f in zip(chain, kept, flops):
            costs[(id(t), lv.label)] = LayerCost(kept=k, host=0, regen=rng.randint(0, 30), flops=f)
    kinds = _Kinds(costs)
    nd, nm, w = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 3)
    layers = list(range(nd + nm))
    shape = StageShape(stage=0, runs=[_Run(0, layers[:nd], dense, w), _Run(0, layers[nd:], moe, w)], mtp=[mtp],
                       mtp_weight=w, static=0, fixed=0.0, late=0, floor=float(rng.randint(0, 20)))
    order = search.position_order(chain)
    # every monotone assignment over positions (levels in position order)
    want: dict = {}
    for combo in itertools.combinations_with_replacement(range(len(order)), nd + nm):
        tabs = [dense] * nd + [moe] * nm
        cs = [costs[(id(t), order[i].label)] for t, i in zip(tabs, combo)]
        mc = costs[(id(mtp), order[combo[-1]].label)]
        dyn = w * (sum(c.kept for c in cs) + mc.kept) + max(max(c.regen for c in cs + [mc]), shape.floor)
        sec = sum(c.flops for c in cs + [mc]) / search.DEVICE_FLOPS
        want[combo] = (dyn, sec)
    lowest = min(d for d, _ in want.values())
    assert solve_shape(shape, [chain], lowest - 1, 1, kinds=kinds) is None
    for room in sorted({lowest, lowest + 5, lowest + 20, max(d for d, _ in want.values())}):
        best = min(s for d, s in want.values() if d <= room)
        got = solve_shape(shape, [chain], room, 1, kinds=kinds)
        assert got is not None and got.seconds == pytest.approx(best), (seed, room)
        assert got.dynamic <= room
        # the assignment is monotone by position and its figures are its own
        idx = [order.index(got.assign[i]) for i in layers]
        assert idx == sorted(idx)
        assert want[tuple(idx)] == (pytest.approx(got.dynamic), pytest.approx(got.seconds))
    low = solve_shape(shape, [chain], math.inf, 1, kinds=kinds, lowest=True)
    assert low is not None and low.dynamic == lowest


def test_price_is_what_the_search_reads():
    lv = _level("select:a", 100, 7, 4e12, 1)
    p = lv.price()
    assert p == Price(kept=100, transient=7, window=0, host=0, seconds=4e12 / search.DEVICE_FLOPS, flops=4e12)
    slow = search.Device(flops_per_s=1e12)
    t = _Table()
    assert search.price(t, lv, slow, kinds=_Kinds({(id(t), "select:a"): lv.cost})).seconds == 4.0


def test_hard_capacities_stop_at_the_work_bound_with_a_feasible_answer():
    """Two capacities beside memory binding on 1,500 layers: the kept-bytes bound is far from the
    answer and the enumeration wide; it stops at NODE_LIMIT with the best assignment found, which
    fits every constraint, and says it is not proven the least (exact False)."""
    rng = random.Random(1)
    n = 1000
    levels = [(100.0, 0.0, (0.0, 0.0), 0), (60.0, 3.0, (0.0, 0.0), 1), (10.0, 10.0, (0.0, 0.0), 2),
              (20.0, 0.1, (8.0, 3.0), 3), (40.0, 0.05, (4.0, 1.5), 4), (30.0, 1.0, (2.0, 2.0), 5)]
    slots = [(n, [(k * rng.uniform(0.8, 1.2), c, u, i) for k, c, u, i in levels]),
             (n // 2, [(k * 2, c, u, i) for k, c, u, i in levels])]
    room, caps = n * 100.0, (n * 1.5, n * 1.0)
    got = mckp(slots, room, caps)
    assert got is not None and not got.exact
    by = [{it[3]: it for it in items} for _, items in slots]
    assert [sum(c.values()) for c in got.counts] == [n for n, _ in slots]
    assert sum(m * by[j][i][0] for j, c in enumerate(got.counts) for i, m in c.items()) <= room
    for r, cap in enumerate(caps):
        assert sum(m * by[j][i][2][r] for j, c in enumerate(got.counts) for i, m in c.items()) <= cap + 1e-6
    # no layer at a level that uses no capacity could be made cheaper and still fit: the greedy's
    # answer is at least locally best, and better than leaving every layer at the cheapest free level
    assert got.seconds < n * 3.0 + (n // 2) * 3.0
