"""The one pattern matcher: MindFormers' ``\\.``-segment fullmatch, and the cell walk built on it.

MindFormers never matches a recompute/swap pattern against a whole dotted path. It splits the
pattern on the two characters ``\\.`` and walks the layer's cell tree one segment at a time:
every non-last segment is fullmatched against the names of the current cell's sub-cells (insertion
order) and the walk recurses into each match; the last segment is fullmatched first against
``dir(cell)`` (sorted: primitives and plain attributes) and then against the sub-cell names. What
it logs is *not* the list of everything it touched: at the leaf only the last match survives
(a cell match overrides a primitive match), while matches of inner segments are joined with
``", "``. A pattern that matches nothing contributes nothing and no line at all.

Everything in swapwatch that matches patterns goes through this module: the runtime hooks (walking
real MindSpore cells), ``explain`` (walking the model layout described as data), and ``verify``
(matching logged paths such as ``feed_forward.w1.activation.silu`` back to patterns). User patterns
are matched with the ``regex`` package and a timeout, as MindFormers' ``regex_match`` does, so a
pathological pattern cannot hang the tool; a timeout counts as no match there as here. The timeout
does not cover *compiling*: ``regex`` expands a counted repeat in memory (``a{1000000000}``, 13
bytes, asks for tens of GB), so every segment is first sized by :func:`expansion` and one that
expands past :data:`MAX_EXPANSION` positions is refused (:class:`PatternError`, one line) before
it is compiled, and the distinct segments of one config's patterns together may expand to at most
:data:`MAX_TOTAL_EXPANSION` (:func:`check_total`: 400 patterns each just under the per-segment
bound, a 10 KB YAML, took 3 GB). Compiled segments are kept in one cache bounded by the same total
(:func:`compiled`), not in ``regex``'s own cache of 500 (which 20,000 patterns thrashed, so every
match compiled its pattern again).
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import regex

SEGMENT_SEP = "\\."
#: Seconds one segment match may take before it counts as "no match" (MindFormers uses 1).
MATCH_TIMEOUT = 1.0


#: Positions a segment may expand to once its counted repeats are unrolled (``a{3}`` is 3,
#: ``(ab){2}c`` is 5). ``regex`` spends about 300 bytes per position when compiling, so this keeps
#: one compile under ~30 MB; real recompute patterns are a few dozen positions.
MAX_EXPANSION = 100_000
#: Positions the distinct segments of one config's patterns (select / comm recompute and their
#: excludes, op swap names; YAML or a log's ``initial ... from dict`` line) may unroll to in all:
#: about 200 MB of compiled patterns at worst (measured: 1.5 million positions, 275 MB resident).
#: Real configs use a few hundred (20,000 patterns ``attention\.wqN`` are ~140,000); the
#: per-segment bound alone let 400 patterns take 3 GB.
MAX_TOTAL_EXPANSION = 1_000_000
_COUNT = regex.compile(r"\{\s*(\d*)\s*(?:(,)\s*(\d*)\s*)?\}")


class PatternError(ValueError):
    """A user pattern that is not a valid regular expression (or one too large to compile)."""


@functools.lru_cache(maxsize=4096)
def expansion(segment: str) -> int:
    """An upper bound of the positions ``segment`` unrolls to: every atom counts 1, times the upper
    bound of each counted repeat around it (``{m}``, ``{m,n}``, ``{m,}``); groups and alternatives
    add up. ``*``, ``+`` and ``?`` are loops and cost nothing extra. The scan is linear and never
    compiles anything."""
    stack: List[List[int]] = [[0, 0]]          # per open group: [cost so far, cost of the last atom]
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        frame = stack[-1]
        if c == "\\":
            j = i + 2
            if segment[i + 1:i + 2] in ("p", "P", "N", "x", "u", "U", "g") and segment[j:j + 1] in ("{", "<"):
                close = segment.find("}" if segment[j] == "{" else ">", j)
                j = n if close < 0 else close + 1
            frame[0] += 1
            frame[1] = 1
            i = j
        elif c == "[":
            j = i + 1
            if segment[j:j + 1] == "^":
                j += 1
            if segment[j:j + 1] == "]":
                j += 1
            while j < n and segment[j] != "]":
                j += 2 if segment[j] == "\\" else 1
            frame[0] += 1
            frame[1] = 1
            i = j + 1
        elif c == "(":
            stack.append([0, 0])
            i += 1
        elif c == ")":
            if len(stack) > 1:
                inner = stack.pop()[0]
                stack[-1][0] += inner
                stack[-1][1] = inner
            i += 1
        elif c == "{":
            m = _COUNT.match(segment, i)
            if m and (m.group(1) or m.group(3)):
                times = max(int(m.group(1) or 0), int(m.group(3) or 0))
                frame[0] += frame[1] * (times - 1)
                frame[1] *= times
                i = m.end()
                if frame[0] > MAX_EXPANSION * 10:       # no need to count further
                    break
            else:
                frame[0] += 1
                frame[1] = 1
                i += 1
        elif c in "*+?|":
            i += 1
        else:
            frame[0] += 1
            frame[1] = 1
            i += 1
    return sum(f[0] for f in stack)


def check_size(segment: str) -> None:
    """PatternError when ``segment`` would expand past :data:`MAX_EXPANSION` positions when compiled."""
    if len(segment) > MAX_EXPANSION or expansion(segment) > MAX_EXPANSION:
        raise PatternError(f"pattern segment {_clip(segment)} is too large to compile: its repeats unroll to "
                           f"more than {MAX_EXPANSION:,} positions (swapwatch bounds compiling as MindFormers' "
                           "timeout bounds matching)")


def total_expansion(patterns: Iterable[str]) -> Tuple[int, int, bool]:
    """(positions, distinct segments, one is past the per-segment bound) of ``patterns``
    together: each distinct segment counted once (``feed_forward`` shared by 100 patterns is
    compiled once), each at least 1."""
    segs = {s for p in patterns for s in split_pattern(p)}
    total = 0
    for s in segs:
        one = expansion(s) if len(s) <= MAX_EXPANSION else MAX_EXPANSION + 1
        if one > MAX_EXPANSION:
            return total, len(segs), True
        total += max(1, one)
        if total > MAX_TOTAL_EXPANSION * 10:
            break
    return total, len(segs), False


def check_total(patterns: Iterable[str]) -> None:
    """PatternError when the distinct segments of ``patterns`` (one config's) would unroll to
    more than :data:`MAX_TOTAL_EXPANSION` positions in all. A segment past the per-segment bound
    is left to :func:`check_size`, whose error names that pattern."""
    pats = list(patterns)
    total, segs, single = total_expansion(pats)
    if total > MAX_TOTAL_EXPANSION and not single:
        more = "more than " if total > MAX_TOTAL_EXPANSION * 10 else ""
        raise PatternError(f"the {len(pats):,} patterns of this config ({segs:,} distinct segments) unroll to "
                           f"{more}{total:,} positions in all when compiled, more than the {MAX_TOTAL_EXPANSION:,} "
                           f"swapwatch compiles for one config (each segment may have up to {MAX_EXPANSION:,})")


class _Cache:
    """Compiled segments, least recently used first, bounded by the positions they unrolled to
    (:data:`MAX_TOTAL_EXPANSION`): memory stays bounded however many configs a process reads."""

    def __init__(self, budget: int) -> None:
        self.budget, self.total = budget, 0
        self.items: "OrderedDict[str, Tuple[Any, int]]" = OrderedDict()

    def get(self, segment: str) -> Any:
        hit = self.items.get(segment)
        if hit is not None:
            self.items.move_to_end(segment)
            return hit[0]
        check_size(segment)
        try:
            pat = regex.compile(segment, cache_pattern=False)
        except regex.error as exc:
            raise PatternError(f"invalid pattern segment {segment!r}: {exc}") from None
        cost = max(1, expansion(segment))
        self.items[segment] = (pat, cost)
        self.total += cost
        while self.total > self.budget and len(self.items) > 1:
            _, (_, c) = self.items.popitem(last=False)
            self.total -= c
        return pat


_COMPILED = _Cache(MAX_TOTAL_EXPANSION)


def compiled(segment: str) -> Any:
    """``segment`` compiled (a ``regex`` pattern), sized first (:func:`check_size`) and cached;
    PatternError when it is too large or no regular expression."""
    return _COMPILED.get(segment)


def _clip(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")


def split_pattern(pattern: str) -> List[str]:
    """Split a pattern into segments exactly as MindFormers does (on the literal two chars ``\\.``)."""
    return pattern.split(SEGMENT_SEP)


def segment_fullmatch(segment: str, name: str, timeout: float = MATCH_TIMEOUT) -> bool:
    """True when ``segment`` fullmatches ``name``; a timeout counts as no match
    (``parallel_core/training_graph/transformer/utils.py:regex_match``, which only WARNs).
    Memoised per (segment, name): the walks of a config meet the same pairs on every layer kind
    and every mode (20,000 patterns were 8 million matches, 22 a walk)."""
    if timeout == MATCH_TIMEOUT:
        return _fullmatch_memo(segment, name)
    return _fullmatch(segment, name, timeout)


@functools.lru_cache(maxsize=1 << 18)
def _fullmatch_memo(segment: str, name: str) -> bool:
    return _fullmatch(segment, name, MATCH_TIMEOUT)


def _fullmatch(segment: str, name: str, timeout: float) -> bool:
    pat = compiled(segment)
    try:
        return pat.fullmatch(name, timeout=timeout) is not None
    except TimeoutError:
        return False


def validate(pattern: str) -> Optional[str]:
    """Return why ``pattern`` cannot be compiled, or None when every segment is a valid regex."""
    for seg in split_pattern(pattern):
        try:
            compiled(seg)
        except PatternError as exc:
            return str(exc).replace("invalid pattern segment", "segment", 1)
    return None


def under(path: str, prefix: str, strict: bool = False) -> bool:
    """Is the dotted path ``path`` the cell ``prefix`` or inside it (``strict``: inside only)?
    ``feed_forward.w1.matmul`` is under ``feed_forward``, ``feed_forward_x`` is not; the empty
    prefix (the layer itself) holds everything. The one such test: what a recompute or swap of a
    cell covers, an IR scope, a module path, all nest this way."""
    if not prefix:
        return True
    return path.startswith(prefix + ".") or (not strict and path == prefix)


def path_matches(pattern: str, path: str) -> bool:
    """True when a dotted cell/op path (as MindFormers logs it) is matched by ``pattern``.

    Same number of segments, and each path segment is fullmatched by the pattern segment at the
    same position: the very test the cell walk performs along that path.
    """
    segs = split_pattern(pattern)
    names = path.split(".")
    if len(segs) != len(names):
        return False
    return all(segment_fullmatch(s, n) for s, n in zip(segs, names))


@functools.lru_cache(maxsize=4096)
def logged_path_matches(pattern: str, path: str) -> bool:
    """:func:`path_matches` for reading logs back: cached, because every logged path of every
    rank meets every configured pattern, and a pattern that cannot compile (or times out) matches
    nothing instead of failing the comparison (explain reports such patterns on their own)."""
    try:
        return path_matches(pattern, path)
    except PatternError:
        return False


def patterns_overlap(exclude: str, select: str) -> bool:
    """MindFormers' exclude-vs-select conflict test: same segment count, and every segment pair
    fullmatches in either direction (``feed_forward\\.m.l`` overlaps ``feed_forward\\.mul``)."""
    a, b = split_pattern(exclude), split_pattern(select)
    if len(a) != len(b):
        return False
    return all(segment_fullmatch(x, y) or segment_fullmatch(y, x) for x, y in zip(a, b))


# --------------------------------------------------------------------------------------------
# The cell walk
# --------------------------------------------------------------------------------------------

@dataclass
class Target:
    """One thing a pattern reached: a primitive (``kind='prim'``) or a cell (``kind='cell'``)."""

    path: str          # dotted, relative to the layer, no leading dot: "feed_forward.w1.activation.silu"
    kind: str          # "prim" | "cell"
    obj: Any = None    # the real MindSpore object (hooks) or the layout node (explain)


@dataclass
class WalkResult:
    """What one pattern does on one layer.

    ``targets`` is everything the action is applied to (in MindFormers' order); ``raw_log`` is the
    text MindFormers builds for the log line before its caller trims it (see :func:`log_item`);
    ``skipped_cells`` are cell matches that exclude/comm actions ignore (MindFormers logs an INFO
    line "... is expected to be operation but got cell ..." for each).
    """

    targets: List[Target] = field(default_factory=list)
    raw_log: str = ""
    skipped_cells: List[str] = field(default_factory=list)

    @property
    def matched(self) -> bool:
        return bool(self.raw_log)


class TreeAdapter:
    """How to see a cell tree. Subclass for real MindSpore cells or for layout data."""

    def children(self, node: Any) -> Iterable[Tuple[str, Any]]:
        """Sub-cells as (name, node) in insertion order (``Cell._cells``)."""
        raise NotImplementedError

    def leaf_attrs(self, node: Any) -> Iterable[Tuple[str, Any]]:
        """Leaf candidates that are not sub-cells, as (name, obj) in ``dir()`` (sorted) order.

        Only objects the action can take count: primitives (they have ``recompute``,
        ``add_prim_attr`` and ``_offload``).
        """
        raise NotImplementedError


def walk(adapter: TreeAdapter, layer: Any, pattern: str, mode: str) -> WalkResult:
    """Walk ``pattern`` over ``layer`` the way MindFormers' LayerSetting does.

    ``mode`` decides what a leaf *cell* match means, as in MindFormers:
      * ``"recompute"`` / ``"swap"``: the cell is taken (``cell.recompute()`` / ``cell.offload()``);
      * ``"exclude"`` / ``"comm"`` / ``"comm_exclude"``: primitives only; a cell match is skipped
        and reported in ``skipped_cells``.
    """
    result = WalkResult()
    result.raw_log = _walk(adapter, layer, split_pattern(pattern), "", mode, result)
    return result


def _walk(adapter: TreeAdapter, node: Any, segs: Sequence[str], info: str, mode: str,
          result: WalkResult) -> str:
    seg, rest = segs[0], segs[1:]
    if rest:
        items: List[str] = []
        for name, child in adapter.children(node):
            if segment_fullmatch(seg, name):
                sub = _walk(adapter, child, rest, f"{info}.{name}", mode, result)
                if sub:
                    items.append(sub[1:])
        return " " + ", ".join(items) if items else ""
    log = ""
    for name, obj in adapter.leaf_attrs(node):
        if segment_fullmatch(seg, name):
            result.targets.append(Target(f"{info}.{name}"[1:], "prim", obj))
            log = f"{info}.{name}"
    for name, child in adapter.children(node):
        if segment_fullmatch(seg, name):
            if mode in ("exclude", "comm", "comm_exclude"):
                result.skipped_cells.append(f"{info}.{name}"[1:])
                continue
            result.targets.append(Target(f"{info}.{name}"[1:], "cell", child))
            log = f"{info}.{name}"
    return log


def log_item(raw_log: str, mode: str) -> str:
    """The text one pattern contributes to its ``Set ...`` line.

    Recompute lines drop the first character of the walk's text (a dot or the leading space), so
    they read ``feed_forward.mul`` and, for a 1-segment pattern, ``feed_forward``. ``Set op_swap``
    keeps it: ``.attention`` for a 1-segment pattern, `` attention.flash_attention`` (leading
    space, hence the double space after the colon) for a multi-segment one.
    """
    return raw_log if mode == "swap" else raw_log[1:]


def logged_paths(raw_log: str) -> List[str]:
    """The dotted paths inside a walk's log text (normalised: no leading dot or space)."""
    return [p.strip().lstrip(".") for p in raw_log.split(",") if p.strip()]


# --------------------------------------------------------------------------------------------
# Layout data (a model family's layer tree, see swapwatch/layouts/*.yaml)
# --------------------------------------------------------------------------------------------

@dataclass
class LayoutNode:
    """A cell of a model layout: its primitives (leaf names) and its sub-cells in order."""

    name: str
    prims: List[str] = field(default_factory=list)
    cells: List["LayoutNode"] = field(default_factory=list)

    @classmethod
    def from_data(cls, name: str, data: Any) -> "LayoutNode":
        """Build from YAML data: ``{prims: [...], cells: {name: {...}, ...}}`` (cells ordered)."""
        data = data or {}
        node = cls(name, list(data.get("prims") or []))
        for child_name, child in (data.get("cells") or {}).items():
            node.cells.append(cls.from_data(child_name, child))
        return node

    def paths(self, prefix: str = "") -> List[Tuple[str, str]]:
        """Every (path, kind) below this node, prims and cells, in walk order."""
        out: List[Tuple[str, str]] = []
        for p in sorted(self.prims):
            out.append((f"{prefix}{p}", "prim"))
        for c in self.cells:
            out.append((f"{prefix}{c.name}", "cell"))
            out.extend(c.paths(f"{prefix}{c.name}."))
        return out


class LayoutAdapter(TreeAdapter):
    """Walk a :class:`LayoutNode` tree as if it were a MindSpore cell."""

    def children(self, node: LayoutNode):
        return [(c.name, c) for c in node.cells]

    def leaf_attrs(self, node: LayoutNode):
        return [(p, p) for p in sorted(node.prims)]


def walk_layout(layout: LayoutNode, pattern: str, mode: str) -> WalkResult:
    """:func:`walk` over a model layout (no MindSpore needed)."""
    return walk(LayoutAdapter(), layout, pattern, mode)
