"""The one vocabulary and look of every per-layer table: ``explain``, ``verify`` and ``diff``.

A user reads the plan before launch (explain), the run after it (verify) and the change between
two configs or runs (diff); the three tables name the same things the same way so that a line of
one can be compared with a line of another by eye: the same column names, the same stage label
(``0``, or ``0 v1`` for interleave chunk 1), the same mark for "nothing here" (``-``), the same
text for a pattern (the op paths it reaches on the model layout, as MindFormers' walk finds them,
or ``PATTERN (no match)``), ``!`` before a swap that recompute voids, and consecutive identical
layers folded into ranges (``0-7``) unless the caller asks for every layer.
"""
from __future__ import annotations

import textwrap
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import actions
from .text import ranges, write_table

if TYPE_CHECKING:
    from .plan import LayerPlan, Plan

#: action -> column header, in MindFormers' per-layer order (events.ACTIONS).
COLUMNS = actions.COLUMNS
#: How the cell walk treats each pattern action (patterns.walk ``mode``).
WALK_MODE = actions.WALK_MODE
NONE = "-"          # nothing applied in this cell
DIFF = "✗"          # verify/diff: the two sides differ here
UNKNOWN = "?"       # verify: the log cannot speak for this cell
VOIDED = "!"        # a swap that recompute on the same layer voids (SW201)
WRAP = 50           # a cell wider than this wraps onto continuation lines
WRAP_DIFF = 90      # ... in a table of "✗ expected → actual" cells, which hold two sides


def stage_label(stage: Any, interleave: Any, interleaved: bool) -> str:
    """``0`` without interleave; ``0 v1`` (stage 0, interleave chunk 1) with it."""
    if stage is None:
        return UNKNOWN
    return f"{stage} v{interleave or 0}" if interleaved else str(stage)


def pattern_text(walk: Any, pattern: str, mode: str) -> List[str]:
    """A pattern as the op paths it reaches; ``PATTERN (no match)`` when it reaches nothing and
    ``PATTERN (cell only: no effect)`` when it reaches only cells the mode skips.

    ``walk`` is the layer's walker (``Plan.walker(layer)``: each layer resolves on its own tree of
    the model family), a layout to walk, or None (the pattern is shown as written)."""
    from .patterns import walk_layout       # not strategy: the plan's view reads this module (no import circle)

    if walk is None:
        return [pattern]
    try:
        res = walk(pattern, mode) if callable(walk) else walk_layout(walk, pattern, mode)
    except Exception:            # an invalid regex is reported by config checks, not here
        return [f"{pattern} (invalid pattern)"]
    if res.targets:
        return [t.path for t in res.targets]
    if res.skipped_cells:
        return [f"{pattern} (cell only: no effect)"]
    return [f"{pattern} (no match)"]


def layer_walk(plan: Any, lp: Any, mtp: bool = False) -> Any:
    """The walker of ``lp``'s own tree (dense / MoE / MTP kind of the plan's family)."""
    walker = getattr(plan, "walker", None)
    return walker(lp.layer, mtp) if callable(walker) else None


def _voided(lp: Any, key: str) -> bool:
    """The layer swap (``key == "layer_swap"``, wholly or in part) or the op_swap pattern ``key`` is
    voided by recompute (:class:`swapwatch.plan.Override`)."""
    return lp.layer_swap_touched if key == "layer_swap" else lp.op_swap_voided(key)


def plan_cells(lp: "LayerPlan", walk: Any) -> Dict[str, str]:
    """The text of every column for one :class:`~swapwatch.strategy.LayerPlan` (empty = nothing);
    ``walk`` as for :func:`pattern_text`."""
    cells: Dict[str, str] = {}
    if lp.full_recompute:
        cells["full_recompute"] = "yes" if lp.full_recompute_logged else "yes*"
    else:
        cells["full_recompute"] = ""
    for action in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                   "select_comm_recompute_exclude"):
        items: List[str] = []
        for pat in lp.patterns(action):
            items.extend(pattern_text(walk, pat, WALK_MODE[action]))
        cells[action] = ", ".join(items)
    if lp.layer_swap is not None:
        cells["layer_swap"] = f"{VOIDED if _voided(lp, 'layer_swap') else ''}p={lp.layer_swap}"
    else:
        cells["layer_swap"] = ""
    ops = []
    for pat, prefetch in (lp.op_swap or {}).items():
        mark = VOIDED if _voided(lp, pat) else ""
        ops.append(f"{mark}{', '.join(pattern_text(walk, pat, 'swap'))} p={prefetch}")
    cells["op_swap"] = ", ".join(ops)
    return cells


def logged_cells(items: Sequence[Any]) -> Dict[str, str]:
    """The text of every column for what a log shows at one layer (``Seen`` items: action, path,
    value), in the same words as :func:`plan_cells`."""
    cells = {a: "" for a in COLUMNS}
    for action in COLUMNS:
        got = [s for s in items if s.action == action]
        if not got:
            continue
        if action == "full_recompute":
            cells[action] = "yes"
        elif action == "layer_swap":       # a line without a prefetch (apply_ac's) says the swap alone
            cells[action] = ", ".join("yes" if s.value is None else f"p={s.value}" for s in got)
        elif action == "op_swap":
            cells[action] = ", ".join(str(s.path) if s.value is None else f"{s.path} p={s.value}" for s in got)
        else:
            cells[action] = ", ".join(str(s.path) for s in got)
    return cells


#: what :data:`VOIDED` means on a LayerSetting plan (``PlanView.voided_legend``)
VOIDED_LEGEND = "swap voided by recompute on that layer (SW201)"


def legend(texts: Iterable[str], voided: str = VOIDED_LEGEND) -> List[str]:
    """The legend lines a table needs for the marks its cells use (``voided``: what :data:`VOIDED` means on the
    plan shown, ``PlanView.voided_legend``)."""
    joined = " ".join(texts)
    out = []
    if "yes*" in joined:
        out.append("yes* = fully recomputed without a log line")
    if VOIDED in joined:
        out.append(f"{VOIDED} = {voided}")
    if "p=" in joined:
        out.append("p = backward_prefetch")
    return out


# ---------------------------------------------------------------------------------------------
# Rows, folding, the grid
# ---------------------------------------------------------------------------------------------

def fold(rows: List[Any], key: Callable[[Any], Any], layers: Callable[[Any], List[int]],
         foldable: Callable[[Any], bool] = lambda r: True) -> List[Any]:
    """Merge consecutive rows whose ``key`` is equal and whose layers follow each other.

    ``layers(row)`` is the row's (mutable) list of layer ids; merged rows extend the first."""
    out: List[Any] = []
    for row in rows:
        prev = out[-1] if out else None
        if (prev is not None and foldable(row) and foldable(prev)
                and layers(prev)[-1] + 1 == layers(row)[0] and key(prev) == key(row)):
            layers(prev).extend(layers(row))
        else:
            out.append(row)
    return out


def layer_label(layers: Sequence[int], mtp: bool = False) -> str:
    """``3``, ``0-7``; an MTP layer (set by a second LayerSetting as layer num_layers - 1) is
    ``3 (MTP)``."""
    if mtp:
        return f"{layers[0]} (MTP)"
    a, b = layers[0], layers[-1]
    return str(a) if a == b else f"{a}-{b}"


def grid(header: List[str], body: List[List[str]], wrap: int = WRAP) -> List[str]:
    """A per-layer table (:func:`swapwatch.text.write_table`): an empty cell shows ``-``; a cell
    wider than ``wrap`` (a ``✗ a → b`` cell: :data:`WRAP_DIFF`) continues on the next lines of the row."""
    return write_table(header, [[_wrap(c, WRAP_DIFF if str(c).startswith(DIFF) else wrap) for c in row]
                                for row in body])


def _wrap(text: str, width: int) -> List[str]:
    text = str(text) if text not in (None, "") else NONE
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False) or [text]


def used_columns(rows: Iterable[Dict[str, str]], always: Sequence[str] = ("full_recompute",)) -> List[str]:
    """The action columns worth a column: those some row fills (plus ``always``)."""
    rows = list(rows)
    return [a for a in COLUMNS if a in always or any(r.get(a) for r in rows)]


# ---------------------------------------------------------------------------------------------
# Per-stage summary
# ---------------------------------------------------------------------------------------------

def stage_summary(layer_plans: Sequence["LayerPlan"], plan: Optional["Plan"] = None) -> List[str]:
    """One line per pipeline stage: its layers and how many get each mechanism, e.g.
    ``stage 0: layers 0-7 (8), full 3, select 2, comm 0, swap 1`` (a stage's interleave chunks
    together: memory is per device); a swap voided by recompute is counted apart (``voided swap 1``).
    With the ``plan`` (a family it can walk), a layer counts only for what applies there: select,
    comm and op-swap patterns that reach nothing on the layer's tree do not count (issue 21.8:
    ``select_recompute: True`` on Qwen3-MoE expands to defaults that match nothing)."""
    return _summary_lines(stage_counts(layer_plans, plan))


def stage_counts(layer_plans: Sequence["LayerPlan"], plan: Optional["Plan"] = None
                 ) -> List[Tuple[Any, List[int], Dict[str, int]]]:
    """Per stage of a LayerSetting plan: ``(stage, its layers, {full, select, comm, swap[, voided swap]: n})``,
    as :func:`stage_summary` says them."""
    by_stage: "OrderedDict[Any, List[Any]]" = OrderedDict()
    for lp in sorted(layer_plans, key=lambda x: (x.stage, x.layer)):
        by_stage.setdefault(lp.stage, []).append(lp)
    fam = plan.family if plan is not None else None
    walkable = plan is not None and (fam is None or fam.known)

    def applies(lp: Any, pats: Any, mode: str) -> bool:
        if not pats:
            return False
        if not walkable:
            return True
        walk = layer_walk(plan, lp)
        for pat in pats:
            try:
                if walk(pat, mode).targets:
                    return True
            except Exception:       # noqa: BLE001 - an invalid pattern is the config checks' to report
                return True
        return False

    return _counts(by_stage, applies)


def plan_summary(plan: Any) -> List[str]:
    """:func:`stage_summary` of a plan of either path (``PlanView.stage_counts``)."""
    return _summary_lines(plan.stage_counts())


def _summary_lines(counts: List[Tuple[Any, List[int], Dict[str, int]]]) -> List[str]:
    out = []
    for stage, layers, n in counts:
        parts = [f"{k} {v}" for k, v in n.items()]
        out.append(f"stage {stage}: layers {ranges(layers)} ({len(layers)}), " + ", ".join(parts))
    return out


def _counts(by_stage: "OrderedDict[Any, List[Any]]", applies: Callable[[Any, Any, str], bool]
            ) -> List[Tuple[Any, List[int], Dict[str, int]]]:
    out = []
    for stage, lps in by_stage.items():
        counts = {"full": sum(1 for lp in lps if lp.full_recompute),
                  "select": sum(1 for lp in lps if applies(lp, lp.select_recompute, WALK_MODE["select_recompute"])),
                  "comm": sum(1 for lp in lps if applies(lp, lp.select_comm_recompute,
                                                          WALK_MODE["select_comm_recompute"])),
                  "swap": sum(1 for lp in lps if lp.layer_swap is not None
                              or applies(lp, list(lp.op_swap or {}), "swap"))}
        voided = sum(1 for lp in lps if lp.swap_overridden)
        if voided:
            counts["voided swap"] = voided
        out.append((stage, [lp.layer for lp in lps], counts))
    return out


def pairs(a: Dict[str, str], b: Dict[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """Cell texts for an A-vs-B row: equal cells as they are, differing ones ``✗ a → b``; and
    the actions that differ."""
    out, differ = {}, []
    for action in COLUMNS:
        x, y = a.get(action, ""), b.get(action, "")
        if x == y:
            out[action] = x
        else:
            out[action] = f"{DIFF} {x or NONE} → {y or NONE}"
            differ.append(action)
    return out, differ
