"""Generate a deterministic, realistic msrun worker log of a given size (default 1 GB) for ``make bench``.

Why synthetic: a real 1 GB worker log is mostly MindSpore glog noise (GLOG_v=1 INFO lines,
DISTRIBUTED reconnect warnings), with the lines swapwatch cares about (one LayerSetting block, the
``initial ... from dict`` lines, a step line per step, memory lines at exit) buried in it. This
script reproduces that mix with the exact line formats of docs/mindspore-facts.md §2-§4: the
48-layer strategy block of MindFormers' recompute docs (§1.1) near the top, ~0.2 % step lines, offload
warnings, a few tracebacks, a few very long lines (config dumps, IR snippets), CRLF-free text. The
same seed always gives the same bytes, so timings are comparable between runs.

Usage: ``python bench/gen_log.py [--size-mb 1024] [--out bench/out/worker_0.log] [--seed 7]``.
"""
from __future__ import annotations

import argparse
import os
import random
import sys

MF = "{ts} - mindformers/work/output/log[mindformers/{file}:{line}] - {level} - {msg}\n"


def mf(ts: str, msg: str, file: str = "models/utils.py", line: int = 205, level: str = "INFO") -> str:
    return MF.format(ts=ts, file=file, line=line, level=level, msg=msg)


def strategy_block(ts: str) -> str:
    """The 48-layer worked example (pp=5, interleave 2; docs/mindspore-facts.md §1.1), as MindFormers logs it."""
    out = []
    pc = "core/parallel_config.py"
    out.append(mf(ts, "initial swap_config from dict: {'swap': False, 'layer_swap': None, 'op_swap': None, "
                      "'default_prefetch': 1}", pc, 53))
    out.append(mf(ts, "initial recompute_config from dict: {'recompute': [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]], "
                      "'select_recompute': {'feed_forward\\\\.w1\\\\.activation\\\\.silu': True, "
                      "'feed_forward\\\\.mul': True, 'feed_forward\\\\.w1\\\\.matmul': [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0]], "
                      "'feed_forward\\\\.w3\\\\.matmul': [2, 1, 0, 0, 0]}, 'parallel_optimizer_comm_recompute': False, "
                      "'select_comm_recompute': ['ffn_norm\\\\.norm', 'attention_norm\\\\.norm'], 'mp_comm_recompute': True, "
                      "'recompute_slice_activation': False, 'select_recompute_exclude': False, "
                      "'select_comm_recompute_exclude': False}", pc, 56))
    out.append(mf(ts, "initial parallel_config from dict: {'data_parallel': 1, 'model_parallel': 1, "
                      "'pipeline_stage': 5, 'micro_batch_num': 10, 'vocab_emb_dp': True, 'gradient_aggregation_group': 4}",
                  pc, 60))
    pp = [0] * 4 + [1] * 5 + [2] * 5 + [3] * 5 + [4] * 5 + [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5 + [4] * 4
    il = [0] * 24 + [1] * 24
    out.append(mf(ts, "num_layers per stage: [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]", line=205))
    out.append(mf(ts, "Accumulated num_layers per stage: [[4, 9, 14, 19, 24], [29, 34, 39, 44, 48]]", line=206))
    out.append(mf(ts, f"Pipeline id list with start_stage: {pp}", line=208))
    out.append(mf(ts, f"Interleave id list: {il}", line=209))
    out.append(mf(ts, "Formative layer_recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]", line=226))
    out.append(mf(ts, "The configuration of select_recompute_exclude and select_comm_recompute_exclude have the "
                      "highest priority.", line=228))
    full = "[[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]"
    out.append(mf(ts, "Formative select_recompute: {'feed_forward\\\\.w1\\\\.activation\\\\.silu': " + full
                  + ", 'feed_forward\\\\.mul': " + full + ", 'feed_forward\\\\.w1\\\\.matmul': [[1, 0, 0, 0, 0], "
                  "[2, 1, 0, 0, 0]], 'feed_forward\\\\.w3\\\\.matmul': [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]}", line=234))
    out.append(mf(ts, "Formative select_comm_recompute: {'ffn_norm\\\\.norm': " + full
                  + ", 'attention_norm\\\\.norm': " + full + "}", line=235))
    out.append(mf(ts, "Formative select_recompute_exclude: {}", line=236))
    out.append(mf(ts, "Formative select_comm_recompute_exclude: {}", line=237))
    for i in range(48):
        if i in (0, 1, 4, 24):
            out.append(mf(ts, f"Set full recompute at layer {i}", line=296))
            continue
        ops = "feed_forward.w1.activation.silu, feed_forward.mul"
        if i in (25, 29):
            ops += ", feed_forward.w1.matmul"
        out.append(mf(ts, f"Set select recompute on at layer {i}: {ops}", line=333))
        out.append(mf(ts, f"Set select comm recompute on at layer {i}: ffn_norm.norm, attention_norm.norm", line=333))
    return "".join(out)


NOISE_TEMPLATES = [
    # (weight, template) ; {ts}=glog timestamp, {pid}, {n}, {m}, {h} hex
    (30, "[WARNING] DISTRIBUTED({pid},7f4d16e3de40,python):{ts} [mindspore/ccsrc/cluster/rpc/tcp/tcp_comm.cc:485] "
         "Connect] Connection {n} source: 127.0.0.1:{m}, destination: 127.0.0.1:8118\n"),
    (10, "[WARNING] DISTRIBUTED({pid},7f4d16e3de40,python):{ts} [mindspore/ccsrc/cluster/topology/cluster_context.cc:316] "
         "BuildCluster] Topology build timed out., retry({n}/1200).\n"),
    (60, "[INFO] PRE_ACT({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/runtime/memory/mem_pool/mem_dynamic_allocator.cc:"
         "{n}] AllocTensorMem] Malloc memory for tensor size: {m}, address: 0x{h}, stream id: 0, from persistent pool: 0.\n"),
    (60, "[INFO] DEVICE({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/plugin/cpu/res_manager/mem_manager/"
         "cpu_memory_pool.cc:81] AllocDeviceMem] Current alloc size[{m}], total used size[{m}].\n"),
    (50, "[INFO] PIPELINE({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/pipeline/jit/ps/pass.cc:{n}] "
         "RunPass] Pass opt_pass_{n} start, graph: kernel_graph_{m}\n"),
    (50, "[INFO] KERNEL({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/kernel/kernel_build_info.cc:{n}] "
         "Build] Build kernel info for node Default/network-WithLossCell/_backbone-LlamaForCausalLM/model-LlamaModel/"
         "layers-CellList/{n}-LLamaDecodeLayer/attention-LLamaAttention/wq-Linear/MatMul-op{m}, inputs format: "
         "[DefaultFormat, DefaultFormat], outputs format: [DefaultFormat]\n"),
    (30, "[INFO] RUNTIME_FRAMEWORK({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/runtime/graph_scheduler/actor/"
         "kernel_actor.cc:{n}] Run] Actor(kernel_graph_{m}) run, sequential num: {n}, memory step: {m}\n"),
    (20, "[INFO] ME({pid}:281473441098720,MainProcess):{pyts} [mindspore/common/api.py:{n}] Start compiling "
         "'{m}' of network in GRAPH_MODE, phase: train.{m}.{h}\n"),
    (10, "{mfts} - mindformers/work/output/log[mindformers/core/callback/callback.py:{n}] - INFO - "
         "Train step {n} end, cost {m} ms, data sink size 1, global batch size 8.\n"),
    (8, "[WARNING] PARALLEL({pid},7f06ebdf8b80,python):{ts} [mindspore/ccsrc/frontend/parallel/step_parallel.cc:{n}] "
        "CoverSliceShape] The node Default/Cast-op{m} has no strategy, use the default strategy.\n"),
    (4, "[ERROR] RUNTIME_FRAMEWORK({pid},ffff2604f1a0,python):{ts} [mindspore/ccsrc/runtime/pipeline/"
        "kernel_async_launch_actor.cc:59] LaunchKernelV2] Launch kernel failed, retry {n} of 3, node: MatMul-op{m}\n"),
    (2, "    mem_pool block[{n}] stream id:0 block size:1024M idle size:{m}M actual size: {n}M\n"),
]

LONG_LINES = [
    "{mfts} - mindformers/work/output/log[mindformers/tools/utils.py:120] - INFO - full config: "
    + "{'model': {'model_config': {'num_layers': 48, 'hidden_size': 8192, " + ", ".join(
        f"'key_{i}': {i * 7 % 1000}" for i in range(9000)) + "}}}\n",
    "[INFO] ANALYZER({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/pipeline/jit/ps/static_analysis/prim.cc:1402] "
    "EvalPrim] IR dump: " + " ".join(f"%{i}(CNode_{i}) = PrimFunc_MatMul(%{i - 1}, %para{i})" for i in range(1, 6000)) + "\n",
]

TRACEBACK = (
    "Traceback (most recent call last):\n"
    "  File \"/work/mindformers/dataset/dataloader/blended_megatron_dataloader.py\", line {n}, in __getitem__\n"
    "    sample = self._sample(idx)\n"
    "  File \"/work/mindformers/dataset/dataloader/blended_megatron_dataloader.py\", line {m}, in _sample\n"
    "    raise IndexError(f\"index {n} is out of range\")\n"
    "IndexError: index {n} is out of range\n"
)

OFFLOAD = ("[WARNING] PARALLEL({pid},7f06ebdf8b80,python):{ts} [mindspore/ccsrc/frontend/parallel/pass/offload_activation.cc:"
           "252] WarningOffloadOutsideLazyInline] Offload does not take effect outside the scope of the lazy_inline Cell. "
           "NOde: @1473_llama_construct_{n}:CNode_{m}{{[0]: ValueNode<Primitive> PrimFunc_FlashAttentionScore, [1]: output}}, "
           "trace info: In file /work/mindformers/models/llama/llama_layer.py:{n}, 24~38\n")


def step_lines(mfts: str, step: int, steps: int, rng: random.Random) -> str:
    loss = 10.6 - step * 0.0004 + rng.random() * 0.01
    ms = 100 + rng.randrange(40)
    pct = 100.0 * step / steps
    return (f"{mfts} - mindformers/work/output/log[mindformers/core/callback/callback.py:529] - INFO - "
            f"{{ Epoch:[  1/  1], step:[{step:5d}/{steps:5d}], loss: {loss:5.6f}, per_step_time: {ms}ms, "
            f"lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [{1.2 + rng.random():.6f}], "
            f"train_throughput_per_npu: 2.896T\n"
            f"{mfts} - mindformers/work/output/log[mindformers/core/callback/callback.py:541] - INFO -   "
            f"{pct:4.1f}% |{'█' * int(pct / 2):<50}| 4.56789 samples/s/p  17:00:34 }}\n")


def tail_block(ts: str, pid: int) -> str:
    g = f"({pid},7f96a97cbb80,python):{ts} [mindspore/ccsrc/runtime/memory/mem_pool/mem_dynamic_allocator.cc"
    return (
        f"[INFO] PRE_ACT{g}:1179] operator()] Common mem pool info: Total allocated mem:1024M, peak used mem:183M, "
        "in used mem:0M, total use by event mem:0M, total idle mem:1024M. Block unit size:1024M, block counts:1, "
        "block[0] stream id:0 block size:1024M idle size:1024M actual size: 193M.\n"
        f"[INFO] PRE_ACT{g}:1211] DumpDynamicMemPoolStateInfo] The dynamic memory pool total allocated mem:1024M, "
        "min addr :0, max addr: 0, peak used mem:183M, actual peak used mem:193M, in used mem:0M, total used by event "
        "mem:0M, total idle mem:1024M, total eager free mem:0M. Weight used size:0M, constant value used size:0M, "
        "kernel output used size:0M, other used size:0M.\n"
        f"[WARNING] DEVICE({pid},ffffa4786be0,python):{ts} [mindspore/ccsrc/plugin/ascend/res_manager/mem_manager/"
        "ascend_memory_adapter.cc:192] DeInitialize] Ascend Memory Adapter deinitialize success, statistics:\n"
        "Device MOC memory size: 65536M\nMindSpore Used memory size: 59392M\n"
        "MindSpore memory base address: 0xffffe9dc1407\nUsed peak memory usage (without fragments): 23716M\n"
        "Actual peak memory usage (with fragments): 26244M\n"
    )


def generate(path: str, size: int, seed: int = 7, progress: bool = False) -> None:
    rng = random.Random(seed)
    weights = [w for w, _ in NOISE_TEMPLATES]
    templates = [t for _, t in NOISE_TEMPLATES]
    pid = 56203
    # A pool of pre-rendered noise lines (numbers vary); the timestamp is filled per block.
    pool = []
    for _ in range(20000):
        t = rng.choices(templates, weights)[0]
        pool.append(t.replace("{pid}", str(pid)).replace("{n}", str(rng.randrange(1, 2000)))
                    .replace("{m}", str(rng.randrange(1000, 99999999))).replace("{h}", f"{rng.getrandbits(44):x}")
                    .replace("{", "{{").replace("}", "}}").replace("{{ts}}", "{ts}")
                    .replace("{{pyts}}", "{pyts}").replace("{{mfts}}", "{mfts}"))
    steps = max(10, size // 50_000)          # one step per ~50 KB of noise (~20k steps per GB)
    block_lines = 500
    written = 0
    sec = 0
    step = 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        def ts_of(s):
            hh, mm, ss = 6 + s // 3600 % 18, s // 60 % 60, s % 60
            return (f"2026-07-14-{hh:02d}:{mm:02d}:{ss:02d}.{s % 1000:03d}.{s * 7 % 1000:03d}",
                    f"2026-07-14-{hh:02d}:{mm:02d}:{ss:02d}.{s % 1000:03d}.000",
                    f"2026-07-14 {hh:02d}:{mm:02d}:{ss:02d},{s % 1000:03d}")
        ts, pyts, mfts = ts_of(0)
        head = ("[demo] import mindspore took 1.77s, version 2.10.0, pid %d\n" % pid
                + "[WARNING] DISTRIBUTED(%d,7f4d16e3de40,python):%s [mindspore/ccsrc/cluster/topology/cluster_context.cc:"
                  "428] PostProcess] This node 0 rank id: 0\n" % (pid, ts)
                + mf(mfts, "The input config swap_config is empty.", "tools/register/template.py", 420, "WARNING")
                + strategy_block(mfts)
                + "".join(OFFLOAD.format(pid=pid, ts=ts, n=i, m=i * 3) for i in range(552)))
        f.write(head)
        written += len(head.encode())
        tb_every = max(1, size // (20 * 1_000_000))
        long_every = max(1, size // (40 * 1_000_000))
        blocks = 0
        while written < size:
            sec += 1
            ts, pyts, mfts = ts_of(sec)
            idx = rng.choices(range(len(pool)), k=block_lines)
            text = "".join(pool[i] for i in idx).format(ts=ts, pyts=pyts, mfts=mfts)
            if step < steps and blocks % 1 == 0:
                step += 1
                text += step_lines(mfts, step, steps, rng)
            blocks += 1
            if blocks % (tb_every * 100) == 0:
                text += TRACEBACK.format(n=blocks, m=blocks + 3)
            if blocks % (long_every * 100) == 50:
                text += (LONG_LINES[blocks % 2].replace("{ts}", ts).replace("{mfts}", mfts)
                         .replace("{pid}", str(pid)))
            f.write(text)
            written += len(text.encode())
            if progress and blocks % 200 == 0:
                sys.stderr.write(f"\rgen {written / 1e6:8.0f} / {size / 1e6:.0f} MB")
        f.write(tail_block(ts, pid))
    if progress:
        sys.stderr.write("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "worker_0.log"))
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    generate(a.out, a.size_mb * 1_000_000, a.seed, progress=sys.stderr.isatty())
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
