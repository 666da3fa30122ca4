"""The seam between MindFormers' code paths: which engine a YAML or a run goes to, and the one view both give.

MindFormers 2.1.0 applies the memory levers on two kinds of code (DESIGN §1.2): the static-graph
``LayerSetting`` (legacy and mcore ``use_legacy: False``; ``strategy.py`` makes a :class:`~swapwatch.plan.Plan`)
and the r2.x PyNative trainer's ``apply_ac``
(``mindformers/pynative/distributed/activation_checkpoint.py:apply_ac``; ``pynative/`` makes a
``PynativePlan``). Which one a YAML goes to is decided here and only here (:func:`pynative_tree`, on
``pynative.config.detect_path``, the config detection); every consumer reads the plan through
:class:`PlanView` and never asks for a path by name. Where the paths really differ, the difference is an
attribute or a method of the view (``global_layer_ids``, ``comparable``, the ``*_hook`` methods), and a
rule says which view it reads (``checks.Rule.views``).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .plan_view import APPLY_AC, LAYER_SETTING, VIEWS, PlanView, is_view  # noqa: F401  (the view, re-exported)

#: A PyNative run's own notices (``parsers/pynative.py``): the trainer's world size, a map, a refused config.
PYNATIVE_NOTICES = ("pyn_map_start", "world_size", "pyn_config_error")


def pynative_tree(path: str) -> Optional[Tuple[Any, Dict[str, int]]]:
    """``(data, lines)`` of ``path`` when it is a PyNative (r2.x) training YAML; None for a LayerSetting one or
    a file the static reader should report (it recognises worker logs and says what is wrong)."""
    from .config import read_yaml
    from .errors import InputError

    try:
        data, lines = read_yaml(path)
    except InputError:
        return None
    return (data, lines) if is_pynative(data) else None


def is_pynative(data: Any) -> bool:
    """A parsed YAML tree is the PyNative trainer's (``pynative.config.detect_path``)."""
    from .pynative import config as pconfig

    return isinstance(data, dict) and pconfig.detect_path(data) == "pynative"


def pynative_run(runlog: Any) -> bool:
    """The logs are a PyNative run's (its own notices: :data:`PYNATIVE_NOTICES`)."""
    return any(r.notices(what).n for r in runlog.ranks.values() for what in PYNATIVE_NOTICES)


def explain_pynative(path: str, num_layers: Optional[int] = None, model: Optional[str] = None) -> Any:
    """The PyNative explanation of ``path`` (:func:`swapwatch.pynative.explain.explain_tree`), None when
    ``path`` is not a PyNative YAML."""
    tree = pynative_tree(path)
    if tree is None:
        return None
    from .pynative.explain import explain_tree

    return explain_tree(tree[0], tree[1], path, num_layers=num_layers, family=model)


def mixed_pair(path_a: str, path_b: str) -> Optional[str]:
    """The one-line refusal when one YAML is PyNative and the other a LayerSetting one (``diff``); None when both
    are on the same kind of code. Asked of the YAMLs alone, before either plan is built."""
    pa, pb = pynative_tree(path_a) is not None, pynative_tree(path_b) is not None
    if pa == pb:
        return None
    pyn, static = (path_a, path_b) if pa else (path_b, path_a)
    return (f"{pyn} is a PyNative (r2.x) config and {static} a static-graph (LayerSetting) "
            "one: apply_ac and LayerSetting apply different keys to different trees, so "
            "there is no per-layer diff; see each with `swapwatch explain`")

