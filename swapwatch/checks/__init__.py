"""The rule registry: every check swapwatch can make, each with a code, a severity and a docstring.

A rule is a class with ``code`` (``SW###``, never reused for another meaning), ``severity``
(``error`` | ``warning``), a one-line ``title``, ``needs`` (``"config"`` when the config alone
decides it, ``"run"`` when it needs the run's logs, ``"ir"`` for compiled-graph evidence) and a
docstring saying what it means, why it matters and how to fix it (with YAML). Rules register
themselves with :func:`register`; ``swapwatch rules`` lists :data:`REGISTRY`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple, Type

from ..model.plan_view import LAYER_SETTING, reads

if TYPE_CHECKING:
    from ..engine.compare import Comparison
    from ..config import TrainingConfig
    from ..parsers.model import RunLog
    from ..model.plan import Plan
    from ..model.plan_view import Config, PlanView


@dataclass
class Finding:
    """One thing a rule found. Only ``code``, ``severity`` and ``message`` are always set.

    ``message`` says *what*; *where* is in the fields (``rank``, ``layer``, ``source``), never a
    ``rank N layer M:`` prefix in the text: the renderers (:mod:`swapwatch.report.finding_groups`) put
    the place in front, as one line per finding or as rank/layer ranges for a group of them.
    """

    code: str
    severity: str
    message: str
    rank: Optional[int] = None
    layer: Optional[int] = None
    op: Optional[str] = None
    expected: Any = None
    actual: Any = None
    source: Optional[str] = None      # "worker_0.log:1234" or "x.yaml:12"

    def to_json(self) -> Dict[str, Any]:
        """The fields that are set, in field order. Built directly, not with ``dataclasses.asdict``
        (which deep-copies every value: ~0.1 s per 1,000 findings, and a 1,024-rank verify has
        that many); a dataclass inside ``expected`` / ``actual`` still becomes a dict, as there."""
        out: Dict[str, Any] = {"code": self.code, "severity": self.severity, "message": self.message}
        for key in _OPTIONAL:
            value = getattr(self, key)
            if value is not None:
                out[key] = _plain(value)
        return out


#: Finding's fields that are left out of its JSON when unset, in field order.
_OPTIONAL = ("rank", "layer", "op", "expected", "actual", "source")


_SCALARS = frozenset((str, int, float, bool))


def _plain(value: Any) -> Any:
    """``value`` as ``dataclasses.asdict`` would give it inside a Finding: dataclasses as dicts,
    containers rebuilt only around them (plain values are returned as they are)."""
    if value.__class__ in _SCALARS:
        return value
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(k, _plain(v)) for k, v in value.items()]
        return value if all(v is value[k] for k, v in pairs) else type(value)(pairs)
    return value


@dataclass
class CheckContext:
    """Everything a rule may look at. ``runlog`` / ``ir`` are None for config-only checks.

    ``plan`` is a plan of either code path (``plan_view.PlanView``) and ``config`` its config; ``comparison``
    the one plan-vs-log :class:`~swapwatch.engine.compare.Comparison` every run rule reads, whichever path made it
    (``verify.evaluate`` makes it once, from the path's expected log and log reader, and keeps it for the
    report); None without logs. A rule of LayerSetting plans reads them typed (:attr:`static_plan`); which
    rules read which plans is ``Rule.views`` (``run_rules`` never gives a rule a plan it does not read).
    """

    plan: "PlanView | None"
    config: Optional["Config"] = None
    env: Dict[str, str] = field(default_factory=dict)
    runlog: Optional["RunLog"] = None
    ir: Any = None            # parsers.ir evidence
    comparison: Optional["Comparison"] = None
    #: what a swap's copies are timed with (``memory.swap_cost.Link``: ``--host-bandwidth``); None:
    #: the documented device defaults (SW212)
    link: Any = None

    @property
    def view(self) -> str:
        """The plan's view (``plan_view.VIEWS``), which ``Rule.views`` match. A context without a plan reads as
        a LayerSetting one (its rules find nothing)."""
        return LAYER_SETTING if self.plan is None else self.plan.view

    @property
    def static_plan(self) -> Optional["Plan"]:
        """The LayerSetting :class:`~swapwatch.model.plan.Plan` (legacy and mcore) a rule of that view reads, typed;
        None without a plan. ``run_rules`` never gives another plan to a rule that does not list its view
        (``Rule.views``), so one here is a bug in the rule: it raises, and the rule is reported crashed."""
        from ..model.plan import Plan

        plan = self.plan
        if plan is None or isinstance(plan, Plan):
            return plan
        raise TypeError(f"a {LAYER_SETTING} rule read a plan of the {plan.view} view (Rule.views)")

    @property
    def static_config(self) -> Optional["TrainingConfig"]:
        """The LayerSetting :class:`~swapwatch.config.TrainingConfig`, typed; None without one."""
        from ..config import TrainingConfig

        return self.config if isinstance(self.config, TrainingConfig) else None


class Rule:
    code: str = ""
    severity: str = "error"
    title: str = ""
    needs: str = "config"
    #: which question of ``verify`` its findings answer (:func:`question`); None: from ``needs``
    question: Optional[str] = None
    #: the plan views it reads (``plan_view.PlanView.view``): LayerSetting plans unless it says otherwise
    #: (``plan_view.VIEWS``: a rule of every path's plan and comparison)
    views: Tuple[str, ...] = (LAYER_SETTING,)

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        raise NotImplementedError

    def finding(self, message: str, **kw: Any) -> Finding:
        return Finding(self.code, self.severity, message, **kw)


REGISTRY: Dict[str, Rule] = {}
#: Every registered rule by code and then by ``needs``. One code may have one variant per kind of
#: evidence (SW104 is decided from the model layout at config time and from the logs at run time);
#: :data:`REGISTRY` keeps the first one registered, for listings.
VARIANTS: Dict[str, Dict[str, Rule]] = {}
#: Evidence ranks: when several variants of one code are wanted, only the best-informed one runs.
EVIDENCE = ("config", "run", "ir")


def register(cls: Type[Rule]) -> Type[Rule]:
    """Class decorator: add one instance of the rule to the registry.

    A code is unique per ``needs``: registering the same code twice for the same evidence is an
    error; a run-time variant of a config-time rule (same code and meaning) is allowed.
    """
    if cls.needs in VARIANTS.get(cls.code, {}):
        raise ValueError(f"rule code {cls.code} registered twice")
    rule = cls()
    VARIANTS.setdefault(cls.code, {})[cls.needs] = rule
    REGISTRY.setdefault(cls.code, rule)
    return cls


#: The two questions a verification answers (DESIGN §3.3): "run" — did every rank apply what
#: MindFormers does with this config? "config" — does the config do what the user meant (the
#: findings ``explain`` raises)?
QUESTIONS = ("run", "config")


def question(code: str) -> str:
    """``"run"`` or ``"config"``: the question findings of ``code`` answer. A rule says so itself
    (``Rule.question``); otherwise a code with a config-time variant is about the config (SW104
    "matched nothing" is, whether the layout or the logs tell it), every other one about the run."""
    got = _QUESTION.get(code)
    if got is None:
        load_rules()
        variants = VARIANTS.get(code) or {}
        got = next((r.question for r in variants.values() if r.question in QUESTIONS), None) or (
            "config" if "config" in variants else "run")
        _QUESTION[code] = got
    return got


#: :func:`question` per code, once (10,000 findings ask it 10,000 times)
_QUESTION: Dict[str, str] = {}


def rule_variants(code: str) -> List[Rule]:
    """Every registered variant of ``code`` (config-time first), empty when unknown."""
    load_rules()
    found = VARIANTS.get(code, {})
    return [found[n] for n in sorted(found, key=_evidence_rank)]


def _evidence_rank(needs: str) -> int:
    return EVIDENCE.index(needs) if needs in EVIDENCE else len(EVIDENCE)


def run_rules(ctx: CheckContext, needs: Iterable[str] = ("config",),
              ignore: Iterable[str] = ()) -> List[Finding]:
    """Run every registered rule whose ``needs`` is in ``needs``, minus ``ignore``d codes.

    When a code has several wanted variants, only the one with the most evidence runs (the logs
    know better than a layout guess whether a pattern matched anything).

    A rule that crashes does not sink the report: its crash becomes one error finding under its
    own code that names the rule and the exception (a bug in swapwatch to report), and the other
    rules still run. Bad input (:class:`~swapwatch.errors.InputError`) still propagates (exit 2);
    ``SWAPWATCH_DEBUG=1`` re-raises the crash with its traceback.
    """
    load_rules()
    wanted, skip = set(needs), set(ignore)
    out: List[Finding] = []
    for code in sorted(VARIANTS):
        if code in skip:
            continue
        usable = [n for n in VARIANTS[code] if n in wanted and reads(VARIANTS[code][n].views, ctx.plan)]
        if usable:
            rule = VARIANTS[code][max(usable, key=_evidence_rank)]
            out.extend(_run_one(rule, ctx))
    return out


def _run_one(rule: Rule, ctx: CheckContext) -> List[Finding]:
    """The findings of one rule, or one error finding saying that the rule itself crashed."""
    import os

    from ..errors import InputError

    try:
        return list(rule.check(ctx))
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a rule's bug is reported, the other rules go on
        if os.environ.get("SWAPWATCH_DEBUG") == "1":
            raise
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb else ""
        return [Finding(rule.code, "error",
                        f"rule {rule.code} ({type(rule).__name__}) crashed{where}: {type(exc).__name__}: {exc}; "
                        "its check was not made (a bug in swapwatch: please report it; "
                        "SWAPWATCH_DEBUG=1 shows the traceback)")]


def load_rules() -> None:
    """Import every rule module in this package so that they register."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
