"""The tensor table files (``swapwatch/memory/<table>.yaml``) as data: one reader, with no import of
the rest of ``memory/``, so that ``keys.py`` (imported by ``spec.py``, which ``tensor_table.py`` imports)
can ask a table what it names without an import circle (tests/test_architecture.py)."""
from __future__ import annotations

import functools
from importlib import resources
from typing import Dict, FrozenSet, Tuple

import yaml

#: libyaml's loader when PyYAML was built with it (as ``layouts/__init__.py`` reads its files): SW211
#: reads every table on each verify, ~0.2 s of the command's serial time with the pure-Python loader
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def family_data(table: str) -> dict:
    """The tensor table file ``swapwatch/memory/<table>.yaml``."""
    text = resources.files(__package__).joinpath(f"{table}.yaml").read_text(encoding="utf-8")
    return yaml.load(text, Loader=_LOADER)


@functools.lru_cache(maxsize=None)
def tables() -> Dict[str, Tuple[str, FrozenSet[str]]]:
    """Layout family (a ``swapwatch/layouts`` stem) -> (its tensor table, the table's variant tags
    that family's tree has), from each table's ``families`` header. One table may serve several
    layouts (the legacy Llama variants differ in a few ops: ``qkv_concat``, the biases)."""
    out: Dict[str, Tuple[str, FrozenSet[str]]] = {}
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".yaml"):
            stem = entry.name[:-5]
            for fam, tags in (family_data(stem).get("families") or {}).items():
                out[fam] = (stem, frozenset(tags or ()))
    return out


def variant_tags(entry: dict) -> FrozenSet[str]:
    """The ``variant`` tags of a table entry (an op, tensor, row or group), a word or a list of words:
    the entry is on the layer only when every tag holds (tensor_table.TensorTable, keys.sizes_comm_recompute)."""
    v = entry.get("variant", ())
    return frozenset([v] if isinstance(v, str) else v)
