"""`swapwatch run` over a real 2-worker msrun job on CPU (one shared run for most assertions)."""
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv, free_port  # noqa: E402
from swapwatch.checks import CheckContext, run_rules  # noqa: E402
from swapwatch.model.event_lines import parse_event  # noqa: E402
from swapwatch.parsers.ir import read_ir  # noqa: E402

pytestmark = pytest.mark.runtime

if shutil.which("msrun", path=str(Path(sys.executable).parent)) is None:
    pytest.skip("msrun not installed next to the interpreter", allow_module_level=True)

TRAIN = str(REPO / "swapwatch" / "examples" / "train.py")
CONFIG = str(REPO / "fixtures" / "configs" / "demo_recompute.yaml")


def _msrun(log_dir, *train_args, extra=()):
    return ["msrun", "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
            f"--log_dir={log_dir}", "--join=True", *extra, TRAIN, *train_args]


def _swapwatch(args, cwd, **kw):
    return subprocess.Popen([sys.executable, "-m", "swapwatch.cli", "run", *args], cwd=cwd, env=env_with_venv(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("msrun")
    p = _swapwatch(["--config", CONFIG, "--ir", "--run-dir", "run", "--",
                    *_msrun("msrun_log_src", "--config", CONFIG, "--steps", "3")], cwd)
    out, _ = p.communicate(timeout=600)
    return p.returncode, out, cwd / "run"


def test_two_workers_give_per_rank_logs_with_events(demo_run):
    code, out, run = demo_run
    assert code == 0, out[-3000:]
    info = json.loads((run / "run.json").read_text())
    assert info["world_size"] == 2 and info["ranks"] == [0, 1] and info["exit_code"] == 0
    assert info["launcher"] == "msrun" and info["msrun_log_dir"].endswith("msrun_log_src")
    for rank in (0, 1):
        text = (run / "msrun_log" / f"worker_{rank}.log").read_text(errors="replace")
        events = [e for e in map(parse_event, text.splitlines()) if e]
        assert {e["rank"] for e in events} == {rank}
        assert [e["step"] for e in events if e["kind"] == "step"] == [1, 2, 3]
        assert "Set full recompute at layer 0" in text
        assert "peak used mem:" in text                     # GLOG PRE_ACT lines, from the runner's env
    assert (run / "console.log").stat().st_size > 0


def test_data_parallel_ranks_see_different_data_but_allreduced_grads(demo_run):
    _, _, run = demo_run
    losses = {}
    for rank in (0, 1):
        text = (run / "msrun_log" / f"worker_{rank}.log").read_text(errors="replace")
        losses[rank] = [e["loss"] for e in map(parse_event, text.splitlines()) if e and e["kind"] == "step"]
    assert losses[0][0] != losses[1][0]


def test_ir_of_the_msrun_run_shows_the_planned_recompute(demo_run):
    _, _, run = demo_run
    dump = read_ir(run / "ir")
    assert sorted(dump.ranks) == [0, 1]
    for ev in dump:
        assert 0 in ev.recomputed_layers()                          # full recompute of layer 0
        assert all("attention.flash_attention" in ev.recomputed_paths(i) for i in (1, 2, 3))
    assert not run_rules(CheckContext(plan=None, ir=dump), needs=("ir",))


def test_run_verifies_clean(demo_run):
    code, out, run = demo_run
    info = json.loads((run / "run.json").read_text())
    assert info["verify"]["exit_code"] == 0 and code == 0, (run / "verify.txt").read_text()
    verdict = json.loads((run / "verify.json").read_text())
    assert verdict["verdict"] == "pass" and verdict["ranks"] == [0, 1] and verdict["layers"] == 4
    assert "PASS" in (run / "verify.txt").read_text().upper()


def test_failing_worker_real_exit_code_comes_back(tmp_path):
    # the crashed worker never registers: a short cluster timeout lets the scheduler give up quickly
    p = _swapwatch(["--no-verify", "--run-dir", "run", "--", *_msrun("logs", "--steps", "1", "--exit-code", "7",
                                                                     "--fail-rank", "1",
                                                                     extra=("--cluster_time_out=10",))], tmp_path)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 7, out[-3000:]
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["child_exit_code"] == 1 and info["worker_exit_code"] == 7 and info["exit_code"] == 7


def test_sigterm_stops_msrun_and_every_worker(tmp_path):
    p = _swapwatch(["--no-verify", "--run-dir", "run", "--", *_msrun("logs", "--steps", "500", "--sleep", "1")],
                   tmp_path)
    console = tmp_path / "run" / "console.log"
    for _ in range(1200):                       # until a worker reports its first step
        if console.exists() and b'"kind":"step"' in console.read_bytes():
            break
        if p.poll() is not None:
            pytest.fail(p.stdout.read().decode(errors="replace")[-3000:])
        time.sleep(0.1)
    me = psutil.Process(p.pid)
    procs = [me, *me.children(recursive=True)]
    assert len([q for q in procs if "train.py" in " ".join(q.cmdline())]) >= 2
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=180)
    assert p.returncode == 143
    _gone, alive = psutil.wait_procs(procs, timeout=15)
    assert alive == []
