"""SW106 / SW108: logs that cannot show the whole strategy (cut short, or silent)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Set

from ..text import ranges
from ..parsers.model import Event, ExitEvent, MemoryEvent, NoticeEvent, RankLog, is_fatal
from ..model.plan_view import VIEWS
from . import CheckContext, Finding, Rule, register
from ..engine.compare import expects_lines, fatal_after_actions, is_cut, printed_mindformers

if TYPE_CHECKING:
    from ..engine.compare import Comparison, RankDiff


#: SW106's words for a log without one MindFormers line, whatever the config and code path
NO_MINDFORMERS = ("no MindFormers line at all (no strategy, no steps); nothing could be verified "
                  "(is this a worker log of a MindFormers job?)")


def _fatal(rank_log: RankLog) -> Optional[Event]:
    """The rank's first fatal event anywhere in its log (:func:`~swapwatch.parsers.model.is_fatal`)."""
    return next((e for e in rank_log.events if is_fatal(e)), None)


def _reached_exit(rank_log: RankLog) -> bool:
    """The log shows MindSpore's exit-time memory-pool lines, which every rank prints whatever
    ``STDOUT_DEVICES`` says (they are glog lines, not MindFormers')."""
    return any(isinstance(e, MemoryEvent) and str(e.metric).startswith("pool_") for e in rank_log.events)


def cut_before_mindformers(rank_log: RankLog, ranks: Dict[int, RankLog]) -> bool:
    """A silent rank that is not a STDOUT_DEVICES rank but a log cut short: another rank's log
    reached the exit-time lines and this one, which would have them too, did not."""
    return not printed_mindformers(rank_log) and not _reached_exit(rank_log) and \
        any(_reached_exit(rl) for rl in ranks.values() if rl is not rank_log)


def stdout_devices(env: dict) -> Optional[Set[int]]:
    """Ranks allowed to print by ``STDOUT_DEVICES`` (``(0,1)``, ``[0]``, ``0,1``), None if unset."""
    raw = (env or {}).get("STDOUT_DEVICES")
    if raw is None:
        return None
    out: Set[int] = set()
    for tok in str(raw).replace("(", " ").replace(")", " ").replace("[", " ").replace("]", " ") \
            .replace(",", " ").split():
        if tok.isdigit():
            out.add(int(tok))
    return out


@register
class IncompleteLog(Rule):
    """A rank's log is incomplete: it is cut off, or it has no strategy lines at all.

    **What it means.** Either the file ends (or the process dies with a traceback) before the
    per-layer ``Set ...`` lines reach the last layer, or the log holds MindFormers output but no
    strategy line although the config makes MindFormers print some. Layers after the cut are
    not reported as SW101: the log cannot speak for them, and this finding says so once.

    **Why it matters.** A verification of half a log is not a verification. A crash inside
    ``LayerSetting`` (e.g. an ``IndexError`` from a 2-D ``recompute`` with too few rows) also
    lands here, with the traceback's location.

    **How to fix it.** Verify the complete ``worker_N.log`` (msrun keeps the whole file; logs
    copied from a console are often cut). If the run crashed while building layers, fix the
    config the traceback names, e.g. give a 2-D ``recompute`` one row per interleave::

        model:
          model_config: {num_layers: 8, pp_interleave_num: 2}
        recompute_config:
          recompute: [[1, 1], [1, 0]]     # 2 rows for pp_interleave_num 2
    """

    code = "SW106"
    severity = "error"
    title = "the log is incomplete (layers missing, truncated, no strategy lines at all)"
    needs = "run"
    #: every path's comparison (its ranks' lines and notices)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        runlog = ctx.runlog
        comp = ctx.comparison
        if comp is None or runlog is None:      # (a comparison is made of a runlog: both or neither)
            return
        expects = expects_lines(comp)
        loud = [r for r, d in comp.ranks.items() if d.loud]
        for rank, diff in comp.ranks.items():
            rank_log = runlog.ranks[rank]
            for n in diff.refused:              # MindFormers said so itself, and stopped at model build
                yield self.finding("MindFormers refused the strategy and the run stopped at model build: "
                                   f"{n.data['tag']} {n.data['text']}", rank=rank, source=n.source,
                                   actual=n.data["text"])
            if diff.has_strategy_lines:
                cut = is_cut(rank_log)
                if cut and diff.cut_layers:
                    yield self._cut(rank, diff, rank_log, comp)
                elif cut:
                    # the block stops, but after the last layer anything is configured to log
                    # on: nothing configured is missing (layers without actions log nothing)
                    last = max((lay for lay, items in diff.seen.items() if items), default=-1)
                    yield Finding(self.code, "info",
                                  f"the log ends after layer {last}, the last layer the "
                                  f"strategy logs anything for: complete as far as the strategy goes",
                                  rank=rank, layer=last, source=_last_source(diff))
                continue
            if diff.refused or not diff.notices.applies:
                continue        # refused (said above), or the run applies no strategy at all (one card: SW501)
            if not expects and loud:
                continue        # nothing to log here, and other ranks show MindFormers ran
            src = rank_log.files[0] if rank_log.files else None
            fatal = _fatal(rank_log)
            if fatal is not None:
                yield self.finding(
                    f"no strategy lines at all; the process failed before them "
                    f"({_what(fatal)})",
                    rank=rank, expected="Set ... lines for the configured strategy",
                    actual="(none; the run failed)", source=fatal.source)
            elif rank_log.truncated:
                yield self.finding(
                    "the log is truncated before any strategy line",
                    rank=rank, expected="Set ... lines for the configured strategy",
                    actual="(none; truncated)", source=src)
            elif diff.loud:
                yield self.finding(
                    f"MindFormers printed to this log but no strategy line at all, "
                    f"though the config makes it log {sum(len(v) for v in comp.expected.values())} "
                    f"actions",
                    rank=rank, expected="Set ... lines for the configured strategy",
                    actual="(none)", source=src)
            elif not loud:
                yield self.finding(NO_MINDFORMERS, rank=rank, expected="MindFormers log lines",
                                   actual="(none)", source=src)
            elif cut_before_mindformers(rank_log, runlog.ranks):
                yield self.finding(
                    "the log ends before any MindFormers line, while other ranks' logs "
                    "go on to the end of the run: it is truncated, or the process died early",
                    rank=rank, expected="Set ... lines for the configured strategy",
                    actual="(none; the log stops early)", source=src)
            # else: a silent rank while others printed: SW108

    def _cut(self, rank: int, diff: "RankDiff", rank_log: RankLog, comp: "Comparison") -> Finding:
        fatal = fatal_after_actions(rank_log)
        last = max((lay for lay, items in diff.seen.items() if items), default=-1)
        unseen: List[int] = sorted(lay for lay in diff.cut_layers
                                   if lay > last and any(e.logged for e in comp.expected.get(lay, [])))
        why = f"the process failed ({_what(fatal)})" if fatal is not None else "the file is truncated"
        tail = (f"; layer{'s' if len(unseen) > 1 else ''} {ranges(unseen, 6)} "
                f"ha{'ve' if len(unseen) > 1 else 's'} no lines") if unseen else ""
        src = fatal.source if fatal is not None else _last_source(diff)
        # the last layer logged is in ``layer`` (the renderer puts it in front): not in the text
        stops = "stops after this layer" if last >= 0 else "stops before its first layer"
        return self.finding(
            f"the strategy block {stops}: {why}{tail}",
            rank=rank, layer=last if last >= 0 else None,
            expected=f"lines up to layer {max(comp.expected) if comp.expected else '?'}",
            actual=f"lines up to layer {last}", source=src)


@register
class SilentRank(Rule):
    """A rank's log has no MindFormers line at all, while other ranks' logs do.

    **What it means.** MindFormers prints its INFO lines to stdout only on the ranks listed in
    ``STDOUT_DEVICES`` (or ``stdout_devices``); the other ranks' ``worker_N.log`` hold only
    MindSpore's own lines, and their MindFormers output goes to ``output/log/rank_N/info.log``.
    Such a rank cannot be verified from its worker log, so it is reported, not failed. With the
    run's environment known (``swapwatch run`` records it, or ``--env STDOUT_DEVICES=(0,1)``) a
    rank that was deliberately silenced is reported at info level.

    **Why it matters.** A verdict that covers rank 0 only says nothing about the other ranks.

    **How to fix it.** Verify the file-handler logs instead (``output/log/rank_*/info.log``), or
    let every rank print::

        # unset STDOUT_DEVICES, or in the YAML:
        stdout_devices: null
    """

    code = "SW108"
    severity = "warning"
    title = "a rank's log has no MindFormers lines (STDOUT_DEVICES?): it cannot be verified"
    needs = "run"
    #: every path's ranks (a path's own notices count as MindFormers output: ``RankDiff.loud``)
    views = VIEWS

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        if ctx.runlog is None:
            return
        ranks = ctx.runlog.ranks
        comp = ctx.comparison
        printed = {r: comp.ranks[r].loud if comp is not None and r in comp.ranks else printed_mindformers(rl)
                   for r, rl in ranks.items()}
        loud = [r for r in ranks if printed[r]]
        if not loud:
            return              # nobody printed: SW106 reports it as an error
        allowed = stdout_devices(ctx.env)
        for rank, rank_log in sorted(ranks.items()):
            if printed[rank] or _fatal(rank_log) is not None \
                    or cut_before_mindformers(rank_log, ranks):      # SW106 reports that one
                continue
            src = rank_log.files[0] if rank_log.files else None
            if allowed is not None and rank not in allowed:
                yield Finding(self.code, "info",
                              f"not verified; STDOUT_DEVICES={ctx.env['STDOUT_DEVICES']} "
                              f"keeps MindFormers lines out of its worker log",
                              rank=rank, source=src)
                continue
            yield self.finding(
                f"its log has no MindFormers line at all while rank {loud[0]}'s has; "
                f"it cannot be verified (STDOUT_DEVICES limits which ranks print)",
                rank=rank, expected="MindFormers log lines", actual="(none)", source=src)


def _what(event: "Event") -> str:
    """A fatal event (``parsers.model.is_fatal``: an exit or a notice) in a few words."""
    if isinstance(event, ExitEvent):
        return f"exit code {event.code} at {event.source}"
    text = ((event.data or {}).get("text") or event.what) if isinstance(event, NoticeEvent) else ""
    text = " ".join(str(text).split())
    return f"{text[:120]} at {event.source}" if text else f"error at {event.source}"


def _last_source(diff: "RankDiff") -> Optional[str]:
    items = [s for lay in sorted(diff.seen) for s in diff.seen[lay]]
    return items[-1].source if items else None
