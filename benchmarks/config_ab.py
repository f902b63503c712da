"""Benchmark: tilemma configurations of one family against each other and the peers, their samples
interleaved (`gemm_bench.median_ms_interleaved`: A B C A B C ...), in rounds, so that a default is
chosen on differences larger than the drift of one GPU between measurements, which in separate
runs is about 4%. Each configuration's D is checked once against the reference first
(`gemm_bench.tilemma_checked`), the peers' as in `gemm_bench`.

    python -m benchmarks.config_ab --family sparse-f16-pre --shapes 4096 8192x8192x8192 \\
        --configs '' 'wgmma=1,producers=4,tma=1,persistent=132' --rounds 3 --csv out.csv

Prints, per shape, each one's median over the rounds and its ratio to the first peer's; the CSV
holds every round's row (`timing` says which round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Sequence

from benchmarks import gemm_bench as gb


def interleaved(fam: gb.Family, shape: gb.Shape, kernels: list[gb.TilemmaKernel], inp: dict, rounds: int,
                torch) -> list[gb.Row]:
    """The peers and `kernels` at `shape` on inputs `inp`, each checked once, then timed with their
    samples interleaved in `rounds` rounds: a row each a round; prints each one's median."""
    fns, labels = [], []
    for impl in gb.peers(fam):
        fn, config = gb.peer_fn(fam, inp, torch, impl)
        gb.peer_check(gb.new_row(fam, shape, impl, config=config), fn(), inp, fam, torch)
        fns.append(fn)
        labels.append((impl, config))
    for kernel in kernels:
        fns.append(gb.tilemma_checked(fam, shape, inp, kernel, torch))
        labels.append(("tilemma", kernel.config))
    rows, medians = [], [[] for _ in fns]
    for r in range(rounds):
        for i, ((ms, how), (impl, config)) in enumerate(zip(gb.median_ms_interleaved(fns, torch), labels)):
            medians[i].append(ms)
            rows.append(gb.new_row(fam, shape, impl, ms=ms, tflops=gb.flops(shape) / ms / 1e9, config=config,
                                   check="exact" if fam.exact else "bound", timing=f"{how}, round {r + 1}",
                                   device=torch.cuda.get_device_name()))
    peer = statistics.median(medians[0])
    print(f"{fam.name} {gb.shape_label(shape)} ({torch.cuda.get_device_name()}, {rounds} rounds)")
    for (impl, config), ms in zip(labels, medians):
        t = [gb.flops(shape) / m / 1e9 for m in ms]
        print(f"  {statistics.median(t):8.1f}  x{peer / statistics.median(ms):5.3f}  "
              f"[{' '.join(f'{x:.0f}' for x in t)}]  {impl} {config[-70:]}", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", required=True, choices=list(gb.FAMILIES))
    p.add_argument("--shapes", nargs="+", required=True, help="MxNxK or N (square)")
    p.add_argument("--configs", nargs="+", default=[""], help="tilemma configurations ('' = the default)")
    p.add_argument("--sm", default="90a")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--samples", type=int, default=6)
    p.add_argument("--warmup-ms", type=float, default=20)
    p.add_argument("--csv")
    args = p.parse_args(argv)
    import torch

    gb.set_timing(args.samples, args.warmup_ms)
    fam, shapes = gb.FAMILIES[args.family], [gb.parse_shape(s) for s in args.shapes]
    builds = gb.precompile([(fam.name, s, c) for s in shapes for c in args.configs], args.sm, gb.default_ptx(), 8)
    rows: list[gb.Row] = []
    for shape in shapes:
        torch.cuda.empty_cache()
        inp = gb.make_inputs(fam, shape, torch)
        kernels = []
        for config in args.configs:
            build = builds[(fam.name, tuple(shape), config)]
            if isinstance(build, str):
                rows.append(gb.new_row(fam, shape, "tilemma", config=config, error=build))
            else:
                kernels.append(gb.kernel_from(build))
        rows += interleaved(fam, shape, kernels, inp, args.rounds, torch)
    if args.csv:
        gb.write_csv(rows, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
