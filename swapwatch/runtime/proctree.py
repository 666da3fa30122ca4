"""The process tree of a launched command, found and stopped with nothing but the standard library.

Why not psutil: ``swapwatch run`` must work from the core install (on an Ascend cluster MindSpore
comes from the vendor's wheel, not from our extra), and everything it needs is in ``/proc`` and
one ``prctl`` call:

* ``prctl(PR_SET_CHILD_SUBREAPER)`` (Linux >= 3.4) makes every orphaned descendant of the runner
  reparent to the runner instead of to init. msrun's workers are session leaders (``setsid``): out
  of reach of the process group, and when msrun dies first they would be lost to a plain
  "children of the child" walk. With the runner as their subreaper they stay its descendants, so
  one walk of ``/proc`` finds them whatever happened in between.
* ``/proc/<pid>/stat`` gives each process's parent, state and start time; the start time makes a
  recorded pid safe against reuse (a recycled pid is a different process and is never signalled).

Without ``/proc`` (not Linux) only the process group can be signalled; that is what the runner
falls back to.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import time
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PROC = "/proc"

#: pid -> (ppid, state letter, start time in clock ticks since boot)
Table = Dict[int, Tuple[int, str, int]]


def set_subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux); False where unsupported."""
    libc = _libc()
    try:
        return libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except AttributeError:
        return False


def _libc() -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def parent_death_signal(sig: int) -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when swapwatch dies, even
    by SIGKILL (``prctl(PR_SET_PDEATHSIG)``, Linux). Without it a job in its own session outlives a
    killed swapwatch, unreachable (the terminal's SIGHUP no longer reaches it). None where
    unsupported. The parent pid is checked after the call: a parent that died before it counts."""
    libc = _libc()
    if libc is None or not hasattr(libc, "prctl"):
        return None
    parent = os.getpid()

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return arm


def comm(pid: int) -> str:
    """The short command name of ``pid`` (``/proc/<pid>/comm``), '?' when gone."""
    try:
        with open(f"{PROC}/{pid}/comm", "rb") as fh:
            return fh.read().decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def read_stat(pid: int) -> Optional[Tuple[int, str, int]]:
    """(ppid, state, start time) of ``pid``, or None when it is gone (or there is no /proc)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: parse after the last ')'
    rest = raw.rpartition(")")[2].split()
    try:
        return int(rest[1]), rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None


def table() -> Table:
    """Every process this user can see, as pid -> (ppid, state, start time)."""
    out: Table = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def descendants(roots: Iterable[int], tab: Table) -> Set[int]:
    """All processes below ``roots`` in ``tab`` (the roots themselves not included)."""
    kids: Dict[int, List[int]] = {}
    for pid, (ppid, _state, _start) in tab.items():
        kids.setdefault(ppid, []).append(pid)
    out: Set[int] = set()
    todo = list(roots)
    while todo:
        for k in kids.get(todo.pop(), ()):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


class Tree:
    """The child and every descendant ever seen, including those that left its session.

    Create it right *before* starting the child (it remembers the runner's existing children, so
    an in-process caller's other subprocesses are never touched), then :meth:`attach` the child.
    """

    def __init__(self) -> None:
        self.me = os.getpid()
        self.before: Set[int] = descendants([self.me], table())
        self.subreaper = set_subreaper(True)
        self.pid: Optional[int] = None
        #: pid -> start time, for every descendant seen so far
        self.known: Dict[int, int] = {}

    def attach(self, pid: int) -> None:
        self.pid = pid

    def snapshot(self) -> None:
        """Record every current descendant; reap the orphans that already ended under us."""
        if self.pid is None:
            return
        tab = table()
        roots = [self.pid] + ([self.me] if self.subreaper else [])
        for pid in descendants(roots, tab) - self.before - {self.pid}:
            ppid, state, start = tab[pid]
            self.known.setdefault(pid, start)
            if state == "Z" and ppid == self.me:
                self._reap(pid)

    def alive(self) -> List[int]:
        """Known descendants still running (same pid *and* start time: never a recycled pid)."""
        out = []
        for pid, start in self.known.items():
            st = read_stat(pid)
            if st is not None and st[2] == start and st[1] not in ("Z", "X"):
                out.append(pid)
        return out

    def signal_group(self, sig: int) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def signal_all(self, sig: int) -> None:
        """Send ``sig`` to every known descendant still alive (those out of the group included)."""
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def describe(self, pids: Iterable[int]) -> str:
        """``123 (sleep), 456 (python3)``: what a note names."""
        return ", ".join(f"{pid} ({comm(pid)})" for pid in pids)

    def kill_leftovers(self, timeout: float = 5.0) -> List[int]:
        """SIGKILL every known descendant still alive, wait until they are gone; their pids."""
        self.snapshot()
        left = self.alive()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in left:
                self._reap(pid)
            if not any(p in self.alive() for p in left):
                break
            time.sleep(0.05)
        return left

    def close(self) -> None:
        """Reap what ended under us and stop being a subreaper (an in-process caller goes on)."""
        self.snapshot()
        for pid in list(self.known):
            self._reap(pid)
        if self.subreaper:
            set_subreaper(False)
            self.subreaper = False

    def _reap(self, pid: int) -> None:
        if pid == self.pid:
            return       # the child itself is Popen's to wait for (its exit code lives there)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
