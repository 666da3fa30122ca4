"""Configured vs logged, per rank, per layer, per action: the plan-vs-log comparison of ``verify``.

:func:`compare` is built once per verification (``verify.evaluate``) and handed to every rule on
:class:`~swapwatch.checks.CheckContext` (``ctx.comparison``): SW101 (missing), SW102 (unasked),
SW103 (prefetch differs), SW104 (pattern matched nothing in any log), SW106 (incomplete logs),
SW401 (ranks disagree), the ``verify`` per-layer map and ``plot strategy`` all read the
:class:`RankDiff` built here, so the matching is done once and every reader sees the same answer.

What MindFormers logs is *not* everything it applies (``LayerSetting`` in
``parallel_core/training_graph/transformer/utils.py``; docs/mindspore-facts.md §1.3; README "What
MindFormers accepts and drops without a word"): a leaf pattern that matches several siblings logs
only the last; a pattern that matches nothing logs nothing; in swap mode ``recompute: True``
recomputes every layer without a line; exclude and comm patterns skip cells silently. So the
comparison works per *pattern*, never per literal text: a configured pattern counts as applied on
a layer when at least one path logged for that action on that layer is matched by it (the shared
matcher, :func:`swapwatch.model.patterns.logged_path_matches`), and a logged path counts as asked for
when some pattern applied there matches it. The per-layer decisions themselves come from the
:class:`~swapwatch.model.plan.Plan` (strategy.py is the one place for those semantics); this module
only knows which of them leave a line in the log.

Both of MindFormers' code paths are compared here, by the same code: each path says what its plan makes
the log show (an :class:`ExpectedLog`: ``codepaths.CodePath.expected_log``) and how its lines read back
(a :class:`LogReader`: ``codepaths.CodePath.logged``). On LayerSetting a configured item is a *pattern*
matched segment by segment; on the PyNative ``apply_ac`` path it is a resolved module path (``literal``),
matched as written, and its log also has the "Final ... Configuration Map" entries and a few notices of
its own (a refused config, a pattern that matched nothing, world size 1), which the reader gives as
:class:`Notices`. The rules read one :class:`Comparison` whichever path made it.

It also holds what "the same value" means when a logged value meets a configured one
(:func:`canon`, :func:`same_value`): SW107, SW109 and SW401 all decide with it.
"""
from __future__ import annotations

import functools
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Optional, Protocol, Sequence, Set, Tuple

from ..model import actions, patterns
from ..model.actions import NAMES as ACTIONS
from ..model.families import DEFAULT_FAMILY
from ..parsers import model as _model

if TYPE_CHECKING:
    from ..model.plan import Plan


@dataclass
class Expected:
    """One thing the plan applies at one layer, and whether MindFormers leaves a line for it."""

    layer: int
    action: str
    pattern: Optional[str] = None       # None for full_recompute / layer_swap
    value: Any = None                   # prefetch for swaps
    paths: List[str] = field(default_factory=list)   # what the layout says the line will name
    logged: bool = True                 # False: applied without a log line (swap-mode recompute: True)
    #: the paths come from the layer's own tree of a family the config names: an empty ``paths``
    #: then means "this layer logs nothing for it" (a default pattern of another layer kind)
    resolved: bool = False
    #: ``pattern`` is a resolved module path, matched as written (``apply_ac`` logs what it wrapped),
    #: not a pattern matched segment by segment (LayerSetting)
    literal: bool = False

    def matches(self, path: Optional[str]) -> bool:
        """Does the logged ``path`` show this item?"""
        if self.literal:
            return path == self.pattern
        return patterns.logged_path_matches(self.pattern, path)

    @property
    def op(self) -> Optional[str]:
        """The op to name in a finding: the expected logged path(s), else the pattern."""
        if self.pattern is None:
            return None
        return ", ".join(self.paths) if self.paths else self.pattern


@dataclass
class Seen:
    """One item of one logged action: a path (None for whole-layer actions) and its value."""

    layer: int
    action: str
    path: Optional[str]
    value: Any
    source: str


@dataclass(frozen=True)
class Notices:
    """What a rank's log says about the strategy besides its per-layer lines (a path's own notices;
    none on LayerSetting): MindFormers refused the strategy (``refused``: the notice events), a pattern
    matched no module (``no_match``), the run applies no strategy at all (``applies`` False: a one-card
    PyNative run never calls ``apply_ac``), any of them (``any``: the rank printed MindFormers output)."""

    refused: Tuple[Any, ...] = ()
    no_match: Tuple[Any, ...] = ()
    applies: bool = True
    any: bool = False


#: a rank's log without notices of its own (every LayerSetting rank)
NO_NOTICES = Notices()


class LogReader(Protocol):
    """How one code path's log reads back (``codepaths.CodePath.logged``)."""

    def seen(self, rank_log: "_model.RankLog") -> Dict[int, List["Seen"]]:
        """Per layer, the items the rank's per-layer lines show (deduplicated)."""

    def notices(self, rank_log: "_model.RankLog") -> Notices:
        """The rank's notices about the strategy (:data:`NO_NOTICES` when the path has none: a packed
        rank must not be unpacked to say so)."""


@dataclass
class ExpectedLog:
    """What a plan makes MindFormers log, per layer (``codepaths.CodePath.expected_log``)."""

    items: Dict[int, List[Expected]]
    #: every path the model's layers have: a logged path outside them means the layout is not the
    #: model's (``Comparison.layout_trusted``)
    known_paths: FrozenSet[str]
    #: each rank logs only its own pipeline stage's layers (``apply_ac`` runs on each stage's chunk):
    #: what is missing is judged on all ranks together (``Comparison.union``), and ranks are not
    #: compared with each other
    per_stage: bool = False
    #: (label, pattern) the plan says match nothing on any layer: a rank's no-match notice for another
    #: pattern is a stage's view of a pattern that matches on another stage (``per_stage``)
    unmatched: FrozenSet[Tuple[str, str]] = frozenset()
    #: action -> MindFormers' default patterns the plan took for it (they span layer kinds: one that no
    #: layer logs is not a typo while another of them applied)
    defaulted: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: ``(action, pattern, layer) -> text``: a did-you-mean for a pattern no rank logged ("" for none)
    hint: Callable[[str, str, int], str] = field(default=lambda action, pattern, layer: "")


class _LayerSettingLog:
    """LayerSetting's ``Set ...`` lines read back: :func:`seen_items`, no notices of its own."""

    def seen(self, rank_log: "_model.RankLog") -> Dict[int, List["Seen"]]:
        return seen_items(rank_log)

    def notices(self, rank_log: "_model.RankLog") -> Notices:
        return NO_NOTICES


#: the LayerSetting path's reader (``codepaths.LayerSetting.logged``)
LAYER_SETTING_LOG: LogReader = _LayerSettingLog()


@dataclass
class RankDiff:
    """Everything one rank did differently from the plan (``rank`` None: all ranks together, when each
    logs only its own stage: ``Comparison.union``)."""

    rank: Optional[int]
    missing: List[Expected] = field(default_factory=list)
    extra: List[Seen] = field(default_factory=list)
    value_diffs: List[Tuple[Expected, Seen]] = field(default_factory=list)
    #: (action, pattern) -> layers where a logged path matched it
    matched: Dict[Tuple[str, str], Set[int]] = field(default_factory=lambda: defaultdict(set))
    #: layers whose absence cannot be judged (the log stops before them)
    cut_layers: Set[int] = field(default_factory=set)
    #: what the rank logged per layer; a packed rank's is a read-only :class:`LazySeen`
    seen: "Mapping[int, List[Seen]]" = field(default_factory=lambda: defaultdict(list))
    has_strategy_lines: bool = False
    #: a lower rank that logged exactly the same items with the same cut (this diff is its
    #: verdicts with this rank's sources), None when this rank was compared on its own
    same_as: Optional[int] = None
    #: the rank's own notices (:class:`Notices`), and whether it printed MindFormers output at all
    notices: Notices = NO_NOTICES
    loud: bool = False

    @property
    def refused(self) -> Tuple[Any, ...]:
        """MindFormers refused the strategy on this rank (the notices saying so)."""
        return self.notices.refused

    @property
    def silent(self) -> bool:
        """No strategy line, no notice, no MindFormers output at all."""
        return not self.loud and not self.has_strategy_lines


@dataclass
class Comparison:
    """The per-rank diffs of one run, plus what the run as a whole says about each pattern."""

    expected: Dict[int, List[Expected]]
    ranks: Dict[int, RankDiff]
    layout_trusted: bool
    #: (action, pattern) matched by a logged path on any rank
    seen_anywhere: Set[Tuple[str, str]]
    #: (action, pattern) the layout says will log something
    layout_matches: Set[Tuple[str, str]]
    #: ranks log only their own stage's layers (:attr:`ExpectedLog.per_stage`): missing items are judged
    #: on :attr:`union`, and ranks are not compared with each other
    per_stage: bool = False
    #: with :attr:`per_stage`, what all ranks logged together (each key as the lowest rank logged it),
    #: compared with the plan (``rank`` None)
    union: Optional[RankDiff] = None
    #: (label, pattern) the plan says match nothing anywhere (:attr:`ExpectedLog.unmatched`)
    unmatched: FrozenSet[Tuple[str, str]] = frozenset()
    #: :attr:`ExpectedLog.defaulted` and :attr:`ExpectedLog.hint`
    defaulted: Mapping[str, Sequence[str]] = field(default_factory=dict)
    hint: Callable[[str, str, int], str] = field(default=lambda action, pattern, layer: "")

    def judged(self) -> List[RankDiff]:
        """The diffs whose missing items are differences: every rank's, or with :attr:`per_stage` the
        union's (a rank of one stage logs no line for another stage's layers)."""
        if self.union is not None:
            return [self.union]
        return [d for _, d in sorted(self.ranks.items())]

    def no_match(self, diff: RankDiff) -> List[Any]:
        """``diff``'s rank's notices that a pattern matched nothing, as they stand: with :attr:`per_stage`
        not a stage's notice for a pattern that matches on another stage."""
        if diff.silent:
            return []
        return [n for n in diff.notices.no_match
                if not (self.per_stage and (n.data["label"], n.data["pattern"]) not in self.unmatched)]

    def missing_differs(self, e: "Expected") -> bool:
        """Is a missing expected item a difference of the run? The one answer SW101, verify's
        per-layer map (its ✗) and ``plot strategy`` all read, so a ✗ is always a failing finding:
        a whole-layer action, or a pattern some rank logged a match for, or one the (trusted)
        layout says must log. A pattern no rank matched and nothing says should is SW104's (a
        config that reaches nothing), not a difference of the run."""
        key = (e.action, e.pattern)
        return e.pattern is None or e.literal or key in self.seen_anywhere or (
            self.layout_trusted and key in self.layout_matches)

    def cells(self, diff: "RankDiff") -> Set[Tuple[int, str]]:
        """``(layer, action)`` where ``diff``'s rank differs from the plan (what the map marks ✗)."""
        bad = {(e.layer, e.action) for e in diff.missing if self.missing_differs(e)}
        bad |= {(s.layer, s.action) for s in diff.extra}
        bad |= {(s.layer, s.action) for _, s in diff.value_diffs}
        return bad


# ---------------------------------------------------------------------------------------------
# What the plan makes MindFormers log
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def _layout_walk(family: Optional[str], pattern: str, mode: str) -> Tuple[str, ...]:
    """The dotted paths the layout (a layout key, ``family:kind``) says a pattern's log item
    names (empty: it logs nothing, or the family is unknown)."""
    from ..layouts import load_layout

    if family is None:
        return ()
    try:
        result = patterns.walk_layout(load_layout(family), pattern, mode)
    except patterns.PatternError:
        return ()
    return tuple(patterns.logged_paths(result.raw_log))


def layout_paths(family: str) -> frozenset:
    """Every path (cell or prim) of the family's layer layouts (every kind: dense, MoE, MTP):
    :func:`swapwatch.model.families.layout_paths`, the one memo of it."""
    from ..model.families import layout_paths as paths

    return paths(family)


def _key_of(plan: "Plan", layer: int, family: Optional[str]) -> Optional[str]:
    """The layout key of one layer: the plan's own (per layer kind) when it has one."""
    if plan.family is not None:
        return plan.layout_key(layer)
    return family


def expected_actions(plan: "Plan", family: Optional[str] = DEFAULT_FAMILY) -> Dict[int, List[Expected]]:
    """Per layer, what the plan applies, in MindFormers' per-layer order, with the expected paths
    (each layer resolved on its own tree: dense, MoE). Whether a full recompute is logged is the
    engine's answer (``LayerPlan.full_recompute_logged``: swap mode with ``recompute: True`` and the
    legacy plain-bool ``parallel_config.recompute`` recompute every layer without a line)."""
    out: Dict[int, List[Expected]] = {}
    base = family
    fam = plan.family
    resolved = bool(fam is not None and fam.known and not fam.origin.startswith("default"))
    for lp in plan.layers:
        family = _key_of(plan, lp.layer, base)   # None: a family with no tree
        items: List[Expected] = []
        if lp.full_recompute:
            items.append(Expected(lp.layer, "full_recompute", logged=lp.full_recompute_logged))
        for action in actions.SELECT_ACTIONS:
            for pat in lp.patterns(action):
                items.append(Expected(lp.layer, action, pat, True,
                                      list(_layout_walk(family, pat, actions.WALK_MODE[action])), resolved=resolved))
        if lp.layer_swap is not None:
            items.append(Expected(lp.layer, "layer_swap", value=lp.layer_swap))
        for pat, prefetch in (lp.op_swap or {}).items():
            items.append(Expected(lp.layer, "op_swap", pat, prefetch,
                                  list(_layout_walk(family, pat, "swap")), resolved=resolved))
        out[lp.layer] = items
    return out


# ---------------------------------------------------------------------------------------------
# What a rank logged
# ---------------------------------------------------------------------------------------------

def seen_items(rank_log: "_model.RankLog") -> Dict[int, List[Seen]]:
    """The rank's logged actions as items, deduplicated (MTP repeats layer num_layers-1; a
    SWAPWATCH ``apply`` event and its MindFormers text line say the same thing twice)."""
    out: Dict[int, List[Seen]] = defaultdict(list)
    done: Set[Tuple[int, str, Optional[str], str]] = set()
    # authoritative SWAPWATCH events first, so their source is the one reported
    acts = sorted(rank_log.actions, key=lambda a: 0 if a.origin == "swapwatch" else 1)
    for a in acts:
        for path, value in a.items():
            key = (a.layer, a.action, path, norm_value(value))
            if key in done:
                continue
            done.add(key)
            out[a.layer].append(Seen(a.layer, a.action, path, value, a.source))
    return out


def norm_value(value: Any) -> str:
    """Prefetch values compare as text: ``10`` == ``"10"``; ``"Auto"`` stays ``"Auto"``."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def canon(value: Any) -> Any:
    """A value as plain data in one canonical form, for "is the logged value the configured one?".

    Dict key order is not a difference (a logged ``{...} from dict`` prints keys in its own
    order), keys compare as text, tuples and numpy arrays are lists, and an integral float is
    its int (YAML ``2.0`` and a logged ``2``). A bool stays a bool: ``recompute: True`` (every
    layer) is not ``recompute: 1`` (one layer per stage) in MindFormers, though ``True == 1`` in
    Python, so values are compared by :func:`same_value`, never with ``==`` on raw values.
    """
    if isinstance(value, dict):
        return {str(k): canon(x) for k, x in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [canon(x) for x in value]
    if hasattr(value, "tolist"):
        return canon(value.tolist())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def same_value(a: Any, b: Any) -> bool:
    """Do two values (logged, configured, or another rank's) say the same thing? (:func:`canon`)"""
    return canon_text(a) == canon_text(b)


def canon_text(value: Any) -> str:
    """The canonical form as one text: equal texts, same value (what :func:`same_value` compares;
    a text so ranks that logged the same values can share one)."""
    return repr(canon(value))


class ValueTexts:
    """:func:`canon_text` over many values, each object made canonical once: a rule that meets the
    config's values once per rank (10,000 ranks) canonicalises them once, and ranks that share
    parsed objects (packed ranks do) share the work. It holds the objects it has seen, so an id
    is never reused while it is remembered; make one per rule run."""

    def __init__(self) -> None:
        self._texts: Dict[int, Tuple[Any, str]] = {}

    def __call__(self, value: Any) -> str:
        got = self._texts.get(id(value))
        if got is None:
            got = self._texts[id(value)] = (value, canon_text(value))
        return got[1]

    def same(self, a: Any, b: Any) -> bool:
        """:func:`same_value`, memoised."""
        return self(a) == self(b)


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------

def expected_log(plan: "Plan", family: Optional[str] = None) -> ExpectedLog:
    """What a LayerSetting plan makes MindFormers log (``codepaths.LayerSetting.expected_log``):
    :func:`expected_actions` (``family``: the layout name for a plan without a
    :class:`~swapwatch.model.families.ModelFamily`; default the plan's own) and the family's paths."""
    from .unmatched import suggest

    family = family or plan.model           # the plan's family, else the default (decided in families.py)
    fam = plan.family
    return ExpectedLog(expected_actions(plan, family), fam.paths() if fam is not None else layout_paths(family),
                       defaulted=plan.defaulted, hint=functools.partial(suggest, plan))


def compare(expected: ExpectedLog, runlog: _model.RunLog, logged: LogReader = LAYER_SETTING_LOG) -> Comparison:
    """Compare every rank of ``runlog`` with what the plan makes the log show (``expected``), reading each
    rank's log with its path's ``logged`` reader.

    Ranks are visited one at a time (a packed rank is unpacked only while it is compared), and
    ranks that logged the same strategy items with the same cut are compared once: the others get
    the same verdicts with their own sources (:func:`_refold`). For a packed rank the diff keeps no
    copy of its logged items; ``RankDiff.seen`` reads them back from the rank when asked.
    """
    items = expected.items
    layout_matches = {(e.action, e.pattern) for row in items.values() for e in row
                      if e.pattern is not None and e.paths}
    ranks: Dict[int, RankDiff] = {}
    seen_anywhere: Set[Tuple[str, str]] = set()
    logged_paths: Set[str] = set()
    folds: Dict[Any, Tuple[RankDiff, Dict[int, int]]] = {}
    # packed ranks by the identity of their strategy key (one shared object per distinct strategy:
    # hashing its ~100-item tuple once per rank cost more than the rest of the rank's comparison);
    # the entry holds the key, so its id is not reused. An equal key that is another object only
    # misses this shortcut and is folded by content below.
    quick_folds: Dict[Tuple[int, bool], Tuple[Any, Tuple[RankDiff, Dict[int, int]]]] = {}
    union: Dict[Tuple[int, str], List[Seen]] = {}
    for r, rank_log in sorted(runlog.ranks.items()):
        skey = rank_log.strategy_key()
        packed = skey is not None
        notices = logged.notices(rank_log)
        loud = notices.any or printed_mindformers(rank_log)
        if packed and not expected.per_stage:
            # a packed rank knows its strategy's content: equal content, equal items, no unpacking
            quick = (id(skey), is_cut(rank_log))
            got = quick_folds.get(quick)
            if got is not None and not got[1][0].extra and not got[1][0].value_diffs:
                ranks[r] = _refold(r, got[1], [], LazySeen(rank_log, logged), notices, loud)
                continue
        seen = logged.seen(rank_log)
        flat = [s for row in seen.values() for s in row]
        logged_paths.update(s.path for s in flat if s.path is not None)
        if expected.per_stage:           # each (layer, action) as the lowest rank that logged it logged it
            mine: Dict[Tuple[int, str], List[Seen]] = {}
            for s in flat:
                mine.setdefault((s.layer, s.action), []).append(s)
            for uk, row in mine.items():
                union.setdefault(uk, row)
        key = (tuple((s.layer, s.action, s.path, norm_value(s.value)) for s in flat), is_cut(rank_log))
        folded = folds.get(key)
        if folded is None:
            diff = _rank_diff(r, rank_log, items, seen)
            if expected.per_stage:
                diff.missing = []               # judged on the union: a stage logs only its own layers
            folded = folds[key] = (diff, {id(s): i for i, s in enumerate(flat)})
            for k, layers in diff.matched.items():
                if layers:
                    seen_anywhere.add(k)
        else:
            diff = _refold(r, folded, flat, seen, notices, loud)
        diff.notices, diff.loud = notices, loud
        if packed:
            quick_folds.setdefault(quick, (skey, folded))
            diff.seen = LazySeen(rank_log, logged)
        ranks[r] = diff
    whole: Optional[RankDiff] = None
    if expected.per_stage:
        merged: Dict[int, List[Seen]] = defaultdict(list)
        for (layer, _), row in sorted(union.items()):
            merged[layer].extend(row)
        whole = RankDiff(None)
        whole.seen = merged
        whole.has_strategy_lines = any(merged.values())
        for layer in sorted(set(items) | set(merged)):
            _diff_layer(whole, layer, items.get(layer, []), merged.get(layer, []))
        whole.extra, whole.value_diffs = [], []          # each rank's own (its sources)
        whole.loud = any(d.loud for d in ranks.values())
    return Comparison(items, ranks, logged_paths <= expected.known_paths, seen_anywhere, layout_matches,
                      expected.per_stage, whole, expected.unmatched, expected.defaulted, expected.hint)


def _refold(rank: int, folded: Tuple[RankDiff, Dict[int, int]], flat: List[Seen],
            seen: "Mapping[int, List[Seen]]", notices: Notices, loud: bool) -> RankDiff:
    """The diff of a rank that logged exactly what an already compared rank logged (same items,
    same order, same cut): the same verdicts, with this rank's own Seen items (its sources)."""
    ref, index = folded
    # ref's fields, shared, then this rank's own: not RankDiff(...), whose default factories
    # (two defaultdicts and a set, thrown away at once) were most of a folded rank's cost
    diff = RankDiff.__new__(RankDiff)
    diff.__dict__.update(ref.__dict__)
    diff.rank = rank
    diff.same_as = ref.rank
    diff.seen = seen
    diff.extra = [flat[index[id(s)]] for s in ref.extra]
    diff.value_diffs = [(e, flat[index[id(s)]]) for e, s in ref.value_diffs]
    diff.notices, diff.loud = notices, loud
    return diff


class LazySeen(Mapping):
    """``RankDiff.seen`` of a packed rank: read back from the rank's events when asked, so a
    10,000-rank comparison holds no copy of every rank's items (the last few are cached)."""

    _recent: "OrderedDict[int, Tuple[Any, Dict[int, List[Seen]]]]" = OrderedDict()

    def __init__(self, rank_log: "_model.RankLog", logged: LogReader = LAYER_SETTING_LOG):
        self.rank_log, self.logged = rank_log, logged

    def _items(self) -> Dict[int, List[Seen]]:
        key = id(self)
        got = self._recent.get(key)
        if got is None:       # the entry holds self, so its id is not reused while cached
            got = self._recent[key] = (self, self.logged.seen(self.rank_log))
            while len(self._recent) > 16:
                self._recent.popitem(last=False)
        return got[1]

    def __getitem__(self, layer: int) -> List[Seen]:
        return self._items()[layer]

    def __iter__(self):
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


def _rank_diff(rank: int, rank_log: "_model.RankLog", expected: Dict[int, List[Expected]],
                  seen: Dict[int, List[Seen]]) -> RankDiff:
    diff = RankDiff(rank)
    diff.seen = seen
    diff.has_strategy_lines = any(seen.values())
    diff.cut_layers = _cut_layers(rank_log, seen, expected)
    for layer in sorted(set(expected) | set(seen)):
        _diff_layer(diff, layer, expected.get(layer, []), seen.get(layer, []))
    return diff


def _diff_layer(diff: RankDiff, layer: int, exp: List[Expected], got: List[Seen]) -> None:
    """One layer: every action in MindFormers' per-layer order, then any other line kind of the path
    (``apply_ac``'s map entries), each an action of path items."""
    others = sorted(({e.action for e in exp} | {s.action for s in got}) - set(ACTIONS))
    for action in [*ACTIONS, *others]:
        e_act = [e for e in exp if e.action == action]
        s_act = [s for s in got if s.action == action]
        if not e_act and not s_act:
            continue
        if action in actions.WHOLE_LAYER_ACTIONS:
            _diff_whole_layer(diff, layer, e_act, s_act)
        else:
            _diff_patterns(diff, layer, e_act, s_act)


def _diff_whole_layer(diff: RankDiff, layer: int, exp: List[Expected], got: List[Seen]) -> None:
    if exp and not got:
        if exp[0].logged and layer not in diff.cut_layers:
            diff.missing.append(exp[0])
        return
    if got and not exp:
        diff.extra.extend(got)
        return
    e = exp[0]
    if e.action == "layer_swap":
        values = {norm_value(s.value) for s in got}
        if norm_value(e.value) not in values or len(values) > 1:
            bad = next(s for s in got if norm_value(s.value) != norm_value(e.value))
            diff.value_diffs.append((e, bad))


def _diff_patterns(diff: RankDiff, layer: int, exp: List[Expected], got: List[Seen]) -> None:
    for e in exp:
        hits = [s for s in got if e.matches(s.path)]
        if hits and e.pattern is not None:
            diff.matched[(e.action, e.pattern)].add(layer)
        elif e.logged and layer not in diff.cut_layers and not (e.resolved and not e.paths):
            diff.missing.append(e)
    for s in got:
        owners = [e for e in exp if e.matches(s.path)]
        if not owners:
            diff.extra.append(s)
        elif s.action == "op_swap" and norm_value(s.value) not in {norm_value(e.value) for e in owners}:
            diff.value_diffs.append((owners[0], s))


def expects_lines(comp: "Comparison") -> bool:
    """Does the plan make MindFormers log any per-layer line at all?"""
    return any(expects_line(e) for items in comp.expected.values() for e in items)


def expects_line(e: Expected) -> bool:
    """Does MindFormers leave a line for ``e``? Not when it applies silently, and not for a
    pattern the layer's own (resolved) tree gives nothing to log."""
    return e.logged and not (e.resolved and e.pattern is not None and not e.paths)


def _cut_layers(rank_log: "_model.RankLog", seen: Dict[int, List[Seen]],
                expected: Dict[int, List[Expected]]) -> Set[int]:
    """Layers the log cannot speak for: everything from the last logged layer on when the log is
    cut off (the file is truncated, or the process died inside the strategy block). The last
    logged layer itself is included: its later lines may be what was cut. A block that stops
    after the last layer anything is configured to log on is complete as far as the strategy
    goes (MindFormers logs nothing for layers without actions): no layer is cut then."""
    if not is_cut(rank_log):
        return set()
    last = max((layer for layer, items in seen.items() if items), default=-1)
    if strategy_complete(seen, expected, last):
        return set()
    return {layer for layer in expected if layer >= last}


def strategy_complete(seen: Dict[int, List[Seen]], expected: Dict[int, List[Expected]], last: int) -> bool:
    """True when nothing configured to log lies after layer ``last`` and every line expected at
    ``last`` itself was logged (a cut inside that layer would drop its later lines)."""
    if any(expects_line(e) for layer, items in expected.items() if layer > last for e in items):
        return False
    if last < 0:
        return True
    got = seen.get(last, [])
    for e in expected.get(last, []):
        if not expects_line(e):
            continue
        if e.pattern is None:
            if not any(s.action == e.action for s in got):
                return False
        elif not any(s.action == e.action and e.matches(s.path) for s in got):
            return False
    return True


def is_cut(rank_log: _model.RankLog) -> bool:
    """True when the rank's strategy block may be cut short: the parser says the file is
    truncated, or a traceback / config error / failing exit comes after the last action line."""
    if rank_log.truncated:
        return True
    return fatal_after_actions(rank_log) is not None


def fatal_after_actions(rank_log: _model.RankLog) -> Optional[_model.Event]:
    """The first fatal event (traceback, config error, non-zero exit) after the last action line
    (a packed RankLog answers without unpacking)."""
    return rank_log.fatal_after_actions()


def near_source(diff: RankDiff, layer: int, rank_log: Optional[_model.RankLog] = None) -> Optional[str]:
    """Where to look for a missing line: a line of the same layer, else the last line before it,
    else the first line after it, else the rank's first file."""
    same = diff.seen.get(layer) or []
    if same:
        return same[0].source
    before = [s for lay in sorted(diff.seen) if lay < layer for s in diff.seen[lay]]
    if before:
        return before[-1].source
    after = [s for lay in sorted(diff.seen) if lay > layer for s in diff.seen[lay]]
    if after:
        return after[0].source
    files = rank_log.files if rank_log is not None else []
    return files[0] if files else None


def describe(action: str, op: Optional[str] = None) -> str:
    """``select recompute feed_forward.mul`` / ``full recompute``: for messages (a path's other line kinds,
    ``apply_ac``'s map entries, in the words of :mod:`swapwatch.model.setting_lines`)."""
    from ..model.setting_lines import line_label

    label = line_label(action)
    return f"{label} {op}" if op else label


#: Event kinds that only MindFormers' own logger produces (a rank with none of them printed nothing).
MINDFORMERS_KINDS = ("geometry", "formative", "initial_config", "action", "step")


def printed_mindformers(rank_log: "_model.RankLog") -> bool:
    """The rank's log holds MindFormers output (a path's own notices aside: :attr:`Notices.any`),
    answered without unpacking its events."""
    return not rank_log.kinds().isdisjoint(MINDFORMERS_KINDS)
