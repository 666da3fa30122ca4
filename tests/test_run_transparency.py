"""`swapwatch run` is transparent: the job gets what it would get without swapwatch (issue 36
items 1-3; docs/reliability.md, "What the job sees").

Real process trees: ``swapwatch run`` as a command, a real terminal (a pty) for stdin, real signals
sent to swapwatch the way a terminal or ``kill`` sends them, and a real msrun job where msrun's own
behaviour matters (SIGQUIT reaches msrun, its workers are stopped). Each test starts swapwatch in a
session of its own with every signal at its default (a pytest worker may have some ignored, and an
ignored signal stays ignored by design) and core dumps off (a job that dies of SIGQUIT dumps core).
"""
import hashlib
import io
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from swapwatch import job_signals
from swapwatch.runtime import runner
from runtime_helpers import wait_for_file

pytestmark = pytest.mark.runtime

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]


def _defaults():
    for s in job_signals.STOP + job_signals.PASS + job_signals.SUSPEND:
        signal.signal(s, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _swapwatch(tmp_path, job, *, stdin=subprocess.DEVNULL, extra=(), preexec=None, new_session=True, **kw):
    """``swapwatch run --no-verify --run-dir R -- job...`` started as from a terminal (new session)."""
    def pre():
        _defaults()
        if preexec:
            preexec()
    return subprocess.Popen([PY, "-m", "swapwatch.cli", "run", "--no-verify", "--no-report", "--run-dir",
                             str(tmp_path / "run"), *extra, "--", *job], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=pre, cwd=tmp_path, start_new_session=new_session,
                            **kw)


def _job_lines(out: bytes):
    """The job's own stdout lines (swapwatch's closing lines left out)."""
    return [ln for ln in out.decode(errors="replace").splitlines() if not ln.startswith("swapwatch run:")]


def _run_json(tmp_path):
    return json.loads((tmp_path / "run" / "run.json").read_text())



def _gone(pid: int, timeout=30.0) -> bool:
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


# ---- stdin -------------------------------------------------------------------------------------------

def test_a_piped_stdin_reaches_the_job(tmp_path):
    """N7: ``printf 'hello\\n' | swapwatch run -- sh -c 'read x; ...'`` read end of file."""
    p = _swapwatch(tmp_path, ["sh", "-c", 'read x; echo "got:[$x]"'], stdin=subprocess.PIPE)
    out, err = p.communicate(b"hello-stdin\n", timeout=60)
    assert p.returncode == 0, err
    assert _job_lines(out) == ["got:[hello-stdin]"]
    assert _run_json(tmp_path)["streams"]["stdin"] == "pipe"


def test_a_piped_script_runs(tmp_path):
    p = _swapwatch(tmp_path, ["sh", "-s"], stdin=subprocess.PIPE)
    out, err = p.communicate(b"echo from-script\nexit 3\n", timeout=60)
    assert p.returncode == 3 and _job_lines(out) == ["from-script"], (out, err)


def test_stdin_reaches_the_job_byte_for_byte(tmp_path):
    data = random.Random(36).randbytes(5 << 20)
    job = [PY, "-c", "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"]
    p = _swapwatch(tmp_path, job, stdin=subprocess.PIPE)
    out, err = p.communicate(data, timeout=120)
    assert p.returncode == 0, err
    assert _job_lines(out) == [hashlib.sha256(data).hexdigest()]


def test_a_terminal_stays_the_jobs_terminal(tmp_path):
    """stdin a terminal (swapwatch's controlling one): the job reads the same terminal, ``isatty``
    is true and the line it reads is the one typed; run.json says ``terminal``."""
    import fcntl
    import termios

    master, slave = os.openpty()
    name = os.ttyname(slave)

    def controlling_tty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    job = [PY, "-c", "import os, sys; print(os.isatty(0), os.ttyname(0), flush=True); "
                     "print('line:', sys.stdin.readline().strip(), flush=True)"]
    p = _swapwatch(tmp_path, job, stdin=slave, preexec=controlling_tty, new_session=False)
    os.close(slave)
    try:
        time.sleep(1.0)
        os.write(master, b"typed at the terminal\n")
        out, err = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert p.returncode == 0, err
    assert _job_lines(out) == [f"True {name}", "line: typed at the terminal"]
    assert _run_json(tmp_path)["streams"]["stdin"] == "terminal"


@pytest.mark.parametrize("how", ["devnull", "closed"])
def test_an_empty_or_closed_stdin_is_the_jobs_too(tmp_path, how):
    job = [PY, "-c", "import os, sys\ntry:\n    os.fstat(0)\nexcept OSError:\n    print('closed')\nelse:\n"
                     "    print('eof' if sys.stdin.read() == '' else 'data')"]
    p = _swapwatch(tmp_path, job, stdin=subprocess.DEVNULL if how == "devnull" else None,
                   preexec=(lambda: os.close(0)) if how == "closed" else None)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert _job_lines(out) == ["eof" if how == "devnull" else "closed"]
    assert _run_json(tmp_path)["streams"]["stdin"] == ("/dev/null" if how == "devnull" else "closed")


# ---- stdout and stderr apart -------------------------------------------------------------------------

def test_stdout_and_stderr_stay_apart(tmp_path):
    """N9: ``run -- cmd 2>err.log`` left err.log empty (stderr was merged into stdout)."""
    p = _swapwatch(tmp_path, ["sh", "-c", "echo OUT; echo ERR >&2; echo OUT2; echo ERR2 >&2"])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0
    assert _job_lines(out) == ["OUT", "OUT2"] and err == b"ERR\nERR2\n"
    run = tmp_path / "run"
    assert (run / "console.log").read_bytes() == b"OUT\nOUT2\n"
    assert (run / "console.stderr.log").read_bytes() == b"ERR\nERR2\n"
    assert _run_json(tmp_path)["streams"] == {"stdin": "/dev/null", "stdout": "console.log",
                                              "stderr": "console.stderr.log"}


def test_both_streams_are_byte_exact_under_a_concurrent_burst(tmp_path):
    """20 MB of random bytes on each stream at once, in odd chunks from two threads: each stream
    arrives whole and in order, on the terminal and in its copy."""
    job = [PY, "-c", """
import os, random, threading
def burst(fd, seed):
    r = random.Random(seed)
    data = r.randbytes(20 << 20)
    i = 0
    while i < len(data):
        n = r.randrange(1, 200000)
        os.write(fd, data[i:i + n])
        i += n
ts = [threading.Thread(target=burst, args=(fd, fd)) for fd in (1, 2)]
[t.start() for t in ts]
[t.join() for t in ts]
"""]
    p = _swapwatch(tmp_path, job)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0
    want = {fd: random.Random(fd).randbytes(20 << 20) for fd in (1, 2)}
    run = tmp_path / "run"
    assert (run / "console.log").read_bytes() == want[1]
    assert (run / "console.stderr.log").read_bytes() == want[2]
    assert out.startswith(want[1]) and err == want[2]


# ---- signals ------------------------------------------------------------------------------------------

def test_every_catchable_signal_has_a_fate():
    fates = [job_signals.STOP, job_signals.PASS, job_signals.SUSPEND, job_signals.DEFAULT]
    seen = [s for fate in fates for s in fate]
    assert len(seen) == len(set(seen))                                      # one fate each
    uncatchable = {int(signal.SIGKILL), int(signal.SIGSTOP)}
    assert set(seen) | uncatchable == {int(s) for s in signal.valid_signals()}


HANDLES = """
import os, signal, sys, time
got = []
signal.signal({sig}, lambda s, f: got.append(s))
open({ready!r}, 'w').write(str(os.getpid()))
end = time.monotonic() + 60
while not got and time.monotonic() < end:
    time.sleep(0.05)
open({mark!r}, 'w').write(str(got))
print('job done', flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH,
                                 signal.SIGRTMIN + 2])
def test_a_signal_for_the_job_is_passed_to_it(tmp_path, sig):
    """N58: SIGQUIT (Ctrl-\\ reaches swapwatch's group, never the job's own session) and SIGUSR1/2
    killed swapwatch and orphaned the job. They are passed to the job's process group."""
    ready, mark = tmp_path / "ready", tmp_path / "mark"
    p = _swapwatch(tmp_path, [PY, "-c", HANDLES.format(sig=int(sig), ready=str(ready), mark=str(mark))])
    job = int(wait_for_file(ready))
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert mark.read_text() == f"[{int(sig)}]" and _job_lines(out) == ["job done"]
    info = _run_json(tmp_path)
    assert info["signals_passed"] == {job_signals.signal_name(sig): 1} and info["end"] and info["exit_code"] == 0
    assert info["interrupted"] is None and _gone(job)


def test_a_passed_signal_that_ends_the_job_ends_the_run_recorded(tmp_path):
    """A job that does not handle SIGQUIT dies of it, as at the terminal; run.json is complete
    and the exit code says so (128 + 3)."""
    ready = tmp_path / "ready"
    p = _swapwatch(tmp_path, [PY, "-c", f"import os, time; open({str(ready)!r}, 'w').write(str(os.getpid())); "
                                        "time.sleep(120)"])
    job = int(wait_for_file(ready))
    p.send_signal(signal.SIGQUIT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 131, err
    info = _run_json(tmp_path)
    assert info["end"] and info["exit_code"] == 131 and info["child_exit_code"] == -3
    assert info["signals_passed"] == {"SIGQUIT": 1} and _gone(job, 5)


STOPS = [s for s in job_signals.STOP if s not in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]


@pytest.mark.parametrize("sig", STOPS, ids=[job_signals.signal_name(s) for s in STOPS])
def test_every_other_request_to_end_goes_through_the_stop_sequence(tmp_path, sig):
    """SIGALRM (``timeout -s ALRM``), SIGXCPU (a CPU limit), SIGPWR, SIGABRT ...: the stop sequence,
    run.json completed with the signal's name, exit 128 + the signal, nothing left running."""
    ready = tmp_path / "ready"
    code = (f"import os, time; open({str(ready)!r}, 'w').write(str(os.getpid())); "
            "import subprocess, sys; subprocess.Popen(['sleep', '300'], start_new_session=True); time.sleep(300)")
    p = _swapwatch(tmp_path, [PY, "-c", code])
    job = int(wait_for_file(ready))
    time.sleep(0.5)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + sig, err
    info = _run_json(tmp_path)
    assert info["interrupted"] == job_signals.signal_name(sig) and info["end"] and info["exit_code"] == 128 + sig
    assert _gone(job, 5)
    assert all(_gone(pid, 5) for pid in info["leftover_killed"])      # the setsid'd sleep too


def test_ctrl_z_suspends_the_tree_with_swapwatch_and_fg_resumes_both(tmp_path):
    ready, done = tmp_path / "ready", tmp_path / "done"
    code = (f"import os, time; open({str(ready)!r}, 'w').write(str(os.getpid()))\n"
            "t = time.monotonic()\nfor _ in range(40):\n    time.sleep(0.1)\n"
            f"open({str(done)!r}, 'w').write('%.1f' % (time.monotonic() - t))\n")
    p = _swapwatch(tmp_path, [PY, "-c", code])
    job = psutil.Process(int(wait_for_file(ready)))
    me = psutil.Process(p.pid)
    p.send_signal(signal.SIGTSTP)
    end = time.monotonic() + 30
    while time.monotonic() < end and not (me.status() == psutil.STATUS_STOPPED
                                          and job.status() == psutil.STATUS_STOPPED):
        time.sleep(0.05)
    assert me.status() == psutil.STATUS_STOPPED and job.status() == psutil.STATUS_STOPPED
    time.sleep(2.0)
    assert not done.exists()                       # the job did not run on while suspended
    p.send_signal(signal.SIGCONT)                  # `fg`
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert float(done.read_text()) >= 5.5          # 4 s of sleeps plus the 2 s it spent stopped
    assert _run_json(tmp_path)["end"]


def test_a_signal_for_the_job_with_no_job_running_ends_the_run(monkeypatch):
    """Before the job starts or after it ended, a passed signal whose default is to end a process
    stops the run (cleanly); SIGWINCH and SIGCONT do nothing."""
    state = job_signals.new_state()
    with job_signals.routed(state):
        os.kill(os.getpid(), signal.SIGWINCH)
        os.kill(os.getpid(), signal.SIGCONT)
        time.sleep(0.05)
        assert state["sig"] is None
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
    assert state["sig"] == signal.SIGUSR1 and state["count"] == 1 and state["passed"] == {}
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL       # the handlers are put back


def test_a_signal_the_caller_ignores_stays_ignored(tmp_path):
    """``nohup``-style: SIGQUIT ignored by the caller (a background job of a shell script) is not
    caught, and the job inherits it ignored, as without swapwatch."""
    ready = tmp_path / "ready"
    code = (f"import os, signal, time; open({str(ready)!r}, 'w').write(str(signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN)); "
            "time.sleep(2)")
    p = _swapwatch(tmp_path, [PY, "-c", code], preexec=lambda: signal.signal(signal.SIGQUIT, signal.SIG_IGN))
    wait_for_file(ready)
    p.send_signal(signal.SIGQUIT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0 and ready.read_text() == "True", err
    assert _run_json(tmp_path)["signals_passed"] == {}


# ---- the run directory's two streams are one process ----------------------------------------------------

def test_verify_reads_both_streams_of_a_run_as_one_rank(tmp_path):
    """MindFormers logs to stdout, MindSpore's C++ log (the memory pool lines) to stderr: verify,
    events and plot memory read the two copies as one rank (no second, guessed rank)."""
    full = ROOT / "fixtures" / "plot_runs" / "full"
    lines = (full / "console.log").read_text().splitlines(keepends=True)
    stderr = "".join(ln for ln in lines if ln.startswith("[INFO] PRE_ACT") or ln.startswith("[WARNING]"))
    stdout = "".join(ln for ln in lines if not (ln.startswith("[INFO] PRE_ACT") or ln.startswith("[WARNING]")))
    assert stderr and stdout
    (tmp_path / "o.txt").write_text(stdout)
    (tmp_path / "e.txt").write_text(stderr)
    job = [PY, "-c", f"import sys; sys.stdout.write(open({str(tmp_path / 'o.txt')!r}).read()); "
                     f"sys.stderr.write(open({str(tmp_path / 'e.txt')!r}).read())"]
    res = runner.run(job, run_dir=str(tmp_path / "run"), out=io.BytesIO(), err=io.BytesIO(), verify=False,
                     report=False)
    assert res.exit_code == 0
    run = tmp_path / "run"
    assert (run / "console.stderr.log").read_text() == stderr
    cfg = ROOT / "fixtures" / "plot_runs" / "configs" / "full.yaml"
    v = subprocess.run([PY, "-m", "swapwatch.cli", "verify", str(run), "--config", str(cfg)], capture_output=True,
                       text=True, timeout=120)
    assert v.returncode == 0 and "1 rank(s) [0]" in v.stdout, v.stdout + v.stderr
    ev = subprocess.run([PY, "-m", "swapwatch.cli", "events", str(run), "--kind", "memory"], capture_output=True,
                        text=True, timeout=120)
    events = [json.loads(ln) for ln in ev.stdout.splitlines()]
    assert {e["rank"] for e in events} == {0}
    assert any(e["source"].startswith("run/console.stderr.log:") for e in events)     # the pool lines
    m = subprocess.run([PY, "-m", "swapwatch.cli", "plot", "memory", str(run), "-o", str(tmp_path / "m.png")],
                       capture_output=True, text=True, timeout=120)
    assert m.returncode == 0 and "1 rank" in m.stdout, m.stderr


# ---- a real msrun job --------------------------------------------------------------------------------------

WORKER = """
import os, sys, time
rank = os.environ.get('RANK_ID', 'x')
print('worker', rank, 'out', flush=True)
print('worker', rank, 'err', file=sys.stderr, flush=True)
open(os.path.join(DIR, 'pid_' + rank), 'w').write(str(os.getpid()))
time.sleep(SLEEP)
"""


def _msrun_job(tmp_path, sleep):
    if shutil.which("msrun", path=str(Path(PY).parent)) is None:
        pytest.skip("msrun is not installed next to the interpreter")
    from runtime_helpers import free_port

    (tmp_path / "w.py").write_text(WORKER.replace("DIR", repr(str(tmp_path))).replace("SLEEP", str(sleep)))
    return ["msrun", "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
            f"--log_dir={tmp_path / 'logs'}", "--join=True", str(tmp_path / "w.py")]


def _msrun_env():
    from runtime_helpers import env_with_venv

    return env_with_venv()


def test_msrun_keeps_its_stdout_and_stderr_apart(tmp_path):
    p = _swapwatch(tmp_path, _msrun_job(tmp_path, 0), env=_msrun_env())
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    run = tmp_path / "run"
    # what swapwatch printed of the job is what it kept: byte for byte, each stream on its own
    assert out.startswith((run / "console.log").read_bytes())
    assert err == (run / "console.stderr.log").read_bytes()
    for rank in (0, 1):
        log = (run / "msrun_log" / f"worker_{rank}.log").read_text()
        assert f"worker {rank} out" in log and f"worker {rank} err" in log


def test_sigquit_under_msrun_reaches_msrun_and_nothing_is_left(tmp_path):
    """Ctrl-\\ under msrun: msrun gets SIGQUIT (as at its terminal) and dies of it; its workers, in
    sessions of their own, are leftovers: stopped, named, run.json complete, exit 131."""
    p = _swapwatch(tmp_path, _msrun_job(tmp_path, 300), env=_msrun_env())
    pids = [int(wait_for_file(tmp_path / f"pid_{r}", 180)) for r in (0, 1)]
    p.send_signal(signal.SIGQUIT)
    _, err = p.communicate(timeout=180)
    assert p.returncode == 131, err[-3000:]
    info = _run_json(tmp_path)
    assert info["signals_passed"] == {"SIGQUIT": 1} and info["end"] and info["exit_code"] == 131
    assert all(_gone(pid, 10) for pid in pids)


def test_swapwatchs_own_lines_escape_what_the_caller_named(tmp_path):
    """N56: the closing line printed the run-dir name raw (an ``ESC[2J`` in it cleared the screen)."""
    name = tmp_path / "r\x1b[2Jx"
    out = io.BytesIO()
    res = runner.run(["true"], run_dir=str(name), out=out, err=io.BytesIO(), verify=False, report=False)
    assert res.exit_code == 0
    assert b"\x1b" not in out.getvalue() and b"r\\x1b[2Jx (exit code 0)" in out.getvalue()
