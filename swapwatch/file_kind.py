"""Which kind of file the user handed a command: a training YAML or a worker log.

``explain`` on a worker log used to answer "YAML syntax error", ``verify`` on a YAML "the logs hold
no initial lines": both true and both useless. Each command asks here when its input is the other
kind, and says which command the user meant (one line, exit 2). The log test uses the logger
prefixes of :mod:`swapwatch.parsers.grammar` (the one description of what log lines look like).
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from typing import Optional

from .errors import InputError

#: Top-level keys of a MindFormers training YAML (any of them makes a mapping a training config).
YAML_KEYS = ("recompute_config", "swap_config", "parallel_config", "model", "context", "runner_config")
#: Every top-level key MindFormers' configs use (the legacy / mcore ``MindFormerConfig`` sections
#: and the r2.x PyNative ones): a mapping with none of them is some other tool's YAML (a k8s
#: manifest, an ``mkdocs.yml``), which no setting of ``num_layers`` would make a training config.
TRAINING_KEYS = frozenset(YAML_KEYS + (
    "parallel", "run_mode", "seed", "use_parallel", "use_legacy", "trainer", "runner_wrapper", "optimizer",
    "lr_schedule", "callbacks", "train_dataset", "train_dataset_task", "eval_dataset", "eval_dataset_task",
    "eval_callbacks", "output_dir", "load_checkpoint", "src_strategy_path_or_dir", "auto_trans_ckpt",
    "only_save_strategy", "resume_training", "moe_config", "processor", "pretrained_model_dir",
    "micro_batch_interleave_num", "profile", "profile_memory", "profile_start_step", "profile_stop_step",
    "metric", "do_eval", "layer_scale", "layer_decay", "lr_scale", "wrapper", "monitor_config",
    "train_precision_sync", "infer_precision_sync", "load_ckpt_format", "recompute", "recompute_comm", "swap",
    "parallelism", "training", "model_config", "checkpoint", "dataset", "tokenizer", "distribute_parallel_config"))
HEAD_BYTES = 64 * 1024


def looks_like_log(path: str) -> bool:
    """Does the head of ``path`` read like a worker log (MindFormers / MindSpore / SWAPWATCH lines)?"""
    from .parsers.grammar import PREFIXES, SWAPWATCH_NEEDLE

    head = _head(path)
    if head is None:
        return False
    if SWAPWATCH_NEEDLE.decode() in head:
        return True
    rxs = [re.compile(rx) for _, rx, _ in PREFIXES if not rx.startswith(r"^\s*-?")]  # not the bare "- INFO -"
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    return any(rx.match(ln) for ln in lines for rx in rxs)


def looks_like_yaml_config(path: str) -> bool:
    """Is ``path`` a training YAML (a ``.yaml``/``.yml`` file, or a mapping with a training key)?"""
    if not os.path.isfile(path):
        return False
    if path.lower().endswith((".yaml", ".yml")):
        return True
    head = _head(path)
    if head is None or looks_like_log(path):
        return False
    import yaml

    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and any(k in data for k in YAML_KEYS)


def reject_foreign_yaml(data: object, path: Optional[str]) -> None:
    """A YAML mapping with no top-level key MindFormers reads (:data:`TRAINING_KEYS`), or an
    empty one: raise "not a MindFormers training YAML" (one line) rather than ask for a layer
    count that would not make it one."""
    if isinstance(data, dict) and any(k in TRAINING_KEYS for k in data):
        return
    keys = ", ".join(str(k) for k in list(data)[:6]) if isinstance(data, dict) else ""
    more = ", ..." if isinstance(data, dict) and len(data) > 6 else ""
    raise InputError("not a MindFormers training YAML: " + (
        f"none of its top-level keys ({keys}{more}) is one MindFormers reads (model, parallel_config, "
        "recompute_config, swap_config, context, runner_config, ...)" if keys else "it is empty"), file=path)


def reject_log_as_config(path: str) -> None:
    """A worker log was given where a training YAML belongs (explain, estimate, plan, diff,
    ``--config``): raise the one line that points to ``verify``. Called by ``config.load_config``
    when the file does not read as a YAML mapping, so every command that loads a config says it."""
    if looks_like_log(path):
        raise InputError("this is a worker log, not a training YAML; to check what the run applied: "
                         f"swapwatch verify {path} --config CONFIG.yaml", file=path)


def reject_yaml_for_verify(path: str) -> None:
    """``verify`` was given a training YAML as a log: raise the one line that points to ``explain``."""
    if looks_like_yaml_config(path):
        raise InputError("this is a training YAML, not a worker log; for its plan: swapwatch explain "
                         f"{path}; to check a run against it: swapwatch verify LOGS --config {path}", file=path)


def _head(path: str) -> Optional[str]:
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as fh:
            return fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except (OSError, EOFError, zlib.error):     # no gzip, or corrupt: the log reader says so in one line
        return None
