"""``swapwatch verify`` for PyNative (r2.x) runs: the logged maps and ``Set ...`` lines against the plan.

The expected side is :func:`swapwatch.pynative.resolve.resolve` of the ``--config`` YAML (a PyNative run's log
does not print its strategy sections, so the config is required); the logged side is the events the parsers
make of the PyNative lines (:mod:`swapwatch.parsers.pynative`). Per rank and layer:

* SW101 (error): an expected ``Set ...`` line, path, or "Final ... Map" entry is not in the log;
* SW102 (error): the log has a line, path or map entry the config does not lead to;
* SW104 (warning): the log says a pattern matched nothing;
* SW106 (error): no strategy line at all on a multi-card rank, or MindFormers refused the config
  (``[Recompute Config]`` / ``[Swap Config]`` ERROR: the run stopped at model build);
* SW501 (warning, its run variant): the rank ran on one card (``Current world size: 1.``), nothing applied;
* SW401 (warning): ranks (without pipeline parallel) logged different strategies.

With pipeline parallel each stage logs only its own layers, so "missing" is decided on the union of ranks, and
a stage's no-match warning for a pattern that matches on another stage is not SW104.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from .. import actions
from ..checks import Finding
from ..parsers.model import ActionEvent, NoticeEvent

if TYPE_CHECKING:
    from .explain import PynativeExplanation
    from .resolve import PynativePlan

Key = Tuple[int, str]        # (layer, action or "map:<label>")


def expected(plan: PynativePlan) -> Dict[Key, List[str]]:
    """(layer, action) -> paths (``[]`` for whole-layer actions), and ``map:<label>`` entries."""
    out: Dict[Key, List[str]] = {}
    for la in plan.layers:
        for action, paths in (("select_recompute_exclude", la.exclude), ("select_recompute", la.select),
                              ("select_comm_recompute", la.comm), ("op_swap", la.op_swap)):
            if paths:
                out[(la.layer, action)] = list(paths)
        if la.full:
            out[(la.layer, "full_recompute")] = []
        if la.layer_swap:
            out[(la.layer, "layer_swap")] = []
    for label, m in plan.maps.items():
        for layer, paths in m.items():
            out[(layer, f"map:{label}")] = list(paths)
    return out


def logged(events: Iterable[Any]) -> Tuple[Dict[Key, List[str]], Dict[Key, str], List[NoticeEvent]]:
    """(layer, action) -> paths, the source line of each, and the notices, from one rank's events."""
    out: Dict[Key, List[str]] = {}
    where: Dict[Key, str] = {}
    notices: List[NoticeEvent] = []
    label: Optional[str] = None
    for e in events:
        if isinstance(e, ActionEvent):
            key = (e.layer, e.action)
            out.setdefault(key, []).extend([] if e.action in actions.WHOLE_LAYER_ACTIONS else e.paths)
            where.setdefault(key, e.source)
        elif isinstance(e, NoticeEvent):
            if e.what == "pyn_map_start":
                label = e.data["label"]
            elif e.what == "pyn_map_end":
                label = None
            elif e.what == "pyn_map_entry" and label is not None:
                key = (e.data["layer"], f"map:{label}")
                out[key] = list(e.data["paths"])
                where.setdefault(key, e.source)
            else:
                notices.append(e)
    return out, where, notices


def _line_text(key: Key, paths: List[str]) -> str:
    layer, action = key
    if action.startswith("map:"):
        return f"'Final {action[4:]} Configuration Map' layer{layer}: {', '.join(paths) or '(No Module)'}"
    words = {"full_recompute": "Set full recompute", "layer_swap": "Set layer swap",
             "select_recompute": "Set select recompute", "select_comm_recompute": "Set select comm recompute",
             "select_recompute_exclude": "Set exclude recompute", "op_swap": "Set select swap"}[action]
    return f"'{words} at layer {layer}" + (f": {', '.join(paths)}'" if paths else "'")


def _diff(exp: Dict[Key, List[str]], got: Dict[Key, List[str]], where: Dict[Key, str], rank: Optional[int],
          missing: bool = True, extra: bool = True) -> List[Finding]:
    out: List[Finding] = []
    for key in sorted(set(exp) | set(got), key=lambda k: (k[0], k[1])):
        e, g = exp.get(key), got.get(key)
        layer, action = key
        if g is None:
            if missing:
                out.append(Finding("SW101", "error", f"expected {_line_text(key, e)} is not in the log",
                                   rank=rank, layer=layer, op=action, expected=e, actual=None))
        elif e is None:
            if extra:
                out.append(Finding("SW102", "error", f"the log has {_line_text(key, g)}, which the config does not "
                                                     "lead to", rank=rank, layer=layer, op=action, expected=None,
                                   actual=g, source=where.get(key)))
        elif e != g:
            lost = [p for p in e if p not in g]
            added = [p for p in g if p not in e]
            if lost and missing:
                out.append(Finding("SW101", "error", f"{action}: {', '.join(lost)} expected but not "
                                                     f"logged (log: {', '.join(g) or '-'})", rank=rank, layer=layer,
                                   op=action, expected=e, actual=g, source=where.get(key)))
            if (added or not lost) and extra:
                out.append(Finding("SW102", "error", f"{action}: logged {', '.join(g) or '-'}, "
                                                     f"expected {', '.join(e) or '-'}", rank=rank, layer=layer,
                                   op=action, expected=e, actual=g, source=where.get(key)))
    return out


def compare(plan: PynativePlan, runlog: Any) -> List[Finding]:
    from ..checks.sw106_incomplete_log import NO_MINDFORMERS, printed_mindformers

    exp = expected(plan)
    findings: List[Finding] = []
    per_rank: Dict[int, Dict[Key, List[str]]] = {}
    pp = plan.config.pipeline_parallel
    silent_of = {}
    for rank, rlog in sorted(runlog.ranks.items()):
        got, _, notices = logged(rlog.events)
        silent_of[rank] = not got and not notices and not printed_mindformers(rlog)
    for rank, rlog in sorted(runlog.ranks.items()):
        got, where, notices = logged(rlog.events)
        per_rank[rank] = got
        world = [n.data["n"] for n in notices if n.what == "world_size"]
        refused = [n for n in notices if n.what == "pyn_config_error" and n.data.get("level") in ("ERROR", None)]
        for n in notices:
            if n.what == "pattern_no_match" and pp > 1 and (n.data["label"], n.data["pattern"]) not in plan.no_match:
                continue        # a stage warns for a pattern whose layers are on another stage: matched there
            if n.what == "pattern_no_match":
                findings.append(Finding("SW104", "warning", f"{n.data['label']} pattern '{n.data['pattern']}' did not "
                                                            "match any module (MindFormers' warning): nothing applied "
                                                            "for it", rank=rank, op=n.data["pattern"], source=n.source))
        for n in refused:
            findings.append(Finding("SW106", "error", "MindFormers refused the strategy and the run stopped at model "
                                                      f"build: {n.data['tag']} {n.data['text']}", rank=rank,
                                    source=n.source, actual=n.data["text"]))
        if not got and not notices and not printed_mindformers(rlog):
            src = rlog.files[0] if rlog.files else None
            loud = [r for r in silent_of if not silent_of[r]]
            if not loud:        # the same finding as on the static paths (sw106_incomplete_log)
                findings.append(Finding("SW106", "error", NO_MINDFORMERS, rank=rank,
                                        expected="MindFormers log lines", actual="(none)", source=src))
            else:
                findings.append(Finding("SW108", "warning", f"its log has no MindFormers line at all while "
                                                            f"rank {loud[0]}'s has; it cannot be verified "
                                                            "(STDOUT_DEVICES limits which ranks print)",
                                        rank=rank, expected="MindFormers log lines", actual="(none)", source=src))
            continue
        if not got and plan.applied and not refused:
            if not (world and world[-1] == 1):          # world size 1 is SW501's (run variant)
                findings.append(Finding("SW106", "error", "no PyNative strategy line in this rank's log (no map, no "
                                                          "'Set ...' line) although the config enables recompute/swap",
                                        rank=rank))
            continue
        if refused:
            continue
        findings.extend(_diff(exp, got, where, rank, missing=pp <= 1))
    if pp > 1 and per_rank:
        union: Dict[Key, List[str]] = {}
        for got in per_rank.values():
            for k, v in got.items():
                union.setdefault(k, v)
        findings.extend(_diff(exp, union, {}, None, extra=False))
    if pp <= 1 and len(per_rank) > 1:
        sigs = {r: tuple(sorted((k, tuple(v)) for k, v in g.items())) for r, g in per_rank.items() if g}
        if len(set(sigs.values())) > 1:
            common = Counter(sigs.values()).most_common(1)[0][0]
            odd = sorted(r for r, s in sigs.items() if s != common)
            # one finding per odd rank (the renderers fold them into "ranks 1, 3: ...")
            findings.extend(Finding("SW401", "warning", "logged a different PyNative strategy from the other ranks",
                                    rank=r, actual=odd) for r in odd)
    return findings


def verify_pynative(ex: PynativeExplanation, runlog: Any, config_source: str, ignore: Iterable[str] = (),
                    strict: bool = False, env: Optional[Dict[str, str]] = None):
    """The :class:`~swapwatch.verify.VerifyResult` of a PyNative run (no per-layer static comparison)."""
    from ..results import VerifyResult, decide, sort_key
    skip = set(ignore)
    config_time = [f for f in ex.findings if f.code not in ("SW104",)]   # the log says SW104 itself
    from ..checks import CheckContext, VARIANTS
    run_time = list(VARIANTS["SW501"]["run"].check(CheckContext(plan=ex.plan, config=ex.config, runlog=runlog)))
    findings = [f for f in config_time + compare(ex.plan, runlog) + run_time if f.code not in skip]
    findings.sort(key=sort_key)
    result = VerifyResult(findings=findings, verdict="pass", exit_code=0, ranks=sorted(runlog.ranks),
                          layers=len(ex.plan.layers), strict=strict, config_source=config_source,
                          env=dict(env or {}), plan=ex.plan, runlog=runlog, comparison=None)
    return decide(result, verified_ranks(ex.plan, runlog))


def verified_ranks(plan: PynativePlan, runlog: Any) -> List[int]:
    """Ranks whose log speaks for what ``apply_ac`` did: a map, a ``Set ...`` line or one of the
    trainer's / apply_ac's notices (world size, a refused config), or, when the config applies
    nothing, any MindFormers output. A log without a MindFormers line is never verified."""
    from ..checks.sw106_incomplete_log import printed_mindformers

    out = []
    for rank, rlog in runlog.ranks.items():
        got, _, notices = logged(rlog.events)
        if got or notices or (not plan.applied and printed_mindformers(rlog)):
            out.append(rank)
    return out


#: verify-map column -> the action its ``Set ...`` lines log (the shared column names of layer_table)
_MAP_ACTIONS = (("full_recompute", "full_recompute"), ("select_recompute", "select_recompute"),
                ("select_comm_recompute", "select_comm_recompute"),
                ("select_recompute_exclude", "select_recompute_exclude"),
                ("layer_swap", "layer_swap"), ("op_swap", "op_swap"))


def _cell(key: Key, table: Dict[Key, List[str]]) -> str:
    if key not in table:
        return ""
    return "yes" if key[1] in actions.WHOLE_LAYER_ACTIONS else ", ".join(table[key])


def layer_map(result: Any, rank: Optional[int] = None) -> Dict[str, Any]:
    """Per layer, what the plan's ``Set ...`` lines say and what ``rank`` logged (default: the first rank with
    strategy lines), with the columns that differ: the PyNative counterpart of verify's layer map."""
    plan = result.plan
    exp = expected(plan)
    ranks = sorted(result.runlog.ranks)
    if rank is None:        # as verify's static map: the first rank with a finding of its own about the strategy
        own = sorted({f.rank for f in result.findings if f.rank in result.runlog.ranks and f.code.startswith("SW1")
                      and f.code != "SW104"})
        rank = own[0] if own else next((r for r in ranks if logged(result.runlog.ranks[r].events)[0]),
                                        ranks[0] if ranks else None)
    got = logged(result.runlog.ranks[rank].events)[0] if rank is not None else {}
    if plan.config.pipeline_parallel > 1:       # each stage logs its own layers: show them all together
        got = {}
        for r in ranks:
            for k, v in logged(result.runlog.ranks[r].events)[0].items():
                got.setdefault(k, v)
    layers = []
    for la in plan.layers:
        row = {"layer": la.layer, "mtp": la.mtp, "expected": {}, "actual": {}, "differs": []}
        for col, action in _MAP_ACTIONS:
            e, g = _cell((la.layer, action), exp), _cell((la.layer, action), got)
            if e:
                row["expected"][col] = e
            if g:
                row["actual"][col] = g
            if e != g:
                row["differs"].append(col)
        layers.append(row)
    return {"rank": None if plan.config.pipeline_parallel > 1 else rank, "verified": bool(got), "layers": layers}


def map_lines(result: Any) -> List[str]:
    """The verify table's per-layer map for a PyNative run (before the findings)."""
    from .. import layer_table
    m = layer_map(result)
    cols = [c for c, _ in _MAP_ACTIONS
            if c == "full_recompute" or any(c in r["expected"] or c in r["actual"] for r in m["layers"])]
    body = []
    for r in m["layers"]:
        cells = []
        for c in cols:
            e, g = r["expected"].get(c, ""), r["actual"].get(c, "")
            cells.append(f"{layer_table.DIFF} {e or layer_table.NONE} → {g or layer_table.NONE}" if c in r["differs"]
                         else e)
        body.append(([r["layer"]], "mtp" if r["mtp"] else "decoder", cells))
    body = layer_table.fold(body, key=lambda x: (x[1], x[2]), layers=lambda x: x[0])
    who = "all ranks (pipeline stages)" if m["rank"] is None else f"rank {m['rank']}"
    out = [f"PyNative: per layer, the Set ... lines the config leads to vs {who}"
           + ("" if m["verified"] else " (no strategy line logged)")]
    out.extend(layer_table.grid(["layer", "kind"] + [layer_table.COLUMNS[c] for c in cols],
                                [[layer_table.layer_label(ls), kind] + cells for ls, kind, cells in body]))
    if any(r["differs"] for r in m["layers"]):
        out.append(f"  {layer_table.DIFF} expected → logged")
    out.append("")
    return out
