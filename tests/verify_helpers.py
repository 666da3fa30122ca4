"""Test support for the rule engine and ``verify``: the documented scenarios as hand-built Plans
and RunLogs.

Plans are the documented per-layer outcomes (docs/mindspore-facts.md §1), independent of the strategy
engine; RunLogs are what the parsers make of a genuine worker log of such a run (one action event
per ``Set ...`` line, paths as MindFormers logs them). End-to-end tests on real log text use the
MindFormers-made fixtures instead (tests/test_verify_logs.py).
"""
from __future__ import annotations

import copy
from typing import Dict, List, Optional

from swapwatch.parsers.model import (ActionEvent, ExitEvent, FormativeEvent, GeometryEvent, InitialConfigEvent,
                                     NoticeEvent, RankLog, RunLog, StepEvent)
from swapwatch.engine.strategy import Geometry, LayerPlan, Plan


# ---------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------

def geometry(layer_list: List[List[int]]) -> Geometry:
    V, P = len(layer_list), len(layer_list[0])
    accu, total = [], 0
    for row in layer_list:
        r = []
        for n in row:
            total += n
            r.append(total)
        accu.append(r)
    starts, prev = [], 0
    for row in accu:
        starts.append([prev] + row)
        prev = row[-1]
    pp, inter = [], []
    for v in range(V):
        for p in range(P):
            pp += [p] * layer_list[v][p]
            inter += [v] * layer_list[v][p]
    return Geometry(num_layers=total, pipeline_stage=P, pp_interleave_num=V,
                    offset=[[0] * P for _ in range(V)], layer_list=layer_list, layer_accu=accu,
                    chunk_starts=starts, pp_ids=pp, interleave_ids=inter)


def plan_of(layer_list, layers: Dict[int, dict], swap: bool, formative=None) -> Plan:
    g = geometry(layer_list)
    lps = []
    for i in range(g.num_layers):
        lps.append(LayerPlan(layer=i, stage=g.pp_ids[i], interleave=g.interleave_ids[i],
                             **copy.deepcopy(layers.get(i, {}))))
    return Plan(geometry=g, swap=swap, formative=formative or {}, layers=lps)


def swap_case(n: int) -> Plan:
    """The four documented swap cases (docs/mindspore-facts.md §1.2), 4 layers, one stage."""
    if n == 1:
        layers = {i: {"op_swap": {r".*\.flash_attention": 10}} for i in range(4)}
        form = {"layer_recompute": [], "layer_swap": [],
                "op_swap": {r".*\.flash_attention": [{"backward_prefetch": 10, "layers": True}]}}
    elif n == 2:
        layers = {0: {"layer_swap": 20}, 3: {"layer_swap": 20}}
        form = {"layer_recompute": [], "layer_swap": [{"backward_prefetch": 20, "layers": [0, 3]}],
                "op_swap": {}}
    else:
        layers = {0: {"op_swap": {"attention": 20}},
                  1: {"op_swap": {"attention": 20, "feed_forward": 15}},
                  2: {"op_swap": {"attention": 20, "feed_forward": 15}},
                  3: {"op_swap": {"attention": 10}}}
        form = {"layer_recompute": [], "layer_swap": [],
                "op_swap": {"attention": [{"backward_prefetch": 20, "layers": [0, 1, 2]},
                                          {"backward_prefetch": 10, "layers": [3]}],
                            "feed_forward": [{"backward_prefetch": 15, "layers": [1, 2]}]}}
        if n == 4:
            layers[0]["select_recompute"] = ["feed_forward"]
            layers[3]["select_recompute"] = ["feed_forward"]
            form["select_recompute"] = {"feed_forward": [0, 3]}
    return plan_of([[4]], layers, swap=True, formative=form)


SILU, MUL = r"feed_forward\.w1\.activation\.silu", r"feed_forward\.mul"
W1M, W3M = r"feed_forward\.w1\.matmul", r"feed_forward\.w3\.matmul"
FFN_NORM, ATT_NORM = r"ffn_norm\.norm", r"attention_norm\.norm"
FULL_48 = {0, 1, 4, 24}


def recompute_48l() -> Plan:
    """The 48-layer worked example (docs/mindspore-facts.md §1.1)."""
    layers = {}
    for i in range(48):
        if i in FULL_48:
            # what the select tables below target there, shadowed by the full recompute (SW105)
            sel = [SILU, MUL] + ([W1M] if i in (0, 24) else []) + ([W3M] if i in (0, 4, 24) else [])
            layers[i] = {"full_recompute": True,
                         "select_shadowed": {"select_recompute": sel,
                                             "select_comm_recompute": [FFN_NORM, ATT_NORM]}}
            continue
        sel = [SILU, MUL] + ([W1M] if i in (25, 29) else [])
        layers[i] = {"select_recompute": sel, "select_comm_recompute": [FFN_NORM, ATT_NORM]}
    ll = [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]
    form = {"layer_recompute": [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]],
            "select_recompute": {SILU: ll, MUL: ll, W1M: [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]],
                                 W3M: [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]},
            "select_comm_recompute": {FFN_NORM: ll, ATT_NORM: ll},
            "select_recompute_exclude": {}, "select_comm_recompute_exclude": {}}
    return plan_of(ll, layers, swap=False, formative=form)


# ---------------------------------------------------------------------------------------------
# What MindFormers logs for the documented scenarios
# ---------------------------------------------------------------------------------------------

#: pattern -> the paths its log item names on the Llama layout (docs/mindspore-facts.md §1.3)
LOG_PATHS = {
    r".*\.flash_attention": ["attention.flash_attention"],
    "attention": ["attention"], "feed_forward": ["feed_forward"],
    SILU: ["feed_forward.w1.activation.silu"], MUL: ["feed_forward.mul"],
    W1M: ["feed_forward.w1.matmul"], W3M: ["feed_forward.w3.matmul"],
    FFN_NORM: ["ffn_norm.norm"], ATT_NORM: ["attention_norm.norm"],
}

RECOMPUTE_DEFAULTS = {"recompute": False, "select_recompute": False,
                      "parallel_optimizer_comm_recompute": False, "select_comm_recompute": False,
                      "mp_comm_recompute": True, "recompute_slice_activation": False,
                      "select_recompute_exclude": False, "select_comm_recompute_exclude": False}
SWAP_DEFAULTS = {"swap": False, "layer_swap": None, "op_swap": None, "default_prefetch": 1}


# ---------------------------------------------------------------------------------------------
# RunLogs built directly (what the parsers produce from such a log)
# ---------------------------------------------------------------------------------------------

def rank_log_for(plan: Plan, rank: int = 0, file: Optional[str] = None, steps: int = 2) -> RankLog:
    """The RankLog the parsers make of :func:`worker_log` for ``plan``."""
    file = file or f"worker_{rank}.log"
    rl = RankLog(rank=rank, files=[file], complete=True)
    line = 10
    for what, value in (("layer_list", plan.geometry.layer_list), ("layer_accu", plan.geometry.layer_accu),
                        ("pp_ids", plan.geometry.pp_ids), ("interleave_ids", plan.geometry.interleave_ids)):
        rl.events.append(GeometryEvent(rank, f"{file}:{line}", what=what, value=value))
        line += 1
    for key, value in plan.formative.items():
        logged = {"layer_swap": "layer swap", "op_swap": "op swap"}.get(key, key)   # as MindFormers prints
        rl.events.append(FormativeEvent(rank, f"{file}:{line}", key=logged, value=value))
        line += 1
    for lp in plan.layers:
        i = lp.layer
        if lp.full_recompute and getattr(lp, "full_recompute_logged", True):
            rl.events.append(ActionEvent(rank, f"{file}:{line}", layer=i, action="full_recompute", value=True))
            line += 1
        for key in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                    "select_comm_recompute_exclude"):
            pats = getattr(lp, key)
            if pats:
                rl.events.append(ActionEvent(rank, f"{file}:{line}", layer=i, action=key,
                                             paths=[p for pat in pats for p in LOG_PATHS[pat]],
                                             swap_mode=plan.swap))
                line += 1
        if lp.layer_swap is not None:
            rl.events.append(ActionEvent(rank, f"{file}:{line}", layer=i, action="layer_swap",
                                         value=lp.layer_swap, swap_mode=True))
            line += 1
        if lp.op_swap:
            vals = {p: v for pat, v in lp.op_swap.items() for p in LOG_PATHS[pat]}
            rl.events.append(ActionEvent(rank, f"{file}:{line}", layer=i, action="op_swap",
                                         paths=list(vals), values=vals, swap_mode=True))
            line += 1
    for s in range(1, steps + 1):
        rl.events.append(StepEvent(rank, f"{file}:{line}", step=s, steps=steps, loss=10.0 + s / 1000))
        line += 1
    rl.layer_settings = 1
    return rl


def runlog_for(plan: Plan, ranks=(0,), **kw) -> RunLog:
    return RunLog(ranks={r: rank_log_for(plan, r, **kw) for r in ranks})


def actions(rl: RankLog, layer: Optional[int] = None, action: Optional[str] = None) -> List[ActionEvent]:
    return [a for a in rl.actions if (layer is None or a.layer == layer)
            and (action is None or a.action == action)]


def drop(rl: RankLog, event) -> None:
    rl.events.remove(event)


def truncate_after_layer(rl: RankLog, layer: int) -> None:
    """Cut the rank's events after the first action of ``layer`` (a file cut mid-block)."""
    idx = next(i for i, e in enumerate(rl.events) if isinstance(e, ActionEvent) and e.layer == layer)
    del rl.events[idx + 1:]
    rl.truncated, rl.complete = True, False


def silent_rank(rank: int) -> RankLog:
    """A rank whose worker log has no MindFormers lines (STDOUT_DEVICES)."""
    return RankLog(rank=rank, files=[f"worker_{rank}.log"], complete=False)


def initial_config(rl: RankLog, section: str, value: dict) -> None:
    rl.events.insert(0, InitialConfigEvent(rl.rank, f"{rl.files[0]}:3", section=section, value=value))


__all__ = ["ExitEvent", "NoticeEvent"]


def context(plan: Plan, runlog: RunLog, **kw):
    """A rule context of a LayerSetting ``plan`` and ``runlog`` with the one comparison verify makes
    (``codepaths.LayerSetting.compare``), as ``verify.evaluate`` hands it to the rules."""
    from swapwatch.checks import CheckContext
    from swapwatch.engine.codepaths import LayerSetting

    comparison = LayerSetting().compare(plan, runlog) if runlog is not None else None
    return CheckContext(plan=plan, runlog=runlog, comparison=comparison, **kw)
