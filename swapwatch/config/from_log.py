"""The config a run logged (``initial ... from dict``), for ``verify`` without ``--config``."""
from __future__ import annotations

from typing import Any, Tuple

from ..errors import InputError
from .training import RECOMPUTE_DEFAULTS, SWAP_DEFAULTS, TrainingConfig
from .tree import config_from_dicts


# ---------------------------------------------------------------------------------------------
# The config a run logged (``initial ... from dict``), for verify without --config
# ---------------------------------------------------------------------------------------------

def config_from_log(runlog: Any) -> Tuple[TrainingConfig, str]:
    """Rebuild the intended config from the lowest rank that printed ``initial ... from dict``.

    Uses the logged geometry (``num_layers per stage``) for the layer count and split, since the
    three config sections do not carry ``num_layers``.
    """
    for rank in sorted(runlog.ranks):
        rank_log = runlog.ranks[rank]
        sections = rank_log.initial_config()
        if not any(k in sections for k in ("recompute_config", "swap_config")):
            continue
        geometry = rank_log.geometry()
        if not geometry.get("layer_list"):
            raise InputError("the log prints its config ('initial ... from dict') but no "
                             "'num_layers per stage' line, so the layer count is unknown; "
                             "pass --config CONFIG", file=rank_log.first_source("initial_config"))
        config = config_from_dicts(
            recompute_config=sections.get("recompute_config"),
            swap_config=sections.get("swap_config"),
            parallel_config=sections.get("parallel_config"),
            geometry=geometry,
            source=rank_log.first_source("initial_config") or f"rank {rank} log")
        # every section points to its own log line (the last one of it, whose value is used)
        config.key_sources = {e.section: e.source for e in rank_log.of("initial_config")
                              if e.source and e.section in sections}
        if "recompute_config" not in config.key_sources and "parallel_config" in config.key_sources \
                and isinstance((sections.get("parallel_config") or {}).get("recompute"), dict):
            config.key_sources["recompute_config"] = config.key_sources["parallel_config"]
        _given_means_changed(config)
        from ..model.families import apply_log_family

        apply_log_family(config, rank_log)          # the family (and mcore swap) the log shows
        return config, f"rank {rank} log ({rank_log.first_source('initial_config')})"
    files = [f for r in sorted(runlog.ranks) for f in runlog.ranks[r].files][:3]
    raise InputError("no --config given and the logs hold no 'initial recompute_config/"
                     "swap_config/parallel_config from dict' lines to take it from; pass "
                     "--config CONFIG", file=", ".join(files) or None)


def _given_means_changed(config: TrainingConfig) -> None:
    """A log prints every key of a section, template defaults included, so "the user wrote it"
    cannot be known; the closest truth is "it differs from the template default". Without this,
    rules about keys set to no effect (SW305 ``default_prefetch``) fire on every log-derived config."""
    given = config.given
    for section, defaults in (("recompute_config", RECOMPUTE_DEFAULTS), ("swap_config", SWAP_DEFAULTS)):
        values = getattr(config, section)
        given[section] = [k for k in given.get(section, [])
                          if k not in defaults or values.get(k) != defaults[k]]
