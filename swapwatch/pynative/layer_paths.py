"""The per-layer module/op path lists the PyNative regexes are matched against, for each known family.

The lists are data collected from real MindFormers 2.1.0 PyNative models (see
``swapwatch/layouts/pynative/README.md`` for where they came from and how to regenerate them): what
``activation_checkpoint.py:_get_modules_and_ops_list`` returns for a layer. They do not depend on sizes, so a
model of any depth is laid out as: DeepSeek-V3 dense list below ``first_k_dense_replace``, MoE list above,
and the MTP list for MTP layer ``i`` at global id ``num_layers + i``; Qwen3 has one list for every layer.

Whether a path is a cell (something a dotted path can walk into) is read off the list itself: a path is a
cell when another path of the same layer extends it (``self_attention`` -> ``self_attention.cast``). Leaf
cells without callables look like ops this way; swapwatch only uses "is a cell" to find wrapped parents
(which always have children) and the "expected to be operation but got cell" note for comm recompute.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..errors import ConfigError, InputError
from ..model.families import PYNATIVE_NAMES, ModelFamily, pynative_family

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "layouts", "pynative", "layer_paths.json")
#: YAML ``model.model_type`` (or ``--model``) -> the family whose paths it names: the one registry of families
#: (``families.PYNATIVE_NAMES``; ``tinyllama``: the example model, swapwatch/examples/tinyllama.py, collected with
#: apply_ac's own ``_get_single_layer_whitelist`` by tools/pynative_memory.py: what ``estimate`` on an r2.x YAML
#: of it is checked against, docs/estimate.md)
FAMILIES = PYNATIVE_NAMES


@lru_cache(maxsize=None)
def _data() -> Dict[str, Dict[str, Tuple[str, ...]]]:
    with open(DATA, "r", encoding="utf-8") as fh:
        raw = json.load(fh)["models"]
    return {m: {k: tuple(v) for k, v in layers.items()} for m, layers in raw.items()}


def family_key(family: object) -> str:
    """The family (``families``) whose PyNative paths ``family`` (a ``model_type`` or ``--model``) names."""
    fam = pynative_family(family)
    if fam is None:
        raise ConfigError(f"no PyNative layer paths known for model_type {family!r}; known: "
                          f"{', '.join(sorted(FAMILIES))} (set model.model_type or pass --model)",
                          key="model.model_type")
    return fam.name


def check_model_option(family: Optional[str]) -> None:
    """``--model NAME`` on a PyNative YAML: a name with no layer paths is the option's mistake, so
    the error names ``--model``, not the YAML's ``model.model_type`` (which the option replaces)."""
    if family is not None and pynative_family(family) is None:
        raise InputError(f"no PyNative layer paths known for {family!r} (the YAML is a PyNative one; "
                         f"known: {', '.join(sorted(FAMILIES))})", key="--model")


def layer_lists(family: str, num_layers: int, mtp_layers: int = 0, first_k_dense: int = 0
                ) -> Dict[int, Tuple[str, ...]]:
    """Global layer id -> its path list, in collection order (decoder ids, then MTP ids): each layer the list of
    its kind (the family's: dense below ``first_k_dense``, MoE above, MTP), read where the family's record says."""
    fam = ModelFamily(family_key(family))
    where = fam.pynative_paths
    assert where is not None            # family_key found it
    model, ids = where
    data = _data()[model]
    fam.first_k_dense_replace = first_k_dense
    out: Dict[int, Tuple[str, ...]] = {}
    for i in range(num_layers):
        out[i] = data[ids.get(fam.kind_of(i) or "dense", ids["dense"])]
    for i in range(mtp_layers):
        out[num_layers + i] = data[ids.get("mtp", ids["dense"])]
    return out


@lru_cache(maxsize=None)
def cells_of(paths: Tuple[str, ...]) -> FrozenSet[str]:
    """The paths of ``paths`` that another path extends (cells one can walk into)."""
    cells = set()
    for p in paths:
        head, _, _ = p.rpartition(".")
        while head:
            cells.add(head)
            head, _, _ = head.rpartition(".")
    return frozenset(c for c in cells if c in set(paths))


def families() -> List[str]:
    return sorted(FAMILIES)
