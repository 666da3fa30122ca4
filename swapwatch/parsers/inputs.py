"""What the user pointed at -> the log files to parse, their ranks, and what the launch expected.

Accepted (DESIGN §3.1): worker log files (plain or ``.gz``), msrun log directories
(``worker_*.log`` + ``scheduler.log``), run directories written by ``swapwatch run`` (``run.json``
plus an ``msrun/`` or ``logs/`` subdirectory — we look up to two levels down, so other layouts
work too), MindFormers ``output/log/rank_N/info.log`` trees, and several nodes' directories at
once. Anything that holds no log, or cannot be read, is an :class:`InputError` naming the path.
"""
from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import InputError
from ..json_input import read_run_json
from ..commands.outputs import note_input
from . import msrun

HEAD_BYTES = 1 << 20
_WORKER_RE = re.compile(r"^worker_\d+\.log(?:\.gz)?$")
_LOG_RE = re.compile(r"\.(?:log|out)(?:\.\d+)?(?:\.gz)?$")
_SKIP_DIRS = {"__pycache__", ".git", "ir", "graphs", "rank_graphs"}


@dataclass
class LogFile:
    path: str
    display: str                 # how sources name it (relative to what the user gave)
    role: str = "rank"           # "rank" | "scheduler"
    name_rank: Optional[int] = None
    gz: bool = False
    size: int = 0
    #: the stdout copy this file is the stderr of (a ``swapwatch run`` directory's
    #: ``console.stderr.log`` beside its ``console.log``): one process, so one rank, whichever
    #: stream names it (:func:`swapwatch.parsers.reader.read_logs`)
    partner: Optional[str] = None
    #: ``stdout`` / ``stderr`` for the two stream copies of a run directory, else None
    stream: Optional[str] = None


@dataclass
class Inputs:
    files: List[LogFile] = field(default_factory=list)
    run_info: Dict[str, Any] = field(default_factory=dict)
    expected_ranks: Optional[List[int]] = None
    label: str = ""


def open_binary(path: str):
    """A binary stream of a log, transparently gunzipping ``.gz`` files."""
    if path.endswith(".gz"):
        return GzipUntilCut(path)
    return open(path, "rb", buffering=0)


class GzipUntilCut:
    """A ``.gz`` log read as far as it goes: a file cut off mid-stream (a crash, a full disk, a copy
    that stopped) ends where its data ends, like a truncated plain log, so that rank is reported
    on its own (its strategy block stops: SW106) instead of the whole verify stopping. A file that
    is no gzip at all, or whose data is corrupt, still raises (one line, exit 2)."""

    def __init__(self, path: str) -> None:
        self._f = gzip.open(path, "rb")  # noqa: SIM115 - closed by close() / __exit__
        self.cut: Optional[str] = None          # why the data ended early, when it did

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all with -1); at the cut, what came before it (``read1`` steps, so
        the bytes decompressed before the error are never dropped with it)."""
        got = bytearray()
        while self.cut is None and (n < 0 or len(got) < n):
            try:
                piece = self._f.read1(1 << 16 if n < 0 else min(1 << 16, n - len(got)))
            except EOFError as exc:
                self.cut = str(exc)
                break
            if not piece:
                break
            got += piece
        return bytes(got)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "GzipUntilCut":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_head(path: str, n: int = HEAD_BYTES, stream: Any = None) -> bytes:
    """The first ``n`` (decompressed) bytes; an unreadable file is an InputError. ``stream``: the
    file already open at its start (it is left after the bytes read)."""
    try:
        if stream is not None:
            return stream.read(n)
        with open_binary(path) as f:
            return f.read(n)
    except (OSError, EOFError, zlib.error) as exc:
        raise unreadable(exc, path) from None


def unreadable(exc: BaseException, path: str) -> InputError:
    """The one line for a log that cannot be read, wherever the read failed (its head here, its body in the
    scan workers): a damaged ``.gz`` (``gzip.BadGzipFile``, ``zlib.error``) is not valid gzip data, an OS error
    is said as it is."""
    if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        return InputError(f"cannot read log: not valid gzip data ({exc})", file=path)
    return InputError(f"cannot read log: {exc.__class__.__name__}: {exc}", file=path)


def silence(paths: Sequence[str]) -> str:
    """Why logs that gave no MindFormers event say nothing, in words for an error line: a ``.gz``
    whose data is cut short (a copy that stopped) says so, and a log of MindFormers records with
    no strategy, config or step line says what it lacks instead of "no MindFormers line"."""
    from .scanner import is_prefixed

    cut: List[Tuple[str, int]] = []
    prefixed = False
    for p in paths[:16]:                   # what the first logs are like: enough to say which
        try:
            if p.endswith(".gz"):
                with GzipUntilCut(p) as f:
                    head = f.read(HEAD_BYTES)
                    if f.cut:
                        cut.append((p, len(head)))
            else:
                head = read_head(p)
        except (InputError, OSError):
            continue
        prefixed = prefixed or is_prefixed(head)
    if prefixed:
        why = ("these logs hold MindFormers records, but no strategy line ('Set ... at layer N'), no "
               "'initial ... from dict' config and no step line: nothing to verify from the logs alone "
               "(MindFormers logs no strategy line when the config enables none)")
    else:
        why = ("no MindFormers line at all in these logs (no config, no strategy, no step): nothing to verify "
               "(is this a worker log of a MindFormers job?)")
    if cut:
        path, n = cut[0]
        at = "before its first line" if n == 0 else f"after {n:,} byte(s) of log"
        why += f"; the gzip data of {path} ends {at} (a .gz cut short{f', {len(cut)} of them' if len(cut) > 1 else ''})"
    return why


def _walk(root: str, depth: int) -> Iterable[str]:
    """Files under ``root`` up to ``depth`` directory levels down, in sorted order."""
    return (path for path, _, _ in _walk_named(root, depth))


def _walk_named(root: str, depth: int) -> Iterable[Tuple[str, str, str]]:
    """:func:`_walk` as ``(path, directory, name)``: what the directory listing already knows."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"cannot list directory: {exc.strerror or exc}", file=root) from None
    for e in entries:
        if _entry_is(e.is_file):
            yield e.path, root, e.name
    if depth > 0:
        for e in entries:
            if _entry_is(e.is_dir) and e.name not in _SKIP_DIRS and not e.name.startswith("."):
                yield from _walk_named(e.path, depth - 1)


def _entry_is(test: Callable[[], bool]) -> bool:
    """``DirEntry.is_file`` / ``is_dir``, False for an entry that cannot be followed: a symlink
    loop (ELOOP) or a link into a directory we may not read is no log, not a reason to stop."""
    try:
        return test()
    except OSError:
        return False


def _display(path: str, base: str) -> str:
    rel = os.path.relpath(path, base) if base else path
    return path if rel.startswith("..") else rel


def _displayer(root: str, base: str) -> Callable[[str], str]:
    """:func:`_display` for the files :func:`_walk` found under ``root``: their paths are ``root``
    plus plain entry names, so the relative path is the root's, computed once, joined with that
    tail (``os.path.relpath`` per file was 40 ms a 1,024-rank job, all before the scan starts)."""
    rel_root = os.path.relpath(root, base) if base else root
    if not base or rel_root.startswith(".."):
        return lambda path: _display(path, base)
    cut = len(root)
    prefix = os.path.join(rel_root, "")      # os.path.join(rel_root, tail) is prefix + tail

    def display(path: str) -> str:
        if not path.startswith(root):
            return _display(path, base)
        tail = path[cut:].lstrip(os.sep)
        return prefix + tail if tail else rel_root
    return display


def _expected_from_run_json(info: Dict[str, Any]) -> Optional[List[int]]:
    """The ranks a run dir should hold logs for: ``ranks`` (what this node's launcher starts);
    ``ranks: null`` means unknown (a node of a multi-node job without --node_rank)."""
    ranks = info.get("ranks")
    if isinstance(ranks, list) and all(isinstance(r, int) for r in ranks):
        return sorted(set(ranks))
    if "ranks" in info and ranks is None:
        return None
    ws = info.get("world_size")
    if isinstance(ws, int) and ws > 0:
        return list(range(ws))
    return None


def _from_dir(d: str, out: Inputs, expected: set, had_expect: List[bool]) -> None:
    info = read_run_json(d)         # bounded and type-checked (swapwatch/json_input.py)
    if info is not None:
        out.run_info.update(info)
        exp = _expected_from_run_json(info)
        if exp is not None:
            expected.update(exp)
            had_expect[0] = True
        elif "ranks" in info:           # recorded as unknown: do not guess 0..max from the names
            had_expect[0] = True
    # each file's name, rank and directory worked out once (10,000 files: every os.path call
    # a file is ~10 ms before the scan can start)
    files = list(_walk_named(d, 2))
    base = os.path.dirname(os.path.abspath(d).rstrip(os.sep))
    display = _displayer(d, base)
    workers = [w for w in files if _WORKER_RE.match(w[2])]
    scheds = [p for p, _, name in files if name in ("scheduler.log", "scheduler.log.gz")]
    chosen = workers or [w for w in files if _LOG_RE.search(w[2]) and w[0] not in scheds]
    by_dir: Dict[str, int] = {}
    first = len(out.files)
    for p, where, _ in chosen:
        rank = msrun.rank_from_name(p)
        out.files.append(LogFile(p, display(p), "rank", rank, p.endswith(".gz")))
        if rank is not None:
            by_dir[where] = max(by_dir.get(where, -1), rank)
    _pair_streams(out.files[first:], info)
    for p in scheds:
        out.files.append(LogFile(p, display(p), "scheduler", None, p.endswith(".gz")))
    if workers and not had_expect[0]:
        for hi in by_dir.values():      # chosen is workers here
            expected.update(range(hi + 1))
    if not chosen:
        raise InputError("no worker logs here (looked for worker_*.log and *.log up to two levels down)", file=d)


#: A ``swapwatch run`` directory's copies of the job's stdout and stderr (runner.STDOUT_COPY /
#: STDERR_COPY; written by the runner, read here: the parsers sit below the runner).
STDOUT_COPY, STDERR_COPY = "console.log", "console.stderr.log"


def _pair_streams(files: List[LogFile], info: Optional[Dict[str, Any]]) -> None:
    """In a run directory (it has a run.json), the stderr copy is the same process as the stdout
    copy beside it: MindFormers logs to stdout, MindSpore's C++ log (the memory pool lines, GLOG)
    and tracebacks go to stderr."""
    if info is None:
        return
    by_path = {f.path: f for f in files}
    for f in files:
        head, name = os.path.split(f.path)
        if name == STDERR_COPY and os.path.join(head, STDOUT_COPY) in by_path:
            f.partner, f.stream = os.path.join(head, STDOUT_COPY), "stderr"
            by_path[f.partner].stream = "stdout"


def discover(paths: Sequence[str]) -> Inputs:
    """Resolve user paths into :class:`Inputs`; raises InputError for missing/empty/unreadable paths."""
    if not paths:
        raise InputError("no log path given")
    out = Inputs()
    expected: set = set()
    had_expect = [False]
    seen = set()
    for p in paths:
        p = os.fspath(p)
        if not os.path.exists(p):
            raise InputError("no such file or directory", file=p)
        if os.path.isdir(p):
            _from_dir(p, out, expected, had_expect)
        else:
            if not os.access(p, os.R_OK):
                raise InputError("permission denied", file=p)
            out.files.append(LogFile(p, p, "scheduler" if os.path.basename(p).startswith("scheduler.log") else "rank",
                                     msrun.rank_from_name(p), p.endswith(".gz")))
    uniq = []
    real_dirs: Dict[str, str] = {}
    for f in out.files:
        try:
            st = os.lstat(f.path)
            if stat.S_ISLNK(st.st_mode):
                key, size = os.path.realpath(f.path), os.path.getsize(f.path)
            else:
                # the file itself is no link: its real path is its directory's (resolved once a
                # directory, not once a file: os.path.realpath lstats every component)
                head, name = os.path.split(f.path)
                real = real_dirs.get(head)
                if real is None:      # kept as the prefix os.path.join(real, name) starts with
                    real = real_dirs[head] = os.path.join(os.path.realpath(head or os.curdir), "")
                key, size = real + name, st.st_size
        except OSError as exc:
            raise InputError(f"cannot read log: {exc.strerror or exc}", file=f.path) from None
        if key in seen:
            continue
        seen.add(key)
        note_input(f.path, None if stat.S_ISLNK(st.st_mode) else st)     # a link: what it names
        f.size = size
        uniq.append(f)
    out.files = uniq
    if not any(f.role == "rank" for f in out.files):
        raise InputError("no worker logs among the given paths", file=paths[0])
    if expected:
        out.expected_ranks = sorted(expected)
    dirs = [p for p in paths if os.path.isdir(p)]
    out.label = os.path.basename(os.path.abspath(dirs[0]).rstrip(os.sep)) if len(dirs) == 1 else ""
    return out
