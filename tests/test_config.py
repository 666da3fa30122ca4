"""The YAML loader: keys where MindFormers YAMLs put them, overrides, and located one-line errors."""
import textwrap

import pytest

from swapwatch import strategy
from swapwatch.config import config_from_dicts, load_config, parse_offset
from swapwatch.errors import ConfigError, InputError
from swapwatch.strategy import normalize_swap_config


def write(tmp_path, text, name="x.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def err(tmp_path, text, **kw):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        strategy.plan(load_config(path, **kw))
    return e.value.one_line().replace(path, "x.yaml")


FULL = """\
    context:
      mode: 0
      device_target: "Ascend"
      memory_optimize_level: "O1"
      jit_config: {jit_level: "O1"}
    parallel:
      pipeline_config:
        pipeline_interleave: True
    parallel_config:
      pipeline_stage: 2
    model:
      model_config:
        num_layers: 8
        pp_interleave_num: 2
        offset: [[0, 0], [0, 0]]
    recompute_config:
      recompute: [1, 0]
      select_recompute:
        'feed_forward\\.mul': True
    swap_config:
      swap: False
    """


def test_full_yaml_keys_and_lines(tmp_path):
    cfg = load_config(write(tmp_path, FULL))
    assert (cfg.num_layers, cfg.pipeline_stage, cfg.pp_interleave_num, cfg.pipeline_interleave) == (8, 2, 2, True)
    assert cfg.offset == [[0, 0], [0, 0]]
    assert cfg.context == {"mode": 0, "device_target": "Ascend", "memory_optimize_level": "O1", "jit_level": "O1"}
    assert cfg.recompute_config["recompute"] == [1, 0]
    assert cfg.recompute_config["mp_comm_recompute"] is True          # template default filled
    assert cfg.line("recompute_config.select_recompute") == 18
    assert cfg.line(r"recompute_config.select_recompute.feed_forward\.mul") == 19
    assert cfg.where("model.model_config.offset").endswith("x.yaml:15")
    assert cfg.was_given("recompute_config", "recompute") and not cfg.was_given("recompute_config", "select_comm_recompute")


def test_fragment_with_overrides(tmp_path):
    path = write(tmp_path, """\
        recompute_config:
          recompute: [2]
        """)
    cfg = load_config(path, num_layers=6, pipeline_stage=2, offset=[0, 0])
    assert (cfg.num_layers, cfg.pipeline_stage) == (6, 2)
    p = strategy.plan(cfg)
    assert {lp.layer for lp in p.layers if lp.full_recompute} == {0, 1}
    cfg = load_config(path, num_layers=8, pipeline_stage=2, pp_interleave_num=2)
    assert cfg.pipeline_interleave and cfg.effective_interleave == 2


def test_num_hidden_layers_and_mtp_depth(tmp_path):
    cfg = load_config(write(tmp_path, """\
        model:
          model_config:
            num_hidden_layers: 61
            mtp_depth: 1
        parallel_config:
          pipeline_stage: 16
        """), offset=0)
    assert cfg.num_layers == 62 and cfg.mtp_depth == 1


def test_empty_sections_give_defaults(tmp_path):
    cfg = load_config(write(tmp_path, """\
        model: {model_config: {num_layers: 2}}
        recompute_config:
        swap_config: {}
        """))
    assert cfg.recompute_config["recompute"] is False and cfg.swap_config["swap"] is False


M = "model: {model_config: {num_layers: 4}}\n"


@pytest.mark.parametrize("text, expected", [
    (M + "recompute_config:\n  select_recompte: True\n",
     "x.yaml:3: recompute_config.select_recompte: unknown key; did you mean 'select_recompute'?"),
    ("recompute_config:\n  select_recompte: True\n",       # typo beats the missing layer count
     "x.yaml:2: recompute_config.select_recompte: unknown key; did you mean 'select_recompute'?"),
    (M + "swap_config:\n  default_prefech: 2\n",
     "x.yaml:3: swap_config.default_prefech: unknown key; did you mean 'default_prefetch'?"),
    (M + "recompute_config:\n  select_recompute_off: True\n",
     "x.yaml:3: recompute_config.select_recompute_off: unknown key; it was renamed to 'select_recompute_exclude' "
     "before any release"),
    (M + "recompute_config:\n  recompute: [1\n", "x.yaml:4: YAML syntax error: expected ',' or ']', but got '<stream end>'"),
    ("model:\n  model_config:\n    num_layers: four\n",
     "x.yaml:3: model.model_config.num_layers: expected a positive integer, got a string 'four'"),
    (M + "recompute_config: [1, 2]\n", "x.yaml:2: recompute_config: expected a mapping of recompute_config keys, got a list"),
    (M + "recompute_config:\n  mp_comm_recompute: 1\n",
     "x.yaml:3: recompute_config.mp_comm_recompute: must be True or False, got 1"),
    (M + "swap_config:\n  swap: 'yes please'\n", "x.yaml:3: swap_config.swap: must be True or False, got 'yes please'"),
    ("- a\n", "x.yaml:1: expected a mapping of config sections at the top level, got a list"),
    (M + "parallel_config: 3\n", "x.yaml:2: parallel_config: expected a mapping, got an int"),
])
def test_located_one_line_errors(tmp_path, text, expected):
    assert err(tmp_path, text) == expected


def test_missing_num_layers(tmp_path):
    assert err(tmp_path, "recompute_config: {recompute: True}\n") == (
        "x.yaml: model.model_config.num_layers: the layer count is unknown: set model.model_config.num_layers "
        "in the YAML (explain also takes --num-layers N for a fragment)")


GEO = "model:\n  model_config:\n    num_layers: {L}\n    offset: {off}\n{extra}parallel_config:\n  pipeline_stage: {P}\n"


@pytest.mark.parametrize("L, P, off, extra, expected", [
    (10, 4, "0", "", "x.yaml:4: model.model_config.offset: the offsets add up to 0, but MindFormers requires them to "
                     "add up to the layers left over after an even split: num_layers % (pipeline_stage * "
                     "pp_interleave_num) = 10 % (4 * 1) = 2"),
    (10, 4, "[1, 1]", "", "x.yaml:4: model.model_config.offset: offset has 2 entries per row but there are 4 "
                          "pipeline stages; MindFormers needs one offset per stage"),
    (48, 5, "[[0,1,1,1,1],[1,1,1,1,0]]", "    pp_interleave_num: 2\n",
     "x.yaml:4: model.model_config.offset: offset has 2 rows but pp_interleave_num is 1 (pp_interleave_num is "
     "forced to 1 because parallel.pipeline_config.pipeline_interleave is not True); MindFormers needs one row "
     "per interleave"),
    (8, 2, "[-5, 5]", "", "x.yaml:4: model.model_config.offset: the first chunk would get -1 layers; its offset "
                          "must be >= -4"),
    (9, 3, "[1, -3, 2]", "", "x.yaml:4: model.model_config.offset: a middle chunk would get fewer than 1 layer; "
                             "middle offsets must be >= -2"),
    (8, 2, "[[1], [2, 3]]", "", "x.yaml:4: model.model_config.offset: the rows of a 2-D offset must be equally "
                                "long, got [[1], [2, 3]]"),
])
def test_geometry_errors(tmp_path, L, P, off, extra, expected):
    assert err(tmp_path, GEO.format(L=L, P=P, off=off, extra=extra)) == expected


def test_offset_ignored_for_one_chunk(tmp_path):
    p = strategy.plan(load_config(write(tmp_path, GEO.format(L=4, P=1, off="[7]", extra=""))))
    assert p.geometry.layer_list == [[4]]


SWAP = "model: {{model_config: {{num_layers: 4}}}}\nswap_config:\n  swap: {swap}\n{body}"


@pytest.mark.parametrize("body, fragment", [
    ("  default_prefetch: 0\n", "swap_config.default_prefetch: must be an integer >= 1 when swap is on, got 0"),
    ("  layer_swap: 3\n", "swap_config.layer_swap: must be a list"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: 3}\n", "layer_swap[0].layers: layer_swap: layers must be "
                                                                   "True/False or a list of layer ids, got 3"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: [3.0]}\n", "layers must be a list of integer layer ids"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: [True]}\n", "layers must be a list of integer layer ids"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: [[3.0]]}\n", "layers must be a list of integer layer ids"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: [2]}\n    - {backward_prefetch: 2, layers: True}\n",
     "swap_config.layer_swap[1]: layer_swap: entry 1 makes the prefetch inconsistent"),
    ("  op_swap:\n    - {op_name: mul, backward_prefetch: 1, layers: [2]}\n"
     "    - {op_name: mul, backward_prefetch: 2, layers: True}\n",
     "swap_config.op_swap[1]: op_swap: mul: entry 1 makes the prefetch inconsistent"),
    ("  op_swap:\n    - {op_name: 3, backward_prefetch: 1, layers: [2]}\n", "op_name must be a pattern string"),
    ("  op_swap:\n    - {op_name: [a, 3], backward_prefetch: 1, layers: [2]}\n", "every op_name in the list"),
    ("  op_swap:\n    - {opname: a, backward_prefetch: 1, layers: [2]}\n",
     "op_swap entry has no op_name (is 'opname' a misspelling of 'op_name'?)"),
    ("  layer_swap:\n    - {backward_prefech: 1, layers: [2]}\n", "misspelling of 'backward_prefetch'"),
    ("  layer_swap:\n    - {backward_prefetch: 1, layers: [[3, 4]]}\n", "layers must be a flat list of layer ids"),
    ("  layer_swap:\n    - {backward_prefetch: Auto, layers: [1]}\n", "check_rules rejects 'Auto' in swap_config"),
    ("  op_swap:\n    - {op_name: 'a(', backward_prefetch: 1, layers: [1]}\n", "not a valid regular expression"),
])
def test_swap_errors(tmp_path, body, fragment):
    assert fragment in err(tmp_path, SWAP.format(swap="True", body=body))


def test_swap_class_errors_apply_even_with_swap_off(tmp_path):
    assert "layers must be" in err(tmp_path, SWAP.format(swap="False",
                                                         body="  layer_swap:\n    - {backward_prefetch: 1, layers: 3}\n"))


@pytest.mark.parametrize("rc, fragment", [
    ("  select_recompute:\n    'feed_forward\\.mul': True\n",
     "recompute_config.select_recompute.feed_forward\\.mul: with swap on each pattern needs a list of layer ids"),
    ("  recompute: [[1, 2]]\n", "recompute_config.recompute: with swap on this is a list of layer ids"),
    ("  select_recompute: ['feed_forward\\.mul']\n", "every item must be an integer"),
    ("  recompute: 3\n", "with swap on this must be a bool, a list of layer ids"),
])
def test_swap_mode_check_rules(tmp_path, rc, fragment):
    text = "model: {model_config: {num_layers: 4}}\nswap_config: {swap: True}\nrecompute_config:\n" + rc
    assert fragment in err(tmp_path, text)


def test_swap_normalisation():
    assert normalize_swap_config({"layer_swap": None, "op_swap": None, "default_prefetch": 3}) == (
        [], {r".*\.flash_attention": [{"backward_prefetch": 3, "layers": True}]})
    ls, ops = normalize_swap_config({"layer_swap": [{"backward_prefetch": 2, "layers": [2]},
                                                    {"backward_prefetch": 2, "layers": True}], "op_swap": None})
    assert ls == [{"backward_prefetch": 2, "layers": True}] and ops == {}
    _, ops = normalize_swap_config({"layer_swap": None, "op_swap": [
        {"op_name": "mul", "backward_prefetch": 1, "layers": [2]},
        {"op_name": "w1", "backward_prefetch": 2, "layers": True}]})
    assert ops == {"mul": [{"layers": [2], "backward_prefetch": 1}], "w1": [{"backward_prefetch": 2, "layers": True}]}
    for layers in ([3], [[3]], [3, 5], [[3, 4]], (3,), (3, 4), ((3, 4),)):
        ls, _ = normalize_swap_config({"layer_swap": {"backward_prefetch": 1, "layers": layers}, "op_swap": None})
        assert ls[0]["layers"] == layers                  # kept verbatim by the config class
    for layers in (3, 3.0, [3.0], [[3.0]], [True], (3.0,), ((3.0,),)):
        with pytest.raises(ConfigError):
            normalize_swap_config({"layer_swap": [{"backward_prefetch": 1, "layers": layers}], "op_swap": None})
        with pytest.raises(ConfigError):
            normalize_swap_config({"layer_swap": None, "op_swap": [{"op_name": "a", "backward_prefetch": 1,
                                                                    "layers": layers}]})


def test_config_from_dicts_like_a_log():
    rc = {"recompute": True, "select_recompute": False, "parallel_optimizer_comm_recompute": True,
          "select_comm_recompute": False, "mp_comm_recompute": True, "recompute_slice_activation": False,
          "select_recompute_exclude": {r"self_attention\.core_attention\.flash_attention": True},
          "select_comm_recompute_exclude": False}
    sc = {"swap": False, "layer_swap": None, "op_swap": None, "default_prefetch": 1}
    cfg = config_from_dicts(rc, sc, {"data_parallel": 1, "pipeline_stage": 1}, num_layers=4, source="worker_0.log:12")
    p = strategy.plan(cfg)
    assert all(lp.full_recompute for lp in p.layers)
    cfg = config_from_dicts({"recompute": [1, 0]}, None, geometry={"layer_list": [[3, 2]], "pp_ids": [0, 0, 0, 1, 1]})
    assert (cfg.num_layers, cfg.pipeline_stage) == (5, 2)
    assert strategy.plan(cfg).geometry.layer_list == [[3, 2]]
    cfg = config_from_dicts({"select_recompute_off": {"a": True}}, {}, num_layers=2)
    assert cfg.recompute_config["select_recompute_exclude"] == {"a": True}


def test_config_from_dicts_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="did you mean 'recompute'"):
        config_from_dicts({"recompte": True}, {}, num_layers=2)


def test_parse_offset():
    assert parse_offset("[1, 0]") == [1, 0]
    with pytest.raises(InputError, match="--offset"):
        parse_offset("[1,")


def test_swap_config_is_normalised_once_and_kept(monkeypatch):
    """config.py normalises the swap config (as TransformerSwapConfig does) when it loads it; the
    engine takes the stored result instead of normalising again."""
    import swapwatch.config.training as config_mod

    calls = []
    real = config_mod.normalize_swap_config
    monkeypatch.setattr(config_mod, "normalize_swap_config", lambda sc, cfg=None: calls.append(1) or real(sc, cfg))
    cfg = config_from_dicts({"recompute": False}, {"swap": True, "op_swap": [
        {"op_name": "attention", "backward_prefetch": 2, "layers": [0]}]}, num_layers=2)
    assert len(calls) == 1
    plan = strategy.plan(cfg)
    strategy.plan(cfg)
    assert len(calls) == 1 and plan.formative["op_swap"] == {"attention": [{"backward_prefetch": 2, "layers": [0]}]}
    assert cfg.swap_strategy is cfg.swap_strategy
    # a replaced swap_config (a config rebuilt from an mcore log) is normalised again, once
    cfg.swap_config = dict(cfg.swap_config, op_swap=None, layer_swap=[{"backward_prefetch": 3, "layers": [1]}])
    assert strategy.plan(cfg).layers[1].layer_swap == 3 and len(calls) == 2
    strategy.plan(cfg)
    assert len(calls) == 2
