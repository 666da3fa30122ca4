"""SW109: the log is not a run of ``--config`` (another layer split, or other logged config sections).

Said once for the whole run, and it stands in for the per-layer comparison: when the run used
another config, "layer 5: full recompute missing" on every layer and rank is noise that hides the
one cause. ``verify`` drops the comparison findings (:data:`CASCADE`) when this rule fires.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from . import CheckContext, Finding, Rule, register
from ._config_ctx import config_of
from ..engine.compare import ValueTexts, canon
from ..text import ranges
from ._logged_config import (PerLoggedValues, config_sections, formative_differences, initial_config_differences,
                             short, source_of)

if TYPE_CHECKING:
    from ..engine.compare import Comparison, RankDiff
    from ..model.families import ModelFamily
    from ..parsers.model import RankLog
    from ..model.plan import Plan

#: Findings that compare the run with ``--config`` layer by layer: they follow from SW109.
CASCADE = frozenset({"SW101", "SW102", "SW103", "SW104", "SW106", "SW107", "SW110"})


@register
class NotThisConfig(Rule):
    """The log is not a run of the config you verify it against.

    **What it means.** MindFormers prints the layer split it used (``num_layers per stage: [[8, 8,
    8, 8]]``) and the config sections it was given (``initial recompute_config / swap_config /
    parallel_config from dict``). Here they disagree with ``--config``: another number of layers,
    pipeline stages, interleaves or offsets, or another value of a recompute / swap key. The
    verdict says it once (``4 vs 32 layers, pp 1 vs 4``, log first) and skips the per-layer
    comparison (SW101-SW104, SW106, SW107, SW110), which would otherwise report every layer of
    every rank.

    The same holds for a log of another model: its ``Set ...`` lines name cells no layer of the
    config's family has (a DeepSeek-V3 log against a Qwen3 YAML logs ``mlp.shared_experts.mul``),
    or it has an MTP block (a second LayerSetting block) that the config's model has none of.
    Same strategy keys, same layer split: still not a run of this config.

    **Why it matters.** Either the job ran another YAML, or the YAML was edited after the job
    (see SW403): the per-layer differences would all be true and all beside the point.

    **How to fix it.** Verify against the YAML the job really used (``swapwatch run`` keeps its
    path and hash in ``run.json``), or without ``--config`` to check the run against the config it
    printed::

        swapwatch verify output/msrun_log --config the_yaml_the_job_used.yaml
        swapwatch verify output/msrun_log            # the config the log printed
    """

    code = "SW109"
    severity = "error"
    title = "the log is not a run of this config (layer split or logged config differs)"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = ctx.static_plan
        if ctx.runlog is None or plan is None:
            return
        sections = config_sections(config_of(ctx))
        groups: "OrderedDict[Tuple[str, ...], List[Tuple[int, RankLog, Where]]]" = OrderedDict()
        formative = plan.formative or {}
        same = ValueTexts().same          # the config's values made canonical once, not per rank
        want_split = canon(plan.geometry.layer_list)

        def differences(geometry: Dict[str, Any], initial: Dict[str, Any], form: Dict[str, Any]) -> Tuple:
            diffs, where = _differences(want_split, geometry, initial, sections, same)
            if not diffs:
                diffs, where = _formative_differences(formative, form, same)
            return tuple(diffs), where

        per_rank = PerLoggedValues(differences)
        model = ModelDifferences(plan, ctx.comparison)
        for rank, rank_log in sorted(ctx.runlog.ranks.items()):
            diffs, where = per_rank(rank_log)
            if not diffs:
                diffs, where = model(rank, rank_log)
            if diffs:
                groups.setdefault(diffs, []).append((rank, rank_log, where))
        for diffs, members in groups.items():
            ranks = [r for r, _, _ in members]
            _, first_log, where = members[0]
            who = "this log" if len(ranks) == 1 else f"this log (ranks {ranges(ranks)})"
            shown = ", ".join(diffs[:4]) + (f" and {len(diffs) - 4} more" if len(diffs) > 4 else "")
            src = where[1] if where and where[0] == "source" else (
                source_of(first_log, *where) if where else None)
            yield self.finding(
                f"{who} is not a run of this config: {shown} (log vs --config); "
                f"the per-layer comparison is skipped",
                rank=ranks[0] if len(ranks) == 1 else None, expected="the config the log printed",
                actual=list(diffs), source=src)


Where = Optional[Tuple[str, str]]


class ModelDifferences:
    """"log vs config" phrases for a log of another model than the config's: cells the config's
    family has in none of its layer trees (a DeepSeek-V3 log verified against a Qwen3 YAML logs
    ``mlp.shared_experts.mul``), or an MTP block (MindFormers' second LayerSetting block, see
    ``families.from_log``) while the config's model has no MTP layer. The same layer split and
    the same ``initial ... from dict`` sections are no proof of the same model: a YAML of another
    family with the same strategy keys prints the same values.

    Only for a family the config names (its trees are the reference); a config without a model
    section (the default tree) says nothing about the cells. Ranks compared as a copy of another
    (``RankDiff.same_as``) share its answer."""

    def __init__(self, plan: "Plan", comparison: "Optional[Comparison]") -> None:
        fam = plan.family
        self.family: "Optional[ModelFamily]" = fam if (fam is not None and fam.known
                              and not str(fam.origin).startswith("default")) else None
        self.comparison = comparison
        self.known: Dict[int, Tuple[Tuple[str, ...], Where]] = {}
        self._paths: Optional[frozenset] = None

    def __call__(self, rank: int, rank_log: "RankLog") -> Tuple[Tuple[str, ...], Where]:
        fam = self.family
        if fam is None:
            return (), None
        diff = self.comparison.ranks.get(rank) if self.comparison is not None else None
        ref = diff.same_as if diff is not None and diff.same_as is not None else rank
        got = self.known.get(ref)
        if got is None:
            got = self.known[ref] = self._differences(fam, rank_log, diff)
        return got

    def _differences(self, fam: "ModelFamily", rank_log: "RankLog",
                     diff: "Optional[RankDiff]") -> Tuple[Tuple[str, ...], Where]:
        from ..engine.compare import layout_paths

        if self._paths is None:
            self._paths = layout_paths(fam.name)
        out: List[str] = []
        where: Where = None
        seen = [s for items in (diff.seen.values() if diff is not None else ()) for s in items]
        foreign = sorted({s.path for s in seen if s.path is not None and s.path not in self._paths})
        if foreign:
            from ..model.families import from_log

            other = from_log(rank_log)
            names = ", ".join(foreign[:2]) + (f" and {len(foreign) - 2} more" if len(foreign) > 2 else "")
            out.append(f"cells {names} that no {fam.name} layer has")
            if other is not None and other.name != fam.name:
                out.append(f"the log fits {other.name}")
            first = next(s for s in seen if s.path in foreign)
            where = ("source", first.source)
        if rank_log.layer_settings > 1 and not fam.mtp_layers:
            out.append(f"an MTP block (a second LayerSetting block) that this {fam.name} config has none of")
            where = where or ("geometry", "layer_list")
            if foreign:                 # "the log fits X" last
                out.append(out.pop(1)) if len(out) == 3 else None
        return tuple(out), where


def _differences(want: Any, logged_geometry: Dict[str, Any], initial: Dict[str, Any],
                 sections: Optional[Dict[str, Dict[str, Any]]], same: Any) -> Tuple[List[str], Where]:
    """Short "log vs config" phrases for what one rank logged (``want``: the config's layer
    split, canonical), and where the log line of the first one is (``_source``'s kind and key)."""
    out: List[str] = []
    where: Where = None
    got = canon(logged_geometry.get("layer_list"))
    if isinstance(got, list) and got and all(isinstance(r, list) for r in got) and got != want:
        where = ("geometry", "layer_list")
        n_got, n_want = sum(map(sum, got)), sum(map(sum, want))
        if n_got != n_want:
            out.append(f"{n_got} vs {n_want} layers")
        if len(got[0]) != len(want[0]):
            out.append(f"pp {len(got[0])} vs {len(want[0])}")
        if len(got) != len(want):
            out.append(f"interleave {len(got)} vs {len(want)}")
        if not out:
            out.append(f"layer split {got} vs {want} (offset)")
    for key, want_value, got_value in initial_config_differences(initial, sections, same):
        got_s, want_s = short(got_value, 400), short(want_value, 400)
        out.append(f"{key} {got_s} vs {want_s}" if len(got_s) + len(want_s) <= 60 else f"{key} differs")
        where = where or ("initial_config", key)
    return out, where


def _formative_differences(formative: Dict[str, Any], logged: Dict[str, Any],
                           same: Any) -> Tuple[List[str], Where]:
    """For logs without ``initial ... from dict`` lines: the ``Formative ...`` values MindFormers
    logged that differ from the ones ``--config`` gives (the same comparison as SW107)."""
    out: List[str] = []
    where: Where = None
    for logged_key, _key, _want, _got in formative_differences(formative, logged, same):
        out.append(f"Formative {logged_key} differs")
        where = where or ("formative", logged_key)
    return out, where
