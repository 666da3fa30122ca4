"""swapwatch's opt-in MindFormers shim (``swapwatch run --mindformers-shim`` puts this dir on PYTHONPATH).

Every Python process of the job (msrun, its scheduler, the workers) imports this at start-up. With
``SWAPWATCH_MINDFORMERS_SHIM=1`` it installs swapwatch.hooks.mindformers (an import hook; nothing
heavy is imported). It then runs the ``sitecustomize`` this file shadows, if there is one, so the
user's own start-up code still runs. Nothing here may stop the interpreter from starting.
"""
import os
import sys


def _swapwatch_install():
    if os.environ.get("SWAPWATCH_MINDFORMERS_SHIM") != "1":
        return
    try:
        from swapwatch.hooks.mindformers import install
        install()
    except Exception as exc:  # noqa: BLE001
        print(f"swapwatch shim: not installed ({type(exc).__name__}: {exc})", file=sys.stderr)


def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    try:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as exc:  # noqa: BLE001
        print(f"swapwatch shim: the shadowed sitecustomize {spec.origin} failed: {exc}", file=sys.stderr)


_swapwatch_install()
_chain_next_sitecustomize()
