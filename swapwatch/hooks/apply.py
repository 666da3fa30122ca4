"""Apply a swapwatch Plan to a MindSpore network's decoder layers, the way MindFormers does, and say so.

Why this exists: the only way to know what a recompute/swap config *really* does is to make the
same MindSpore calls MindFormers' ``LayerSetting`` makes, in the same order, on the same cell
names, and to record every call. :func:`apply` does exactly that for a :class:`~swapwatch.engine.strategy.Plan`
(the one engine decides *what*; this module only decides *how*):

* per layer, non-swap mode: full recompute, else select recompute ``on`` then comm recompute
  ``on``; then always select ``exclude`` and comm ``exclude`` (MindFormers
  ``parallel_core/training_graph/transformer/utils.py:LayerSetting.__call__``);
* per layer, swap mode: full recompute, else select then comm (no ``on``/``exclude`` wording),
  then the layer swap, then the op swaps (``LayerSetting.set_swap``);
* patterns are walked with :func:`swapwatch.model.patterns.walk` over the real cells (sub-cells in
  ``_cells`` order, primitives in ``dir()`` order), so what is touched is what MindFormers touches.

It logs the text lines MindFormers logs (``Set full recompute at layer 3`` ..., worded by
:mod:`swapwatch.model.setting_lines`), through a Python
logger with MindFormers' stdout prefix, so existing greps and the text parsers keep working; with
``quirks=True`` the lines keep MindFormers' whitespace runs and leading dots byte for byte. Next to
each line it logs one ``SWAPWATCH`` ``apply`` event carrying *every* path reached (MindFormers'
text keeps only the last leaf match), plus one ``plan`` event first. It returns what it applied.

MindSpore lets ``Cell.recompute()`` be configured once per cell (and not under a configured
parent); a config that asks twice fails there, as it would in MindFormers. Here the failure is an
:class:`ApplyError` naming the layer, the pattern and the path instead of a C++ stack.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Tuple

from ..model import actions, patterns
from ..engine import strategy
from ..config import load_config
from ..errors import InputError
from ..model.event_lines import format_event
from ..parsers.prefix import collapse
from . import env_rank, require_mindspore

#: MindFormers' stdout format (``mindformers/tools/logger.py:DEFAULT_STDOUT_FORMAT``): existing greps and
#: prefix regexes keep working.
MF_FORMAT = "%(asctime)s - %(name)s[%(filepath)s:%(lineno)d] - %(levelname)s - %(message)s"
LOGGER_NAME = "swapwatch"

class ApplyError(InputError):
    """The plan cannot be applied to this network (e.g. a cell would be recomputed twice)."""


# --------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------

class _FilepathFilter(logging.Filter):
    """Give every record the ``filepath`` field MindFormers' format needs (path from the last
    ``swapwatch`` in the caller's absolute path, as MindFormers does with ``mindformers``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "filepath"):
            path = record.pathname.replace(os.sep, "/")
            at = path.rfind("swapwatch/")
            record.filepath = path[at:] if at >= 0 else os.path.basename(path)
        return True


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is *now* (test capture, redirect_stdout), flushing each line."""

    def __init__(self):
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _value):
        pass


def get_logger(stream=None) -> logging.Logger:
    """The ``swapwatch`` logger: INFO to stdout with MindFormers' prefix, flushed per line.

    ``propagate`` is off (like MindFormers) so a user's root logging config neither duplicates
    nor silences these lines. A second call reuses the handler.
    """
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_swapwatch", False) for h in logger.handlers):
        handler = logging.StreamHandler(stream) if stream is not None else _StdoutHandler()
        handler.setFormatter(logging.Formatter(MF_FORMAT))
        handler.addFilter(_FilepathFilter())
        handler._swapwatch = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


# --------------------------------------------------------------------------------------------
# Walking real cells
# --------------------------------------------------------------------------------------------

class CellAdapter(patterns.TreeAdapter):
    """See a MindSpore Cell as MindFormers does: sub-cells from ``_cells`` (insertion order), leaf
    candidates = the primitives among ``dir(cell)`` (sorted)."""

    def children(self, node):
        return list(node._cells.items())

    def leaf_attrs(self, node):
        from mindspore.ops import Primitive

        prims = getattr(node, "_primitives", None) or {}
        out = []
        for name in dir(node):            # sorted, as MindFormers' walk sees it
            obj = prims.get(name)
            if isinstance(obj, Primitive):
                out.append((name, obj))
        return out


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

@dataclass
class Action:
    """One thing apply() did on one layer (the payload of one ``apply`` event)."""

    layer: int
    action: str                      # one of swapwatch.model.event_lines.ACTIONS
    pattern: Optional[str]
    paths: List[str]                 # every path reached, prims and cells
    value: Any                       # True/False for recompute marks, the prefetch for swaps
    cells: List[str] = field(default_factory=list)   # the subset of paths that are cells
    skipped_cells: List[str] = field(default_factory=list)


@dataclass
class Applied:
    """What :func:`apply` did: the actions, the text lines (messages only) and the event lines."""

    rank: int
    actions: List[Action] = field(default_factory=list)
    lines: List[str] = field(default_factory=list)
    events: List[str] = field(default_factory=list)

    def on_layer(self, layer: int) -> List[Action]:
        return [a for a in self.actions if a.layer == layer]


# --------------------------------------------------------------------------------------------
# apply()
# --------------------------------------------------------------------------------------------

def apply(layers: Iterable[Any], plan_or_config: Any, rank: Optional[int] = None, *,
          quirks: bool = False, logger: Optional[logging.Logger] = None,
          config_sha256: Optional[str] = None) -> Applied:
    """Apply ``plan_or_config`` to ``layers`` (decoder layers in global layer-id order).

    ``plan_or_config`` is a :class:`~swapwatch.engine.strategy.Plan`, a path to a training YAML, or a
    loaded config (both go through ``swapwatch.engine.strategy.plan``). ``rank`` defaults to the
    ``RANK_ID`` msrun exports (else 0). ``quirks=True`` reproduces MindFormers' whitespace runs
    and leading dots in the text lines. Raises :class:`ApplyError` when the network does not fit
    the plan.
    """
    require_mindspore("swapwatch.hooks.apply.apply()")
    plan, _, sha = _resolve_plan(plan_or_config)
    layers = list(layers)
    rank = env_rank() if rank is None else int(rank)
    log = logger or get_logger()
    out = Applied(rank=rank)
    if len(layers) != len(plan.layers):
        raise ApplyError(f"the network has {len(layers)} decoder layers but the plan has "
                         f"{len(plan.layers)} (num_layers in the config)")

    def info(msg: str, level: int = logging.INFO) -> None:
        log.log(level, msg)
        out.lines.append(msg)

    def event(kind: str, **fields: Any) -> None:
        line = format_event(kind, rank, **fields)
        log.info(line)
        out.events.append(line)

    geo = plan.geometry
    event("plan", num_layers=geo.num_layers, pipeline_stage=geo.pipeline_stage,
          pp_interleave_num=geo.pp_interleave_num, swap=bool(plan.swap),
          config_sha256=config_sha256 or sha, source="swapwatch")
    for level, msg in strategy.init_messages(plan):
        info(msg if quirks else collapse(msg), logging.WARNING if level == "WARNING" else logging.INFO)
    adapter = CellAdapter()
    for lp, cell in zip(plan.layers, layers):
        _apply_layer(adapter, cell, plan, lp, quirks, info, event, out)
    return out


#: What a walk in each mode does, as the ``apply`` event's action name.
_ACTION_OF_MODE = actions.ACTION_OF_MODE


def _apply_layer(adapter, cell, plan, lp, quirks: bool, info, event, out: Applied) -> None:
    """One layer: the MindSpore calls in MindFormers' order, then its text lines and events.

    The lines come from :func:`swapwatch.engine.strategy.layer_lines`, which walks the patterns through
    our walker over the real cells; every walk is recorded and its targets get the calls. Each line
    carries MindFormers' exact text and the normalised one (:mod:`swapwatch.model.setting_lines`).
    """
    i = lp.layer
    walks: List[Tuple[str, str, patterns.WalkResult]] = []

    def walker(pattern: str, mode: str) -> patterns.WalkResult:
        res = patterns.walk(adapter, cell, pattern, mode)
        walks.append((pattern, mode, res))
        return res

    def record(action: Action) -> None:
        out.actions.append(action)
        event("apply", layer=i, action=action.action, pattern=action.pattern, paths=action.paths,
              value=action.value, **({"cells": action.cells} if action.cells else {}),
              **({"skipped_cells": action.skipped_cells} if action.skipped_cells else {}))

    lines = strategy.layer_lines(plan, lp, walker)
    if lp.full_recompute:
        _call(lambda: cell.recompute(), i, None, "<layer>", "full recompute")
        record(Action(i, "full_recompute", None, [], True))
    swaps = [w for w in walks if w[1] == "swap"]
    for pattern, mode, res in (w for w in walks if w[1] != "swap"):
        on = mode in ("recompute", "comm")
        for t in res.targets:
            _mark(t, mode, on, i, pattern)
        if res.targets:      # a skipped cell did nothing: its INFO line says so, no event
            record(Action(i, _ACTION_OF_MODE[mode], pattern, [t.path for t in res.targets], on,
                          cells=[t.path for t in res.targets if t.kind == "cell"],
                          skipped_cells=list(res.skipped_cells)))
    if lp.layer_swap is not None:
        p = lp.layer_swap
        _call(lambda: cell.offload(backward_prefetch=p), i, None, "<layer>", "layer swap")
        record(Action(i, "layer_swap", None, [], p))
    for pattern, _, res in swaps:
        p = lp.op_swap[pattern]
        for t in res.targets:
            if t.kind == "prim":
                _call(lambda: t.obj._offload(backward_prefetch=p), i, pattern, t.path, "op swap")  # noqa: B023
            else:
                _call(lambda: t.obj.offload(backward_prefetch=p), i, pattern, t.path, "op swap")  # noqa: B023
        if res.targets:
            record(Action(i, "op_swap", pattern, [t.path for t in res.targets], p,
                          cells=[t.path for t in res.targets if t.kind == "cell"]))
    for line in lines:
        info(line.text if quirks else line.plain, logging.WARNING if line.level == "WARNING" else logging.INFO)


def _mark(target: patterns.Target, mode: str, on: bool, layer: int, pattern: str) -> None:
    """The one MindSpore call a select pass makes on one target."""
    obj = target.obj
    if mode in ("comm", "comm_exclude"):
        _call(lambda: obj.add_prim_attr("recompute_comm_op", on), layer, pattern, target.path, "comm recompute")
    elif target.kind == "cell":
        _call(lambda: obj.recompute(), layer, pattern, target.path, "select recompute")
    else:
        _call(lambda: obj.recompute(on), layer, pattern, target.path, "select recompute")


def _call(fn, layer: int, pattern: Optional[str], path: str, what: str) -> None:
    try:
        fn()
    except (RuntimeError, TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"pattern {pattern!r} -> {path}" if pattern else "the whole layer"
        raise ApplyError(f"layer {layer}: {what} on {where} failed in MindSpore: {first}") from None


# --------------------------------------------------------------------------------------------
# Plan resolution
# --------------------------------------------------------------------------------------------

def _resolve_plan(obj: Any) -> Tuple[Any, Any, Optional[str]]:
    """``(plan, config, sha256)``: a Plan as is (no config, no hash); a YAML path or a loaded config
    through the one strategy engine (a Plan keeps no config: callers that need it get it here)."""
    from ..engine.strategy import Plan

    if isinstance(obj, Plan):
        return obj, None, None
    sha = None
    cfg = obj
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        try:
            with open(path, "rb") as fh:
                sha = hashlib.sha256(fh.read()).hexdigest()
        except OSError as exc:
            raise InputError(f"cannot read config: {exc.strerror}", file=path) from None
        cfg = load_config(path)
    return strategy.plan(cfg), cfg, sha


class Example:
    """What the example trainer (``swapwatch/examples/train.py``) needs of a LayerSetting YAML
    (``codepaths.LayerSetting.example``): the plan, its layer count, and the plan applied with :func:`apply`
    (MindFormers' ``initial ... from dict`` lines logged first, as ``build_parallel_config`` does)."""

    mode: Optional[str] = None
    layers_key = "num_layers"

    def __init__(self, config: str, log: Any) -> None:
        self.plan, cfg, self.sha256 = _resolve_plan(config)
        self.num_layers: int = self.plan.geometry.num_layers
        for key in ("swap_config", "recompute_config"):
            log.info(f"initial {key} from dict: {getattr(cfg, key)!r}")

    def apply(self, layers: Any, rank: int, quirks: bool, log: Any) -> None:
        apply(layers, self.plan, rank=rank, quirks=quirks, config_sha256=self.sha256)
