"""SW403: the YAML was edited after ``swapwatch run`` launched the job (run.json's sha256 differs)."""
from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable, Optional

from . import CheckContext, Finding, Rule, register


@register
class ConfigChangedSinceRun(Rule):
    """The config file changed since the run launched.

    **What it means.** ``swapwatch run`` records the YAML's path and sha256 in ``run.json`` when
    it starts the job. The file at that path now has another hash: it was edited (or replaced)
    after the launch, so it is not what the job ran. When the run directory holds the copy
    ``swapwatch run`` keeps (``RUN_DIR/config.yaml``), the finding names it.

    **Why it matters.** Checking the run against the edited file reports differences the job
    never had (SW109 and friends), or hides ones it had.

    **How to fix it.** Verify against the copy the run kept, or without ``--config`` (the config
    the log printed)::

        swapwatch verify RUN_DIR --config RUN_DIR/config.yaml
        swapwatch verify RUN_DIR
    """

    code = "SW403"
    severity = "warning"
    title = "the config file changed since the run launched"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        info = (ctx.runlog.run_info if ctx.runlog is not None else None) or {}
        record = info.get("config")
        if not isinstance(record, dict) or not record.get("path") or not record.get("sha256"):
            return
        path = str(record["path"])
        now = _sha256(path)
        if now is None or now == record["sha256"]:
            return
        copy = _kept_copy(info, record)
        tail = f"; the run kept the YAML it launched with: {copy}" if copy else ""
        yield self.finding(
            f"{path} changed since the run launched (sha256 {record['sha256'][:12]}... in run.json, "
            f"{now[:12]}... now){tail}",
            expected=record["sha256"], actual=now, source=_run_json(info))


def _sha256(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:          # moved or deleted: nothing to compare with
        return None


def _kept_copy(info: Any, record: Any) -> Optional[str]:
    """The copy of the YAML in the run directory, when ``swapwatch run`` kept one."""
    for candidate in (record.get("copy"), os.path.join(str(info.get("run_dir") or ""), "config.yaml")):
        if candidate and info.get("run_dir") is not None and os.path.isfile(str(candidate)):
            return str(candidate)
    return None


def _run_json(info: Any) -> Optional[str]:
    run_dir = info.get("run_dir")
    return os.path.join(str(run_dir), "run.json") if run_dir else None
