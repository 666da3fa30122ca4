"""``swapwatch explain`` as a library: a training YAML -> the plan, plus what the config alone shows.

Kept apart from the CLI so tests and other tools get the same answer without click: load the
config (overrides for fragments), make the plan on the model family's layout, run the
config-time rules, and pick the exit code (1 when an error-severity finding exists).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from .checks import CheckContext, run_rules
from .config import load_config
from . import paths, strategy
from .results import Explanation  # noqa: F401  (explain's result; below its renderer)
from .text import severity_rank


def explain(path: str, num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
            pp_interleave_num: Optional[int] = None, offset: Any = None,
            env: Optional[Mapping[str, str]] = None, model: Optional[str] = None,
            link: Any = None) -> Explanation:
    """Explain the YAML at ``path``. Raises InputError/ConfigError (exit 2) for bad input.

    The model family comes from the YAML (``swapwatch.families.detect``) unless ``model``
    (``--model``) names one; each layer is resolved on its own tree of that family. A PyNative (r2.x)
    YAML is explained by :mod:`swapwatch.pynative.explain` (a ``PynativeExplanation``). ``link``: the
    host link a swap's copies are timed with (``memory.swap_cost.Link``, SW212; None: the defaults)."""
    pynative = paths.explain_pynative(path, num_layers, model)      # the seam: the PyNative path's own
    if pynative is not None:
        return pynative
    if model is not None:
        from .families import from_name

        from_name(model)                  # an unknown --model is bad input before anything else
    config = load_config(path, num_layers=num_layers, pipeline_stage=pipeline_stage,
                         pp_interleave_num=pp_interleave_num, offset=offset)
    if model is not None:
        from .families import check_code_path, from_name

        check_code_path(from_name(model), config.mcore)
    plan = strategy.plan(config, model=model)
    layout = None        # per layer, from plan.family
    ctx = CheckContext(plan=plan, config=config, env=dict(env or {}), link=link)
    findings = sorted(run_rules(ctx, needs=("config",)),
                      key=lambda f: (severity_rank(f.severity), f.code,
                                     -1 if f.layer is None else f.layer))
    return Explanation(config=config, plan=plan, layout=layout, findings=findings, env=dict(env or {}))
