"""Generate a simulated msrun job: N worker logs of a given size (``make bench``'s many-rank workloads).

Why a second generator: the many-rank workloads must look like one job, not N copies of one file.
Each ``worker_<r>.log`` carries its own rank id (``This node 0 rank id: r``), pid, timings (step
times, losses, timestamps) and memory figures (the exit block), drawn from a per-rank seed, so no
two files are byte-identical and folding identical ranks has to work on the parsed strategy, not on
the bytes. A few ranks differ in strategy (:data:`VARIANTS`): one misses a select-recompute line,
one logs an extra full recompute, one has a different swap value in its ``initial`` line. Noise
lines come from :mod:`gen_log`'s templates (one pool, built once: building it per file would cost
more than writing 10,000 files).

Usage: ``python bench/gen_job.py --ranks 1024 --size-kb 1000 --out bench/out/job_1024x1mb``.
The same arguments always give the same bytes; an existing complete job directory is reused.
"""
from __future__ import annotations

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gen_log  # noqa: E402


def variant_ranks(ranks: int) -> dict:
    """rank -> how its strategy differs (a few ranks spread over the job)."""
    if ranks < 8:
        return {}
    return {ranks // 3: "drop_select", (2 * ranks) // 3: "extra_full", ranks - 2: "swap_initial"}


def strategy(mfts: str, variant: str) -> str:
    block = gen_log.strategy_block(mfts)
    if variant == "drop_select":
        lines = block.splitlines(True)
        block = "".join(x for x in lines if "Set select recompute on at layer 10:" not in x)
    elif variant == "extra_full":
        anchor = gen_log.mf(mfts, "Set select recompute on at layer 30: feed_forward.w1.activation.silu, "
                                  "feed_forward.mul", line=333)
        block = block.replace(anchor, gen_log.mf(mfts, "Set full recompute at layer 30", line=296) + anchor)
    elif variant == "swap_initial":
        block = block.replace("'default_prefetch': 1}", "'default_prefetch': 2}", 1)
    return block


def build_pool(seed: int = 7, n: int = 4000):
    rng = random.Random(seed)
    weights = [w for w, _ in gen_log.NOISE_TEMPLATES]
    templates = [t for _, t in gen_log.NOISE_TEMPLATES]
    pool = []
    for _ in range(n):
        t = rng.choices(templates, weights)[0]
        pool.append(t.replace("{n}", str(rng.randrange(1, 2000))).replace("{m}", str(rng.randrange(1000, 99999999)))
                    .replace("{h}", f"{rng.getrandbits(44):x}"))
    return pool


def write_rank(path: str, rank: int, size: int, pool, variant: str = "") -> None:
    rng = random.Random(1000 + rank)
    pid = 40000 + rank
    sec = rng.randrange(60)

    def stamps(s):
        hh, mm, ss = 6 + s // 3600 % 18, s // 60 % 60, s % 60
        frac = (s * 37 + rank) % 1000
        return (f"2026-07-14-{hh:02d}:{mm:02d}:{ss:02d}.{frac:03d}.{(s * 7 + rank) % 1000:03d}",
                f"2026-07-14-{hh:02d}:{mm:02d}:{ss:02d}.{frac:03d}.000",
                f"2026-07-14 {hh:02d}:{mm:02d}:{ss:02d},{frac:03d}")

    ts, pyts, mfts = stamps(sec)
    spid = str(pid)
    head = (f"[demo] import mindspore took 1.{rank % 100:02d}s, version 2.10.0, pid {pid}\n"
            f"[WARNING] DISTRIBUTED({pid},7f4d16e3de40,python):{ts} [mindspore/ccsrc/cluster/topology/"
            f"cluster_context.cc:428] PostProcess] This node 0 rank id: {rank}\n"
            + gen_log.mf(mfts, "The input config swap_config is empty.", "tools/register/template.py", 420, "WARNING")
            + strategy(mfts, variant)
            + "".join(gen_log.OFFLOAD.format(pid=pid, ts=ts, n=i, m=i * 3) for i in range(24)))
    parts = [head]
    written = len(head)
    steps = max(4, size // 50_000)
    step = 0
    block = 200
    npool = len(pool)
    while written < size:
        sec += 1
        ts, pyts, mfts = stamps(sec)
        start = rng.randrange(npool - block)
        text = ("".join(pool[start:start + block]).replace("{pid}", spid).replace("{ts}", ts)
                .replace("{pyts}", pyts).replace("{mfts}", mfts))
        if step < steps:
            step += 1
            text += gen_log.step_lines(mfts, step, steps, rng)
        parts.append(text)
        written += len(text)
    peak = 20000 + rng.randrange(4000) + (3000 if rank % 97 == 5 else 0)     # a few outlier ranks
    tail = gen_log.tail_block(ts, pid).replace("23716M", f"{peak}M").replace("26244M", f"{peak + 2500}M") \
        .replace("peak used mem:183M", f"peak used mem:{150 + rank % 50}M")
    parts.append(tail)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(parts))


def generate(out: str, ranks: int, size: int, progress: bool = False) -> str:
    done = os.path.join(out, ".complete")
    if os.path.exists(done):
        return out
    os.makedirs(out, exist_ok=True)
    pool = build_pool()
    variants = variant_ranks(ranks)
    for r in range(ranks):
        write_rank(os.path.join(out, f"worker_{r}.log"), r, size, pool, variants.get(r, ""))
        if progress and r % 64 == 0:
            sys.stderr.write(f"\rgen {r}/{ranks} logs")
    if progress:
        sys.stderr.write("\n")
    open(done, "w").close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--size-kb", type=int, default=1000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "out",
                                f"job_{a.ranks}x{a.size_kb}kb")
    print(generate(out, a.ranks, a.size_kb * 1000, progress=sys.stderr.isatty()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
