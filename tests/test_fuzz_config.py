"""Fuzzing `swapwatch explain` with random training YAMLs built from the real keys and value shapes.

The trees use the keys MindFormers reads (recompute_config, swap_config with layer_swap / op_swap
entries, parallel_config, model.model_config, parallel.pipeline_config, context) and give them
values of every shape a user can write: small ints, huge ints (past int32 / int64), negatives,
floats (inf, nan), bools, strings (patterns, "Auto"), nested lists, mappings and null. Half of the
values are the realistic kind for their key, so the trees get past the first check and into the
geometry, the value forms and the rules. The property: exit code 0, 1 or 2, never an internal
error, never a traceback, and bad input is one line.
"""
import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzz_helpers import assert_clean_exit, fuzz_settings, run_cli

pytestmark = pytest.mark.fuzz

HUGE = [2 ** 31 - 1, 2 ** 31, 2 ** 32 + 1, 2 ** 63, 10 ** 12, 10 ** 30, -(2 ** 31) - 1, -(10 ** 12)]
PATTERNS = ["feed_forward\\.w1", "attention", "feed_forward", "attention\\.flash_attention", "feed_forward\\.mul",
            "attention_norm", ".*", "(", "a{1000000}", "", "Auto", "attention\\.wq|attention\\.wk", "\\.",
            "feed_forward\\.w1\\.activation\\.silu", "layer"]

small_int = st.integers(-3, 12)
num = st.one_of(small_int, st.sampled_from(HUGE), st.floats(allow_nan=True, allow_infinity=True), st.booleans())
scalar = st.one_of(num, st.none(), st.sampled_from(PATTERNS), st.text(max_size=6))


def anything(max_leaves=8):
    return st.recursive(scalar, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                         st.dictionaries(st.sampled_from(PATTERNS) | small_int,
                                                                         kids, max_size=3)),
                        max_leaves=max_leaves)


def maybe(realistic, wild=1, of=12):
    """The realistic value for a key, now and then (``wild`` in ``of``) anything at all: one wild
    value is usually enough to stop a tree at its first check, so the rest must mostly be real."""
    # (st.one_of would not do: it collapses repeated branches into one, i.e. half and half)
    return st.sampled_from([False] * (of - wild) + [True] * wild).flatmap(
        lambda is_wild: anything() if is_wild else realistic)


def rarely(common, rare, one_in=8):
    """``common`` most of the time, ``rare`` one time in ``one_in``."""
    return st.sampled_from([False] * (one_in - 1) + [True]).flatmap(lambda r: rare if r else common)


layer_ids = st.lists(st.one_of(st.integers(0, 9), st.sampled_from(HUGE), st.integers(-2, -1)), max_size=5)
counts = st.one_of(st.booleans(), st.lists(st.one_of(st.integers(0, 9), st.booleans()), max_size=4),
                   st.lists(st.lists(st.one_of(st.integers(0, 9), st.booleans()), max_size=3), max_size=3))
pattern_map = st.dictionaries(st.sampled_from(PATTERNS), st.one_of(st.booleans(), layer_ids, counts), max_size=3)
recompute_value = st.one_of(counts, layer_ids, pattern_map, st.lists(st.sampled_from(PATTERNS), max_size=3))
prefetch = st.one_of(st.integers(-1, 30), st.sampled_from(["Auto"] + HUGE))
swap_entry = st.fixed_dictionaries({}, optional={"backward_prefetch": maybe(prefetch), "layers": maybe(layer_ids)})
op_entry = st.fixed_dictionaries({}, optional={
    "op_name": maybe(st.one_of(st.sampled_from(PATTERNS), st.lists(st.sampled_from(PATTERNS), max_size=3))),
    "backward_prefetch": maybe(prefetch), "layers": maybe(st.one_of(layer_ids, st.booleans()))})


def section(keys, required=()):
    """A mapping of some of ``keys`` (each with its value strategy); rarely something else entirely."""
    mapping = st.fixed_dictionaries({k: maybe(keys[k]) for k in required},
                                    optional={k: maybe(v) for k, v in keys.items() if k not in required})
    return maybe(mapping, wild=1, of=25)


recompute_config = section({k: recompute_value for k in (
    "recompute", "select_recompute", "select_comm_recompute", "select_recompute_exclude",
    "select_comm_recompute_exclude")} | {k: st.booleans() for k in (
        "parallel_optimizer_comm_recompute", "mp_comm_recompute", "recompute_slice_activation")})
swap_config = section({"swap": st.booleans(), "default_prefetch": prefetch,
                       "layer_swap": st.one_of(st.lists(swap_entry, max_size=3), swap_entry),
                       "op_swap": st.one_of(st.lists(op_entry, max_size=3),
                                            st.dictionaries(st.sampled_from(PATTERNS), swap_entry, max_size=2))})
geometry_int = rarely(st.integers(1, 4), st.sampled_from(HUGE) | st.integers(-1, 0))
offset = st.one_of(st.integers(-2, 3), st.lists(st.integers(-2, 3), max_size=4),
                   st.lists(st.lists(st.integers(-2, 3), min_size=2, max_size=2), max_size=3),
                   st.sampled_from(HUGE), st.lists(st.sampled_from(HUGE), max_size=2))
model_config = section({"num_layers": rarely(st.integers(1, 16), st.sampled_from(HUGE) | st.integers(-2, 0)),
                        "num_hidden_layers": geometry_int, "offset": offset,
                        "pp_interleave_num": geometry_int, "mtp_depth": st.integers(0, 2) | st.sampled_from(HUGE)},
                       required=("num_layers",))
parallel_config = section({"pipeline_stage": geometry_int, "recompute": st.booleans() | recompute_config,
                           "swap_config": swap_config})
pipeline_config = section({"pipeline_interleave": st.booleans(),
                           "pipeline_scheduler": st.sampled_from(["1f1b", "gpipe", "zero_bubble_v", "seqpipe"])})
context = section({"mode": st.sampled_from([0, 1, "GRAPH_MODE"]),
                   "memory_optimize_level": st.sampled_from(["O0", "O1", "O2", 0]),
                   "device_target": st.sampled_from(["Ascend", "CPU", "GPU"]),
                   "jit_config": st.fixed_dictionaries({"jit_level": st.sampled_from(["O0", "O1", "O2"])})})

trees = st.fixed_dictionaries({"model": maybe(st.fixed_dictionaries({"model_config": model_config}), wild=1, of=25)},
                              optional={
    "recompute_config": recompute_config, "swap_config": swap_config, "parallel_config": parallel_config,
    "parallel": st.fixed_dictionaries({}, optional={"pipeline_config": pipeline_config}),
    "context": context})


@fuzz_settings(150)
@given(tree=trees, fmt=st.sampled_from(["table", "json", "formative"]))
def test_explain_never_crashes_on_a_random_config(tmp_path_factory, tree, fmt):
    path = tmp_path_factory.mktemp("cfg") / "x.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    code, _out, err = run_cli(["explain", str(path), "--format", fmt])
    assert_clean_exit(code, err, f"explain of\n{path.read_text()}")


@fuzz_settings(60)
@given(tree=trees, num_layers=st.one_of(st.integers(-1, 16), st.sampled_from(HUGE)),
       stages=st.one_of(st.integers(-1, 5), st.sampled_from(HUGE)), offset=st.one_of(st.none(), offset))
def test_explain_never_crashes_on_a_fragment_with_overrides(tmp_path_factory, tree, num_layers, stages, offset):
    tree.pop("model", None)
    path = tmp_path_factory.mktemp("cfg") / "frag.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    argv = ["explain", str(path), "--num-layers", str(num_layers), "--pipeline-stage", str(stages)]
    if offset is not None:
        argv += ["--offset", json.dumps(offset)]
    code, _out, err = run_cli(argv)
    assert_clean_exit(code, err, f"{argv} of\n{path.read_text()}")


# ---- the bad numbers and shapes the fuzzer draws, one by one: each a clear line at its key ------

M = "model:\n  model_config:\n    num_layers: 4\n"
SWAP = "swap_config:\n  swap: True\n"


@pytest.mark.parametrize("text, where, says", [
    ("model:\n  model_config:\n    num_layers: 1000000000000\n", "x.yaml:3: model.model_config.num_layers",
     "1000000000000 is too large: swapwatch plans at most 10000 layers"),
    ("model:\n  model_config:\n    num_layers: -4\n", "x.yaml:3: model.model_config.num_layers", "got -4"),
    ("model:\n  model_config:\n    num_layers: 4.0\n", "x.yaml:3: model.model_config.num_layers", "got a float 4.0"),
    ("model:\n  model_config:\n    num_layers: true\n", "x.yaml:3: model.model_config.num_layers", "got a bool True"),
    ("model:\n  model_config:\n    num_layers: '4'\n", "x.yaml:3: model.model_config.num_layers", "got a string '4'"),
    ("model:\n  model_config:\n    num_layers: 8\n    mtp_depth: 9999\n", "x.yaml:4: model.model_config.mtp_depth",
     "10007 is too large"),
    (M + "parallel_config:\n  pipeline_stage: 1000000000\n", "x.yaml:5: parallel_config.pipeline_stage",
     "1000000000 chunks for 4 layer(s): MindFormers needs at least one layer in every chunk"),
    (M + "parallel_config:\n  pipeline_stage: 10000000000\n", "x.yaml:5: parallel_config.pipeline_stage",
     "MindFormers keeps it in an int32 array"),
    (M + "parallel_config:\n  pipeline_stage: 2.5\n", "x.yaml:5: parallel_config.pipeline_stage", "got a float 2.5"),
    ("model:\n  model_config:\n    num_layers: 4\n    offset: 10000000000\nparallel_config:\n  pipeline_stage: 2\n",
     "x.yaml:4: model.model_config.offset", "does not fit MindFormers' int32 offset array"),
    ("model:\n  model_config:\n    num_layers: 4\n    offset: [[[1]]]\nparallel_config:\n  pipeline_stage: 2\n",
     "x.yaml:4: model.model_config.offset", "expected an int, a list of ints"),
    (M + "recompute_config:\n  recompute: [[[[1]]]]\n", "x.yaml:5: recompute_config.recompute", "is not a count or a bool"),
    (M + "recompute_config:\n  recompute: '0,1'\n", "x.yaml:5: recompute_config.recompute", "not a form MindFormers accepts"),
    (M + "recompute_config:\n  mp_comm_recompute: 1\n", "x.yaml:5: recompute_config.mp_comm_recompute", "True or False"),
    (M + SWAP + "  layer_swap: 'abc'\n", "x.yaml:6: swap_config.layer_swap", "must be a list of"),
    (M + SWAP + "  default_prefetch: 1.5\n", "x.yaml:6: swap_config.default_prefetch", "integer >= 1"),
    (M + SWAP + "  default_prefetch: 100000000000000000000\n", "x.yaml:6: swap_config.default_prefetch",
     "MindSpore stores it as a C++ long"),
    (M + SWAP + "  op_swap: [{op_name: attention, backward_prefetch: 100000000000000000000, layers: [0]}]\n",
     "x.yaml:6: swap_config.op_swap[0].backward_prefetch", "C++ long"),
    (M + SWAP + "  op_swap: [{op_name: attention, backward_prefetch: 1, layers: '0,1'}]\n",
     "x.yaml:6: swap_config.op_swap[0].layers", "got '0,1'"),
    (M + "recompute_config:\n  recompute: " + "[" * 3000 + "]" * 3000 + "\n", "x.yaml", "nesting too deep (more than 64 levels)"),
    (M + "recompute_config:\n  recompute: " + "[" * 66 + "]" * 66 + "\n", "x.yaml:5: recompute_config.recompute", "nesting too deep (more than 64 levels)"),
    (M + "recompute_config:\n  recompute: " + "{a: " * 70 + "1" + "}" * 70 + "\n", "x.yaml:5: recompute_config.recompute", "nesting too deep"),
    ("{? [1, 2]: 3}\n", "x.yaml:1", "a mapping key must be a plain value"),
])
def test_a_bad_number_or_shape_is_one_line_at_its_key(tmp_path, text, where, says):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    code, out, err = run_cli(["explain", str(path)])
    assert code == 2 and out == "", err
    line = err.strip()
    assert "\n" not in line and line.startswith(f"swapwatch: error: {tmp_path}/{where}"), line
    assert says in line, line


def test_the_largest_accepted_values_still_explain(tmp_path):
    """The limits are limits, not a ban on big numbers: counts, layer ids and prefetches past
    int32 are what MindFormers caps or ignores, and 10000 layers is accepted."""
    path = tmp_path / "x.yaml"
    path.write_text("model:\n  model_config:\n    num_layers: 10000\nrecompute_config:\n  recompute: [10000000000000]\n")
    code, out, err = run_cli(["explain", str(path), "--format", "json"])
    assert code == 0, err
    assert len(json.loads(out)["layers"]) == 10000
    path.write_text(M + SWAP + "  op_swap: [{op_name: attention, backward_prefetch: 9223372036854775807, "
                               "layers: [0, 10000000000000]}]\n")
    code, out, err = run_cli(["explain", str(path), "--format", "json"])
    assert code == 0, err
    assert json.loads(out)["layers"][0]["op_swap"] == {"attention": 9223372036854775807}
