"""Test support for the rule engine and ``verify``: the documented scenarios as Plans, RunLogs and
worker-log text.

Plans are the documented per-layer outcomes (reference §2.6, §3.7); worker logs are written with
MindFormers' exact message texts (§5.1: whitespace runs of 29/33 spaces, the double space of
multi-segment op_swap items, doubled backslashes in reprs) and the stdout logger prefix (§6.1).
"""
from __future__ import annotations

import copy
from typing import Dict, List, Optional

from swapwatch.parsers.model import (ActionEvent, ExitEvent, FormativeEvent, GeometryEvent,
                                     InitialConfigEvent, NoticeEvent, RankLog, RunLog, StepEvent)
from swapwatch.strategy import Geometry, LayerPlan, Plan

PREFIX = "2025-07-24 10:00:{s:02d},{ms:03d} - mindformers./output/log[mindformers/models/utils.py:{line}] - INFO - "


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
    """The four documented swap cases (reference §3.7 SW1-SW4), 4 layers, one stage."""
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
    """The 48-layer worked example (reference §2.6)."""
    layers = {}
    for i in range(48):
        if i in FULL_48:
            layers[i] = {"full_recompute": True}
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
# Worker-log text (MindFormers' exact messages)
# ---------------------------------------------------------------------------------------------

def _op_item(pattern: str, path: str, value) -> str:
    lead = "." if "\\." not in pattern else " "
    return f"{lead}{path}, value={value}"


def messages_for(plan: Plan, log_paths: Dict[str, List[str]]) -> List[str]:
    """The per-layer ``Set ...`` messages MindFormers prints for ``plan``.

    ``log_paths`` maps a pattern to the paths its log item names (what the layout walk gives).
    """
    out = []
    swap = plan.swap
    for lp in plan.layers:
        i = lp.layer
        if lp.full_recompute and getattr(lp, "full_recompute_logged", True):
            out.append(f"Set full recompute at layer {i}")
        for key, word in (("select_recompute", "select recompute"),
                          ("select_comm_recompute", "select comm recompute")):
            pats = getattr(lp, key)
            if pats:
                paths = ", ".join(p for pat in pats for p in log_paths[pat])
                act = "" if swap else " on"
                out.append(f"Set {word}{act} at layer {i}: {paths}")
        for key, word in (("select_recompute_exclude", "select recompute"),
                          ("select_comm_recompute_exclude", "select comm recompute")):
            pats = getattr(lp, key)
            if pats:
                out.append(f"Set {word} exclude at layer {i}: "
                           + ", ".join(p for pat in pats for p in log_paths[pat]))
        if lp.layer_swap is not None:
            ls = plan.formative.get("layer_swap") or [{}]
            gap = 33 if ls[0].get("layers") is True else 29      # set_swap vs _set_layer_swap
            out.append(f"Set layer swap at layer {i}{' ' * gap}and value is: {lp.layer_swap}")
        if lp.op_swap:
            items = ", ".join(_op_item(pat, p, v) for pat, v in lp.op_swap.items() for p in log_paths[pat])
            out.append(f"Set op_swap at layer {i}: {items}")     # items lead with "." or " "
    return out


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


def header_messages(plan: Plan, recompute: dict, swap: dict, parallel: dict) -> List[str]:
    """``initial ... from dict``, the geometry lines and the Formative lines (reference §1.3, §2.1,
    §2.2, §3.4), as reprs: doubled backslashes in patterns, exactly as MindFormers prints them."""
    g = plan.geometry
    out = [f"initial swap_config from dict: {dict(SWAP_DEFAULTS, **swap)!r}",
           f"initial recompute_config from dict: {dict(RECOMPUTE_DEFAULTS, **recompute)!r}",
           f"initial parallel_config from dict: {parallel!r}",
           f"num_layers per stage: {g.layer_list!r}",
           f"Accumulated num_layers per stage: {g.layer_accu!r}",
           f"Pipeline id list with start_stage: {g.pp_ids!r}",
           f"Interleave id list: {g.interleave_ids!r}"]
    f = plan.formative
    out.append(f"Formative layer_recompute: {f.get('layer_recompute', [])!r}")
    out.append("The configuration of select_recompute_exclude and select_comm_recompute_exclude "
               "have the highest priority.")
    for key in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                "select_comm_recompute_exclude"):
        out.append(f"Formative {key}: {f.get(key, {})!r}")
    if plan.swap:
        out.append(f"Formative layer swap: {f.get('layer_swap', [])!r}")
        out.append(f"Formative op swap: {f.get('op_swap', {})!r}")
    return out


def worker_log(plan: Plan, header: Optional[List[str]] = None, steps: int = 2) -> str:
    """A whole worker log: noise, the strategy block, a few training steps."""
    msgs = list(header or []) + messages_for(plan, LOG_PATHS)
    lines = ["[WARNING] ME(4242:281473441098720,MainProcess):2025-07-24-10:00:00.610.000 "
             "[mindspore/context.py:907] For 'context.set_context', the parameter 'device_target' "
             "will be deprecated"]
    for n, m in enumerate(msgs):
        lines.append(PREFIX.format(s=1 + n // 1000 % 59, ms=n % 1000, line=400 + n % 50) + m)
    for s in range(1, steps + 1):
        lines.append(PREFIX.format(s=59, ms=s, line=529).replace("models/utils.py", "core/callback/callback.py")
                     + f"{{ Epoch:[  1/  1], step:[    {s}/    {steps}], loss: 10.{s:03d}, "
                     f"per_step_time: 1200ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, "
                     f"global_norm: [4.4]")
    return "\n".join(lines) + "\n"


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
