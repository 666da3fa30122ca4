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

    def fit(self, doc: TrainingDocument, command: str, budget: int, *, run_dirs: Sequence[str] = (),
            allow_swap: bool = False, model: Optional[str] = None, margin: Optional[float] = 0.0,
            calibration: Optional["Calibration"] = None, link: Any = None) -> "PlanResult":
        """``plan``'s answer for ``budget`` bytes (``memory.planner.make_plan``; ``link``: what swaps are
        priced with)."""
        self.require(doc, command, "fit")
        from .memory.planner import make_plan

        try:
            return make_plan(doc.path, budget, run_dirs, allow_swap=allow_swap, model=model, margin=margin,
                             calibration=calibration, link=link)
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
    (uncalibrated; no DryRun: DryRun compiles graphs); nothing plans it under a budget yet."""

    name = "PyNative (r2.x: recompute / recompute_comm / swap, applied by apply_ac)"
    models = ("size",)

    def not_modelled(self, doc: TrainingDocument, need: str) -> NotModelled:
        from .pynative.config import PYNATIVE_SECTIONS, TRAINCONFIG_ONLY

        key = next((k for k in (*PYNATIVE_SECTIONS, *TRAINCONFIG_ONLY) if k in doc.mapping), None)
        hint = (f"`swapwatch explain {doc.path}` shows its per-layer strategy" if need == "fit" else
                "DryRun compiles graphs; docs/estimate.md, The PyNative path")
        return NotModelled("the PyNative (r2.x) path", hint, file=doc.path,
                           line=doc.lines.get(key) if key else None, key=key)

    def _size(self, doc: TrainingDocument, model: Optional[str], calibrate: Sequence[str],
              calibration: Optional["Calibration"], link: Any = None) -> "Estimate":
        from .pynative.sizing import estimate_pynative

        return estimate_pynative(doc.path, model)


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
