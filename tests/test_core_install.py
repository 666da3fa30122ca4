"""Every command from a core-only install (`pip install .`, no extras), as a cluster user has it.

The Makefile builds ``.core-venv`` (no MindSpore, no psutil; ``make test`` reinstalls it whenever a
package file changed) and passes it as SWAPWATCH_CORE_VENV (default: ``.core-venv``); under
SWAPWATCH_REQUIRE_ALL (``make test``, CI) a missing core venv stops the run in conftest, so this
module can never turn into silent skips there. Each command runs as the user would run it:
the installed ``swapwatch`` script, from a directory outside the checkout (so the source tree is
not what gets imported). The orphan check uses psutil from the *test* venv: an independent witness,
not the runner's own /proc walk.
"""
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = os.environ.get("SWAPWATCH_CORE_VENV") or str(REPO / ".core-venv")

pytestmark = [pytest.mark.core, pytest.mark.skipif(not (Path(CORE) / "bin" / "swapwatch").exists(),
                                                   reason=f"no core-only venv at {CORE} (make core)")]


def core_bin(name):
    return str(Path(CORE) / "bin" / name)


def sw(tmp_path, *args, **kw):
    """The core install's ``swapwatch`` with a clean environment (no venv of the tests on PATH)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([core_bin("swapwatch"), *map(str, args)], cwd=tmp_path, env=env, timeout=600, **kw)


def fx(*parts):
    return str(REPO.joinpath("fixtures", *parts))


def test_the_core_venv_is_really_core(tmp_path):
    code = ("import importlib.util as u, json, swapwatch; "
            "print(json.dumps([u.find_spec(m) is not None for m in ('mindspore', 'psutil')] + [swapwatch.__file__]))")
    r = subprocess.run([core_bin("python"), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    has_ms, has_psutil, where = json.loads(r.stdout)
    assert (has_ms, has_psutil) == (False, False)
    assert where.startswith(str(Path(CORE).resolve())) or where.startswith(CORE), where   # installed, not the checkout


def test_explain(tmp_path):
    r = sw(tmp_path, "explain", fx("configs", "conflict.yaml"))
    assert r.returncode == 1, r.stderr
    assert b"SW201 error" in r.stdout and b"4 layers" in r.stdout
    r = sw(tmp_path, "explain", fx("configs", "swap_case1.yaml"), "--format", "json")
    assert r.returncode in (0, 1) and len(json.loads(r.stdout)["layers"]) == 4


def test_verify(tmp_path):
    r = sw(tmp_path, "verify", fx("plot_runs", "select-2ranks"), "--config", fx("plot_runs", "configs", "full.yaml"))
    assert r.returncode == 1 and b"FAIL:" in r.stdout and b"SW109" in r.stdout
    r = sw(tmp_path, "verify", fx("plot_runs", "select-2ranks"), "--config", fx("plot_runs", "configs", "select.yaml"))
    assert r.returncode == 0 and b"PASS" in r.stdout, r.stdout[-2000:]


def test_report(tmp_path):
    r = sw(tmp_path, "report", fx("plot_runs", "select-2ranks"), "--config", fx("plot_runs", "configs", "select.yaml"),
           "-o", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-verdict="pass"' in page and page.count("<svg") == 2


def test_events(tmp_path):
    r = sw(tmp_path, "events", fx("logs", "swap_case1.log"))
    assert r.returncode == 0
    kinds = {json.loads(line)["kind"] for line in r.stdout.splitlines()}
    assert "action" in kinds or "apply" in kinds, kinds


def test_plot_memory_and_strategy(tmp_path):
    r = sw(tmp_path, "plot", "memory", fx("plot_runs", "none"), fx("plot_runs", "full"), "-o", tmp_path / "m.png")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = sw(tmp_path, "plot", "strategy", fx("configs", "conflict.yaml"), "-o", tmp_path / "s.svg")
    assert r.returncode == 0, r.stderr
    assert b"<svg" in (tmp_path / "s.svg").read_bytes()[:2000]


def test_rules(tmp_path):
    r = sw(tmp_path, "rules")
    assert r.returncode == 0 and b"SW201" in r.stdout and b"SW402" in r.stdout
    r = sw(tmp_path, "rules", "SW201")
    assert r.returncode == 0 and b"SW201" in r.stdout


def test_hooks_and_example_say_mindspore_is_missing(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 2\n")
    r = subprocess.run([core_bin("python"), "-m", "swapwatch.examples.train", "--config", str(cfg)],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "needs MindSpore" in r.stderr, r.stderr
    for call in ("from swapwatch.hooks.apply import apply; apply([], 'c.yaml')",
                 "from swapwatch.hooks.memory import MemoryCallback; MemoryCallback()"):
        code = f"from swapwatch.hooks import MindSporeMissing\ntry:\n    {call}\nexcept MindSporeMissing as e:\n    print(e)"
        r = subprocess.run([core_bin("python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0 and "needs MindSpore, which is not installed" in r.stdout, (call, r.stdout, r.stderr)


# ---- run -------------------------------------------------------------------------------------

def test_run_keeps_the_childs_exit_code(tmp_path):
    r = sw(tmp_path, "run", "--run-dir", tmp_path / "run", "--", "python", "-c",
           "import sys; print('from the child'); sys.exit(7)")
    assert r.returncode == 7, r.stderr
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["child_exit_code"] == 7 and info["exit_code"] == 7
    assert (tmp_path / "run" / "console.log").read_bytes() == b"from the child\n"
    assert r.stdout.startswith(b"from the child\n")


BURST = r"""
import sys
out = sys.stdout.buffer
pad = b"x" * 91
for i in range(1000000):
    out.write(b"%07d " % i + pad + b"\n")
"""


def _burst_digest():
    h = hashlib.sha256()
    pad = b"x" * 91
    for i in range(1000000):
        h.update(b"%07d " % i + pad + b"\n")
    return h.hexdigest()


def _file_digest(path, limit=None):
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20 if limit is None else min(1 << 20, limit - n))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def test_run_keeps_every_line_of_a_100_mb_burst(tmp_path):
    """1,000,000 lines of 100 bytes as fast as Python writes them: console.log and the terminal
    get all of them, byte for byte."""
    (tmp_path / "burst.py").write_text(BURST)
    with open(tmp_path / "terminal.out", "wb") as term:
        r = sw(tmp_path, "run", "--run-dir", tmp_path / "run", "--no-verify", "--", "python", "burst.py", stdout=term)
    assert r.returncode == 0, r.stderr
    want = _burst_digest()
    console = tmp_path / "run" / "console.log"
    assert _file_digest(console) == (want, 100_000_000)
    with open(console, "rb") as fh:
        assert sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b"")) == 1_000_000
    assert _file_digest(tmp_path / "terminal.out", limit=100_000_000) == (want, 100_000_000)
    (tmp_path / "run" / "console.log").unlink()      # 100 MB: not kept in the test's tmp dir
    (tmp_path / "terminal.out").unlink()


SPAWNER = """
import os, subprocess, sys, time
kids = [
    # like msrun's workers: session leaders, out of reach of the process group
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True),
    # a grandchild in its own session whose parent (the intermediate) exits at once: an orphan
    subprocess.Popen([sys.executable, "-c",
                      "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                      "'import os, time; os.setsid(); open(\\\"orphan\\\", \\\"w\\\").write(str(os.getpid())); "
                      "time.sleep(300)']); sys.exit(0)"]),
    # one that ignores SIGINT, in the group
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(300)"]),
]
for _ in range(200):
    if os.path.exists("orphan") and open("orphan").read():
        break
    time.sleep(0.05)
open("pids", "w").write(" ".join(str(p) for p in [kids[0].pid, kids[2].pid, int(open("orphan").read())]))
time.sleep(300)
"""


def test_run_sigterm_leaves_no_orphans(tmp_path):
    (tmp_path / "spawner.py").write_text(SPAWNER)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    p = subprocess.Popen([core_bin("swapwatch"), "run", "--run-dir", str(tmp_path / "run"), "--no-verify",
                          "--", "python", "spawner.py"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids_file = tmp_path / "pids"
    for _ in range(600):
        if pids_file.exists() and pids_file.read_text().strip():
            break
        time.sleep(0.1)
    pids = [int(x) for x in pids_file.read_text().split()]
    me = psutil.Process(p.pid)
    procs = {q.pid: q for q in [*me.children(recursive=True), *map(psutil.Process, pids)]}
    orphan = psutil.Process(pids[2])
    for _ in range(100):                   # its parent exits right after starting it
        if orphan.ppid() == p.pid:
            break
        time.sleep(0.05)
    assert orphan.ppid() == p.pid          # reparented to the runner (its subreaper), not to init
    assert set(pids) <= set(procs) and len(procs) >= 4    # spawner, setsid worker, SIGINT-ignorer, orphan
    assert all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=120) == 128 + signal.SIGTERM
    _gone, alive = psutil.wait_procs(list(procs.values()), timeout=10)
    assert alive == []
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["interrupted"] == "SIGTERM" and info["exit_code"] == 143
