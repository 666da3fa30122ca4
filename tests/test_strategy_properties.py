"""Property tests: random (valid-looking or not) configs never crash the engine with anything but
ConfigError, every layer sits in exactly one stage, and chunk sizes add up to num_layers."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swapwatch.engine import strategy
from swapwatch.config import config_from_dicts
from swapwatch.errors import ConfigError

PATTERNS = [r"feed_forward\.mul", r"feed_forward\.w[123]", "attention", r".*\.norm", r"feed_forward\.m.l",
            r"attention\.flash_attention", r"nothing\.here", "feed_forward", r"feed_forward\.w1\.activation\.silu"]

counts = st.one_of(st.booleans(), st.lists(st.one_of(st.integers(0, 9), st.booleans()), max_size=5),
                   st.lists(st.one_of(st.booleans(), st.lists(st.one_of(st.integers(0, 9), st.booleans()),
                                                              max_size=5)), max_size=3),
                   st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2))
ids = st.one_of(st.booleans(), st.lists(st.integers(0, 12), max_size=4))
value = st.one_of(counts, ids, st.dictionaries(st.sampled_from(PATTERNS), st.one_of(counts, ids), max_size=3),
                  st.none(), st.integers(-2, 3), st.text(max_size=3))
swap_entry = st.fixed_dictionaries({"backward_prefetch": st.one_of(st.integers(0, 4), st.just("Auto")),
                                    "layers": st.one_of(ids, st.integers(0, 3), st.lists(st.lists(st.integers(0, 4),
                                                                                                  max_size=2), max_size=2))})
op_entry = st.fixed_dictionaries({"op_name": st.one_of(st.sampled_from(PATTERNS),
                                                       st.lists(st.sampled_from(PATTERNS), max_size=2)),
                                  "backward_prefetch": st.integers(1, 4), "layers": ids})


@st.composite
def configs(draw):
    P = draw(st.integers(1, 4))
    V = draw(st.integers(1, 3))
    L = draw(st.integers(1, 24))
    offset = draw(st.one_of(st.just(0), st.integers(-2, 3), st.lists(st.integers(-2, 3), min_size=P, max_size=P),
                            st.lists(st.lists(st.integers(-2, 3), min_size=P, max_size=P), min_size=V, max_size=V)))
    rc = draw(st.dictionaries(st.sampled_from(["recompute", "select_recompute", "select_comm_recompute",
                                               "select_recompute_exclude", "select_comm_recompute_exclude"]),
                              value, max_size=4))
    sc = {"swap": draw(st.booleans())}
    if draw(st.booleans()):
        sc["layer_swap"] = draw(st.lists(swap_entry, max_size=2))
    if draw(st.booleans()):
        sc["op_swap"] = draw(st.lists(op_entry, max_size=3))
    if draw(st.booleans()):
        sc["default_prefetch"] = draw(st.integers(0, 3))
    return dict(rc=rc, sc=sc, num_layers=L, pipeline_stage=P, pp_interleave_num=V,
                pipeline_interleave=draw(st.booleans()), offset=offset, check_rules=draw(st.booleans()))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_only_config_errors_and_sane_geometry(c):
    try:
        cfg = config_from_dicts(c["rc"], c["sc"], num_layers=c["num_layers"], pipeline_stage=c["pipeline_stage"],
                                pp_interleave_num=c["pp_interleave_num"], offset=c["offset"],
                                pipeline_interleave=c["pipeline_interleave"], check_rules=c["check_rules"])
        plan = strategy.plan(cfg)
        strategy.layer_setting_lines(plan)
        plan.to_json()
    except ConfigError as exc:
        assert exc.one_line() and "\n" not in exc.one_line()
        return
    g = plan.geometry
    assert [lp.layer for lp in plan.layers] == list(range(g.num_layers))
    for lp in plan.layers:
        v, p = lp.interleave, lp.stage
        assert 0 <= p < g.pipeline_stage and 0 <= v < g.pp_interleave_num
        assert g.chunk_starts[v][p] <= lp.layer < g.chunk_starts[v][p] + g.layer_list[v][p]
    offset_full_shape = isinstance(c["offset"], list) and (
        g.pp_interleave_num == 1 or isinstance(c["offset"][0], list))
    if offset_full_shape or c["offset"] == 0 or g.pipeline_stage * g.pp_interleave_num == 1:
        assert sum(map(sum, g.layer_list)) == g.num_layers
    else:
        # MindFormers checks the sum of the offset *before* broadcasting it: an int or 1-D offset over
        # several chunks adds its sum once per row (or per chunk), so the chunks hold extra layers
        assert sum(map(sum, g.layer_list)) >= g.num_layers
