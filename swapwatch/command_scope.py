"""Is a CLI command running? The flag behind the config readers' one reading per command
(``config/load.py``: :func:`swapwatch.config.load.forget_reads`).

Why a module of its own, importing nothing: the CLI opens the scope as each command starts, and
importing ``swapwatch.config`` for that (the whole package and PyYAML, ~25 ms) delayed every
command, ``verify``'s pool workers included, which fork before any config is read. The config
package's registries are emptied by ``forget_reads`` when it is imported; before that they are empty.
"""
from __future__ import annotations

_ACTIVE = False


def active() -> bool:
    """True between a command's start and end: its files are read and parsed once."""
    return _ACTIVE


def set_active(command: bool) -> None:
    """A command starts (``True``) or ended (``False``)."""
    global _ACTIVE
    _ACTIVE = command
