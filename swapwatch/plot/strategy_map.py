"""``plot strategy``: a layer × mechanism map of what the config asks for and what the logs show.

Columns are layers (pipeline stages marked), rows are mechanisms, one row per pattern where the
mechanism is pattern-driven (``select recompute · feed_forward\\.mul``): a cell is filled where
that thing is applied at that layer. Swap cells carry their ``backward_prefetch``; swaps that
recompute overrides (they are logged, and do nothing) are crossed out in red. Given both a config
and logs, the map shows both panels when they differ, with the differing cells outlined; the
per-layer comparison is verify's own (:mod:`swapwatch.compare`, the very object when the plot is
drawn from a :class:`~swapwatch.results.VerifyResult`), so the plot and ``swapwatch verify`` cannot
disagree.
"""
from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, AbstractSet, Any, Dict, List, Optional, Set, Tuple

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from .. import actions, patterns
from ..compare import Comparison, compare
from ..errors import InputError
from ..layer_table import layer_walk, stage_label
from ..plan_view import is_view
from . import _render
from .result import StrategyPlot

if TYPE_CHECKING:
    from ..plan import LayerPlan, Plan

FRAME_COLUMNS = ["source", "rank", "layer", "stage", "interleave", "mechanism", "item", "value",
                 "overridden", "partial", "why", "paths", "effect"]
#: ``effect`` of a config row: applied (""), a pattern that reaches nothing on the model layout
#: (``no_match``: MindFormers applies and logs nothing), or a select pattern configured on a layer
#: that full recompute covers (``voided``: MindFormers never applies it there, SW105).
NO_MATCH, VOIDED = "no_match", "voided"
#: PyNative: a configured comm path that is a cell (apply_ac leaves it, SW507)
NOT_EFFECTIVE = "not_effective"
NO_MATCH_MARK = "∅"
#: A map wider than this many layers wraps onto several bands (a 48-layer map is two bands of 24).
BAND_LAYERS = 32
#: Above this many layers, neighbouring layers whose cells are all the same (in every panel, the
#: differences and the pipeline chunk included) are drawn as one column named by their range, as
#: verify's table folds them (:func:`_fold`); and the columns left wrap onto at most
#: :data:`MAX_BANDS` bands. A 10,000-layer map was 313 bands of 32 and ran for minutes.
FOLD_LAYERS = 256
MAX_BANDS = 16

#: Row order, display names and colours; excludes are grey and hatched: they *remove* recompute.
MECHANISMS = tuple((k.name, k.plot_name, k.color) for k in actions.KINDS)
_NAME = {m: n for m, n, _ in MECHANISMS}
_COLOR = {m: c for m, _, c in MECHANISMS}
_ORDER = {m: i for i, (m, _, _) in enumerate(MECHANISMS)}
_SWAPS = actions.SWAP_ACTIONS
DIFF_COLOR = "#e6550d"
OVERRIDE_COLOR = "#d62728"


# ---- data -------------------------------------------------------------------------------------

def _is_plan(obj: Any) -> bool:
    """A plan of either path (:class:`swapwatch.plan_view.PlanView`), not a log or a result."""
    return is_view(obj)


def _global_ids(obj: Any) -> bool:
    """The plan's layers are global ids (apply_pp splits them afterwards) and its swaps prefetch a layer ``→j``
    (``PlanView.global_layer_ids``: the ``apply_ac`` view)."""
    return bool(getattr(obj, "global_layer_ids", False))


def _reaches_nothing(plan: "Plan", lp: "LayerPlan", pattern: str, mech: str) -> bool:
    """True when ``pattern`` reaches no op on ``lp``'s own tree (its family's dense / MoE / MTP
    kind, MindFormers' walk). An unknown family resolves nothing (SW307 says so): its patterns
    are drawn as applied rather than all marked as reaching nothing."""
    fam = plan.family
    if fam is not None and not fam.known:
        return False
    walker = layer_walk(plan, lp)            # a decoder layer (the MTP layers are not in plan.layers)
    if walker is None:
        return False
    try:
        return not walker(pattern, actions.WALK_MODE[mech]).targets
    except Exception:            # an invalid regex is reported by the config checks, not drawn
        return False


def _voided_selects(plan: "Plan") -> List[Tuple[int, str, str]]:
    """(layer, mechanism, pattern) of select / comm patterns configured on a layer that full
    recompute covers, where MindFormers never applies them: as the engine recorded them
    (``LayerPlan.select_shadowed``, the record SW105 reads too)."""
    return [(lp.layer, mech, pat) for lp in plan.layers
            for mech, pats in lp.select_shadowed.items() for pat in pats]


def _plan_rows(plan: "Plan") -> List[tuple]:
    """The config rows of a LayerSetting plan (an ``apply_ac`` plan makes its own: ``strategy_rows_hook``)."""
    rows = []
    stage_of = {lp.layer: (lp.stage, lp.interleave) for lp in plan.layers}
    for layer, mech, pat in _voided_selects(plan):
        st, v = stage_of[layer]
        rows.append(("config", None, layer, st, v, mech, pat, True, False, False,
                     "the layer is fully recomputed", (), VOIDED))
    for lp in plan.layers:
        # the whole layer swap voided (the layer is fully recomputed), or only the part of it that a
        # select pattern recomputes (swapwatch.plan.Override scopes "layer" / "part")
        whole = lp.layer_swap_voided
        part = [o for o in lp.swap_overridden if o.scope == "part"]

        def add(mech, item, value, overridden=False, partial=False, reason=""):
            effect = NO_MATCH if item is not None and _reaches_nothing(plan, lp, item, mech) else ""  # noqa: B023
            rows.append(("config", None, lp.layer, lp.stage, lp.interleave, mech, item, value,  # noqa: B023
                         bool(overridden), bool(partial), reason, (), effect))
        if lp.full_recompute:
            add("full_recompute", None, True)
        for mech in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                     "select_comm_recompute_exclude"):
            for pat in lp.patterns(mech):
                add(mech, pat, True)
        if lp.layer_swap is not None:
            full = whole or lp.full_recompute
            reason = "; ".join(o.why for o in lp.swap_overridden if o.action == "layer_swap")
            add("layer_swap", None, lp.layer_swap, full or bool(part), not full and bool(part), reason)
        for pat, prefetch in (lp.op_swap or {}).items():
            why = next((o.why for o in lp.swap_overridden if o.scope == "op" and o.pattern == pat), "")
            add("op_swap", pat, prefetch, whole or lp.op_swap_voided(pat), False, why)
    return rows


def _geometry(rank_log: Any, plan: Any) -> Tuple[List[int], List[int]]:
    """Stage and interleave id per layer: from the log's own geometry lines, else from the plan."""
    g = rank_log.geometry() if rank_log is not None else {}
    pp, vv = g.get("pp_ids"), g.get("interleave_ids")
    if plan is not None:
        pp = pp or [lp.stage for lp in plan.layers]
        vv = vv or [lp.interleave for lp in plan.layers]
    return list(pp or []), list(vv or [])


def pick_rank(runlog: Any, rank: Optional[int] = None) -> int:
    """The rank to map: the one asked for, else the lowest rank that logged strategy actions."""
    if rank is not None:
        if rank not in runlog.ranks:
            raise InputError(f"rank {rank} is not in the logs (they have ranks {sorted(runlog.ranks)})")
        return rank
    with_actions = [r for r in sorted(runlog.ranks) if runlog.ranks[r].actions]
    if not with_actions:
        raise InputError("no recompute/swap actions in the logs (no `Set ... at layer` lines or SWAPWATCH "
                         "apply events): run through `swapwatch run`, or keep MindFormers' INFO log lines")
    return with_actions[0]


def _log_rows(runlog: Any, rank: int, plan: Optional["Plan"] = None) -> List[tuple]:
    """``rank``'s logged rows; ``plan``: a LayerSetting plan the comparison reads (``comparable``), or None."""
    rl = runlog.ranks[rank]
    pp, vv = _geometry(rl, plan)
    plan_patterns: Dict[Tuple[int, str], List[str]] = {}
    if plan is not None:
        for lp in plan.layers:
            for mech in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                         "select_comm_recompute_exclude"):
                plan_patterns[(lp.layer, mech)] = list(lp.patterns(mech))
            plan_patterns[(lp.layer, "op_swap")] = list((lp.op_swap or {}).keys())
    rows: Dict[tuple, list] = {}
    acts = sorted(rl.actions, key=lambda a: 0 if a.origin == "swapwatch" else 1)   # authoritative first
    for a in acts:
        for path, value in a.items():
            item = path
            if path is not None:
                cands = [p for p in plan_patterns.get((a.layer, a.action), []) if patterns.logged_path_matches(p, path)]
                item = cands[0] if cands else (a.pattern or path)
            key = (a.layer, a.action, item)
            if key in rows:
                if path and path not in rows[key][11]:
                    rows[key][11] = rows[key][11] + (path,)
                continue
            stage = pp[a.layer] if 0 <= a.layer < len(pp) else 0
            inter = vv[a.layer] if 0 <= a.layer < len(vv) else 0
            rows[key] = ["logs", rank, a.layer, stage, inter, a.action, item, value, False, False, "",
                         (path,) if path else (), ""]
    # recompute overrides swap: MindFormers logs the swap anyway and only WARNs (_check_swap_recompute_conflict)
    for n in rl.of("notice"):
        if n.what != "swap_conflict":
            continue
        op = str(n.data.get("op") or n.data.get("pattern") or "All")
        layer = n.data.get("layer")
        text = str(n.data.get("text") or "")
        for row in rows.values():
            if row[5] not in _SWAPS or (layer is not None and row[2] != int(layer)):
                continue
            whole = op.lower() == "all"
            if whole or row[6] == op or any(patterns.logged_path_matches(op, p) for p in row[11]):
                row[8], row[9], row[10] = True, False, text
            elif row[5] == "layer_swap" and not row[8]:
                row[8], row[9], row[10] = True, True, text     # a recomputed op inside the swapped layer
    return [tuple(r) for r in rows.values()]


def strategy_frame(what: Any, rank: Optional[int] = None, plan: Any = None) -> pd.DataFrame:
    """One row per (layer, mechanism, item) configured or logged: the data behind :func:`plot_strategy`.

    ``what`` is a :class:`~swapwatch.strategy.Plan` (source ``config``: what MindFormers will apply)
    or a :class:`~swapwatch.parsers.model.RunLog` (source ``logs``: what one rank logged; ``rank``
    picks it, default the lowest rank with actions). ``item`` is the pattern (None for whole-layer
    mechanisms); for logs it is the configured pattern the logged path matches when ``plan`` is
    given, else the SWAPWATCH pattern, else the logged path. ``value`` is the prefetch for swaps,
    True otherwise; ``overridden`` marks swaps that recompute makes ineffective; ``paths`` are the
    logged op paths (empty for config rows); ``effect`` (config rows) is ``""`` when applied,
    ``no_match`` for a pattern that reaches nothing on the layout, ``voided`` for a select pattern
    configured where full recompute covers the layer (never applied there, as the engine records it).
    """
    if _is_plan(what):
        rows = what.strategy_rows_hook()        # a path with its own rows (the view's), else the plan's
        if rows is None:
            rows = _plan_rows(what)
    elif hasattr(what, "ranks"):
        # logged paths are matched to the configured patterns only where verify's comparison reads the plan
        rows = _log_rows(what, pick_rank(what, rank), plan if plan is not None and plan.comparable else None)
    else:
        raise TypeError(f"strategy_frame needs a Plan or a RunLog, not {type(what).__name__}")
    df = pd.DataFrame(rows, columns=FRAME_COLUMNS)
    if df.empty:
        return df
    df["_o"] = df["mechanism"].map(_ORDER)
    df = df.sort_values(["_o", "item", "layer"], na_position="first", kind="mergesort")
    df = df.drop(columns="_o").reset_index(drop=True)
    df["item"] = df["item"].astype(object).where(df["item"].notna(), None)
    df.attrs["pynative"] = _global_ids(what) or _global_ids(plan)      # the legend's "→j" swaps
    return df


def frame_differences(plan: Any, runlog: Any, rank: int, comparison: Optional[Comparison] = None) -> pd.DataFrame:
    """Cells where the logs differ from the config on ``rank``, from verify's comparison
    (``comparison`` when the caller has it, e.g. a VerifyResult's; else made here).

    Columns: ``layer``, ``mechanism``, ``item``, ``kind`` (``missing`` | ``extra`` | ``value``),
    ``expected``, ``actual``. Empty when the run did what the config says.
    """
    if comparison is None:
        comparison = compare(plan, runlog)
    diff = comparison.ranks.get(rank)
    rows = []
    if diff is not None:
        cut = set(diff.cut_layers)
        # a rank without one strategy line cannot be verified: verify's map shows '?', not
        # differences (verify_render.unverifiable), and so does the plot
        missing = diff.missing if diff.has_strategy_lines else []
        for e in missing:
            if e.layer not in cut and comparison.missing_differs(e):
                rows.append((e.layer, e.action, e.pattern, "missing", e.value if e.value is not None else True, None))
        # an extra item is named as the logs map names it (configured pattern, SWAPWATCH pattern
        # or path), so its outline lands on the drawn cell
        logged = strategy_frame(runlog, rank=rank, plan=plan)
        named = {(int(r.layer), r.mechanism, p): r.item for r in logged.itertuples() for p in r.paths}
        for s in diff.extra:
            item = named.get((s.layer, s.action, s.path), s.path) if s.path is not None else None
            rows.append((s.layer, s.action, item, "extra", None, s.value))
        for e, s in diff.value_diffs:
            rows.append((e.layer, e.action, e.pattern, "value", e.value, s.value))
    return pd.DataFrame(rows, columns=["layer", "mechanism", "item", "kind", "expected", "actual"])


# ---- figure -----------------------------------------------------------------------------------

def _row_keys(frames: List[pd.DataFrame]) -> List[Tuple[str, Optional[str]]]:
    keys = set()
    for f in frames:
        for m, it in zip(f["mechanism"], f["item"]):
            keys.add((m, _norm_item(it)))
    return sorted(keys, key=lambda k: (_ORDER.get(k[0], 99), k[1] or ""))


def _norm_item(it: Any) -> Optional[str]:
    """Whole-layer mechanisms have no item; pandas may hand that back as NaN."""
    return None if it is None or (isinstance(it, float) and np.isnan(it)) else it


def _row_label(key: Tuple[str, Optional[str]], effects: AbstractSet[str] = frozenset()) -> str:
    mech, item = key
    name = _NAME.get(mech, mech)
    if item is None:
        return name
    item = item if len(item) <= 38 else item[:36] + "…"
    tail = ""
    if effects == {NO_MATCH}:
        tail = " (matches nothing)"
    elif effects == {VOIDED}:
        tail = " (voided: full recompute)"
    elif effects == {NOT_EFFECTIVE}:
        tail = " (not effective)"
    return f"{name} · {item}{tail}"


def _row_effects(frames: List[pd.DataFrame]) -> Dict[Tuple[str, Optional[str]], Set[str]]:
    out: Dict[Tuple[str, Optional[str]], Set[str]] = {}
    for f in frames:
        if f.empty:
            continue
        for m, it, eff in zip(f["mechanism"], f["item"], f["effect"]):
            out.setdefault((m, _norm_item(it)), set()).add(eff or "")
    return out


def _fmt_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def _draw_map(ax, frame: pd.DataFrame, keys, n_layers: int, stages: List[int], inters: List[int],
              title: str, diffs: Optional[pd.DataFrame] = None, cut: AbstractSet[int] = frozenset(),
              span: Optional[Tuple[int, int]] = None, effects: Optional[Dict] = None,
              labels: Optional[List[str]] = None) -> None:
    """One band of the map: layers ``span`` = [lo, hi) (default all). ``labels``: the columns are
    folded layer ranges (:func:`_fold`), named by these."""
    lo, hi = span or (0, n_layers)
    row_of = {k: i for i, k in enumerate(keys)}
    text_ok = hi - lo <= 40
    for rec in frame.itertuples(index=False):
        if not lo <= rec.layer < hi:
            continue
        y = row_of[(rec.mechanism, _norm_item(rec.item))]
        color = _COLOR.get(rec.mechanism, "0.5")
        excl = rec.mechanism.endswith("_exclude")
        gid = f"cell|{rec.source}|{rec.layer}|{rec.mechanism}|{rec.item}"
        effect = getattr(rec, "effect", "") or ""
        if effect == NO_MATCH:
            # configured, but it reaches nothing: an empty dashed box, never a normal filled cell
            ax.add_patch(Rectangle((rec.layer - 0.42, y - 0.37), 0.84, 0.74, facecolor="none", edgecolor=color,
                                   ls="--", lw=1.1, gid=gid))
            if text_ok:
                ax.text(rec.layer, y, NO_MATCH_MARK, ha="center", va="center", fontsize=8, color=color)
            continue
        if effect in (VOIDED, NOT_EFFECTIVE):
            ax.add_patch(Rectangle((rec.layer - 0.45, y - 0.4), 0.9, 0.8, facecolor="#eeeeee", edgecolor=color,
                                   hatch="....", lw=0.8, gid=gid))
            continue
        ax.add_patch(Rectangle((rec.layer - 0.45, y - 0.4), 0.9, 0.8, facecolor=color, edgecolor="white",
                               hatch="xxx" if excl else None, lw=0.5, gid=gid))
        if rec.overridden:
            ax.plot([rec.layer - 0.4, rec.layer + 0.4], [y + 0.35, y - 0.35], color=OVERRIDE_COLOR, lw=1.4,
                    alpha=0.85)
            if not rec.partial:            # a cross: all of it is voided; one stroke: part of it
                ax.plot([rec.layer - 0.4, rec.layer + 0.4], [y - 0.35, y + 0.35], color=OVERRIDE_COLOR, lw=1.4,
                        alpha=0.85)
        if rec.mechanism in _SWAPS and text_ok:
            # the prefetch stays readable over a red cross: on its own white label, above the strokes
            box = {"boxstyle": "round,pad=0.12", "fc": "white", "ec": "none", "alpha": 0.9} if rec.overridden else None
            ax.text(rec.layer, y, _fmt_value(rec.value), ha="center", va="center", fontsize=7, zorder=5,
                    color="black" if rec.overridden or rec.mechanism != "layer_swap" else "white", bbox=box)
    if diffs is not None:
        for d in diffs.itertuples(index=False):
            key = (d.mechanism, _norm_item(d.item))
            if key not in row_of or not lo <= d.layer < hi:
                continue
            ax.add_patch(Rectangle((d.layer - 0.5, row_of[key] - 0.47), 1.0, 0.94, fill=False,
                                   edgecolor=DIFF_COLOR, lw=1.8, ls="--" if d.kind == "missing" else "-",
                                   gid=f"diff|{d.kind}|{d.layer}|{d.mechanism}|{d.item}"))
    for layer in sorted(cut):
        if lo <= layer < hi:
            ax.axvspan(layer - 0.5, layer + 0.5, color="0.85", zorder=0, lw=0)
    # pipeline stages / interleave chunks: a line where the chunk changes, named once per band
    chunks = list(zip(stages, inters)) if len(stages) == n_layers else []
    multi_v = len(set(inters)) > 1
    named = bool(chunks) and len(set(chunks)) > 1
    start = lo
    for i in range(lo + 1, hi + 1):
        if i == hi or chunks and chunks[i] != chunks[i - 1]:
            if named:
                st, v = chunks[start]
                ax.text((start + i - 1) / 2, -0.75, "stage " + stage_label(st, v, multi_v),
                        ha="center", va="bottom", fontsize=7, color="0.3")
                if i < hi:
                    ax.axvline(i - 0.5, color="0.35", lw=0.9)
            start = i
    ax.set_xlim(lo - 0.5, hi - 0.5)
    ax.set_ylim(len(keys) - 0.5, -0.9 if named else -0.5)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([_row_label(k, (effects or {}).get(k, set())) for k in keys], fontsize=8)
    width = hi - lo
    step = 1 if width <= 32 else int(np.ceil(width / 32))
    ax.set_xticks(range(lo, hi, step))
    if labels is not None:
        ax.set_xticklabels([labels[i] for i in range(lo, hi, step)], rotation=90 if step == 1 and width > 12 else 0,
                           fontsize=7)
    ax.grid(False)
    for sp in ("top", "right", "left"):
        ax.spines[sp].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.set_title(title, loc="left")


def _fold(panels: List[Tuple[str, pd.DataFrame]], diffs: Optional[pd.DataFrame], cut: Set[int],
          stages: List[int], inters: List[int], n_layers: int):
    """Neighbouring layers that look the same drawn as one column: the panels' frames, the
    differences, the cut layers and stage / interleave ids re-indexed by column, and each
    column's label (``"8"``, ``"9-1249"``). Two layers fold when every panel has the same cells on
    both, the same differences are outlined, both or neither are past a cut, and they are in the
    same pipeline chunk: nothing drawn differs from the unfolded map but the width."""
    sig: Dict[int, list] = {}
    for p, (_, f) in enumerate(panels):
        for r in f.itertuples(index=False):
            sig.setdefault(int(r.layer), []).append((p, r.mechanism, _norm_item(r.item), _fmt_value(r.value),
                                                     bool(r.overridden), bool(r.partial), r.effect or ""))
    if diffs is not None:
        for d in diffs.itertuples(index=False):
            sig.setdefault(int(d.layer), []).append(("diff", d.mechanism, _norm_item(d.item), d.kind))
    col_of: List[int] = []
    labels: List[str] = []
    firsts: List[int] = []
    prev: Any = object()
    for layer in range(n_layers):
        chunk = (stages[layer], inters[layer]) if layer < len(stages) and layer < len(inters) else (0, 0)
        key = (tuple(sorted(sig.get(layer, ()), key=repr)), layer in cut, chunk)
        if key != prev:
            firsts.append(layer)
            labels.append(str(layer))
            prev = key
        elif labels:
            labels[-1] = f"{firsts[-1]}-{layer}"
        col_of.append(len(firsts) - 1)
    keep = set(firsts)

    def refold(f: pd.DataFrame) -> pd.DataFrame:
        if f.empty:
            return f
        g = f[f["layer"].isin(keep)].copy()
        g["layer"] = [col_of[int(x)] for x in g["layer"]]
        g.attrs = dict(f.attrs)
        return g

    out_panels = [(t, refold(f)) for t, f in panels]
    out_diffs = refold(diffs) if diffs is not None else None
    out_cut = {col_of[x] for x in cut if 0 <= x < n_layers}
    out_stages = [stages[x] if x < len(stages) else 0 for x in firsts]
    out_inters = [inters[x] if x < len(inters) else 0 for x in firsts]
    return out_panels, out_diffs, out_cut, out_stages, out_inters, labels


def bands(n_layers: int, per_band: int = BAND_LAYERS) -> List[Tuple[int, int]]:
    """[lo, hi) layer spans of equal size, at most ``per_band`` layers each."""
    n = max(1, int(np.ceil(n_layers / per_band)))
    size = int(np.ceil(n_layers / n))
    return [(lo, min(n_layers, lo + size)) for lo in range(0, n_layers, size)] or [(0, max(1, n_layers))]


def _legend_handles(frames: List[pd.DataFrame], with_diff: bool, with_cut: bool) -> List[Any]:
    present = set()
    overridden = partial = False
    for f in frames:
        present |= set(f["mechanism"])
        if not f.empty:
            overridden |= bool((f["overridden"] & ~f["partial"]).any())
            partial |= bool(f["partial"].any())
    hs: List[Any] = []
    pynative = any(f.attrs.get("pynative") for f in frames)     # PyNative r2.x: no backward_prefetch
    for mech, name, color in MECHANISMS:
        if mech in present:
            label = name + ((" (→j: layer j prefetched with it)" if pynative else " (number: backward_prefetch)")
                            if mech in _SWAPS else "")
            hs.append(Patch(facecolor=color, hatch="xxx" if mech.endswith("_exclude") else None,
                            edgecolor="white", label=label))
    effects = set()
    for f in frames:
        if not f.empty:
            effects |= set(f["effect"])
    if NO_MATCH in effects:
        hs.append(Patch(facecolor="none", edgecolor="0.3", ls="--",
                        label=f"{NO_MATCH_MARK} pattern matches nothing on the model (no effect)"))
    if VOIDED in effects:
        hs.append(Patch(facecolor="#eeeeee", edgecolor="0.3", hatch="....",
                        label="configured, voided: the layer is fully recomputed (select is skipped there)"))
    if NOT_EFFECTIVE in effects:
        hs.append(Patch(facecolor="#eeeeee", edgecolor="0.3", hatch="....",
                        label="configured, not effective: a cell for comm recompute (SW507)"))
    if overridden:
        hs.append(Line2D([], [], color=OVERRIDE_COLOR, marker="x", ls="none", ms=8, mew=1.8,
                         label="op swap in the swap map that wraps nothing (SW504)" if pynative else
                         "swap overridden by recompute (logged, no effect)"))
    if partial:
        hs.append(Line2D([], [], color=OVERRIDE_COLOR, marker="$/$", ls="none", ms=8,
                         label="layer swap partly overridden (select recompute inside it)"))
    if with_diff:
        hs.append(Patch(fill=False, edgecolor=DIFF_COLOR, lw=1.8, label="in logs, not in config / other value"))
        hs.append(Patch(fill=False, edgecolor=DIFF_COLOR, lw=1.8, ls="--", label="in config, missing from logs"))
    if with_cut:
        hs.append(Patch(facecolor="0.85", label="not in the log (it stops here)"))
    return hs


def plot_strategy(what: Any, plan: Any = None, rank: Optional[int] = None, title: Optional[str] = None,
                  name: Optional[str] = None,
                  comparison: Optional[Comparison] = None) -> StrategyPlot:
    """Draw the layer × mechanism map (``.save(out)`` writes it).

    ``what``: a Plan (the config's intended strategy), a RunLog (what ``rank`` logged), or a
    :class:`~swapwatch.results.VerifyResult` (its run against its plan, with the comparison verify
    made: nothing is compared again; the logs alone when verify found them not a run of the
    config, SW109). With a RunLog and ``plan``, both maps are drawn one above
    the other when they differ (differing cells outlined), and a single map saying "logs = config"
    when they do not; ``comparison`` is that pair's, when the caller has it. ``name`` (e.g. the
    config file) goes into the title. The result holds the frames drawn (by panel title), the
    differences and the layers past a log that stops early.
    """
    if _is_verify_result(what):
        # no comparison on a static-path result: the log is not a run of its config (SW109), so
        # the map shows the logs alone
        keep = what.comparison is not None or (what.plan is not None and not what.plan.comparable)
        what, plan, comparison = what.runlog, (what.plan if keep else None), what.comparison
    panels: List[Tuple[str, pd.DataFrame]] = []
    diffs: Optional[pd.DataFrame] = None
    cut: Set[int] = set()
    if _is_plan(what):
        ref_plan = what
        panels.append(("config (intended)", strategy_frame(what)))
        n_layers = len(what.layers)
    else:
        r = pick_rank(what, rank)
        ref_plan = plan
        logs = strategy_frame(what, rank=r, plan=plan)
        n_layers = _n_layers(what, r, plan, logs)
        nranks = len(what.ranks)
        who = f"logs, rank {r}" + (f" of {nranks}" if nranks > 1 else "")
        if plan is not None:
            own = plan.strategy_logs_hook(logs, what, r)
            if own is not None:         # a path with its own log cells and differences (the view's)
                logs, diffs = own
            else:
                if comparison is None:
                    comparison = compare(plan, what)
                diffs = frame_differences(plan, what, r, comparison)
                rd = comparison.ranks.get(r)
                cut = set(rd.cut_layers) if rd is not None else set()
            if diffs.empty and not cut:
                panels.append((f"config = {who}: the run applied what the config asks", logs))
            else:
                # a log that stops early is not "as configured": show what was asked for beside it
                parts = []
                if not diffs.empty:
                    parts.append(f"{len(diffs)} difference{'s' if len(diffs) != 1 else ''} outlined")
                if cut:
                    parts.append(f"the log stops at layer {min(cut)}")
                panels.append(("config (intended)", strategy_frame(plan)))
                panels.append((f"{who} (actual): " + "; ".join(parts), logs))
        else:
            panels.append((f"{who} (actual)", logs))
    if all(f.empty for _, f in panels):
        raise InputError("nothing to draw: no layer has recompute or swap in "
                         + ("this config" if _is_plan(what) else "these logs"))
    keys = _row_keys([f for _, f in panels])
    effects = _row_effects([f for _, f in panels])
    stages, inters = _stage_ids(ref_plan, what, n_layers)
    drawn, d_diffs, d_cut, n_cols, labels = panels, diffs, cut, n_layers, None
    if n_layers > FOLD_LAYERS:
        drawn, d_diffs, d_cut, stages, inters, labels = _fold(panels, diffs, cut, stages, inters, n_layers)
        n_cols = len(labels)
    spans = bands(n_cols, max(BAND_LAYERS, int(np.ceil(n_cols / MAX_BANDS))))
    band_w = max(hi - lo for lo, hi in spans)
    label_w = 0.065 * max(len(_row_label(k, effects.get(k, set()))) for k in keys)   # inches at 8 pt
    width = min(20.0, max(7.5, label_w + 0.6 + 0.34 * band_w))
    row_h = 0.27
    one = [max(1.2, row_h * len(keys) + 0.9) for _ in panels]
    heights = one * len(spans)
    with _render.style():
        fig = _render.new_figure(width, sum(heights) + 1.3)
        axes = fig.subplots(len(heights), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        k = 0
        for b, span in enumerate(spans):
            for i, (ptitle, frame) in enumerate(drawn):
                ax = axes[k]
                k += 1
                last = i == len(drawn) - 1
                first_l, last_l = (span[0], span[1] - 1) if labels is None else \
                    (labels[span[0]].split("-")[0], labels[span[1] - 1].split("-")[-1])
                band_title = ptitle if b == 0 else (f"layers {first_l}-{last_l}" if i == 0 else "")
                _draw_map(ax, frame, keys, n_cols, stages, inters, band_title,
                          d_diffs if (last and d_diffs is not None and len(drawn) > 1) else None,
                          d_cut if last else set(), span=span, effects=effects, labels=labels)
                if last:
                    ax.set_xlabel("layer")
        handles = _legend_handles([f for _, f in panels], diffs is not None and not diffs.empty, bool(cut))
        # legend entries are ~3 inches wide: as many columns as fit, so nothing is cut off
        fig.legend(handles=handles, loc="outside lower center", fontsize=8,
                   ncols=max(1, min(3, len(handles), int(width // 3.3))))
        head = title or _default_title(what, ref_plan, n_layers, name)
        if labels is not None:          # said in the title, wrapped to the figure (11 pt: ~12 characters an inch)
            head = "\n".join(textwrap.wrap(f"{head}  ·  neighbouring layers that look the same are one column "
                                            f"({n_cols} columns)", max(60, int(width * 12))))
        fig.suptitle(head, fontsize=11)
    return StrategyPlot(figure=fig, frames=dict(panels), diff=diffs, cut=sorted(cut))


def _is_verify_result(what: Any) -> bool:
    return all(hasattr(what, a) for a in ("comparison", "runlog", "plan", "findings"))


def _n_layers(runlog: Any, rank: int, plan: Any, frame: pd.DataFrame) -> int:
    if plan is not None:
        return len(plan.layers)
    g = runlog.ranks[rank].geometry()
    if g.get("pp_ids"):
        return len(g["pp_ids"])
    return int(frame["layer"].max()) + 1 if not frame.empty else 1


def _stage_ids(plan: Any, what: Any, n_layers: int) -> Tuple[List[int], List[int]]:
    if _global_ids(plan):           # apply_ac's view: global layer ids, no stage split known
        return [0] * n_layers, [0] * n_layers
    if plan is not None:
        return [lp.stage for lp in plan.layers], [lp.interleave for lp in plan.layers]
    if hasattr(what, "ranks") and what.ranks:
        pp, vv = _geometry(what.ranks[pick_rank(what)], None)
        if len(pp) == n_layers:
            return pp, (vv if len(vv) == n_layers else [0] * n_layers)
    return [0] * n_layers, [0] * n_layers


def _default_title(what: Any, plan: Any, n_layers: int, name: Optional[str] = None) -> str:
    name = name or ""
    if not name and hasattr(what, "ranks"):
        from .runs import run_names

        name = run_names([what])[0][0]
    swap = getattr(plan, "swap", None)
    mode = "" if swap is None else ("  ·  swap mode" if swap else "  ·  no swap")
    head = f"Recompute / swap per layer — {name}" if name else "Recompute / swap per layer"
    return "\n".join(textwrap.wrap(f"{head}  ·  {n_layers} layers{mode}", 120))
