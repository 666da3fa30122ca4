"""Compiled-graph evidence: what MindSpore *really* recomputed and offloaded, from its IR dumps.

Why: a recompute call that runs without error is not a recompute that happened. MindSpore drops a
primitive-level recompute whose consumers on the way to the backward pass are not recomputed (the
tiny model's ``feed_forward.mul`` + ``w1.activation.silu`` marks give 0 clones), and offload outside
a ``lazy_inline`` cell is a no-op. GLOG prints nothing per node; the IR dumps are the only proof.
Dump them with ``MS_DEV_SAVE_GRAPHS=1 MS_DEV_SAVE_GRAPHS_PATH=DIR
MS_DEV_DUMP_IR_PASSES=add_recomputation,validate`` (``swapwatch run --ir`` does).

What a node looks like (one node line, its type line, its scope line; the ``validate`` dump says
``# Fullname with scope: (.../Mul-op0)`` instead, ending in the node's own name)::

  %349(CNode_2691) = PrimFunc_SiLU(%348) {instance name: silu} cnode_attrs: {recompute_sub_graph: U64(3), ..., duplicated: Bool(1), ...}
      : (<Tensor[Float32], (64, 172)>) -> (<Tensor[Float32], (64, 172)>)
      # Scope: (recompute_Default/network-WithLoss/net-TinyLlama/layers-CellList/3-LLamaDecodeLayer/feed_forward-LlamaFeedForward/w1-Linear/activation-LlamaSiLU)

* ``duplicated: Bool(1)``: a recompute clone (the node really is computed twice);
* ``[{ ]recompute: Bool(1)`` (not ``need_cse_after_recompute``): a node marked for recompute;
  with ``primitive_attrs: {recompute: Bool(1)...}`` the mark came from ``Primitive.recompute()``;
* ``Scope: (recompute_...``: the node belongs to a cell on which ``Cell.recompute()`` was called;
* ``primitive_attrs: {offload: Bool(1), backward_prefetch: I64(N)}``: an offload mark;
* ``MoveTo(x, "CPU"|"Ascend", ...)``: the offload/onload nodes MindSpore inserts (lazy_inline only).

Nodes are attributed to a layer by ``layers-CellList/<i>-`` in the scope and to a cell path by
the ``<attr>-<Class>`` parts after it (``feed_forward.w1.activation``); ``instance name`` is not
used for attribution because identical primitives get merged. Files are streamed line by line.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ..errors import InputError
from ..model.patterns import under

_NODE = re.compile(r"^\s+%\d+\([^)]*\) = (?P<op>[\w.]+)\((?P<rest>.*)$")
_SCOPE = re.compile(r"# (?P<full>Fullname with scope|Scope): \((?P<scope>.*)\)\s*$")
_OP_LEAF = re.compile(r"/[A-Za-z_]\w*-op\d+$")      # "Fullname with scope" ends in the node itself
_LAYER = re.compile(r"layers-CellList/(\d+)-[^/]*")
_MARK = re.compile(r"[{ ]recompute: Bool\(1\)")
_PRIM_ATTRS = re.compile(r"primitive_attrs: \{([^}]*)\}")
_PREFETCH = re.compile(r"backward_prefetch: (?:I64\((-?\d+)\)|\"?([\w]+)\"?)")
_INSTANCE = re.compile(r"\{instance name: ([^}]+)\}")
_MOVETO = re.compile(r'MoveTo\([^,]+, "(\w+)"')
_RANK_DIR = re.compile(r"^rank_(\d+)$")
IR_GLOBS = ("*add_recomputation*.ir", "*validate*.ir")

Key = Tuple[Optional[int], str, str]          # (layer, cell path inside the layer, op type)


@dataclass
class IRNode:
    """The parts of one IR node swapwatch needs."""

    op: str                     # "SiLU" (PrimFunc_ prefix removed)
    instance: str               # "silu" (unreliable after merging: display only)
    layer: Optional[int]        # None outside layers-CellList (embedding, head, lazy-inline graphs)
    path: str                   # cell path inside the layer: "feed_forward.w1.activation" ("" = the layer)
    scope: str
    line: int
    duplicated: bool = False
    marked: bool = False        # [{ ]recompute: Bool(1), not a clone
    prim_marked: bool = False   # the mark is a Primitive.recompute() (primitive_attrs)
    cell_recompute: bool = False  # Scope: (recompute_...
    offload: bool = False
    prefetch: Optional[str] = None
    moveto: Optional[str] = None  # target of a MoveTo node


@dataclass
class IREvidence:
    """Evidence from the IR dumps of one rank (all graphs of that rank merged)."""

    rank: Optional[int] = None
    files: List[str] = field(default_factory=list)
    clones: Counter = field(default_factory=Counter)           # Key -> duplicated nodes
    marked: Counter = field(default_factory=Counter)           # Key -> marked, not cloned, nodes
    prim_marked: Counter = field(default_factory=Counter)      # Key -> Primitive.recompute() marks
    cell_scoped: Counter = field(default_factory=Counter)      # (layer, path) -> nodes in recompute_ scope
    offload: Counter = field(default_factory=Counter)          # (layer, path, op, prefetch) -> marks
    moveto: Counter = field(default_factory=Counter)           # (target, prefetch) -> MoveTo nodes
    sources: Dict[Key, str] = field(default_factory=dict)      # first file:line per marked key
    instances: Dict[Key, str] = field(default_factory=dict)    # an instance name per key (display)

    def op_path(self, key: Key) -> str:
        """``feed_forward.w1.activation.silu`` for display (instance name, else the op type)."""
        _layer, path, op = key
        leaf = self.instances.get(key) or op
        return f"{path}.{leaf}" if path else leaf

    # -- questions the checks ask ----------------------------------------------------------
    def clone_count(self, layer: Optional[int] = None, path: Optional[str] = None) -> int:
        """Clones on ``layer`` (all layers when None) under ``path`` (a cell path prefix)."""
        return sum(n for (lay, p, _), n in self.clones.items()
                   if (layer is None or lay == layer) and (path is None or under(p, path)))

    def recomputed_layers(self) -> List[int]:
        return sorted({k[0] for k in self.clones if k[0] is not None})

    def recomputed_paths(self, layer: int) -> List[str]:
        return sorted({k[1] for k in self.clones if k[0] == layer})

    def cell_recompute_layers(self) -> List[int]:
        return sorted({lay for (lay, _p) in self.cell_scoped if lay is not None})

    def ineffective_prim_marks(self) -> List[Tuple[Key, int]]:
        """Primitive-level recompute marks with no clone of the same op at the same place."""
        return sorted(((k, n) for k, n in self.prim_marked.items() if not self.clones.get(k)),
                      key=lambda kn: (-1 if kn[0][0] is None else kn[0][0], kn[0][1], kn[0][2]))

    def ineffective_cell_layers(self) -> List[int]:
        """Layers with nodes in a ``recompute_`` scope but not one clone."""
        return [lay for lay in self.cell_recompute_layers() if self.clone_count(lay) == 0]

    def offload_marks(self) -> int:
        return sum(self.offload.values())

    def offload_layers(self) -> Dict[Optional[int], List[str]]:
        """layer -> the distinct prefetch values marked on it."""
        out: Dict[Optional[int], set] = {}
        for (lay, _p, _op, pf), _n in self.offload.items():
            out.setdefault(lay, set()).add(pf)
        return {k: sorted(v) for k, v in out.items()}

    def summary(self) -> Dict[str, object]:
        return {
            "rank": self.rank, "files": self.files, "clones": sum(self.clones.values()),
            "recomputed_layers": self.recomputed_layers(),
            "marked_not_cloned": sum(self.marked.values()),
            "ineffective_prim_marks": [{"layer": k[0], "path": self.op_path(k), "op": k[2], "nodes": n}
                                       for k, n in self.ineffective_prim_marks()],
            "offload_marks": self.offload_marks(),
            "offload_layers": {str(k): v for k, v in self.offload_layers().items()},
            "moveto": {f"{t}:{p}": n for (t, p), n in self.moveto.items()},
        }


@dataclass
class IRDump:
    """IR evidence of a run: one :class:`IREvidence` per rank (``None`` when the rank is unknown)."""

    ranks: Dict[Optional[int], IREvidence] = field(default_factory=dict)

    def __iter__(self) -> Iterator[IREvidence]:
        return iter(self.ranks[r] for r in sorted(self.ranks, key=lambda r: -1 if r is None else r))


def cell_path(scope: str) -> Tuple[Optional[int], str]:
    """``.../layers-CellList/3-LLamaDecodeLayer/feed_forward-X/w1-Linear`` -> (3, "feed_forward.w1")."""
    m = _LAYER.search(scope)
    if not m:
        return None, ""
    rest = scope[m.end():].strip("/")
    names = [part.split("-", 1)[0] for part in rest.split("/") if part]
    return int(m.group(1)), ".".join(names)


def iter_nodes(path: Union[str, os.PathLike]) -> Iterator[IRNode]:
    """Every node of one ``.ir`` file, streamed (files are 10 MB+ for real models)."""
    pending: Optional[IRNode] = None
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if pending is not None:
                sm = _SCOPE.search(line) if "scope: (" in line or "Scope: (" in line else None
                if sm:
                    scope = sm.group("scope")
                    if sm.group("full") != "Scope":
                        scope = _OP_LEAF.sub("", scope)
                    _set_scope(pending, scope)
                    yield pending
                    pending = None
                    continue
                if lineno - pending.line > 3 or line.lstrip().startswith("%"):
                    yield pending
                    pending = None
            if "%" not in line or " = " not in line:
                continue
            m = _NODE.match(line)
            if m:
                pending = _node(m, line, lineno)
    if pending is not None:
        yield pending


def _node(m: "re.Match", line: str, lineno: int) -> IRNode:
    op = m.group("op")
    op = op[len("PrimFunc_"):] if op.startswith("PrimFunc_") else op
    inst = _INSTANCE.search(line)
    node = IRNode(op=op, instance=inst.group(1) if inst else "", layer=None, path="", scope="", line=lineno)
    node.duplicated = "duplicated: Bool(1)" in line
    node.marked = not node.duplicated and bool(_MARK.search(line))
    pa = _PRIM_ATTRS.search(line)
    node.prim_marked = node.marked and bool(pa and _MARK.search(" " + pa.group(1)))
    if "offload: Bool(1)" in line:
        node.offload = True
    if "backward_prefetch" in line:
        pf = _PREFETCH.search(line)
        if pf:
            node.prefetch = pf.group(1) or pf.group(2)
    if op == "MoveTo":
        mt = _MOVETO.search(line)
        node.moveto = mt.group(1) if mt else "?"
    return node


def _set_scope(node: IRNode, scope: str) -> None:
    node.scope = scope
    node.cell_recompute = scope.startswith("recompute_")
    node.layer, node.path = cell_path(scope)


def read_file(path: Union[str, os.PathLike], ev: Optional[IREvidence] = None,
              recompute: bool = True, offload: bool = True) -> IREvidence:
    """Add one file's nodes to ``ev`` (recompute facts and/or offload facts)."""
    ev = ev or IREvidence()
    ev.files.append(str(path))
    for n in iter_nodes(path):
        key = (n.layer, n.path, n.op)
        if recompute:
            if n.duplicated:
                ev.clones[key] += 1
            elif n.marked:
                ev.marked[key] += 1
                ev.sources.setdefault(key, f"{path}:{n.line}")
                if n.instance:
                    ev.instances.setdefault(key, n.instance)
                if n.prim_marked:
                    ev.prim_marked[key] += 1
            if n.cell_recompute:
                ev.cell_scoped[(n.layer, n.path)] += 1
        if offload:
            if n.offload:
                ev.offload[(n.layer, n.path, n.op, n.prefetch or "?")] += 1
            if n.moveto:
                ev.moveto[(n.moveto, n.prefetch or "?")] += 1
    return ev


def find_ir_files(root: Union[str, os.PathLike]) -> Dict[Optional[int], Dict[str, List[Path]]]:
    """rank -> {"add_recomputation": [...], "validate": [...]} under ``root`` (a file or a dir).

    The rank is the nearest ``rank_<n>`` directory above a file (MindSpore's per-rank layout),
    else None (a single-process dump).
    """
    root = Path(root)
    if not root.exists():
        raise InputError("no such IR file or directory", file=str(root))
    files = [root] if root.is_file() else sorted(p for g in IR_GLOBS for p in root.rglob(g))
    out: Dict[Optional[int], Dict[str, List[Path]]] = {}
    for f in files:
        rank = None
        for part in reversed(f.relative_to(root).parts[:-1] if root.is_dir() else ()):
            m = _RANK_DIR.match(part)
            if m:
                rank = int(m.group(1))
                break
        kind = "add_recomputation" if "add_recomputation" in f.name else "validate" if "validate" in f.name else None
        if kind:
            out.setdefault(rank, {"add_recomputation": [], "validate": []})[kind].append(f)
    if not out:
        raise InputError("no *add_recomputation*.ir or *validate*.ir dumps found "
                         "(dump them with swapwatch run --ir)", file=str(root))
    return out


def read_ir(root: Union[str, os.PathLike]) -> IRDump:
    """Evidence per rank. Recompute facts come from the ``add_recomputation`` dumps (the pass that
    clones), offload facts from ``validate`` (after offload insertion); when only one kind exists it
    serves for both."""
    dump = IRDump()
    for rank, kinds in find_ir_files(root).items():
        ev = IREvidence(rank=rank)
        rec, val = kinds["add_recomputation"], kinds["validate"]
        for f in rec:
            read_file(f, ev, recompute=True, offload=not val)
        for f in val:
            read_file(f, ev, recompute=not rec, offload=True)
        dump.ranks[rank] = ev
    return dump


def offload_outside_lazy_inline(ev: IREvidence) -> List[str]:
    """Human-readable report lines: offload marks that cannot take effect (:func:`offload_ignored`,
    each led by its layer)."""
    return [f"{'outside the decoder layers' if layer is None else f'layer {layer}'}: {text}"
            for layer, text, _ in offload_ignored(ev)]


def offload_ignored(ev: IREvidence) -> List[Tuple[Optional[int], str, List[str]]]:
    """Offload marks that cannot take effect, per layer (None: outside the decoder layers):
    (layer, what happened, the backward_prefetch values marked).

    Offload only acts inside a ``lazy_inline`` cell, where MindSpore inserts ``MoveTo`` nodes (and
    the scope loses its ``layers-CellList/<i>`` part). Marks on nodes with a layer index and no
    ``MoveTo`` anywhere mean MindSpore ignored them (it also warns once per node).
    """
    if not ev.offload or ev.moveto:
        return []
    out = []
    for layer, prefetches in sorted(ev.offload_layers().items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        n = sum(c for (lay, _p, _o, _pf), c in ev.offload.items() if lay == layer)
        out.append((layer, f"{n} node(s) marked offload (backward_prefetch {', '.join(prefetches)}) "
                           "but no MoveTo inserted: outside a lazy_inline cell, the offload does not take effect",
                    list(prefetches)))
    return out
