"""What a PyNative (r2.x) training step holds on the device, from the PyNative model's own tensors
(docs/estimate.md, "The PyNative path"): the layer tables of ``pynative/tables/<family>.yaml`` (what each
op's autograd record keeps, checked block by block against PyNative DryRun's memory tracker), the
parameters as MindFormers builds them, and the two phases of a step in the order PyNative runs them.

Why its own model and not the graph path's (``memory/model.py``): PyNative has no graph plan and no memory
reuse between ops. A tensor lives from the op that makes it to the last op that reads it (its autograd
record included), the optimizer's states are made parameter by parameter during the first step, and
gradients are made in backward order. Measured on PyNative DryRun L1 (fixtures/dryrun/pynative/):

* **parameters**: the dtype each module gives them (``params_dtype``, float32 by default, where the module
  passes it: embedding, norms, attention linears; ``compute_dtype`` elsewhere: MLP, experts, the output
  layer);
* **gradients**: float32, every parameter's, made as the backward reaches it and released after the step
  (``trainer.py:_optimizer_update`` sets ``param.grad = None``);
* **AdamW** (``pynative/optimizer/adamw.py``): ``exp_avg`` and ``exp_avg_sq`` in float32 for every
  parameter, and a float32 master copy of every low-precision one (``_init_main_params``); the first step
  materialises them as it walks the parameters, so from the second step on they are alive through the
  forward and backward. Updating one parameter holds three float32 temporaries of its size
  (``_run_adamw_opt``: ``next_param``, ``exp_avg_sq / bias_correction2`` and its square root);
* **the forward's end**: the layers' saved tensors, the logits in compute dtype and the loss
  (``pynative/loss/loss.py``: a float32 log-softmax kept for backward and two float32 temporaries of the
  logits' size);
* **the backward**: layer by layer from the last, each freeing what it kept; a checkpointed region
  (``checkpoint_wrapper``: ``ms.recompute(..., use_reentrant=False)``) keeps only its inputs from outside
  it and regenerates its saves when its backward starts; a swapped layer's saves leave the device after
  the forward of the layer ``default_prefetch`` after it and come back when that layer's backward starts
  (hyper_parallel's ``SwapManager``).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import yaml

from ..errors import InputError
from ..patterns import under

F32 = 4
#: float32 temporaries of a parameter's size while AdamW updates it (adamw.py:_run_adamw_opt)
ADAMW_TEMPORARIES = 3
#: the loss at the forward's end in bytes per logit: the compute-dtype logits (kept), the float32
#: log-softmax (kept for backward) and two float32 temporaries of NLL's forward
LOSS_FORWARD_F32 = 3
#: at the loss's backward: the logits, the log-softmax and its float32 gradient
LOSS_BACKWARD_F32 = 2


@dataclass(frozen=True)
class Shape:
    """The sizes the tables' symbols stand for (one rank, one micro-batch)."""
    b: int
    s: int
    h: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    layers: int
    compute_bytes: int = 2
    params_bytes: int = 4
    tied: bool = False

    def symbols(self) -> Dict[str, int]:
        return {"t": self.b * self.s, "s": self.s, "b": self.b, "h": self.h, "q": self.heads * self.head_dim,
                "kv": self.kv_heads * self.head_dim, "n": self.heads, "nk": self.kv_heads, "f": self.ffn,
                "d": self.head_dim, "v": self.vocab}


_TERM = re.compile(r"\s*(\d+)\s*\*\s*([a-z]+)\s*|\s*([a-z]+|\d+)\s*")


def _factor(expr: object, sym: Dict[str, int]) -> int:
    """One factor of a shape: an integer, a symbol, or a sum of ``k*symbol`` / symbol terms."""
    if isinstance(expr, int):
        return expr
    total = 0
    for term in str(expr).split("+"):
        m = _TERM.fullmatch(term)
        if not m:
            raise ValueError(f"bad shape term {term!r}")
        if m.group(1):
            total += int(m.group(1)) * sym[m.group(2)]
        else:
            tok = m.group(3)
            total += int(tok) if tok.isdigit() else sym[tok]
    return total


def _elements(shape: Sequence[object], sym: Dict[str, int]) -> int:
    out = 1
    for f in shape:
        out *= _factor(f, sym)
    return out


@dataclass(frozen=True)
class Op:
    path: str
    ins: Tuple[str, ...]
    outs: Tuple[str, ...]
    saves: Tuple[str, ...]
    flops: int


@dataclass
class LayerCost:
    """One layer under its strategy, one micro-batch: bytes kept on the device until its backward,
    bytes sent to the host, bytes its recompute regenerates at once, recompute FLOPs."""
    label: str
    kept: int
    host: int
    regen: int
    flops: int


@functools.lru_cache(maxsize=None)
def table_data(family: str) -> dict:
    path = resources.files(__package__).joinpath("tables", f"{family}.yaml")
    if not path.is_file():
        raise InputError(f"the PyNative path does not model model family {family!r} (no layer table in "
                         f"swapwatch/pynative/tables/): estimate, plan and tune refuse it")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def tabled_families() -> FrozenSet[str]:
    return frozenset(p.name[:-5] for p in resources.files(__package__).joinpath("tables").iterdir()
                     if p.name.endswith(".yaml"))


class LayerTable:
    """The PyNative layer table of ``family`` sized for ``shape``."""

    def __init__(self, family: str, shape: Shape):
        data = table_data(family)
        self.family = family
        #: how the estimate's header names it (memory/render.py: "tensor table ...")
        self.table = f"pynative/{family}"
        self.shape = shape
        sym = shape.symbols()
        weight_copy = shape.compute_bytes if shape.params_bytes != shape.compute_bytes else 0
        per = {"compute": shape.compute_bytes, "float32": F32, "weight_copy": weight_copy}
        self.bytes: Dict[str, int] = {}
        for name, t in data["tensors"].items():
            n = _elements(t["shape"], sym)
            dt = t.get("dtype", "compute")
            self.bytes[name] = n // 8 if dt == "bit" else n * per[dt]
        self.ops: List[Op] = [Op(o["path"], tuple(o["in"]), tuple(o["out"]), tuple(o["saves"]),
                                 _elements(o["flops"], sym)) for o in data["ops"]]
        #: the module paths ``plan`` selects per layer (whole modules, disjoint)
        self.select_groups: List[str] = list(data.get("select_groups", ()))
        #: (name, elements, bytes per element) of one layer's parameters, in the optimizer's order
        self.params: List[Tuple[str, int, int]] = [
            (p["name"], _elements(p["shape"], sym),
             shape.params_bytes if p.get("dtype", "params") == "params" else shape.compute_bytes)
            for p in data["params"]]

    def ops_under(self, path: str) -> FrozenSet[int]:
        return frozenset(i for i, op in enumerate(self.ops) if under(op.path, path))

    def cost(self, full: bool = False, select: Sequence[str] = (), exclude: Sequence[str] = (),
             layer_swap: bool = False, op_swap: Sequence[str] = ()) -> LayerCost:
        """What the layer keeps under ``apply_ac``'s wrappers. A checkpointed region (the whole layer for
        ``full``, each ``select`` path) keeps the tensors it reads from outside itself; what its ops save
        comes back when its backward runs (the regen, one region at a time); ``exclude`` paths stay outside
        a full layer's region. A layer swap sends what the layer keeps to the host (MindFormers' policy
        keeps the decoder's inputs, which are no layer's saves here); an op swap what the module's ops keep
        (for a checkpointed module swapped again, the checkpoint's inputs)."""
        regions: List[FrozenSet[int]] = []
        if full:
            excluded: Set[int] = set()
            for p in exclude:
                excluded |= self.ops_under(p)
            regions.append(frozenset(range(len(self.ops))) - excluded)
            label = "full" + (f"-exclude:{','.join(exclude)}" if exclude else "")
        elif select:
            regions = [r for r in (self.ops_under(p) for p in select) if r]
            label = "select:" + ",".join(select)
        else:
            label = "none"
        inside: Set[int] = set().union(*regions) if regions else set()
        kept: Set[str] = set()
        regen = 0
        held: List[Tuple[FrozenSet[int], Set[str]]] = []
        for region in regions:
            made = {t for i in region for t in self.ops[i].outs}
            ins = {t for i in region for t in self.ops[i].ins if t not in made}
            kept |= ins
            held.append((region, ins))
            regen = max(regen, sum(self.bytes[t] for t in {s for i in region for s in self.ops[i].saves}))
        for i, op in enumerate(self.ops):
            if i not in inside:
                kept |= set(op.saves)
        host: Set[str] = set()
        if layer_swap:
            host = set(kept)
            label = "swap" if label == "none" else label + "+swap"
        elif op_swap:
            for p in op_swap:
                region = self.ops_under(p)
                host |= {t for i in region if i not in inside for t in self.ops[i].saves}
                host |= {t for r, ins in held if r <= region for t in ins}
            host &= kept
            label += "+op_swap:" + ",".join(op_swap)
        return LayerCost(label=label, kept=sum(self.bytes[t] for t in kept - host),
                         host=sum(self.bytes[t] for t in host), regen=regen,
                         flops=sum(self.ops[i].flops for i in inside))

    @property
    def layer_input(self) -> int:
        return self.bytes[self.ops[0].ins[0]]


# -- the model around the layers ------------------------------------------------------------------

def model_params(shape: Shape, table: LayerTable, first: bool = True, last: bool = True,
                 shard: int = 1) -> List[Tuple[str, int, int]]:
    """Every parameter of the stage in the order the optimizer walks them (``trainable_params``):
    the embedding (params_dtype; first stage), each layer's, the final norm and the output layer (compute
    dtype; none when tied to the embedding; last stage), each split ``shard`` ways (the FSDP shard)."""
    out = [("embedding", shape.vocab * shape.h, shape.params_bytes)] if first else []
    for i in range(shape.layers):
        out += [(f"layer{i}.{name}", n, nb) for name, n, nb in table.params]
    if last:
        out.append(("final_layernorm", shape.h, shape.params_bytes))
        if not shape.tied:
            out.append(("output_layer", shape.vocab * shape.h, shape.compute_bytes))
    return [(name, -(-n // shard), nb) for name, n, nb in out]


@dataclass
class Phases:
    """The parts of a training step's peak (bytes): what is always there, the forward's end, the
    backward's worst layer, the optimizer step (first and later steps)."""
    weights: int
    states: int
    grads: int
    shared: int
    forward_end: int
    forward_end_parts: Dict[str, int]
    backward: int
    backward_parts: Dict[str, int]
    optimizer_first: int
    optimizer_steady: int

    def activation_phase(self, steady: bool = True) -> int:
        return (self.states if steady else 0) + self.weights + self.shared + max(self.forward_end, self.backward)

    def peak(self, steady: bool = True) -> int:
        if steady:
            return max(self.activation_phase(True), self.optimizer_steady,
                       self.activation_phase(False), self.optimizer_first)
        return max(self.activation_phase(False), self.optimizer_first)

    def phase(self, steady: bool = True) -> str:
        act = self.activation_phase(steady)
        opt = self.optimizer_steady if steady else self.optimizer_first
        if opt >= act:
            return "optimizer"
        return "loss" if self.forward_end >= self.backward else "backward"


def optimizer_step(params: Sequence[Tuple[str, int, int]], steady: bool) -> Tuple[int, int, int]:
    """(the step's peak, the states, the gradients): weights + every float32 gradient + the states made so
    far (every one in a later step) + ADAMW_TEMPORARIES float32 copies of the parameter being updated."""
    weights = sum(n * nb for _, n, nb in params)
    grads = sum(n * F32 for _, n, _ in params)
    states_all = sum(n * F32 * (2 + (nb != F32)) for _, n, nb in params)
    made = 0
    peak = 0
    for _, n, nb in params:
        made += n * F32 * (2 + (nb != F32))
        peak = max(peak, (states_all if steady else made) + ADAMW_TEMPORARIES * n * F32)
    return weights + grads + peak, states_all, grads


def phases(shape: Shape, table: LayerTable, costs: Sequence[LayerCost], prefetch: Optional[int],
           first: bool = True, last: bool = True, in_flight: int = 1, shard: int = 1) -> Phases:
    """The step's phases for per-layer ``costs`` of one stage (``first`` holds the embedding, ``last``
    the head and the loss); ``in_flight`` micro-batches' saves at once (1F1B on a pipeline); ``shard``
    the FSDP split of parameters, gradients and states. Checked on one rank (one stage, one micro-batch,
    no shard); the rest is the same sums, unchecked."""
    params = model_params(shape, table, first, last, shard)
    weights = sum(n * nb for _, n, nb in params)
    opt_first, states, grads_all = optimizer_step(params, steady=False)
    opt_steady, _, _ = optimizer_step(params, steady=True)
    t, s, h, v = shape.b * shape.s, shape.s, shape.h, shape.vocab
    cb = shape.compute_bytes
    # alive through the step: the causal mask (float32 and the compute-dtype ones it is made from) and
    # the rotary tables (the tracker's ExpandDimsView / Ones / Muls blocks)
    shared = s * s * (F32 + cb) + 2 * s * shape.head_dim * F32
    # outside the layers until their backward: the embedding's dropout mask, the last layer's output and
    # the final norm's (kept by the norm and the output matmul), its rstd
    head_kept = (t * h // 8 if first else 0) + ((2 * t * h * cb + t * F32) if last else 0)
    kept = sum(c.kept for c in costs) * in_flight
    # a swapped layer's saves leave the device at the end of the forward of the layer ``prefetch`` after
    # it and come back when that layer's backward starts (SwapManager's hooks): during the backward of
    # layer j, the swapped layers j - prefetch .. j are on the device
    p = prefetch or 1
    logits = t * v * cb if last else 0
    loss_f32 = t * v * F32 if last else 0
    fwd_parts = {"saved_activations": kept, "head_and_logits": head_kept + logits + LOSS_FORWARD_F32 * loss_f32}
    forward_end = sum(fwd_parts.values())
    # the backward: the loss's gradient first, then each layer from the last with the gradients made so far
    layer_grads = -(-sum(n * F32 for _, n, _ in table.params) // shard)
    head_grads = -(-((0 if shape.tied else v * h * F32) + h * F32) // shard) if last else 0
    head_bwd = head_kept + logits + LOSS_BACKWARD_F32 * loss_f32
    best = (head_bwd + kept, {"saved_activations": kept, "head_and_logits": head_bwd})
    made = head_grads
    below = kept
    for i in reversed(range(len(costs))):
        c = costs[i]
        window = sum(costs[k].host for k in range(max(0, i - p), i + 1)) * in_flight
        here = below + c.regen + made + window
        if here > best[0]:
            best = (here, {"saved_activations": below, "recompute_transient": c.regen, "grads": made,
                           "swap_prefetch_window": window})
        below -= c.kept * in_flight
        made += layer_grads
    return Phases(weights=weights, states=states, grads=grads_all, shared=shared, forward_end=forward_end,
                  forward_end_parts=fwd_parts, backward=best[0], backward_parts=best[1],
                  optimizer_first=opt_first, optimizer_steady=opt_steady)
