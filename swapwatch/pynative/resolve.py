"""PyNative strategy -> what ``apply_ac`` applies to every layer, the maps it prints and the lines it logs.

Mirrors MindFormers 2.1.0 ``mindformers/pynative/distributed/activation_checkpoint.py`` step by step:

* ``_expand_select_module``: every key is a regex ``regex.fullmatch``-ed against each path of each listed
  layer that exists; a key matching nothing logs the "did not match any module" WARNING;
* ``_clean_and_parse_config``: per layer, paths sorted by (dots, name), a path dropped when a selected
  shallower path is its dotted prefix, layers of ``full_recompute_layer`` (op swap: of ``layer_swap[0]``)
  removed; the "Final ... Configuration Map" lists the result;
* ``_clean_and_parse_comm_config``: comm paths in expansion order (not sorted), dropped on full layers and
  when a select-recompute path of the layer is their dotted prefix;
* ``apply_recompute``: per layer exclude -> full -> select -> comm; ``apply_swap``: layer swap of the *first*
  ``layer_swap`` entry only, op swap, prefetch pair ``(i, i + default_prefetch)`` for each swapped layer.

Walking a dotted path stops at a wrapper: once a cell is wrapped (full layer, select-recomputed cell,
excluded cell), a later walk through it finds no child of that name. That is why an op swap on a fully
recomputed layer is listed in the swap map, gets its prefetch pair, and swaps nothing (no
``Set select swap`` line): observed by running ``apply_ac`` with hyper_parallel's wrappers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Any, ClassVar, Dict, Iterable, List, Optional, Set, Tuple

import regex

from ..errors import ConfigError
from ..plan_view import APPLY_AC
from ..patterns import PatternError, check_size, check_total, under
from .config import PynativeConfig
from .layer_paths import cells_of, layer_lists
from .layer_spec import RECOMPUTE_TAG, Refusal, SPEC_RE, layer_ids
from . import validate as _v

#: map labels as printed: ``--- Final <label> Configuration Map---``
RECOMPUTE_MAP, EXCLUDE_MAP, COMM_MAP, SWAP_MAP = "Recompute", "ExcludeOp", "Comm Select Recompute", "Swap"
MAP_END = "-" * 69
EXCLUDE_NONE_WARNING = (f"{RECOMPUTE_TAG} exclude_op is configured but recompute mode is 'None'; "
                        "exclude_op has no effect without recompute.")


@dataclass
class LayerActions:
    """What ``apply_ac`` does to one global layer id (MTP layers have ids ``num_layers + i``)."""

    layer: int
    mtp: bool = False
    exclude: List[str] = field(default_factory=list)
    full: bool = False
    select: List[str] = field(default_factory=list)
    comm: List[str] = field(default_factory=list)
    comm_cells: List[str] = field(default_factory=list)     # comm paths ending at a cell: not effective
    layer_swap: bool = False
    op_swap: List[str] = field(default_factory=list)        # op-swap map paths that were wrapped
    op_swap_void: List[str] = field(default_factory=list)   # listed in the swap map, wrapped nothing
    blocked: List[Tuple[str, str]] = field(default_factory=list)   # (what, path) a wrapper hid
    prefetch_to: Optional[int] = None

    @property
    def any(self) -> bool:
        return bool(self.exclude or self.full or self.select or self.comm or self.comm_cells
                    or self.layer_swap or self.op_swap or self.op_swap_void)

    def actions(self) -> Dict[str, List[str]]:
        """Per action (``actions.NAMES``) what ``apply_ac`` applies here, as its ``Set ...`` lines log it: module
        paths, ``[]`` for the whole-layer actions; in ``apply_recompute`` / ``apply_swap`` order."""
        out: Dict[str, List[str]] = {}
        for action, paths in (("select_recompute_exclude", self.exclude), ("select_recompute", self.select),
                              ("select_comm_recompute", self.comm), ("op_swap", self.op_swap)):
            if paths:
                out[action] = list(paths)
        if self.full:
            out["full_recompute"] = []
        if self.layer_swap:
            out["layer_swap"] = []
        return out

    def cells(self) -> Dict[str, str]:
        """This layer's cells in the shared layer-table column names, and ``prefetch``."""
        from ..layer_table import VOIDED

        op = [f"{VOIDED}{p}" for p in self.op_swap_void] + list(self.op_swap)
        comm = list(self.comm) + [f"{p} (cell: not effective)" for p in self.comm_cells]
        return {"full_recompute": "yes" if self.full else "",
                "select_recompute": ", ".join(self.select),
                "select_comm_recompute": ", ".join(comm),
                "select_recompute_exclude": ", ".join(self.exclude),
                "layer_swap": "yes" if self.layer_swap else "",
                "op_swap": ", ".join(op),
                "prefetch": f"→ {self.prefetch_to}" if self.prefetch_to is not None else ""}


@dataclass
class LogLine:
    """One line ``apply_ac`` logs: level, message, the layer it is about (None for map headers/warnings)."""

    level: str
    text: str
    kind: str
    layer: Optional[int] = None
    key: Optional[str] = None


@dataclass
class PynativePlan:
    """What ``apply_ac`` does with a PyNative YAML: per global layer id, the maps it prints, the lines it logs.

    It is the ``apply_ac`` :class:`~swapwatch.paths.PlanView`: the consumers read the same per-layer,
    per-action view as of a LayerSetting plan; the attributes and ``*_hook`` methods below are where this path
    differs (global layer ids, module paths rather than patterns, its own verify map)."""

    view: ClassVar[str] = APPLY_AC
    global_layer_ids: ClassVar[bool] = True
    comparable: ClassVar[bool] = False
    path_note: ClassVar[str] = "; PyNative (r2.x) path"

    config: PynativeConfig
    applied: bool                         # apply_ac runs at all (something enabled)
    layers: List[LayerActions]
    maps: Dict[str, Dict[int, List[str]]]
    no_match: List[Tuple[str, str]]       # (label, key) of regexes matching nothing
    prefetch_pairs: List[Tuple[int, int]]
    lines: List[LogLine]
    sections: Dict[str, Dict[str, Any]]   # normalized sections as MindFormers holds them after validation
    unchecked_select: List[Tuple[str, str, List[int]]] = field(default_factory=list)  # (key, spec, ids past)
    ignored_layer_swap: List[int] = field(default_factory=list)     # indexes of layer_swap entries ignored
    overwritten_op_swap: List[Tuple[int, str]] = field(default_factory=list)  # (index, op_name) overwritten
    path: str = "pynative"

    @property
    def total_layers(self) -> int:
        return self.config.total_layers

    def layer(self, i: int) -> LayerActions:
        return self.layers[i]

    # ---- the PlanView (swapwatch.paths) ---------------------------------------------------------

    @property
    def swap_on(self) -> bool:
        return bool(self.config.swap.get("enable"))

    def _actions_of(self, layer: int) -> LayerActions:
        for la in self.layers:
            if la.layer == layer:
                return la
        raise KeyError(layer)

    def stage_of(self, layer: int) -> Tuple[Optional[int], int]:
        """Where ``apply_pp`` puts the layer (``PynativeConfig.stage_of``: the split the sizing reads too)."""
        return self.config.stage_of(layer)

    def layer_actions(self, layer: int) -> Dict[str, List[str]]:
        return self._actions_of(layer).actions()

    def table_cells(self, layer: int) -> Dict[str, str]:
        """The layer's cells as diff shows them: the prefetch target goes with the layer swap."""
        c = self._actions_of(layer).cells()
        prefetch = c.pop("prefetch", "")
        if prefetch:
            c["layer_swap"] = f"{c['layer_swap']}, prefetch {prefetch}" if c["layer_swap"] else f"prefetch {prefetch}"
        return c

    def to_json(self, findings: Iterable[Any] = ()) -> Dict[str, Any]:
        """explain's JSON document of a PyNative YAML (DESIGN §3.2)."""
        cfg = self.config
        return {
            "path": "pynative",
            "num_layers": cfg.num_layers,
            "mtp_layers": cfg.mtp_layers,
            "total_layers": cfg.total_layers,
            "family": cfg.family,
            "pipeline_parallel": cfg.pipeline_parallel,
            "applied": self.applied,
            "sections": self.sections,
            "maps": {label: {str(k): v for k, v in sorted(m.items())} for label, m in self.maps.items()},
            "layers": [{"layer": la.layer, "mtp": la.mtp, "full_recompute": la.full, "select_recompute": la.select,
                        "select_comm_recompute": la.comm, "comm_cells": la.comm_cells,
                        "select_recompute_exclude": la.exclude, "layer_swap": la.layer_swap, "op_swap": la.op_swap,
                        "op_swap_void": la.op_swap_void, "prefetch_to": la.prefetch_to} for la in self.layers],
            "prefetch_pairs": [list(p) for p in self.prefetch_pairs],
            "log_lines": [{"level": ln.level, "text": ln.text} for ln in self.lines],
            "findings": [f.to_json() for f in findings],
        }

    def verify_map_lines(self, result: Any) -> List[str]:
        """verify's table: per layer, the ``Set ...`` lines the config leads to vs the log (pynative.verify)."""
        from .verify import map_lines

        return map_lines(result)

    def verify_map_json(self, result: Any) -> Optional[Dict[str, Any]]:
        from .verify import layer_map

        return layer_map(result)

    def strategy_rows_hook(self) -> Optional[List[tuple]]:
        from .plot import config_rows

        return config_rows(self)

    def strategy_logs_hook(self, frame: Any, runlog: Any, rank: int) -> Optional[Tuple[Any, Any]]:
        from .plot import differences, log_values

        return log_values(frame, self), differences(self, runlog, rank)


def _ids(specs: Any) -> Set[int]:
    """``_parse_layer_ids`` on a list that may not have been validated (int() errors escape as MindFormers')."""
    try:
        return layer_ids(specs or [])
    except ValueError as exc:
        raise Refusal(str(exc)) from None


def _expand(paths: Dict[int, Tuple[str, ...]], module_dict: Dict[str, Any], label: str, config_name: str,
            no_match: List[Tuple[str, str]], lines: List[LogLine]) -> Dict[int, List[str]]:
    out: Dict[int, List[str]] = {}
    try:
        check_total(module_dict)       # the keys together, before any is compiled (docs/reliability.md)
    except PatternError as exc:
        raise ConfigError(str(exc), key=label) from None
    for key, ranges in module_dict.items():
        matched = False
        try:
            check_size(key)            # regex would unroll it in memory before any timeout (docs/reliability.md)
        except PatternError as exc:
            raise ConfigError(str(exc), key=f"{label}.{key}") from None
        for lid in sorted(_ids(ranges)):
            for item in paths.get(lid, ()):
                try:
                    hit = regex.fullmatch(key, item, timeout=1)
                except regex.error as exc:
                    raise Refusal(f"{exc}", exc="regex.error") from None
                except TimeoutError as exc:     # activation_checkpoint.py:regex_match: warn, count as no match
                    lines.append(LogLine("WARNING", f"{exc} Please check and fix it.", "regex_timeout", key=key))
                    hit = None
                if hit:
                    matched = True
                    bucket = out.setdefault(lid, [])
                    if item not in bucket:
                        bucket.append(item)
        if not matched:
            no_match.append((label, key))
            lines.append(LogLine("WARNING", f"{label} pattern '{key}' did not match any module in the model, "
                                            f"please check your {config_name}.", "no_match", key=key))
    return out


def _covered(path: str, parents: List[str]) -> bool:
    return any(under(path, p, strict=True) for p in parents)


def _clean(expanded: Dict[int, List[str]], skip: Set[int]) -> Dict[int, List[str]]:
    out: Dict[int, List[str]] = {}
    for lid, names in expanded.items():
        if lid in skip:
            continue
        for name in sorted(names, key=lambda n: (n.count("."), n)):
            if not _covered(name, out.get(lid, [])):
                out.setdefault(lid, []).append(name)
    return out


def _map_lines(label: str, m: Dict[int, List[str]], lines: List[LogLine]) -> None:
    lines.append(LogLine("INFO", f"--- Final {label} Configuration Map---", "map_start", key=label))
    for lid in sorted(m):
        lines.append(LogLine("INFO", f"layer{lid}: {', '.join(m[lid]) if m[lid] else '(No Module)'}", "map_entry",
                             layer=lid, key=label))
    lines.append(LogLine("INFO", MAP_END, "map_end", key=label))


def _blocked(path: str, wrapped: Set[str]) -> bool:
    """A walk along ``path`` meets a wrapper on a proper prefix (it cannot see the children behind it)."""
    head = path.rpartition(".")[0]
    while head:
        if head in wrapped:
            return True
        head = head.rpartition(".")[0]
    return False


def _wrap_all(kind: str, wanted: List[str], la: Any, applied: List[str], cells: AbstractSet[str],
              wrapped: Set[str]) -> None:
    """Wrap each of ``wanted`` in order, as apply_ac does: a path behind a cell wrapped earlier on
    this layer is blocked (recorded under ``kind``), others are applied, and an applied cell wraps
    its children from then on."""
    for p in wanted:
        if _blocked(p, wrapped):
            la.blocked.append((kind, p))
            continue
        applied.append(p)
        if p in cells:
            wrapped.add(p)


def resolve(cfg: PynativeConfig) -> PynativePlan:
    """The plan for ``cfg``; raises :class:`Refusal` for what ``apply_ac`` refuses (in its order).

    The refusal carries ``lines_before``: what the run had already logged when it came (a swap refusal
    comes after recompute was applied and logged).
    """
    lines: List[LogLine] = []
    try:
        return _resolve(cfg, lines)
    except Refusal as exc:
        exc.lines_before = list(lines)
        raise


def _resolve(cfg: PynativeConfig, lines: List[LogLine]) -> PynativePlan:
    need_rc, need_comm, need_swap = _v.enabled(cfg)
    total = cfg.total_layers
    paths = layer_lists(cfg.family, cfg.num_layers, cfg.mtp_layers, cfg.first_k_dense)
    layers = [LayerActions(i, mtp=i >= cfg.num_layers) for i in range(total)]
    no_match: List[Tuple[str, str]] = []
    maps: Dict[str, Dict[int, List[str]]] = {}
    sections = {"recompute": cfg.recompute, "recompute_comm": cfg.recompute_comm, "swap": cfg.swap}
    plan = PynativePlan(cfg, need_rc or need_comm or need_swap, layers, maps, no_match, [], lines, sections)
    if not plan.applied:
        return plan
    _v.pp_refusal(cfg)

    full: Set[int] = set()
    select: Dict[int, List[str]] = {}
    wrapped_by_layer: Dict[int, Set[str]] = {}     # cells wrapped by recompute, per layer (walls for swap)
    if need_rc or need_comm:
        rc, comm = _v.validate_recompute(cfg, warn=lambda: lines.append(
            LogLine("WARNING", EXCLUDE_NONE_WARNING, "exclude_ignored")))
        sections.update(recompute=rc, recompute_comm=comm)
        exclude: Dict[int, List[str]] = {}
        comm_map: Dict[int, List[str]] = {}
        if need_rc:
            full = _ids(rc["full_recompute_layer"])
            if rc["full_recompute_layer"] and rc["mode"] == "select":
                for key, specs in rc["select_module"].items():   # never validated: the quirk
                    for spec in specs:
                        m = SPEC_RE.match(str(spec).strip())
                        past = sorted(i for i in _ids([spec]) if i >= total) if m else []
                        if past:
                            plan.unchecked_select.append((key, str(spec), past))
            if rc["mode"] == "select":
                select = _clean(_expand(paths, rc["select_module"], "select_module", "recompute config",
                                        no_match, lines), full)
                maps[RECOMPUTE_MAP] = select
                _map_lines(RECOMPUTE_MAP, select, lines)
            if isinstance(rc["exclude_op"], dict) and rc["exclude_op"]:
                exclude = _clean(_expand(paths, rc["exclude_op"], "exclude_op", "recompute config", no_match, lines),
                                 set())
                maps[EXCLUDE_MAP] = exclude
                _map_lines(EXCLUDE_MAP, exclude, lines)
        if need_comm:
            expanded = _expand(paths, comm["select_module"], "comm_select_module", "recompute config", no_match,
                               lines)
            for lid, names in expanded.items():
                if lid in full:
                    continue
                for name in names:
                    if not _covered(name, select.get(lid, [])):
                        comm_map.setdefault(lid, []).append(name)
            maps[COMM_MAP] = comm_map
            _map_lines(COMM_MAP, comm_map, lines)
        for la in layers:
            i = la.layer
            cells = cells_of(paths[i])
            wrapped: Set[str] = set()
            _wrap_all("exclude", exclude.get(i, []), la, la.exclude, cells, wrapped)
            if la.exclude:
                lines.append(LogLine("INFO", f"Set exclude recompute at layer {i}: {', '.join(la.exclude)}",
                                     "set_exclude", layer=i))
            if need_rc and i in full:
                la.full = True
                lines.append(LogLine("INFO", f"Set full recompute at layer {i}", "set_full", layer=i))
            if need_rc and rc["mode"] == "select":
                _wrap_all("select", select.get(i, []), la, la.select, cells, wrapped)
                if la.select:
                    lines.append(LogLine("INFO", f"Set select recompute at layer {i}: {', '.join(la.select)}",
                                         "set_select", layer=i))
            if need_comm:
                for p in comm_map.get(i, []):
                    if _blocked(p, wrapped):
                        la.blocked.append(("comm", p))
                    elif p in cells:
                        la.comm_cells.append(p)
                        head, _, name = p.rpartition(".")
                        shown = f"{head}.{name}" if head else f".{name}"   # MindFormers' info.replace quirk
                        lines.append(LogLine("INFO", f"For communication recompute, {shown} is expected to be "
                                                     "operation but got cell, this configuration will not be "
                                                     "effective.", "comm_cell", layer=i))
                    else:
                        la.comm.append(p)
                if la.comm:
                    lines.append(LogLine("INFO", f"Set select comm recompute at layer {i}: {', '.join(la.comm)}",
                                         "set_comm", layer=i))
            wrapped_by_layer[i] = wrapped

    if need_swap:
        sc = _v.validate_swap(cfg)
        sections["swap"] = sc
        prefetch = sc["default_prefetch"]
        layer_swap = sc["layer_swap"] or []
        swapped_layers = _ids(layer_swap[0].get("layers", [])) if layer_swap else set()
        plan.ignored_layer_swap = list(range(1, len(layer_swap)))
        op_map: Dict[int, List[str]] = {}
        if sc["op_swap"]:
            merged: Dict[str, Any] = {}
            for idx, item in enumerate(sc["op_swap"]):
                if item["op_name"] in merged:
                    plan.overwritten_op_swap.append((idx, item["op_name"]))
                merged[item["op_name"]] = item["layers"]
            op_map = _clean(_expand(paths, merged, "op_swap", "swap config", no_match, lines), swapped_layers)
            maps[SWAP_MAP] = op_map
            _map_lines(SWAP_MAP, op_map, lines)
        pairs = set()
        for la in layers:
            i = la.layer
            if i in swapped_layers:
                la.layer_swap = True
                pairs.add((i, i + prefetch))
                lines.append(LogLine("INFO", f"Set layer swap at layer {i}", "set_layer_swap", layer=i))
            if i in op_map:
                wrapped = wrapped_by_layer.get(i, set())
                for p in op_map[i]:
                    if la.full or _blocked(p, wrapped):
                        la.op_swap_void.append(p)
                    else:
                        la.op_swap.append(p)
                if la.op_swap:
                    lines.append(LogLine("INFO", f"Set select swap at layer {i}: {', '.join(la.op_swap)}",
                                         "set_op_swap", layer=i))
                pairs.add((i, i + prefetch))
        plan.prefetch_pairs = sorted(pairs)
        for a, b in plan.prefetch_pairs:
            layers[a].prefetch_to = b
    return plan
