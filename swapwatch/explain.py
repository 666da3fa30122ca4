"""``swapwatch explain`` as a library: a training YAML -> the plan, plus what the config alone shows.

Kept apart from the CLI so tests and other tools get the same answer without click: load the
config (overrides for fragments), make the plan on the model family's layout, run the
config-time rules, and pick the exit code (1 when an error-severity finding exists).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .checks import CheckContext, Finding, run_rules
from .config import TrainingConfig, load_config
from .errors import InputError
from .text import severity_rank
from . import strategy


@dataclass
class Explanation:
    config: TrainingConfig
    plan: strategy.Plan
    layout: Any
    findings: List[Finding] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)

    def walk(self, layer: int, pattern: str, mode: str, mtp: bool = False) -> "strategy.patterns.WalkResult":
        """What ``pattern`` reaches on ``layer``'s own tree (dense / MoE kind of the family, or
        the MTP layer's with ``mtp``)."""
        if self.layout is not None:
            return strategy.walk(self.layout, pattern, mode)
        return self.plan.walker(layer, mtp)(pattern, mode)

    def to_json(self) -> Dict[str, Any]:
        """The ``explain --format json`` document."""
        return self.plan.to_json(self.findings)

    @property
    def exit_code(self) -> int:
        return 1 if any(f.severity == "error" for f in self.findings) else 0


def explain(path: str, num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
            pp_interleave_num: Optional[int] = None, offset: Any = None,
            env: Optional[Mapping[str, str]] = None, model: Optional[str] = None) -> Explanation:
    """Explain the YAML at ``path``. Raises InputError/ConfigError (exit 2) for bad input.

    The model family comes from the YAML (``swapwatch.families.detect``) unless ``model``
    (``--model``) names one; each layer is resolved on its own tree of that family. A PyNative (r2.x)
    YAML is explained by :mod:`swapwatch.pynative.explain` (a ``PynativeExplanation``)."""
    pynative = _pynative(path, num_layers, model)
    if pynative is not None:
        return pynative
    if model is not None:
        from .families import from_name

        from_name(model)                  # an unknown --model is bad input before anything else
    config = load_config(path, num_layers=num_layers, pipeline_stage=pipeline_stage,
                         pp_interleave_num=pp_interleave_num, offset=offset)
    if model is not None:
        from .families import check_code_path, from_name

        check_code_path(from_name(model), bool(getattr(config, "mcore", False)))
    plan = strategy.plan(config, model=model)
    layout = None        # per layer, from plan.family
    ctx = CheckContext(plan=plan, config=config, env=dict(env or {}))
    findings = sorted(run_rules(ctx, needs=("config",)),
                      key=lambda f: (severity_rank(f.severity), f.code,
                                     -1 if f.layer is None else f.layer))
    return Explanation(config=config, plan=plan, layout=layout, findings=findings, env=dict(env or {}))


def _pynative(path: str, num_layers: Optional[int], model: Optional[str]) -> Any:
    """The PyNative explanation when ``path`` is a PyNative YAML (``pynative.config.detect_path``), else None."""
    from .config import read_yaml
    from .pynative import config as pconfig
    from .pynative.explain import explain_tree
    try:
        data, lines = read_yaml(path)
    except InputError:
        return None                 # the static path reports it (and recognises worker logs)
    if pconfig.detect_path(data) != "pynative":
        return None
    return explain_tree(data, lines, path, num_layers=num_layers, family=model)
