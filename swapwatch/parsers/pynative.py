"""PyNative (r2.x) strategy lines -> events (rows: :data:`swapwatch.parsers.grammar.PYNATIVE`).

``Set exclude recompute`` / ``Set layer swap`` / ``Set select swap`` become :class:`ActionEvent` s with the
shared action names (``select_recompute_exclude``, ``layer_swap``, ``op_swap``); the "Final ... Configuration
Map" lines, the no-match warnings, the ``[Recompute Config]`` / ``[Swap Config]`` lines and the trainer's world
size become :class:`NoticeEvent` s (``pyn_map_start`` / ``pyn_map_entry`` / ``pyn_map_end``, ``pattern_no_match``,
``pyn_config_error``, ``world_size``). A map entry does not name its map: the checks read them in file order
after the ``pyn_map_start`` notice.
"""
from __future__ import annotations

import re
from typing import Optional

from .grammar import PYNATIVE
from .layersetting import split_paths
from .model import ActionEvent, Event, NoticeEvent

_ROWS = [(r.name, re.compile(r.regex)) for r in PYNATIVE]
_KEYWORDS = ("--- Final ", "layer", "-----", "Set ", "[Recompute Config] ", "[Swap Config] ", "Current world size")


def parse(msg: str, rank: Optional[int], source: str, level: Optional[str] = None) -> Optional[Event]:
    """One collapsed MindFormers message -> its event, or None."""
    if not msg.startswith(_KEYWORDS) and "did not match" not in msg:
        return None
    for name, rx in _ROWS:
        m = rx.match(msg)
        if m:
            return _build(name, m, rank, source, level)
    return None


def _build(name: str, m: "re.Match", rank: Optional[int], source: str, level: Optional[str]) -> Event:
    g = m.groupdict()
    if name == "pyn_set_exclude":
        return ActionEvent(rank, source, layer=int(g["layer"]), action="select_recompute_exclude",
                           paths=split_paths(g["ops"]))
    if name == "pyn_layer_swap":
        return ActionEvent(rank, source, layer=int(g["layer"]), action="layer_swap")
    if name == "pyn_select_swap":
        return ActionEvent(rank, source, layer=int(g["layer"]), action="op_swap", paths=split_paths(g["ops"]))
    if name == "pyn_map_start":
        return NoticeEvent(rank, source, what="pyn_map_start", data={"label": g["label"]})
    if name == "pyn_map_entry":
        ops = g["ops"]
        return NoticeEvent(rank, source, what="pyn_map_entry",
                           data={"layer": int(g["layer"]), "paths": [] if ops == "(No Module)" else split_paths(ops)})
    if name == "pyn_map_end":
        return NoticeEvent(rank, source, what="pyn_map_end", data={})
    if name == "pyn_no_match":
        return NoticeEvent(rank, source, what="pattern_no_match", data={"label": g["label"], "pattern": g["key"]})
    if name == "pyn_config_error":
        return NoticeEvent(rank, source, what="pyn_config_error",
                           data={"tag": f"[{g['tag']} Config]", "text": g["text"], "level": level})
    if name == "world_size":
        return NoticeEvent(rank, source, what="world_size", data={"n": int(g["n"])})
    raise AssertionError(name)  # pragma: no cover - every PYNATIVE row is handled above
