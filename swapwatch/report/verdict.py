"""The verdict of one run as the report states it, read from a :class:`~swapwatch.commands.verify.VerifyResult`.

Why one small module: the verdict's vocabulary belongs to verify (``verify.py``,
``verify_render.verdict_line``), and it is changing (a run verdict, "applied as configured on
N/M ranks", said apart from the config findings; NOT VERIFIED when nothing was verified). The page
reads the result's fields here and nowhere else (the verdict, the exit code, the findings with
their severity and ``needs``, the counts), so re-pointing the report at a new verdict is an edit to
:func:`read_verdict` alone. It decides nothing verify has not decided: every number is a count of
what the result holds.
"""
from __future__ import annotations

from typing import Any

from ..model.results import Verdict, VerifyResult


def finding_needs(f: Any) -> str:
    """Which question a finding answers (``config`` or ``run``): verify's own split
    (:func:`swapwatch.checks.question`), so the page groups findings as the verdict counts them."""
    from ..checks import question

    return question(f.code)


def read_verdict(result: "VerifyResult") -> Verdict:
    """The verdict of ``result`` (a VerifyResult) in verify's own words: the verdict word, the
    ``run: ...`` and ``config: ...`` lines (:func:`swapwatch.report.verify.run_line` /
    ``config_line``) and the counts verify decided (``verify.decide``). Nothing is re-derived here."""
    from .verify import config_line, run_line, verdict_word

    state = {"not_verified": "not-verified", "pass": "pass"}.get(str(result.verdict), "fail")
    return Verdict(state=state, headline=verdict_word(result), run=run_line(result),
                   config=config_line(result), exit_code=result.exit_code, counts=result.counts(),
                   run_codes=sorted({f.code for f in result.question_findings("run")}),
                   config_codes=sorted({f.code for f in result.question_findings("config")}))


def unverified(reason: str) -> Verdict:
    """The verdict when verify could not run at all (no config anywhere, no log): NOT VERIFIED."""
    return Verdict(state="not-verified", headline="NOT VERIFIED", run=f"run: NOT VERIFIED: {reason}",
                   config="config: not checked", exit_code=None)
