"""Every command that takes a training YAML reads and parses it exactly once (issue 23 pt 2), tune included.

Why: a second parse is a second reader that can disagree with the first (``memory/spec.py`` used
to be one), and a pipe (``--config <(...)``) has no second read. The count is taken at PyYAML's
composer (every parse of a text, whoever calls it), in-process through the CLI's own ``main``:
the YAML's text must be composed once. ``plan`` checks the YAML it writes from its text (one more
parse, of the written text), through no temporary file.
"""
from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml

from swapwatch.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "fixtures" / "configs"
#: a worker log for verify --config (its findings do not matter here, only the reads)
LOG = ROOT / "fixtures" / "logs" / "swap_case1.log"

#: one config per code path and shape: legacy dense, legacy MoE + MTP, mcore, PyNative, finetune
#: (pretrained_model_dir config.json merged), swap
SAMPLES = ["swap_case1.yaml", "families/deepseek_v3_mtp.yaml", "families/qwen3_moe_ignored_swap.yaml",
           "pynative_pp2.yaml", "mindformers/finetune_glm4_9b.yaml", "plan_tiny.yaml"]


class _Parses:
    """Texts composed by PyYAML (any loader, any caller), counted by their text."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: Counter = Counter()
        original = yaml.composer.Composer.get_single_node
        parses = self

        def counting(loader):  # type: ignore[no-untyped-def]
            buffer = getattr(loader, "buffer", "")
            parses.texts[buffer.rstrip("\0").lstrip("\ufeff")] += 1
            return original(loader)

        monkeypatch.setattr(yaml.composer.Composer, "get_single_node", counting)
        import swapwatch.config.tree as tree

        self.builds: Counter = Counter()        # TrainingConfigs made, by source
        build = tree._from_tree

        def counting_build(data, lines, source, *a, **kw):  # type: ignore[no-untyped-def]
            self.builds[source] += 1
            return build(data, lines, source, *a, **kw)

        monkeypatch.setattr(tree, "_from_tree", counting_build)
        self.temps: list = []
        made = tempfile.mkstemp

        def mkstemp(*a, **kw):  # type: ignore[no-untyped-def]
            self.temps.append(kw.get("prefix") or (a[1] if len(a) > 1 else ""))
            return made(*a, **kw)

        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)

    def of(self, path: Path) -> int:
        return self.texts[path.read_text(encoding="utf-8").lstrip("\ufeff")]


def _run(argv) -> int:
    try:
        main([str(a) for a in argv])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _commands(cfg: Path, tmp: Path):
    yield "explain", ["explain", cfg]
    yield "explain-json", ["explain", cfg, "--format", "json"]
    yield "estimate", ["estimate", cfg]
    yield "plan", ["plan", cfg, "--budget", "24GiB", "--format", "yaml"]
    other = tmp / "other.yaml"
    if cfg.exists():
        other.write_text("# the other side of diff\n" + cfg.read_text(encoding="utf-8"), encoding="utf-8")
    yield "diff", ["diff", cfg, other]
    yield "plot-strategy", ["plot", "strategy", cfg, "-o", tmp / "s.svg", "--force"]
    yield "plot-estimate", ["plot", "estimate", cfg, "-o", tmp / "e.svg", "--force"]
    yield "verify-config", ["verify", LOG, "--config", cfg]
    yield "run-config", ["run", "--config", cfg, "--run-dir", tmp / "run", "--no-report", "--force", "--",
                         sys.executable, "-c", "pass"]
    # tune writes and estimates attempt YAMLs of its own (new texts); the user's YAML is parsed once.
    # The command runs nothing that trains: its first attempt fails, and tune stops (exit 1)
    yield "tune", ["tune", cfg, "--budget", "1GiB", "--max-runs", "2", "--steps", "5", "--dir", tmp / "t.tune",
                   "--", sys.executable, "-c", "pass", "{config}"]


CASES = [(name, cmd) for name in SAMPLES for cmd, _ in _commands(Path("-"), Path("."))]


@pytest.mark.parametrize("sample,command", CASES)
def test_a_command_parses_its_yaml_once(sample, command, monkeypatch, tmp_path, capsys):
    cfg = CONFIGS / sample
    argv = dict(_commands(cfg, tmp_path))[command]
    parses = _Parses(monkeypatch)
    code = _run(argv)
    out = capsys.readouterr()
    # 2: a clean refusal of this YAML by this command (e.g. estimate without the model's sizes):
    # it read the YAML to say so, once as well; 4: verify of a log that is not this config's run
    assert code in (0, 1, 2, 4) and "Traceback" not in out.err, (code, out.err)
    assert parses.of(cfg) == 1, f"{command} {sample} parsed its YAML {parses.of(cfg)} times"
    # one TrainingConfig of the YAML flows to the engine, the rules, the memory model and the writer
    # (plan and tune, which plans: one more, of the YAML the writer makes, checked from its text)
    assert parses.builds[str(cfg)] <= (2 if command in ("plan", "tune") else 1), parses.builds
    if command in ("plan", "tune"):
        assert not [p for p in parses.temps if "plan" in p], "plan checked its output through a temp file"


def test_a_library_caller_outside_a_command_reads_a_rewritten_file_again(tmp_path):
    # the one-reading memo lives for one CLI command: a library caller that rewrites its YAML between
    # two loads gets the new text (same size, so no stat trick could tell them apart)
    from swapwatch.config import load_config

    path = tmp_path / "x.yaml"
    path.write_text("model:\n  model_config:\n    num_layers: 4\n", encoding="utf-8")
    assert load_config(str(path)).num_layers == 4
    path.write_text("model:\n  model_config:\n    num_layers: 6\n", encoding="utf-8")
    assert load_config(str(path)).num_layers == 6


def test_each_command_reads_afresh(tmp_path, capsys):
    # two commands in one process (a test, a notebook): the second one reads the file as it is now
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  model_config:\n    num_layers: 4\n", encoding="utf-8")
    assert _run(["explain", path, "--format", "json"]) == 0
    assert '"num_layers": 4' in capsys.readouterr().out
    path.write_text("model:\n  model_config:\n    num_layers: 6\n", encoding="utf-8")
    assert _run(["explain", path, "--format", "json"]) == 0
    assert '"num_layers": 6' in capsys.readouterr().out


def test_a_file_the_command_rewrites_is_read_again(tmp_path):
    # within a command (tune writes its attempt YAMLs, then estimates them) a rewritten file is new
    from swapwatch.config import forget_reads, load_config

    path = tmp_path / "x.yaml"
    forget_reads()                               # as the CLI's main does at a command's start
    try:
        path.write_text("model:\n  model_config:\n    num_layers: 4\n", encoding="utf-8")
        assert load_config(str(path)).num_layers == 4
        assert load_config(str(path)) is load_config(str(path))      # one object per document
        path.write_text("model:\n  model_config:\n    num_layers: 16\n", encoding="utf-8")
        assert load_config(str(path)).num_layers == 16
    finally:
        forget_reads(command=False)


def test_the_command_scope_opens_without_importing_the_config_package():
    # The CLI opens a command's one reading without importing swapwatch.config (PyYAML and the whole
    # package: ~25 ms before verify's pool workers fork); a config read later in the command still
    # reads once, and the scope closes with the command. A fresh interpreter: here the package is
    # imported already.
    import subprocess

    code = "\n".join([
        "import sys",
        "from swapwatch import command_scope",
        "from swapwatch.cli import cli, main",
        "@cli.command('probe-scope')",
        "def probe():",
        "    print('config imported at start:', 'swapwatch.config' in sys.modules)",
        "    from swapwatch.config.load import command_scope as in_command",
        "    print('in command:', in_command())",
        "try:",
        "    main(['probe-scope'])",
        "except SystemExit:",
        "    pass",
        "print('after:', command_scope.active())",
    ])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["config imported at start: False", "in command: True", "after: False"]
