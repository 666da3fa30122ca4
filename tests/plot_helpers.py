"""Hand-built RunLogs and Plans for the plot tests, and checks on written image files.

Why hand-built: the plots must draw exactly the parsed numbers, so the tests construct the events
with known values and compare what was drawn against them. Real run directories are covered by
``test_plot_real.py`` on the committed fixture.
"""
from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional

from swapwatch.parsers.model import ActionEvent, GeometryEvent, MemoryEvent, NoticeEvent, RankLog, RunLog
from swapwatch.engine.strategy import Geometry, LayerPlan, Override, Plan

MB = 2 ** 20
PNG_SIG = b"\x89PNG\r\n\x1a\n"


def step_bytes(rank: int, step: int, base_mb: float, outlier: Optional[int] = None) -> int:
    """Deterministic per-step reading: grows 3 MB a step, ranks differ a little, one may stand out."""
    mb = base_mb + 3 * step + 0.25 * (rank % 4) + (0.3 * base_mb if rank == outlier else 0)
    return int(mb * MB)


def make_run(label: str, nranks: int = 2, steps: int = 5, base_mb: float = 500.0, strategy: str = None,
             metric: str = "max_memory_allocated", peak_mb: Optional[int] = None, frag_mb: int = 10,
             family: str = "cpu", outlier: Optional[int] = None) -> RunLog:
    """A RunLog with per-step memory events on every rank and, optionally, whole-run peak figures."""
    info = {"config": {"path": f"/x/configs/{strategy}.yaml", "sha256": "0"}} if strategy else {}
    rl = RunLog(label=label, run_info=info, expected_ranks=list(range(nranks)))
    for r in range(nranks):
        rk = RankLog(rank=r, files=[f"{label}/worker_{r}.log"])
        for s in range(steps):
            rk.events.append(MemoryEvent(rank=r, source=f"worker_{r}.log:{10 + s}", metric=metric,
                                         bytes=step_bytes(r, s, base_mb, outlier), step=s, origin="swapwatch"))
        if peak_mb is not None:
            used_m, actual_m = ("pool_peak", "pool_actual_peak") if family == "cpu" else ("used_peak", "actual_peak")
            used = peak_mb + r % 3 + (int(0.3 * peak_mb) if r == outlier else 0)
            rk.events.append(MemoryEvent(rank=r, source=f"worker_{r}.log:90", metric=used_m, bytes=used * MB))
            rk.events.append(MemoryEvent(rank=r, source=f"worker_{r}.log:91", metric=actual_m,
                                         bytes=(used + frag_mb) * MB))
        rl.ranks[r] = rk
    return rl


def make_plan(n: int = 8, stages: int = 2) -> Plan:
    """8 layers, 2 stages: full recompute on 0-1, select elsewhere, comm on 6, op swap on 4-7,
    a layer swap on layer 1 that full recompute overrides."""
    per = n // stages
    pp = [i // per for i in range(n)]
    geo = Geometry(n, stages, 1, [[0] * stages], [[per] * stages], [[per * (i + 1) for i in range(stages)]],
                   [[per * i for i in range(stages)]], pp, [0] * n)
    layers: List[LayerPlan] = []
    for i in range(n):
        lp = LayerPlan(i, pp[i], 0)
        if i in (0, 1):
            lp.full_recompute = True
        else:
            lp.select_recompute = [r"feed_forward\.mul"] + ([r"feed_forward\.w1\.activation\.silu"] if i % 2 else [])
        if i >= 4:
            lp.op_swap = {r".*\.flash_attention": 2}
        if i == 1:
            lp.layer_swap = 1
            lp.swap_overridden = [Override.whole_layer("the whole layer is recomputed")]
        if i == 6:
            lp.select_comm_recompute = [r".*\.norm"]
        layers.append(lp)
    return Plan(geo, True, {}, layers)


PATHS = {r"feed_forward\.mul": "feed_forward.mul",
         r"feed_forward\.w1\.activation\.silu": "feed_forward.w1.activation.silu"}


def make_strategy_log(plan: Plan, drop_select_at: Optional[int] = None, prefetch_at: Dict[int, int] = None,
                      rank: int = 0) -> RunLog:
    """What MindFormers would log for ``plan`` on one rank, optionally with a missing line / other prefetch."""
    prefetch_at = prefetch_at or {}
    rl = RunLog(label="run-x", run_info={"config": {"path": "/x/swap_case.yaml"}})
    rk = RankLog(rank=rank)
    rk.events.append(GeometryEvent(rank, "w:1", what="pp_ids", value=plan.geometry.pp_ids))
    k = 2
    for lp in plan.layers:
        def add(**kw):
            nonlocal k
            rk.events.append(ActionEvent(rank, f"worker_{rank}.log:{k}", layer=lp.layer, **kw))  # noqa: B023 - called within this iteration
            k += 1
        if lp.full_recompute:
            add(action="full_recompute")
        sel = [PATHS[p] for p in lp.select_recompute]
        if sel and lp.layer != drop_select_at:
            add(action="select_recompute", paths=sel)
        if lp.select_comm_recompute:
            add(action="select_comm_recompute", paths=["ffn_norm.norm", "attention_norm.norm"])
        if lp.layer_swap is not None:
            add(action="layer_swap", value=lp.layer_swap)
        if lp.op_swap:
            v = prefetch_at.get(lp.layer, 2)
            add(action="op_swap", paths=["attention.flash_attention"], values={"attention.flash_attention": v})
    rk.events.append(NoticeEvent(rank, f"worker_{rank}.log:{k}", what="swap_conflict", data={"op": "All", "layer": 1}))
    rl.ranks[rank] = rk
    return rl


# ---- file checks ------------------------------------------------------------------------------

def png_size(path) -> tuple:
    """(width, height) from the IHDR chunk; asserts the PNG signature."""
    data = open(path, "rb").read(32)
    assert data[:8] == PNG_SIG, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_texts(path) -> List[str]:
    """Every text string in an SVG (parses it as XML, so a broken file fails here)."""
    root = ET.parse(str(path)).getroot()
    assert root.tag.endswith("svg")
    return ["".join(t.itertext()) for t in root.iter() if t.tag.endswith("text")]


def lines_by_gid(fig) -> Dict[str, object]:
    return {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}


def patches_by_gid(fig) -> Dict[str, object]:
    return {p.get_gid(): p for ax in fig.axes for p in ax.patches if p.get_gid()}
