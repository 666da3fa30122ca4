"""``swapwatch rules``: the registry as text (a listing, or one rule's full explanation).

Like ``ruff rule E501``: the explanation is the rule class's docstring, so the text a user reads
and the code that decides are in one file.
"""
from __future__ import annotations

import inspect

from .checks import REGISTRY, _load_all, rule_variants
from .errors import InputError

NEEDS_TEXT = {"config": "the config alone", "run": "the run's logs", "ir": "compiled-graph IR"}


def list_rules() -> str:
    """One line per code: code, severity, what decides it, title."""
    _load_all()
    lines = []
    for code in sorted(REGISTRY):
        variants = rule_variants(code)
        rule = variants[0]
        needs = "+".join(v.needs for v in variants)
        lines.append(f"{code}  {rule.severity:<7}  {needs:<10}  {rule.title}")
    return "\n".join(lines) + "\n"


def explain_rule(code: str) -> str:
    """The full explanation of ``code``; unknown codes are bad input (exit 2)."""
    variants = rule_variants(code.strip().upper())
    if not variants:
        raise InputError(f"unknown rule code {code!r} (`swapwatch rules` lists them)")
    parts = []
    for rule in variants:
        head = f"{rule.code} ({rule.severity}, decided from {NEEDS_TEXT.get(rule.needs, rule.needs)}): {rule.title}"
        doc = inspect.cleandoc(type(rule).__doc__ or "(no explanation)")
        parts.append(f"{head}\n\n{doc}\n")
    return "\n".join(parts)
