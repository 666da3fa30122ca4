"""A MindFormers training YAML -> :class:`TrainingConfig`, with every error naming file:line and key.

Why this module exists: the strategy engine needs a handful of values scattered over a training
YAML (the layer count in ``model.model_config``, the pipeline stages in ``parallel_config``, the
interleave switch in ``parallel.pipeline_config``, the two strategy sections), and a user who made a
mistake deserves the answer MindFormers would give, before a multi-hour job is queued, pointing at
the line. So this module

* reads the YAML with node marks, so every key's line is known (findings cite ``x.yaml:LINE``);
* finds the keys where real MindFormers YAMLs put them, with fallbacks (``num_hidden_layers``,
  DeepSeek-style ``mtp_depth``) and command-line overrides for fragments;
* rejects what MindFormers rejects *before* LayerSetting runs: template validation (unknown keys,
  with a did-you-mean), the config classes' constructors (bool fields, swap ``layers`` forms,
  inconsistent prefetch), and the train-path ``check_rules`` (lists longer than the pipeline,
  ``default_prefetch`` < 1, ``{pattern: True}`` or ``"Auto"`` prefetch under swap ...);
* normalises the swap config once, as ``TransformerSwapConfig`` does, and keeps it on the config
  (``TrainingConfig.swap_strategy``) for the engine. Errors that
  depend on the geometry (offset shape and sum, bad count tables) are the engine's, in
  :mod:`swapwatch.strategy`, which raises the same :class:`~swapwatch.errors.ConfigError`.

MindFormers' meaning is kept, in our own words; where MindFormers has a distinctive message we
quote its gist so the user can match it with what a real run prints.
"""
from __future__ import annotations

# The package, by concern (docs/DESIGN.md §2.1): load (YAML + marks + bounds), training (the
# TrainingConfig dataclass and the template defaults), tree (merged tree -> TrainingConfig, finetune
# config.json), swap (TransformerSwapConfig normalisation), validate (config classes + check_rules),
# from_log (config_from_log). Every public name stays importable from ``swapwatch.config``.
from .document import TrainingDocument
from .from_log import config_from_log
from .load import (MAX_ALIAS_VALUES, MAX_CONFIG_BYTES, MAX_DEPTH, forget_reads, mapping, nearest, parse_offset,
                   parse_yaml, read_config_bytes, read_config_text, read_yaml)
from .swap import DEFAULT_OP_SWAP, SwapStrategy, normalize_swap_config
from .training import (INT32_MAX, INT64_MAX, MAX_LAYERS, MCORE_SWAP_KEYS, RECOMPUTE_BOOL_KEYS, RECOMPUTE_DEFAULTS,
                       RENAMED_KEYS, SWAP_DEFAULTS, TrainingConfig)
from .tree import config_from_dicts, load_config
from .validate import _op_swap_key, validate

__all__ = ["DEFAULT_OP_SWAP", "INT32_MAX", "INT64_MAX", "MAX_ALIAS_VALUES", "MAX_CONFIG_BYTES", "MAX_DEPTH",
           "MAX_LAYERS", "MCORE_SWAP_KEYS", "RECOMPUTE_BOOL_KEYS", "RECOMPUTE_DEFAULTS", "RENAMED_KEYS",
           "SWAP_DEFAULTS", "SwapStrategy", "TrainingConfig", "TrainingDocument", "_op_swap_key", "config_from_dicts",
           "config_from_log", "forget_reads", "load_config", "mapping", "nearest", "normalize_swap_config",
           "parse_offset", "parse_yaml", "read_config_bytes", "read_config_text", "read_yaml", "validate"]
