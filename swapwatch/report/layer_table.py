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
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..model import actions
from ..model.plan_view import VOIDED_BY_RECOMPUTE
from ..text import ranges, write_table

if TYPE_CHECKING:
    from ..model.plan import LayerPlan, Plan
    from ..model.plan_view import PlanView

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
    from ..model.patterns import walk_layout       # not strategy: the plan's view reads this module (no import circle)

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


def cells(plan: "PlanView", layer: int, mtp: bool = False, prefetch: str = "merge") -> Dict[str, str]:
    """The text of every column for one layer of a plan of either path (``PlanView.actions_at``; empty =
    nothing): the paths each pattern reaches (or ``PATTERN (no match)``), ``!`` before a swap recompute voids,
    ``p=`` a swap's prefetch. A layer prefetch (``PlanView.layer_prefetch``: the layer prefetched with this one)
    goes into the layer swap cell (``prefetch="merge"``: ``yes, prefetch → 3``) or a ``prefetch`` cell of its own
    (``"column"``: ``→ 3``)."""
    acts = [a for a in plan.actions_at(layer, mtp) if not a.shadowed]
    out: Dict[str, str] = {a: "" for a in COLUMNS}
    full = next((a for a in acts if a.kind == "full_recompute"), None)
    if full is not None:
        out["full_recompute"] = "yes" if full.logged else "yes*"
    for kind in actions.SELECT_ACTIONS:
        out[kind] = ", ".join(t for a in acts if a.kind == kind for s in a.subjects for t in s.texts())
    swap = next((a for a in acts if a.kind == "layer_swap"), None)
    if swap is not None:
        out["layer_swap"] = (VOIDED if swap.voided else "") + ("yes" if swap.prefetch is None else f"p={swap.prefetch}")
    out["op_swap"] = ", ".join((VOIDED if a.voided else "") + ", ".join(t for s in a.subjects for t in s.texts())
                               + ("" if a.prefetch is None else f" p={a.prefetch}")
                               for a in acts if a.kind == "op_swap")
    to = plan.layer_prefetch(layer)
    if to is not None and prefetch == "column":
        out["prefetch"] = f"→ {to}"
    elif to is not None:
        out["layer_swap"] = f"{out['layer_swap']}, prefetch → {to}" if out["layer_swap"] else f"prefetch → {to}"
    return out


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
VOIDED_LEGEND = VOIDED_BY_RECOMPUTE


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
    from ..model.plan import stage_counts

    return _summary_lines(stage_counts(layer_plans, plan))


def plan_summary(plan: "PlanView") -> List[str]:
    """:func:`stage_summary` of a plan of either path (``PlanView.stage_counts``)."""
    return _summary_lines(plan.stage_counts())


def _summary_lines(counts: List[Tuple[Any, List[int], Dict[str, int]]]) -> List[str]:
    out = []
    for stage, layers, n in counts:
        parts = [f"{k} {v}" for k, v in n.items()]
        out.append(f"stage {stage}: layers {ranges(layers)} ({len(layers)}), " + ", ".join(parts))
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
