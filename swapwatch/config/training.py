"""The :class:`TrainingConfig` dataclass: the keys swapwatch reads from a training YAML, each with
its line, and the MindFormers template defaults of the strategy sections."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional, Tuple

from ..errors import ConfigError
from .load import nearest
from .swap import SwapStrategy, normalize_swap_config

if TYPE_CHECKING:
    from ..model.families import ModelFamily


#: ``recompute_config`` keys and their template defaults (MindFormers ``RecomputeConfig``).
RECOMPUTE_DEFAULTS: Dict[str, Any] = {
    "recompute": False,
    "select_recompute": False,
    "parallel_optimizer_comm_recompute": False,
    "select_comm_recompute": False,
    "mp_comm_recompute": True,
    "recompute_slice_activation": False,
    "select_recompute_exclude": False,
    "select_comm_recompute_exclude": False,
}
#: ``swap_config`` keys and their template defaults (MindFormers ``SwapConfig``).
SWAP_DEFAULTS: Dict[str, Any] = {"swap": False, "layer_swap": None, "op_swap": None, "default_prefetch": 1}
#: Keys MindFormers' config class type-checks as plain bools in its constructor.
RECOMPUTE_BOOL_KEYS = ("parallel_optimizer_comm_recompute", "mp_comm_recompute", "recompute_slice_activation")
#: MindFormers keeps the offsets and the layer split in int32 numpy arrays (``LayerSetting.__init__``:
#: ``np.array(offset, np.int32)``, ``np.ones((V, P), np.int32)``): a larger value wraps around there.
INT32_MAX = 2 ** 31 - 1
#: swapwatch's own ceiling on the layer count (the plan, its tables and the logs hold one entry per
#: layer, so 10**12 layers would run for ever). No MindFormers model comes near: the largest
#: released configs have about a hundred decoder layers.
MAX_LAYERS = 10_000
#: MindSpore stores ``backward_prefetch`` as a C++ long (``Cell.offload`` / ``Primitive._offload``
#: raise "Unable to cast ... to C++ type 'long'" past it); MindFormers passes the value through.
INT64_MAX = 2 ** 63 - 1


#: Pre-release names of the exclude keys (never in a release tag, but seen in logs of dev builds).
RENAMED_KEYS = {"select_recompute_off": "select_recompute_exclude",
                "select_comm_recompute_off": "select_comm_recompute_exclude"}


#: mcore ``model_config`` swap keys: (TransformerConfig name, alias, swap_config meaning)
MCORE_SWAP_KEYS = (("cpu_offloading", "swap", "swap"), ("cpu_offloading_num_layers", "layer_swap", "layer_swap"),
                   ("op_swap", None, "op_swap"))


@dataclass
class TrainingConfig:
    """What the strategy engine needs from a training YAML, plus where each value came from.

    ``recompute_config`` / ``swap_config`` are template-complete (defaults filled) and hold the raw
    user values: MindFormers' config classes store them raw too, and the engine normalises them.
    ``num_layers`` is what MindFormers passes to LayerSetting (``mtp_depth`` included).
    """

    recompute_config: Dict[str, Any]
    swap_config: Dict[str, Any]
    num_layers: int
    pipeline_stage: int = 1
    pp_interleave_num: int = 1
    pipeline_interleave: bool = False
    offset: Any = 0
    #: ``parallel_config.recompute`` given as a plain bool: the legacy shortcut that bypasses
    #: ``recompute_config`` entirely (None when not used).
    parallel_recompute: Optional[bool] = None
    context: Dict[str, Any] = field(default_factory=dict)
    pipeline_scheduler: Optional[str] = None
    mtp_depth: int = 0
    #: a layer split taken from a log's ``num_layers per stage`` line (verify without --config):
    #: used as is, since the log proves MindFormers accepted it.
    layer_list: Optional[List[List[int]]] = None
    source: Optional[str] = None
    #: dotted key path -> line number in ``source``
    lines: Dict[str, int] = field(default_factory=dict)
    #: a config rebuilt from a log: dotted key (a section) -> ``file:line`` of the log line its
    #: value was read from (each ``initial ... from dict`` section has its own line)
    key_sources: Dict[str, str] = field(default_factory=dict)
    #: recompute/swap keys the user actually wrote (as opposed to template defaults)
    given: Dict[str, List[str]] = field(default_factory=dict)
    #: the model family the YAML names (None: not read)
    family: Optional["ModelFamily"] = None
    #: ``use_legacy: False``: the mcore path (swap keys in model_config, MTP as a second block)
    mcore: bool = False
    #: mcore: a top-level ``swap_config`` the user wrote, which never reaches LayerSetting (SW306)
    ignored_swap_config: Optional[Dict[str, Any]] = None
    #: mcore: ``model_config.default_prefetch`` given, which LayerSetting never receives (SW308)
    ignored_default_prefetch: Any = None
    #: the whole YAML tree as MindFormers merges it (``pretrained_model_dir/config.json`` under
    #: ``model.model_config``, the YAML winning): the memory model's sizes are read from this, so
    #: estimate / plan see exactly what explain sees (``swapwatch.memory.spec.spec_from_config``)
    tree: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: ``pretrained_model_dir/config.json`` when its keys were merged, and the keys it gave
    hf_source: Optional[str] = None
    hf_keys: FrozenSet[str] = frozenset()

    #: (the swap_config it was made from, its normalised form): see :attr:`swap_strategy`
    _swap_norm: Optional[Tuple[Dict[str, Any], "SwapStrategy"]] = field(default=None, init=False, repr=False,
                                                                        compare=False)

    @property
    def swap(self) -> bool:
        return self.swap_config.get("swap") is True

    @property
    def swap_strategy(self) -> "SwapStrategy":
        """``swap_config`` normalised as MindFormers' ``TransformerSwapConfig`` does
        (:func:`normalize_swap_config`): computed once (by :func:`validate`) and kept; made again
        only when ``swap_config`` is replaced (a config rebuilt from an mcore log gets the swap the
        log shows, ``families.apply_log_family``). Raises ConfigError at the key."""
        if self._swap_norm is None or self._swap_norm[0] is not self.swap_config:
            self._swap_norm = (self.swap_config, normalize_swap_config(self.swap_config, self))
        return self._swap_norm[1]

    @property
    def effective_interleave(self) -> int:
        """``pp_interleave_num`` as LayerSetting uses it: forced to 1 unless pipeline_interleave."""
        return self.pp_interleave_num if self.pipeline_interleave else 1

    def line(self, key: str) -> Optional[int]:
        """The line of ``key`` or, failing that, of its closest enclosing key."""
        return nearest(self.lines, key)

    def where(self, key: str) -> Optional[str]:
        """``file:line`` of ``key`` (or its section), for findings; None when not from a file."""
        if not self.source:
            return None
        ln = self.line(key)
        return f"{self.source}:{ln}" if ln else self._log_source(key)

    def _log_source(self, key: str) -> Optional[str]:
        """The log line of ``key``'s closest enclosing key in :attr:`key_sources`, else ``source``."""
        return nearest(self.key_sources, key) or self.source

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError located at ``key`` (on mcore, a ``swap_config.*`` key the user did not
        write at the top level names the model_config key it came from)."""
        key = self.mcore_swap_key(key)
        ln = self.line(key)
        return ConfigError(message, file=self.source if ln else self._log_source(key), line=ln, key=key)

    def mcore_swap_key(self, key: str, applied: bool = False) -> str:
        """``swap_config.layer_swap[0]`` -> ``model.model_config.cpu_offloading_num_layers[0]`` (or
        the alias the YAML used) on the mcore path, where LayerSetting's swap comes from. A key the
        YAML also wrote in the (ignored) top-level swap_config stays that key for an error about
        the value (check_rules validates it); ``applied`` (a finding about the swap LayerSetting
        uses) always names the model_config key."""
        if not self.mcore or not key.startswith("swap_config."):
            return key
        rest = key[len("swap_config."):]
        for name, alias, meaning in MCORE_SWAP_KEYS:
            if rest == meaning or rest.startswith((meaning + ".", meaning + "[")):
                if meaning in (self.ignored_swap_config or {}) and not applied:
                    return key                    # the top-level key itself (check_rules sees it)
                written = alias if alias and f"model.model_config.{alias}" in self.lines else name
                return f"model.model_config.{written}{rest[len(meaning):]}"
        return key

    def was_given(self, section: str, key: str) -> bool:
        return key in self.given.get(section, [])

    def applied_where(self, key: str) -> Optional[str]:
        """``file:line`` of ``key`` as the strategy LayerSetting applies reads it (a ``swap_config.*`` key on
        the mcore path: the model_config key it came from, :meth:`mcore_swap_key`)."""
        return self.where(self.mcore_swap_key(key, applied=True))

    def pattern_where(self, action: str, pattern: str) -> Optional[str]:
        """``file:line`` of a configured pattern: the ``op_swap`` entry that names it, or the
        ``recompute_config.<action>`` key of it (the key's own line when the pattern is a mapping key).
        For a config rebuilt from a log, the log line it came from."""
        if action == "op_swap":
            return self.applied_where(op_swap_key(self.swap_config, pattern))
        return self.applied_where(f"recompute_config.{action}.{pattern}")

    def initial_dicts(self) -> Dict[str, Dict[str, Any]]:
        """The sections as MindFormers logs them (``initial ... from dict``): on the mcore path
        the *top-level* swap_config is what is logged (and ignored), not the model_config keys
        LayerSetting uses."""
        swap = dict(SWAP_DEFAULTS, **(self.ignored_swap_config or {})) if self.mcore else self.swap_config
        return {"recompute_config": self.recompute_config, "swap_config": swap,
                "parallel_config": {"pipeline_stage": self.pipeline_stage}}


def op_swap_key(sc: Dict[str, Any], name: str) -> str:
    """The key path of the ``op_swap`` entry of ``sc`` (a swap_config) that names op ``name``: ``swap_config.
    op_swap[i]``, or ``swap_config.op_swap`` when none does (a dict form, or a default)."""
    raw = sc.get("op_swap")
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            if isinstance(item, dict):
                names = item.get("op_name")
                if names == name or (isinstance(names, (list, tuple)) and name in names):
                    return f"swap_config.op_swap[{i}]"
    return "swap_config.op_swap"
