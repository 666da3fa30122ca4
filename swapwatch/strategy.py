"""MindFormers' recompute / swap semantics -> a per-layer Plan. THE one place for these semantics.

(Interface shell: the engine is being implemented; the public shapes below are fixed.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

Prefetch = Union[int, str]


@dataclass
class Geometry:
    """Where every layer sits: (interleave, stage) chunks, as MindFormers' LayerSetting computes them."""

    num_layers: int
    pipeline_stage: int
    pp_interleave_num: int
    offset: List[List[int]]          # V x P after broadcast
    layer_list: List[List[int]]      # layers per chunk, V x P
    layer_accu: List[List[int]]      # cumulative, row-major over chunks
    chunk_starts: List[List[int]]    # layer_accu_mod: start of chunk (v, p) is chunk_starts[v][p]
    pp_ids: List[int]                # stage of every layer
    interleave_ids: List[int]        # interleave of every layer
    start_stage: int = 0


@dataclass
class LayerPlan:
    """What MindFormers will *apply* at one layer (select patterns absent on fully recomputed layers)."""

    layer: int
    stage: int
    interleave: int
    full_recompute: bool = False
    select_recompute: List[str] = field(default_factory=list)
    select_comm_recompute: List[str] = field(default_factory=list)
    select_recompute_exclude: List[str] = field(default_factory=list)
    select_comm_recompute_exclude: List[str] = field(default_factory=list)
    layer_swap: Optional[Prefetch] = None
    op_swap: Dict[str, Prefetch] = field(default_factory=dict)
    swap_overridden: List[str] = field(default_factory=list)


@dataclass
class Plan:
    """The whole intended strategy: geometry, the Formative values, one LayerPlan per layer."""

    geometry: Geometry
    swap: bool
    formative: Dict[str, Any]
    layers: List[LayerPlan]
    findings: List[Any] = field(default_factory=list)
