"""``swapwatch verify`` as a library: logs (+ optional config) -> findings, verdict, exit code.

The intended strategy is the config's :class:`~swapwatch.engine.strategy.Plan`; what happened is the
parsers' :class:`~swapwatch.parsers.model.RunLog`; every registered rule (config-time ones too,
with the environment the run had) compares the two. Without ``--config`` the intended config is
rebuilt from the log's own ``initial recompute_config / swap_config / parallel_config from dict``
lines plus the logged geometry, which is MindFormers' free, authoritative copy of the YAML.

Importable without MindSpore: ``swapwatch run`` calls :func:`verify` at the end of a run.
"""
from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence

from ..checks import REGISTRY, CheckContext, Finding, run_rules
from ..errors import InputError
from .file_kind import reject_yaml_for_verify
# the result and its verdict live below verify and its renderers (results.py); re-exported here
from ..model.results import EXIT_CODES, VerifyResult, decide, sort_key  # noqa: F401

if TYPE_CHECKING:      # imported while the logs are scanned (_import_for_checks): the workers need no regex
    from ..engine.codepaths import CodePath
    from ..engine.compare import Comparison
    from ..model.plan_view import Config, PlanView
    from ..parsers.model import RunLog


def verified_ranks(runlog: "RunLog", comparison: Optional["Comparison"]) -> List[int]:
    """Ranks whose log speaks for what MindFormers applied: a rank with strategy lines, or one whose log holds
    MindFormers output where no strategy line is due: the config makes MindFormers log none, the run says it
    applied none (a one-card PyNative run) or that MindFormers refused the strategy. Without a comparison (the
    log is not a run of this config: SW109), a rank with MindFormers output. A rank without any MindFormers
    line (STDOUT_DEVICES, not a MindFormers log) is never verified."""
    from ..engine.compare import expects_lines, printed_mindformers

    if comparison is None:
        return [rank for rank, rank_log in runlog.ranks.items() if printed_mindformers(rank_log)]
    expects = expects_lines(comparison)
    return [rank for rank, diff in comparison.ranks.items()
            if diff.has_strategy_lines or (diff.loud and (not expects or not diff.notices.applies or diff.refused))]


def verify(paths: Sequence[str], config_path: Optional[str] = None,
           env: Optional[Mapping[str, str]] = None, ignore: Iterable[str] = (),
           strict: bool = False, ir_dir: Optional[str] = None) -> VerifyResult:
    """Verify the run logged at ``paths`` against ``config_path`` (or the config the log printed).

    Raises :class:`InputError` (exit 2) for bad paths, a bad config, an unknown ``ignore`` code,
    or when there is no config to verify against at all.
    """
    skip = normalise_codes(ignore)
    if not paths:
        raise InputError("no log path given (worker_N.log files, msrun log dirs or run dirs)")
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", file=str(p))
        reject_yaml_for_verify(str(p))
    if ir_dir and not os.path.isdir(ir_dir):
        raise InputError("--ir: not a directory", file=str(ir_dir))

    from ..parsers import read_logs

    own = None if config_path else run_dir_config(paths)
    config_path = config_path or own
    runlog = read_logs(list(paths), while_scanning=_import_for_checks)
    if not runlog.ranks:
        raise InputError(f"no worker logs found in {', '.join(map(str, paths))}")
    # the run as read lives through the checks: keep the cyclic collector from rescanning it while
    # they run (each full collection walked every rank's objects: ~60 ms at 10,000 ranks)
    gc.freeze()
    try:
        result = _verify_read(runlog, config_path, skip, strict, env, ir_dir)
    finally:
        gc.unfreeze()
    if own:
        result.config_note = RUN_DIR_NOTE
    return result


def verify_read(runlog: "RunLog", config_path: Optional[str] = None) -> VerifyResult:
    """:func:`verify` of a run already read (``plot strategy`` reads the comparison verify
    decides with from it, so the plot and the verdict never disagree)."""
    return _verify_read(runlog, config_path, set(), False, None, None)


#: ``VerifyResult.config_note`` when ``verify RUN_DIR`` took the run's own YAML
RUN_DIR_NOTE = "the run's own config as launched, named in run.json; --config to use another"


def run_dir_config(paths: Sequence[str]) -> Optional[str]:
    """The config of a ``swapwatch run --config`` run: ``verify RUN_DIR`` without ``--config``
    uses the YAML as launched, which the run directory keeps (``config.yaml``, DESIGN §3.3b) and
    ``run.json`` names; None for anything else (one path only: several run dirs may differ)."""
    from ..json_input import read_run_json

    if len(paths) != 1 or not os.path.isdir(paths[0]):
        return None
    info = read_run_json(paths[0])     # a broken run.json is one line here, as in the parsers
    cfg = info.get("config") if info is not None else None
    if not isinstance(cfg, dict) or not cfg.get("path"):
        return None             # a run without --config: the log's own config, as before
    copy = os.path.join(paths[0], str(cfg.get("copy") or "config.yaml"))
    return copy if os.path.isfile(copy) else None


def _verify_read(runlog: "RunLog", config_path: Optional[str], skip: set, strict: bool,
                 env: Optional[Mapping[str, str]], ir_dir: Optional[str]) -> VerifyResult:
    """:func:`verify` once the logs are read: the config's code path (``codepaths``: from ``--config``, else
    from the logs themselves) plans it and says what its log must show."""
    from ..engine import codepaths

    if config_path:
        doc, cp = codepaths.read(str(config_path))
        config, plan = cp.configure(doc)
        source = str(config_path)
    else:
        cp = codepaths.of_run(runlog)
        config, plan, source = cp.from_log(runlog)
    ir = read_ir(ir_dir) if ir_dir else None
    # without --config the log's own config is the reference: SW107 would compare it with itself
    return evaluate(plan, runlog, config=config, env=merged_env(runlog, env),
                    ignore=skip, strict=strict, ir=ir, config_source=source,
                    skip_codes=() if config_path else ("SW107", "SW109"), cp=cp)


def _import_for_checks() -> None:
    """What verify needs once the logs are read (the rules, the config reader and its YAML
    library, the renderers), imported while the workers scan instead of before they start."""
    from ..engine import codepaths, compare, strategy, unmatched  # noqa: F401
    from .. import config  # noqa: F401
    from ..report import verify as verify_render  # noqa: F401
    from ..checks import load_rules
    from ..memory import table_files, tensor_table  # noqa: F401

    load_rules()
    # SW211 reads every tensor table on each verify (~0.04 s of YAML): read while the workers scan,
    # not after them, when it is serial time
    table_files.tables()


def evaluate(plan: "PlanView", runlog: "RunLog", config: Optional["Config"] = None,
             env: Optional[Mapping[str, str]] = None, ignore: Iterable[str] = (), strict: bool = False,
             ir: Any = None, config_source: str = "", skip_codes: Iterable[str] = (),
             cp: Optional["CodePath"] = None) -> VerifyResult:
    """Run every rule on an already built plan and RunLog of the code path ``cp`` (the core of :func:`verify`;
    None: the path that made ``plan``, ``codepaths.for_plan``).

    The plan-vs-log comparison is made here, once (``compare.compare`` of what the path's plan makes it log and
    of each rank's log as the path reads it; one pass per group of ranks that logged the same strategy), and
    shared: the rules read it from the context, the result keeps it."""
    skip = normalise_codes(ignore) | set(skip_codes)
    if cp is None:
        from ..engine import codepaths

        cp = codepaths.for_plan(plan)
    comp = cp.compare(plan, runlog)
    ctx = CheckContext(plan=plan, config=config, env=dict(env or {}), runlog=runlog, ir=ir,
                       comparison=comp)
    needs = ["config", "run"] + (["ir"] if ir is not None else [])
    findings = run_rules(ctx, needs=needs, ignore=skip)
    findings = _dedupe(findings, skip)
    findings = one_cause(findings)
    findings.sort(key=sort_key)
    result = VerifyResult(findings=findings, verdict="pass", exit_code=0,
                          ranks=sorted(runlog.ranks), layers=len(plan.layers), strict=strict,
                          config_source=config_source, env=dict(env or {}), plan=plan,
                          runlog=runlog,
                          comparison=None if _not_this_config(findings) else comp)
    return decide(result, verified_ranks(runlog, result.comparison))


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def normalise_codes(codes: Iterable[str]) -> set:
    """``--ignore`` values: codes, case-insensitive, comma-separated allowed; unknown -> InputError."""
    out: set = set()
    if not codes:
        return out              # nothing to look up: the rules are imported later (while scanning)
    from ..checks import load_rules

    load_rules()
    for raw in codes or ():
        for code in str(raw).split(","):
            code = code.strip().upper()
            if not code:
                continue
            if code not in REGISTRY:
                raise InputError(f"--ignore {code}: unknown rule code (see `swapwatch rules`)")
            out.add(code)
    return out


def parse_env(items: Iterable[str]) -> Dict[str, str]:
    """``--env KEY=VALUE`` pairs as a dict; a pair without ``=`` or a key is bad input."""
    out: Dict[str, str] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise InputError(f"--env {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def merged_env(runlog: "RunLog", env: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """The environment the run had: ``run.json`` of a run dir, then ``--env`` on top."""
    out: Dict[str, str] = {}
    info = getattr(runlog, "run_info", None) or {}
    recorded = info.get("env") or {}
    if isinstance(recorded, dict):
        for key, value in recorded.items():
            if isinstance(value, dict):        # runner's record: {"wanted", "user", "used"}
                if "used" not in value:
                    continue                   # e.g. {"prepended": dir}: not a value
                value = value["used"]
            out[str(key)] = str(value)
    out.update(dict(env or {}))
    return out


def read_ir(ir_dir: str) -> Any:
    """Compiled-graph evidence for SW110 (:func:`swapwatch.parsers.ir.read_ir`)."""
    from ..parsers.ir import read_ir as read_ir_dir

    return read_ir_dir(ir_dir)


# ---------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------

def one_cause(findings: List[Finding]) -> List[Finding]:
    """When the log is not a run of ``--config`` (SW109), that is the one cause: drop the per-layer
    comparison findings that follow from it (``checks.sw109_not_this_config.CASCADE``), so one
    wrong config is one error, not one per layer and rank."""
    if not _not_this_config(findings):
        return findings
    from ..checks.sw109_not_this_config import CASCADE

    return [f for f in findings if f.code not in CASCADE]


def _not_this_config(findings: List[Finding]) -> bool:
    return any(f.code == "SW109" for f in findings)


def _dedupe(findings: List[Any], skip: set) -> List[Finding]:
    out: List[Finding] = []
    seen = set()
    for f in findings:
        if not isinstance(f, Finding) or f.code in skip:
            continue
        key = (f.code, f.rank, f.layer, f.op, f.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out
