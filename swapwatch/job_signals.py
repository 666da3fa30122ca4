"""What every signal swapwatch can catch does while ``swapwatch run`` supervises a job.

Why a policy for each: the job runs in its own session (the runner stops its whole tree, and the
terminal's SIGHUP must not reach it behind the runner's back), so whatever the terminal or a
``kill`` sends reaches swapwatch, not the job. Left at its default, a signal such as SIGQUIT
(Ctrl-\\) or SIGUSR1 killed swapwatch on the spot: ``run.json`` kept ``end: null`` and the job got
the parent-death signal from an unrelated death, or ran on as an orphan (the 2026-11-28 review,
N58). Each catchable signal now has one of three fates (docs/reliability.md has the table):

* :data:`STOP` - the stop sequence (the runner's :class:`~swapwatch.runner._Stopper`), ``run.json``
  completed with ``interrupted``, exit 128 + the signal: the requests to end (SIGINT, SIGTERM,
  SIGHUP, SIGALRM from ``timeout -s ALRM``, a CPU limit's SIGXCPU, SIGPWR ...);
* :data:`PASS` - passed to the job's process group, as the terminal would deliver it to a job in
  the foreground (SIGQUIT for a thread dump or a core, SIGUSR1/2 and the real-time signals that
  programs define for themselves, SIGWINCH, SIGURG, SIGCONT). If the job dies of it, its exit
  code says so (128 + the signal) and the run is recorded as usual. When no job is running (before
  it starts, after it ended), the ones whose default is to end a process act as :data:`STOP`;
* :data:`SUSPEND` - job control (Ctrl-Z's SIGTSTP, SIGTTIN, SIGTTOU): every process of the tree
  is stopped (SIGSTOP: the job's session is an orphaned process group, where the kernel discards
  SIGTSTP), then swapwatch stops itself so the shell takes the terminal back; ``fg`` / ``bg``
  (SIGCONT) resume swapwatch and the whole tree.

Left at their default, on purpose: SIGKILL and SIGSTOP (no process can catch them), SIGCHLD (the
state of swapwatch's own children, which the runner waits for), SIGPIPE and SIGXFSZ (Python
ignores both: a write to a closed pipe or past the file size limit is an error return that the
runner handles), and the fault signals SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP and SIGSYS (the
kernel sends them for a fault of swapwatch's own: a handler that returns re-runs the faulting
instruction). A ``kill`` of one of those kills swapwatch like SIGKILL would: the job gets the
parent-death signal (``proctree.parent_death_signal``).

A signal the caller ignores stays ignored (``nohup`` and SIGHUP, a background job of a shell
script and SIGINT / SIGQUIT, by POSIX rule): catching it would undo what the caller asked for.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Dict, Iterator, Tuple

_S = signal.Signals

#: The requests to end: the stop sequence.
STOP: Tuple[int, ...] = tuple(int(s) for s in (
    _S.SIGINT, _S.SIGTERM, _S.SIGHUP, _S.SIGALRM, _S.SIGVTALRM, _S.SIGPROF, _S.SIGXCPU, _S.SIGPWR,
    _S.SIGSTKFLT, _S.SIGIO, _S.SIGABRT))
#: Passed to the job's process group (with the real-time signals, SIGRTMIN .. SIGRTMAX).
PASS: Tuple[int, ...] = tuple(int(s) for s in (
    _S.SIGQUIT, _S.SIGUSR1, _S.SIGUSR2, _S.SIGWINCH, _S.SIGURG, _S.SIGCONT)) + tuple(
    range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
#: Of :data:`PASS`, the ones whose default action ends a process: with no job running, they stop the run.
ENDS_BY_DEFAULT = frozenset(s for s in PASS if s not in (_S.SIGWINCH, _S.SIGURG, _S.SIGCONT))
#: Job control: the tree and swapwatch stop; SIGCONT resumes both.
SUSPEND: Tuple[int, ...] = (int(_S.SIGTSTP), int(_S.SIGTTIN), int(_S.SIGTTOU))
#: Left at their default (with SIGKILL and SIGSTOP, which no process can catch): see the docstring.
DEFAULT: Tuple[int, ...] = tuple(int(s) for s in (
    _S.SIGCHLD, _S.SIGPIPE, _S.SIGXFSZ, _S.SIGSEGV, _S.SIGBUS, _S.SIGILL, _S.SIGFPE, _S.SIGTRAP, _S.SIGSYS))


def signal_name(signum: int) -> str:
    """``SIGQUIT``; the real-time ones as ``SIGRTMIN+3`` (they have no name of their own)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}" if signal.SIGRTMIN < signum <= signal.SIGRTMAX \
            else f"signal {signum}"


def new_state() -> Dict[str, Any]:
    """The state the handlers share with the runner: ``sig`` (the first stop signal), ``count``
    (stop signals so far: a second one goes straight to SIGKILL), ``tree`` (the job's
    :class:`~swapwatch.proctree.Tree` while the runner supervises it), ``running`` (the job's
    command has not exited yet) and ``passed`` (signal name -> times passed to the job)."""
    return {"sig": None, "count": 0, "tree": None, "running": False, "passed": {}}


@contextlib.contextmanager
def routed(state: Dict[str, Any]) -> Iterator[None]:
    """Install the handlers of :data:`STOP`, :data:`PASS` and :data:`SUSPEND` for the duration
    (main thread only: Python sets signal handlers nowhere else); the previous ones come back."""
    def on_stop(signum: int, _frame: Any) -> None:
        state["sig"] = state["sig"] or signum
        state["count"] += 1

    def on_pass(signum: int, frame: Any) -> None:
        tree = state["tree"]
        if tree is None or not state["running"]:
            if signum in ENDS_BY_DEFAULT:
                on_stop(signum, frame)          # no job to take it: what it would do to us, cleanly
            return
        tree.signal_group(signum)
        if signum == signal.SIGCONT:
            tree.signal_all(signum)             # a suspended tree (on_suspend stopped all of it)
        name = signal_name(signum)
        state["passed"][name] = state["passed"].get(name, 0) + 1

    def on_suspend(_signum: int, _frame: Any) -> None:
        tree = state["tree"]
        if tree is not None and state["running"]:
            tree.signal_group(signal.SIGSTOP)
            tree.signal_all(signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)    # the shell sees swapwatch stopped and takes the terminal
        if tree is not None and state["running"]:   # continued: the tree goes on with swapwatch
            tree.signal_group(signal.SIGCONT)
            tree.signal_all(signal.SIGCONT)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for handler, signals in ((on_stop, STOP), (on_pass, PASS), (on_suspend, SUSPEND)):
        for s in signals:
            if signal.getsignal(s) is not signal.SIG_IGN:      # an ignored signal stays ignored
                old[s] = signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)   # None: set outside Python, i.e. the default
