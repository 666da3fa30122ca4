"""The one dispatch (swapwatch/engine/codepaths.py, docs/DESIGN.md §1.2): every command sizes through ``cp.size``.

* the two bugs of the architecture review: ``plot estimate`` of a PyNative YAML exited 2 ("the layer count is
  unknown") while ``estimate`` sized it, and ``report`` of a PyNative run showed that error as a note;
* what a path or a family does not model is one line naming the command, the same line for every command
  (``errors.NotModelled``), exit 2 (a note in ``diff`` and ``report``).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys


from swapwatch.engine import codepaths
from swapwatch.config import TrainingDocument
from swapwatch.errors import NotModelled

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "fixtures", "configs")
SIZED = os.path.join(CONFIGS, "pynative_qwen3_sized.yaml")
STATIC = os.path.join(CONFIGS, "plan_tiny.yaml")
EXE = os.path.join(os.path.dirname(sys.executable), "swapwatch")


def _run(*args):
    res = subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    return res.returncode, res.stdout, res.stderr


def test_the_dispatch_reads_the_document_once_and_names_the_path():
    doc = TrainingDocument.read(SIZED)
    assert isinstance(codepaths.of(doc), codepaths.ApplyAc) and doc.lines["recompute"] == 21
    static = codepaths.of(TrainingDocument.read(STATIC))
    assert isinstance(static, codepaths.LayerSetting) and not static.mcore
    mcore = codepaths.of(TrainingDocument.from_text("use_legacy: False\nmodel: {model_config: {}}\n", "m.yaml"))
    assert isinstance(mcore, codepaths.LayerSetting) and mcore.mcore
    # a non-mapping document goes to the LayerSetting loader, which says what is wrong with it
    assert isinstance(codepaths.of(TrainingDocument.from_text("- 1\n", "l.yaml")), codepaths.LayerSetting)


def test_plot_estimate_of_a_pynative_yaml_sizes_it_as_estimate_does(tmp_path):
    out = tmp_path / "e.png"
    code, stdout, err = _run("plot", "estimate", SIZED, "-o", str(out))
    assert code == 0 and not err and out.stat().st_size > 1000, err
    assert stdout.startswith(f"wrote {out}: 1 stage, no measured peak")
    code, js, err = _run("estimate", SIZED, "--format", "json")
    assert code == 0 and json.loads(js)["path"] == "pynative" and len(json.loads(js)["stages"]) == 1


def _pynative_run_dir(tmp_path, config):
    run = tmp_path / "run"
    shutil.copytree(os.path.join(ROOT, "fixtures", "logs", "pynative_qwen3"), run)
    shutil.copy(config, run / "config.yaml")
    (run / "run.json").write_text(json.dumps({"command": ["msrun"], "config": {"path": config, "copy": "config.yaml"},
                                              "exit_code": 0}))
    return run


def test_report_of_a_pynative_run_draws_its_estimate(tmp_path):
    run = _pynative_run_dir(tmp_path, SIZED)
    page = tmp_path / "r.html"
    code, out, err = _run("report", str(run), "-o", str(page))
    assert code == 0 and not err, err
    html = page.read_text()
    assert "the layer count is unknown" not in html and "estimate: " not in html
    from swapwatch.commands.report import build

    part = build([str(run)]).runs[0]
    assert part.estimate is not None and part.estimate.to_json()["path"] == "pynative"
    assert part.estimate_plot is not None


def _refusal(err: str, command: str) -> str:
    """The line with the command's name taken out: what every command must say alike."""
    assert err.count("\n") == 1 and err.startswith("swapwatch: error: ") and "Traceback" not in err, err
    assert f" {command} does not model " in err, err
    return err.replace(f" {command} does not model ", " CMD does not model ")


def test_a_path_not_modelled_is_the_same_line_for_every_command(tmp_path):
    # plan, tune and estimate --dryrun model the PyNative path (issue 33); --calibrate does not, nor plan's
    # --allow-swap: the same line for every command that asks
    flags = {}
    for command, args in (("estimate --calibrate", ("estimate", SIZED, "--calibrate", SIZED)),
                          ("plot estimate --calibrate", ("plot", "estimate", SIZED, "--calibrate", SIZED, "-o",
                                                         str(tmp_path / "e.png"))),
                          ("plan --calibrate", ("plan", SIZED, "--budget", "60GiB", "--calibrate", SIZED))):
        code, out, err = _run(*args)
        assert code == 2 and not out
        flags[command] = _refusal(err, command)
    assert len(set(flags.values())) == 1, flags
    assert "pynative_qwen3_sized.yaml:21: recompute: CMD does not model the PyNative (r2.x) path yet" in \
        flags["estimate --calibrate"]
    code, out, err = _run("plan", SIZED, "--budget", "60GiB", "--allow-swap")
    assert code == 2 and not out and "plan --allow-swap does not model the PyNative (r2.x) path yet" in err
    assert not (tmp_path / "e.png").exists()


def test_a_family_not_modelled_is_the_same_line_for_every_command(nosuch, tmp_path):
    said = {}
    for command, args in (("estimate", ("estimate", nosuch)), ("plan", ("plan", nosuch, "--budget", "1GiB")),
                          ("plot estimate", ("plot", "estimate", nosuch, "-o", str(tmp_path / "e.png")))):
        code, out, err = _run(*args)
        assert code == 2 and not out
        said[command] = _refusal(err, command)
    assert len(set(said.values())) == 1, said
    line = said["estimate"][len("swapwatch: error: "):].strip()
    assert line.startswith("CMD does not model model family 'nosuch_moe' (") and "no memory model for it" in line
    # diff says it as its note, naming itself
    code, out, err = _run("diff", nosuch, STATIC, "--format", "json")
    assert code in (0, 1) and not err
    assert json.loads(out)["estimate_note"] == "no memory estimate: " + line.replace("CMD", "diff")


def test_not_modelled_is_said_by_the_first_command_only():
    exc = NotModelled("the X path", "a hint", file="x.yaml", line=3, key="k")
    assert exc.one_line() == "x.yaml:3: k: swapwatch does not model the X path yet (a hint)"
    assert exc.for_command("plan").for_command("report").one_line() == \
        "x.yaml:3: k: plan does not model the X path yet (a hint)"
