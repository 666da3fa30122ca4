"""LayerSetting and config lines -> events: geometry, Formative, initial-from-dict, Set ..., notices.

This is the one place that knows what a ``Set ...`` line means (``LayerSetting.set_recompute``,
``set_pattern_recompute``, ``set_swap``, ``set_pattern_swap``; docs/mindspore-facts.md §1.3):
the action word (``on``/``exclude``/``off``/none), the path-list syntax of select lines, and the
op_swap item syntax with its spacing quirks (``.name, value=p`` for one-segment patterns,
`` path, value=p`` with a leading space for multi-segment ones, several paths of one pattern sharing
one ``value=``). Paths come out normalised: dotted, no leading dot or space.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..model.event_lines import ACTIONS
from .grammar import LAYERSETTING, CONFIG_ERRORS
from .model import ActionEvent, Event, FormativeEvent, GeometryEvent, InitialConfigEvent, NoticeEvent
from .values import literal, scalar

_ROWS = [(r.name, re.compile(r.regex)) for r in LAYERSETTING]
_CONFIG_ERRORS = [(name, re.compile(rx)) for name, rx in CONFIG_ERRORS]
#: Cheap first-word gate: a message can only match rows whose words it contains.
_KEYWORDS = ("num_layers", " id list", "Formative ", " from dict", "Set ", "The pattern ", "For ", "operator",
             "All layers", "Current MindSpore", "The input config", "Please check and fix it")


def split_paths(ops: str) -> List[str]:
    """``'feed_forward.w1.activation.silu, feed_forward.mul'`` -> normalised paths (no leading dot/space)."""
    return [p.strip().lstrip(".").strip() for p in ops.split(",") if p.strip().lstrip(".").strip()]


def parse_op_swap_items(ops: str) -> Tuple[List[str], Dict[str, Any]]:
    """Items of a ``Set op_swap`` line -> (paths in order, {path: prefetch}).

    Every ``value=`` token closes the paths listed since the previous one: a multi-segment pattern
    with several inner matches logs ``a.x, b.x, value=1`` and both get 1. A path left without a
    value (line cut off) is kept in ``paths`` only.
    """
    paths: List[str] = []
    values: Dict[str, Any] = {}
    pending: List[str] = []
    for tok in ops.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok.startswith("value="):
            v = scalar(tok[6:])
            for p in pending:
                values[p] = v
            pending = []
            continue
        p = tok.lstrip(".").strip()
        if p:
            paths.append(p)
            pending.append(p)
    return paths, values


def config_error(text: str) -> Optional[str]:
    """The name of the MindFormers check a message comes from, or None."""
    for name, rx in _CONFIG_ERRORS:
        if rx.search(text):
            return name
    return None


def parse(msg: str, rank: Optional[int], source: str) -> Optional[Event]:
    """One collapsed MindFormers message -> its event, or None when it is no LayerSetting/config line."""
    if not any(k in msg for k in _KEYWORDS):
        return None
    for name, rx in _ROWS:
        m = rx.match(msg)
        if m:
            try:
                return _build(name, m, rank, source)
            except ValueError:   # a number past Python's 4,300-digit limit: no layer id of any run
                return None
    return None


def _build(name: str, m: "re.Match", rank: Optional[int], source: str) -> Event:
    g = m.groupdict()
    if name in ("layer_list", "layer_accu", "pp_ids", "interleave_ids"):
        return GeometryEvent(rank, source, what=name, value=literal(g["v"]))
    if name == "formative":
        return FormativeEvent(rank, source, key=g["k"], value=literal(g["v"]))
    if name == "initial":
        return InitialConfigEvent(rank, source, section=g["k"], value=literal(g["v"]))
    if name == "full_recompute":
        return ActionEvent(rank, source, layer=int(g["layer"]), action="full_recompute")
    if name == "select":
        comm = "comm_" if g["comm"] else ""
        word = g["word"]
        action = f"select_{comm}recompute" + ("_exclude" if word in ("exclude", "off") else "")
        return ActionEvent(rank, source, layer=int(g["layer"]), action=action, paths=split_paths(g["ops"]),
                           swap_mode=word is None)
    if name == "layer_swap":
        return ActionEvent(rank, source, layer=int(g["layer"]), action="layer_swap", value=scalar(g["v"]),
                           swap_mode=True)
    if name == "op_swap":
        paths, values = parse_op_swap_items(g["ops"])
        vals = set(map(repr, values.values()))
        value = next(iter(values.values())) if len(vals) == 1 else None
        return ActionEvent(rank, source, layer=int(g["layer"]), action="op_swap", paths=paths, values=values,
                           value=value, swap_mode=True)
    if name == "pattern_removed":
        return NoticeEvent(rank, source, what="pattern_removed", data={"pattern": g["pattern"], "key": g["key"]})
    if name == "cell_not_op":
        kind = "comm" if g["for"].startswith("communication") else "exclude"
        return NoticeEvent(rank, source, what="cell_not_op",
                           data={"path": g["path"].lstrip("."), "logged": g["path"], "for": kind})
    if name.startswith("swap_conflict"):
        scope = name[len("swap_conflict_"):]
        data: Dict[str, Any] = {"scope": scope, "text": m.string}
        if "op" in g:
            data["op"] = g["op"]
        if g.get("layer") is not None:
            data["layer"] = int(g["layer"])
        if scope == "recompute_true":
            data["op"] = "All"
        return NoticeEvent(rank, source, what="swap_conflict", data=data)
    if name == "empty_config":
        return NoticeEvent(rank, source, what="empty_config", data={"section": g["section"]})
    if name == "pp_interleave_reset":
        return NoticeEvent(rank, source, what="pp_interleave_reset", data={"text": m.string})
    if name == "regex_timeout":
        return NoticeEvent(rank, source, what="regex_timeout", data={"text": g["text"]})
    raise AssertionError(name)  # pragma: no cover - every LAYERSETTING row is handled above


assert {"full_recompute", "layer_swap", "op_swap"} <= set(ACTIONS)
