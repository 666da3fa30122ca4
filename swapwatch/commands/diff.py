"""What changes between two strategies, layer by layer and stage by stage: the library behind
``swapwatch diff A B`` and the report's diff section (its renderer is :mod:`swapwatch.report.diff`).

The question behind it: "I changed ``recompute: [6, 4, 2, 0]`` to ``[4, 4, 2, 0]``; which layers
stop being fully recomputed, on which stage?" For two YAMLs both sides are the plan MindFormers
will apply (:func:`swapwatch.commands.explain.explain`, so the family and the layout are the ones explain
uses); for two runs (run dirs, msrun log dirs, worker logs) both sides are what the log of one rank
says was applied (the lowest rank with strategy lines). A config against a run is what
``swapwatch verify`` answers, so it is refused with that advice: the two sides would speak in
different words (the paths a pattern reaches vs the paths MindFormers logs).

Each side's cells are the words every per-layer table shares (:mod:`swapwatch.report.layer_table`): differing
cells read ``✗ A → B``; ``report.diff.stage_changes`` says per stage what changed, in words the table, the JSON
document and the HTML report all show. Exit 0 same, 1 differ, 2 bad input (DESIGN §3.1).
"""
from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, List, Optional, Tuple

from ..model import run_shape
from ..engine import codepaths
from ..model.results import DiffResult, LayerDiff, Side  # noqa: F401  (the result, re-exported)
from ..report import layer_table
from ..errors import InputError

if TYPE_CHECKING:
    from ..parsers.model import RankLog


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
    ids = [layer for layer, mtp in plan.all_layers() if not mtp]
    return Side(path=path, kind="config", cells={i: layer_table.cells(plan, i) for i in ids},
                stages={i: plan.stage_of(i) for i in ids}, shape=ex.shape, swap=plan.swap_on,
                note=plan.path_note, swap_keys_become_ids=plan.swap_keys_become_ids,
                voided_legend=plan.voided_legend)


def run_side(path: str) -> Side:
    from ..engine.compare import seen_items
    from ..parsers import read_logs

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


def _logged_swap(rank_log: "RankLog") -> Optional[bool]:
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
        mixed = codepaths.mixed_pair(path_a, path_b)        # a PyNative YAML against a LayerSetting one
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
    from ..tune.memory_api import predict

    try:
        pa, pb = predict(path_a, command="diff"), predict(path_b, command="diff")
    except InputError as exc:
        return [], f"no memory estimate: {exc.one_line()}"
    if len(pa) != len(pb):
        return [], "no memory estimate side by side: the pipeline stages differ"
    return [(x.stage, x.peak_bytes, y.peak_bytes, x.recompute_flops, y.recompute_flops) for x, y in zip(pa, pb)], ""
