"""The package as a user gets it, on every Python it claims (``make test`` runs ``make wheel-test``).

Sessions:

- ``wheel``: build the sdist and wheel once with the standard frontend (``python -m build``) into
  ``dist/`` and check their metadata (``twine check``): the README renders, the classifiers and
  ``python_requires`` are there.
- ``core_install-3.9`` ... ``core_install-3.13``: a bare venv per Python (no MindSpore, no psutil,
  nothing of the repository on ``sys.path``), the wheel from ``dist/`` installed into it, then the
  core install's commands run on fixtures from a scratch directory: explain, verify, diff, plot
  memory, estimate, plan. Each must give the exit code it gives in the tests. (Every command and
  option of the core install is tested by tests/test_core_install.py; this is the same wheel on
  every claimed Python.)

Cost: the venvs are reused (``nox -r``), pip's cache serves the dependencies, and they are
installed again only when setup.cfg changed, so after the first run a session is one
``pip install --force-reinstall --no-deps`` of the wheel plus the commands (docs/development.md
gives the measured seconds).

The interpreters are looked up on PATH as ``python3.X``; pyenv's version directories are added to
PATH first when they exist (``pyenv install 3.9`` ... ``3.13`` provides them).
"""
from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
#: What setup.cfg claims (python_requires >= 3.9 and the classifiers): keep the three in step.
PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]

nox.options.sessions = ["wheel", "core_install"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

_pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
_extra = [str(b) for v in PYTHONS for b in sorted(_pyenv.glob(f"{v}.*/bin")) if (b / f"python{v}").exists()]
if _extra:   # before pyenv's shims, which refuse a python3.X that `pyenv global` does not list
    os.environ["PATH"] = os.pathsep.join(_extra + [os.environ.get("PATH", "")])


def _wheel() -> str:
    wheels = sorted(glob.glob(str(REPO / "dist" / "swapwatch-*.whl")))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in dist/, found {wheels}: run `nox -s wheel` first")
    return wheels[0]


@nox.session(python=False)
def wheel(session: nox.Session) -> None:
    """Build sdist + wheel once into a clean dist/ and check their metadata."""
    shutil.rmtree(REPO / "dist", ignore_errors=True)
    shutil.rmtree(REPO / "build", ignore_errors=True)
    session.run(sys.executable, "-m", "build", "--outdir", str(REPO / "dist"), str(REPO), silent=True)
    session.run(sys.executable, "-m", "twine", "check", "--strict", *glob.glob(str(REPO / "dist" / "*")))
    shutil.rmtree(REPO / "build", ignore_errors=True)


@nox.session(python=PYTHONS)
def core_install(session: nox.Session) -> None:
    """The wheel in a bare venv: the core commands on fixtures, with their exit codes."""
    whl = _wheel()
    _install(session, whl)
    fx = REPO / "fixtures"
    work = tempfile.mkdtemp(prefix="swapwatch-nox-")
    session.chdir(work)
    try:
        def sw(*args: str, code: int = 0) -> None:
            session.run("swapwatch", *args, success_codes=[code], silent=True, external=False)

        session.run("python", "-c", "import swapwatch, importlib.util as u; "
                    "assert 'site-packages' in swapwatch.__file__, swapwatch.__file__; "
                    "assert u.find_spec('mindspore') is None; print(swapwatch.__version__)")
        sw("--version")
        sw("explain", str(fx / "configs" / "conflict.yaml"), code=1)
        sw("verify", str(fx / "logs" / "truncated.log"), "--config", str(fx / "configs" / "swap_case3.yaml"), code=1)
        sw("diff", str(fx / "plot_runs" / "select"), str(fx / "plot_runs" / "full"), code=1)
        sw("plot", "memory", str(fx / "plot_runs" / "none"), str(fx / "plot_runs" / "full"), "-o", "memory.png")
        sw("estimate", str(fx / "configs" / "plan_qwen64.yaml"))
        sw("plan", str(fx / "configs" / "plan_qwen64.yaml"), "--budget", "15GiB", "-o", "planned.yaml")
        for out in ("memory.png", "planned.yaml"):
            if not os.path.getsize(out):
                session.error(f"{out} is empty")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install(session: nox.Session, whl: str) -> None:
    """This build's code always; the dependencies only when the venv is new or setup.cfg's changed
    (pip resolving them again costs seconds a session even when nothing is missing)."""
    stamp = Path(session.virtualenv.location) / ".swapwatch-deps"
    deps = (REPO / "setup.cfg").read_text(encoding="utf-8")
    if not stamp.exists() or stamp.read_text(encoding="utf-8") != deps:
        session.install(whl)                                                   # from pip's cache
        stamp.write_text(deps, encoding="utf-8")
    session.install("--force-reinstall", "--no-deps", "--no-compile", whl)
