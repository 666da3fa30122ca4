"""Headless, deterministic matplotlib: figure creation, units, and saving.

Why no ``pyplot``: pyplot keeps global state and picks an interactive backend when a display is
around. Building :class:`matplotlib.figure.Figure` objects directly renders through Agg with no
display at all and leaves the user's own pyplot session (a notebook importing swapwatch) alone.

Why fixed metadata: tests compare files written twice, and users diff committed images. PNG's
``Software``, SVG's ``Date`` and random element ids, and PDF's creation date all change from run to
run unless pinned here.
"""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Iterator, Optional

from ..errors import InputError
from ..text import GIB, MIB

if TYPE_CHECKING:
    from matplotlib.figure import Figure
# matplotlib itself is imported where a figure is made, not here: the plot commands check their
# output path with this module before the logs are scanned, and matplotlib costs 0.3 s to import

FORMATS = ("png", "svg", "pdf")

#: MindSpore prints memory in "M" meaning 2**20 bytes (``/kMBToByte``); we say MiB, which is the same,
#: so the number on the plot is the number in the log.
MB = MIB
GB = GIB

STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.35,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "svg.hashsalt": "swapwatch",
    "svg.fonttype": "none",          # real <text>: searchable, smaller, testable
    "pdf.compression": 6,
}

_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The house style for building and saving a figure (rc params are read at both times)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]  # stub gap: rc keys typed as a Literal
        yield


def new_figure(width: float, height: float) -> Figure:
    """A Figure bound to an Agg canvas: savefig works with no display and no pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def resolve_format(out: str, fmt: Optional[str]) -> str:
    """The output format from ``fmt`` or the file suffix; InputError when they disagree or are unknown."""
    suffix = os.path.splitext(str(out))[1].lower().lstrip(".")
    if fmt:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise InputError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        if suffix in FORMATS and suffix != fmt:
            raise InputError(f"{out}: the name says .{suffix} but --format is {fmt}; make them agree")
        return fmt
    if suffix in FORMATS:
        return suffix
    raise InputError(f"{out}: cannot tell the image format from the name; "
                     f"end it in .png, .svg or .pdf or pass --format")


def check_writable(out: str) -> None:
    """Refuse to create directories on the user's behalf: a missing parent is most likely a typo."""
    parent = os.path.dirname(os.path.abspath(str(out)))
    if not os.path.isdir(parent):
        raise InputError(f"{out}: the directory {parent} does not exist; create it first or pick another -o")
    if os.path.isdir(str(out)):
        raise InputError(f"{out}: is a directory; -o needs a file name such as {os.path.join(str(out), 'memory.png')}")


def save(fig: Figure, out: str, fmt: Optional[str] = None, force: bool = False) -> str:
    """Write ``fig`` to ``out`` deterministically, whole or not at all, and never over an existing
    file without ``force`` (:func:`swapwatch.commands.outputs.write_with`); returns the format used."""
    from ..commands.outputs import write_with

    fmt = resolve_format(out, fmt)
    check_writable(out)
    with style():
        write_with(out, force, lambda fh: fig.savefig(fh, format=fmt, metadata=_METADATA[fmt], dpi=100))
    return fmt


def svg_text(figure: Figure) -> str:
    """``figure`` as SVG text, drawn under the house style with the metadata ``-o x.svg`` pins (the HTML report
    inlines it)."""
    import io

    buf = io.StringIO()
    with style():
        figure.savefig(buf, format="svg", metadata=_METADATA["svg"], dpi=100)
    return buf.getvalue()
