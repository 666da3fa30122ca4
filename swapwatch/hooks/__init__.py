"""Runtime hooks: apply a plan to a MindSpore network, report memory per step, observe MindFormers.

The two helpers here are what every hook needs and must stay import-light (the MindFormers shim
loads from ``sitecustomize`` in every worker before anything else).
"""
import os


def env_rank() -> int:
    """This process's rank as msrun exports it (``RANK_ID``); 0 outside msrun or when unreadable."""
    try:
        return int(os.environ.get("RANK_ID", "0"))
    except ValueError:
        return 0


def emit(line: str) -> None:
    """Print an event line and flush: msrun writes worker stdout to a file, block-buffered."""
    print(line, flush=True)
