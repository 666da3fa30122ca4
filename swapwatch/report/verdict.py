"""The verdict of one run as the report states it, read from a :class:`~swapwatch.verify.VerifyResult`.

Why one small module: the verdict's vocabulary belongs to verify (``verify.py``,
``verify_render.verdict_line``), and it is changing (a run verdict, "applied as configured on
N/M ranks", said apart from the config findings; NOT VERIFIED when nothing was verified). The page
reads the result's fields here and nowhere else (the verdict, the exit code, the findings with
their severity and ``needs``, the counts), so re-pointing the report at a new verdict is an edit to
:func:`read_verdict` alone. It decides nothing verify has not decided: every number is a count of
what the result holds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


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


def finding_needs(f: Any) -> str:
    """What a finding was decided from (``config``, ``run``, ``ir``): its own ``needs`` when the
    finding carries one, else its rule's (``checks.REGISTRY``)."""
    needs = getattr(f, "needs", None)
    if needs:
        return str(needs)
    from ..checks import REGISTRY

    rule = REGISTRY.get(f.code)
    return getattr(rule, "needs", "run") if rule is not None else "run"


def _tally(findings: List[Any]) -> str:
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    parts = []
    if errors:
        parts.append(f"{len(errors)} error{'s' if len(errors) != 1 else ''} ("
                     + ", ".join(sorted({f.code for f in errors})) + ")")
    if warnings:
        parts.append(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''} ("
                     + ", ".join(sorted({f.code for f in warnings})) + ")")
    return ", ".join(parts) if parts else "no findings"


def read_verdict(result: Any) -> Verdict:
    """The verdict of ``result`` (a VerifyResult) in the report's words; the only place the report
    reads verify's verdict fields. The colour and the headline are verify's verdict and exit code;
    the run line counts the ranks verify compared (``verify_render.unverifiable``: a rank with no
    strategy line cannot be verified) and, of those, the ones with no failing run finding."""
    from ..verify_render import unverifiable

    word = str(result.verdict).lower().replace("_", " ").replace("-", " ")
    findings = list(result.findings)
    config_f = [f for f in findings if finding_needs(f) == "config"]
    run_f = [f for f in findings if finding_needs(f) != "config"]
    ranks = list(result.ranks)
    pynative = getattr(result.plan, "path", None) == "pynative"
    compared = result.comparison is not None or pynative
    verified = [r for r in ranks if not unverifiable(result, r)] if compared else []
    failing_ranks = {f.rank for f in run_f if result.failing(f) and f.rank is not None}
    run_wide = any(result.failing(f) and f.rank is None for f in run_f)
    applied = [] if run_wide else [r for r in verified if r not in failing_ranks]
    if not compared:
        run = f"not compared: the logs are not a run of this config (0/{len(ranks)} ranks verified)"
    elif not verified:
        run = f"not verified: no rank's log has a strategy line (0/{len(ranks)} ranks verified)"
    else:
        run = f"applied as configured on {len(applied)}/{len(ranks)} ranks"
        if len(verified) < len(ranks):
            run += f" ({len(ranks) - len(verified)} not verified: no strategy line)"
    if run_f:
        run += "; run: " + _tally(run_f)
    state = "not-verified" if word == "not verified" else ("pass" if result.exit_code == 0 else "fail")
    return Verdict(state=state, headline=word.upper(), run=run, config="config: " + _tally(config_f),
                   exit_code=result.exit_code, counts=result.counts(),
                   run_codes=sorted({f.code for f in run_f}), config_codes=sorted({f.code for f in config_f}))


def unverified(reason: str) -> Verdict:
    """The verdict when verify could not run at all (no config anywhere, no log): NOT VERIFIED."""
    return Verdict(state="not-verified", headline="NOT VERIFIED", run=f"not verified: {reason}",
                   config="config: not checked", exit_code=None)
