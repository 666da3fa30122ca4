"""Which output formats each command's result has: the names ``--format`` offers (``cli.py``) and each renderer
answers (``report/explain.py``, ``report/verify.py``, ``report/diff.py``, ``memory/render.py``,
``tune/report.py``). No import beyond the standard library, so the CLI reads it at start-up; a new format is its
name here and its function in the result's renderer (tests/test_report_formats.py holds the two together).
"""
from __future__ import annotations

EXPLAIN = ("table", "json", "formative")
VERIFY = ("table", "json", "junit", "markdown")
DIFF = ("table", "json")
EVENTS = ("jsonl", "csv")
ESTIMATE = ("table", "json")
PLAN = ("table", "json", "yaml")
TUNE = ("table", "json")
