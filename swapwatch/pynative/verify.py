"""``swapwatch verify`` for PyNative (r2.x) runs: the logged maps and ``Set ...`` lines against the plan.

The expected side is :func:`swapwatch.pynative.resolve.resolve` of the ``--config`` YAML (a PyNative run's log
does not print its strategy sections, so the config is required); the logged side is the events the parsers
make of the PyNative lines (:mod:`swapwatch.parsers.pynative`). This module compares them once
(:class:`PynativeComparison`, per rank) and writes no finding: the rules read the comparison through
``checks.run_rules`` like on the LayerSetting paths, each code with one implementation in ``checks/``
(SW101 missing line, SW102 unasked line, SW104 MindFormers' no-match warning, SW106 refused config or no line,
SW108 a silent rank, SW401 ranks that differ, SW501's run variant: one card). It also draws verify's per-layer
map of a PyNative run (:func:`layer_map`, :func:`map_lines`, through the plan's view).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from .. import actions
from ..parsers.model import ActionEvent, NoticeEvent

if TYPE_CHECKING:
    from .explain import PynativeExplanation
    from .resolve import PynativePlan

Key = Tuple[int, str]        # (layer, action or "map:<label>")


def expected(plan: PynativePlan) -> Dict[Key, List[str]]:
    """(layer, action) -> paths (``[]`` for whole-layer actions), and ``map:<label>`` entries."""
    out: Dict[Key, List[str]] = {}
    for la in plan.layers:              # the per-action view (PlanView.layer_actions)
        for action, paths in la.actions().items():
            out[(la.layer, action)] = paths
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


@dataclass
class RankSeen:
    """What one rank's log shows of ``apply_ac``: its ``Set ...`` lines and map entries, where each was, and the
    trainer's / apply_ac's notices."""

    got: Dict[Key, List[str]]
    where: Dict[Key, str]
    notices: List[NoticeEvent]
    #: no strategy line, no notice, no MindFormers output at all (``sw106_incomplete_log.printed_mindformers``)
    silent: bool

    @property
    def world(self) -> List[int]:
        return [n.data["n"] for n in self.notices if n.what == "world_size"]

    @property
    def refused(self) -> List[NoticeEvent]:
        """``[Recompute Config]`` / ``[Swap Config]`` ERRORs: MindFormers refused the strategy at model build."""
        return [n for n in self.notices if n.what == "pyn_config_error" and n.data.get("level") in ("ERROR", None)]


@dataclass
class PynativeComparison:
    """The plan-vs-log comparison of a PyNative run, made once per verify (the ``apply_ac`` counterpart of
    :class:`swapwatch.compare.Comparison`): the rules (SW101, SW102, SW104, SW106, SW108, SW401) read it from
    ``CheckContext.comparison``; nothing here is a finding.

    With pipeline parallel each stage logs only its own layers, so "missing" is decided on the union of ranks
    (:meth:`union_pairs`), and a stage's no-match warning for a pattern that matches on another stage is not
    a finding (:meth:`no_match_notices`)."""

    plan: Any
    expected: Dict[Key, List[str]]
    ranks: Dict[int, RankSeen]

    @property
    def pipeline(self) -> bool:
        return self.plan.config.pipeline_parallel > 1

    def line_text(self, key: Key, paths: List[str]) -> str:
        """The ``Set ...`` line or map entry ``key`` stands for, as MindFormers words it."""
        return _line_text(key, paths)

    def loud(self) -> List[int]:
        return [r for r, seen in self.ranks.items() if not seen.silent]

    def compared(self, rank: int) -> bool:
        """Its lines are compared with the plan: it logged something, MindFormers did not refuse the config,
        and it is not a rank where nothing was logged although the config enables something (SW106 / SW501)."""
        seen = self.ranks[rank]
        if seen.silent or seen.refused:
            return False
        return bool(seen.got) or not self.plan.applied

    def no_strategy_line(self, rank: int) -> bool:
        """A rank that printed something but no strategy line although the config enables recompute/swap (and
        not because it ran on one card: SW501's run variant)."""
        seen = self.ranks[rank]
        if seen.silent or seen.got or not self.plan.applied or seen.refused:
            return False
        return not (seen.world and seen.world[-1] == 1)

    def no_match_notices(self, rank: int) -> List[NoticeEvent]:
        """The rank's "did not match any module" warnings that stand (with pipeline parallel, a stage's warning
        for a pattern that matches on another stage does not)."""
        seen = self.ranks[rank]
        if seen.silent:
            return []
        return [n for n in seen.notices if n.what == "pattern_no_match"
                and not (self.pipeline and (n.data["label"], n.data["pattern"]) not in self.plan.no_match)]

    def pairs(self, rank: int) -> List[Tuple[Key, Optional[List[str]], Optional[List[str]], Optional[str]]]:
        """(key, expected, logged, where) for every key either side has, in (layer, action) order."""
        seen = self.ranks[rank]
        return [(key, self.expected.get(key), seen.got.get(key), seen.where.get(key))
                for key in sorted(set(self.expected) | set(seen.got), key=lambda k: (k[0], k[1]))]

    def union_pairs(self) -> List[Tuple[Key, Optional[List[str]], Optional[List[str]], Optional[str]]]:
        """With pipeline parallel: the same over the union of every rank's lines (the lowest rank's value of a
        key), no source line."""
        union: Dict[Key, List[str]] = {}
        for rank in sorted(self.ranks):
            for k, v in self.ranks[rank].got.items():
                union.setdefault(k, v)
        return [(key, self.expected.get(key), union.get(key), None)
                for key in sorted(set(self.expected) | set(union), key=lambda k: (k[0], k[1]))]

    def signatures(self) -> Dict[int, Tuple[Any, ...]]:
        """Per rank that logged a line, what it logged (SW401 compares them without pipeline parallel)."""
        return {r: tuple(sorted((k, tuple(v)) for k, v in seen.got.items()))
                for r, seen in sorted(self.ranks.items()) if seen.got}


def comparison(plan: PynativePlan, runlog: Any) -> PynativeComparison:
    """The :class:`PynativeComparison` of ``runlog`` against ``plan`` (each rank's log read once)."""
    from ..checks.sw106_incomplete_log import printed_mindformers

    ranks = {}
    for rank, rlog in sorted(runlog.ranks.items()):
        got, where, notices = logged(rlog.events)
        ranks[rank] = RankSeen(got, where, notices, not got and not notices and not printed_mindformers(rlog))
    return PynativeComparison(plan, expected(plan), ranks)


def verify_pynative(ex: PynativeExplanation, runlog: Any, config_source: str, ignore: Iterable[str] = (),
                    strict: bool = False, env: Optional[Dict[str, str]] = None):
    """The :class:`~swapwatch.results.VerifyResult` of a PyNative run: explain's findings (SW104 apart: the log
    says it itself) and the run rules of the ``apply_ac`` view (``checks.run_rules``) on the comparison."""
    from ..checks import CheckContext, run_rules
    from ..results import VerifyResult, decide, sort_key
    skip = set(ignore)
    config_time = [f for f in ex.findings if f.code not in ("SW104",)]   # the log says SW104 itself
    ctx = CheckContext(plan=ex.plan, config=ex.config, env=dict(env or {}), runlog=runlog,
                       comparison=comparison(ex.plan, runlog))
    run_time = run_rules(ctx, needs=("run",), ignore=skip)
    findings = [f for f in config_time + run_time if f.code not in skip]
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
