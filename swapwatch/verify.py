"""``swapwatch verify`` as a library: logs (+ optional config) -> findings, verdict, exit code.

The intended strategy is the config's :class:`~swapwatch.strategy.Plan`; what happened is the
parsers' :class:`~swapwatch.parsers.model.RunLog`; every registered rule (config-time ones too,
with the environment the run had) compares the two. Without ``--config`` the intended config is
rebuilt from the log's own ``initial recompute_config / swap_config / parallel_config from dict``
lines plus the logged geometry, which is MindFormers' free, authoritative copy of the YAML.

Importable without MindSpore: ``swapwatch run`` calls :func:`verify` at the end of a run.
"""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .checks import REGISTRY, CheckContext, Finding, comparable, run_rules
from .errors import InputError
from .file_kind import reject_yaml_for_verify
from .text import SEVERITIES, severity_rank

if TYPE_CHECKING:      # imported while the logs are scanned (_import_for_checks): the workers need no regex
    from .compare import Comparison

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
        return _counts(self.findings)

    def question_findings(self, which: str) -> List[Finding]:
        """The findings answering ``which`` question, ``"run"`` or ``"config"`` (checks.question)."""
        from .checks import question

        return [f for f in self.findings if question(f.code) == which]

    def failing(self, f: Finding) -> bool:
        """Does this finding fail the verification (errors; warnings too with --strict)?"""
        return f.severity == "error" or (self.strict and f.severity == "warning")

    def to_json(self) -> Dict[str, Any]:
        """DESIGN §3.3, plus (added, nothing removed): ``counts`` of findings by severity,
        ``config`` (path and sha256 of a ``--config`` file; ``source`` says where a config taken
        from the log came from), ``num_layers`` (the same number as ``layers``, under explain's
        name: explain's ``layers`` is the per-layer list) and ``layer_map`` (per layer, expected
        vs logged, and the ranks whose log differs there)."""
        from .verify_render import layer_map_json

        from .checks import question

        findings = []
        for f in self.findings:
            item = f.to_json()
            item["question"] = question(f.code)
            findings.append(item)
        return {"verdict": self.verdict, "ranks": list(self.ranks), "layers": self.layers,
                "findings": findings,
                "counts": self.counts(), "num_layers": self.layers,
                "config": dict(_config_json(self.config_source),
                               **({"note": self.config_note} if self.config_note else {})),
                "layer_map": layer_map_json(self),
                "run_verdict": self.run_verdict, "config_verdict": self.config_verdict,
                "verified_ranks": list(self.verified_ranks), "run_counts": dict(self.run_counts),
                "config_counts": dict(self.config_counts)}


def _counts(findings: Iterable[Finding]) -> Dict[str, int]:
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
    from .checks import question

    result.verified_ranks = sorted(set(verified))
    run = [f for f in result.findings if question(f.code) == "run"]
    cfg = [f for f in result.findings if question(f.code) != "run"]
    result.run_counts, result.config_counts = _counts(run), _counts(cfg)
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


def verified_ranks(runlog: Any, comparison: Optional[Comparison]) -> List[int]:
    """Ranks whose log speaks for what MindFormers applied: a rank with strategy lines, or, when
    the config makes MindFormers log no strategy line at all (or the comparison was skipped:
    SW109), a rank whose log holds MindFormers output (``checks.sw106_incomplete_log``). A rank
    without any MindFormers line (STDOUT_DEVICES, not a MindFormers log) is never verified."""
    from .checks.sw106_incomplete_log import expects_lines, printed_mindformers

    expects = comparison is not None and expects_lines(comparison)
    out = []
    for rank, rank_log in runlog.ranks.items():
        diff = comparison.ranks.get(rank) if comparison is not None else None
        if (diff is not None and diff.has_strategy_lines) or (not expects and printed_mindformers(rank_log)):
            out.append(rank)
    return out


def _config_json(source: str) -> Dict[str, Any]:
    """``{"path", "sha256", "source"}``: path and hash when the config is a file (``--config``),
    both null when it was rebuilt from the log (``source`` then names the log line)."""
    import hashlib

    if source and os.path.isfile(source):
        with open(source, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        return {"path": source, "sha256": digest, "source": source}
    return {"path": None, "sha256": None, "source": source or None}


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

    from .parsers import read_logs

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


def verify_read(runlog: Any, config_path: Optional[str] = None) -> VerifyResult:
    """:func:`verify` of a run already read (``plot strategy`` reads the comparison verify
    decides with from it, so the plot and the verdict never disagree)."""
    return _verify_read(runlog, config_path, set(), False, None, None)


#: ``VerifyResult.config_note`` when ``verify RUN_DIR`` took the run's own YAML
RUN_DIR_NOTE = "the run's own config as launched, named in run.json; --config to use another"


def run_dir_config(paths: Sequence[str]) -> Optional[str]:
    """The config of a ``swapwatch run --config`` run: ``verify RUN_DIR`` without ``--config``
    uses the YAML as launched, which the run directory keeps (``config.yaml``, DESIGN §3.3b) and
    ``run.json`` names; None for anything else (one path only: several run dirs may differ)."""
    import json

    if len(paths) != 1 or not os.path.isdir(paths[0]):
        return None
    run_json = os.path.join(paths[0], "run.json")
    try:
        with open(run_json, encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, ValueError):
        return None             # not a run dir (or a broken run.json: parsers.inputs says so)
    cfg = info.get("config") if isinstance(info, dict) else None
    if not isinstance(cfg, dict) or not cfg.get("path"):
        return None             # a run without --config: the log's own config, as before
    copy = os.path.join(paths[0], str(cfg.get("copy") or "config.yaml"))
    return copy if os.path.isfile(copy) else None


def _verify_read(runlog: Any, config_path: Optional[str], skip: set, strict: bool,
                 env: Optional[Mapping[str, str]], ir_dir: Optional[str]) -> VerifyResult:
    """:func:`verify` once the logs are read."""
    from .config import config_from_log, load_config
    from .strategy import plan as make_plan

    pynative = _pynative_verify(runlog, config_path, skip, strict, env)
    if pynative is not None:
        return pynative
    if config_path:
        config = load_config(config_path)
        source = str(config_path)
    else:
        from .checks.sw106_incomplete_log import printed_mindformers

        if not any(printed_mindformers(rl) for rl in runlog.ranks.values()):
            files = [f for rl in runlog.ranks.values() for f in rl.files][:3]
            raise InputError("no MindFormers line at all in these logs (no config, no strategy, no step): "
                             "nothing to verify (is this a worker log of a MindFormers job?); with --config "
                             "the verdict is NOT VERIFIED", file=", ".join(files) or None)
        config, source = config_from_log(runlog)
    ir = read_ir(ir_dir) if ir_dir else None
    # without --config the log's own config is the reference: SW107 would compare it with itself
    return evaluate(make_plan(config), runlog, config=config, env=merged_env(runlog, env),
                    ignore=skip, strict=strict, ir=ir, config_source=source,
                    skip_codes=() if config_path else ("SW107", "SW109"))


def _import_for_checks() -> None:
    """What verify needs once the logs are read (the rules, the config reader and its YAML
    library, the renderers), imported while the workers scan instead of before they start."""
    from . import compare, config, strategy, verify_render  # noqa: F401
    from .checks import _load_all

    _load_all()


def evaluate(plan: Any, runlog: Any, config: Any = None, env: Optional[Mapping[str, str]] = None,
             ignore: Iterable[str] = (), strict: bool = False, ir: Any = None,
             config_source: str = "", skip_codes: Iterable[str] = ()) -> VerifyResult:
    """Run every rule on an already built Plan and RunLog (the core of :func:`verify`).

    The plan-vs-log comparison is made here, once (one pass per group of ranks that logged the
    same strategy), and shared: the rules read it from the context, the result keeps it."""
    from .compare import compare

    skip = normalise_codes(ignore) | set(skip_codes)
    comp = compare(plan, runlog) if comparable(plan) else None
    ctx = CheckContext(plan=plan, config=config, env=dict(env or {}), runlog=runlog, ir=ir,
                       comparison=comp)
    needs = ["config", "run"] + (["ir"] if ir is not None else [])
    findings = run_rules(ctx, needs=needs, ignore=skip)
    findings = _dedupe(findings, skip)
    findings = one_cause(findings)
    findings.sort(key=_sort_key)
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
    from .checks import _load_all

    _load_all()
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


def merged_env(runlog: Any, env: Optional[Mapping[str, str]]) -> Dict[str, str]:
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
    from .parsers.ir import read_ir as read_ir_dir

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
    from .checks.sw109_not_this_config import CASCADE

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


def _sort_key(f: Finding):
    return (severity_rank(f.severity), f.code,
            -1 if f.rank is None else f.rank, -1 if f.layer is None else f.layer, f.op or "")


def _pynative_verify(runlog: Any, config_path: Optional[str], skip: set, strict: bool,
                     env: Optional[Mapping[str, str]]) -> Any:
    """A PyNative (r2.x) config or log goes to :mod:`swapwatch.pynative.verify`; None for the static paths."""
    from .config import read_yaml
    from .pynative import config as pconfig

    if config_path:
        try:
            data, lines = read_yaml(config_path)
        except InputError:
            return None             # the static path's load_config reports it (and recognises worker logs)
        if pconfig.detect_path(data) != "pynative":
            return None
        from .pynative.explain import explain_tree
        from .pynative.verify import verify_pynative

        ex = explain_tree(data, lines, str(config_path))
        return verify_pynative(ex, runlog, str(config_path), ignore=skip, strict=strict,
                               env=merged_env(runlog, env))
    pyn = ("pyn_map_start", "world_size", "pyn_config_error")      # NoticeEvents (parsers/pynative.py)
    if any(r.notices(what).n for r in runlog.ranks.values() for what in pyn):
        raise InputError("this is a PyNative (r2.x) run: its log does not print the recompute/swap sections; "
                         "pass the training YAML with --config")
    return None
