"""`swapwatch run` without MindSpore: exit codes, run.json, env, byte-exact tee under bursts, no orphans."""
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from swapwatch.runtime import runner
from swapwatch.errors import InputError

pytestmark = pytest.mark.runtime

PY = sys.executable


def _run(tmp_path, code, **kw):
    out = io.BytesIO()
    kw.setdefault("err", io.BytesIO())
    res = runner.run([PY, "-c", textwrap.dedent(code)], run_dir=str(tmp_path / "run"), out=out, **kw)
    return res, out.getvalue()


def test_exit_code_and_run_json_even_on_failure(tmp_path):
    res, out = _run(tmp_path, "import sys; print('hi'); sys.exit(5)", verify=False)
    assert res.exit_code == 5
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["exit_code"] == 5 and info["child_exit_code"] == 5 and info["end"] and info["start"]
    assert info["command"][0] == PY and info["world_size"] == 1
    assert (res.run_dir / "console.log").read_bytes() == b"hi\n"
    assert out.startswith(b"hi\n")


def test_killed_child_maps_to_128_plus_signal(tmp_path):
    res, _ = _run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", verify=False)
    assert res.exit_code == 128 + 9


def test_burst_of_output_loses_nothing(tmp_path):
    """~25 MB written as fast as possible in odd-sized chunks to stdout, lines to stderr between
    them: each stream byte for byte in its own copy and on its own terminal stream."""
    code = """
        import os
        data = bytes(range(256)) * 4099
        for i in range(24):
            os.write(1, data[: len(data) - i])
            os.write(2, b"E" * (i + 1) + b"\\n")
    """
    err = io.BytesIO()
    res, out = _run(tmp_path, code, verify=False, err=err)
    assert res.exit_code == 0
    data = bytes(range(256)) * 4099
    expected = b"".join(data[: len(data) - i] for i in range(24))
    expected_err = b"".join(b"E" * (i + 1) + b"\n" for i in range(24))
    assert (res.run_dir / "console.log").read_bytes() == expected
    assert (res.run_dir / "console.stderr.log").read_bytes() == expected_err
    assert out.startswith(expected)       # the terminal got every byte too, in the same order
    assert err.getvalue() == expected_err


def test_user_env_is_never_overridden_and_both_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOG_v", "1")
    # `make test` already puts the venv's bin first; take it out so the runner has to prepend it
    venv_bin = str(Path(PY).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin))
    cfg = tmp_path / "swap.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 2\ncontext:\n  memory_optimize_level: O0\n"
                   "swap_config:\n  swap: True\n")
    res, out = _run(tmp_path, "import os; print(os.environ['GLOG_v'], os.environ['ENABLE_LAZY_INLINE_NO_PIPELINE'],"
                    " os.environ['MS_SUBMODULE_LOG_v'])", config=str(cfg), verify=False)
    assert out.startswith(b"1 1 {PRE_ACT:1}\n")
    env = json.loads((res.run_dir / "run.json").read_text())["env"]
    assert env["GLOG_v"] == {"wanted": "2", "user": "1", "used": "1"}
    assert env["ENABLE_LAZY_INLINE_NO_PIPELINE"]["used"] == "1"
    assert env["PATH"]["prepended"] == venv_bin
    info = json.loads((res.run_dir / "run.json").read_text())
    import hashlib
    assert info["config"]["sha256"] == hashlib.sha256(cfg.read_bytes()).hexdigest()


def test_path_left_alone_when_the_venv_bin_is_already_first(tmp_path, monkeypatch):
    venv_bin = str(Path(PY).parent)
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + "/usr/bin:/bin")
    res, out = _run(tmp_path, "import os; print(os.environ['PATH'])", verify=False)
    assert out.split(b"\n")[0] == (venv_bin + os.pathsep + "/usr/bin:/bin").encode()
    assert "PATH" not in json.loads((res.run_dir / "run.json").read_text())["env"]


def test_ir_env_points_into_the_run_dir(tmp_path):
    res, out = _run(tmp_path, "import os; print(os.environ['MS_DEV_SAVE_GRAPHS_PATH'], os.environ['MS_DEV_DUMP_IR_PASSES'])",
                    ir=True, verify=False)
    assert out.split(b"\n")[0] == f"{(res.run_dir / 'ir').resolve()} add_recomputation,validate".encode()


def test_existing_run_dir_is_never_overwritten(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="already exists"):
        runner.run(["true"], run_dir=str(tmp_path / "run"), out=io.BytesIO())
    assert (tmp_path / "run" / "keep.txt").read_text() == "mine"


def test_bad_input_is_one_line_exit_2(tmp_path):
    for args in (["run", "--run-dir", str(tmp_path / "a"), "--", "no-such-command-xyz"],
                 ["run", "--config", str(tmp_path / "missing.yaml"), "--", "true"]):
        r = subprocess.run([PY, "-m", "swapwatch.cli", *args], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_default_run_dirs_are_unique(tmp_path):
    a = runner.new_run_dir(None, "x", root=tmp_path)
    b = runner.new_run_dir(None, "x", root=tmp_path)
    assert a != b and a.is_dir() and b.is_dir()


@pytest.mark.parametrize("cmd, log_dir, world", [
    (["msrun", "--worker_num=2", "--local_worker_num=2", "--log_dir=out/a", "--join=True", "t.py"], "out/a", 2),
    (["msrun", "--worker_num", "4", "--log_dir", "b", "t.py"], "b", 4),
    (["msrun", "--worker_num=2", "t.py"], "", 2),
    (["bash", "scripts/msrun_launcher.sh", "python run.py", "8", "8118", "output/x", "True", "300"], "output/x", 8),
    (["scripts/msrun_launcher.sh", "python run.py", "8", "8", "1.2.3.4", "8118", "0", "output/msrun", "False", "300"],
     "output/msrun", 8),
    (["scripts/msrun_launcher.sh", "python run.py"], "output/msrun_log", 8),
])
def test_msrun_log_dir_and_world_size_from_the_command(cmd, log_dir, world):
    info = runner.msrun_info(cmd, {})
    assert info["log_dir"] == log_dir and info["world_size"] == world


@pytest.mark.parametrize("cmd, ranks", [
    (["msrun", "--worker_num=4", "--local_worker_num=4", "t.py"], [0, 1, 2, 3]),
    (["msrun", "--worker_num=16", "--local_worker_num=8", "--node_rank=1", "t.py"], list(range(8, 16))),
    (["msrun", "--worker_num=16", "--local_worker_num=8", "t.py"], None),   # the scheduler decides
    (["scripts/msrun_launcher.sh", "python run.py", "16", "8", "1.2.3.4", "8118", "0", "out", "True", "300"],
     list(range(8))),
    (["python", "t.py"], [0]),
])
def test_expected_ranks_of_this_node(cmd, ranks):
    assert runner.msrun_info(cmd, {})["ranks"] == ranks


FAKE_MSRUN = """#!{py}
# stands in for msrun: writes worker logs for the ranks in FAKE_RANKS only, then exits 0
import os, sys
log_dir = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--log_dir="))
os.makedirs(log_dir, exist_ok=True)
for r in os.environ["FAKE_RANKS"].split(","):
    with open(os.path.join(log_dir, "worker_%s.log" % r), "w") as f:
        f.write("Set full recompute at layer 0\\n")
"""


def _fake_msrun(tmp_path, monkeypatch, ranks):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "msrun"
    fake.write_text(FAKE_MSRUN.format(py=PY))
    fake.chmod(0o755)
    monkeypatch.setenv("FAKE_RANKS", ranks)
    return str(fake)


def test_a_worker_log_that_never_appeared_is_reported_missing(tmp_path, monkeypatch):
    """run.json keeps the ranks msrun was asked for; the logs found are recorded beside them, so a
    worker that wrote nothing is SW402 rather than silently a smaller job."""
    msrun = _fake_msrun(tmp_path, monkeypatch, "0")
    res, out = _run_cmd(tmp_path, [msrun, "--worker_num=2", "--local_worker_num=2", "--join=True",
                                   f"--log_dir={tmp_path / 'logs'}", "t.py"])
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["ranks"] == [0, 1] and info["found_ranks"] == [0] and info["local_worker_num"] == 2
    doc = json.loads((res.run_dir / "verify.json").read_text())
    assert [(f["code"], f.get("rank")) for f in doc["findings"] if f["code"] == "SW402"] == [("SW402", 1)]


def test_one_node_of_a_multi_node_job_is_not_blamed_for_the_others(tmp_path, monkeypatch):
    msrun = _fake_msrun(tmp_path, monkeypatch, "8,9")
    res, _ = _run_cmd(tmp_path, [msrun, "--worker_num=4", "--local_worker_num=2", "--join=True",
                                 f"--log_dir={tmp_path / 'logs'}", "t.py"])
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["ranks"] is None and info["found_ranks"] == [8, 9]
    doc = json.loads((res.run_dir / "verify.json").read_text())
    assert not [f for f in doc["findings"] if f["code"] == "SW402"]


def test_one_node_of_a_multi_node_job_missing_one_of_its_logs(tmp_path, monkeypatch):
    msrun = _fake_msrun(tmp_path, monkeypatch, "9")
    res, _ = _run_cmd(tmp_path, [msrun, "--worker_num=4", "--local_worker_num=2", "--join=True",
                                 f"--log_dir={tmp_path / 'logs'}", "t.py"])
    doc = json.loads((res.run_dir / "verify.json").read_text())
    sw402 = [f for f in doc["findings"] if f["code"] == "SW402"]
    assert len(sw402) == 1 and "1 of this node's 2 worker logs are missing (found ranks 9)" in sw402[0]["message"]


def _run_cmd(tmp_path, command):
    cfg = tmp_path / "full.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 1\nrecompute_config:\n  recompute: True\n")
    out = io.BytesIO()
    res = runner.run(command, config=str(cfg), run_dir=str(tmp_path / "run"), out=out)
    return res, out.getvalue()


def test_worker_exit_code_from_msrun_console(tmp_path):
    f = tmp_path / "console.log"
    f.write_bytes(b"x\n[ERROR] ME(1:2,MainProcess):2026-01-01-00:00:00.000.000 [mindspore/parallel/cluster/"
                  b"process_entity/_api.py:365] Worker process 12299 exit with exception. Error code: 7.\n")
    assert runner.worker_exit_code(f) == 7


SPAWNER = """
import os, subprocess, sys, time
# like msrun: a worker that is a session leader (out of reach of the process group)
w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
g = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(300)"])
open(sys.argv[1], "w").write(f"{w.pid} {g.pid}")
time.sleep(300)
"""


def test_sigterm_leaves_no_process_behind(tmp_path):
    pids_file = tmp_path / "pids"
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    p = subprocess.Popen([PY, "-m", "swapwatch.cli", "run", "--run-dir", str(tmp_path / "run"), "--no-verify",
                          "--", PY, str(script), str(pids_file)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(300):
        if pids_file.exists() and pids_file.read_text().strip():
            break
        time.sleep(0.1)
    worker, stubborn = (int(x) for x in pids_file.read_text().split())
    me = psutil.Process(p.pid)
    procs = {q.pid: q for q in [me, *me.children(recursive=True), psutil.Process(worker), psutil.Process(stubborn)]}
    assert len(procs) == 4          # swapwatch, the spawner, the setsid worker, the SIGINT-ignoring child
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=120) == 128 + signal.SIGTERM
    _gone, alive = psutil.wait_procs(list(procs.values()), timeout=10)
    assert alive == []
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["interrupted"] == "SIGTERM" and info["exit_code"] == 143


# ---- preflight, nothing to verify, the config copy (issue 16 items 5-7) -------------------------

CONFLICT = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "conflict.yaml")
TOUCH = "open('started', 'w').write('the child ran')"


def _cli(tmp_path, *args):
    return subprocess.run([PY, "-m", "swapwatch.cli", *map(str, args)], capture_output=True, text=True, cwd=tmp_path)


def test_preflight_errors_keep_the_command_from_starting(tmp_path):
    r = _cli(tmp_path, "run", "--config", CONFLICT, "--run-dir", tmp_path / "run", "--", PY, "-c", TOUCH)
    assert r.returncode == 1, r.stderr
    assert not (tmp_path / "started").exists() and not (tmp_path / "run").exists()
    shown = [ln for ln in r.stdout.splitlines() if ln.startswith("swapwatch run: preflight: SW201 error")]
    assert len(shown) == 2 and "conflict.yaml:44" in shown[0]
    assert "the command was not started" in r.stdout and "--force" in r.stdout


def test_preflight_force_starts_the_command_anyway(tmp_path):
    r = _cli(tmp_path, "run", "--force", "--no-verify", "--config", CONFLICT, "--run-dir", tmp_path / "run",
             "--", PY, "-c", TOUCH)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "started").read_text() == "the child ran"
    assert "preflight found 2 error(s)" in r.stdout and "started anyway (--force)" in r.stdout
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert any("started anyway" in n for n in info["notes"])


def test_preflight_warnings_never_block(tmp_path):
    cfg = tmp_path / "warn.yaml"
    cfg.write_text('model:\n  model_config:\n    num_layers: 2\nrecompute_config:\n'
                   '  select_recompute: ["feed_forward\\\\.nosuch"]\n')
    r = _cli(tmp_path, "run", "--no-verify", "--config", cfg, "--run-dir", tmp_path / "run", "--", PY, "-c", TOUCH)
    assert r.returncode == 0 and (tmp_path / "started").exists(), r.stdout + r.stderr
    assert "swapwatch run: preflight: SW104 warning" in r.stdout


def test_preflight_on_a_config_swapwatch_rejects_is_exit_2_and_force_starts_it(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 4\nrecompute_config:\n  recompte: True\n")
    r = _cli(tmp_path, "run", "--config", cfg, "--run-dir", tmp_path / "run", "--", PY, "-c", TOUCH)
    assert r.returncode == 2 and not (tmp_path / "started").exists() and not (tmp_path / "run").exists()
    assert r.stderr.strip().splitlines() == [f"swapwatch: error: {cfg}:5: recompute_config.recompte: preflight: "
                                             "unknown key; did you mean 'recompute'? (--force starts the command "
                                             "anyway)"]
    r = _cli(tmp_path, "run", "--force", "--no-verify", "--config", cfg, "--run-dir", tmp_path / "run",
             "--", PY, "-c", TOUCH)
    assert r.returncode == 0 and (tmp_path / "started").exists()
    assert "preflight could not check the config" in r.stdout


def test_a_job_with_nothing_to_verify_keeps_its_exit_code(tmp_path):
    res, out = _run(tmp_path, "print('training without any strategy')")
    assert res.exit_code == 0
    said = [ln for ln in out.decode().splitlines() if "nothing to verify" in ln]
    assert len(said) == 1 and "no strategy line" in said[0] and "no --config" in said[0]
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["exit_code"] == 0 and info["verify"]["skipped"] == "nothing to verify"


def test_a_job_with_strategy_lines_but_no_config_still_asks_for_one(tmp_path):
    res, out = _run(tmp_path, "print('Set full recompute at layer 0')")
    assert res.exit_code == 2 and b"pass --config" in out


def test_the_config_is_copied_into_the_run_directory(tmp_path):
    cfg = tmp_path / "full.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 1\nrecompute_config:\n  recompute: True\n")
    res, _ = _run(tmp_path, "print('x')", config=str(cfg), verify=False)
    cfg.write_text("edited after the launch\n")
    info = json.loads((res.run_dir / "run.json").read_text())
    copy = res.run_dir / info["config"]["copy"]
    import hashlib
    assert copy.name == "config.yaml" and copy.read_bytes().startswith(b"model:")
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == info["config"]["sha256"]


# ---- an interrupt at any moment leaves a complete run.json ---------------------------------------

QUICK = "print('Set full recompute at layer 0', flush=True)"
SLOW = "import time; print('working', flush=True); time.sleep(60)"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("child, delay", [(SLOW, 0.0), (SLOW, 0.15), (SLOW, 0.4), (SLOW, 1.0),
                                          (QUICK, 0.3), (QUICK, 0.6), (QUICK, 0.9), (QUICK, 1.5)])
def test_an_interrupt_at_any_moment_leaves_a_valid_run_json(tmp_path, sig, child, delay):
    cfg = tmp_path / "full.yaml"
    cfg.write_text("model:\n  model_config:\n    num_layers: 1\nrecompute_config:\n  recompute: True\n")
    # started as from a terminal: SIGINT at its default. A background job of a non-interactive shell
    # (`make test &`, some CI runners) inherits SIGINT ignored, and swapwatch keeps an ignored signal
    # ignored (docs/reliability.md; test_run_reliability: the caller's ignored signal)
    p = subprocess.Popen([PY, "-m", "swapwatch.cli", "run", "--config", str(cfg), "--run-dir", str(tmp_path / "run"),
                          "--", PY, "-c", child], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay)
    p.send_signal(sig)
    rc = p.wait(timeout=120)
    stderr = p.stderr.read().decode()
    assert "internal error" not in stderr, stderr
    run = tmp_path / "run"
    if not run.exists():                  # the signal came before swapwatch had started anything
        if rc == 1 and "Fatal Python error: init_import_site" in stderr:
            # a SIGINT while the interpreter itself starts (its site module, before any code of
            # ours runs): Python's own fatal error, exit 1; seen on a loaded machine, nothing started
            assert sig == signal.SIGINT and stderr.rstrip().endswith("KeyboardInterrupt"), stderr
            return
        assert rc in (-sig, 130), (rc, stderr)
        # a SIGINT while the interpreter is still importing (before cli.main runs) is Python's own
        # KeyboardInterrupt report; nothing of the run exists yet, so nothing is lost
        if "Traceback" in stderr:     # (or a library's import wrapped it: swapwatch says "interrupted")
            assert sig == signal.SIGINT and stderr.rstrip().endswith(
                ("KeyboardInterrupt", "swapwatch: interrupted")), stderr
        return
    # the job's own stderr reaches ours too (docs/reliability.md: both copies): a Python job stopped by
    # the SIGINT swapwatch passes it prints its own KeyboardInterrupt traceback, which is the job's,
    # not ours (seen under load); whatever remains must hold no traceback
    job_err = run / "console.stderr.log"
    ours = stderr.replace(job_err.read_text(errors="replace"), "") if job_err.exists() else stderr
    assert "Traceback" not in ours, stderr
    info = json.loads((run / "run.json").read_text())      # complete JSON, whatever the moment
    assert info["end"] and not list(run.glob("*.tmp"))
    if rc == -sig:    # a late signal, after the run was complete and recorded, while Python exits
        assert info["exit_code"] in (0, 1) and info["interrupted"] is None
        return
    assert info["exit_code"] == rc
    if rc != 0:       # the child may have finished (and passed) before a late signal: that run is whole
        assert rc == 128 + sig and info["interrupted"] == signal.Signals(sig).name
    if info["child_exit_code"] is None:
        assert info["pid"] is None or info["interrupted"]


def test_a_bug_in_verify_is_exit_3_and_the_run_is_still_recorded(tmp_path, monkeypatch):
    def broken(*_a, **_k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("swapwatch.commands.verify.verify", broken)
    res, out = _run(tmp_path, "print('Set full recompute at layer 0')")
    assert res.exit_code == 3 and b"internal error in verify: ZeroDivisionError: a bug" in out
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["exit_code"] == 3 and info["end"] and (res.run_dir / "verify.txt").exists()


# ---- the strategy environment comes from the loaded config (config.load_config), not a YAML walk --
FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "families"


@pytest.mark.parametrize("name, wanted", [
    # mcore: swap comes from model_config (cpu_offloading); the top-level swap_config is ignored (SW306)
    ("qwen3_swap_conflict.yaml", True),
    ("qwen3_moe_ignored_swap.yaml", False),
    ("../swap_case1.yaml", True),
    ("../llama32_swap_trap.yaml", False),        # swap on, but pipeline parallel: no lazy-inline switch
    ("../pynative_mixed.yaml", False),           # the PyNative trainer: no strategy environment
])
def test_lazy_inline_switch_follows_the_config_object(tmp_path, name, wanted):
    cfg, sha = runner.read_config(str(FAMILIES / name))
    assert len(sha) == 64
    assert ("ENABLE_LAZY_INLINE_NO_PIPELINE" in runner.strategy_env(cfg, tmp_path, False, False)) is wanted


def test_a_config_swapwatch_rejects_leaves_the_environment_to_preflight(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  model_config:\n    num_layers: 4\nrecompute_config:\n  recompte: True\n"
                   "swap_config:\n  swap: True\n")
    assert runner.read_config(str(bad))[0] is None
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(InputError, match="expected a YAML mapping"):
        runner.read_config(str(tmp_path / "list.yaml"))
