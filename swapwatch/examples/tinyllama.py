"""A tiny Llama-like decoder in MindSpore whose cell tree is MindFormers' Llama layer tree.

Why it exists: swapwatch applies recompute/swap strategies by walking cell and primitive *names*
with MindFormers' own pattern rules, so a test model is only useful if its names are MindFormers'
names. Every decoder layer here has exactly the tree described as data in
``swapwatch/layouts/tinyllama.yaml`` (sub-cells in creation order, primitive attributes as listed), and
``tests/test_runtime_model.py`` walks the real cells and compares the two, so neither can drift.

Deviations from MindFormers that CPU forces:
  * ``RMSNorm.norm`` is a ``Mul`` primitive (x * rsqrt(mean(x^2)+eps)): MindSpore 2.10 has no CPU
    kernel for ``RmsNorm``, and the layout promises exactly one primitive called ``norm`` (the
    default comm-recompute pattern ``.*\\.norm`` must reach it). The rest of the norm uses
    functional ops, which are not attributes and therefore invisible to the pattern walk, as in
    MindFormers.
  * ``flash_attention`` is plain softmax attention with the primitives ``bmm_qk, mul, add,
    softmax, bmm_pv`` (the fused FlashAttention kernel is Ascend-only).
  * ``w1.activation`` is a cell holding a ``silu`` primitive (``nn.SiLU`` has no primitive
    attribute, so ``feed_forward\\.w1\\.activation\\.silu`` would match nothing).
"""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Normal, initializer
from mindspore.ops import auto_generate as gen


class LlamaSiLU(nn.Cell):
    """The activation cell: MindFormers' ``w1.activation`` with its ``silu`` primitive."""

    def __init__(self):
        super().__init__()
        self.silu = gen.SiLU()

    def construct(self, x):
        return self.silu(x)


class Linear(nn.Cell):
    """``x @ W^T`` (+ activation), weight (out, in) like MindFormers' ``Linear(transpose_b=True)``."""

    def __init__(self, in_ch: int, out_ch: int, activation: nn.Cell = None):
        super().__init__()
        self.weight = Parameter(initializer(Normal(0.02), (out_ch, in_ch), ms.float32), name="weight")
        self.matmul = ops.MatMul(transpose_b=True)
        self.reshape = ops.Reshape()
        self.out_ch = out_ch
        self.activation_flag = activation is not None
        if activation is not None:
            self.activation = activation

    def construct(self, x):
        shp = x.shape
        y = self.matmul(self.reshape(x, (-1, shp[-1])), self.weight)
        if self.activation_flag:
            y = self.activation(y)
        return self.reshape(y, shp[:-1] + (self.out_ch,))


class RMSNorm(nn.Cell):
    """RMS norm with one primitive attribute, ``norm`` (see the module docstring for why)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = Parameter(initializer("ones", (dim,), ms.float32), name="weight")
        self.norm = ops.Mul()
        self.eps = eps

    def construct(self, x):
        var = ops.mean(ops.square(x), -1, True)
        return self.norm(x, ops.rsqrt(var + self.eps)) * self.weight


class FlashAttention(nn.Cell):
    """Softmax attention standing in for MindFormers' FlashAttention cell (same name, CPU kernels)."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.bmm_qk = ops.BatchMatMul(transpose_b=True)
        self.mul = ops.Mul()
        self.add = ops.Add()
        self.softmax = ops.Softmax(-1)
        self.bmm_pv = ops.BatchMatMul()
        self.scale = 1.0 / math.sqrt(head_dim)

    def construct(self, q, k, v, mask):
        s = self.add(self.mul(self.bmm_qk(q, k), self.scale), mask)
        return self.bmm_pv(self.softmax(s), v)


class LLamaAttention(nn.Cell):
    """Attention with MindFormers' names: ``wq, wk, wv, flash_attention, wo`` (creation order)."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = Linear(dim, dim)
        self.wk = Linear(dim, dim)
        self.wv = Linear(dim, dim)
        self.flash_attention = FlashAttention(self.head_dim)
        self.wo = Linear(dim, dim)
        self.reshape = ops.Reshape()
        self.transpose = ops.Transpose()
        self.merger_head_transpose = ops.Transpose()

    def _heads(self, x, b, s):
        return self.transpose(self.reshape(x, (b, s, self.n_heads, self.head_dim)), (0, 2, 1, 3))

    def construct(self, x, mask):
        b, s, d = x.shape
        q = self._heads(self.wq(x), b, s)
        k = self._heads(self.wk(x), b, s)
        v = self._heads(self.wv(x), b, s)
        o = self.flash_attention(q, k, v, mask)
        o = self.reshape(self.merger_head_transpose(o, (0, 2, 1, 3)), (b, s, d))
        return self.wo(o)


class LlamaFeedForward(nn.Cell):
    """SwiGLU MLP: ``w2(silu(w1 x) * w3 x)`` with the ``mul`` primitive MindFormers names."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = Linear(dim, hidden, activation=LlamaSiLU())
        self.w2 = Linear(hidden, dim)
        self.w3 = Linear(dim, hidden)
        self.mul = ops.Mul()

    def construct(self, x):
        return self.w2(self.mul(self.w1(x), self.w3(x)))


class LLamaDecodeLayer(nn.Cell):
    """One decoder layer. ``ffn_norm`` is created before ``attention_norm``, as in MindFormers'
    LLamaDecodeLayer, so ``.*\\.norm`` logs ``ffn_norm.norm, attention_norm.norm``."""

    def __init__(self, dim: int, n_heads: int, ffn_hidden: int, layer_id: int = 0):
        super().__init__()
        self.layer_id = layer_id
        self.ffn_norm = RMSNorm(dim)
        self.attention_norm = RMSNorm(dim)
        self.attention = LLamaAttention(dim, n_heads)
        self.feed_forward = LlamaFeedForward(dim, ffn_hidden)
        self.add = ops.Add()
        self.reshape = ops.Reshape()
        self.shape = ops.Shape()

    def construct(self, x, mask):
        b, s, d = self.shape(x)
        h = self.add(x, self.attention(self.attention_norm(x), mask))
        out = self.add(h, self.feed_forward(self.ffn_norm(h)))
        return self.reshape(out, (b, s, d))


class TinyLlama(nn.Cell):
    """Embedding -> ``layers`` (a CellList, so IR scopes read ``layers-CellList/<i>-``) -> norm -> head."""

    def __init__(self, vocab: int = 128, dim: int = 64, n_layers: int = 4, n_heads: int = 4,
                 ffn_hidden: int = 172, seq: int = 32):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.CellList([LLamaDecodeLayer(dim, n_heads, ffn_hidden, i) for i in range(n_layers)])
        self.norm_out = RMSNorm(dim)
        self.lm_head = Linear(dim, vocab)
        causal = np.triu(np.full((seq, seq), -1e4, np.float32), k=1)
        self.mask = Tensor(causal.reshape(1, 1, seq, seq))

    def construct(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.mask)
        return self.lm_head(self.norm_out(h))


class WithLoss(nn.Cell):
    """Next-token cross-entropy over the logits."""

    def __init__(self, net: TinyLlama, vocab: int):
        super().__init__()
        self.net = net
        self.vocab = vocab
        self.loss = nn.CrossEntropyLoss()

    def construct(self, x, y):
        logits = self.net(x)
        return self.loss(logits.reshape(-1, self.vocab), y.reshape(-1))


def make_data(batch: int, seq: int, vocab: int, steps: int, seed: int = 0) -> List[Tuple[Tensor, Tensor]]:
    """Deterministic random token batches (``seed`` = rank gives each data-parallel rank its shard)."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(steps):
        tok = rng.randint(0, vocab, size=(batch, seq + 1)).astype(np.int32)
        out.append((Tensor(tok[:, :-1]), Tensor(tok[:, 1:])))
    return out
