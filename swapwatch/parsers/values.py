"""Python reprs in log lines back into Python values (``Formative ...``, ``initial ... from dict``, geometry).

Why not plain ``ast.literal_eval``: MindFormers prints numpy objects inside those reprs. A bool row
of a 2-D recompute table prints as ``array([4, 5, 5, 5, 5], dtype=int32)``, capped counts and
geometry ids as ``np.int64(0)`` under numpy >= 2 (plain ``0`` under numpy < 2). We rewrite exactly
those two forms (balanced-bracket aware, so nested lists survive) and then ``literal_eval``; the
result round-trips: ``repr`` of what we return equals the log text minus the numpy wrappers.
"""
from __future__ import annotations

import ast
import re
import warnings
from typing import Any

_NP_SCALAR = re.compile(r"\bnp\.(?:int|uint|float|bool|str)\w*\(\s*([^()]*?)\s*\)")
_NP_BOOL = re.compile(r"\bnp\.(True|False)_\b")
_ARRAY = re.compile(r"(?<![\w.])array\(")
_DTYPE = re.compile(r",\s*dtype=[\w.']+\s*$")


class Unparsed(str):
    """A repr we could not evaluate, kept verbatim (a ``str`` subclass so it still prints as logged)."""


def rewrite_numpy(text: str) -> str:
    """``array(X, dtype=T)`` -> ``X`` and ``np.int64(x)`` -> ``x`` (also np.True_ -> True)."""
    if "np." in text:
        text = _NP_BOOL.sub(r"\1", _NP_SCALAR.sub(r"\1", text))
    if "array(" not in text:
        return text
    out, i = [], 0
    for m in _ARRAY.finditer(text):
        if m.start() < i:          # inside an array we already rewrote (recursively)
            continue
        depth, k = 1, m.end()
        while k < len(text) and depth:
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(text[k], 0)
            k += 1
        inner = text[m.end():k - 1] if depth == 0 else text[m.end():]
        out.append(text[i:m.start()])
        out.append(_DTYPE.sub("", rewrite_numpy(inner)))
        i = k
    out.append(text[i:])
    return "".join(out)


def literal(text: str) -> Any:
    """The Python value of a logged repr; an :class:`Unparsed` string when it is not a literal."""
    text = text.strip()
    try:
        with warnings.catch_warnings():      # a damaged repr must not print a SyntaxWarning line
            warnings.simplefilter("ignore")
            return ast.literal_eval(rewrite_numpy(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return Unparsed(text)


def scalar(text: str) -> Any:
    """A logged scalar (prefetch value, layer swap value): int when integral, else the text (``Auto``)."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
