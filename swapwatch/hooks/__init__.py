"""Runtime hooks: apply a plan to a MindSpore network, report memory per step, observe MindFormers.

The two helpers here are what every hook needs and must stay import-light (the MindFormers shim
loads from ``sitecustomize`` in every worker before anything else).
"""
import importlib.util
import os
import sys

from ..errors import InputError


def env_rank() -> int:
    """This process's rank as msrun exports it (``RANK_ID``); 0 outside msrun or when unreadable."""
    try:
        return int(os.environ.get("RANK_ID", "0"))
    except ValueError:
        return 0


def emit(line: str) -> None:
    """Print an event line and flush: msrun writes worker stdout to a file, block-buffered."""
    print(line, flush=True)


class MindSporeMissing(InputError):
    """The runtime side was asked for in a Python without MindSpore (a core install)."""


def require_mindspore(what: str) -> None:
    """Raise one clear line when MindSpore is not importable here, naming what needed it.

    The core install (``pip install swapwatch``) has no MindSpore on purpose: on Ascend clusters it
    comes from the vendor's wheel. Without this check the first sign would be a
    ``ModuleNotFoundError`` deep in a training script, or a callback that silently does nothing.
    """
    if importlib.util.find_spec("mindspore") is None:
        raise MindSporeMissing(f"{what} needs MindSpore, which is not installed for {sys.executable} "
                               "(pip install 'swapwatch[mindspore]', or your vendor's MindSpore wheel)")
