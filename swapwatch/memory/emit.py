"""Write a planned strategy into a copy of the training YAML, everything else kept (comments too).

MindFormers accepts a per-layer strategy in two forms, and the plan uses the one that can say it:

* without swap, counts per stage: ``recompute: [n_0, n_1, ...]`` fully recomputes the first n_p
  layers of each stage's chunk, and ``select_recompute: {pattern: [n_0, ...]}`` applies a pattern to
  the first n_p layers (MindFormers skips it on the fully recomputed ones); with interleave, one row
  per chunk (2-D tables: 1-D counts would be dealt round-robin over the interleaves);
* with swap on, the same keys take layer ids, and ``swap_config.layer_swap`` lists
  ``{backward_prefetch, layers}`` entries; ``context.memory_optimize_level: O0`` is set (swap needs it).

The YAML is edited with ruamel.yaml's round-trip mode, so keys, order, comments and quoting of the
rest of the file stay as the user wrote them.
"""
from __future__ import annotations

import io
from typing import Any, Dict, List, Sequence

from ..errors import ConfigError
from .search import Level, StagePlan


class _Bool(int):
    """A YAML boolean that remembers its spelling: ruamel's round trip would rewrite every
    ``False`` of the user's file as ``false``."""

    text: str = ""

    def __new__(cls, value: bool, text: str) -> "_Bool":
        obj = int.__new__(cls, bool(value))
        obj.text = text
        return obj

    def __repr__(self) -> str:
        return self.text


def _yaml():
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import RoundTripConstructor
    from ruamel.yaml.representer import RoundTripRepresenter

    class Constructor(RoundTripConstructor):
        def check_mapping_key(self, node, key_node, mapping, key, value):
            """A duplicate key: the last one wins, as in MindFormers' loader (PyYAML's SafeLoader) and
            ``config.parse_yaml`` (ruamel would refuse it, or keep the first)."""
            if key in mapping:
                del mapping[key]
            return True

    class Representer(RoundTripRepresenter):
        pass

    def construct_bool(self, node):
        text = str(self.construct_scalar(node))
        return _Bool(self.bool_values[text.lower()], text)

    Constructor.add_constructor("tag:yaml.org,2002:bool", construct_bool)
    Representer.add_representer(_Bool, lambda r, d: r.represent_scalar("tag:yaml.org,2002:bool", d.text))
    y = YAML(typ="rt")
    y.Constructor = Constructor
    y.Representer = Representer
    y.boolean_representation = ["False", "True"]     # what we write ourselves: MindFormers' spelling
    y.preserve_quotes = True
    y.width = 4096
    return y


def _is_true(value: Any) -> bool:
    return isinstance(value, (bool, _Bool)) and bool(value)


def _flow(items: Sequence[Any]):
    from ruamel.yaml.comments import CommentedSeq

    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def _pattern(p: str):
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    return SingleQuotedScalarString(p)


def counts_tables(geo, levels: Dict[int, Level]) -> Dict[str, Any]:
    """Non-swap form: per (interleave, stage) chunk, how many leading layers are fully recomputed
    and how many carry each select pattern (0 where only fully recomputed layers would: MindFormers
    skips select there, and rule SW105 would warn)."""
    V, P = geo.pp_interleave_num, geo.pipeline_stage
    full = [[0] * P for _ in range(V)]
    pats: Dict[str, List[List[int]]] = {}
    order: List[str] = []
    for lv in levels.values():
        for p in lv.patterns:
            if p not in order:
                order.append(p)
    for v in range(V):
        for st in range(P):
            start, n = geo.chunk_starts[v][st], geo.layer_list[v][st]
            chunk = [levels[i] for i in range(start, start + n)]
            nf = 0
            while nf < n and chunk[nf].full:
                nf += 1
            if any(lv.full for lv in chunk[nf:]):
                raise AssertionError("full recompute is not a prefix of the chunk")
            full[v][st] = nf
            for p in order:
                k = nf
                while k < n and p in chunk[k].patterns:
                    k += 1
                if any(p in lv.patterns for lv in chunk[k:]):
                    raise AssertionError(f"pattern {p} is not a prefix of the chunk")
                pats.setdefault(p, [[0] * P for _ in range(V)])[v][st] = k if k > nf else 0
    return {"full": full, "patterns": {p: t for p, t in pats.items() if any(any(r) for r in t)}}


def _table(rows: List[List[int]]) -> Any:
    if len(rows) == 1:
        return _flow(rows[0])
    from ruamel.yaml.comments import CommentedSeq

    seq = CommentedSeq([_flow(r) for r in rows])
    return seq


def emit(text: str, source: str, geo, stages: Sequence[StagePlan]) -> str:
    """The YAML ``text`` with the recompute (and swap) strategy of ``stages`` written in."""
    y = _yaml()
    try:
        doc = y.load(text)
    except Exception as exc:       # the file parsed with PyYAML before; this is a ruamel-only failure
        raise ConfigError(f"cannot re-read the YAML for writing: {str(exc).splitlines()[0]}", file=source) from None
    from ruamel.yaml.comments import CommentedMap

    levels: Dict[int, Level] = {}
    for sp in stages:
        levels.update(sp.levels)
    swap = any(lv.swap is not None for lv in levels.values())

    pc = doc.get("parallel_config")
    rc = None
    if isinstance(pc, dict) and "recompute" in pc:
        if isinstance(pc["recompute"], dict) and "recompute_config" not in doc:
            rc = pc["recompute"]                 # recompute_config nested in parallel_config
        else:
            del pc["recompute"]                  # the legacy bool would bypass recompute_config
    if rc is None:
        if not isinstance(doc.get("recompute_config"), dict):
            doc["recompute_config"] = CommentedMap()
        rc = doc["recompute_config"]

    if not swap:
        tables = counts_tables(geo, levels)
        full = tables["full"]
        rc["recompute"] = _table(full) if any(any(r) for r in full) else False
        sel = CommentedMap()
        for p, t in tables["patterns"].items():
            sel[_pattern(p)] = _table(t)
        rc["select_recompute"] = sel if sel else False
        mcore = _mcore_swap_section(doc, create=False)
        if mcore is not None:
            mc, keys = mcore
            if _is_true(mc.get(keys["swap"])):
                mc[keys["swap"]] = False
                for meaning in ("layer_swap", "op_swap"):     # else SW208: set while swap is off
                    if keys[meaning] in mc:
                        mc[keys[meaning]] = None
            return _dump(y, doc)
        sc = doc.get("swap_config")
        if isinstance(sc, dict) and _is_true(sc.get("swap")):
            sc["swap"] = False
        return _dump(y, doc)

    full_ids = sorted(i for i, lv in levels.items() if lv.full)
    rc["recompute"] = _flow(full_ids) if full_ids else False
    sel = CommentedMap()
    order: List[str] = []
    for i in sorted(levels):
        for p in levels[i].patterns:
            if p not in order:
                order.append(p)
    for p in order:
        sel[_pattern(p)] = _flow(sorted(i for i, lv in levels.items() if p in lv.patterns))
    rc["select_recompute"] = sel if sel else False
    entries = []
    for pf in sorted({lv.swap for lv in levels.values() if lv.swap is not None}):
        e = CommentedMap()
        e["backward_prefetch"] = pf
        e["layers"] = _flow(sorted(i for i, lv in levels.items() if lv.swap == pf))
        entries.append(e)
    mcore = _mcore_swap_section(doc, create=True)
    if mcore is not None:
        mc, keys = mcore
        mc[keys["swap"]] = True
        mc[keys["layer_swap"]] = entries
        mc[keys["op_swap"]] = None
    else:
        if not isinstance(doc.get("swap_config"), dict):
            doc["swap_config"] = CommentedMap()
        sc = doc["swap_config"]
        sc["swap"] = True
        sc["layer_swap"] = entries
        sc["op_swap"] = None
    if not isinstance(doc.get("context"), dict):
        doc["context"] = CommentedMap()
    doc["context"]["memory_optimize_level"] = "O0"
    return _dump(y, doc)


def _mcore_swap_section(doc, create: bool):
    """On the mcore path (``use_legacy: False``) swap lives in ``model.model_config``
    (``swapwatch.config.MCORE_SWAP_KEYS``: the top-level swap_config never reaches LayerSetting):
    (that mapping, meaning -> the key to write: the alias the YAML already uses, else the
    TransformerConfig name), or None on the legacy path (or, unless ``create``, without a model_config)."""
    from ..config import MCORE_SWAP_KEYS

    legacy = doc.get("use_legacy")
    if not (isinstance(legacy, (bool, _Bool)) and not bool(legacy)):
        return None
    model = doc.get("model")
    mc = model.get("model_config") if isinstance(model, dict) else None
    if not isinstance(mc, dict):
        if not create or not isinstance(model, dict):
            return None
        from ruamel.yaml.comments import CommentedMap

        mc = model["model_config"] = CommentedMap()
    keys = {meaning: next((k for k in (name, alias) if k and k in mc), name)
            for name, alias, meaning in MCORE_SWAP_KEYS}
    return mc, keys


def _dump(y, doc) -> str:
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()
