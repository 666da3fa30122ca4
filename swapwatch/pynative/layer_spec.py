"""The PyNative layer-spec grammar (`'5'`, `'0-19'`) and MindFormers' checks on lists of specs.

MindFormers 2.1.0 ``activation_checkpoint.py:_validate_layer_id_range`` / ``_validate_layer_specs`` /
``_parse_layer_ids``: each spec is ``str()``-ed, stripped and must fullmatch ``^(\\d+)(?:-(\\d+))?$``;
``lo <= hi``; ``hi`` below the total layer count (decoder + MTP layers); within one list the specs are strictly
ascending and non-overlapping; for swap lists ``max id + prefetch`` must stay below the total. The messages
are MindFormers' own, word for word, because a user greps the real run's ERROR line for them; the tag
(``[Recompute Config]`` even for swap lists, ``[Swap Config]`` for the prefetch bound) is kept with each
refusal so a log line can be matched too.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, List, Optional, Sequence, Set, Tuple

from ..errors import ConfigError

#: ``activation_checkpoint.py:_LAYER_ID_SPEC_PATTERN`` (matched on the stripped ``str()`` of a spec).
SPEC_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
RECOMPUTE_TAG = "[Recompute Config]"
SWAP_TAG = "[Swap Config]"


class Refusal(ConfigError):
    """Something MindFormers' PyNative ``apply_ac`` / ``TrainConfig`` refuses, with its exact message.

    ``mf_message`` is the exception text MindFormers raises, ``tag`` the prefix of the ERROR line it logs
    first (None when it raises without logging), ``exc`` the exception class name.
    """

    def __init__(self, mf_message: str, tag: Optional[str] = None, exc: str = "ValueError",
                 file: Optional[str] = None, line: Optional[int] = None, key: Optional[str] = None):
        super().__init__(f"MindFormers refuses this: {exc}: {mf_message}", file=file, line=line, key=key)
        self.mf_message = mf_message
        self.tag = tag
        self.exc = exc
        self.lines_before: list = []     # what the run logged before refusing (set by resolve)

    @property
    def log_text(self) -> Optional[str]:
        """The ERROR line's message as MindFormers logs it (None when it raises without one)."""
        return f"{self.tag} {self.mf_message}" if self.tag else None


def normalize_spec(label: str, value: Any, total: int) -> str:
    """One spec -> its normalized string, or :class:`Refusal` with MindFormers' text."""
    text = str(value).strip()
    m = SPEC_RE.match(text)
    if not m:
        raise Refusal(f"{label}: invalid layer spec {value!r}; expected one non-negative integer or "
                      "'start-end' (e.g. '5', '0-19')", RECOMPUTE_TAG)
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if lo > hi:
        raise Refusal(f"{label}: range start must be <= end, got {value!r}", RECOMPUTE_TAG)
    if hi >= total:
        raise Refusal(f"{label}: layer id {hi} out of range [0, {total - 1}], got {value!r}", RECOMPUTE_TAG)
    return text


def bounds(spec: str) -> Tuple[int, int]:
    """``'3-5'`` -> (3, 5), ``'4'`` -> (4, 4) (``_parse_spec_lo_hi``; the spec is already normalized)."""
    text = str(spec).strip()
    if "-" in text:
        left, right = text.split("-", 1)
        return int(left), int(right)
    return int(text), int(text)


def validate_specs(specs: Sequence[Any], label: str, total: int, prefetch: Optional[int] = None) -> List[str]:
    """A list of specs -> the normalized list (as MindFormers writes it back), or :class:`Refusal`."""
    out: List[str] = []
    prev_hi = -1
    if specs and not hasattr(specs, "__iter__"):     # e.g. ``full_recompute_layer: 3``: Python's own error
        raise Refusal(f"'{type(specs).__name__}' object is not iterable", exc="TypeError")
    for i, spec in enumerate(specs or []):
        norm = normalize_spec(f"{label}[{i}]", spec, total)
        if not isinstance(specs, list):
            # MindFormers writes the normalized spec back (``specs[i] = ...``): a string (YAML ``'0-3'`` without
            # brackets) is not type-checked when the YAML is loaded and fails here, with Python's own message
            raise Refusal(f"'{type(specs).__name__}' object does not support item assignment", exc="TypeError")
        lo, hi = bounds(norm)
        if lo <= prev_hi:
            raise Refusal(f"{label}: layer specs must be in strictly ascending order; spec[{i}] '{norm}' "
                          f"starts at {lo} but previous spec ends at {prev_hi}", RECOMPUTE_TAG)
        out.append(norm)
        prev_hi = hi
    if prefetch and prev_hi >= 0 and prev_hi + prefetch >= total:
        raise Refusal(f"{label}: max layer id {prev_hi} plus prefetch {prefetch} exceeds num_layers ({total}); "
                      f"max allowed layer id is {total - prefetch - 1}", SWAP_TAG)
    return out


def layer_ids(specs: Iterable[Any]) -> Set[int]:
    """Every id a list of (valid or unchecked) specs names (``_parse_layer_ids``)."""
    out: Set[int] = set()
    for spec in specs or []:
        lo, hi = bounds(spec)
        out.update(range(lo, hi + 1))
    return out


