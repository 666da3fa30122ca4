"""The rule registry: every check swapwatch can make, each with a code, a severity and a docstring.

A rule is a class with ``code`` (``SW###``, never reused for another meaning), ``severity``
(``error`` | ``warning``), a one-line ``title``, ``needs`` (``"config"`` when the config alone
decides it, ``"run"`` when it needs the run's logs, ``"ir"`` for compiled-graph evidence) and a
docstring saying what it means, why it matters and how to fix it (with YAML). Rules register
themselves with :func:`register`; ``swapwatch rules`` lists :data:`REGISTRY`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Type

SEVERITIES = ("error", "warning", "info")


@dataclass
class Finding:
    """One thing a rule found. Only ``code``, ``severity`` and ``message`` are always set."""

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
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class CheckContext:
    """Everything a rule may look at. ``runlog`` / ``ir`` are None for config-only checks."""

    plan: Any                 # strategy.Plan
    config: Any = None        # config.TrainingConfig
    env: Dict[str, str] = field(default_factory=dict)
    runlog: Any = None        # parsers RunLog
    ir: Any = None            # parsers.ir evidence


class Rule:
    code: str = ""
    severity: str = "error"
    title: str = ""
    needs: str = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        raise NotImplementedError

    def finding(self, message: str, **kw: Any) -> Finding:
        return Finding(self.code, self.severity, message, **kw)


REGISTRY: Dict[str, Rule] = {}


def register(cls: Type[Rule]) -> Type[Rule]:
    """Class decorator: add one instance of the rule to the registry (codes must be unique)."""
    if cls.code in REGISTRY:
        raise ValueError(f"rule code {cls.code} registered twice")
    REGISTRY[cls.code] = cls()
    return cls


def run_rules(ctx: CheckContext, needs: Iterable[str] = ("config",),
              ignore: Iterable[str] = ()) -> List[Finding]:
    """Run every registered rule whose ``needs`` is in ``needs``, minus ``ignore``d codes."""
    _load_all()
    wanted, skip = set(needs), set(ignore)
    out: List[Finding] = []
    for code in sorted(REGISTRY):
        rule = REGISTRY[code]
        if rule.needs in wanted and code not in skip:
            out.extend(rule.check(ctx))
    return out


def _load_all() -> None:
    """Import every rule module in this package so that they register."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
