"""JSON that swapwatch reads from the user's disk, read bounded and checked: ``run.json`` of a run
directory, a DryRun record given to ``--calibrate``, a finetune YAML's ``config.json``.

Why one reader: a JSON file is input like a YAML, and the same promises hold (docs/reliability.md,
"Bounds on input"): a device (``run.json -> /dev/zero``) is refused at once, a file larger than
:data:`MAX_JSON_BYTES` is one line, nesting past :data:`MAX_DEPTH` is one line (Python's decoder
recurses: 100,000 ``[`` were a RecursionError, exit 3), and a value of the wrong type where
swapwatch reads it (``"exit_code": {}``) is one line naming the key, never an internal error in
whichever command reads it first. Every failure is an :class:`~swapwatch.errors.InputError`.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import InputError

#: Largest JSON file read: a run.json is kilobytes (a 10,000-rank job's ``ranks`` ~60 KB), a DryRun
#: record less; the same bound as a training YAML's (config.load.MAX_CONFIG_BYTES).
MAX_JSON_BYTES = 16 * 2 ** 20
#: Deepest nesting accepted (run.json nests three levels): the same bound as YAML nesting.
MAX_DEPTH = 64


def read_bytes(path: str, what: str) -> bytes:
    """The bytes of ``path``: a regular file or a pipe, at most :data:`MAX_JSON_BYTES` (``what``
    names the file in the error line, e.g. ``run.json``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"cannot read {what}: Is a directory", file=path)
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise InputError(f"cannot read {what}: not a regular file or a pipe (a device has no end)", file=path)
        chunks: List[bytes] = []
        got = 0
        while got <= MAX_JSON_BYTES:
            piece = os.read(fd, min(1 << 20, MAX_JSON_BYTES + 1 - got))
            if not piece:
                break
            chunks.append(piece)
            got += len(piece)
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    finally:
        os.close(fd)
    if got > MAX_JSON_BYTES:
        raise InputError(f"cannot read {what}: larger than {MAX_JSON_BYTES >> 20} MiB, which no {what} is",
                         file=path)
    return b"".join(chunks)


def loads(data: bytes, path: str, what: str) -> Any:
    """``data`` decoded as JSON, nested at most :data:`MAX_DEPTH` levels."""
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {what}: not a text (UTF-8) file", file=path,
                         line=data.count(b"\n", 0, exc.start) + 1) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"cannot read {what}: {exc.msg} (column {exc.colno})", file=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError(f"cannot read {what}: JSON nested deeper than {MAX_DEPTH} levels", file=path) from None
    except ValueError as exc:           # a number past Python's 4,300-digit conversion limit
        raise InputError(f"cannot read {what}: {exc}", file=path) from None
    if depth(value) > MAX_DEPTH:
        raise InputError(f"cannot read {what}: JSON nested deeper than {MAX_DEPTH} levels", file=path)
    return value


def read(path: str, what: str) -> Any:
    """The JSON document at ``path``, bounded (:func:`read_bytes`, :func:`loads`)."""
    return loads(read_bytes(path, what), path, what)


def depth(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    todo: List[Tuple[Any, int]] = [(value, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        d += 1
        if d > deepest:
            deepest = d
            if d > MAX_DEPTH:
                return d
        todo.extend((x, d) for x in v if isinstance(x, (dict, list)))
    return deepest


# ---------------------------------------------------------------------------------------------
# run.json
# ---------------------------------------------------------------------------------------------

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _opt(check: Check) -> Check:
    return lambda v: v is None or check(v)


def _list_of(check: Check) -> Check:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _obj(v: Any) -> bool:
    return isinstance(v, dict)


#: The keys of run.json (DESIGN §3.3b) that swapwatch reads, and the type each must have; any other
#: key is kept as it is (a newer swapwatch may add some). ``config`` has its own keys below.
RUN_JSON_KEYS: Dict[str, Tuple[Check, str]] = {
    "swapwatch": (_opt(_str), "a string"),
    "command": (_list_of(_str), "a list of strings"),
    "cwd": (_opt(_str), "a string"),
    "run_dir": (_opt(_str), "a string"),
    "config": (_opt(_obj), "an object or null"),
    "env": (_opt(_obj), "an object"),
    "start": (_opt(_str), "a string or null"),
    "end": (_opt(_str), "a string or null"),
    "exit_code": (_opt(_int), "an int or null"),
    "child_exit_code": (_opt(_int), "an int or null"),
    "worker_exit_code": (_opt(_int), "an int or null"),
    "interrupted": (_opt(_str), "a signal name or null"),
    "interrupted_signal": (_opt(_int), "an int or null"),
    "launcher": (_opt(_str), "a string or null"),
    "world_size": (_opt(_int), "an int"),
    "worker_num": (_opt(_int), "an int"),
    "local_worker_num": (_opt(_int), "an int"),
    "ranks": (_opt(_list_of(_int)), "a list of ints or null"),
    "found_ranks": (_opt(_list_of(_int)), "a list of ints or null"),
    "msrun_log_dir": (_opt(_str), "a string or null"),
    "ir_dir": (_opt(_str), "a string or null"),
    "verify": (_opt(_obj), "an object or null"),
    "leftover_killed": (_opt(_list_of(_int)), "a list of ints"),
    "pid": (_opt(_int), "an int or null"),
    "notes": (_opt(_list_of(_str)), "a list of strings"),
    "report": (_opt(_str), "a string or null"),
    "streams": (_opt(_obj), "an object"),
    "signals_passed": (_opt(_obj), "an object (signal name: times)"),
}
RUN_JSON_CONFIG_KEYS: Dict[str, Tuple[Check, str]] = {
    "path": (_opt(_str), "a string"),
    "sha256": (_opt(_str), "a string or null"),
    "copy": (_opt(_str), "a string"),
}


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a bool", int: "an int",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def check_run_json(info: Any, path: str) -> Dict[str, Any]:
    """``info`` when it is a run.json object whose known keys have their types, else one line."""
    if not isinstance(info, dict):
        raise InputError(f"run.json is not a JSON object (got {_type_name(info)})", file=path)
    for keys, obj, prefix in ((RUN_JSON_KEYS, info, ""),
                              (RUN_JSON_CONFIG_KEYS, info.get("config") or {}, "config.")):
        for key, (ok, want) in keys.items():
            if key in obj and not ok(obj[key]):
                raise InputError(f"run.json: expected {want}, got {_type_name(obj[key])}", file=path,
                                 key=prefix + key)
    return info


def read_run_json(run_dir: str) -> Optional[Dict[str, Any]]:
    """``run_dir/run.json`` read and checked; None when there is none (not a ``swapwatch run``
    directory). Anything there that is not a run.json is one line."""
    path = os.path.join(run_dir, "run.json")
    if not os.path.lexists(path):
        return None
    return check_run_json(read(path, "run.json"), path)
