"""The example trainer (``swapwatch/examples/train.py``) on an r2.x (PyNative) YAML: its sizes under the names the
trainer reads, its layer count, and its per-layer strategy applied to the tiny Llama (``codepaths.ApplyAc.example``).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..errors import InputError

#: the MindSpore execution mode the r2.x trainer runs in (the example trainer's ``--mode``)
MODE = "pynative"


class Example:
    """What the example trainer needs of an r2.x YAML (``codepaths.ApplyAc.example``)."""

    mode: Optional[str] = MODE
    layers_key = "num_hidden_layers"

    def __init__(self, config: str) -> None:
        from .config import load

        self.config = config
        self.num_layers: int = load(config).num_layers
        self.sha256: Optional[str] = None

    def apply(self, layers: Any, rank: int, quirks: bool, log: Any) -> None:
        apply(layers, self.config, log)


def sizes_view(tree: Dict[str, Any], lines: Dict[str, int]) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """An r2.x (PyNative) YAML keeps the sizes under ``model`` and the micro-batch in
    ``training.local_batch_size``: seen under the static names SIZE_KEYS reads, lines kept at the r2.x keys
    (the names ``estimate`` reads them under: swapwatch/pynative/sizing.py)."""
    from ..config import mapping

    model = mapping(tree.get("model"))
    training = mapping(tree.get("training"))
    view = {"model": {"model_config": model}, "runner_config": {"batch_size": training.get("local_batch_size")}}
    out = {f"model.model_config.{k[6:]}": v for k, v in lines.items() if k.startswith("model.")}
    if "training.local_batch_size" in lines:
        out["runner_config.batch_size"] = lines["training.local_batch_size"]
    return view, out


def apply(layers: Any, config: str, log: Any) -> None:
    """Apply an r2.x YAML's per-layer strategy to the tiny Llama as ``apply_ac`` decides it
    (:func:`swapwatch.pynative.resolve.resolve`): a full layer -> ``Cell.recompute()`` on the layer, each
    select module path -> ``Cell.recompute()`` on that cell. What differs from MindFormers' trainer
    (docs/estimate.md, The PyNative path): MindSpore's cell recompute instead of hyper_parallel's
    ``checkpoint_wrapper``; select paths must be cells (a primitive's recompute is a graph-mode attribute);
    swap and exclude_op are refused (MindSpore's offload does nothing in PyNative on CPU); one process (the
    trainer skips apply_ac on one card: SW501)."""
    from .config import load
    from .resolve import resolve

    plan = resolve(load(config))
    for la in plan.layers:
        if la.layer_swap or la.op_swap or la.op_swap_void or la.exclude:
            raise InputError("the example model applies full and select recompute of cells only in PyNative "
                             "mode (swap / exclude_op refused)", file=config)
        cell = layers[la.layer]
        if la.full:
            cell.recompute()
            continue
        for path in la.select:
            node = cell
            for part in path.split("."):
                node = node._cells.get(part) if hasattr(node, "_cells") else None
                if node is None:
                    raise InputError(f"layer {la.layer}: select path {path} is not a cell of the example "
                                     f"model (PyNative: cells only)", file=config)
            node.recompute()
    # what apply_ac logs for this strategy, in its order (the "Final ... Configuration Map" blocks, then the
    # per-layer Set lines): the lines MindFormers' trainer would print beside the wrappers it installs
    for line in plan.lines:
        (log.warning if line.level == "WARNING" else log.info)(line.text)
