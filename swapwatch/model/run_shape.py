"""What a run was, as far as its memory depends on it: layers, pipeline stages, sequence length,
batch size, hidden size.

Two runs' memory figures compare only when these match: a 32-layer run against a 4-layer one is
"-92 %" whatever the strategy did. ``plot memory`` and ``diff`` read the shape of each run from
what the run left behind and say when runs are not comparable, instead of printing a number that
means nothing. Sources, best first: the training command's own arguments in ``run.json``
(``--seq 256``; what the process really got), the YAML the run used (``run.json``'s config path,
``model.model_config``), and the layer split the log printed (MindFormers' ``num_layers per stage``).
A value no source gives is unknown and never makes runs incomparable.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

if TYPE_CHECKING:
    from ..config import TrainingConfig
    from ..parsers.model import RunLog

#: shape key -> the words a person reads
KEYS = {"num_layers": "layers", "pipeline_stage": "pipeline stages", "seq_length": "seq length",
        "batch_size": "batch size", "hidden_size": "hidden size"}
#: training-script arguments that set a shape key (MindFormers' run_mindformer.py and our example)
ARGS = {"--seq": "seq_length", "--seq_length": "seq_length", "--seq-length": "seq_length",
        "--batch": "batch_size", "--batch_size": "batch_size", "--batch-size": "batch_size",
        "--hidden": "hidden_size", "--hidden_size": "hidden_size", "--hidden-size": "hidden_size",
        "--layers": "num_layers", "--num_layers": "num_layers", "--num-layers": "num_layers"}


def _int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _from_command(command: Any) -> Dict[str, int]:
    out: Dict[str, int] = {}
    if not isinstance(command, list):
        return out
    args = [str(a) for a in command]
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        key = ARGS.get(name)
        if key is None:
            continue
        v = _int(value) if eq else (_int(args[i + 1]) if i + 1 < len(args) else None)
        if v is not None:
            out[key] = v
    return out


def _from_config(path: Any) -> Dict[str, int]:
    """``model.model_config`` values of the YAML the run used (when the file is still there)."""
    if not isinstance(path, str) or not os.path.isfile(path):
        return {}
    try:
        from ..config import read_yaml     # the loader explain uses, and one parse per command

        doc, _ = read_yaml(path)
    except Exception:           # the run's YAML is gone bad: the shape is unknown, not an error
        return {}
    mc = ((doc or {}).get("model") or {}).get("model_config") if isinstance(doc, dict) else None
    out: Dict[str, int] = {}
    if isinstance(mc, dict):
        for key in ("num_layers", "seq_length", "batch_size", "hidden_size"):
            v = _int(mc.get(key))
            if v is not None:
                out[key] = v
    pc = doc.get("parallel_config") if isinstance(doc, dict) else None
    stages = _int(pc.get("pipeline_stage")) if isinstance(pc, dict) else None
    if stages is not None:
        out["pipeline_stage"] = stages
    return out


def _from_log(runlog: "RunLog") -> Dict[str, int]:
    for rank in sorted(getattr(runlog, "ranks", {}) or {}):
        geo = runlog.ranks[rank].geometry()
        layer_list = geo.get("layer_list")
        if layer_list:
            try:
                return {"num_layers": int(sum(sum(row) for row in layer_list)),
                        "pipeline_stage": len(layer_list[0])}
            except (TypeError, ValueError):
                return {}
    return {}


def run_shape(runlog: "RunLog") -> Dict[str, int]:
    """The known shape values of one run (keys of :data:`KEYS`)."""
    info = getattr(runlog, "run_info", None) or {}
    cfg = info.get("config")
    path = cfg.get("path") if isinstance(cfg, dict) else cfg
    shape: Dict[str, int] = {}
    shape.update(_from_config(path))
    shape.update(_from_log(runlog))
    shape.update(_from_command(info.get("command")))
    return shape


def config_shape(config: "TrainingConfig") -> Dict[str, int]:
    """The shape of a loaded config (``diff`` of two YAMLs)."""
    out = {"num_layers": config.num_layers, "pipeline_stage": config.pipeline_stage}
    extra = _from_config(getattr(config, "source", None))
    for key in ("seq_length", "batch_size", "hidden_size"):
        if key in extra:
            out[key] = extra[key]
    return out


def differences(shapes: Sequence[Dict[str, int]]) -> List[str]:
    """``layers 32 vs 4`` for every key two or more runs know and disagree on."""
    out = []
    for key, words in KEYS.items():
        values = [s.get(key) for s in shapes]
        known = [v for v in values if v is not None]
        if len(set(known)) > 1:
            out.append(f"{words} " + " vs ".join("?" if v is None else str(v) for v in values))
    return out
