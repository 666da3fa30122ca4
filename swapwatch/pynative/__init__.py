"""MindFormers' PyNative (r2.x) activation-memory path: ``recompute`` / ``recompute_comm`` / ``swap``.

Modules: :mod:`.config` (YAML -> sections and model shape, path detection), :mod:`.layer_spec` (the ``'0-3'``
grammar and its checks), :mod:`.validate` (what ``apply_ac`` refuses, in order), :mod:`.layer_paths` (the
per-layer path lists, data), :mod:`.resolve` (maps, per-layer actions, prefetch pairs, expected log lines),
:mod:`.findings` (the SW5xx traps), :mod:`.render` (explain output).
"""
