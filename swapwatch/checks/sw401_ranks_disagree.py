"""SW401: ranks of one run that logged different strategies."""
from __future__ import annotations

from collections import Counter
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Dict, Mapping, FrozenSet, Iterable, List, Optional, Set, Tuple

from ..engine.compare import canon_text, describe, norm_value, same_value, seen_items
from ..model.plan_view import VIEWS
from ..text import ranges
from . import CheckContext, Finding, Rule, register

if TYPE_CHECKING:
    from ..engine.compare import Seen
    from ..parsers.model import RankLog, RunLog

Item = Tuple[Optional[str], str]          # (path, value)


@register
class RanksDisagree(Rule):
    """Ranks of one run logged different strategies.

    **What it means.** In MindFormers' semi-auto-parallel graph mode every rank builds every
    layer, so every ``worker_N.log`` carries the same per-layer ``Set ...`` lines and the same
    ``Formative`` / ``initial ... from dict`` values. This rule takes, per layer and action, what
    most ranks logged, and reports each rank that logged something else (layers a truncated log
    never reached are left to SW106). It needs no config, so it also catches a bad node when you
    verify without ``--config``. On the PyNative (r2.x) path without pipeline parallel every rank
    runs ``apply_ac`` over the whole decoder with the same config, so every rank logs the same
    ``Set ...`` lines and maps too: each rank whose lines differ from the most common ones is
    reported (with pipeline parallel each stage logs only its own layers, and nothing is compared).

    **Why it matters.** Ranks that disagree run different graphs: at best one node has more
    memory pressure than the others, at worst collective communication hangs or the job mixes
    code versions. The usual cause is one node with a different YAML, MindFormers version or
    environment.

    **How to fix it.** Diff the config and MindFormers version on the node of the rank named;
    launch every node from the same files::

        # every node: the same YAML and code
        bash scripts/msrun_launcher.sh "run_mindformer.py --config /shared/llama.yaml" 16 8 ...
    """

    code = "SW401"
    severity = "error"
    title = "ranks disagree on the applied strategy"
    needs = "run"
    #: every path's comparison (each rank's logged items)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        runlog = ctx.runlog
        if runlog is None or len(runlog.ranks) < 2:
            return
        comp = ctx.comparison
        if comp is not None and comp.per_stage:
            return              # each rank logs only its own pipeline stage's layers: nothing to compare
        # Ranks that logged the same items share one signature object (one per distinct strategy,
        # not one per rank), and are voted on as groups: 10,000 identical ranks cost one entry.
        per_rank: Dict[int, Dict[Tuple[int, str], FrozenSet[Item]]] = {}
        interned: Dict[Any, Dict[Tuple[int, str], FrozenSet[Item]]] = {}
        limits: Dict[int, Optional[int]] = {}
        groups: Dict[Tuple[int, Optional[int]], List[int]] = {}
        for rank, rank_log in sorted(runlog.ranks.items()):
            same = comp.ranks[rank].same_as if comp is not None else None
            if same is not None:                # same items and cut as a lower rank: its signature
                if same in per_rank:
                    per_rank[rank], limits[rank] = per_rank[same], limits[same]
                    groups.setdefault((id(per_rank[rank]), limits[rank]), []).append(rank)
                continue
            seen = comp.ranks[rank].seen if comp is not None else seen_items(rank_log)
            if not any(seen.values()):
                continue                        # silent or failed rank: SW106 / SW108
            sig: Dict[Tuple[int, str], Set[Item]] = {}
            for layer, items in seen.items():
                for s in items:
                    sig.setdefault((layer, s.action), set()).add((s.path, norm_value(s.value)))
            frozen = {k: frozenset(v) for k, v in sig.items()}
            per_rank[rank] = interned.setdefault(tuple(sorted(frozen.items(), key=lambda kv: kv[0])), frozen)
            cut = comp.ranks[rank].cut_layers if comp is not None else set()
            limits[rank] = min(cut) if cut else None
            groups.setdefault((id(per_rank[rank]), limits[rank]), []).append(rank)
        if len(per_rank) < 2:
            return
        keys = sorted({k for sig in interned.values() for k in sig})
        for key in keys:
            layer = key[0]
            votes: Counter = Counter()
            first: Dict[FrozenSet[Item], int] = {}
            live: List[Tuple[FrozenSet[Item], List[int]]] = []
            for (_, limit), members in groups.items():
                mine = per_rank[members[0]].get(key, frozenset())
                first[mine] = min(first.get(mine, members[0]), members[0])
                if limit is None or layer < limit:
                    votes[mine] += len(members)
                    live.append((mine, members))
            if len(votes) < 2:
                continue
            majority, _ = max(votes.items(), key=lambda kv: (kv[1], -first[kv[0]]))
            ref = first[majority]
            others = sorted(r for mine, members in live if mine == majority for r in members)
            who = f"rank {ref}" if len(others) == 1 else f"{len(others)} ranks ({ranges(others, 6)})"
            odd = sorted((r, mine) for mine, members in live if mine != majority for r in members)
            for rank, mine in odd:
                sources = _sources(comp.ranks[rank].seen if comp is not None else seen_items(runlog.ranks[rank]))
                src = sources.get(key) or _nearest(sources, layer)
                yield self.finding(
                    f"{describe(key[1])} is "
                    f"{_show(mine)} but {who} logged {_show(majority)}",
                    rank=rank, layer=layer, op=_op(mine, majority, key[1]),
                    expected=_show(majority), actual=_show(mine), source=src)
        yield from self._config_lines(runlog, set(per_rank))

    def _config_lines(self, runlog: "RunLog", ranks: Set[int]) -> Iterable[Finding]:
        """The logged ``initial ... from dict`` and ``Formative`` values must agree too."""
        rank_logs = [(r, runlog.ranks[r]) for r in sorted(ranks)]
        for label, section in (("initial config", "initial_config"), ("Formative values", "formative")):
            getter = methodcaller(section)
            # one canonical text per rank (shared between equal ranks), the values re-read only
            # for the ranks that differ
            canon: Dict[str, str] = {}
            by_ids: Dict[tuple, str] = {}       # ranks that share the parsed values share the text
            # packed ranks that share their summary's values (a template's) share the text too, found
            # without copying each rank's values (10,000 copies: ~40 ms of serial time)
            by_shared: Dict[int, str] = {}
            texts: Dict[int, str] = {}
            for r, rank_log in rank_logs:
                shared = rank_log.shared_values(section)
                text = by_shared.get(id(shared)) if shared is not None else None
                if text is None:
                    v = getter(rank_log)
                    if not v:
                        continue
                    ids = (*v, *map(id, v.values()))      # its keys, then which objects they hold
                    text = by_ids.get(ids)
                    if text is None:
                        text = canon_text(v)
                        text = by_ids[ids] = canon.setdefault(text, text)
                    if shared is not None:
                        by_shared[id(shared)] = text
                texts[r] = text
            if len(texts) < 2:
                continue
            counts = Counter(texts.values())
            if len(counts) < 2:
                continue
            major = counts.most_common(1)[0][0]
            ref = next(r for r, t in texts.items() if t == major)
            ref_values = getter(runlog.ranks[ref])
            for r, t in texts.items():
                if t == major:
                    continue
                v = getter(runlog.ranks[r])
                diff = sorted(k for k in set(v) | set(ref_values)
                              if not same_value(v.get(k), ref_values.get(k)))
                yield self.finding(
                    f"logged {label} differ from rank {ref}'s in {', '.join(diff)}",
                    rank=r, op=", ".join(diff),
                    expected={k: ref_values.get(k) for k in diff},
                    actual={k: v.get(k) for k in diff},
                    source=_source_of(runlog.ranks[r], label))


def _sources(seen: "Mapping[int, List[Seen]]") -> Dict[Tuple[int, str], str]:
    """(layer, action) -> the first line that logged it on one rank."""
    src: Dict[Tuple[int, str], str] = {}
    for layer, items in seen.items():
        for s in items:
            src.setdefault((layer, s.action), s.source)
    return src


def _show(items: FrozenSet[Item]) -> str:
    if not items:
        return "(nothing)"
    parts = []
    for path, value in sorted(items, key=lambda x: (x[0] or "", x[1])):
        if path is None:            # a whole-layer line: on, or its value (a line without one, apply_ac's: on)
            parts.append("on" if value in ("True", "None") else f"value {value}")
        else:
            parts.append(path if value == "True" else f"{path}={value}")
    return ", ".join(parts)


def _op(mine: FrozenSet[Item], majority: FrozenSet[Item], action: str) -> str:
    paths = sorted({p for p, _ in (mine ^ majority) if p})
    return ", ".join(paths) if paths else action


def _nearest(sources: Dict[Tuple[int, str], str], layer: int) -> Optional[str]:
    best = sorted(sources.items(), key=lambda kv: abs(kv[0][0] - layer))
    return best[0][1] if best else None


def _source_of(rank_log: "RankLog", label: str) -> Optional[str]:
    kind = "initial_config" if label.startswith("initial") else "formative"
    for e in rank_log.events:
        if e.kind == kind:
            return e.source
    return rank_log.files[0] if rank_log.files else None
