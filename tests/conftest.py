"""What a full test run needs, checked once before collection.

The runtime tests need real MindSpore (and msrun next to the interpreter), the oracle tests need
real MindFormers 2.1.0 in ``.oracle-venv``. A developer may run a subset without them, and those
tests then skip; ``make test`` (and so CI) sets ``SWAPWATCH_REQUIRE_ALL=1``, and then a missing
piece stops the run with one line instead of turning a third of the suite into silent skips.
"""
import importlib.util
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def nosuch(tmp_path):
    """An mcore YAML of a model family swapwatch has no memory model for (``nosuch_moe``): the one-line
    NotModelled refusal of every sizing command (tests/test_codepaths.py, tests/test_estimate_families.py)."""
    path = tmp_path / "nosuch.yaml"
    path.write_text(textwrap.dedent("""\
        use_legacy: False
        model:
          model_config: {model_type: nosuch_moe, num_hidden_layers: 4, hidden_size: 64, num_attention_heads: 4,
                         seq_length: 32, vocab_size: 256}
        """))
    return str(path)


def _missing():
    if importlib.util.find_spec("mindspore") is None:
        yield "mindspore is not importable (pip install -e '.[mindspore,test]')"
    if shutil.which("msrun", path=str(Path(sys.executable).parent)) is None:
        yield f"msrun is not in {Path(sys.executable).parent}"
    if not (REPO / ".oracle-venv" / ".ready").exists():
        yield "the MindFormers oracle venv .oracle-venv/.ready is missing (make oracle)"
    if not (REPO / ".dryrun-stubs" / ".built").exists():
        yield "the DryRun CANN stand-ins .dryrun-stubs/ are missing (make dryrun)"
    if not (core_venv() / "bin" / "swapwatch").exists():
        yield f"the core-only venv {core_venv()} is missing (make core; SWAPWATCH_CORE_VENV names another)"
    if importlib.util.find_spec("playwright") is None:
        yield "playwright is not importable (pip install -e '.[test]')"
    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        yield f"no Chromium at {chromium} (make browser)"


def core_venv() -> Path:
    """The core-only install tests/test_core_install.py runs (``make core`` builds it)."""
    return Path(os.environ.get("SWAPWATCH_CORE_VENV") or REPO / ".core-venv")


def pytest_configure(config):
    if os.environ.get("SWAPWATCH_REQUIRE_ALL") == "1":
        missing = list(_missing())
        if missing:
            raise pytest.UsageError("SWAPWATCH_REQUIRE_ALL=1 but " + "; ".join(missing))


def pytest_collection_modifyitems(config, items):
    """Every hypothesis property test is in the fuzz tier (docs/development.md), wherever it lives:
    each runs hundreds of generated examples, which is most of the unit tier's time otherwise."""
    fuzz = pytest.mark.fuzz
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(fuzz)
