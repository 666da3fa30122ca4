"""``swapwatch explain`` as a library: a training YAML -> the plan, plus what the config alone shows.

Kept apart from the CLI so tests and other tools get the same answer without click: the YAML is read once
(``TrainingDocument``), its code path (``codepaths.of``) plans it on the model family's layout and runs the
config-time rules, and the exit code is 1 when an error-severity finding exists.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ..engine import codepaths
from ..model.results import Explanation


def explain(path: str, num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
            pp_interleave_num: Optional[int] = None, offset: Any = None,
            env: Optional[Mapping[str, str]] = None, model: Optional[str] = None,
            link: Any = None) -> Explanation:
    """Explain the YAML at ``path``. Raises InputError/ConfigError (exit 2) for bad input.

    The model family comes from the YAML (``swapwatch.model.families.detect``) unless ``model``
    (``--model``) names one; each layer is resolved on its own tree of that family. ``link``: the
    host link a swap's copies are timed with (``memory.swap_cost.Link``, SW212; None: the defaults)."""
    doc, cp = codepaths.read(path)
    return cp.explain(doc, num_layers=num_layers, pipeline_stage=pipeline_stage,
                      pp_interleave_num=pp_interleave_num, offset=offset, env=env, model=model, link=link)
