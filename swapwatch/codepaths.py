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

from typing import TYPE_CHECKING, Any, Optional, Sequence

from .config.document import TrainingDocument
from .errors import NotModelled

if TYPE_CHECKING:
    from .memory.dryrun import DryRunResult
    from .memory.model import Calibration, Estimate
    from .memory.planner import PlanResult

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

    def size(self, doc: TrainingDocument, command: str, model: Optional[str] = None, *,
             calibrate: Sequence[str] = (), calibration: Optional["Calibration"] = None,
             link: Any = None) -> "Estimate":
        """The memory estimate of ``doc`` (``model``: the ``--model`` family): fitted to the runs / DryRun
        records ``calibrate`` names, or with an already fitted ``calibration``; its swaps priced with ``link``
        (``memory.swap_cost.Link``). NotModelled (exit 2) for what the path or the family does not model,
        said by ``command``."""
        self.require(doc, command, "size", *(["calibrate"] if calibrate or calibration is not None else []))
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
        from .memory.planner import make_plan

        try:
            return make_plan(doc.path, budget, run_dirs, allow_swap=allow_swap, model=model, margin=margin,
                             calibration=calibration, offsets=offsets, link=link)
        except NotModelled as exc:
            raise exc.for_command(command) from None

    def dryrun(self, doc: TrainingDocument, command: str, stages: Optional[Sequence[int]] = None) -> "DryRunResult":
        """MindSpore DryRun of ``doc`` (one simulated rank per stage); InputError when it cannot run here."""
        self.require(doc, command, "dryrun")
        from .errors import InputError
        from .memory import dryrun as dr

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
        from .memory.calibrate import calibrate as fit

        return fit(list(run_dirs), model)[0]

    def probe_text(self, doc: TrainingDocument, text: str, model: Optional[str], fraction: float) -> Optional[str]:
        """Tune's probe YAML written by the path itself; None: tune writes it with ``memory.emit``."""
        return None

    def stages_and_device(self, doc: TrainingDocument, model: Optional[str]) -> "tuple[int, str]":
        """(pipeline stages, ``context.device_target``; Ascend when the YAML does not say)."""
        from .memory.model import plan_of

        cfg, plan, _ = plan_of(doc.path, model)
        return plan.geometry.pipeline_stage, str((cfg.context or {}).get("device_target", "Ascend"))

    def dryrun_missing(self) -> Optional[str]:
        """None when this path's DryRun can run here, else the one-line reason."""
        from .memory import dryrun as dr

        return dr.available()


#: the command-line flag a need comes from, named in the refusal (``estimate --calibrate``)
_FLAG = {"calibrate": " --calibrate", "dryrun": " --dryrun"}


class LayerSetting(CodePath):
    """The static-graph path (``LayerSetting``: legacy, or mcore with ``use_legacy: False``): ``strategy.py``
    makes its plan, ``memory/`` sizes, calibrates and plans it."""

    models = NEEDS

    def __init__(self, mcore: bool) -> None:
        self.mcore = mcore
        self.name = "static graph, mcore (use_legacy: False)" if mcore else \
            "static graph, legacy (recompute_config / swap_config)"

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        if calibrate:
            from .memory.calibrate import calibrated_estimate

            return calibrated_estimate(doc.path, calibrate, model, link)
        from .memory.model import NO_CALIBRATION, estimate

        return estimate(doc.path, model, calibration if calibration is not None else NO_CALIBRATION, link=link)


class ApplyAc(CodePath):
    """The r2.x PyNative trainer's ``apply_ac``: ``pynative/`` makes its plan, ``pynative/sizing.py`` sizes it
    (uncalibrated, checked against PyNative DryRun of MindFormers' Trainer: ``pynative/dryrun.py``),
    ``pynative/planning.py`` plans it under a budget and writes its ``recompute:`` block."""

    name = "PyNative (r2.x: recompute / recompute_comm / swap, applied by apply_ac)"
    models = ("size", "dryrun", "fit")

    def not_modelled(self, doc: TrainingDocument, need: str) -> NotModelled:
        from .pynative.config import PYNATIVE_SECTIONS, TRAINCONFIG_ONLY

        key = next((k for k in (*PYNATIVE_SECTIONS, *TRAINCONFIG_ONLY) if k in doc.mapping), None)
        hint = {"calibrate": "its figure is checked against PyNative DryRun instead; docs/estimate.md, The "
                              "PyNative path",
                "swap": "plan keeps the YAML's swap: block as it is"}.get(need, "docs/estimate.md, The PyNative path")
        return NotModelled("the PyNative (r2.x) path", hint, file=doc.path,
                           line=doc.lines.get(key) if key else None, key=key)

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        from .pynative.sizing import estimate_pynative

        return estimate_pynative(doc.path, model, calibration)

    def size(self, doc: TrainingDocument, command: str, model: Optional[str] = None, *,
             calibrate: Sequence[str] = (), calibration: Optional["Calibration"] = None,
             link: Any = None) -> "Estimate":
        """As :meth:`CodePath.size`; ``calibration`` may be tune's launch offset (a residual only:
        ``tune/memory_api.py``), which is not ``--calibrate``; ``link`` prices nothing here (the
        PyNative swap's schedule is not graph mode's: ``memory/swap_cost.py`` does not model it)."""
        self.require(doc, command, "size", *(["calibrate"] if calibrate else []))
        try:
            return self._size(doc, model, calibrate, calibration)
        except NotModelled as exc:
            raise exc.for_command(command) from None

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
            from .errors import InputError

            raise InputError(f"{command} on the PyNative path needs --budget (its YAML has no "
                             "context.max_device_memory to default to)", file=doc.path)
        from .pynative.planning import plan_pynative

        offset = int(round(getattr(calibration, "residual", 0.0) or 0.0))
        try:
            return plan_pynative(doc.path, budget, margin, model, offset)  # type: ignore[return-value]
        except NotModelled as exc:
            raise exc.for_command(command) from None

    def dryrun(self, doc: TrainingDocument, command: str, stages: Optional[Sequence[int]] = None) -> "DryRunResult":
        """PyNative DryRun of MindFormers' Trainer (``pynative/dryrun.py``): one simulated rank, as stage 0;
        a YAML that shards across ranks is refused at that key, InputError when it cannot run here."""
        self.require(doc, command, "dryrun")
        from .errors import InputError
        from .memory.dryrun import DryRunResult, StagePeak
        from .pynative import dryrun as pyn

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
        from .pynative import dryrun as pyn

        return pyn.available()

    def tune_calibration(self, doc: TrainingDocument, run_dirs: Sequence[str], model: Optional[str]) -> Any:
        """No calibration on this path: only the bytes the launch adds to every run
        (``pynative/planning.py:launch_offset``), which plan leaves room for."""
        from .pynative.planning import launch_offset

        return launch_offset(run_dirs, model)

    def probe_text(self, doc: TrainingDocument, text: str, model: Optional[str], fraction: float) -> Optional[str]:
        from .pynative.planning import probe_text

        return probe_text(doc.path, text, fraction)

    def stages_and_device(self, doc: TrainingDocument, model: Optional[str]) -> "tuple[int, str]":
        from .pynative.config import load

        ctx = doc.mapping.get("context")
        device = (ctx if isinstance(ctx, dict) else {}).get("device_target", "Ascend")
        return load(doc.path).pipeline_parallel, str(device)


def of(doc: TrainingDocument) -> CodePath:
    """The code path ``doc`` goes to (``pynative.config.detect_path``: a top-level ``recompute`` /
    ``recompute_comm`` / ``swap`` section, or a TrainConfig-only one without ``model.model_config``, is the
    PyNative trainer's; else ``use_legacy: False`` is mcore)."""
    from .pynative.config import detect_path

    found = detect_path(doc.data)
    if found == "pynative":
        return ApplyAc()
    return LayerSetting(mcore=found == "mcore")


def read(path: str) -> "tuple[TrainingDocument, CodePath]":
    """The document at ``path`` and its code path: what a command that takes a YAML does first."""
    doc = TrainingDocument.read(path)
    return doc, of(doc)
