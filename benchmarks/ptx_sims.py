"""Timing simulations on the GPU: a real kernel's PTX with the work a design would add, to decide
whether to build it before building it. The kernel still computes its D, so the run is checked
as any other (`gemm_bench.tilemma_row`); only the time is the design's.

`restage`: a shared-to-shared transpose of B's stage (the issue's "shared-to-shared pass per
stage" for an 8-bit N-major B, or tf32's). The K-major warpgroup kernel of `stages` S gets, after
each stage's barrier, the pass's traffic: every thread reads its share of B's landed stage
(`ld.shared.b32`, 4 K rows at a time), transposes 4x4 bytes (8 `prmt`; tf32: rounds the 4 words,
`cvt.rna.tf32.f32`) and writes them into a ring of 2 more B stages, then a proxy fence and a
second barrier before the wgmmas. Shared memory holds S stages and the ring, so S is 3 where the
kernel has 4 (a 128 x 256 CTA: 3 x 48 + 2 x 32 KiB). H200 (results/h200-2026-11-28-restage-sim.csv):
s8 4096^3 1314 with 4 stages, 982 with 3, 731 with the pass, against 796 by the byte-pair mma.sync
kernel; tf32 4096^3 227 / 200 / 143 (193 with the second barrier alone) against the fill's 205.

    python -m benchmarks.ptx_sims restage out.csv
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time

from benchmarks import gemm_bench as gb


def restage(build: gb.TilemmaBuild, kind: str = "s8", barrier_only: bool = False) -> gb.TilemmaBuild:
    """`build` (a warpgroup kernel, not warp-specialized) with the restage pass's shared traffic
    and second barrier after each stage's barrier (`barrier_only`: the barrier alone)."""
    lines = build.ptx.split("\n")
    start = next(i for i, line in enumerate(lines) if re.match(r"\$k_loop_\d+:", line.strip()))
    label = lines[start].strip()[:-1]
    end = next(i for i in range(start, len(lines)) if f"bra.uni {label};" in lines[i])
    bar = next(i for i in range(start, end) if lines[i].strip() == "bar.sync 0;")
    step = next(lines[i] for i in range(end, start, -1) if re.match(r"\s*add\.u32 (%r\d+), \1, 1;", lines[i]))
    kt = re.match(r"\s*add\.u32 (%r\d+),", step).group(1)  # type: ignore[union-attr]
    fence = next(i for i in range(bar, end) if "wgmma.fence" in lines[i])
    # B's descriptor address: the last `mad.lo.u32 %r, stage, bytes, base` before the wgmmas
    found = [re.match(r"\s*mad\.lo\.u32 %r\d+, (%r\d+), (\d+), (%r\d+);", lines[i]) for i in range(bar, fence)]
    match = [m for m in found if m][-1]
    stage, stage_bytes, base = match.group(1), int(match.group(2)), match.group(3)
    blocks = stage_bytes // 256 // 16  # 16 bytes (4 words of 4 K rows) a thread, 256 threads
    ring = (build.shared + 1023) // 1024 * 1024
    out = ["    // restage simulation (benchmarks/ptx_sims.py)"]
    if not barrier_only:
        e = out.append
        e("    mov.u32 %xs0, %tid.x;")
        e("    shr.u32 %xs1, %xs0, 5;")
        e("    and.b32 %xs2, %xs0, 31;")
        e(f"    mul.lo.u32 %xs3, %xs1, {blocks * 512};")
        e("    mad.lo.u32 %xs3, %xs2, 4, %xs3;")
        e(f"    mad.lo.u32 %xs4, {stage}, {stage_bytes}, {base};")
        e("    add.u32 %xs4, %xs4, %xs3;")
        e(f"    and.b32 %xs5, {kt}, 1;")
        e("    mov.u32 %xs6, smem;")
        e(f"    add.u32 %xs6, %xs6, {ring};")
        e(f"    mad.lo.u32 %xs6, %xs5, {stage_bytes}, %xs6;")
        e("    add.u32 %xs6, %xs6, %xs3;")
        for b in range(blocks):
            a = [f"%xa{12 * b + j}" for j in range(12)]
            for j in range(4):
                e(f"    ld.shared.b32 {a[j]}, [%xs4+{b * 512 + j * 128}];")
            if kind == "s8":  # a 4x4 byte transpose
                for d, (x, y, sel) in enumerate(((0, 1, "0x5140"), (0, 1, "0x7362"), (2, 3, "0x5140"), (2, 3, "0x7362"))):
                    e(f"    prmt.b32 {a[4 + d]}, {a[x]}, {a[y]}, {sel};")
                for d, (x, y, sel) in enumerate(((4, 6, "0x5410"), (4, 6, "0x7632"), (5, 7, "0x5410"), (5, 7, "0x7632"))):
                    e(f"    prmt.b32 {a[8 + d]}, {a[x]}, {a[y]}, {sel};")
            else:
                for j in range(4):
                    e(f"    cvt.rna.tf32.f32 {a[8 + j]}, {a[j]};")
            for j in range(4):
                e(f"    st.shared.b32 [%xs6+{b * 512 + j * 128}], {a[8 + j]};")
    out += ["    fence.proxy.async.shared::cta;", "    bar.sync 0;"]
    lines[bar + 1:bar + 1] = out
    text = "\n".join(lines)
    text = re.sub(r"(\.reg \.b32 %r<\d+>;)", r"\1\n    .reg .b32 %xs<8>;\n    .reg .b32 %xa<" + str(12 * max(blocks, 1)) + ">;",
                  text, count=1)
    return dataclasses.replace(build, ptx=text, shared=build.shared if barrier_only else ring + 2 * stage_bytes,
                               config=build.config + (" +barrier" if barrier_only else " +restage-sim"))


def build(fam: str, size, config: str, ptx: str | None = None) -> gb.TilemmaBuild:
    text, name = gb.tilemma_ir(gb.FAMILIES[fam], size)
    return gb.tilemma_build(text, name, gb.compile_options("90a", ptx, **gb.parse_config(config)))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "restage":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    import torch

    gb.set_timing(6, 20)
    jobs = []
    for size in (4096, (512, 4096, 4096)):
        three = "wgmma=1,stages=3"
        jobs += [("s8", size, build("s8", size, "")), ("s8", size, build("s8", size, three)),
                 ("s8", size, restage(build("s8", size, three))), ("s8-brow", size, build("s8-brow", size, "")),
                 ("tf32", size, build("tf32", size, "")), ("tf32", size, build("tf32", size, three)),
                 ("tf32", size, restage(build("tf32", size, three), "tf32", barrier_only=True)),
                 ("tf32", size, restage(build("tf32", size, three), "tf32")), ("tf32-brow", size, build("tf32-brow", size, ""))]
    rows, inputs = [], {}
    for _ in range(2):  # A B A B
        for fam, size, b in jobs:
            if (fam, size) not in inputs:
                inputs.clear()
                torch.cuda.empty_cache()
                inputs[(fam, size)] = gb.make_inputs(gb.FAMILIES[fam], size, torch)
            row = gb.tilemma_row(gb.FAMILIES[fam], size, inputs[(fam, size)], torch, time.time() + 60, "90a",
                                 compiled=gb.kernel_from(b))
            rows.append(row)
            print(f"{fam:10} {gb.shape_label(gb.as_shape(size)):18} {row.tflops or 0:8.1f} {row.error[:60]} {row.config[-40:]}",
                  flush=True)
    gb.write_csv(rows, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
