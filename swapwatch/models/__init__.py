"""Model families as data: each ``<family>.yaml`` describes one decoder layer's cell tree and its
producer -> consumer flows, so supporting another family is a data file, not code."""
from __future__ import annotations

import functools
from importlib import resources
from typing import Dict, List

import yaml

from ..errors import InputError
from ..patterns import LayoutNode


@functools.lru_cache(maxsize=None)
def _data(family: str) -> dict:
    try:
        text = resources.files(__package__).joinpath(f"{family}.yaml").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"unknown model family {family!r} (known: {', '.join(families())})") from None
    return yaml.safe_load(text)


def families() -> List[str]:
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".yaml"))


def load_layout(family: str = "llama") -> LayoutNode:
    """The decoder layer's cell tree of ``family``."""
    return LayoutNode.from_data("layer", _data(family)["layer"])


def load_flows(family: str = "llama") -> Dict[str, List[str]]:
    """Producer path -> consumer paths inside one layer (used by SW202)."""
    return dict(_data(family).get("flows") or {})
