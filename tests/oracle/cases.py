"""Configs to run through real MindFormers and through swapwatch's engine (the oracle tier).

Hand-picked cases cover MindFormers' documented worked examples (docs/mindspore-facts.md §1) and the quirks; the generator draws random
but *runnable* configs (MindFormers must not hang on them: no negative per-stage counts) over
every value form, both modes, interleaved pipelines, and patterns that hit prims, cells, several
siblings, or nothing. Patterns are chosen so that the leaf segment can only match primitives or
sub-cells of a real ``nn.Cell`` (a leaf like ``.*`` would also hit Cell methods in ``dir()``).
"""
import random
from typing import Any, Dict, List

SELECT_POOL = [
    r"feed_forward\.mul", r"feed_forward\.w1\.activation\.silu", r"feed_forward\.w[123]", r"feed_forward\.w1",
    r"attention", r"feed_forward", r".*\.norm", r"attention\.flash_attention", r"attention\.w[qkv]\.matmul",
    r"feed_forward\.w2\.reshape", r"ffn_norm\.norm", r"attention_norm\.norm", r"attention\.flash attention",
    r"feed_forward\.w1\.matmul", r"attention\.wo", r"feed_forward\.m.l", r"feed_forward\.w1\.activation",
    r"feed_forward\.w3\.matmul", r".*\.w1\.reshape", r"attention\.flash_attention\.softmax",
]
SWAP_POOL = [
    r".*\.flash_attention", r"attention", r"feed_forward", r"feed_forward\.w1", r"feed_forward\.mul",
    r"attention\.wq", r".*\.norm", r"feed_forward\.w[12]", r"attention\.flash_attention\.bmm_qk",
    r"feed_forward\.w2\.matmul", r"nothing\.here",
]

HAND: List[Dict[str, Any]] = [
    # the 48-layer example of MindFormers' recompute docs (docs/mindspore-facts.md §1.1)
    dict(num_layers=48, pipeline_stage=5, pp_interleave_num=2, pipeline_interleave=True,
         offset=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]],
         recompute_config={"recompute": [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]],
                           "select_recompute": {r"feed_forward\.w1\.activation\.silu": True, r"feed_forward\.mul": True,
                                                r"feed_forward\.w1\.matmul": [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]],
                                                r"feed_forward\.w3\.matmul": [2, 1, 0, 0, 0]},
                           "select_comm_recompute": [r"ffn_norm\.norm", r"attention_norm\.norm"]},
         swap_config={}),
    # EX1b: interleave off with a 2-D offset
    dict(num_layers=48, pipeline_stage=5, pp_interleave_num=2, pipeline_interleave=False,
         offset=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]], recompute_config={"recompute": True}, swap_config={}),
    # EX2
    dict(num_layers=48, pipeline_stage=5, pp_interleave_num=2, pipeline_interleave=True,
         offset=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]],
         recompute_config={"recompute": [3, 2, 1, 0, 0], "select_recompute": [7, True, False, 0, 0]}, swap_config={}),
    # EX3
    dict(num_layers=8, pipeline_stage=2, recompute_config={"recompute": [1, 0], "select_recompute": True,
                                                          "select_comm_recompute": [2]}, swap_config={}),
    # EX4 / EX4b
    dict(num_layers=10, pipeline_stage=4, offset=[1, 0, 0, 1], recompute_config={"recompute": True}, swap_config={}),
    dict(num_layers=10, pipeline_stage=4, offset=[1, 0, 0, 1], recompute_config={"recompute": [3, 1, 0, 9]},
         swap_config={}),
    # EX5: numpy reprs
    dict(num_layers=8, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=True,
         recompute_config={"recompute": [[9, True], [0, False]],
                           "select_recompute": {r"feed_forward\.mul": [True, [0, 1]]}}, swap_config={}),
    # EX6
    dict(num_layers=4, recompute_config={"select_recompute": {r"feed_forward\.mul": True,
                                                              r"feed_forward\.w1\.activation\.silu": True},
                                         "select_recompute_exclude": {r"feed_forward\.m.l": [2]},
                                         "select_comm_recompute_exclude": {r"attention_norm\.norm": True,
                                                                           "attention": [1]}}, swap_config={}),
    # EX7
    dict(num_layers=10, pipeline_stage=4, recompute_config={}, swap_config={}),
    # EX8
    dict(num_layers=4, recompute_config={"select_recompute": {r"feed_forward\.w[123]": True}}, swap_config={}),
    # misc: short 1-D, long dict value, 2-D with too few rows, 2-D default-pattern crash
    dict(num_layers=8, pipeline_stage=2, recompute_config={"recompute": [3]}, swap_config={}),
    dict(num_layers=8, pipeline_stage=2, recompute_config={"select_recompute": {r"feed_forward\.mul": [1, 1, 1]}},
         swap_config={}),
    dict(num_layers=8, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=True,
         recompute_config={"recompute": [[1, 1]]}, swap_config={}),
    dict(num_layers=8, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=True,
         recompute_config={"select_recompute": [[1, True], [0, 5]]}, swap_config={}),
    # SW1..SW9
    dict(num_layers=4, recompute_config={}, swap_config={"swap": True, "default_prefetch": 10}),
    dict(num_layers=4, recompute_config={}, swap_config={"swap": True, "layer_swap": [{"backward_prefetch": 20,
                                                                                       "layers": [0, 3]}]}),
    dict(num_layers=4, recompute_config={}, swap_config={"swap": True, "op_swap": [
        {"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
        {"op_name": "attention", "backward_prefetch": 10, "layers": [3]},
        {"op_name": "feed_forward", "backward_prefetch": 15, "layers": [1, 2]}]}),
    dict(num_layers=4, recompute_config={"select_recompute": {"feed_forward": [0, 3]}}, swap_config={
        "swap": True, "op_swap": [
            {"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
            {"op_name": "attention", "backward_prefetch": 10, "layers": [3]},
            {"op_name": "feed_forward", "backward_prefetch": 15, "layers": [1, 2]}]}),
    dict(num_layers=4, recompute_config={"recompute": [0, 1], "select_recompute": {r"feed_forward\.w1": [1, 2],
                                                                                   r"feed_forward\.mul": True}},
         swap_config={"swap": True, "layer_swap": [{"backward_prefetch": 2, "layers": True}],
                      "op_swap": [{"op_name": r"feed_forward\.w1", "backward_prefetch": 1, "layers": [2, 3]}]}),
    dict(num_layers=4, recompute_config={"recompute": True},
         swap_config={"swap": True, "layer_swap": [{"backward_prefetch": "Auto", "layers": [1]}]}),
    dict(num_layers=4, recompute_config={}, swap_config={"swap": True, "op_swap": [
        {"op_name": [r"feed_forward\.w1", r"feed_forward\.mul"], "backward_prefetch": 3, "layers": True}]}),
    dict(num_layers=8, pipeline_stage=2, recompute_config={"recompute": [2, 1]}, swap_config={"swap": True}),
    dict(num_layers=4, recompute_config={"select_recompute": {r"feed_forward\.mul": [0, 1]},
                                         "select_recompute_exclude": {r"feed_forward\.w1\.activation\.silu": [3]}},
         swap_config={"swap": True}),
    # SW10: a 2-element exclude list with P=1 under swap
    dict(num_layers=4, recompute_config={"select_recompute_exclude": [1, 2]}, swap_config={"swap": True}),
    # multi-match multi-segment op_swap text, comm on a cell, op_swap collapse
    dict(num_layers=3, recompute_config={"select_comm_recompute": {"attention": True, r".*\.norm": [1]}},
         swap_config={}),
    dict(num_layers=3, recompute_config={}, swap_config={"swap": True, "op_swap": [
        {"op_name": r".*\.norm", "backward_prefetch": 2, "layers": [0]},
        {"op_name": r".*\.norm", "backward_prefetch": 2, "layers": True},
        {"op_name": r"feed_forward\.w[12]", "backward_prefetch": 4, "layers": [1, 2]}]}),
    # int offset quirk: the chunks hold more layers than the model has
    dict(num_layers=10, pipeline_stage=4, offset=2, recompute_config={"recompute": [1, 1, 1, 1]}, swap_config={}),
    # 2-D tables with an extra column / an extra row / a short row; empty lists; pattern lists as counts
    dict(num_layers=8, pipeline_stage=2, recompute_config={"recompute": [[1, 1, 1]]}, swap_config={}),
    dict(num_layers=8, pipeline_stage=2, recompute_config={"recompute": [[1, 1], [1, 1]]}, swap_config={}),
    dict(num_layers=8, pipeline_stage=2, recompute_config={"select_recompute": {r"feed_forward\.mul": [[1]]}},
         swap_config={}),
    dict(num_layers=8, pipeline_stage=2, recompute_config={"select_recompute": {r"feed_forward\.mul": [[True, 1], True]}},
         swap_config={}),
    dict(num_layers=4, recompute_config={"recompute": [], "select_recompute": []}, swap_config={}),
    dict(num_layers=4, recompute_config={"recompute": ["anything"], "select_comm_recompute": [r".*\.norm", "attention"]},
         swap_config={}),
    # a 1-D offset over two interleaves (broadcast: the chunks hold extra layers)
    dict(num_layers=10, pipeline_stage=2, pp_interleave_num=2, pipeline_interleave=True, offset=[1, 1],
         recompute_config={"recompute": [2, 2], "select_recompute": True}, swap_config={}),
    # swap: op_swap given, layer_swap False entries, layers False, op_swap dict form, recompute []
    dict(num_layers=4, recompute_config={"recompute": []}, swap_config={
        "swap": True, "layer_swap": {"backward_prefetch": 3, "layers": False},
        "op_swap": {"op_name": "attention", "backward_prefetch": 2, "layers": [1]}}),
    dict(num_layers=4, recompute_config={"select_comm_recompute": {"attention": [0], r".*\.norm": True}},
         swap_config={"swap": True, "op_swap": [{"op_name": r".*\.norm", "backward_prefetch": 2, "layers": [0]}]}),
]


def _offset(rng: random.Random, L: int, P: int, V: int) -> Any:
    total = P * V
    rem = L % total
    base = L // total
    if total <= 1:
        return rng.choice([0, 0, 1, [1]])          # ignored
    if rem == 0 and rng.random() < 0.5:
        return 0
    for _ in range(50):
        cells = [0] * total
        for _ in range(rem):
            cells[rng.randrange(total)] += 1
        if rng.random() < 0.3 and total > 2:       # move a layer around (negative offsets)
            a, b = rng.randrange(total), rng.randrange(total)
            cells[a] -= 1
            cells[b] += 1
        actual = [c + base for c in cells]
        if actual[0] < 0 or actual[-1] < 0 or any(x < 1 for x in actual[1:-1]):
            continue
        rows = [cells[v * P:(v + 1) * P] for v in range(V)]
        return rows if V > 1 else (rows[0] if rng.random() < 0.7 else rows)
    return [[0] * P for _ in range(V)] if rem == 0 else None


def _counts(rng: random.Random, P: int, V: int, allow_2d: bool = True) -> Any:
    kind = rng.choice(["bool", "1d", "1d", "2d" if allow_2d else "1d", "str"])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "1d":
        return [rng.choice([0, 1, 2, 3, 9, True, False]) for _ in range(rng.randint(0, P))]
    if kind == "2d":
        rows = []
        for _ in range(V):
            if rng.random() < 0.2:
                rows.append(rng.choice([True, False]))
            else:
                rows.append([rng.choice([0, 1, 2, 5, True, False]) for _ in range(P)])
        return rows
    return rng.sample(SELECT_POOL, rng.randint(1, 2))


def _ids(rng: random.Random, L: int) -> Any:
    if rng.random() < 0.25:
        return rng.choice([True, False])
    return sorted(rng.sample(range(L + 2), rng.randint(0, min(3, L + 2))))


def random_case(rng: random.Random) -> Dict[str, Any]:
    P = rng.choice([1, 1, 2, 3, 4])
    V = rng.choice([1, 1, 2]) if P > 1 else 1
    L = P * V + rng.randint(0, 6)
    interleave = V > 1
    offset = _offset(rng, L, P, V)
    if offset is None:
        offset = 0                                   # deliberately wrong sum: an error case
    swap = rng.random() < 0.45
    rc: Dict[str, Any] = {}
    if swap:
        if rng.random() < 0.7:
            rc["recompute"] = _ids(rng, L)
        for key in ("select_recompute", "select_comm_recompute"):
            r = rng.random()
            if r < 0.3:
                rc[key] = {p: _ids(rng, L) for p in rng.sample(SELECT_POOL, rng.randint(1, 3))}
            elif r < 0.5:
                rc[key] = _ids(rng, L)
        if rng.random() < 0.2:
            rc["select_recompute_exclude"] = {rng.choice(SELECT_POOL): [1]}
        sc: Dict[str, Any] = {"swap": True}
        r = rng.random()
        if r < 0.2:
            sc["default_prefetch"] = rng.randint(1, 5)
        else:
            if rng.random() < 0.6:
                sc["layer_swap"] = [{"backward_prefetch": rng.randint(1, 3), "layers": _ids(rng, L)}
                                    for _ in range(rng.randint(1, 2))]
            if rng.random() < 0.7:
                sc["op_swap"] = [{"op_name": rng.choice(SWAP_POOL) if rng.random() < 0.8 else rng.sample(SWAP_POOL, 2),
                                  "backward_prefetch": rng.randint(1, 3), "layers": _ids(rng, L)}
                                 for _ in range(rng.randint(1, 3))]
    else:
        sc = {"swap": False} if rng.random() < 0.5 else {}
        if rng.random() < 0.7:
            rc["recompute"] = _counts(rng, P, V)
        for key in ("select_recompute", "select_comm_recompute", "select_recompute_exclude",
                    "select_comm_recompute_exclude"):
            r = rng.random()
            if r < 0.35:
                rc[key] = {p: _counts(rng, P, V) for p in rng.sample(SELECT_POOL, rng.randint(1, 3))}
            elif r < 0.5 and not key.endswith("exclude"):
                rc[key] = _counts(rng, P, V)
    return dict(num_layers=L, pipeline_stage=P, pp_interleave_num=V, pipeline_interleave=interleave,
                offset=offset, recompute_config=rc, swap_config=sc)


def random_cases(n: int, seed: int = 20261122) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    return [random_case(rng) for _ in range(n)]
