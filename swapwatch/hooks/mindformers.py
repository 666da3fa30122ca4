"""Opt-in shim: MindFormers' own ``LayerSetting`` also emits SWAPWATCH events, with no change to user code.

Why: a MindFormers user's job already applies the strategy; swapwatch should observe *that*, not a
re-implementation. ``swapwatch run --mindformers-shim`` puts ``hooks/sitecustomize_dir`` on
``PYTHONPATH`` and sets ``SWAPWATCH_MINDFORMERS_SHIM=1``; the ``sitecustomize`` there calls
:func:`install`, which waits for either LayerSetting module to be imported
(``mindformers.parallel_core.training_graph.transformer.utils`` in 1.7+/2.x, legacy
``mindformers.models.utils``) and wraps ``LayerSetting.__call__``.

The wrapper does not re-derive any decision. It snapshots the layer's ground truth before and after
MindFormers' call (cells in a ``recompute_`` scope, and the ``recompute`` / ``recompute_comm_op`` /
``offload`` / ``backward_prefetch`` attributes of every primitive) and emits one ``apply`` event per
kind of change, with every path reached. So the events say what MindFormers *did*, whatever its
version, including the leaf matches its text lines under-report. One ``plan`` event
(``source: "mindformers"``) precedes the first layer of each LayerSetting instance. Any failure in
the shim is reported on stderr once and never breaks the training job.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..model.patterns import under

TARGETS = ("mindformers.parallel_core.training_graph.transformer.utils", "mindformers.models.utils")
_PRIM_KEYS = ("recompute", "recompute_comm_op", "offload", "backward_prefetch")
_installed = False


# --------------------------------------------------------------------------------------------
# Ground truth of one layer
# --------------------------------------------------------------------------------------------

def snapshot(layer: Any) -> Tuple[Dict[str, bool], Dict[str, Dict[str, Any]]]:
    """(cell path -> in a recompute scope, prim path -> the strategy attributes it carries)."""
    cells: Dict[str, bool] = {}
    prims: Dict[str, Dict[str, Any]] = {}
    for name, cell in layer.cells_and_names():
        scope = getattr(cell, "_scope", None) or ""
        cells[name] = scope.startswith("recompute_")
        for pname, prim in (getattr(cell, "_primitives", None) or {}).items():
            if prim is None:
                continue
            attrs = getattr(prim, "attrs", {}) or {}
            prims[f"{name}.{pname}" if name else pname] = {k: attrs[k] for k in _PRIM_KEYS if k in attrs}
    return cells, prims


def diff(before, after) -> List[Dict[str, Any]]:
    """The ``apply`` events (without layer/rank) that explain ``before`` -> ``after``."""
    cells0, prims0 = before
    cells1, prims1 = after
    out: List[Dict[str, Any]] = []
    new_cells = [c for c in cells1 if cells1[c] and not cells0.get(c)]
    roots = [c for c in new_cells if not any(under(c, o, strict=True) for o in new_cells if o != c)]
    if "" in roots:
        out.append({"action": "full_recompute", "pattern": None, "paths": [], "value": True})
        roots = []

    def changed(key: str, value: Any) -> List[str]:
        return [p for p, a in prims1.items() if a.get(key) == value and prims0.get(p, {}).get(key) != value]

    sel = roots + [p for p in changed("recompute", True) if not any(under(p, r, strict=True) for r in roots)]
    for action, paths, value in (("select_recompute", sel, True),
                                 ("select_comm_recompute", changed("recompute_comm_op", True), True),
                                 ("select_recompute_exclude", changed("recompute", False), False),
                                 ("select_comm_recompute_exclude", changed("recompute_comm_op", False), False)):
        if paths:
            ev = {"action": action, "pattern": None, "paths": paths, "value": value}
            if action == "select_recompute" and roots:
                ev["cells"] = roots
            out.append(ev)
    offloaded = {p: prims1[p].get("backward_prefetch", "Auto") for p in changed("offload", True)}
    if offloaded and len(offloaded) == len(prims1) and len(set(map(str, offloaded.values()))) == 1:
        out.append({"action": "layer_swap", "pattern": None, "paths": [], "value": next(iter(offloaded.values()))})
    elif offloaded:
        by_value: Dict[str, List[str]] = {}
        for p, v in offloaded.items():
            by_value.setdefault(str(v), []).append(p)
        for v, paths in by_value.items():
            compact = _compact(paths, prims1)
            ev = {"action": "op_swap", "pattern": None, "paths": compact, "value": _num(v)}
            cells = [c for c in compact if c not in prims1]
            if cells:
                ev["cells"] = cells
            out.append(ev)
    return out


def _compact(paths: List[str], all_prims: Dict[str, Any]) -> List[str]:
    """Prim paths -> the outermost cells all of whose primitives are in ``paths`` (what
    ``cell.offload`` reached), plus the remaining single primitives."""
    chosen = set(paths)
    cells = sorted({p.rsplit(".", 1)[0] for p in paths if "." in p}, key=lambda c: c.count("."))
    out: List[str] = []
    covered: set = set()
    for c in cells:
        if any(under(c, o, strict=True) for o in out):
            continue
        mine = [p for p in all_prims if under(p, c, strict=True)]
        if mine and all(p in chosen for p in mine):
            out.append(c)
            covered.update(mine)
    return out + [p for p in paths if p not in covered]


def _num(v: str) -> Any:
    return int(v) if v.lstrip("-").isdigit() else v


# --------------------------------------------------------------------------------------------
# Wrapping LayerSetting
# --------------------------------------------------------------------------------------------

def patch_module(mod: Any) -> bool:
    """Wrap ``mod.LayerSetting.__call__`` once; True when patched."""
    cls = getattr(mod, "LayerSetting", None)
    if cls is None or getattr(cls.__call__, "_swapwatch", False):
        return False
    original = cls.__call__

    @functools.wraps(original)
    def __call__(self, layer, layer_id, *args, **kwargs):
        try:
            before = snapshot(layer)
        except Exception as exc:  # noqa: BLE001 - observing must never break training
            _warn(exc)
            return original(self, layer, layer_id, *args, **kwargs)
        result = original(self, layer, layer_id, *args, **kwargs)
        try:
            _after(self, layer_id, before, snapshot(layer), mod.__name__)
        except Exception as exc:  # noqa: BLE001
            _warn(exc)
        return result

    __call__._swapwatch = True  # type: ignore[attr-defined]
    cls.__call__ = __call__
    return True


def _after(setting: Any, layer_id: Any, before, after, module: str) -> None:
    from ..model.event_lines import format_event
    from . import emit, env_rank

    rank = env_rank()
    if not getattr(setting, "_swapwatch_plan_sent", False):
        setting._swapwatch_plan_sent = True
        swap_cfg = getattr(setting, "swap", None)
        emit(format_event("plan", rank, num_layers=_int(getattr(setting, "num_layers", None)),
                           pipeline_stage=_int(getattr(setting, "pp", None)),
                           pp_interleave_num=_int(getattr(setting, "pp_interleave_num", None)),
                           swap=bool(getattr(swap_cfg, "swap", swap_cfg)) if swap_cfg is not None else None,
                           config_sha256=None, source="mindformers", module=module))
    for ev in diff(before, after):
        emit(format_event("apply", rank, layer=_int(layer_id), **ev))


def _int(v: Any) -> Optional[int]:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


_warned = False


def _warn(exc: BaseException) -> None:
    global _warned
    if not _warned:
        _warned = True
        print(f"swapwatch shim: observing LayerSetting failed ({type(exc).__name__}: {exc}); "
              "training continues without SWAPWATCH events", file=sys.stderr, flush=True)


class _Finder(importlib.abc.MetaPathFinder):
    """Patch the LayerSetting modules right after they are executed."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        try:
            patch_module(module)
        except Exception as exc:  # noqa: BLE001
            _warn(exc)


def install() -> None:
    """Patch now if a LayerSetting module is already imported, and on import otherwise."""
    global _installed
    if _installed:
        return
    _installed = True
    for name in TARGETS:
        if name in sys.modules:
            patch_module(sys.modules[name])
    sys.meta_path.insert(0, _Finder())
