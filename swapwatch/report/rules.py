"""``swapwatch rules``: the registry as text (a listing, or one rule's full explanation).

Like ``ruff rule E501``: the explanation is the rule class's docstring, so the text a user reads
and the code that decides are in one file. The docstrings are reStructuredText (``**bold**``,
``double backticks``, ``::`` before a literal block); :func:`render_doc` turns that markup into
terminal text, so a user reads "What it means." in bold, not ``**What it means.**``.
"""
from __future__ import annotations

import inspect
import re
from typing import Callable, List, Optional

from ..checks import REGISTRY, load_rules, rule_variants
from ..errors import InputError
from ..text import write_table

NEEDS_TEXT = {"config": "the config alone", "run": "the run's logs", "ir": "compiled-graph IR"}
Style = Callable[..., str]

_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_EMPH = re.compile(r"(?<![*\w])\*(?![\s*])(.+?)(?<![\s*])\*(?![*\w])", re.DOTALL)


def list_rules() -> str:
    """One line per code: code, severity, what decides it, title."""
    load_rules()
    rows = []
    for code in sorted(REGISTRY):
        variants = rule_variants(code)
        rule = variants[0]
        rows.append([code, rule.severity, "+".join(v.needs for v in variants), rule.title])
    return "\n".join(write_table(None, rows)) + "\n"


def normalise_code(code: str) -> str:
    """``SW201``, ``sw201`` and ``201`` all name SW201."""
    text = code.strip().upper()
    return f"SW{text}" if text.isdigit() else text


def explain_rule(code: str, style: Optional[Style] = None) -> str:
    """The full explanation of ``code``; unknown codes are bad input (exit 2).

    ``style`` is ``click.style`` (or any ``style(text, bold=True)``) for the bold run-in headings;
    None gives plain text.
    """
    variants = rule_variants(normalise_code(code))
    if not variants:
        raise InputError(f"unknown rule code {code!r} (`swapwatch rules` lists them)")
    parts = []
    for rule in variants:
        head = f"{rule.code} ({rule.severity}, decided from {NEEDS_TEXT.get(rule.needs, rule.needs)}): {rule.title}"
        doc = inspect.cleandoc(type(rule).__doc__ or "(no explanation)")
        parts.append(f"{head}\n\n{render_doc(doc, style)}\n")
    return "\n".join(parts)


def render_doc(doc: str, style: Optional[Style] = None) -> str:
    """reST markup of a rule docstring -> terminal text: ``**x**`` bold (or plain), ``*x*`` plain,
    ````x```` -> x (also across a line break), a paragraph's trailing ``::`` -> ``:`` (nothing after
    a period or colon). The indented literal block after ``::`` (the YAML fix) stays as written."""
    bold = (lambda m: style(m.group(1), bold=True)) if style else (lambda m: m.group(1))

    def prose(text: str) -> str:
        if text.rstrip().endswith("::"):
            body = text.rstrip()[:-2].rstrip()
            plain = _BOLD.sub(lambda m: m.group(1), body)
            text = body if plain.endswith((".", ":")) or not plain else body + ":"
        parts = _LITERAL.split(text)          # odd items: the text inside double backticks
        return "".join(p if i % 2 else _EMPH.sub(r"\1", _BOLD.sub(bold, p)) for i, p in enumerate(parts))

    out: List[str] = []
    para: List[str] = []
    for line in doc.splitlines() + [""]:
        if line.strip() and not line.startswith((" ", "\t")):      # prose: gather the paragraph
            para.append(line)
            continue
        if para:                                  # a blank or indented (literal) line ends it
            out.extend(prose("\n".join(para)).split("\n"))
            para = []
        out.append(line)
    return "\n".join(out[:-1])
