"""swapwatch.report.indented_json writes exactly what ``json.dumps(indent=..., ensure_ascii=False)`` writes:
on the verify reports of the fixture logs, and on random documents (every JSON type, nested,
strings that need escaping, repeated strings, keys that are not strings, floats, subclasses and
objects that go through ``default``)."""
from __future__ import annotations

import enum
import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapwatch.report import indented_json
from swapwatch.commands.verify import verify
from swapwatch.report.verify import _jsonable, document

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "fixtures", "logs")


def _same(doc, indent=2):
    want = json.dumps(doc, indent=indent, ensure_ascii=False, default=_jsonable)
    assert indented_json.dumps(doc, indent=indent, default=_jsonable) == want


@pytest.mark.parametrize("path", ["msrun_2ranks", "msrun_missing_rank", "truncated.log", "quirks.log",
                                  "recompute_48l.log", "stdout_devices", "families", "cpu_swap"])
def test_verify_reports_of_the_fixtures(path):
    _same(document(verify([os.path.join(LOGS, path)])))


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    pass


scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["repeated message ✗ → \"quoted\"\n", "SW112", "", "é\t\x00\u2028"]),
                    st.builds(Name, st.text(max_size=5)), st.just(Level.LOW),
                    st.frozensets(st.integers(0, 9), max_size=3))       # through default
keys = st.one_of(st.text(max_size=6), st.sampled_from(["code", "message"]), st.integers(-3, 3),
                 st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.lists(inner, max_size=4).map(tuple),
    st.dictionaries(st.text(max_size=6), inner, max_size=5), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(documents, st.sampled_from([1, 2, 4]))
def test_random_documents(doc, indent):
    _same(doc, indent)


def test_wide_flat_documents_and_empty_containers():
    finding = {"code": "SW112", "severity": "warning", "message": "the same text on every rank",
               "rank": 0, "expected": "x", "actual": 92, "source": "worker_0.log:12"}
    _same({"ranks": list(range(300)), "findings": [dict(finding, rank=r) for r in range(300)],
           "empty": [{}, [], (), ""], "nan": [math.nan, -0.0, 1e300]})
