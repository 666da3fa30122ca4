"""The YAML of a training config, read once, bounded, with the line of every key.

Why: every error and finding names ``file:line`` and the key path; a device or a pipe given as
the config ends in one line; an alias bomb or deep nesting is refused (docs/reliability.md).
"""
from __future__ import annotations

import copy
import json
import os
import stat
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from .. import command_scope as _scope
from ..errors import ConfigError, InputError


#: Deepest nesting of YAML collections accepted: real training YAMLs nest about five levels, and
#: a bound that does not depend on the interpreter's recursion limit keeps deep input one clear line.
MAX_DEPTH = 64
#: Largest config file read: real training YAMLs are a few kilobytes; a device or an endless pipe
#: given as a config must end in one line, not in the machine's memory (docs/reliability.md).
MAX_CONFIG_BYTES = 16 * 2 ** 20
#: Values a walk of the data may meet beyond the file's own nodes through aliases: PyYAML shares
#: an aliased object, but every reader that walks the data (diff, the line marks) expands it.
MAX_ALIAS_VALUES = 1_000_000


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
    if _scope.active() and path in _READ_FILES:
        known, kept = _READ_FILES[path]
        try:
            if _identity(os.stat(path)) == known:
                return kept
        except OSError:
            pass                              # gone meanwhile: the read below says so
    try:
        fd = os.open(path, os.O_RDONLY)       # a FIFO with no writer blocks here, as `cat` does
    except OSError as exc:
        raise InputError(f"cannot read config: {exc.strerror}", file=path) from None
    # the kind of file is decided on the descriptor, before ``fdopen``: it refuses a directory
    # itself (IsADirectoryError), which would be exit 3 instead of the one line below
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise InputError(f"cannot read config: {exc.strerror}", file=path) from None
    mode = st.st_mode
    why = ("Is a directory" if stat.S_ISDIR(mode) else None if stat.S_ISREG(mode) or stat.S_ISFIFO(mode)
           or stat.S_ISSOCK(mode) else "not a regular file or a pipe (a device has no end)")
    if why is not None:
        os.close(fd)
        raise InputError(f"cannot read config: {why}", file=path)
    with os.fdopen(fd, "rb") as fh:
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
        from ..commands.outputs import note_input

        note_input(path)
        if _scope.active():
            _READ_FILES[path] = (_identity(st), data)
    return data


def _identity(st: os.stat_result) -> Tuple[int, int, int, int]:
    """A regular file's identity for the command's one reading: a file the command itself
    rewrites (tune's attempt YAMLs, a test's fixture) is read again."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


#: The bytes of the pipes read so far (path -> bytes): a pipe can be read only once.
_READ_ONCE: Dict[str, bytes] = {}
#: Within one command (the CLI's main): the bytes of the regular files read, and the parsed
#: documents (text -> (data, lines)) and their composed nodes (text -> root node). A command
#: reads and parses its YAML once, whoever asks (the PyNative probe, the loader, diff's document,
#: the memory model, the planner's writer):
#: one reading, so no two readers of one command can see two versions of a file edited meanwhile.
_READ_FILES: Dict[str, Tuple[Tuple[int, int, int, int], bytes]] = {}
_PARSED: Dict[str, Tuple[Any, Dict[str, int]]] = {}
_NODES: Dict[str, yaml.Node] = {}


_PER_COMMAND: List[Dict[Any, Any]] = [_READ_ONCE, _READ_FILES, _PARSED, _NODES]


def per_command(registry: Dict[Any, Any]) -> Dict[Any, Any]:
    """``registry`` is emptied with the reads when a command starts or ends (e.g. the configs
    ``tree.load_config`` made); returns it."""
    _PER_COMMAND.append(registry)
    return registry


def command_scope() -> bool:
    """Is a CLI command running (its files read once, ``swapwatch.command_scope``)? A library caller
    outside a command reads afresh each time (a file it rewrites between two calls is read again)."""
    return _scope.active()


def forget_reads(command: bool = True) -> None:
    """A new command starts (the CLI's main, ``command=True``) or ended (``command=False``):
    ``/dev/stdin`` of the last one is not this one's, nor are the files it read."""
    for registry in _PER_COMMAND:
        registry.clear()
    _scope.set_active(command)


def read_config_text(path: str) -> str:
    """:func:`read_config_bytes` decoded as UTF-8 (a BOM is kept: YAML skips it)."""
    data = read_config_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("not a text (UTF-8) file", file=path, line=data.count(b"\n", 0, exc.start) + 1) from None


def read_yaml(path: str) -> Tuple[Any, Dict[str, int]]:
    """Parse ``path``; return (data, {dotted key path: line}). Errors: one-line ConfigError.
    Within a command, read and parsed once (:func:`read_config_bytes`, :func:`parse_yaml`)."""
    return parse_yaml(read_config_text(path), path)


def parse_yaml(text: str, path: str = "<string>") -> Tuple[Any, Dict[str, int]]:
    """Parse YAML text keeping the line of every mapping key and sequence item (:func:`_parse_yaml`).

    Within a command a text is parsed once (:data:`_PARSED`), whoever asks: the PyNative probe, the
    loader, diff's document, the planner's writer (``memory/emit.py``, which also splices into the
    composed nodes, :func:`composed`). Each caller gets its own copy of the data (``copy.deepcopy``
    keeps an alias one shared object, as the parse made it)."""
    if _scope.active() and text in _PARSED:
        data, lines = _PARSED[text]
        return copy.deepcopy(data), dict(lines)
    data, lines, node = _parse_yaml(text, path)
    if _scope.active():
        _PARSED[text] = (copy.deepcopy(data), dict(lines))
        if node is not None:
            _NODES[text] = node
    return data, lines


def composed(text: str) -> Optional[yaml.Node]:
    """The composed root node of ``text`` when this command parsed it already (None otherwise, or
    when its YAML merge keys (``<<``) were flattened into it: then it is not the text's own tree).
    Read only: the writer takes its key marks from it."""
    return _NODES.get(text) if _scope.active() else None


def _parse_yaml(text: str, path: str) -> Tuple[Any, Dict[str, int], Optional[yaml.Node]]:
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
            return {}, lines, None
        builder = _Builder(loader, lines)
        data = builder.build_document(node)
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
    return data, lines, None if builder.merged else node


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
        self.merged = False                          # a merge key (<<) was flattened into the nodes

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
            if any(k.tag == "tag:yaml.org,2002:merge" for k, _ in node.value):
                self.merged = True                     # the node tree is changed below
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


def mapping(value: Any) -> Dict[str, Any]:
    """``value`` when it is a mapping, else an empty one (a YAML may hold anything anywhere): the typed way
    to step into a section that may be missing or malformed."""
    return value if isinstance(value, dict) else {}


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


def _short(value: Any, width: int = 60) -> str:
    """``repr`` cut to ``width`` characters: a one-line error must stay one readable line."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 4] + " ..."


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a bool", int: "an int",
            float: "a float", type(None): "nothing (null)"}.get(type(value), type(value).__name__)


def parse_offset(text: str) -> Any:
    """``--offset`` on the command line: JSON (``2``, ``[1,0,0,1]``, ``[[0,1],[1,0]]``)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):     # RecursionError: JSON nested thousands deep
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise InputError(f"--offset must be JSON (e.g. 1, [1,0,0,1] or [[0,1],[1,0]]), got {shown!r}") from None
