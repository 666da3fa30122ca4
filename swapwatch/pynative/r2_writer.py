"""Write an r2.x strategy into a copy of a PyNative YAML: only the top-level ``recompute:`` block changes,
the rest of the file is kept byte for byte (``swapwatch plan -o`` on the PyNative path; the static
path's writer is ``memory/emit.py``).

What is written follows MindFormers' own spec syntax (``mindformers/pynative/config/config.py:
RecomputeConfig`` and ``mindformers/pynative/distributed/activation_checkpoint.py``'s validation):
``mode`` is the string ``"None"``, ``full`` or ``select``; ``full_recompute_layer`` a list of layer specs
(strings ``'3'`` or ``'0-5'``, ascending, not overlapping); ``select_module`` a mapping of module-path
regexes (fullmatched against each layer's paths: dots escaped) to such lists. ``mode: full`` needs
``full_recompute_layer``; ``select`` needs ``select_module`` and may carry ``full_recompute_layer`` too.
``exclude_op`` does nothing without a recompute mode (``apply_ac`` logs a warning): it is kept only when
the strategy recomputes whole layers, where it applies.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..text import ranges


def layer_specs(ids: Sequence[int]) -> List[str]:
    """Ascending, non-overlapping MindFormers layer specs of ``ids``: ``[0, 1, 2, 5]`` -> ``['0-2', '5']``."""
    return [p.strip() for p in ranges(sorted(set(ids))).split(",") if p.strip()] if ids else []


def path_regex(path: str) -> str:
    """A module path as the regex ``apply_ac`` fullmatches: dots escaped, nothing else special."""
    return re.escape(path)


def recompute_block(full: Sequence[int], select: Mapping[str, Sequence[int]],
                    exclude: Optional[Dict[str, List[str]]] = None) -> str:
    """The ``recompute:`` block of the strategy (full-layer ids, select module path -> layer ids)."""
    sel = {p: ids for p, ids in select.items() if ids}
    if sel:
        mode = "select"
    elif full:
        mode = "full"
    else:
        return 'recompute:\n  mode: "None"\n'
    out = [f"recompute:\n  mode: {mode}\n"]
    if full:
        out.append(f"  full_recompute_layer: {_flow(layer_specs(full))}\n")
    if sel:
        out.append("  select_module:\n")
        for p in sorted(sel):
            out.append(f"    '{path_regex(p)}': {_flow(layer_specs(sel[p]))}\n")
    if exclude and full:
        out.append("  exclude_op:\n")
        for k, v in exclude.items():
            out.append(f"    '{k}': {_flow([str(x) for x in v])}\n")
    return "".join(out)


def _flow(specs: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{s}'" for s in specs) + "]"


def _block_span(text: str, key: str) -> Optional[Tuple[int, int]]:
    """(start, end) offsets of the top-level ``key:`` block (its line and every indented, blank or
    comment line after it up to the next top-level key), or None."""
    lines = text.splitlines(keepends=True)
    pos = 0
    start = None
    for line in lines:
        if start is None:
            if re.match(rf"{re.escape(key)}\s*:", line):
                start = pos
        elif line.strip() and not line[0].isspace() and not line.lstrip().startswith("#"):
            return start, pos
        pos += len(line)
    return (start, pos) if start is not None else None


def write_strategy(text: str, block: str) -> str:
    """``text`` with its ``recompute:`` block replaced by ``block`` (appended when there is none)."""
    span = _block_span(text, "recompute")
    if span is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return text + sep + block
    start, end = span
    tail = text[start:end]
    # the blank lines and comments between the old block and the next key stay where they were
    trailing = re.search(r"(\n(?:[ \t]*(?:#[^\n]*)?\n)*)\Z", tail)
    gap = trailing.group(1)[1:] if trailing else ""
    return text[:start] + block + gap + text[end:]
