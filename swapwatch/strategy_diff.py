"""What changes between two strategies, layer by layer and stage by stage: the library behind
``swapwatch diff A B`` and the report's diff section (its renderer is :mod:`swapwatch.diff_render`).

The question behind it: "I changed ``recompute: [6, 4, 2, 0]`` to ``[4, 4, 2, 0]``; which layers
stop being fully recomputed, on which stage?" For two YAMLs both sides are the plan MindFormers
will apply (:func:`swapwatch.explain.explain`, so the family and the layout are the ones explain
uses); for two runs (run dirs, msrun log dirs, worker logs) both sides are what the log of one rank
says was applied (the lowest rank with strategy lines). A config against a run is what
``swapwatch verify`` answers, so it is refused with that advice: the two sides would speak in
different words (the paths a pattern reaches vs the paths MindFormers logs).

Each side's cells are the words every per-layer table shares (:mod:`swapwatch.layer_table`): differing
cells read ``✗ A → B``; :func:`stage_changes` says per stage what changed, in words the table, the JSON
document and the HTML report all show. Exit 0 same, 1 differ, 2 bad input (DESIGN §3.1).
"""
from __future__ import annotations

import os
import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import actions, layer_table, paths, run_shape
from .errors import InputError


@dataclass
class Side:
    """One side of a diff: a config's plan or a run's applied strategy, per layer."""

    path: str
    kind: str                                   # "config" | "run"
    cells: Dict[int, Dict[str, str]]            # layer -> column texts (layer_table words)
    stages: Dict[int, Tuple[Optional[int], int]]    # layer -> (stage or None: not decided, interleave)
    shape: Dict[str, int]
    swap: Optional[bool] = None
    rank: Optional[int] = None                  # runs: the rank whose log is read
    note: str = ""
    pynative: bool = False                      # a PyNative (r2.x) config: apply_ac's semantics

    def describe(self) -> str:
        what = f"{self.kind}"
        if self.rank is not None:
            what += f", rank {self.rank}"
        n = self.shape.get("num_layers", len(self.cells))
        bits = [f"{n} layers", f"pipeline_stage {self.shape.get('pipeline_stage', '?')}"]
        if self.swap is not None:
            bits.append("swap ON" if self.swap else "swap off")
        return f"{self.path} ({what}: {', '.join(bits)}){self.note}"


@dataclass
class LayerDiff:
    layer: int
    stage: str
    a: Dict[str, str]
    b: Dict[str, str]
    cells: Dict[str, str]                       # equal text, or "✗ a → b"
    differs: List[str] = field(default_factory=list)


@dataclass
class DiffResult:
    a: Side
    b: Side
    layers: List[LayerDiff]
    shape: List[str]                            # "layers 32 vs 4", ...
    #: two configs that both estimate: per stage (stage, A peak, B peak, A recompute FLOPs, B ...)
    estimates: List[Tuple[int, int, int, float, float]] = field(default_factory=list)
    estimate_note: str = ""                     # why there are none, for two configs

    @property
    def same(self) -> bool:
        return not self.shape and not any(ld.differs for ld in self.layers) and self.a.swap == self.b.swap

    @property
    def exit_code(self) -> int:
        return 0 if self.same else 1


# ---------------------------------------------------------------------------------------------
# Reading the two sides
# ---------------------------------------------------------------------------------------------

def is_config(path: str) -> bool:
    """A ``.yaml`` file, or a pipe (``diff <(git show HEAD~1:x.yaml) x.yaml``): a run is a directory
    or log files. The pipe is read once (``config.read_config_bytes``), whoever reads it next."""
    if os.path.isfile(path):
        return os.path.splitext(path)[1].lower() in (".yaml", ".yml")
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def config_side(path: str) -> Side:
    """A config's side, read through the plan's view (``plan_view.PlanView``: the same for every code path)."""
    from .explain import explain

    ex = explain(path)
    plan = ex.plan
    ids = [lp.layer for lp in plan.layers]
    return Side(path=path, kind="config", cells={i: plan.table_cells(i) for i in ids},
                stages={i: plan.stage_of(i) for i in ids}, shape=ex.shape(), swap=plan.swap_on,
                note=plan.path_note, pynative=plan.global_layer_ids)


def run_side(path: str) -> Side:
    from .compare import seen_items
    from .parsers import read_logs

    runlog = read_logs([path])
    if not runlog.ranks:
        raise InputError("no worker logs found here (expected worker_*.log, a run dir, or log files)",
                         file=path)
    ranks = sorted(runlog.ranks)
    seen = None
    rank = ranks[0]
    for r in ranks:
        items = seen_items(runlog.ranks[r])
        if any(items.values()):
            rank, seen = r, items
            break
    if seen is None:
        raise InputError("no strategy lines (Set ... at layer N) in these logs: nothing to compare",
                         file=path)
    geo = runlog.ranks[rank].geometry()
    pp_ids, inter_ids = geo.get("pp_ids") or [], geo.get("interleave_ids") or []
    shape = run_shape.run_shape(runlog)
    n = shape.get("num_layers") or (max(seen) + 1 if seen else 0)
    layers = range(max(n, max(seen) + 1 if seen else 0))
    stages = {i: (pp_ids[i] if i < len(pp_ids) else None, inter_ids[i] if i < len(inter_ids) else 0)
              for i in layers}
    swap = _logged_swap(runlog.ranks[rank])
    note = f"; {len(ranks)} ranks, the map is rank {rank}'s" if len(ranks) > 1 else ""
    return Side(path=path, kind="run", rank=rank, shape=shape, swap=swap, note=note, stages=stages,
                cells={i: layer_table.logged_cells(seen.get(i, [])) for i in layers})


def _logged_swap(rank_log: Any) -> Optional[bool]:
    section = rank_log.initial_config().get("swap_config")
    if isinstance(section, dict) and "swap" in section:
        return bool(section["swap"])
    return None


def side(path: str) -> Side:
    if not os.path.exists(path):
        raise InputError("no such file or directory", file=path)
    return config_side(path) if is_config(path) else run_side(path)


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------

def diff(path_a: str, path_b: str) -> DiffResult:
    """Compare two configs or two runs. InputError (exit 2) for a missing path, a bad config, or
    a config against a run."""
    for p in (path_a, path_b):
        if not os.path.exists(p):
            raise InputError("no such file or directory", file=p)
    if is_config(path_a) != is_config(path_b):
        cfg, run = (path_a, path_b) if is_config(path_a) else (path_b, path_a)
        raise InputError(f"{cfg} is a config and {run} a run: `swapwatch diff` compares two configs "
                         f"or two runs; to check a run against a config use "
                         f"`swapwatch verify {run} --config {cfg}`")
    if is_config(path_a):
        mixed = paths.mixed_pair(path_a, path_b)        # a PyNative YAML against a LayerSetting one
        if mixed:
            raise InputError(mixed)
    a, b = side(path_a), side(path_b)
    interleaved = any(v for _, v in a.stages.values()) or any(v for _, v in b.stages.values())
    layers: List[LayerDiff] = []
    for layer in sorted(set(a.cells) | set(b.cells)):
        ca, cb = a.cells.get(layer, {}), b.cells.get(layer, {})
        cells, differs = layer_table.pairs(ca, cb)
        sa = layer_table.stage_label(*a.stages.get(layer, (None, 0)), interleaved)
        sb = layer_table.stage_label(*b.stages.get(layer, (None, 0)), interleaved)
        stage = sa if sa == sb else f"{layer_table.DIFF} {sa} → {sb}"
        if layer not in a.cells or layer not in b.cells:
            differs = differs or ["layer"]
        layers.append(LayerDiff(layer, stage, ca, cb, cells, differs))
    result = DiffResult(a, b, layers, run_shape.differences([a.shape, b.shape]))
    if a.kind == b.kind == "config":
        result.estimates, result.estimate_note = estimate_lines(path_a, path_b)
    return result


def estimate_lines(path_a: str, path_b: str) -> Tuple[List[Tuple[int, int, int, float, float]], str]:
    """Predicted peak and recompute cost per stage of both configs (the memory model, through
    ``swapwatch.tune.memory_api``), or ([], why not) when either cannot be estimated."""
    from .tune.memory_api import predict

    try:
        pa, pb = predict(path_a, command="diff"), predict(path_b, command="diff")
    except InputError as exc:
        return [], f"no memory estimate: {exc.one_line()}"
    if len(pa) != len(pb):
        return [], "no memory estimate side by side: the pipeline stages differ"
    return [(x.stage, x.peak_bytes, y.peak_bytes, x.recompute_flops, y.recompute_flops) for x, y in zip(pa, pb)], ""


# ---------------------------------------------------------------------------------------------
# What changed, in words (the table, the JSON document and the HTML report show these)
# ---------------------------------------------------------------------------------------------

def kind(cells: Dict[str, str]) -> str:
    """A layer's strategy in a word or two: ``full``, ``select``, ``select+swap``, ``none``."""
    if cells.get("full_recompute"):
        parts = ["full"]
    else:
        parts = [w for a, w in (("select_recompute", "select"), ("select_comm_recompute", "comm"))
                 if cells.get(a)]
    if any(cells.get(a) for a in actions.SWAP_ACTIONS):
        parts.append("swap")
    return "+".join(parts) or "none"


def stage_changes(result: DiffResult) -> List[str]:
    """Per stage of A, the changed layers grouped by what they change from and to, e.g.
    ``stage 0: layers 4-5 full → none``; ``stage 2: no change``."""
    by_stage: "OrderedDict[str, List[LayerDiff]]" = OrderedDict()
    for ld in sorted(result.layers, key=lambda x: (_stage_key(result, x.layer), x.layer)):
        by_stage.setdefault(_stage_name(result, ld.layer), []).append(ld)
    out = []
    for stage, lds in by_stage.items():
        changes: "OrderedDict[str, List[int]]" = OrderedDict()
        for ld in lds:
            if not ld.differs:
                continue
            ka, kb = kind(ld.a), kind(ld.b)
            if ld.layer not in result.a.cells:
                what = "only in B"
            elif ld.layer not in result.b.cells:
                what = "only in A"
            elif ka != kb:
                what = f"{ka} → {kb}"
            else:
                cols = ", ".join(layer_table.COLUMNS[a] for a in ld.differs if a in layer_table.COLUMNS)
                what = f"{ka}: {cols} differ"
            changes.setdefault(what, []).append(ld.layer)
        if not changes:
            out.append(f"{stage}: no change")
        else:
            out.append(f"{stage}: " + "; ".join(
                f"{'layer' if len(ls) == 1 else 'layers'} {layer_table.ranges(ls)} {what}"
                for what, ls in changes.items()))
    return out


def _stage_key(result: DiffResult, layer: int) -> Tuple[int, int]:
    st, inter = result.a.stages.get(layer) or result.b.stages.get(layer) or (None, 0)
    return (st if st is not None else 1 << 30, inter or 0)


def _stage_name(result: DiffResult, layer: int) -> str:
    st, _ = result.a.stages.get(layer) or result.b.stages.get(layer) or (None, 0)
    return "stage ?" if st is None else f"stage {st}"
