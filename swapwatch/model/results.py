"""The results the commands return, below both the commands and their renderers.

``explain`` returns an :class:`Explanation`, ``verify`` a :class:`VerifyResult`, whichever code path made them;
their renderers (``report/explain.py``, ``report/verify.py``, the HTML report) read them from here, so no
renderer imports a command module and no command module imports back (DESIGN §2.1: the layers). A result holds
data and calls no renderer. What a verdict is (:func:`decide`) and the findings' order (:func:`sort_key`) live
with the result they decide.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from ..checks import Finding
from ..text import SEVERITIES, severity_rank

from .plan_view import VOIDED_BY_RECOMPUTE

if TYPE_CHECKING:
    from ..engine.compare import Comparison
    from .plan_view import PlanView


@dataclass
class Explanation:
    """``explain`` of a training YAML, whichever code path it goes to (``codepaths.CodePath.explain``): the config
    and plan, the config-time findings, and what the path says about them in words a renderer prints as they are
    (``header``: what the plan is; ``notes``: what was not checked; ``log_lines``: the lines MindFormers will log,
    explain's ``formative`` output), and the model and run ``shape`` ``diff`` compares."""

    config: Any
    plan: "PlanView"
    findings: List[Finding] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    header: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    log_lines: List[str] = field(default_factory=list)
    shape: Dict[str, int] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        """The ``explain --format json`` document."""
        return self.plan.to_json(self.findings)

    @property
    def exit_code(self) -> int:
        return 1 if any(f.severity == "error" for f in self.findings) else 0


#: ``verdict`` -> exit code (DESIGN §3.1 / §3.3): nothing verified is never a pass.
EXIT_CODES = {"pass": 0, "fail": 1, "not_verified": 4}


@dataclass
class VerifyResult:
    """The outcome of one verification. ``to_json`` is DESIGN.md §3.3 exactly."""

    findings: List[Finding]
    verdict: str                      # "pass" | "fail"
    exit_code: int                    # 0 pass, 1 fail
    ranks: List[int]
    layers: int
    strict: bool = False
    config_source: str = ""           # the --config path, or where in the log the config came from
    env: Dict[str, str] = field(default_factory=dict)
    plan: Any = None
    runlog: Any = None
    #: the plan-vs-log comparison the rules read, for the per-layer map and ``plot strategy``
    #: (None for a PyNative run, and when the log is not a run of this config: SW109)
    comparison: Optional[Comparison] = None
    #: ranks whose log shows what MindFormers applied (strategy lines, or MindFormers output where
    #: the config makes it log none): what the run verdict speaks for (:func:`decide`)
    verified_ranks: List[int] = field(default_factory=list)
    #: "did every rank apply what MindFormers does with this config?": "applied" | "differs" |
    #: "not_verified" (no rank's log could be checked)
    run_verdict: str = ""
    #: "does the config do what the user meant?": "ok" | "warnings" | "errors" (explain's findings)
    config_verdict: str = ""
    #: findings by severity, per question (``counts`` has them all)
    run_counts: Dict[str, int] = field(default_factory=dict)
    config_counts: Dict[str, int] = field(default_factory=dict)
    #: why this config: set when ``verify RUN_DIR`` took the run's own YAML (:data:`RUN_DIR_NOTE`)
    config_note: str = ""

    def counts(self) -> Dict[str, int]:
        return counts(self.findings)

    def question_findings(self, which: str) -> List[Finding]:
        """The findings answering ``which`` question, ``"run"`` or ``"config"`` (checks.question)."""
        from ..checks import question

        return [f for f in self.findings if question(f.code) == which]

    def failing(self, f: Finding) -> bool:
        """Does this finding fail the verification (errors; warnings too with --strict)?"""
        return f.severity == "error" or (self.strict and f.severity == "warning")


def counts(findings: Iterable[Finding]) -> Dict[str, int]:
    out = {s: 0 for s in SEVERITIES}
    for f in findings:
        out[f.severity] = out.get(f.severity, 0) + 1
    return out


def decide(result: VerifyResult, verified: Iterable[int]) -> VerifyResult:
    """The verdict of ``result`` from its findings and the ranks whose logs could be checked.

    Two questions, answered apart (DESIGN §3.3): the *run* verdict ("applied" when every
    verified rank's log shows what MindFormers does with the config, "differs" on a failing run
    finding, "not_verified" when no rank's log could be checked) and the *config* verdict ("ok",
    "warnings", "errors": the findings explain raises). The overall ``verdict`` and exit code:
    ``not_verified`` (4) whenever nothing was verified, whatever the findings; else ``fail`` (1)
    on any failing finding of either question (errors; warnings too with ``--strict``); else
    ``pass`` (0)."""
    from ..checks import question

    result.verified_ranks = sorted(set(verified))
    run = [f for f in result.findings if question(f.code) == "run"]
    cfg = [f for f in result.findings if question(f.code) != "run"]
    result.run_counts, result.config_counts = counts(run), counts(cfg)
    if not result.verified_ranks:
        result.run_verdict = "not_verified"
    elif any(result.failing(f) for f in run):
        result.run_verdict = "differs"
    else:
        result.run_verdict = "applied"
    result.config_verdict = ("errors" if result.config_counts["error"] else
                             "warnings" if result.config_counts["warning"] else "ok")
    if result.run_verdict == "not_verified":
        result.verdict = "not_verified"
    elif any(result.failing(f) for f in result.findings):
        result.verdict = "fail"
    else:
        result.verdict = "pass"
    result.exit_code = EXIT_CODES[result.verdict]
    return result


def sort_key(f: Finding):
    return (severity_rank(f.severity), f.code,
            -1 if f.rank is None else f.rank, -1 if f.layer is None else f.layer, f.op or "")


# ---------------------------------------------------------------------------------------------
# diff
# ---------------------------------------------------------------------------------------------

@dataclass
class Side:
    """One side of a diff: a config's plan or a run's applied strategy, per layer."""

    path: str
    kind: str                                   # "config" | "run"
    cells: Dict[int, Dict[str, str]]            # layer -> column texts (layer_table words)
    stages: Dict[int, Tuple[Optional[int], int]]    # layer -> (stage or None: not decided, interleave)
    shape: Dict[str, int]
    swap: Optional[bool] = None
    rank: Optional[int] = None                  # runs: the rank whose log is read
    note: str = ""
    #: turning swap on changes what the recompute keys mean (``PlanView.swap_keys_become_ids``; a run: as logged)
    swap_keys_become_ids: bool = True
    #: what a ``!`` cell means on this side (``PlanView.voided_legend``)
    voided_legend: str = VOIDED_BY_RECOMPUTE

    def describe(self) -> str:
        what = f"{self.kind}"
        if self.rank is not None:
            what += f", rank {self.rank}"
        n = self.shape.get("num_layers", len(self.cells))
        bits = [f"{n} layers", f"pipeline_stage {self.shape.get('pipeline_stage', '?')}"]
        if self.swap is not None:
            bits.append("swap ON" if self.swap else "swap off")
        return f"{self.path} ({what}: {', '.join(bits)}){self.note}"


@dataclass
class LayerDiff:
    layer: int
    stage: str
    a: Dict[str, str]
    b: Dict[str, str]
    cells: Dict[str, str]                       # equal text, or "✗ a → b"
    differs: List[str] = field(default_factory=list)


@dataclass
class DiffResult:
    a: Side
    b: Side
    layers: List[LayerDiff]
    shape: List[str]                            # "layers 32 vs 4", ...
    #: two configs that both estimate: per stage (stage, A peak, B peak, A recompute FLOPs, B ...)
    estimates: List[Tuple[int, int, int, float, float]] = field(default_factory=list)
    estimate_note: str = ""                     # why there are none, for two configs

    @property
    def same(self) -> bool:
        return not self.shape and not any(ld.differs for ld in self.layers) and self.a.swap == self.b.swap

    @property
    def exit_code(self) -> int:
        return 0 if self.same else 1

    @property
    def voided_legend(self) -> str:
        return self.a.voided_legend


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """``state``: ``pass`` | ``fail`` | ``not-verified`` (the page's colour); ``headline``: verify's
    verdict word; ``run``: the run line (did the ranks apply what the config does);
    ``config``: the config line (does the config do what was meant: explain's findings);
    ``exit_code``: verify's; ``counts``: findings by severity."""

    state: str
    headline: str
    run: str
    config: str
    exit_code: Optional[int]
    counts: Dict[str, int] = field(default_factory=dict)
    run_codes: List[str] = field(default_factory=list)
    config_codes: List[str] = field(default_factory=list)


#: Ranks listed as stopped with an error, at most (the count says how many more).
MAX_STOPPED = 20


@dataclass
class RunPart:
    """One run of the report: its paths, ``run.json`` (when a ``swapwatch run`` dir), the config
    verified against, and the result objects of verify / explain / plot strategy / estimate."""

    label: str
    paths: List[str]
    run_info: Optional[Dict[str, Any]] = None
    config_path: Optional[str] = None
    config_sha256: Optional[str] = None
    config_origin: str = ""                 # "--config", "the run's config.yaml", "the log", ""
    result: Any = None                      # VerifyResult
    verdict: Optional[Verdict] = None
    explanation: Optional[Explanation] = None         # the plan, as explain gives it
    runlog: Any = None
    strategy: Any = None                    # StrategyPlot
    estimate: Any = None                    # Estimate (predicted, with the run's measured peaks)
    estimate_plot: Any = None               # EstimatePlot
    #: ranks whose log says the process stopped with an error (parsers.model.is_fatal): rank, what, where
    stopped: List[Any] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


@dataclass
class Report:
    runs: List[RunPart]
    memory: Any = None                      # MemoryPlot over every run (side by side)
    notes: List[str] = field(default_factory=list)
    diff: Any = None                        # diff.DiffResult of the first two runs, when two or more
