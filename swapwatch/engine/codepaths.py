"""The one dispatch on MindFormers' code path: a :class:`TrainingDocument` -> its :class:`CodePath`.

MindFormers 2.1.0 applies the memory levers on two kinds of code (DESIGN §1.2): the static-graph
``LayerSetting`` (legacy, and mcore with ``use_legacy: False``) and the r2.x PyNative trainer's ``apply_ac``
(``mindformers/pynative/distributed/activation_checkpoint.py:apply_ac``). :func:`of` is the only place that asks
which one a YAML goes to (``pynative.config.detect_path``); a command asks the object it returns for what it
needs (``size``, ``fit``, ``require``) and never which path it is on. What a path does not model is a
:class:`~swapwatch.errors.NotModelled`, raised here (a path) or by the memory model (a family) and said in one
line naming the command, the same for every command.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Tuple

from ..config.document import TrainingDocument
from ..errors import InputError, NotModelled

if TYPE_CHECKING:
    from .compare import Comparison, ExpectedLog, LogReader
    from ..config import TrainingConfig
    from ..memory.dryrun import DryRunResult
    from ..memory.model import Calibration, Estimate
    from ..memory.planner import PlanResult
    from ..parsers.model import RunLog
    from ..model.plan import Plan
    from ..pynative.config import PynativeConfig
    from ..pynative.resolve import PynativePlan
    from ..model.plan_view import Config, PlanView
    from ..model.results import Explanation

#: what a command may need of a path beyond its plan: ``size`` (a memory estimate), ``calibrate`` (fitted to
#: measured runs), ``dryrun`` (MindSpore DryRun as the oracle), ``fit`` (a strategy searched under a budget and
#: written back: ``plan``, ``tune``)
NEEDS = ("size", "calibrate", "dryrun", "fit")


class CodePath:
    """One MindFormers code path, as the commands see it. Subclasses say what they model (:attr:`models`)."""

    #: the path's name in a command's words (``explain``'s header, a refusal)
    name: str = ""
    #: of :data:`NEEDS`, what this path models
    models: Sequence[str] = ()

    def require(self, doc: TrainingDocument, command: str, *needs: str) -> None:
        """Raise :class:`NotModelled` (``command`` named, with the flag the need comes from) unless this path
        models every one of ``needs``."""
        for need in needs:
            assert need in NEEDS, need
            if need not in self.models:
                raise self.not_modelled(doc, need).for_command(command + _FLAG.get(need, ""))

    def not_modelled(self, doc: TrainingDocument, need: str) -> NotModelled:
        raise NotImplementedError

    # ---- the plan and its log ------------------------------------------------------------------

    def explain(self, doc: TrainingDocument, *, num_layers: Optional[int] = None,
                pipeline_stage: Optional[int] = None, pp_interleave_num: Optional[int] = None,
                offset: Any = None, env: Optional[Mapping[str, str]] = None,
                model: Optional[str] = None, link: Any = None) -> "Explanation":
        """``explain`` of ``doc``: its plan and the config-time findings (``model``: the ``--model`` family;
        ``link``: the host link SW212 times a swap's copies with; the rest override a fragment's keys). Bad
        input: one line, exit 2."""
        raise NotImplementedError

    def configure(self, doc: TrainingDocument) -> Tuple["Config", "PlanView"]:
        """``(config, plan)`` of ``doc`` as ``verify --config`` takes it (bad input: one line, exit 2)."""
        raise NotImplementedError

    def expected_log(self, plan: "PlanView") -> "ExpectedLog":
        """What ``plan`` makes MindFormers log on this path (``compare.ExpectedLog``)."""
        raise NotImplementedError

    @property
    def logged(self) -> "LogReader":
        """How this path's log reads back (``compare.LogReader``)."""
        raise NotImplementedError

    def from_log(self, runlog: "RunLog") -> Tuple["Config", "PlanView", str]:
        """``(config, plan, where the config came from)`` rebuilt from the run's own log, for ``verify`` without
        ``--config``."""
        raise NotImplementedError

    def example(self, doc: TrainingDocument, log: Any) -> Any:
        """What the example trainer (``swapwatch/examples/train.py``) runs of ``doc`` on the tiny Llama: an object
        with ``mode`` (the MindSpore execution mode the path's trainer runs in, None: as asked), ``num_layers``,
        ``sha256`` and ``apply(layers, rank, quirks, log)``."""
        raise NotImplementedError

    def example_sizes(self, doc: TrainingDocument) -> Tuple[Any, Any]:
        """``(tree, lines)`` of ``doc`` under the names the example trainer reads its sizes by."""
        return doc.mapping, doc.lines

    def launch_config(self, doc: TrainingDocument) -> Optional["TrainingConfig"]:
        """The config ``run``'s strategy environment follows (None where the path needs none)."""
        raise NotImplementedError

    def compare(self, plan: "PlanView", runlog: "RunLog") -> "Comparison":
        """The one plan-vs-log comparison: what ``plan`` makes this path log against each rank's log as this path
        reads it (``compare.compare``)."""
        from .compare import compare

        return compare(self.expected_log(plan), runlog, self.logged)

    def size(self, doc: TrainingDocument, command: str, model: Optional[str] = None, *,
             calibrate: Sequence[str] = (), calibration: Optional["Calibration"] = None,
             link: Any = None) -> "Estimate":
        """The memory estimate of ``doc`` (``model``: the ``--model`` family): fitted to the runs / DryRun
        records ``calibrate`` names, or with an already fitted ``calibration``; its swaps priced with ``link``
        (``memory.swap_cost.Link``). NotModelled (exit 2) for what the path or the family does not model,
        said by ``command``. An already fitted ``calibration`` is not ``--calibrate``: on the PyNative path it
        is tune's launch offset, a residual only (``tune/memory_api.py``)."""
        self.require(doc, command, "size", *(["calibrate"] if calibrate else []))
        try:
            return self._size(doc, model, calibrate, calibration, link)
        except NotModelled as exc:
            raise exc.for_command(command) from None

    def fit(self, doc: TrainingDocument, command: str, budget: Optional[int], *, run_dirs: Sequence[str] = (),
            allow_swap: bool = False, model: Optional[str] = None, margin: Optional[float] = 0.0,
            calibration: Optional["Calibration"] = None, offsets: bool = False,
            link: Any = None) -> "PlanResult":
        """``plan``'s answer for ``budget`` bytes (``memory.planner.make_plan``; None: the YAML's
        ``context.max_device_memory``; ``offsets``: the layer split searched too; ``link``: what swaps
        are priced with)."""
        self.require(doc, command, "fit")
        from ..memory.planner import make_plan

        try:
            return make_plan(doc.path, budget, run_dirs, allow_swap=allow_swap, model=model, margin=margin,
                             calibration=calibration, offsets=offsets, link=link)
        except NotModelled as exc:
            raise exc.for_command(command) from None

    def dryrun(self, doc: TrainingDocument, command: str, stages: Optional[Sequence[int]] = None) -> "DryRunResult":
        """MindSpore DryRun of ``doc`` (one simulated rank per stage); InputError when it cannot run here."""
        self.require(doc, command, "dryrun")
        from ..errors import InputError
        from ..memory import dryrun as dr

        reason = dr.available()
        if reason:
            raise InputError(f"--dryrun: DryRun is not available here: {reason}")
        return dr.measure(doc.path, stages)

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        raise NotImplementedError

    # -- what ``tune`` asks (tune/memory_api.py) ---------------------------------------------------------

    def tune_calibration(self, doc: TrainingDocument, run_dirs: Sequence[str], model: Optional[str]) -> Any:
        """What tune fits to its probes' run directories: the calibration of ``memory/calibrate.py``."""
        from ..memory.calibrate import calibrate as fit

        return fit(list(run_dirs), model)[0]

    def probe_text(self, doc: TrainingDocument, text: str, model: Optional[str], fraction: float) -> str:
        """Tune's probe YAML: full recompute on the first ``fraction`` of each stage chunk's layers
        (``memory.emit.uniform_probe``: the strategy keys spliced as ``plan`` writes them)."""
        from ..memory.emit import uniform_probe

        return uniform_probe(text, doc.path, model, fraction)

    def level_step(self, doc: TrainingDocument, model: Optional[str]) -> Optional[int]:
        """The smallest per-layer memory step between the path's levels (tune's bisection resolution);
        None when the path prices no levels."""
        from ..memory.search import smallest_level_step

        return smallest_level_step(doc.path, model)

    def stages_and_device(self, doc: TrainingDocument, model: Optional[str]) -> "tuple[int, str]":
        """(pipeline stages, ``context.device_target``; Ascend when the YAML does not say)."""
        from ..memory.model import plan_of

        cfg, plan, _ = plan_of(doc.path, model)
        return plan.geometry.pipeline_stage, str((cfg.context or {}).get("device_target", "Ascend"))

    def dryrun_missing(self) -> Optional[str]:
        """None when this path's DryRun can run here, else the one-line reason."""
        from ..memory import dryrun as dr

        return dr.available()


#: the command-line flag a need comes from, named in the refusal (``estimate --calibrate``)
_FLAG = {"calibrate": " --calibrate", "dryrun": " --dryrun"}


class LayerSetting(CodePath):
    """The static-graph path (``LayerSetting``: legacy, or mcore with ``use_legacy: False``): ``strategy.py``
    makes its plan, ``memory/`` sizes, calibrates and plans it."""

    models = NEEDS

    def __init__(self, mcore: Optional[bool] = None) -> None:
        self.mcore = mcore
        self.name = "static graph, mcore (use_legacy: False)" if mcore else \
            "static graph, legacy (recompute_config / swap_config)"

    def configure(self, doc: TrainingDocument) -> Tuple["TrainingConfig", "Plan"]:
        from ..config import load_config
        from .strategy import plan

        config = load_config(doc.path)
        return config, plan(config)

    def explain(self, doc: TrainingDocument, *, num_layers: Optional[int] = None,
                pipeline_stage: Optional[int] = None, pp_interleave_num: Optional[int] = None,
                offset: Any = None, env: Optional[Mapping[str, str]] = None,
                model: Optional[str] = None, link: Any = None) -> "Explanation":
        """The family comes from the YAML (``families.detect``) unless ``model`` names one; each layer is
        resolved on its own tree of that family (``strategy.plan``)."""
        from . import strategy
        from ..checks import CheckContext, run_rules
        from ..config import load_config
        from ..model.families import check_code_path, from_name
        from ..model.results import Explanation
        from ..model.run_shape import config_shape
        from ..text import severity_rank

        if model is not None:
            from_name(model)                  # an unknown --model is bad input before anything else
        config = load_config(doc.path, num_layers=num_layers, pipeline_stage=pipeline_stage,
                             pp_interleave_num=pp_interleave_num, offset=offset)
        if model is not None:
            check_code_path(from_name(model), config.mcore)
        plan = strategy.plan(config, model=model)
        ctx = CheckContext(plan=plan, config=config, env=dict(env or {}), link=link)
        findings = sorted(run_rules(ctx, needs=("config",)),
                          key=lambda f: (severity_rank(f.severity), f.code, -1 if f.layer is None else f.layer))
        notes = []
        if plan.swap and plan.geometry.pipeline_stage <= 1 and not env:
            # SW302 depends on the launch environment, which explain cannot see without --env
            notes.append("not checked (needs --env): SW302, the launch needs ENABLE_LAZY_INLINE_NO_PIPELINE=1 "
                         "for swap without pipeline parallel (`swapwatch run` sets it)")
        return Explanation(config, plan, findings, dict(env or {}), header=strategy.describe(plan, config),
                           notes=notes, log_lines=strategy.layer_setting_lines(plan), shape=config_shape(config))

    def expected_log(self, plan: "PlanView") -> "ExpectedLog":
        from ..model.plan import Plan
        from .compare import expected_log

        assert isinstance(plan, Plan), plan          # this path's own plan (for_plan / configure made it)
        return expected_log(plan)

    @property
    def logged(self) -> "LogReader":
        from .compare import LAYER_SETTING_LOG

        return LAYER_SETTING_LOG

    def example(self, doc: TrainingDocument, log: Any) -> Any:
        from ..hooks.apply import Example

        return Example(doc.path, log)

    def launch_config(self, doc: TrainingDocument) -> Optional["TrainingConfig"]:
        """The config ``run``'s strategy environment follows (``cfg.swap``, ``cfg.pipeline_stage``: SW302), None
        when swapwatch rejects its values (preflight reports them)."""
        from ..config import load_config

        try:
            return load_config(doc.path)
        except InputError:
            return None

    def from_log(self, runlog: "RunLog") -> Tuple["TrainingConfig", "Plan", str]:
        """MindFormers' own copy of the YAML: its ``initial ... from dict`` lines and the logged geometry."""
        from .compare import printed_mindformers
        from ..config import config_from_log

        if not any(printed_mindformers(rl) for rl in runlog.ranks.values()):
            from ..parsers.inputs import silence

            files = [f for rl in runlog.ranks.values() for f in rl.files][:3]
            raise InputError(f"{silence(files)}; with --config the verdict is NOT VERIFIED",
                             file=", ".join(files) or None)
        from .strategy import plan

        config, source = config_from_log(runlog)
        return config, plan(config), source

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        if calibrate:
            from ..memory.calibrate import calibrated_estimate

            return calibrated_estimate(doc.path, calibrate, model, link)
        from ..memory.model import NO_CALIBRATION, estimate

        return estimate(doc.path, model, calibration if calibration is not None else NO_CALIBRATION, link=link)


class ApplyAc(CodePath):
    """The r2.x PyNative trainer's ``apply_ac``: ``pynative/`` makes its plan, ``pynative/sizing.py`` sizes it
    (uncalibrated, checked against PyNative DryRun of MindFormers' Trainer: ``pynative/dryrun.py``),
    ``pynative/planning.py`` plans it under a budget and writes its ``recompute:`` block."""

    name = "PyNative (r2.x: recompute / recompute_comm / swap, applied by apply_ac)"
    models = ("size", "dryrun", "fit")

    def not_modelled(self, doc: TrainingDocument, need: str) -> NotModelled:
        from ..pynative.config import PYNATIVE_SECTIONS, TRAINCONFIG_ONLY

        key = next((k for k in (*PYNATIVE_SECTIONS, *TRAINCONFIG_ONLY) if k in doc.mapping), None)
        hint = {"calibrate": "its figure is checked against PyNative DryRun instead; docs/estimate.md, The "
                              "PyNative path",
                "swap": "plan keeps the YAML's swap: block as it is"}.get(need, "docs/estimate.md, The PyNative path")
        return NotModelled("the PyNative (r2.x) path", hint, file=doc.path,
                           line=doc.lines.get(key) if key else None, key=key)

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        """``link`` prices nothing here (the PyNative swap's schedule is not graph mode's:
        ``memory/swap_cost.py`` does not model it); ``calibration`` is tune's launch offset."""
        from ..pynative.sizing import estimate_pynative

        return estimate_pynative(doc.path, model, calibration)

    def fit(self, doc: TrainingDocument, command: str, budget: Optional[int], *, run_dirs: Sequence[str] = (),
            allow_swap: bool = False, model: Optional[str] = None, margin: Optional[float] = 0.0,
            calibration: Optional["Calibration"] = None, offsets: bool = False,
            link: Any = None) -> "PlanResult":
        """``plan`` on the PyNative path (``pynative/planning.py``): no ``--calibrate`` and no
        ``--allow-swap`` (the YAML's ``swap:`` is kept as it is, so ``link`` prices nothing here);
        tune's launch offset as ``calibration``. One stage, so no layer split to search (``offsets`` has
        nothing to move); the r2.x YAML has no ``context.max_device_memory``, so the budget is
        ``--budget``'s."""
        self.require(doc, command, "fit", *(["calibrate"] if run_dirs else []))
        if allow_swap:
            raise self.not_modelled(doc, "swap").for_command(command + " --allow-swap")
        if budget is None:
            raise InputError(f"{command} on the PyNative path needs --budget (its YAML has no "
                             "context.max_device_memory to default to)", file=doc.path)
        from ..pynative.planning import plan_pynative

        offset = int(round(getattr(calibration, "residual", 0.0) or 0.0))
        try:
            return plan_pynative(doc.path, budget, margin, model, offset)  # type: ignore[return-value]
        except NotModelled as exc:
            raise exc.for_command(command) from None

    def dryrun(self, doc: TrainingDocument, command: str, stages: Optional[Sequence[int]] = None) -> "DryRunResult":
        """PyNative DryRun of MindFormers' Trainer (``pynative/dryrun.py``): one simulated rank, as stage 0;
        a YAML that shards across ranks is refused at that key, InputError when it cannot run here."""
        self.require(doc, command, "dryrun")
        from ..memory.dryrun import DryRunResult, StagePeak
        from ..pynative import dryrun as pyn

        if stages and list(stages) != [0]:
            raise InputError("--dryrun-stage: the PyNative DryRun is one rank of one stage (0)", file=doc.path)
        pyn.one_rank_refusal(doc.mapping, doc.lines, doc.path)
        reason = pyn.available()
        if reason:
            raise InputError(f"--dryrun: PyNative DryRun is not available here: {reason}")
        res = pyn.measure(doc.path)
        out = DryRunResult(config=doc.path, rank_size=1)
        out.stages[0] = StagePeak(stage=0, rank_id=0, used_bytes=res.used_bytes, actual_bytes=res.actual_bytes,
                                  seconds=res.seconds, log_path=res.log_path)
        return out

    def dryrun_missing(self) -> Optional[str]:
        from ..pynative import dryrun as pyn

        return pyn.available()

    def tune_calibration(self, doc: TrainingDocument, run_dirs: Sequence[str], model: Optional[str]) -> Any:
        """No calibration on this path: only the bytes the launch adds to every run
        (``pynative/planning.py:launch_offset``), which plan leaves room for."""
        from ..pynative.planning import launch_offset

        return launch_offset(run_dirs, model)

    def probe_text(self, doc: TrainingDocument, text: str, model: Optional[str], fraction: float) -> str:
        """Written by ``pynative/planning.py``: only the ``recompute:`` block."""
        from ..pynative.planning import probe_text

        return probe_text(doc.path, text, fraction)

    def level_step(self, doc: TrainingDocument, model: Optional[str]) -> Optional[int]:
        """None: the PyNative plan searches its own options (``pynative/planning.py``), no static levels."""
        return None

    def stages_and_device(self, doc: TrainingDocument, model: Optional[str]) -> "tuple[int, str]":
        from ..pynative.config import load

        ctx = doc.mapping.get("context")
        device = (ctx if isinstance(ctx, dict) else {}).get("device_target", "Ascend")
        return load(doc.path).pipeline_parallel, str(device)

    def configure(self, doc: TrainingDocument) -> Tuple["PynativeConfig", "PynativePlan"]:
        from ..pynative.resolve import plan_tree

        return plan_tree(doc.data, doc.lines, doc.path)

    def explain(self, doc: TrainingDocument, *, num_layers: Optional[int] = None,
                pipeline_stage: Optional[int] = None, pp_interleave_num: Optional[int] = None,
                offset: Any = None, env: Optional[Mapping[str, str]] = None,
                model: Optional[str] = None, link: Any = None) -> "Explanation":
        """The model paths come from ``model.model_type`` unless ``model`` names them (the stage split is
        ``parallelism``'s: the static overrides do not apply)."""
        from ..pynative.explain import explain_tree

        return explain_tree(doc.data, doc.lines, doc.path, num_layers=num_layers, family=model)

    def expected_log(self, plan: "PlanView") -> "ExpectedLog":
        from ..pynative.logged import expected_log
        from ..pynative.resolve import PynativePlan

        assert isinstance(plan, PynativePlan), plan   # this path's own plan (for_plan / configure made it)
        return expected_log(plan)

    @property
    def logged(self) -> "LogReader":
        from ..pynative.logged import APPLY_AC_LOG

        return APPLY_AC_LOG

    def example(self, doc: TrainingDocument, log: Any) -> Any:
        from ..pynative.example import Example

        return Example(doc.path)

    def example_sizes(self, doc: TrainingDocument) -> Tuple[Any, Any]:
        from ..pynative.example import sizes_view

        return sizes_view(doc.mapping, doc.lines)

    def launch_config(self, doc: TrainingDocument) -> Optional["TrainingConfig"]:
        """None: the r2.x trainer needs none of the LayerSetting strategy environment."""
        return None

    def from_log(self, runlog: "RunLog") -> Tuple["PynativeConfig", "PynativePlan", str]:
        raise InputError("this is a PyNative (r2.x) run: its log does not print the recompute/swap sections; "
                         "pass the training YAML with --config")


def of(doc: TrainingDocument) -> CodePath:
    """The code path ``doc`` goes to (``pynative.config.detect_path``: a top-level ``recompute`` /
    ``recompute_comm`` / ``swap`` section, or a TrainConfig-only one without ``model.model_config``, is the
    PyNative trainer's; else ``use_legacy: False`` is mcore)."""
    from ..pynative.config import detect_path

    found = detect_path(doc.data)
    if found == "pynative":
        return ApplyAc()
    return LayerSetting(mcore=found == "mcore")


#: a PyNative run's own notices (``parsers/pynative.py``): the trainer's world size, a map, a refused config
_APPLY_AC_NOTICES = ("pyn_map_start", "world_size", "pyn_config_error")


def for_plan(plan: "PlanView") -> CodePath:
    """The code path that made ``plan`` (its view: ``plan_view.PlanView.view``)."""
    from ..model.plan_view import APPLY_AC

    return ApplyAc() if plan.view == APPLY_AC else LayerSetting()


def of_run(runlog: "RunLog") -> CodePath:
    """The code path whose logs ``runlog`` holds: the PyNative trainer's when a rank logged one of its own notices
    (:data:`_APPLY_AC_NOTICES`), else LayerSetting's (verify without ``--config``)."""
    if any(r.notices(what).n for r in runlog.ranks.values() for what in _APPLY_AC_NOTICES):
        return ApplyAc()
    return LayerSetting()


def mixed_pair(path_a: str, path_b: str) -> Optional[str]:
    """The one-line refusal when one YAML is PyNative and the other a LayerSetting one (``diff``); None when both
    go to the same kind of code. Asked of the documents alone, before either plan is built."""
    a, b = (of(TrainingDocument.read(p)) for p in (path_a, path_b))
    if isinstance(a, ApplyAc) == isinstance(b, ApplyAc):
        return None
    pyn, static = (path_a, path_b) if isinstance(a, ApplyAc) else (path_b, path_a)
    return (f"{pyn} is a PyNative (r2.x) config and {static} a static-graph (LayerSetting) "
            "one: apply_ac and LayerSetting apply different keys to different trees, so "
            "there is no per-layer diff; see each with `swapwatch explain`")


def read(path: str) -> "tuple[TrainingDocument, CodePath]":
    """The document at ``path`` and its code path: what a command that takes a YAML does first."""
    doc = TrainingDocument.read(path)
    return doc, of(doc)
