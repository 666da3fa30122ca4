"""MindFormers' recompute / swap semantics -> a per-layer Plan. THE one place for these semantics.

Everything swapwatch says about what a YAML *does* comes from here: ``explain`` prints it, the
hooks apply it, ``verify`` compares logs with it. It reproduces MindFormers 2.1.0's
``LayerSetting`` (``parallel_core/training_graph/transformer/utils.py``, the same class on the
legacy and the mcore path; the mcore differences are where the swap keys come from
(``swapwatch.config``), the default select patterns, and the MTP block's second instance),
including its quirks, because users are debugging *those*; the swap config arrives normalised as
``TransformerSwapConfig`` leaves it (``TrainingConfig.swap_strategy``, done once in config.py).
What a pattern reaches is resolved per layer on the tree of the plan's model family
(:mod:`swapwatch.model.families`: dense, MoE and MTP layers differ):

* geometry: layers per (interleave, stage) chunk, each layer's stage and interleave, chunk starts;
* non-swap mode: every value form becomes a V x P count table ("first N layers of each chunk"),
  1-D counts are dealt round-robin over interleaves and capped, 2-D tables are edited in place
  (so a capped item becomes a numpy scalar and a bool row a numpy array: visible in the log);
* swap mode: the same keys become *layer ids*; exclude keys are formatted but never applied,
  although they still remove overlapping select patterns from every layer;
* the per-layer decision: full recompute; select/comm only on layers that are not fully
  recomputed; exclude always (non-swap); first matching entry wins for layer_swap and op_swap;
* the log text MindFormers prints (``Formative ...`` values with numpy<2 reprs and doubled
  backslashes; which per-layer ``Set ...`` lines it logs, worded by :mod:`swapwatch.model.setting_lines`),
  so a log can be checked line by line.

A configuration MindFormers would reject, or crash on, raises :class:`ConfigError` naming the
YAML key (and line when known), in our own words.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..model import actions, patterns, setting_lines
from ..config import DEFAULT_OP_SWAP, normalize_swap_config  # noqa: F401  (re-exported: config.py owns them)
from ..errors import ConfigError
# The Plan's types live in swapwatch.model.plan; re-exported so ``strategy.Plan`` etc. keep working.
from ..model.plan import Geometry, LayerPlan, Override, Plan, Prefetch, Walker, jsonable, walk  # noqa: F401

if TYPE_CHECKING:
    from ..model import families
    from ..config import TrainingConfig


MAX_INT32 = 2147483647
#: Default select_recompute patterns of legacy (Llama-family) models.
DEFAULT_SELECT = [r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu"]
#: Default select_recompute patterns on the mcore path (``use_legacy: False``), LayerSetting.__init__.
DEFAULT_SELECT_MCORE = [r"mlp\.shared_experts\.mul", r"mlp\.shared_experts\.activation_func\.silu",
                        r"mlp\.mul", r"mlp\.activation_func\.silu"]
#: Default select_comm_recompute pattern.
DEFAULT_COMM = [r".*\.norm"]


def named_patterns(value: Any, defaults: List[str]) -> Tuple[str, ...]:
    """The patterns a select key's value names, whatever layers it gives them: a dict's keys, a list of
    strings, ``defaults`` for any other true value (``LayerSetting._format_recompute_dict`` fills a bool
    or per-stage count with them), none for a false one. For what is decided per YAML, not per layer
    (memory.keys: whether the tensor table sizes the patterns' effect)."""
    if isinstance(value, dict):
        return tuple(str(k) for k in value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, str) for x in value):
        return tuple(value)
    return tuple(defaults) if value else ()


#: Recompute keys in the order LayerSetting formats them, with their default patterns.
_SELECT_DEFAULTS: Dict[str, List[str]] = {"select_recompute": DEFAULT_SELECT, "select_comm_recompute": DEFAULT_COMM}
SELECT_KEYS = tuple((key, _SELECT_DEFAULTS.get(key, [])) for key in actions.SELECT_ACTIONS)
#: Walk mode (patterns.walk) of each pattern action: what a leaf *cell* match means (swapwatch.model.actions).
WALK_MODE = actions.WALK_MODE
PRIORITY_LINE = ("The configuration of select_recompute_exclude and select_comm_recompute_exclude "
                 "have the highest priority.")


def mf_repr(obj: Any) -> str:
    """``str(obj)`` as MindFormers' f-strings print it under numpy<2 (the real MindSpore case):
    numpy scalars print as plain numbers, arrays as ``array([...], dtype=int32)``, strings with
    Python's repr (so a pattern's backslashes are doubled). Independent of the numpy installed."""
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{mf_repr(k)}: {mf_repr(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ", ".join(mf_repr(v) for v in obj) + "]"
    if isinstance(obj, tuple):
        inner = ", ".join(mf_repr(v) for v in obj)
        return f"({inner},)" if len(obj) == 1 else f"({inner})"
    if isinstance(obj, np.ndarray):
        return np.array_repr(obj)
    if isinstance(obj, np.bool_):
        return str(bool(obj))
    if isinstance(obj, np.integer):
        return str(int(obj))
    return repr(obj)


def _errfn(cfg: Any):
    if cfg is not None and hasattr(cfg, "error"):
        return cfg.error
    return lambda key, message: ConfigError(message, key=key)


# ---------------------------------------------------------------------------------------------
# Geometry
# ---------------------------------------------------------------------------------------------

def compute_geometry(cfg: "TrainingConfig") -> Geometry:
    """The layer split of ``cfg`` (a :class:`~swapwatch.config.TrainingConfig`), with MindFormers'
    offset checks; a split taken from a log (``cfg.layer_list``) is used as is."""
    err = _errfn(cfg)
    L, P = cfg.num_layers, cfg.pipeline_stage
    V = cfg.effective_interleave
    if cfg.layer_list is not None:
        layer_list = np.array(cfg.layer_list, np.int32)
        return split_geometry(L, len(layer_list[0]), len(layer_list), np.zeros_like(layer_list), layer_list)
    okey = "model.model_config.offset"
    try:
        offset = np.array(cfg.offset, np.int32)
    except (ValueError, TypeError, OverflowError):
        raise err(okey, f"offset {cfg.offset!r} is not an int, a list of ints or a table of ints") from None
    total = P * V
    if total <= 1:
        offset = np.zeros((1, 1), np.int32)       # one chunk: the offset is ignored
    else:
        base, rem = L // total, L % total
        if offset.ndim >= 1 and offset.shape[-1] != P:
            raise err(okey, f"offset has {offset.shape[-1]} entries per row but there are {P} pipeline "
                            f"stages; MindFormers needs one offset per stage")
        if offset.ndim >= 2 and offset.shape[-2] != V:
            why = ""
            if not cfg.pipeline_interleave:
                why = " (pp_interleave_num is forced to 1 because parallel.pipeline_config.pipeline_interleave " \
                      "is not True)"
            raise err(okey, f"offset has {offset.shape[-2]} rows but pp_interleave_num is {V}{why}; "
                            f"MindFormers needs one row per interleave")
        if int(offset.sum()) != rem:
            raise err(okey, f"the offsets add up to {int(offset.sum())}, but MindFormers requires them to add up "
                            f"to the layers left over after an even split: num_layers % (pipeline_stage * "
                            f"pp_interleave_num) = {L} % ({P} * {V}) = {rem}")
        offset = np.broadcast_to(offset, (V, P))
        actual = offset.flatten() + base
        if actual[0] < 0:
            raise err(okey, f"the first chunk would get {int(actual[0])} layers; its offset must be >= {-base}")
        if actual[-1] < 0:
            raise err(okey, f"the last chunk would get {int(actual[-1])} layers; its offset must be >= {-base}")
        if total > 2 and np.any(actual[1:-1] < 1):
            raise err(okey, f"a middle chunk would get fewer than 1 layer; middle offsets must be >= {1 - base}")
    layer_list = np.ones((V, P), np.int32) * (L // (P * V)) + offset
    return split_geometry(L, P, V, offset, layer_list)


def split_geometry(L: int, P: int, V: int, offset: np.ndarray, layer_list: np.ndarray) -> Geometry:
    interleave_sum = np.insert(np.cumsum(np.sum(layer_list, axis=1))[:-1], 0, 0)
    layer_accu = np.cumsum(layer_list, axis=1) + interleave_sum.reshape(-1, 1)
    flat = layer_accu.reshape(-1)
    pp_ids = [int(np.searchsorted(flat, i + 1) % P) for i in range(L)]
    interleave_ids = []
    for i in range(L):
        rows = np.where(i < layer_accu)[0]
        if not len(rows):
            raise ConfigError(f"the chunks hold only {int(flat[-1])} layers but num_layers is {L}")
        interleave_ids.append(int(rows[0]))
    pre = [0] + [int(layer_accu[v, -1]) for v in range(V - 1)]
    starts = [[pre[v]] + [int(x) for x in layer_accu[v]] for v in range(V)]
    return Geometry(num_layers=L, pipeline_stage=P, pp_interleave_num=V,
                    offset=np.broadcast_to(offset, (V, P)).tolist(), layer_list=layer_list.tolist(),
                    layer_accu=layer_accu.tolist(), chunk_starts=starts, pp_ids=pp_ids,
                    interleave_ids=interleave_ids)


# ---------------------------------------------------------------------------------------------
# Normalising values (LayerSetting's formatting, quirks included)
# ---------------------------------------------------------------------------------------------

class _Illegal(Exception):
    """A value LayerSetting cannot format (its ValueError / IndexError / endless loop)."""


class _Formatter:
    def __init__(self, geometry: Geometry):
        self.layer_list = np.array(geometry.layer_list, np.int32)
        self.V, self.P = self.layer_list.shape

    def counts(self, value: Any) -> Any:
        """Non-swap form: a V x P table of "first N layers of each chunk"."""
        ll = self.layer_list
        if isinstance(value, bool):
            return ll.tolist() if value else np.zeros_like(ll).tolist()
        if not isinstance(value, (list, tuple)):
            raise _Illegal(f"{value!r} is not a form MindFormers accepts here")
        value = list(value)
        if all(isinstance(x, (int, bool)) for x in value):
            return self._deal([MAX_INT32 if x is True else 0 if x is False else x for x in value]).tolist()
        if all(isinstance(x, str) for x in value):
            return ll.tolist()
        for i, row in enumerate(value):
            if isinstance(row, bool):
                if i >= self.V:
                    raise _Illegal(f"it has a row {i} but there are only {self.V} interleave(s)")
                value[i] = ll[i] if row else np.zeros_like(ll[i])
            elif isinstance(row, (list, tuple)):
                if isinstance(row, tuple) and row:
                    raise _Illegal(f"row {i} is a tuple, which MindFormers cannot edit in place")
                for j, item in enumerate(row):
                    if isinstance(item, (bool, int)) and (i >= self.V or j >= self.P):
                        raise _Illegal(f"entry [{i}][{j}] lies outside the {self.V} x {self.P} "
                                       f"(interleave x stage) table")
                    # a tuple row was refused above (or is empty): ``row`` is a list here
                    if isinstance(item, bool):
                        row[j] = ll[i][j] if item else 0  # type: ignore[index]
                    elif isinstance(item, int):
                        row[j] = min(row[j], ll[i, j])  # type: ignore[index]
                    elif isinstance(item, np.integer):
                        raise _Illegal(
                            "a 2-D table given for several (default) patterns is edited in place while the "
                            "first pattern is formatted, and MindFormers then rejects the edited entries for the "
                            "next pattern (it crashes); write a {pattern: table} mapping instead")
                    else:
                        raise _Illegal(f"entry [{i}][{j}] = {item!r} is not a count or a bool")
            else:
                raise _Illegal(f"row {i} = {row!r} is neither a bool nor a list of counts")
        return value

    def _deal(self, counts: List[int]) -> np.ndarray:
        """1-D per-stage counts: cap at the stage's layers, deal round-robin over interleaves."""
        res = np.zeros_like(self.layer_list)
        per_stage = np.sum(self.layer_list, axis=0)
        for j, num in enumerate(counts):
            if j >= self.P:
                raise _Illegal(f"it has {len(counts)} per-stage entries but there are only {self.P} "
                               f"pipeline stage(s)")
            if num < 0:
                raise _Illegal(f"count {num} is negative (MindFormers' allocation loop never ends on it)")
            num = min(num, int(per_stage[j]))
            while num:
                for i in range(self.V):
                    if not num:
                        break
                    if res[i, j] < self.layer_list[i, j]:
                        res[i, j] += 1
                        num -= 1
        return res

    @staticmethod
    def layer_ids(value: Any) -> Any:
        """Swap form: True, or a list of global layer ids (False -> [])."""
        if isinstance(value, bool):
            return value if value else []
        if isinstance(value, list) and all(isinstance(x, int) for x in value):
            return value
        raise _Illegal(f"{value!r} is not True/False or a flat list of layer ids")

    def pattern_table(self, value: Any, defaults: List[str], ids: bool) -> Dict[str, Any]:
        """``{pattern: formatted value}``: a str list -> those patterns on every layer; a dict -> its
        patterns; anything else -> the default patterns, all sharing the one value object."""
        if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            keys: Iterable[Any] = value
        elif isinstance(value, dict):
            keys = list(value.keys())
        else:
            keys = defaults
        out: Dict[str, Any] = {}
        for k in keys:
            v = value[k] if isinstance(value, dict) else value
            out[k] = self.layer_ids(v) if ids else self.counts(v)
        return out


# ---------------------------------------------------------------------------------------------
# plan()
# ---------------------------------------------------------------------------------------------

def plan(config: "TrainingConfig", layout: Any = None, model: Optional[str] = None,
         family: Optional["families.ModelFamily"] = None) -> Plan:
    """The per-layer strategy MindFormers will apply for ``config``.

    The model family (what each layer's tree is) is ``family`` (a
    :class:`~swapwatch.model.families.ModelFamily`), else the family named ``model`` (``--model``), else
    the one the YAML names (``config.family``), else the example model's. ``layout`` (one
    :class:`~swapwatch.model.patterns.LayoutNode` for every layer) overrides the trees. The per-layer
    pattern lists do not depend on the trees (MindFormers applies a pattern whether or not it
    matches anything); what the patterns reach does.
    """
    from ..model import families

    if family is None and model is not None:
        family = families.from_name(model)
        detected = config.family
        if detected is not None and detected.known and detected.name == family.name:
            family = detected
        elif detected is not None:
            family.first_k_dense_replace = detected.first_k_dense_replace
            family.mtp_layers = detected.mtp_layers
    if family is None:
        family = config.family or families.ModelFamily(families.DEFAULT_FAMILY)
    err = _errfn(config)
    geo = compute_geometry(config)
    rc = copy.deepcopy(config.recompute_config)       # formatting edits 2-D tables in place
    sc = config.swap_config
    swap = sc.get("swap") is True
    legacy = config.parallel_recompute
    fmt = _Formatter(geo)
    formative: Dict[str, Any] = {}
    removed: List[Tuple[str, str]] = []
    defaulted: Dict[str, List[str]] = {}
    tables: Dict[str, Dict[str, Any]] = {}
    layer_recompute: Any = None

    if legacy is None:
        layer_recompute = _fmt(lambda: fmt.layer_ids(rc["recompute"]) if swap else fmt.counts(rc["recompute"]),
                               "recompute_config.recompute", config.recompute_config["recompute"], swap, err)
        for key, defaults in SELECT_KEYS:
            if key == "select_recompute" and config.mcore:
                defaults = DEFAULT_SELECT_MCORE
            ids = swap and not key.endswith("_exclude")
            if defaults and not isinstance(rc[key], dict) and not (
                    isinstance(rc[key], (list, tuple)) and all(isinstance(x, str) for x in rc[key])):
                defaulted[key] = list(defaults)
            tables[key] = _fmt(lambda: fmt.pattern_table(rc[key], defaults, ids),  # noqa: B023
                               f"recompute_config.{key}", config.recompute_config[key], ids, err)
            for pat in tables[key]:
                if not isinstance(pat, str):
                    raise err(f"recompute_config.{key}", f"pattern {pat!r} must be a string")
        # the total first: validating compiles each pattern (docs/reliability.md, pattern totals)
        _check_total([p for key, _ in SELECT_KEYS for p in tables[key]], "recompute_config", err)
        for key, _ in SELECT_KEYS:
            for pat in tables[key]:
                bad = patterns.validate(pat)
                if bad:
                    raise err(f"recompute_config.{key}.{pat}", f"pattern is not a valid regular expression: {bad}")
        formative["layer_recompute"] = layer_recompute
        for sel, exc in (("select_recompute", "select_recompute_exclude"),
                         ("select_comm_recompute", "select_comm_recompute_exclude")):
            for ex in tables[exc]:
                hit = next((s for s in tables[sel] if patterns.patterns_overlap(ex, s)), None)
                if hit is not None:
                    tables[sel].pop(hit)
                    removed.append((sel, hit))
        for key, _ in SELECT_KEYS:
            formative[key] = tables[key]

    layer_swap: List[Dict[str, Any]] = []
    op_swap: Dict[str, List[Dict[str, Any]]] = {}
    if swap:
        # normalised once, where the config is loaded (config.TrainingConfig.swap_strategy)
        ls_norm, os_norm = config.swap_strategy if hasattr(config, "swap_strategy") \
            else normalize_swap_config(sc, config)
        layer_swap = [_swap_entry(e, "swap_config.layer_swap", err) for e in ls_norm]
        _check_total([p for key, _ in SELECT_KEYS for p in tables.get(key, ())] + list(os_norm), "swap_config.op_swap",
                     err)
        for name, entries in os_norm.items():
            bad = patterns.validate(name)
            if bad:
                raise err("swap_config.op_swap", f"op_name {name!r} is not a valid regular expression: {bad}")
            op_swap[name] = [_swap_entry(e, "swap_config.op_swap", err) for e in entries]
        formative["layer_swap"] = layer_swap
        formative["op_swap"] = op_swap
        if sc.get("layer_swap") is None and sc.get("op_swap") is None and list(op_swap) == [DEFAULT_OP_SWAP]:
            # TransformerSwapConfig's default op swap: the user never wrote it (explain says so)
            defaulted["op_swap"] = [DEFAULT_OP_SWAP]

    layers: List[LayerPlan] = []
    for i in range(geo.num_layers):
        v, p = geo.chunk_of(i)
        lp = LayerPlan(layer=i, stage=p + geo.start_stage, interleave=v)
        if legacy is not None:
            lp.full_recompute = legacy
            lp.full_recompute_logged = False
        elif swap:
            _swap_mode_layer(lp, rc["recompute"], layer_recompute, tables)
        else:
            _counts_layer(lp, geo, rc["recompute"], layer_recompute, tables, err)
        if swap:
            _swap_layer(lp, layer_swap, op_swap)
        layers.append(lp)

    result = Plan(geometry=geo, swap=swap, formative=formative, layers=layers,
                  removed=removed, legacy_recompute=legacy, family=family, layout_override=layout,
                  defaulted=defaulted)
    if family.mtp_layers and layers:
        # MultiTokenPredictionBlock: the same LayerSetting config, layer id num_layers - 1
        result.mtp = [copy.deepcopy(layers[-1]) for _ in range(family.mtp_layers)]
    _check_double_recompute(result, err)
    if swap and legacy is None:
        result.warnings = conflict_warnings(rc, layer_swap, op_swap, err)
    if swap:
        mark_overridden(result)
    return result


def all_layer_plans(result: Plan) -> List[Tuple[LayerPlan, bool]]:
    """(LayerPlan, is_mtp) for every layer LayerSetting sets: the decoder layers, then MTP."""
    return [(lp, False) for lp in result.layers] + [(lp, True) for lp in result.mtp]


def _check_double_recompute(result: Plan, err) -> None:
    """MindSpore records ``Primitive.recompute(mode)`` as a prim attribute that shadows the method,
    so a second call on the same primitive fails (``'bool' object is not callable``): MindFormers
    crashes when two select patterns, or a select and an exclude pattern, reach one primitive of a
    layer (the exclude-vs-select removal only drops the *first* overlapping select pattern)."""
    for lp, mtp in all_layer_plans(result):
        walker = result.walker(lp.layer, mtp)
        seen: Dict[str, Tuple[str, str]] = {}
        for key in ("select_recompute", "select_recompute_exclude"):
            for pat in lp.patterns(key):
                for t in walker(pat, WALK_MODE[key]).targets:
                    if t.kind != "prim":
                        continue
                    if t.path in seen:
                        k0, p0 = seen[t.path]
                        raise err(f"recompute_config.{key}",
                                  f"layer {lp.layer}: '{pat}' ({key}) and '{p0}' ({k0}) both set recompute on "
                                  f"the primitive {t.path}; MindSpore allows that once per primitive, so "
                                  f"MindFormers crashes (TypeError: 'bool' object is not callable)")
                    seen[t.path] = (key, pat)


def _check_total(pats: List[str], key: str, err) -> None:
    """One config's patterns together stay within what swapwatch compiles (patterns.check_total)."""
    try:
        patterns.check_total(pats)
    except patterns.PatternError as exc:
        raise err(key, str(exc)) from None


def _fmt(fn, key: str, value: Any, ids: bool, err) -> Any:
    try:
        return fn()
    except _Illegal as exc:
        form = ("True/False, a list of layer ids, or a {pattern: [layer ids]} mapping (swap is on)" if ids else
                "True/False, per-stage counts, an [interleave][stage] table, a list of patterns, "
                "or a {pattern: value} mapping")
        raise err(key, f"MindFormers cannot use {value!r}: {exc}; expected {form}") from None


def _swap_entry(entry: Dict[str, Any], key: str, err) -> Dict[str, Any]:
    try:
        layers = _Formatter.layer_ids(entry.get("layers"))
    except _Illegal:
        raise err(key, f"layers {entry.get('layers')!r}: with swap on LayerSetting only takes True/False "
                       f"or a flat list of layer ids") from None
    return {"backward_prefetch": entry.get("backward_prefetch"), "layers": layers}


def _counts_layer(lp: LayerPlan, geo: Geometry, raw_recompute: Any, layer_recompute: Any,
                  tables: Dict[str, Dict[str, Any]], err) -> None:
    """Non-swap: window rule against the count tables."""
    i, v, p = lp.layer, lp.interleave, geo.pp_ids[lp.layer]
    d = geo.position(i)

    def within(table: Any, key: str) -> bool:
        try:
            return 0 <= d < table[v][p]
        except IndexError:
            raise err(key, f"the table has no entry for interleave {v}, stage {p} (needed by layer {i}); "
                           f"MindFormers crashes there with an IndexError") from None

    def reaches(table: Any) -> bool:
        # a fully recomputed layer never consults the select tables (no IndexError from them there)
        try:
            return 0 <= d < table[v][p]
        except (IndexError, TypeError):
            return False

    if raw_recompute:
        lp.full_recompute = raw_recompute is True or within(layer_recompute, "recompute_config.recompute")
    for key in ("select_recompute", "select_comm_recompute"):
        if not lp.full_recompute:
            setattr(lp, key, [pat for pat, t in tables[key].items() if within(t, f"recompute_config.{key}")])
        else:
            _shadow(lp, key, [pat for pat, t in tables[key].items() if reaches(t)])
    for key in ("select_recompute_exclude", "select_comm_recompute_exclude"):
        setattr(lp, key, [pat for pat, t in tables[key].items() if within(t, f"recompute_config.{key}")])


def _swap_mode_layer(lp: LayerPlan, raw_recompute: Any, layer_recompute: Any,
                     tables: Dict[str, Dict[str, Any]]) -> None:
    """Swap mode: recompute values are layer ids; exclude keys are never applied."""
    i = lp.layer
    if raw_recompute and isinstance(raw_recompute, bool):
        lp.full_recompute = True
        lp.full_recompute_logged = False          # MindFormers logs nothing for it
    elif raw_recompute and i in layer_recompute:
        lp.full_recompute = True
    for key in ("select_recompute", "select_comm_recompute"):
        hit = [pat for pat, ids in tables[key].items() if (ids is True) or i in ids]
        if lp.full_recompute:
            _shadow(lp, key, hit)
        else:
            setattr(lp, key, hit)


def _shadow(lp: LayerPlan, key: str, pats: List[str]) -> None:
    """Record the select / comm patterns that target ``lp`` but that its full recompute shadows:
    MindFormers applies select recompute only to a layer that is not fully recomputed
    (parallel_core/training_graph/transformer/utils.py: LayerSetting.set_recompute). SW105 and the
    strategy map read this one record."""
    if pats:
        lp.select_shadowed[key] = pats


def _swap_layer(lp: LayerPlan, layer_swap: List[Dict[str, Any]], op_swap: Dict[str, List[Dict[str, Any]]]) -> None:
    i = lp.layer
    if layer_swap and isinstance(layer_swap[0]["layers"], bool):
        if layer_swap[0]["layers"]:
            lp.layer_swap = layer_swap[0]["backward_prefetch"]
    else:
        for entry in layer_swap:
            if i in entry["layers"]:
                lp.layer_swap = entry["backward_prefetch"]
                break
    for pat, entries in op_swap.items():
        for entry in entries:
            ids = entry["layers"]
            if (isinstance(ids, bool) and ids) or (isinstance(ids, list) and i in ids):
                lp.op_swap[pat] = entry["backward_prefetch"]
                break


# ---------------------------------------------------------------------------------------------
# Swaps voided by recompute
# ---------------------------------------------------------------------------------------------

def pattern_targets(layout: Any, pattern: str, mode: str) -> List[str]:
    """The op / cell paths ``pattern`` acts on in one layer (everything applied, not just logged)."""
    return [t.path for t in walk(layout, pattern, mode).targets]


def mark_overridden(result: Plan, layout: Any = None) -> None:
    """Fill ``swap_overridden``: swaps applied but voided by recompute on the same layer.

    * full recompute: every swap of the layer (``layer_swap`` and each op_swap pattern);
    * an op_swap whose target is recomputed by a select pattern (same path or a containing cell),
      or whose pattern is literally a select pattern there (MindFormers' own test);
    * a layer swap on a layer with select recompute: the selected ops' part of it
      (``layer_swap[<pattern>]``), as MindFormers warns.
    """
    for lp, mtp in all_layer_plans(result):
        lp.swap_overridden = []
        if lp.layer_swap is None and not lp.op_swap:
            continue
        walker = (lambda pat, mode, _l=layout: walk(_l, pat, mode)) if layout is not None \
            else result.walker(lp.layer, mtp)
        found = lp.swap_overridden

        def add(override: Override) -> None:
            if all(o.entry != override.entry for o in found):  # noqa: B023
                found.append(override)  # noqa: B023

        known = (result.family is not None and result.family.known) or layout is not None

        def offloads(pat: str) -> bool:
            """An op swap that reaches nothing on the layer's (known) tree offloads nothing, so
            recompute voids nothing (mcore's default '.*\\.flash_attention': SW104, not SW201)."""
            return not known or bool(walker(pat, "swap").targets)  # noqa: B023

        if lp.full_recompute:
            if lp.layer_swap is not None:
                add(Override.whole_layer("the whole layer is recomputed"))
            for pat in lp.op_swap:
                if offloads(pat):
                    add(Override.op(pat, "the whole layer is recomputed"))
            continue
        sel_targets = {pat: [t.path for t in walker(pat, "recompute").targets] for pat in lp.select_recompute}
        for pat in lp.op_swap:
            swapped = [t.path for t in walker(pat, "swap").targets]
            for spat, targets in sel_targets.items():
                if spat == pat or any(patterns.under(t, s) for s in targets for t in swapped):
                    add(Override.op(pat, f"select recompute '{spat}' recomputes it"))
                    break
                # a swapped *cell* with a select-recomputed primitive inside: the same operator is
                # swapped and recomputed (MindFormers compares pattern strings only and says nothing;
                # LayerSetting._check_swap_recompute_conflict), not a recomputed consumer (SW202)
                inner = sorted({s for s in targets for t in swapped if s != t and patterns.under(s, t)})
                if inner:
                    add(Override.op(pat, f"select recompute '{spat}' recomputes {', '.join(inner[:3])} "
                                         f"inside the swapped cell: the same operator is swapped and recomputed"))
                    break
        if lp.layer_swap is not None:
            for spat in lp.select_recompute:
                add(Override.part_of_layer(spat, f"select recompute '{spat}' recomputes that part of the layer"))


# ---------------------------------------------------------------------------------------------
# The log text MindFormers prints
# ---------------------------------------------------------------------------------------------

def conflict_warnings(rc: Dict[str, Any], layer_swap: List[Dict[str, Any]],
                      op_swap: Dict[str, List[Dict[str, Any]]], err: Any = None) -> List[str]:
    """The WARNING messages of MindFormers' swap/recompute conflict check, exact whitespace (worded by
    :mod:`swapwatch.model.setting_lines`, which the grammar reads them by).

    MindFormers only looks at the *raw* values: ``recompute`` as a bool or a list of ids, and
    ``select_recompute`` only when it is a dict (a bool or list there is never checked).
    """
    out: List[str] = []

    def layer_conflicts(idx: Any, op: str = "All") -> None:
        for entry in layer_swap:
            ids = entry["layers"]
            if (isinstance(ids, bool) and ids) or (not isinstance(ids, bool) and idx in ids):
                out.append(setting_lines.conflict_layer(op, idx))

    def op_conflicts(op: str, ids_or_bool: Any) -> None:
        if isinstance(ids_or_bool, bool) and ids_or_bool:
            out.append(setting_lines.conflict_op(op))
            return
        swapped: Any = set()
        for entry in op_swap[op]:
            if isinstance(entry["layers"], bool) and entry["layers"]:
                swapped = True
                break
            swapped = swapped.union(set(entry["layers"]))
        for idx in ids_or_bool:
            if swapped is True or idx in swapped:
                out.append(setting_lines.conflict_listed(op, idx))

    rec = rc.get("recompute")
    if isinstance(rec, bool) and rec:
        out.append(setting_lines.conflict_recompute_true(rec))
    if isinstance(rec, list) and rec:
        for idx in rec:
            layer_conflicts(idx)
        for op in op_swap:
            op_conflicts(op, rec)
    sel = rc.get("select_recompute")
    if isinstance(sel, dict):
        for op, ids in sel.items():
            if isinstance(ids, bool) and ids:
                out.append(setting_lines.conflict_all_layers(op))
                continue
            if not isinstance(ids, (list, tuple)):
                # check_rules rejects it on the train path; LayerSetting itself crashes iterating it
                raise (err or _errfn(None))(
                    f"recompute_config.select_recompute.{op}",
                    f"with swap on, {ids!r} here makes MindFormers crash (its swap/recompute conflict check "
                    f"iterates the value); give a list of layer ids ([] for none)")
            for idx in ids:
                layer_conflicts(idx, op)
            if op in op_swap:
                op_conflicts(op, ids)
    return out


def init_messages(result: Plan) -> List[Tuple[str, str]]:
    """(level, message) of everything LayerSetting logs at construction, in order."""
    g = result.geometry
    out = [("INFO", f"num_layers per stage: {g.layer_list}"),
           ("INFO", f"Accumulated num_layers per stage: {g.layer_accu}"),
           ("INFO", f"Pipeline id list with start_stage: {[p + g.start_stage for p in g.pp_ids]}"),
           ("INFO", f"Interleave id list: {g.interleave_ids}")]
    # A Plan from plan() has every Formative value; one assembled by hand (the hooks accept any
    # Plan) may not, and then only what it has is logged.
    f = result.formative or {}
    if result.legacy_recompute is None:
        if "layer_recompute" in f:
            out.append(("INFO", f"Formative layer_recompute: {mf_repr(f['layer_recompute'])}"))
        out.append(("INFO", PRIORITY_LINE))
        for key, pat in result.removed:
            comm = "_comm" if "comm" in key else ""
            out.append(("INFO", f"The pattern {pat} in select{comm}_recompute conflicts with "
                                f"select{comm}_recompute_exclude and will be removed."))
        for key, _ in SELECT_KEYS:
            if key in f:
                out.append(("INFO", f"Formative {key}: {mf_repr(f[key])}"))
    if result.swap:
        for key in actions.SWAP_ACTIONS:
            if key in f:
                out.append(("INFO", f"Formative {actions.label(key)}: {mf_repr(f[key])}"))
        out.extend(("WARNING", w) for w in result.warnings)
    return out


def formative_lines(result: Plan) -> List[str]:
    """The message parts of LayerSetting's init block (geometry, Formative values, removals,
    conflict warnings), byte for byte as MindFormers prints them under numpy<2. With MTP the
    block is logged once more (``MultiTokenPredictionBlock`` builds a second LayerSetting)."""
    block = [m for _, m in init_messages(result)]
    return block * (1 + (1 if result.mtp else 0))


def layer_messages(result: Plan, layout: Any = None) -> Dict[int, List[Tuple[str, str]]]:
    """Per layer, the (level, message) lines LayerSetting logs when it sets that layer.

    Walks every applied pattern over ``layout`` (default: the plan's model family) with the one
    matcher, so the texts carry MindFormers' quirks: only the last leaf match is named, a
    1-segment op_swap item reads ``.name``, a multi-segment one has a leading space, a pattern that
    matches nothing contributes nothing, and exclude / comm patterns that reach a cell print the
    "expected to be operation but got cell" line instead.
    """
    def walker(lp: LayerPlan) -> Walker:
        return (lambda pat, mode: walk(layout, pat, mode)) if layout is not None else result.walker(lp.layer)

    return {lp.layer: [(ln.level, ln.text) for ln in layer_lines(result, lp, walker(lp))] for lp in result.layers}


def mtp_messages(result: Plan, layout: Any = None) -> List[Tuple[str, str]]:
    """The (level, message) lines of the MTP block's layers (each set as layer num_layers - 1,
    on the MTP layer's tree), in order."""
    out: List[Tuple[str, str]] = []
    for lp in result.mtp:
        walker = (lambda pat, mode, _l=layout: walk(_l, pat, mode)) if layout is not None \
            else result.walker(lp.layer, mtp=True)
        out.extend((ln.level, ln.text) for ln in layer_lines(result, lp, walker))
    return out


def layer_lines(result: Plan, lp: LayerPlan, walker: Walker) -> List[setting_lines.SettingLine]:
    """The lines LayerSetting logs at one layer, walking patterns with ``walker`` in MindFormers'
    order (select on, comm on, exclude, comm exclude; swap mode: select, comm, then op swap). The
    hooks call this with a walker over real MindSpore cells and apply the actions to what each walk
    reached; the wording itself lives in :mod:`swapwatch.model.setting_lines` (which the grammar reads by)."""
    lines: List[setting_lines.SettingLine] = []
    i = lp.layer
    if result.legacy_recompute is not None:
        return lines
    if lp.full_recompute and lp.full_recompute_logged:
        lines.append(setting_lines.full_recompute(i))
    passes = ["select_recompute", "select_comm_recompute"]
    if not result.swap:
        passes += ["select_recompute_exclude", "select_comm_recompute_exclude"]
    for key in passes:
        mode = WALK_MODE[key]
        items = []
        for pat in lp.patterns(key):
            res = walker(pat, mode)
            one_seg = len(patterns.split_pattern(pat)) == 1
            for path in res.skipped_cells:
                lines.append(setting_lines.cell_not_op(i, path, one_seg, comm=mode == "comm"))
            if res.matched:
                items.append(patterns.log_item(res.raw_log, mode))
        if items:
            lines.append(setting_lines.select(i, comm=mode in ("comm", "comm_exclude"),
                                              exclude=actions.BY_NAME[key].exclude, swap=result.swap, items=items))
    if result.swap:
        if lp.layer_swap is not None:
            ls = result.formative.get("layer_swap") or []
            lines.append(setting_lines.layer_swap(i, lp.layer_swap, all_layers=bool(ls) and ls[0]["layers"] is True))
        swapped = []
        for pat, p in lp.op_swap.items():
            res = walker(pat, "swap")
            if res.matched:
                swapped.append((res.raw_log, p))
        if swapped:
            lines.append(setting_lines.op_swap(i, swapped))
    return lines


def expected_lines(result: Plan, layout: Any = None) -> Dict[int, List[str]]:
    """Per layer, the exact ``Set ...`` (and "got cell") message texts MindFormers will log."""
    return {i: [m for _, m in msgs] for i, msgs in layer_messages(result, layout).items()}


def layer_setting_lines(result: Plan, layout: Any = None) -> List[str]:
    """The whole LayerSetting block as message parts: init lines, then every layer's lines."""
    block = [m for _, m in init_messages(result)]
    out = list(block)
    for msgs in layer_messages(result, layout).values():
        out.extend(m for _, m in msgs)
    if result.mtp:
        out.extend(block)
        out.extend(m for _, m in mtp_messages(result, layout))
    return out


def describe(plan: Plan, cfg: "TrainingConfig") -> List[str]:
    """What ``explain`` says about a LayerSetting plan above its table: the geometry, swap mode and model layout,
    and what MindFormers does with the config that the table cannot show (a plain-bool recompute, its default op
    swap, patterns an exclude removes)."""
    g = plan.geometry
    out: List[str] = []
    src = cfg.source or "config"
    mode = "swap ON (recompute keys are layer ids)" if plan.swap else "swap off"
    out.append(f"{src}: {g.num_layers} layers, pipeline_stage {g.pipeline_stage}, "
               f"pp_interleave_num {g.pp_interleave_num}, {mode}; model layout: {plan.model}")
    if plan.family is not None:
        out.append(f"  model family: {plan.family.describe()}")
    if cfg.mtp_depth:
        out.append(f"  (num_layers includes mtp_depth {cfg.mtp_depth}, as MindFormers passes it to LayerSetting)")
    if cfg.pp_interleave_num > 1 and not cfg.pipeline_interleave:
        out.append(f"  (pp_interleave_num {cfg.pp_interleave_num} is ignored: pipeline_interleave is off)")
    out.append(f"layers per chunk [interleave][stage]: {g.layer_list}   chunk starts: "
               f"{[row[:-1] for row in g.chunk_starts]}")
    if plan.legacy_recompute is not None:
        out.append(f"parallel_config.recompute is the plain bool {plan.legacy_recompute}: MindFormers skips "
                   f"recompute_config and logs nothing per layer")
    if "op_swap" in plan.defaulted:
        out.append(f"note: swap is on with no layer_swap / op_swap: MindFormers applies its default op swap "
                   f"'{plan.defaulted['op_swap'][0]}' on every layer (you did not write it)")
    for key, pat in plan.removed:
        out.append(f"note: {key} pattern {pat!r} is removed from every layer (an exclude pattern overlaps it)")
    return out
