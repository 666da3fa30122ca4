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

import difflib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import yaml

from .errors import ConfigError, InputError

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
#: Deepest nesting of YAML collections accepted: real training YAMLs nest about five levels, and
#: a bound that does not depend on the interpreter's recursion limit keeps deep input one clear line.
MAX_DEPTH = 64
#: Largest config file read: real training YAMLs are a few kilobytes; a device or an endless pipe
#: given as a config must end in one line, not in the machine's memory (docs/reliability.md).
MAX_CONFIG_BYTES = 16 * 2 ** 20
#: Values a walk of the data may meet beyond the file's own nodes through aliases: PyYAML shares
#: an aliased object, but every reader that walks the data (diff, the line marks) expands it.
MAX_ALIAS_VALUES = 1_000_000
#: Pre-release names of the exclude keys (never in a release tag, but seen in logs of dev builds).
RENAMED_KEYS = {"select_recompute_off": "select_recompute_exclude",
                "select_comm_recompute_off": "select_comm_recompute_exclude"}


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
    #: the model family the YAML names (:class:`swapwatch.families.ModelFamily`; None: not read)
    family: Any = None
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

    def initial_dicts(self) -> Dict[str, Dict[str, Any]]:
        """The sections as MindFormers logs them (``initial ... from dict``): on the mcore path
        the *top-level* swap_config is what is logged (and ignored), not the model_config keys
        LayerSetting uses."""
        swap = dict(SWAP_DEFAULTS, **(self.ignored_swap_config or {})) if self.mcore else self.swap_config
        return {"recompute_config": self.recompute_config, "swap_config": swap,
                "parallel_config": {"pipeline_stage": self.pipeline_stage}}


# ---------------------------------------------------------------------------------------------
# YAML with marks
# ---------------------------------------------------------------------------------------------

def read_config_bytes(path: str) -> bytes:
    """The bytes of the config ``path``, read once and bounded (docs/reliability.md).

    * A regular file or a pipe (``<(git show ...)``, ``/dev/stdin``) is read; a device
      (``/dev/zero``, ``/dev/urandom``) or any other special file is refused at once: it has no end.
    * At most :data:`MAX_CONFIG_BYTES`: a training YAML is kilobytes; more is not one.
    * A pipe yields its bytes once: they are kept for this process, so every reader of the same
      path (the PyNative probe, the loader, the run's sha256 and copy, ``plan``'s writer) sees the
      same text instead of an empty second read.
    """
    if path in _READ_ONCE:
        return _READ_ONCE[path]
    try:
        fd = os.open(path, os.O_RDONLY)       # a FIFO with no writer blocks here, as `cat` does
    except OSError as exc:
        raise InputError(f"cannot read config: {exc.strerror}", file=path) from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError("cannot read config: Is a directory", file=path)
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            raise InputError("cannot read config: not a regular file or a pipe (a device has no end)", file=path)
        try:
            data = fh.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise InputError(f"cannot read config: {exc.strerror}", file=path) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(f"cannot read config: larger than {MAX_CONFIG_BYTES >> 20} MiB, "
                         "which no training YAML is", file=path)
    if not stat.S_ISREG(mode):
        _READ_ONCE[path] = data
    else:
        from .outputs import note_input

        note_input(path)
    return data


#: The bytes of the pipes read so far (path -> bytes): a pipe can be read only once.
_READ_ONCE: Dict[str, bytes] = {}


def forget_reads() -> None:
    """A new command starts (the CLI's main): ``/dev/stdin`` of the last one is not this one's."""
    _READ_ONCE.clear()


def read_config_text(path: str) -> str:
    """:func:`read_config_bytes` decoded as UTF-8 (a BOM is kept: YAML skips it)."""
    data = read_config_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("not a text (UTF-8) file", file=path, line=data.count(b"\n", 0, exc.start) + 1) from None


def read_yaml(path: str) -> Tuple[Any, Dict[str, int]]:
    """Parse ``path``; return (data, {dotted key path: line}). Errors: one-line ConfigError."""
    return parse_yaml(read_config_text(path), path)


def parse_yaml(text: str, path: str = "<string>") -> Tuple[Any, Dict[str, int]]:
    """Parse YAML text keeping the line of every mapping key and sequence item.

    As MindFormers' loader (PyYAML's ``SafeLoader``): an alias is the anchored object itself (one
    shared object, never a copy), and of duplicate keys the last one wins, its line is the one cited.
    Line marks are taken once per node, so aliases cost what they cost PyYAML; a file whose aliases
    would expand to more than :data:`MAX_ALIAS_VALUES` values for a reader walking the data (an
    alias bomb) is refused with one line (docs/reliability.md)."""
    lines: Dict[str, int] = {}
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:      # e.g. control characters: not a YAML text at all
        raise ConfigError(f"not a YAML text: {_first_line(exc)}", file=path) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, lines
        data = _Builder(loader, lines).build_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"YAML syntax error: {what}", file=path,
                          line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {_first_line(exc)}", file=path) from None
    except RecursionError:               # PyYAML's composer recurses: deep before our own bound sees it
        try:
            line: Optional[int] = loader.get_mark().line + 1      # where the reader got to
        except Exception:  # noqa: BLE001 - the line is a courtesy; the message stands without it
            line = None
        raise ConfigError(f"YAML nesting too deep (more than {MAX_DEPTH} levels)", file=path, line=line) from None
    except ConfigError as exc:            # raised by _builder, which does not know the file
        exc.file = exc.file or path
        raise
    finally:
        loader.dispose()
    return data, lines


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


_PLAIN_TAGS = (yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG)


class _Builder:
    """The document as plain data plus the line of every key, one visit per YAML node.

    PyYAML's composer already shares an aliased node; the builder keeps that sharing (a node built
    once is the same object wherever an alias names it) and counts what a reader walking the data
    would meet (``expanded``), so a 1.8 KB file of nested aliases (10**9 values) costs microseconds
    and one line instead of hours and the machine's memory."""

    def __init__(self, loader: yaml.SafeLoader, lines: Dict[str, int]) -> None:
        self.loader, self.lines = loader, lines
        #: id(node) -> (object, height of its nesting, values a walk of it meets)
        self.done: Dict[int, Tuple[Any, int, int]] = {}
        self.busy: set = set()
        self.fresh = 0
        self.worst: Tuple[int, int] = (0, 0)         # (values, line) of the largest repeated node

    def build_document(self, node: yaml.Node) -> Any:
        data, _height, size = self.build(node, "", 0)
        if size - self.fresh > MAX_ALIAS_VALUES:
            raise ConfigError(f"YAML aliases expand to {size:,} values (more than {MAX_ALIAS_VALUES:,} beyond the "
                              "file's own, an alias bomb?): swapwatch refuses to walk them",
                              line=self.worst[1] or None)
        return data

    def build(self, node: yaml.Node, path: str, depth: int) -> Tuple[Any, int, int]:
        """(object, nesting height, values) of ``node`` at key path ``path``, ``depth`` levels down."""
        line = node.start_mark.line + 1
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            self.fresh += 1
            try:
                return self.loader.construct_object(node, deep=True), 0, 1
            except ValueError as exc:         # e.g. an int past Python's 4,300-digit conversion limit
                why = _first_line(exc)
                if "digits" in why and isinstance(node, yaml.ScalarNode):
                    why = (f"an integer of {len(node.value):,} characters, past the 4,300 digits Python converts "
                           "(and far past any value MindFormers accepts)")
                raise ConfigError(f"cannot read this value: {why}", line=line, key=path or None) from None
        known = self.done.get(id(node))
        if known is not None:                 # an alias: the same object, its lines are the anchor's
            if depth + known[1] > MAX_DEPTH:
                raise ConfigError(f"YAML nesting too deep (more than {MAX_DEPTH} levels)", line=line,
                                  key=path or None)
            if known[2] > self.worst[0]:
                self.worst = (known[2], line)
            return known
        if id(node) in self.busy:
            raise ConfigError("a YAML alias names a collection that contains it (a recursive structure)",
                              line=line, key=path or None)
        if depth > MAX_DEPTH:
            raise ConfigError(f"YAML nesting too deep (more than {MAX_DEPTH} levels)", line=line, key=path or None)
        if node.tag not in _PLAIN_TAGS and node.tag not in type(self.loader).yaml_constructors:
            # e.g. ``!!python/tuple [...]``: MindFormers' SafeLoader refuses the file; so do we (with
            # its words and the line), instead of reading the list as plain data
            self.loader.construct_object(node, deep=True)
        self.busy.add(id(node))
        self.fresh += 1
        height, size = 0, 1
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)          # YAML merge keys (<<)
            out: Any = {}
            for knode, vnode in node.value:
                key, _, _ = self.build(knode, path, depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise ConfigError("a mapping key must be a plain value", line=knode.start_mark.line + 1,
                                      key=path or None) from None
                kp = f"{path}.{key}" if path else str(key)
                if key in out:                         # a duplicate: the last one wins (PyYAML's rule)
                    self._forget(kp)
                self.lines[kp] = knode.start_mark.line + 1
                out[key], h, n = self.build(vnode, kp, depth + 1)
                height, size = max(height, h + 1), size + 1 + n
        else:
            out = []
            for i, item in enumerate(node.value):
                kp = f"{path}[{i}]"
                self.lines.setdefault(kp, item.start_mark.line + 1)
                value, h, n = self.build(item, kp, depth + 1)
                out.append(value)
                height, size = max(height, h + 1), size + n
        self.busy.discard(id(node))
        self.done[id(node)] = (out, height, size)
        return out, height, size

    def _forget(self, kp: str) -> None:
        """The lines under an overridden duplicate key belong to a value nobody reads."""
        for k in [k for k in self.lines if k.startswith((kp + ".", kp + "["))]:
            del self.lines[k]


# ---------------------------------------------------------------------------------------------
# Public constructors
# ---------------------------------------------------------------------------------------------

def load_config(path: str, num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
                pp_interleave_num: Optional[int] = None, offset: Any = None,
                pipeline_interleave: Optional[bool] = None, check_rules: bool = True) -> TrainingConfig:
    """Load a MindFormers training YAML (a whole file or a fragment) into a validated config.

    The keyword arguments override the YAML (for fragments that lack the model or parallel
    sections). Raises :class:`ConfigError` (exit 2) with file, line and key path.
    """
    try:
        data, lines = read_yaml(path)
        if not isinstance(data, dict):
            raise ConfigError(f"expected a mapping of config sections at the top level, got {_kind(data)}",
                              file=path, line=1)
    except ConfigError:
        from .file_kind import reject_log_as_config

        reject_log_as_config(path)      # a worker log given as the config: name the command meant
        raise
    return _from_tree(data, lines, path, dict(num_layers=num_layers, pipeline_stage=pipeline_stage,
                                              pp_interleave_num=pp_interleave_num, offset=offset,
                                              pipeline_interleave=pipeline_interleave), check_rules)


def config_from_dicts(recompute_config: Optional[Mapping[str, Any]] = None,
                      swap_config: Optional[Mapping[str, Any]] = None,
                      parallel_config: Optional[Mapping[str, Any]] = None, *,
                      num_layers: Optional[int] = None, pipeline_stage: Optional[int] = None,
                      pp_interleave_num: Optional[int] = None, offset: Any = None,
                      pipeline_interleave: Optional[bool] = None,
                      geometry: Optional[Mapping[str, Any]] = None,
                      context: Optional[Mapping[str, Any]] = None,
                      source: Optional[str] = None, check_rules: bool = True) -> TrainingConfig:
    """Build a config from plain dicts, e.g. the log's ``initial ... from dict`` lines.

    ``geometry`` may carry the log's parsed ``num_layers per stage`` (``layer_list``) and
    ``Pipeline id list`` (``pp_ids``): the layer split is then taken as logged, and the layer
    count, stage count and interleave follow from it unless given explicitly. The pre-release key
    names ``select_recompute_off`` / ``select_comm_recompute_off`` are read as the exclude keys.
    """
    tree: Dict[str, Any] = {}
    for name, section in (("recompute_config", recompute_config), ("swap_config", swap_config),
                          ("parallel_config", parallel_config), ("context", context)):
        if section is not None and not isinstance(section, Mapping):
            # a damaged log line can parse as a list or a string
            raise ConfigError(f"the logged {name} is not a mapping: {_short(section)}", file=source,
                              key=name)
    if recompute_config is not None:
        rc = dict(recompute_config)
        for old, new in RENAMED_KEYS.items():
            if old in rc and new not in rc:
                rc[new] = rc.pop(old)
        tree["recompute_config"] = rc
    if swap_config is not None:
        sc = dict(swap_config)
        # an mcore log converts swap keys to TransformerConfig names
        for old, new in (("cpu_offloading", "swap"), ("cpu_offloading_num_layers", "layer_swap")):
            if old in sc and new not in sc:
                sc[new] = sc.pop(old)
        tree["swap_config"] = sc
    if parallel_config is not None:
        pc = dict(parallel_config)
        if isinstance(pc.get("recompute"), dict):
            # the log's parallel_config repr nests the recompute config; recompute_config wins
            nested = pc.pop("recompute")
            tree.setdefault("recompute_config", nested)
        tree["parallel_config"] = pc
    if context:
        tree["context"] = dict(context)
    layer_list = None
    if geometry:
        layer_list = _logged_layer_list(geometry, source)
        pp_ids = geometry.get("pp_ids")
        if num_layers is None:
            num_layers = len(pp_ids) if pp_ids else int(sum(sum(r) for r in layer_list))
        if pipeline_stage is None:
            pipeline_stage = len(layer_list[0])
        if pp_interleave_num is None:
            pp_interleave_num = len(layer_list)
        if pipeline_interleave is None:
            pipeline_interleave = len(layer_list) > 1
    cfg = _from_tree(tree, {}, source, dict(num_layers=num_layers, pipeline_stage=pipeline_stage,
                                             pp_interleave_num=pp_interleave_num, offset=offset,
                                             pipeline_interleave=pipeline_interleave), check_rules)
    cfg.layer_list = layer_list
    return cfg


def _logged_layer_list(geometry: Mapping[str, Any], source: Optional[str]) -> List[List[int]]:
    ll: Any = geometry.get("layer_list")
    try:
        rows = [[int(x) for x in row] for row in ll]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"the logged 'num_layers per stage' value {ll!r} is not a V x P table",
                          file=source) from None
    return rows


# ---------------------------------------------------------------------------------------------
# Finding keys and validating
# ---------------------------------------------------------------------------------------------

def _from_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
               overrides: Dict[str, Any], check_rules: bool) -> TrainingConfig:
    def err(key: str, message: str) -> ConfigError:
        return ConfigError(message, file=source, line=nearest(lines, key), key=key)

    model = _section(data, "model", err)
    model_config = _section(model, "model_config", err, prefix="model.") if model else {}
    hf, hf_path = _pretrained_config(data, source)
    yaml_mc_keys = set(model_config)
    if hf:
        # MindFormers merges the HF config.json under the YAML's model_config (the YAML wins):
        # models/build_config.py:merge_model_config
        model_config = {**hf, **model_config}
        data = dict(data, model=dict(model, model_config=model_config))
    parallel_config = _section(data, "parallel_config", err)
    parallel = _section(data, "parallel", err)
    pipeline_config = _section(parallel, "pipeline_config", err, prefix="parallel.") if parallel else {}
    context = _section(data, "context", err)

    # MindFormers' template validation comes first: unknown keys are the likeliest typo
    recompute, given_r = _template(data, "recompute_config", RECOMPUTE_DEFAULTS, err)
    if isinstance(parallel_config.get("recompute"), dict) and "recompute_config" not in data:
        recompute, given_r = _template({"recompute_config": parallel_config["recompute"]},
                                       "recompute_config", RECOMPUTE_DEFAULTS, err)
    swap, given_s = _template(data, "swap_config", SWAP_DEFAULTS, err)
    mcore = data.get("use_legacy") is False
    ignored_swap = ignored_prefetch = None
    if mcore:
        ignored_swap = {k: data["swap_config"][k] for k in given_s} if given_s else None
        swap, given_s, ignored_prefetch = _mcore_swap(model_config, err)

    # -- geometry -------------------------------------------------------------------------
    mc = "model.model_config"
    n_key = f"{mc}.num_layers" if "num_layers" in model_config or "num_hidden_layers" not in model_config \
        else f"{mc}.num_hidden_layers"
    num_layers = overrides["num_layers"]
    n_src = "--num-layers"
    if num_layers is None:
        num_layers = model_config.get("num_layers", model_config.get("num_hidden_layers"))
        n_src = n_key
    if num_layers is None:
        hint = " (this YAML takes it from pretrained_model_dir's config.json, which swapwatch does not " \
               "read)" if data.get("pretrained_model_dir") else ""
        raise ConfigError(f"the layer count is unknown{hint}: set model.model_config.num_layers in the YAML, "
                          "or pass --num-layers N for a fragment", file=source, key=f"{mc}.num_layers")
    num_layers = _positive_int(num_layers, n_src, err, limit=MAX_LAYERS, why=_LAYERS_WHY)
    mtp_depth = 0
    if overrides["num_layers"] is None and model_config.get("mtp_depth") not in (None, 0) and not mcore:
        # DeepSeek-style models hand num_layers + mtp_depth to LayerSetting (train/finetune)
        mtp_depth = _nonneg_int(model_config["mtp_depth"], f"{mc}.mtp_depth", err)
        num_layers = _positive_int(num_layers + mtp_depth, f"{mc}.mtp_depth", err, limit=MAX_LAYERS,
                                   why=_LAYERS_WHY + " (num_layers + mtp_depth)")

    pipeline_stage = overrides["pipeline_stage"]
    if pipeline_stage is None:
        p_key = "parallel_config.pipeline_stage"
        pipeline_stage = _positive_int(parallel_config.get("pipeline_stage", 1), p_key, err, limit=INT32_MAX)
    else:
        p_key = "--pipeline-stage"
        pipeline_stage = _positive_int(pipeline_stage, p_key, err, limit=INT32_MAX)

    pp_int = overrides["pp_interleave_num"]
    if pp_int is None:
        v_key = f"{mc}.pp_interleave_num"
        pp_int = _positive_int(model_config.get("pp_interleave_num", 1), v_key, err, limit=INT32_MAX)
    else:
        v_key = "--pp-interleave-num"
        pp_int = _positive_int(pp_int, v_key, err, limit=INT32_MAX)

    pipeline_interleave = overrides["pipeline_interleave"]
    if pipeline_interleave is None:
        pipeline_interleave = pipeline_config.get("pipeline_interleave", False)
        if not isinstance(pipeline_interleave, bool):
            raise err("parallel.pipeline_config.pipeline_interleave",
                      f"expected True or False, got {_kind(pipeline_interleave)} {pipeline_interleave!r}")
    if overrides["pipeline_interleave"] is None and overrides["pp_interleave_num"] is not None \
            and pp_int > 1 and "pipeline_interleave" not in pipeline_config:
        # --pp-interleave-num on a fragment means "the run has pipeline_interleave on"
        pipeline_interleave = True

    _check_chunks(num_layers, pipeline_stage, pp_int if pipeline_interleave else 1,
                  v_key if pipeline_interleave and pp_int > 1 else p_key, err)

    offset = overrides["offset"]
    o_key = "--offset"
    if offset is None:
        offset = model_config.get("offset", 0)
        o_key = f"{mc}.offset"
    _check_offset_type(offset, o_key, err)

    scheduler = pipeline_config.get("pipeline_scheduler")
    if scheduler == "zero_bubble_v":
        raise err("parallel.pipeline_config.pipeline_scheduler",
                  "pipeline_scheduler 'zero_bubble_v' reverses the second interleave's layer split; "
                  "swapwatch does not model it yet")

    # -- strategy sections ------------------------------------------------------------------
    parallel_recompute = None
    if "recompute" in parallel_config:
        pr = parallel_config["recompute"]
        if isinstance(pr, bool):
            parallel_recompute = pr
        elif not isinstance(pr, dict):
            raise err("parallel_config.recompute",
                      f"expected True/False (the legacy shortcut) or a recompute_config mapping, got {_kind(pr)}")

    ctx: Dict[str, Any] = {k: context[k] for k in ("mode", "memory_optimize_level", "device_target") if k in context}
    jit = context.get("jit_config")
    if isinstance(jit, dict) and "jit_level" in jit:
        ctx["jit_level"] = jit["jit_level"]

    cfg = TrainingConfig(recompute_config=recompute, swap_config=swap, num_layers=num_layers,
                         pipeline_stage=pipeline_stage, pp_interleave_num=pp_int,
                         pipeline_interleave=pipeline_interleave, offset=offset,
                         parallel_recompute=parallel_recompute, context=ctx,
                         pipeline_scheduler=scheduler, mtp_depth=mtp_depth, source=source,
                         lines=dict(lines), given={"recompute_config": given_r, "swap_config": given_s},
                         mcore=mcore, ignored_swap_config=ignored_swap,
                         ignored_default_prefetch=ignored_prefetch)
    cfg.tree, cfg.hf_source = data, hf_path
    cfg.hf_keys = frozenset(k for k in hf if k not in yaml_mc_keys) if hf else frozenset()
    from .families import detect

    def where_key(key: str) -> Optional[str]:
        leaf = key.rsplit(".", 1)[-1]
        if hf and key.startswith("model.model_config.") and leaf not in yaml_mc_keys and leaf in hf:
            return hf_path                # the value came from pretrained_model_dir/config.json
        return cfg.where(key)

    cfg.family = detect(data, where_key)
    if mcore and recompute.get("recompute_slice_activation") is True:
        raise err("recompute_config.recompute_slice_activation",
                  "recompute_slice_activation is not supported in Mcore (use_legacy: False); "
                  "MindFormers' TransformerConfig rejects it")
    validate(cfg, check_rules=check_rules)
    return cfg


#: mcore ``model_config`` swap keys: (TransformerConfig name, alias, swap_config meaning)
MCORE_SWAP_KEYS = (("cpu_offloading", "swap", "swap"), ("cpu_offloading_num_layers", "layer_swap", "layer_swap"),
                   ("op_swap", None, "op_swap"))


def _mcore_swap(model_config: Dict[str, Any], err) -> Tuple[Dict[str, Any], List[str], Any]:
    """The swap config mcore LayerSetting really gets (``parallel_core/training_graph/transformer/
    utils.py:LayerSetting.__init__``): ``TransformerSwapConfig(swap=cpu_offloading,
    layer_swap=cpu_offloading_num_layers, op_swap=op_swap)`` from ``model.model_config``, where
    ``swap`` / ``layer_swap`` are accepted aliases (``parallel_core/transformer_config_utils.py``
    COMMON_CONFIG_MAPPING). ``default_prefetch`` is converted but never passed on, so the default
    strategy always uses prefetch 1. Returns (swap config, keys given, ignored default_prefetch)."""
    mc = "model.model_config"
    out = dict(SWAP_DEFAULTS)
    given: List[str] = []
    for name, alias, meaning in MCORE_SWAP_KEYS:
        present = [k for k in (name, alias) if k and k in model_config]
        if len(present) == 2 and model_config[present[0]] != model_config[present[1]]:
            raise err(f"{mc}.{present[1]}", f"{present[1]} and {present[0]} are aliases of one TransformerConfig "
                                            f"key and disagree ({model_config[present[1]]!r} vs "
                                            f"{model_config[present[0]]!r}); MindFormers refuses the config")
        if present and model_config[present[0]] is not None:
            out[meaning] = model_config[present[0]]
            given.append(meaning)
    if out["swap"] is None:
        out["swap"] = False
    return out, given, model_config.get("default_prefetch")


def _pretrained_config(data: Dict[str, Any], source: Optional[str]) -> Tuple[Dict[str, Any], Optional[str]]:
    """(``pretrained_model_dir/config.json``, its path) when the YAML names such a directory and it
    is there (finetune YAMLs take the model's sizes and type from it); ({}, None) otherwise."""
    import os

    pdir = data.get("pretrained_model_dir")
    if not isinstance(pdir, str) or not pdir:
        return {}, None
    if not os.path.isabs(pdir) and source:
        pdir = os.path.join(os.path.dirname(os.path.abspath(source)), pdir) if not os.path.isdir(pdir) else pdir
    path = os.path.join(pdir, "config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            hf = json.load(fh)
    except (OSError, ValueError):
        return {}, None
    return (hf, path) if isinstance(hf, dict) else ({}, None)


def nearest(by_key: Mapping[str, Any], key: str) -> Any:
    """The value of dotted ``key`` in ``by_key`` or, failing that, of its closest enclosing key
    (``a.b.c``, then ``a.b``, then ``a``); None when none is there. The one walk every YAML reader
    uses to put a finding or an error on the nearest line the user wrote."""
    k = key
    while k:
        if k in by_key:
            return by_key[k]
        k = k.rpartition(".")[0]
    return None


def _section(data: Any, name: str, err, prefix: str = "") -> Dict[str, Any]:
    value = data.get(name) if isinstance(data, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise err(f"{prefix}{name}", f"expected a mapping, got {_kind(value)}")
    return value


def _template(data: Dict[str, Any], name: str, defaults: Dict[str, Any], err) -> Tuple[Dict[str, Any], List[str]]:
    """MindFormers' template step: None/empty -> defaults; unknown keys are rejected."""
    value = data.get(name)
    if value is None:
        return dict(defaults), []
    if not isinstance(value, dict):
        raise err(name, f"expected a mapping of {name} keys, got {_kind(value)}")
    for key in value:
        if key not in defaults:
            raise err(f"{name}.{key}", _unknown_key_message(key, defaults))
    out = dict(defaults)
    out.update(value)
    return out, list(value)


def _unknown_key_message(key: Any, known: Iterable[str]) -> str:
    if key in RENAMED_KEYS:
        return f"unknown key; it was renamed to '{RENAMED_KEYS[key]}' before any release"
    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    return f"unknown key (MindFormers rejects it); known keys: {', '.join(known)}"


_LAYERS_WHY = f"swapwatch plans at most {MAX_LAYERS} layers (one entry per layer; real models have ~100)"


def _positive_int(value: Any, key: str, err, limit: Optional[int] = None, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise err(key, f"expected a positive integer, got {_kind(value)} {_short(value)}")
    if value < 1:
        raise err(key, f"expected a positive integer, got {value}")
    if limit is not None and value > limit:
        raise err(key, f"{_short(value)} is too large: " +
                  (why or f"MindFormers keeps it in an int32 array (at most {limit})"))
    return value


def _short(value: Any, width: int = 60) -> str:
    """``repr`` cut to ``width`` characters: a one-line error must stay one readable line."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 4] + " ..."


def _check_chunks(num_layers: int, stages: int, interleave: int, key: str, err) -> None:
    """MindFormers' ``_check_inputs``: every chunk but the first and the last needs a layer, so
    more than ``num_layers + 2`` chunks can never be split (checked here, before any table of
    ``stages x interleave`` entries is built: 10**9 stages would otherwise exhaust memory)."""
    chunks = stages * interleave
    if chunks > 2 and chunks - 2 > num_layers:
        raise err(key, f"{stages} pipeline stage(s) x {interleave} interleave(s) = {chunks} chunks for "
                       f"{num_layers} layer(s): MindFormers needs at least one layer in every chunk but "
                       f"the first and the last")


def _nonneg_int(value: Any, key: str, err) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise err(key, f"expected a non-negative integer, got {value!r}")
    return value


def _check_offset_type(offset: Any, key: str, err) -> None:
    """An int, a list of ints, or a list of equally long lists of ints (what np.array accepts)."""
    def is_int(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    def check_range(values: List[int]) -> None:
        for x in values:
            if not -INT32_MAX - 1 <= x <= INT32_MAX:
                raise err(key, f"offset {_short(x)} does not fit MindFormers' int32 offset array")

    if is_int(offset):
        return check_range([offset])
    if isinstance(offset, list) and all(is_int(x) for x in offset):
        return check_range(offset)
    if isinstance(offset, list) and offset and all(isinstance(r, list) and all(is_int(x) for x in r) for r in offset):
        if len({len(r) for r in offset}) == 1:
            return check_range([x for r in offset for x in r])
        raise err(key, f"the rows of a 2-D offset must be equally long, got {_short(offset)}")
    raise err(key, f"expected an int, a list of ints (one per stage) or a list of such lists "
                   f"(one per interleave), got {_short(offset)}")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a bool", int: "an int",
            float: "a float", type(None): "nothing (null)"}.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------------
# TransformerSwapConfig normalisation (built even when swap is off): done once, in validate(), and
# stored on the config (TrainingConfig.swap_strategy); the engine takes it from there
# ---------------------------------------------------------------------------------------------

#: The default swap strategy's op pattern (used when neither layer_swap nor op_swap is given).
DEFAULT_OP_SWAP = r".*\.flash_attention"


class SwapStrategy(NamedTuple):
    """The swap config as MindFormers' ``TransformerSwapConfig`` (modules/transformer/transformer.py)
    leaves it: ``layer_swap`` a list of ``{backward_prefetch, layers}``, ``op_swap`` those grouped by
    op pattern."""

    layer_swap: List[Dict[str, Any]]
    op_swap: Dict[str, List[Dict[str, Any]]]


def normalize_swap_config(swap_config: Mapping[str, Any], cfg: Any = None) -> SwapStrategy:
    """``(layer_swap, op_swap)`` as MindFormers' ``TransformerSwapConfig`` leaves them.

    Default strategy when both are None: no layer swap, ``.*\\.flash_attention`` on every layer with
    ``default_prefetch``. A dict becomes a one-item list. op_swap entries are regrouped by op
    name (a list ``op_name`` fans out). A group (or the layer_swap list) that has ``layers: True``
    collapses to that one entry with the first prefetch; mixing ``layers: True`` with a different
    prefetch is an error.
    """
    err = cfg.error if cfg is not None else (lambda key, message: ConfigError(message, key=key))
    ls_raw, os_raw = swap_config.get("layer_swap"), swap_config.get("op_swap")
    if ls_raw is None and os_raw is None:
        return SwapStrategy([], {DEFAULT_OP_SWAP: [{"backward_prefetch": swap_config.get("default_prefetch", 1),
                                                    "layers": True}]})
    layer_swap: List[Dict[str, Any]] = []
    if ls_raw is not None:
        if not isinstance(ls_raw, (list, dict)):
            raise err("swap_config.layer_swap", f"must be a list of {{backward_prefetch, layers}} entries "
                                                f"(or one such mapping), got {ls_raw!r}")
        items = [ls_raw] if isinstance(ls_raw, dict) else list(ls_raw)
        keys = [f"swap_config.layer_swap[{i}]" for i in range(len(items))] if isinstance(ls_raw, list) \
            else ["swap_config.layer_swap"]
        if _consistent(items, keys, "layer_swap", err):
            layer_swap = [{"backward_prefetch": items[0]["backward_prefetch"], "layers": True}]
        else:
            layer_swap = items
    op_swap: Dict[str, List[Dict[str, Any]]] = {}
    if os_raw is not None:
        if not isinstance(os_raw, (list, dict)):
            raise err("swap_config.op_swap", f"must be a list of {{op_name, backward_prefetch, layers}} "
                                             f"entries (or one such mapping), got {os_raw!r}")
        items = [os_raw] if isinstance(os_raw, dict) else list(os_raw)
        keyof: Dict[str, List[str]] = {}
        for i, item in enumerate(items):
            key = f"swap_config.op_swap[{i}]" if isinstance(os_raw, list) else "swap_config.op_swap"
            if not isinstance(item, dict):
                raise err(key, f"each op_swap entry must be a mapping with op_name, backward_prefetch "
                               f"and layers, got {item!r}")
            if "op_name" not in item:
                raise err(key, "op_swap entry has no op_name" + _did_you_mean(item, "op_name"))
            names = item["op_name"]
            if isinstance(names, (list, tuple)):
                if not all(isinstance(n, str) for n in names):
                    raise err(f"{key}.op_name", f"every op_name in the list must be a string, got {names!r}")
            elif not isinstance(names, str):
                raise err(f"{key}.op_name", f"op_name must be a pattern string or a list of them, got {names!r}")
            for name in ([names] if isinstance(names, str) else names):
                op_swap.setdefault(name, []).append(
                    {"layers": item.get("layers"), "backward_prefetch": item.get("backward_prefetch")})
                keyof.setdefault(name, []).append(key)
        for name, group in op_swap.items():
            if _consistent(group, keyof[name], f"op_swap: {name}", err):
                op_swap[name] = [{"backward_prefetch": group[0]["backward_prefetch"], "layers": True}]
    return SwapStrategy(layer_swap, op_swap)


def _consistent(items: List[Any], keys: List[str], mode: str, err) -> bool:
    """MindFormers' consistency walk; True when some entry has ``layers: True`` (-> collapse)."""
    prev = None
    any_true = False
    differs = False
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise err(keys[i], f"each {mode.split(':')[0]} entry must be a mapping with backward_prefetch and "
                               f"layers, got {item!r}")
        if prev is not None and prev != item.get("backward_prefetch"):
            differs = True
        layers = item.get("layers")
        if not isinstance(layers, (list, tuple, bool)):
            hint = _did_you_mean(item, "layers") if "layers" not in item else ""
            raise err(f"{keys[i]}.layers", f"{mode}: layers must be True/False or a list of layer ids, "
                                           f"got {layers!r}{hint}")
        if isinstance(layers, (list, tuple)) and not (_ints(layers) or all(
                isinstance(x, (list, tuple)) and _ints(x) for x in layers)):
            raise err(f"{keys[i]}.layers", f"{mode}: layers must be a list of integer layer ids, got {layers!r}")
        if isinstance(layers, bool) and layers:
            any_true = True
        if differs and any_true:
            raise err(keys[i], f"{mode}: entry {i} makes the prefetch inconsistent: when one entry has "
                               f"'layers: True' every entry must use the same backward_prefetch "
                               f"(MindFormers: Invalid {mode} configuration at index {i})")
        if "backward_prefetch" not in item:
            raise err(keys[i], f"{mode}: entry has no backward_prefetch" + _did_you_mean(item, "backward_prefetch"))
        prev = item["backward_prefetch"]
    return any_true


def _ints(seq: Sequence[Any]) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in seq)


def _did_you_mean(item: Dict[str, Any], wanted: str) -> str:
    close = difflib.get_close_matches(wanted, [str(k) for k in item], n=1, cutoff=0.6)
    return f" (is '{close[0]}' a misspelling of '{wanted}'?)" if close else ""


# ---------------------------------------------------------------------------------------------
# What MindFormers rejects before LayerSetting: config classes and the train-path check_rules
# ---------------------------------------------------------------------------------------------

def validate(cfg: TrainingConfig, check_rules: bool = True) -> None:
    """Raise ConfigError for what MindFormers' config classes and ``check_rules`` reject."""
    rc, sc = cfg.recompute_config, cfg.swap_config
    for key in RECOMPUTE_BOOL_KEYS:
        if not isinstance(rc.get(key), bool):
            raise cfg.error(f"recompute_config.{key}", f"must be True or False, got {rc.get(key)!r}")
    if not isinstance(sc.get("swap"), bool):
        raise cfg.error("swap_config.swap", f"must be True or False, got {sc.get('swap')!r}")
    if cfg.parallel_recompute is not None and sc["swap"]:
        raise cfg.error("parallel_config.recompute",
                        "a plain-bool parallel_config.recompute cannot be combined with swap: MindFormers' "
                        "swap/recompute conflict check needs a recompute_config (it crashes with "
                        "AttributeError); move the setting to recompute_config.recompute")
    # TransformerSwapConfig is built even when swap is off, so its errors always apply; the result
    # is kept on the config for the engine
    layer_swap, op_swap = cfg.swap_strategy
    if cfg.mcore:
        # check_rules only sees the top-level swap_config (ignored by mcore LayerSetting): with
        # cpu_offloading on, the recompute lists still get the per-stage length rule, and a
        # model-level backward_prefetch 'Auto' passes (tools/check_rules.py:_check_recompute)
        sc = dict(SWAP_DEFAULTS, **(cfg.ignored_swap_config or {}))
        if not isinstance(sc.get("swap"), bool):
            raise cfg.error("swap_config.swap", f"must be True or False, got {sc.get('swap')!r}")
        layer_swap, op_swap = normalize_swap_config(sc, cfg)
    if not check_rules:
        return
    if not sc["swap"]:
        for key in ("recompute", "select_recompute", "select_comm_recompute"):
            value = rc[key]
            if isinstance(value, list) and len(value) > cfg.pipeline_stage and \
                    all(isinstance(n, int) for n in value):
                raise cfg.error(f"recompute_config.{key}",
                                f"has {len(value)} per-stage counts but there are only "
                                f"{cfg.pipeline_stage} pipeline stage(s); MindFormers rejects a list longer "
                                f"than pipeline_stage")
        return
    for key in ("recompute", "select_recompute", "select_comm_recompute"):
        _rule_layer_ids(cfg, rc[key], f"recompute_config.{key}")
    dp = sc["default_prefetch"]
    if not isinstance(dp, int) or dp < 1:
        raise cfg.error("swap_config.default_prefetch",
                        f"must be an integer >= 1 when swap is on, got {_short(dp)}")
    if dp > INT64_MAX:
        raise cfg.error("swap_config.default_prefetch", _PREFETCH_TOO_LARGE.format(_short(dp)))
    if sc.get("layer_swap") is not None and not isinstance(sc["layer_swap"], (list, dict)):
        raise cfg.error("swap_config.layer_swap", "must be a list of {backward_prefetch, layers} entries")
    for i, item in enumerate(layer_swap):
        _rule_swap_entry(cfg, item, f"swap_config.layer_swap[{i}]" if isinstance(sc.get("layer_swap"), list)
                         else "swap_config.layer_swap", "layer_swap")
    for name, entries in op_swap.items():
        for item in entries:
            _rule_swap_entry(cfg, item, _op_swap_key(sc, name), f"op_swap({name})")


def _op_swap_key(sc: Dict[str, Any], name: str) -> str:
    raw = sc.get("op_swap")
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            if isinstance(item, dict):
                names = item.get("op_name")
                if names == name or (isinstance(names, (list, tuple)) and name in names):
                    return f"swap_config.op_swap[{i}]"
    return "swap_config.op_swap"


def _rule_layer_ids(cfg: TrainingConfig, value: Any, key: str) -> None:
    """Under swap, recompute values are layer ids: a bool, a list of ints, or {pattern: [ints]}."""
    if isinstance(value, bool):
        return
    if isinstance(value, (list, tuple)):
        for obj in value:
            if not isinstance(obj, int):
                raise cfg.error(key, f"with swap on this is a list of layer ids, so every item must be an "
                                     f"integer; got {obj!r}")
        return
    if isinstance(value, dict):
        for pattern, ids in value.items():
            if not isinstance(pattern, str):
                raise cfg.error(key, f"pattern {pattern!r} must be a string")
            if not isinstance(ids, list):
                raise cfg.error(f"{key}.{pattern}",
                                f"with swap on each pattern needs a list of layer ids, got {ids!r} "
                                f"(MindFormers' check_rules: layer info must be list when enabling swap)")
        return
    raise cfg.error(key, f"with swap on this must be a bool, a list of layer ids or a "
                         f"{{pattern: [layer ids]}} mapping, got {value!r}")


def _rule_swap_entry(cfg: TrainingConfig, item: Dict[str, Any], key: str, label: str) -> None:
    layers = item.get("layers")
    if isinstance(layers, (list, tuple)):
        for obj in layers:
            if not isinstance(obj, int):
                raise cfg.error(f"{key}.layers", f"{label}: layers must be a flat list of layer ids, got {layers!r}")
    p = item.get("backward_prefetch")
    if not isinstance(p, int) or p < 1:
        raise cfg.error(f"{key}.backward_prefetch",
                        f"{label}: backward_prefetch in swap_config must be an integer >= 1, got {_short(p)}"
                        + (" (MindFormers' check_rules rejects 'Auto' in swap_config; only models that read "
                           "their swap settings from model.model_config take it there)" if p == "Auto" else ""))
    if p > INT64_MAX:
        raise cfg.error(f"{key}.backward_prefetch", f"{label}: " + _PREFETCH_TOO_LARGE.format(_short(p)))


_PREFETCH_TOO_LARGE = "backward_prefetch {} is too large: MindSpore stores it as a C++ long (at most 2**63-1)"


def parse_offset(text: str) -> Any:
    """``--offset`` on the command line: JSON (``2``, ``[1,0,0,1]``, ``[[0,1],[1,0]]``)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):     # RecursionError: JSON nested thousands deep
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise InputError(f"--offset must be JSON (e.g. 1, [1,0,0,1] or [[0,1],[1,0]]), got {shown!r}") from None


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
        from .families import apply_log_family

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
