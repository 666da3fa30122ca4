"""Write a planned strategy into a copy of the training YAML: only the strategy's own lines change.

MindFormers accepts a per-layer strategy in two forms, and the plan uses the one that can say it:

* without swap, counts per stage: ``recompute: [n_0, n_1, ...]`` fully recomputes the first n_p
  layers of each stage's chunk, and ``select_recompute: {pattern: [n_0, ...]}`` applies a pattern to
  the first n_p layers (MindFormers skips it on the fully recomputed ones); with interleave, one row
  per chunk (2-D tables: 1-D counts would be dealt round-robin over the interleaves);
* with swap on, the same keys take layer ids, and ``swap_config.layer_swap`` lists
  ``{backward_prefetch, layers}`` entries; ``context.memory_optimize_level: O0`` is set (swap needs it).

Why a text splice and not a YAML round trip: a reviewer must see only the strategy in the diff of
the written YAML against the input. A round trip (ruamel) re-indents block lists, folds long flow
lists, respaces comments and ``[ 6, 2, 1 ]``: a 2-line strategy change on the Qwen3-32B
maintainer YAML showed as 38 changed lines. Here the strategy is a list of *edits* (key path ->
new value, or delete), each spliced into the text at the lines PyYAML's node marks give for that
key; a key whose value already equals the new one is not touched; everything else is the user's
bytes. The result is read back and must equal the input document with exactly those edits applied
(else a bug of ours: ``AssertionError``, exit 3).

Select / comm patterns the plan leaves on no layer (every layer they reach is now fully recomputed,
so MindFormers never applies them: rule SW105) are dropped from the written YAML, and the drop is
reported (``EmitResult.notes``): keeping them would be dead configuration that a later change of
``recompute`` silently brings back to life.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import yaml

from ..errors import ConfigError
from .search import Level, StagePlan
from .tensor_table import LayerCost

Path = Tuple[str, ...]


class _Delete:
    def __repr__(self) -> str:
        return "<delete>"


DELETE: Any = _Delete()

#: where MindFormers reads the pipeline's layer split (``swapwatch.strategy.compute_geometry``)
OFFSET_KEY: Path = ("model", "model_config", "offset")

#: key paths (prefixes) that are the strategy: the only lines emit may change
STRATEGY_KEYS: Tuple[Path, ...] = (("recompute_config",), ("parallel_config", "recompute"), ("swap_config",),
                                   ("context", "memory_optimize_level"), OFFSET_KEY)


@dataclass
class EmitResult:
    text: str
    edits: List[Tuple[Path, Any]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


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


class Pattern(str):
    """A select pattern: written single-quoted, as MindFormers' own YAMLs write them
    (``'feed_forward\\.mul'``: no escape is read inside single quotes)."""


def _table(rows: List[List[int]]) -> Any:
    return rows[0] if len(rows) == 1 else rows


def _is_true(value: Any) -> bool:
    return isinstance(value, bool) and value


# ---------------------------------------------------------------------------------------------
# What to change
# ---------------------------------------------------------------------------------------------

def strategy_edits(doc: Dict[str, Any], geo, stages: Sequence[StagePlan]) -> List[Tuple[Path, Any]]:
    """The (key path, new value | DELETE) edits that write ``stages``' strategy into ``doc``."""
    levels: Dict[int, Level] = {}
    for sp in stages:
        levels.update(sp.levels)
    swap = any(lv.swap is not None or lv.op_swap for lv in levels.values())
    edits: List[Tuple[Path, Any]] = []
    base = recompute_base(doc, edits)

    if not swap:
        tables = counts_tables(geo, levels)
        full = tables["full"]
        edits.append((base + ("recompute",), _table(full) if any(any(r) for r in full) else False))
        sel = {Pattern(p): _table(t) for p, t in tables["patterns"].items()}
        edits.append((base + ("select_recompute",), sel if sel else False))
        # swap off; layer_swap / op_swap left set would be dead configuration (SW208): cleared
        mcore = _mcore_swap_section(doc, create=False)
        if mcore is not None:
            mc_path, mc, keys = mcore
            if _is_true(mc.get(keys["swap"])):
                edits.append((mc_path + (keys["swap"],), False))
            for meaning in ("layer_swap", "op_swap"):
                if mc.get(keys[meaning]) is not None:
                    edits.append((mc_path + (keys[meaning],), None))
        # the top-level swap_config too, on mcore as well: the model ignores it there (SW306), but
        # MindFormers' config check still reads its `swap` and would take the counts as layer ids
        sc = doc.get("swap_config")
        if isinstance(sc, dict):
            if _is_true(sc.get("swap")):
                edits.append((("swap_config", "swap"), False))
            for key in ("layer_swap", "op_swap"):
                if sc.get(key) is not None:
                    edits.append((("swap_config", key), None))
        return edits

    full_ids = sorted(i for i, lv in levels.items() if lv.full)
    edits.append((base + ("recompute",), full_ids if full_ids else False))
    order: List[str] = []
    for i in sorted(levels):
        for p in levels[i].patterns:
            if p not in order:
                order.append(p)
    sel = {Pattern(p): sorted(i for i, lv in levels.items() if p in lv.patterns) for p in order}
    edits.append((base + ("select_recompute",), sel if sel else False))
    entries, op_entries = swap_entries(levels)
    mcore = _mcore_swap_section(doc, create=True)
    if mcore is not None:
        mc_path, mc, keys = mcore
        paths = (mc_path + (keys["swap"],), mc_path + (keys["layer_swap"],), mc_path + (keys["op_swap"],))
    else:
        paths = (("swap_config", "swap"), ("swap_config", "layer_swap"), ("swap_config", "op_swap"))
    edits.append((paths[0], True))
    for path, value in ((paths[1], entries), (paths[2], op_entries)):
        # an empty list is written as none (null) where the YAML had the key, left out where it had not
        if value or _get_or_missing(doc, path) is not _MISSING:
            edits.append((path, value or None))
    edits.append((("context", "memory_optimize_level"), "O0"))
    # with swap on MindFormers formats the exclude keys and applies none of them (SW203): cleared
    section = _get(doc, base) or {}
    for key in ("select_recompute_exclude", "select_comm_recompute_exclude"):
        if isinstance(section, dict) and section.get(key) not in (None, False, [], {}):
            edits.append((base + (key,), False))
    return edits


def swap_entries(levels: Dict[int, Level]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """The swap-mode ``layer_swap`` and ``op_swap`` lists of ``levels`` (layer -> level): one entry per
    prefetch (layer swap) and per (op pattern, prefetch), each with explicit layer ids, so each layer is
    in exactly one entry per pattern (MindFormers takes the first entry that lists a layer:
    ``LayerSetting._set_layer_swap`` / ``_set_op_swap``; SW209) and no entry says ``layers: True``
    (``TransformerSwapConfig`` would then collapse the group to its first prefetch)."""
    layer = [{"backward_prefetch": pf, "layers": sorted(i for i, lv in levels.items() if lv.swap == pf)}
             for pf in sorted({lv.swap for lv in levels.values() if lv.swap is not None})]
    pairs: List[Tuple[str, int]] = []
    for i in sorted(levels):
        for pair in levels[i].op_swap:
            if pair not in pairs:
                pairs.append(pair)
    ops = [{"op_name": Pattern(pat), "backward_prefetch": pf,
            "layers": sorted(i for i, lv in levels.items() if (pat, pf) in lv.op_swap)} for pat, pf in pairs]
    return layer, ops


def recompute_base(doc: Dict[str, Any], edits: List[Tuple[Path, Any]]) -> Path:
    """Where the recompute keys live: ``recompute_config``, or ``parallel_config.recompute`` when
    that is the mapping; a legacy plain-bool ``parallel_config.recompute`` is deleted (it would
    bypass recompute_config)."""
    pc = doc.get("parallel_config")
    if isinstance(pc, dict) and "recompute" in pc:
        if isinstance(pc["recompute"], dict) and "recompute_config" not in doc:
            return ("parallel_config", "recompute")
        edits.append((("parallel_config", "recompute"), DELETE))
    return ("recompute_config",)


def _mcore_swap_section(doc: Dict[str, Any], create: bool):
    """On the mcore path (``use_legacy: False``) swap lives in ``model.model_config``
    (``swapwatch.config.MCORE_SWAP_KEYS``: the top-level swap_config never reaches LayerSetting):
    (its path, the mapping, meaning -> the key to write: the alias the YAML already uses, else the
    TransformerConfig name), or None on the legacy path (or, unless ``create``, without a model_config)."""
    from ..config import MCORE_SWAP_KEYS

    legacy = doc.get("use_legacy")
    if not (isinstance(legacy, bool) and not legacy):
        return None
    model = doc.get("model")
    mc = model.get("model_config") if isinstance(model, dict) else None
    if not isinstance(mc, dict):
        if not create or not isinstance(model, dict):
            return None
        mc = {}
    keys = {meaning: next((k for k in (name, alias) if k and k in mc), name)
            for name, alias, meaning in MCORE_SWAP_KEYS}
    return ("model", "model_config"), mc, keys


def drop_pattern_edits(doc: Dict[str, Any], base: Path, dead: Mapping[str, Iterable[str]]) -> List[Tuple[Path, Any]]:
    """Edits removing the ``dead`` patterns of each strategy key (``select_recompute`` ...) under
    ``base``: a mapping keeps its other patterns (False when none is left), any other value becomes
    False (the one pattern list it names goes as a whole)."""
    section = _get(doc, base) or {}
    edits: List[Tuple[Path, Any]] = []
    for key, pats in dead.items():
        value = section.get(key) if isinstance(section, dict) else None
        gone = set(pats)
        keep = {k: v for k, v in value.items() if k not in gone} if isinstance(value, dict) else {}
        edits.append((base + (key,), keep or False))
    return edits


def shadowed_drops(doc: Dict[str, Any], base: Path, plan) -> Tuple[List[Tuple[Path, Any]], List[str]]:
    """Edits dropping the select / comm patterns that ``plan`` (the planned YAML's) applies on no
    layer because full recompute shadows them everywhere (SW105), and a note per drop."""
    edits: List[Tuple[Path, Any]] = []
    notes: List[str] = []
    for key in ("select_recompute", "select_comm_recompute"):
        applied = {p for lp in plan.layers for p in lp.patterns(key)}
        dead: Dict[str, List[int]] = {}
        for lp in plan.layers:
            for p in lp.select_shadowed.get(key, ()):
                if p not in applied:
                    dead.setdefault(p, []).append(lp.layer)
        if not dead:
            continue
        edits += drop_pattern_edits(doc, base, {key: dead})
        from ..text import ranges

        for p, layers in dead.items():
            notes.append(f"{'.'.join(base + (key,))}: dropped '{p}': the plan fully recomputes every layer it "
                         f"reached (layers {ranges(layers)}), so MindFormers would never apply it (SW105)")
    return edits, notes


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def emit(text: str, source: str, geo, stages: Sequence[StagePlan]) -> str:
    """The YAML ``text`` with the recompute (and swap) strategy of ``stages`` written in."""
    return emit_result(text, source, geo, stages).text


def offset_edits(doc: Dict[str, Any], geo) -> List[Tuple[Path, Any]]:
    """The edit writing ``geo``'s split (one chunk per stage) as ``model.model_config.offset``, when
    it differs from the YAML's: one int per stage, the layers each stage holds less the even split
    (MindFormers: ``num_layers // pipeline_stage + offset[p]``; the offsets add up to the remainder)."""
    want = [int(x) for x in geo.offset[0]]
    cur = _get_or_missing(doc, OFFSET_KEY)
    P = len(want)
    if cur is _MISSING or cur is None:
        have = [0] * P
    elif isinstance(cur, int) and not isinstance(cur, bool):
        have = [cur] * P
    else:
        have = list(cur) if isinstance(cur, list) else []
    return [] if have == want else [(OFFSET_KEY, want)]


def emit_result(text: str, source: str, geo, stages: Sequence[StagePlan], plan_of_text=None,
                split: bool = False) -> EmitResult:
    """:func:`emit`, with the edits made and notes on what was dropped.

    ``plan_of_text(text) -> Plan`` (the engine explain uses) lets emit find the select / comm
    patterns the new strategy leaves on no layer, and drop them. ``split``: write ``geo``'s layer
    split too (:func:`offset_edits`)."""
    doc = _load(text, source)
    edits = strategy_edits(doc, geo, stages) + (offset_edits(doc, geo) if split else [])
    out = splice(text, source, edits)
    notes: List[str] = []
    if plan_of_text is not None:
        base = recompute_base(doc, [])
        drops, notes = shadowed_drops(_load(out, source), base, plan_of_text(out))
        if drops:
            edits = _merge(edits, drops)
            out = splice(text, source, edits)
    return EmitResult(out, edits, notes)


def yaml_context(text: str, source: str) -> Dict[str, Any]:
    """The YAML's ``context`` section as written (``max_device_memory`` and the other keys the
    strategy engine does not keep), {} when it has none."""
    doc = _load(text, source)
    ctx = doc.get("context") if isinstance(doc, dict) else None
    return ctx if isinstance(ctx, dict) else {}


def _merge(edits: List[Tuple[Path, Any]], more: List[Tuple[Path, Any]]) -> List[Tuple[Path, Any]]:
    paths = {p for p, _ in more}
    return [e for e in edits if e[0] not in paths] + more


def _load(text: str, source: str) -> Any:
    """The data of ``text`` through the config's own loader (``config.parse_yaml``: what explain
    reads, parsed once per command, the input's parse shared with the config that was planned)."""
    from ..config import parse_yaml

    try:
        return parse_yaml(text, source)[0] or {}
    except ConfigError as exc:
        raise ConfigError(f"cannot re-read the YAML for writing: {exc.message}", file=source, line=exc.line) from None


_MISSING = object()


def _get(doc: Any, path: Path) -> Any:
    """The value at ``path``, None when it is not there."""
    value = _get_or_missing(doc, path)
    return None if value is _MISSING else value


def _get_or_missing(doc: Any, path: Path) -> Any:
    for k in path:
        if not isinstance(doc, dict) or k not in doc:
            return _MISSING
        doc = doc[k]
    return doc


def apply_edits(doc: Any, edits: Sequence[Tuple[Path, Any]]) -> Any:
    """``doc`` with ``edits`` applied (a deep copy): what the spliced text must read back as."""
    out = copy.deepcopy(doc)
    for path, value in edits:
        node = out
        for k in path[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = copy.deepcopy(value)
    return out


def splice(text: str, source: str, edits: Sequence[Tuple[Path, Any]]) -> str:
    """``text`` with each edit spliced in at its key's lines; unchanged values are not touched."""
    original = _load(text, source)
    _BOOLS["style"] = _bool_style(text)
    out = text
    for path, value in edits:
        out = _unflow(out, source, path)
        cur = _get_or_missing(_load(out, source), path)
        if value is DELETE:
            if cur is not _MISSING:
                out = _delete(out, path)
        elif cur is _MISSING or not _same(cur, value):
            out = _set(out, path, value)
    want = apply_edits(original, edits)
    got = _load(out, source)
    if got != want:
        raise AssertionError(f"the written YAML of {source} does not read back as the input with the strategy edits")
    return out


def _unflow(text: str, source: str, path: Path) -> str:
    """``text`` with the flow mapping that holds ``path`` (``recompute_config: {recompute: False,
    select_recompute: False}``, which MindFormers and ``explain`` read like a block one) rewritten
    in block style: the edits below splice whole lines, and a flow mapping has none per key. The
    values read back the same (:func:`splice` checks it); the rest of the file is untouched."""
    node = _compose(text)
    if isinstance(node, yaml.MappingNode) and node.flow_style and node.value:
        # the whole document is one flow mapping (a JSON file is one too): it becomes a block
        # document, what comes before and after it (a comment header) kept
        lines = text.splitlines(keepends=True)
        start, (end, col) = node.start_mark.line, _end(node)
        tail = lines[end][col:] if end < len(lines) else ""
        body = [ln + "\n" for ln in _block(_load(text, source), "", _step(text), _dash(text, _step(text)))]
        return "".join(lines[:start] + body + ([tail] if tail.strip() else []) + lines[end + 1:])
    for depth, k in enumerate(path[:-1]):
        if not isinstance(node, yaml.MappingNode):
            return text
        hit = None
        for kn, vn in node.value:           # the last one wins, as in the loader
            if isinstance(kn, yaml.ScalarNode) and kn.value == k:
                hit = vn
        if hit is None:
            return text
        if isinstance(hit, yaml.MappingNode) and hit.flow_style and hit.value:
            return _set(text, path[:depth + 1], _get(_load(text, source), path[:depth + 1]))
        node = hit
    return text


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


# --- node marks -----------------------------------------------------------------------------

def _compose(text: str) -> yaml.Node:
    from ..config.load import composed

    node = composed(text) or yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return yaml.MappingNode("tag:yaml.org,2002:map", [])
    return node


def _find(root: yaml.Node, path: Path):
    """(key node, value node) of ``path``, or (None, the deepest existing mapping node, depth)."""
    node = root
    for depth, k in enumerate(path):
        if not isinstance(node, yaml.MappingNode):
            return None, node, depth
        hit = None
        for kn, vn in node.value:
            if isinstance(kn, yaml.ScalarNode) and kn.value == k:
                hit = (kn, vn)
        if hit is None:
            return None, node, depth
        if depth == len(path) - 1:
            return hit, None, depth
        node = hit[1]
    return None, node, len(path)


def _end(node: yaml.Node) -> Tuple[int, int]:
    """(line, column) just after the last character of ``node``'s content."""
    if isinstance(node, yaml.ScalarNode):
        if node.style in ("|", ">"):
            m = node.end_mark
            return (m.line - 1, 1 << 30) if m.column == 0 else (m.line, m.column)
        return node.end_mark.line, node.end_mark.column
    if getattr(node, "flow_style", False) or not node.value:
        return node.end_mark.line, node.end_mark.column
    children: List[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        for kn, vn in node.value:
            children += [kn, vn]
    else:
        children = list(node.value)
    return max(_end(c) for c in children)


# --- rendering ------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


#: how booleans are spelled in the file being written (set by :func:`splice`): MindFormers' own
#: YAMLs write ``True`` / ``False``; a file written in lower case keeps lower case
_BOOLS = {"style": ("True", "False")}


def _bool_style(text: str) -> Tuple[str, str]:
    lower = len(re.findall(r":\s+(?:true|false)\b", text))
    upper = len(re.findall(r":\s+(?:True|False)\b", text))
    return ("true", "false") if lower > upper else ("True", "False")


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return _BOOLS["style"][0] if v else _BOOLS["style"][1]
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if not isinstance(v, Pattern) and _PLAIN_KEY.match(s) and yaml.safe_load(s) == s:
        return s
    return "'" + s.replace("'", "''") + "'"


def _flow(v: Any, pad: str = "") -> str:
    if isinstance(v, list):
        inner = ", ".join(_flow(x) for x in v)
        return f"[{pad}{inner}{pad}]" if inner else "[]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_scalar(k)}: {_flow(x)}" for k, x in v.items()) + "}"
    return _scalar(v)


def _inline(v: Any) -> bool:
    """Values written on the key's line: scalars, lists of scalars or of such lists, empty maps."""
    if isinstance(v, dict):
        return not v
    if isinstance(v, list):
        return all(not isinstance(x, dict) and _inline(x) for x in v)
    return True


def _block(v: Any, indent: str, step: str, dash: str = "") -> List[str]:
    """Lines of a block mapping / sequence value at ``indent`` (a sequence under a key at
    ``indent - step`` + ``dash``: the file's own block-list indentation)."""
    lines: List[str] = []
    if isinstance(v, dict):
        for k, x in v.items():
            if _inline(x):
                lines.append(f"{indent}{_scalar(k)}: {_flow(x)}")
            elif isinstance(x, list):
                lines.append(f"{indent}{_scalar(k)}:")
                lines += _block(x, indent + dash, step, dash)
            else:
                lines.append(f"{indent}{_scalar(k)}:")
                lines += _block(x, indent + step, step, dash)
    else:
        for x in v:
            if isinstance(x, dict) and x:
                sub = _block(x, indent + "  ", step, dash)
                lines.append(indent + "- " + sub[0][len(indent) + 2:])
                lines += sub[1:]
            else:
                lines.append(f"{indent}- {_flow(x)}")
    return lines


def _step(text: str) -> str:
    """The file's indentation step (the smallest non-zero indent of a key line), default 2."""
    widths = [len(m.group(1)) for m in re.finditer(r"^( +)[^ #\-\n]", text, re.M)]
    return " " * (min(widths) if widths else 2)


def _dash(text: str, step: str) -> str:
    """How far the file indents a block list under its key (``key:\n  - x`` -> two spaces,
    ``key:\n- x`` -> none); default one step."""
    m = re.search(r"^( *)[^\s#-][^\n]*:[ \t]*\n(?:[ \t]*#[^\n]*\n)*( *)- ", text, re.M)
    return " " * max(0, len(m.group(2)) - len(m.group(1))) if m else step


def _quoted(value: Any, old: yaml.Node) -> str:
    """A string replacing a quoted scalar keeps its quotes (``"O1"`` -> ``"O0"``)."""
    if isinstance(value, str) and isinstance(old, yaml.ScalarNode) and old.style in ('"', "'") \
            and '"' not in value and "'" not in value and "\\" not in value:
        return f"{old.style}{value}{old.style}"
    return _flow(value)


def _flow_pad(line: str) -> str:
    """``' '`` when the old flow list was written ``[ 6, 2, 1 ]``: the rewrite keeps that look."""
    return " " if re.search(r"\[ \S", line) else ""


# --- edits ----------------------------------------------------------------------------------

def _set(text: str, path: Path, value: Any) -> str:
    lines = text.splitlines(keepends=True)
    root = _compose(text)
    hit, parent, depth = _find(root, path)
    step = _step(text)
    if hit is not None:
        kn, vn = hit
        kl, kc = kn.start_mark.line, kn.start_mark.column
        el, ec = _end(vn)
        if isinstance(vn, yaml.ScalarNode) and vn.value == "" and vn.style is None:
            el, ec = kn.end_mark.line, _colon_end(lines[kl], kn.end_mark.column)
        head = lines[kl][:kc] + lines[kl][kn.start_mark.column:kn.end_mark.column]
        tail_line = lines[el] if el < len(lines) else ""
        suffix = tail_line[ec:] if ec < len(tail_line) else ("\n" if tail_line.endswith("\n") or el + 1 < len(lines)
                                                              else "")
        if not suffix.endswith("\n"):
            suffix += "\n"
        old_one_line = el == kl
        if _inline(value):
            pad = _flow_pad(lines[kl][kn.end_mark.column:] if old_one_line else "")
            shown = _quoted(value, vn) if isinstance(value, str) else _flow(value, pad)
            new = [f"{head}: {shown}" + (suffix if old_one_line else _keep_comment(suffix))]
        else:
            comment = _keep_comment(lines[kl][kn.end_mark.column:]) if not old_one_line else "\n"
            dash = _dash(text, step)
            indent = " " * kc + (dash if isinstance(value, list) else step)
            new = [f"{head}:" + (comment if comment.strip() else "\n")] + \
                [ln + "\n" for ln in _block(value, indent, step, dash)]
            if old_one_line and suffix.strip():
                new[0] = f"{head}:" + _keep_comment(suffix)
        return "".join(lines[:kl] + new + lines[el + 1:])
    # the key is missing: add it to the deepest existing mapping
    missing = path[depth:]
    v: Any = value
    for k in reversed(missing[1:]):
        v = {k: v}
    key = missing[0]
    if depth > 0 and isinstance(parent, yaml.ScalarNode) and parent.value in ("", "~", "null", "Null", "NULL"):
        return _set(text, path[:depth], v if len(missing) > 1 else {key: value})   # ``key:`` with no value
    if not isinstance(parent, yaml.MappingNode) or parent.flow_style:
        raise ConfigError(f"cannot write {'.'.join(path)}: {'.'.join(path[:depth]) or 'the document'} is not a "
                          f"block mapping")
    if parent.value:
        indent = " " * parent.value[0][0].start_mark.column
        last = max(_end(vn)[0] for _, vn in parent.value)
        last = max(last, max(_end(kn)[0] for kn, _ in parent.value))
    else:
        indent = " " * (0 if depth == 0 else len(path[:depth]) * len(step))
        last = len(lines) - 1
    dash = _dash(text, step)
    body = [f"{indent}{_scalar(key)}: {_flow(v)}\n"] if _inline(v) else \
        [f"{indent}{_scalar(key)}:\n"] + [ln + "\n" for ln in _block(v, indent + (dash if isinstance(v, list)
                                                                                    else step), step, dash)]
    if depth == 0:
        pre = "" if text.endswith("\n") or not text else "\n"
        return text + pre + "".join(body)
    if last < len(lines) and not lines[last].endswith("\n"):
        lines[last] += "\n"
    return "".join(lines[:last + 1] + body + lines[last + 1:])


def _colon_end(line: str, col: int) -> int:
    i = line.find(":", col)
    return len(line.rstrip("\n")) if i < 0 else i + 1


def _keep_comment(rest: str) -> str:
    """A trailing ``  # comment`` (with its spacing) of ``rest``, else a bare newline."""
    m = re.match(r"^(\s*#.*)$", rest.rstrip("\n"))
    return (m.group(1) if m else "") + "\n"


def _delete(text: str, path: Path) -> str:
    lines = text.splitlines(keepends=True)
    hit, _, _ = _find(_compose(text), path)
    if hit is None:
        return text
    kn, vn = hit
    el, _ = _end(vn)
    if lines[kn.start_mark.line][:kn.start_mark.column].strip():
        raise ConfigError(f"cannot remove {'.'.join(path)}: it shares its line with another key")
    return "".join(lines[:kn.start_mark.line] + lines[el + 1:])


def unified(a: str, b: str, name: str = "config") -> List[str]:
    """The changed lines (``-``/``+``) of the unified diff of ``a`` to ``b``."""
    import difflib

    return [ln for ln in difflib.unified_diff(a.splitlines(), b.splitlines(), f"a/{name}", f"b/{name}", n=0,
                                              lineterm="")
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def strategy_lines(text: str) -> List[Tuple[int, int]]:
    """0-based (first, last) line spans of the strategy keys (:data:`STRATEGY_KEYS`) in ``text``;
    a line outside them changed in the written YAML would be a defect."""
    root = _compose(text)
    spans = []
    from ..config import MCORE_SWAP_KEYS

    mcore = tuple(("model", "model_config", k) for row in MCORE_SWAP_KEYS for k in row[:2] if k)
    for path in STRATEGY_KEYS + mcore:
        hit, _, _ = _find(root, path)
        if hit is not None:
            spans.append((hit[0].start_mark.line, _end(hit[1])[0]))
    return spans



def uniform_probe(text: str, config: str, model: Optional[str], fraction: float) -> str:
    """``tune``'s probe YAML on a LayerSetting path: full recompute on the first ``fraction`` of each stage
    chunk's layers and no select recompute, written by the same emitter as ``plan`` (``CodePath.probe_text``)."""
    from .model import plan_of

    _, plan, _ = plan_of(config, model)
    geo = plan.geometry
    zero = LayerCost(kept=0, host=0, regen=0, flops=0.0)
    full, none = Level("full", (), True, None, zero, 1), Level("none", (), False, None, zero, 0)
    levels: Dict[int, Level] = {}
    for v in range(geo.pp_interleave_num):
        for st in range(geo.pipeline_stage):
            start, n = geo.chunk_starts[v][st], geo.layer_list[v][st]
            k = int(round(n * fraction))
            for i in range(start, start + n):
                levels[i] = full if i - start < k else none
    return emit_result(text, config, geo, [StagePlan(stage=0, fits=True, levels=levels)],
                       plan_of_text=lambda t: plan_of("<string>", model, t)[1]).text
