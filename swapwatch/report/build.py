"""Collect what a report shows, from the results the other commands return.

Nothing here decides anything: each part of the page is the object another command builds and
prints (``verify.verify`` -> VerifyResult with its comparison and findings; ``explain.explain``;
``plot.memory.plot_memory``, ``plot.strategy_map.plot_strategy`` and ``plot.estimate.plot_estimate``
with their frames and figures; ``memory.model.estimate`` with ``memory.calibrate.measure``), kept
together per run so :mod:`swapwatch.report.html` can render them. A part that cannot be made (no
config anywhere, no memory figures, a family without a tensor table) is a note on the page, never
a failure of the report: the page says what it could not show and why, in the command's own words.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..errors import InputError
from ..json_input import read_run_json
from .verdict import Verdict, read_verdict, unverified

#: ``swapwatch run`` keeps the YAML as launched under this name (runner.CONFIG_COPY).
CONFIG_COPY = "config.yaml"


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
    explanation: Any = None                 # Explanation / PynativeExplanation
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


def _read_run_json(path: str) -> Optional[Dict[str, Any]]:
    if not os.path.isdir(path):
        return None
    return read_run_json(path)          # bounded and type-checked: a broken one is one line


def _sha256(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _run_config(group: List[str], info: Optional[Dict[str, Any]], config: Optional[str]):
    """(path, origin): ``--config`` first; else the YAML a ``swapwatch run`` dir kept as launched
    (``config.yaml``; run.json's sha256 is of exactly these bytes), else the path run.json names."""
    if config:
        return config, "--config"
    if info is None:
        return None, ""
    copy = os.path.join(group[0], CONFIG_COPY)
    if os.path.isfile(copy):
        return copy, "the run's config.yaml (as launched)"
    path = (info.get("config") or {}).get("path") if isinstance(info.get("config"), dict) else None
    if path and os.path.isfile(path):
        return path, "the config run.json names"
    return None, ""


def _one_line(exc: Exception) -> str:
    return exc.one_line() if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"


def build_run(group: List[str], config: Optional[str] = None) -> RunPart:
    """The parts of one run. Raises InputError only when the logs cannot be read at all."""
    from ..plot.inputs import _label_for
    from ..verify import verify

    info = _read_run_json(group[0]) if len(group) == 1 else None
    part = RunPart(label=_label_for(group), paths=list(group), run_info=info)
    cfg, origin = _run_config(group, info, config)
    part.config_path, part.config_origin = cfg, origin
    if cfg:
        part.config_sha256 = _sha256(cfg)
    try:
        part.result = verify(group, config_path=cfg)
    except InputError as exc:
        # no config to verify against (none given, none in the log): what the run did is still
        # worth a page; the verdict says it was not verified and why, in verify's words
        if config:
            raise
        part.verdict = unverified(exc.one_line())
        part.notes.append(f"verify: {exc.one_line()}")
    if part.result is not None:
        part.verdict = read_verdict(part.result)
        part.runlog = part.result.runlog
        if not cfg and part.result.config_source:
            part.config_origin = "the log"
            part.config_path = part.result.config_source
    if part.runlog is None:
        from ..parsers import read_logs

        part.runlog = read_logs(list(group), show_progress=False)
        if not part.runlog.ranks:
            raise InputError("no worker logs found here (expected worker_*.log, a run dir, or log files)",
                             file=", ".join(group))
    if not part.runlog.label:
        part.runlog.label = part.label
    if info is None or info.get("exit_code") not in (0, None):
        part.stopped = _stopped(part.runlog)
    if cfg:
        _explain(part, cfg)
    elif (part.result is not None and part.result.plan is not None
          and part.result.plan.comparable):        # a LayerSetting plan (plan_view)
        # the config was rebuilt from the log: explain's table of the plan verify made from it
        from ..results import Explanation

        part.explanation = Explanation(config=None, plan=part.result.plan, layout=None)  # type: ignore[arg-type]
    _strategy(part)
    if cfg and info is not None:
        _estimate(part, cfg, group[0])
    return part


#: Ranks listed as stopped with an error, at most (the count says how many more).
MAX_STOPPED = 20


def _stopped(runlog: Any) -> List[Any]:
    """(rank, what, source) of the first event per rank that says the process stopped with an error
    (a traceback, a config error, a non-zero exit code: ``parsers.model.is_fatal``, the test SW106
    uses), for "which worker failed"."""
    from ..parsers.model import is_fatal

    out = []
    for rank in sorted(runlog.ranks):
        for ev in runlog.ranks[rank].events:
            if is_fatal(ev):
                what = getattr(ev, "what", "") or f"exit code {getattr(ev, 'code', '?')}"
                out.append((rank, what.replace("_", " "), ev.source))
                break
    return out


def _explain(part: RunPart, cfg: str) -> None:
    from ..explain import explain

    try:
        part.explanation = explain(cfg)
    except InputError as exc:
        part.notes.append(f"explain: {exc.one_line()}")


def _strategy(part: RunPart) -> None:
    """``plot strategy`` of the run: the VerifyResult itself (its comparison, nothing compared
    again), or the logs alone when nothing was verified."""
    from ..plot.strategy_map import plot_strategy

    rank = None
    if part.result is not None and part.result.comparison is not None:
        from ..verify_render import map_rank

        rank = map_rank(part.result)           # the rank the per-layer map shows
    try:
        part.strategy = plot_strategy(part.result if part.result is not None else part.runlog, rank=rank)
    except InputError as exc:
        part.notes.append(f"strategy map: {exc.one_line()}")


def _estimate(part: RunPart, cfg: str, run_dir: str) -> None:
    """``estimate`` of the run's config (uncalibrated: the model's own prediction) beside the
    peaks the run measured per stage (``memory.calibrate.measure``), drawn as ``plot estimate``."""
    from .. import codepaths
    from ..memory.calibrate import measure
    from ..plot.estimate import plot_estimate

    try:
        doc, cp = codepaths.read(cfg)
        est = cp.size(doc, "report")
    except InputError as exc:
        part.notes.append(f"estimate: {exc.one_line()}")
        return
    try:
        m = measure(run_dir, len(est.stages))
        est.measured.update(m.used)
    except InputError as exc:
        part.notes.append(f"measured peaks: {exc.one_line()}")
    part.estimate = est
    try:
        part.estimate_plot = plot_estimate(est)
    except (InputError, ValueError) as exc:
        part.notes.append(f"estimate plot: {_one_line(exc)}")


def build(paths: Sequence[str], config: Optional[str] = None) -> Report:
    """The report of the runs at ``paths`` (run dirs, msrun log dirs, worker logs; files of one
    directory are one run, as ``plot memory`` groups them). InputError for a missing path or a run
    with no log at all."""
    from ..plot.inputs import group_paths, has_memory

    if not paths:
        raise InputError("no run given (swapwatch run directories, msrun log dirs or worker logs)")
    if config is not None:
        from ..config import read_config_bytes

        read_config_bytes(config)     # a missing file, a directory, a device: its own one line, now
    groups = group_paths(paths)
    from ..file_kind import reject_yaml_for_verify

    for p in paths:
        if os.path.isfile(p):
            reject_yaml_for_verify(p)          # a training YAML is --config, not a run
    report = Report(runs=[build_run(g, config) for g in groups])
    with_mem = [p.runlog for p in report.runs if has_memory(p.runlog)]
    if with_mem:
        from ..plot.memory import plot_memory

        try:
            report.memory = plot_memory(with_mem)
        except InputError as exc:
            report.notes.append(f"memory: {exc.one_line()}")
    else:
        from ..plot.memory import HOW_TO_GET

        report.notes.append(f"memory: no memory figures in these logs; {HOW_TO_GET}")
    if len(groups) >= 2 and len(groups[0]) == 1 and len(groups[1]) == 1:
        from ..strategy_diff import diff

        try:
            report.diff = diff(groups[0][0], groups[1][0])
        except InputError as exc:
            report.notes.append(f"diff: {exc.one_line()}")
    return report
