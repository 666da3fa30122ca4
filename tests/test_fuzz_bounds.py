"""Fuzzing the two bounds of issue 22: user patterns (compile + match under the real limits) and YAML
structure (aliases, merge keys, duplicates, nesting, sizes). docs/reliability.md states the bounds.

Patterns: every segment :func:`swapwatch.model.patterns.check_size` lets through compiles within what
the bound promises (measured with tracemalloc, which sees ``regex``'s allocations, under a soft
address-space cap so a hole in the bound fails here instead of taking the machine), matches under
the 1 s timeout, and one that it refuses never reaches ``regex.compile``; through ``explain`` any
pattern is exit 0, 1 or 2 with one line.

YAML: whatever anchors, aliases, merge keys, duplicate keys, depths and integer sizes a file holds,
:func:`swapwatch.config.parse_yaml` either gives exactly what PyYAML's ``safe_load`` (MindFormers'
loader) gives, or one ``ConfigError`` line; an alias-bomb refusal only ever happens to a file
whose aliases really expand past the bound; through ``explain`` it is exit 0, 1 or 2.

``SWAPWATCH_FUZZ_EXAMPLES=N`` runs N random examples per test (fuzz_helpers).
"""
import contextlib
import resource
import tracemalloc

import regex
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzz_helpers import assert_clean_exit, fuzz_settings, run_cli
from swapwatch.config import MAX_ALIAS_VALUES, MAX_DEPTH, parse_yaml
from swapwatch.errors import InputError
from swapwatch.model.patterns import (MAX_EXPANSION, MATCH_TIMEOUT, PatternError, check_size, segment_fullmatch,
                                      split_pattern, validate)

# ---- patterns -------------------------------------------------------------------------------------

TOKENS = ["a", "b", "w1", ".", "\\.", "[a-z]", "[^]x]", "[{}]", "\\d", "\\p{L}", "\\x{41}", "(", ")", "(?:", "|",
          "*", "+", "?", "{2}", "{0,3}", "{,5}", "{3,}", "{300}", "{1000}", "{70000}", "{100001}", "{1000000000}",
          "{4294967294}", "(?i)", "\\1", "{", "}", "\\{", "{x}", " ", "(?x)", "#"]
patterns = st.lists(st.sampled_from(TOKENS), max_size=14).map("".join)
NAMES = ["a", "w1", "feed_forward", "aaaa" * 20, "attention.wq", "", "b" * 300]
#: what regex spends per unrolled position (measured ~250 bytes) with margin, plus a fixed part
BYTES_PER_POSITION = 400
FIXED_BYTES = 4 << 20


def _vm_size() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def _address_space_cap(extra: int):
    """Lower this process's soft RLIMIT_AS to its current size plus ``extra`` for the block: a
    compile that breaks the bound raises MemoryError here instead of eating the shared machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = _vm_size()
    if not size:
        yield
        return
    cap = size + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@fuzz_settings(150)
@given(pattern=patterns)
def test_patterns_compile_and_match_within_the_bound(pattern):
    why = validate(pattern)                       # never raises, never compiles an oversized segment
    for seg in split_pattern(pattern):
        try:
            check_size(seg)
        except PatternError:
            assert why is not None, pattern          # (the first bad segment's reason is the one given)
            continue
        regex.purge()
        tracemalloc.start()
        try:
            with _address_space_cap(1 << 30):
                compiled = regex.compile(seg)
        except regex.error:
            compiled = None
        finally:
            _cur, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert peak <= BYTES_PER_POSITION * MAX_EXPANSION + FIXED_BYTES, (seg, peak)
        if compiled is None:
            continue
        for name in NAMES:
            assert segment_fullmatch(seg, name, timeout=MATCH_TIMEOUT) in (True, False)


@fuzz_settings(25)
@given(pattern=patterns, where=st.sampled_from(["select_recompute", "select_comm_recompute"]))
def test_any_pattern_through_explain_is_a_clean_exit(tmp_path_factory, pattern, where):
    f = tmp_path_factory.mktemp("pat") / "p.yaml"
    f.write_text(f"recompute_config:\n  {where}:\n    {yaml.safe_dump(pattern).splitlines()[0]}: True\n")
    if not isinstance(yaml.safe_load(f.read_text())["recompute_config"][where], dict):
        return                                    # the pattern did not survive as a YAML key
    code, _out, err = run_cli(["explain", str(f), "--num-layers", "4"])
    assert_clean_exit(code, err, pattern)


# ---- YAML structure ----------------------------------------------------------------------------

SCALARS = ["1", "x", "-3", "1.5", "True", "null", "'s'", "0x10", "1:00", "[]", "{}", ".inf"]


@st.composite
def alias_docs(draw):
    """A document of anchored collections that alias earlier ones (fan-out up to 30 a level, up to
    10 levels: from a few values to 10**14 once expanded), with merge keys, a duplicate key, a nest
    of random depth and a scalar of any size, some of them glued to a real training YAML."""
    lines, kinds = [], []
    wide = draw(st.booleans())               # half the documents fan out enough to be bombs
    for i in range(draw(st.integers(1, 10))):
        items = []
        for _ in range(draw(st.integers(5, 30) if wide else st.integers(0, 6))):
            if i and draw(st.integers(0, 3)) < 3:
                items.append(f"*a{draw(st.integers(max(0, i - 2), i - 1))}")
            else:
                items.append(draw(st.sampled_from(SCALARS)))
        kind = draw(st.sampled_from(["seq", "map"]))
        kinds.append(kind)
        if kind == "seq":
            lines.append(f"a{i}: &a{i} [{', '.join(items)}]")
        else:
            lines.append(f"a{i}: &a{i} {{{', '.join(f'k{j}: {v}' for j, v in enumerate(items))}}}")
    last = len(kinds) - 1
    if draw(st.booleans()):
        lines.append(f"recompute_config: *a{last}" if kinds[last] == "map" else f"recompute_config: {{recompute: *a{last}}}")
    maps = [i for i, k in enumerate(kinds) if k == "map"]
    if maps and draw(st.booleans()):
        lines.append(f"merged: {{<<: *a{draw(st.sampled_from(maps))}, k0: 7}}")
    if draw(st.booleans()):
        lines.append(f"a0: {draw(st.sampled_from(SCALARS))}")             # a duplicate key: the last wins
    if draw(st.integers(0, 9)) == 0:                # an integer past Python's 4,300-digit limit
        lines.append("big: " + "9" * draw(st.integers(4200, 5000)))
    depth = draw(st.sampled_from([0, 0, 0, 1, 5, MAX_DEPTH - 2, MAX_DEPTH + 1, MAX_DEPTH + 8]))
    if depth:
        lines.append("deep: " + "[" * depth + "1" + "]" * depth)
    return "\n".join(lines) + "\n"


def _expanded(obj, memo=None) -> int:
    """What a walk of ``obj`` meets, aliases expanded (computed once per shared object)."""
    memo = {} if memo is None else memo
    if isinstance(obj, (list, dict)):
        if id(obj) in memo:
            return memo[id(obj)]
        memo[id(obj)] = 0                     # a recursive structure: counted once
        n = 1 + (sum(1 + _expanded(v, memo) for v in obj.values()) if isinstance(obj, dict)
                 else sum(_expanded(v, memo) for v in obj))
        memo[id(obj)] = n
        return n
    return 1


@fuzz_settings(60)
@given(text=alias_docs())
def test_yaml_structure_loads_as_pyyaml_or_is_one_line(text):
    try:
        data, _lines = parse_yaml(text, "f.yaml")
    except InputError as exc:
        one = exc.one_line()
        assert "\n" not in one and one.startswith("f.yaml")
        if "alias" in exc.message and "contains it" not in exc.message:
            assert _expanded(yaml.safe_load(text)) > MAX_ALIAS_VALUES, one
        return
    assert data == yaml.safe_load(text)            # MindFormers' loader: same values, last duplicate wins


@fuzz_settings(20)
@given(text=alias_docs(), glue=st.booleans())
def test_yaml_structure_through_explain_is_a_clean_exit(tmp_path_factory, text, glue):
    f = tmp_path_factory.mktemp("yaml") / "a.yaml"
    base = open("fixtures/configs/conflict.yaml").read() if glue else ""
    f.write_text(base + text)
    code, _out, err = run_cli(["explain", str(f), "--num-layers", "4"])
    assert_clean_exit(code, err, text[:300])
