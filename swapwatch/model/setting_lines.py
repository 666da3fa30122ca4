"""MindFormers' per-layer strategy lines, on both code paths, written and read in this one place.

While it sets a decoder layer, MindFormers 2.1.0 logs what it did in a handful of fixed wordings
(``parallel_core/training_graph/transformer/utils.py``, class ``LayerSetting``: ``set_recompute``,
``_set_select_recompute`` / ``_set_select_recompute_layer_index``, ``set_swap`` / ``_set_layer_swap``
/ ``_set_op_swap``, and ``set_pattern_recompute`` for the "got cell" line; the legacy models such as
``mindformers/models/llama/llama.py`` import that same class, so one set of wordings covers both
code paths). swapwatch writes these lines (the engine's expected log, the runtime hooks' log) and
reads them back (the log grammar). Both sides live here, per line kind:

* a :class:`LineKind`: the grammar row's name, regex body, literal head (what the scanner's
  prefilter keeps an INFO record by), needle and version note; :mod:`swapwatch.parsers.grammar`
  takes its LayerSetting ``Set ...`` rows from these, so the reader cannot drift from the writer;
* a writer: structured values (layer id, the walk's text, the prefetch) -> a :class:`SettingLine`
  carrying MindFormers' exact bytes (whitespace runs from its backslash-continued f-strings,
  leading dots) *and* the normalised form the hooks log without ``quirks``, both rendered from the
  values, so nobody re-parses text to normalise it.

The same holds for the other lines MindFormers logs about the strategy:

* LayerSetting's swap/recompute conflict WARNINGs at construction (``LayerSetting.__init__``'s check;
  :func:`conflict_layer`, :func:`conflict_listed`, :func:`conflict_all_layers`, :func:`conflict_op`,
  :func:`conflict_recompute_true`, rows :data:`CONFLICT_KINDS`);
* the r2.x PyNative trainer's ``apply_ac`` lines (``mindformers/pynative/distributed/
  activation_checkpoint.py``: ``apply_recompute``, ``apply_swap``, ``_clean_and_parse_config``'s "Final ...
  Configuration Map"): ``Set full recompute`` and ``Set select (comm) recompute`` are LayerSetting's words
  (:func:`full_recompute`, :func:`select` with no word); ``Set exclude recompute``, ``Set layer swap`` (no
  value), ``Set select swap`` and the maps are its own (:func:`pyn_exclude`, :func:`pyn_layer_swap`,
  :func:`pyn_select_swap`, :func:`map_start`, :func:`map_entry`, :data:`MAP_END`; rows :data:`PYNATIVE_KINDS`).

:func:`line_label` names every per-layer line kind in messages (the actions' labels, and a map's entries).

No dependency beyond the standard library: the parsers import this module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

Prefetch = Union[int, str]

#: Runs of spaces inside MindFormers' layer swap line (a backslash continuation in its f-string):
#: ``_set_layer_swap`` (layer listed) and ``set_swap`` (``layers: True``) are indented differently.
GAP_LAYER_SWAP_ALL = 33
GAP_LAYER_SWAP_LIST = 29


@dataclass(frozen=True)
class LineKind:
    """How the grammar reads one kind of line (the fields of :class:`swapwatch.parsers.grammar.Row`).

    ``regex`` runs on the whitespace-collapsed message; ``head`` is the literal it begins with,
    ``needle`` a literal every such line contains (for logs without MindFormers' prefix)."""

    name: str
    regex: str
    head: Optional[str]
    needle: Optional[str]
    versions: str


FULL_RECOMPUTE = LineKind("full_recompute", r"Set full recompute at layer (?P<layer>\d+)$", "Set ", "ecompute", "all")
SELECT = LineKind(
    "select", r"Set select (?P<comm>comm )?recompute(?: (?P<word>on|exclude|off))? at layer (?P<layer>\d+):"
              r" ?(?P<ops>.*)$", "Set ", "ecompute",
    "'on'/'exclude' in non-swap mode; no word in swap mode and dev-mcore; 'off' before 2025-03-25")
LAYER_SWAP = LineKind("layer_swap", r"Set layer swap at layer (?P<layer>\d+) and value is: (?P<v>\S+)$", "Set ",
                      "swap", "29/33-space run before 'and' (collapsed)")
OP_SWAP = LineKind("op_swap", r"Set op_swap at layer (?P<layer>\d+): ?(?P<ops>.*)$", "Set ", "swap",
                   "items '.name, value=p' (1-segment) or ' path, value=p' (multi-segment: double space)")
CELL_NOT_OP = LineKind(
    "cell_not_op", r"For (?P<for>select recompute/comm_recompute (?:exclude|off)|communication recompute), "
                   r"(?P<path>\S+) is expected to be operation but got cell, this configuration will not be "
                   r"effective\.$", "For ", "ecompute", "legacy + r1.7 full LayerSetting")

#: Every per-layer line kind, in the order the grammar tries them.
KINDS: Tuple[LineKind, ...] = (FULL_RECOMPUTE, SELECT, LAYER_SWAP, OP_SWAP, CELL_NOT_OP)

#: Runs of spaces inside LayerSetting's swap/recompute conflict WARNINGs (backslash continuations).
GAP_RECOMPUTE_TRUE = 27       # "All layers and ops ... work!<27>Because recompute = True."
GAP_WARN_LAYER = 31           # "... in layer i that<31>is enabled swap": a layer swap voided (2.1.0: both forms)
GAP_WARN_LISTED = 35          # same text for an op swap voided; also "in all layers ...<35>Because"
_CONFLICT_TAIL = "is enabled swap do not work! Because it is enabled recompute."

CONFLICT_LAYER = LineKind("swap_conflict_layer", r"(?P<op>.+?) operator in layer (?P<layer>\d+) that is enabled swap "
                                                 r"do not work! Because it is enabled recompute\.$", None, "swap",
                          "wording since 836aa288")
CONFLICT_ALL_LAYERS = LineKind("swap_conflict_all_layers", r"(?P<op>.+?) operator in all layers that is enabled swap "
                                                           r"do not work! Because it is enabled recompute\.$",
                               None, "swap", "since 836aa288")
CONFLICT_OP = LineKind("swap_conflict_op", r"(?P<op>.+?) operator that is enabled swap do not work! Because it is "
                                           r"enabled recompute\.$", None, "swap", "since 836aa288")
CONFLICT_RECOMPUTE_TRUE = LineKind("swap_conflict_recompute_true", r"All layers and ops that are enabled swap do "
                                                                   r"not work! Because recompute = (?P<v>.+)\.$",
                                   "All layers", "swap", "since 836aa288")
#: The conflict WARNINGs, in the order the grammar tries them.
CONFLICT_KINDS: Tuple[LineKind, ...] = (CONFLICT_LAYER, CONFLICT_ALL_LAYERS, CONFLICT_OP, CONFLICT_RECOMPUTE_TRUE)

#: ``apply_ac``'s own per-layer lines and maps (the others are LayerSetting's words, :data:`KINDS`).
PYN_MAP_START = LineKind("pyn_map_start", r"--- Final (?P<label>.+?) Configuration Map---$", "--- Final ",
                         "Configuration Map---", "2.1.0: labels Recompute, ExcludeOp, Comm Select Recompute, Swap")
PYN_MAP_ENTRY = LineKind("pyn_map_entry", r"layer(?P<layer>\d+): (?P<ops>.*)$", "layer", None,
                         "2.1.0: one per layer in sorted order; '(No Module)' when empty")
PYN_MAP_END = LineKind("pyn_map_end", r"-{69}$", "-----", None, "2.1.0: 69 dashes close a map")
PYN_SET_EXCLUDE = LineKind("pyn_set_exclude", r"Set exclude recompute at layer (?P<layer>\d+): ?(?P<ops>.*)$", "Set ",
                           "ecompute", "2.1.0")
PYN_LAYER_SWAP = LineKind("pyn_layer_swap", r"Set layer swap at layer (?P<layer>\d+)$", "Set ", "swap",
                          "2.1.0 (the static path adds 'and value is: p')")
PYN_SELECT_SWAP = LineKind("pyn_select_swap", r"Set select swap at layer (?P<layer>\d+): ?(?P<ops>.*)$", "Set ",
                           "swap", "2.1.0: only when a path was really wrapped")
#: ``apply_ac``'s own line kinds, in the order the grammar tries them.
PYNATIVE_KINDS: Tuple[LineKind, ...] = (PYN_MAP_START, PYN_MAP_ENTRY, PYN_MAP_END, PYN_SET_EXCLUDE, PYN_LAYER_SWAP,
                                        PYN_SELECT_SWAP)
#: A map entry's action in the comparison (``map:<label>``): what a rank's map lists per layer
MAP_ACTION = "map:"


@dataclass(frozen=True)
class SettingLine:
    """One line LayerSetting logs while setting a layer.

    ``text`` is MindFormers' exact message; ``plain`` the same line with whitespace runs collapsed
    and the leading dot of one-segment paths dropped (what the hooks log without ``quirks``; the
    grammar reads both)."""

    kind: str
    layer: int
    text: str
    plain: str
    level: str = "INFO"


def _collapse(text: str) -> str:
    """Whitespace runs -> one space: the form the grammar's regexes are written for (the same as
    ``swapwatch.parsers.prefix.collapse``, not imported from there because the parsers import us)."""
    return " ".join(text.split())


def full_recompute(layer: int) -> SettingLine:
    """``set_recompute``: the whole layer is recomputed."""
    text = f"Set full recompute at layer {layer}"
    return SettingLine(FULL_RECOMPUTE.name, layer, text, text)


def select(layer: int, comm: bool, exclude: bool, swap: bool, items: Sequence[str]) -> SettingLine:
    """``_set_select_recompute`` (word ``on`` / ``exclude``) or, with swap on,
    ``_set_select_recompute_layer_index`` (no word). ``items``: each applied pattern's logged text
    (the walk's text without its first character, :func:`swapwatch.model.patterns.log_item`)."""
    word = "" if swap else (" exclude" if exclude else " on")
    text = f"Set select {'comm ' if comm else ''}recompute{word} at layer {layer}: " + ", ".join(items)
    return SettingLine(SELECT.name, layer, text, _collapse(text))


def layer_swap(layer: int, prefetch: Prefetch, all_layers: bool) -> SettingLine:
    """``set_swap`` (``layers: True``) or ``_set_layer_swap`` (layer listed): the whole layer."""
    gap = GAP_LAYER_SWAP_ALL if all_layers else GAP_LAYER_SWAP_LIST
    text = f"Set layer swap at layer {layer}{' ' * gap}and value is: {prefetch}"
    return SettingLine(LAYER_SWAP.name, layer, text, _collapse(text))


def op_swap_item(raw_log: str, prefetch: Prefetch, plain: bool = False) -> str:
    """One op_swap pattern's text. MindFormers appends ``, value=p`` to *every* leaf path and keeps
    the walk's first character: ``.attention, value=20`` (one segment) or `` a.x, value=1, a.y,
    value=1`` (several segments, leading space). ``plain`` leaves that first character out."""
    lead, body = raw_log[:1], raw_log[1:]
    return ("" if plain else lead) + ", ".join(f"{path}, value={prefetch}" for path in body.split(", "))


def op_swap(layer: int, items: Sequence[Tuple[str, Prefetch]]) -> SettingLine:
    """``_set_op_swap``: ``items`` are (the walk's text, prefetch) of each swapped pattern that
    reached something, in the config's order."""
    head = f"Set op_swap at layer {layer}: "
    text = head + ", ".join(op_swap_item(raw, p) for raw, p in items)
    plain = head + ", ".join(op_swap_item(raw, p, plain=True) for raw, p in items)
    return SettingLine(OP_SWAP.name, layer, text, _collapse(plain))


def cell_not_op(layer: int, path: str, one_segment: bool, comm: bool) -> SettingLine:
    """``set_pattern_recompute``: an exclude or comm pattern reached a cell, which it cannot mark.
    MindFormers names a one-segment pattern's cell with a leading dot (``.feed_forward``)."""
    what = "communication recompute" if comm else "select recompute/comm_recompute exclude"
    tail = " is expected to be operation but got cell, this configuration will not be effective."
    shown = f".{path}" if one_segment else path
    return SettingLine(CELL_NOT_OP.name, layer, f"For {what}, {shown}{tail}", _collapse(f"For {what}, {path}{tail}"))


# ---------------------------------------------------------------------------------------------
# LayerSetting's swap/recompute conflict WARNINGs
# ---------------------------------------------------------------------------------------------

def conflict_layer(op: str, layer: int) -> str:
    """A layer swap voided by a recomputed layer (``op`` "All") or op: ``... in layer i that<31>is enabled ...``."""
    return f"{op} operator in layer {layer} that{' ' * GAP_WARN_LAYER}{_CONFLICT_TAIL}"


def conflict_listed(op: str, layer: int) -> str:
    """An op swap voided on a listed layer: ``... in layer i that<35>is enabled ...``."""
    return f"{op} operator in layer {layer} that{' ' * GAP_WARN_LISTED}{_CONFLICT_TAIL}"


def conflict_op(op: str) -> str:
    """An op swap voided by ``recompute: True`` on the op."""
    return f"{op} operator that is enabled swap do not work! Because it is enabled recompute."


def conflict_all_layers(op: str) -> str:
    """A select recompute of ``op`` on every layer (``True``) against swap."""
    return f"{op} operator in all layers that is enabled swap do not work!{' ' * GAP_WARN_LISTED}" \
           "Because it is enabled recompute."


def conflict_recompute_true(value: object) -> str:
    """``recompute: True`` with swap: nothing swapped anywhere."""
    gap = " " * GAP_RECOMPUTE_TRUE
    return f"All layers and ops that are enabled swap do not work!{gap}Because recompute = {value}."


# ---------------------------------------------------------------------------------------------
# The PyNative trainer's apply_ac lines
# ---------------------------------------------------------------------------------------------

#: 69 dashes close a "Final ... Configuration Map"
MAP_END = "-" * 69


def map_start(label: str) -> str:
    return f"--- Final {label} Configuration Map---"


def map_entry(layer: int, paths: Sequence[str]) -> str:
    return f"layer{layer}: {', '.join(paths) if paths else '(No Module)'}"


def pyn_exclude(layer: int, paths: Sequence[str]) -> str:
    return f"Set exclude recompute at layer {layer}: {', '.join(paths)}"


def pyn_layer_swap(layer: int) -> str:
    return f"Set layer swap at layer {layer}"


def pyn_select_swap(layer: int, paths: Sequence[str]) -> str:
    return f"Set select swap at layer {layer}: {', '.join(paths)}"


def line_label(action: str) -> str:
    """A per-layer line kind in messages: an action's label (``select recompute``), or ``'Final Recompute
    Configuration Map' entry`` for a map's (``map:Recompute``)."""
    if action.startswith(MAP_ACTION):
        return f"'Final {action[len(MAP_ACTION):]} Configuration Map' entry"
    from .actions import label

    return label(action)
