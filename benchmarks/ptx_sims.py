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

`mn-order`: an N-major B's stage in CUTLASS's order for an MN-major operand. `warp-stage-shared`
keeps the stage's 64-column blocks whole, [block][k][64] (each block's K rows together, the
descriptor's LBO one block, 8 KiB, its SBO 8 rows, 1 KiB); CUTLASS tiles the 8-row swizzle atoms
along MN first, [k / 8][block][8][64] (LBO 1 KiB, SBO 4 blocks, 4 KiB), so that one k32 step's rows of
all blocks lie together and the TMA fetches each K row's 512 bytes together (a 4-d box: 64 columns, 8
rows, the blocks, the row groups). Checked in the emulator word for word against the kernel as built
(tests/test_ptx_sims.py) before it is timed.

`release`: the consumers of a warp-specialized kernel release a stage (`empty[s]`) by one elected
thread a warpgroup instead of every consumer thread (256 arrivals a stage in a 128 x 256 CTA), as
CUTLASS's sm90 `PipelineTmaAsync` counted them (consumer warpgroups times the cluster's multicast
span; its current `sm90_pipeline.hpp` counts every consumer thread where the cluster is one CTA).
cuSPARSELt's N-major sparse kernel issues 23.7 M instructions at 4096^3 to tilemma's 32.3 M
(results/ncu/h200-2026-11-28-cusparselt-kernels.txt).
The `empty` barriers count the consumer warpgroups, and each consumer `mbarrier.arrive` is
guarded by `%tid.x % 128 == 0`: wgmma's `wait_group` retires the whole warpgroup's products,
whose operands (the metadata's registers too) every warp had read before the warpgroup issued
them. Checked in the emulator word for word against the kernel as built (tests/test_ptx_sims.py),
and with too few arrivals counted it must fail. H200, samples interleaved: a wash (4096^3 869 / 872 /
869 against 864 / 873 / 871; results/h200-2026-11-28f-sparse-release-sim.csv).

`quad-stores`: the epilogue of a warpgroup kernel with an f32 D storing 16 bytes a lane instead of
8 (`quad_stores`): a persistent sparse kernel spends about 3.8 us a tile outside its K loop against
cuSPARSELt's 2.5 (H200, results/h200-2026-11-28g-sparse-waves.csv: the time a tile against K), its
epilogue's stores stalled on the LSU queue (lg_throttle). Checked in the emulator word for word
against the kernel as built (tests/test_ptx_sims.py). H200, samples interleaved: it loses 1-3%
(results/h200-2026-11-28g-quad-stores-sim.csv: sparse N-major B 4096^3 850 against 871, 8192^3
929 / 940; K-major 850 / 864, 926 / 939; f16 576 / 582): the exchange costs more than the stores
it saves; not built.

`stagger`: the second consumer warpgroup of a warp-specialized kernel starting a counting loop
after the first (`stagger`), so that it trails by what the ring allows and the two warpgroups'
epilogues need not coincide. Checked in the emulator with either warpgroup ahead. H200, samples
interleaved: a wash (results/h200-2026-11-28g-stagger-sim.csv: 200 and 1000 turns, sparse
N-major B 4096^3 876 / 875 and 867 / 867, 8192^3 943 / 943 and 937 / 933, K-major alike); not built.

`staged-stores`: the epilogue of a warpgroup kernel with an f32 D through shared memory
(`staged_stores`): each warp owns 16 whole rows of its warpgroup's m64nN accumulators, so it
stages them 32 columns at a time in its own 2 KiB of shared memory (16-byte chunks swizzled by
the row, so that neither the fragments' 8-byte writes nor the rows' 16-byte reads conflict),
with only `bar.warp.sync` between, and stores them as whole 128-byte rows (`st.global.v4.f32`,
4 rows a warp instruction) instead of 8 rows' 32-byte pieces a `st.global.v2.f32`. Checked in
the emulator word for word against the kernel as built (tests/test_ptx_sims.py). H200, samples
interleaved (results/h200-2026-11-28h-staged-stores-sim.csv): sparse N-major B 4096^3 898 / 919 /
892 against 864 / 886 / 862 (cuSPARSELt 895 / 916 / 888), 8192^3 946 / 939 / 940 against 919 /
920 / 913, K-major 4096^3 +4%; built as `warp-stage-stores` (the simulations of the epilogue
start from kernels built without it: `staged-stores=0`).

    python -m benchmarks.ptx_sims restage out.csv
    python -m benchmarks.ptx_sims mn-order out.csv
    python -m benchmarks.ptx_sims release out.csv
    python -m benchmarks.ptx_sims quad-stores out.csv
    python -m benchmarks.ptx_sims stagger out.csv
    python -m benchmarks.ptx_sims staged-stores out.csv
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time

from benchmarks import gemm_bench as gb


def _declare(ptx: str, *regs: str) -> str:
    """`ptx` with a simulation's own registers (".b32 %xa<4>", ...) declared after the kernel's."""
    return re.sub(r"(\.reg \.b32 %r<\d+>;)", lambda m: m.group(1) + "".join(f"\n    .reg {r};" for r in regs),
                  ptx, count=1)


def _at_consumers(ptx: str, code: str) -> str:
    """`ptx` (a warp-specialized kernel) with `code` (PTX lines) where its consumer warpgroups start,
    after their `setmaxnreg.inc`."""
    ends = [m.end() for m in re.finditer(r"setmaxnreg\.inc[^\n]*\n", ptx)]
    if len(ends) != 1:
        raise ValueError("ptx_sims: expected a warp-specialized kernel (one setmaxnreg.inc: the consumers' start)")
    return ptx[:ends[0]] + code + ptx[ends[0]:]


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
    text = _declare("\n".join(lines), ".b32 %xs<8>", f".b32 %xa<{12 * max(blocks, 1)}>")
    return dataclasses.replace(build, ptx=text, shared=build.shared if barrier_only else ring + 2 * stage_bytes,
                               config=build.config + (" +barrier" if barrier_only else " +restage-sim"))


def mn_order(build: gb.TilemmaBuild) -> gb.TilemmaBuild:
    """`build` (a TMA kernel whose N-major B stage is one 3-d copy, `warp-tma-blocks`) with that
    stage in CUTLASS's MN-major order: a 4-d map and box, B's descriptors' LBO 1 KiB and SBO 4 KiB,
    and their K steps 4 times as far (a k32 step: 4 row groups of 4 KiB)."""
    copy = re.compile(r"(\s*)(@%p\d+ )cp\.async\.bulk\.tensor\.3d\.(\S+) \[(%r\d+)\], \[(%rd\d+), "
                      r"\{(%r\d+), (%r\d+), (%r\d+)\}\], \[(%r\d+)\];")
    lines = build.ptx.split("\n")
    [(i, m)] = [(i, m) for i, line in enumerate(lines) if (m := copy.match(line))]
    indent, guard, kind, dst, tmap, zero, row, block, bar = m.groups()
    lines[i] = (f"{indent}shr.u32 %xm0, {row}, 3;\n{indent}{guard}cp.async.bulk.tensor.4d.{kind} [{dst}], "
                f"[{tmap}, {{{zero}, {zero}, {block}, %xm0}}], [{bar}];")
    param = next(re.match(rf"\s*mov\.b64 {tmap}, (\w+);", l).group(1)  # type: ignore[union-attr]
                 for l in lines if re.match(rf"\s*mov\.b64 {tmap}, (\w+);", l))
    order = [l.split()[-1].split("[")[0] for l in lines if ".param .align 64 .b8" in l]
    index = order.index(param)
    old = build.tensor_maps[index]
    (cols, rows_k, blocks), (row_stride, block_stride), (_, box_rows, box_blocks) = old.dims, old.strides, old.box
    assert cols == 64 and block_stride == 128 and box_rows % 8 == 0, old
    new = dataclasses.replace(old, dims=(64, 8, blocks, rows_k // 8), strides=(row_stride, 128, 8 * row_stride),
                              box=(64, 8, box_blocks, box_rows // 8))
    # B's descriptors: 128-byte swizzle (bit 62), LBO 8 KiB -> 1 KiB, SBO 1 KiB -> 4 KiB (16-byte units)
    before = (1 << 62) | (1024 >> 4 << 32) | (8192 >> 4 << 16)
    after = (1 << 62) | (4096 >> 4 << 32) | (1024 >> 4 << 16)
    regs = set()
    for j, line in enumerate(lines):
        d = re.match(rf"\s*or\.b64 (%rd\d+), \1, {before};", line)
        if d:
            lines[j] = line.replace(str(before), str(after))
            regs.add(d.group(1))
    assert regs, "mn_order: no N-major B descriptor (LBO 8 KiB, SBO 1 KiB)"
    for j, line in enumerate(lines):  # B's K steps: 4 KiB (256 units) a k32 step -> 16 KiB
        d = re.match(r"(\s*add\.s64 %rd\d+, (%rd\d+), )(\d+);", line)
        if d and d.group(2) in regs:
            lines[j] = f"{d.group(1)}{int(d.group(3)) * 4};"
    maps = list(build.tensor_maps)
    maps[index] = new
    text = _declare("\n".join(lines), ".b32 %xm<1>")
    return dataclasses.replace(build, ptx=text, tensor_maps=tuple(maps), config=build.config + " +mn-order-sim")


def release(build: gb.TilemmaBuild, warpgroups: int = 2, counted: int | None = None) -> gb.TilemmaBuild:
    """`build` (warp-specialized, `warpgroups` consumer warpgroups) with each stage released by one
    thread a consumer warpgroup: `empty`'s count `counted` (default the warpgroups), the consumers'
    arrivals guarded by their warpgroup's first thread."""
    consumers = 128 * warpgroups
    lines = build.ptx.split("\n")
    inits = [i for i, l in enumerate(lines) if re.match(rf"\s*@%p\d+ mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\], {consumers};", l)]
    arrives = [i for i, l in enumerate(lines) if re.match(r"\s*mbarrier\.arrive\.shared::cta\.b64 %rd\d+, \[%r\d+\];", l)]
    [entry] = [i for i, l in enumerate(lines) if "setmaxnreg.inc" in l]
    assert inits and arrives and all(i > entry for i in arrives), (inits, arrives, entry)
    for i in inits:
        lines[i] = lines[i].replace(f", {consumers};", f", {warpgroups if counted is None else counted};")
    for i in arrives:
        lines[i] = re.sub(r"^(\s*)", r"\1@%xr0 ", lines[i])
    text = _at_consumers("\n".join(lines), "    mov.u32 %xt0, %tid.x;\n    and.b32 %xt0, %xt0, 127;\n"
                                          "    setp.eq.u32 %xr0, %xt0, 0;\n")
    text = _declare(text, ".pred %xr<1>", ".b32 %xt<1>")
    return dataclasses.replace(build, ptx=text, config=build.config + " +release-sim")


def quad_stores(build: gb.TilemmaBuild) -> gb.TilemmaBuild:
    """`build` (a warpgroup kernel with an f32 D) storing its accumulators 16 bytes a lane instead
    of 8: each pair of a thread's stores (`st.global.v2.f32` of rows r and r + 8, the same
    columns) becomes one exchange with the neighbouring lane (`shfl.sync.bfly` 1) and one
    `st.global.v4.f32`: the even lane stores row r's 4 columns (its 2 and its neighbour's), the
    odd one row r + 8's. Half the store instructions the epilogue issues."""
    pair = re.compile(r"(\s*)st\.global\.v2\.f32 \[(%rd\d+)\+0\], \{(%f\d+), (%f\d+)\};\n"
                      r"\s*st\.global\.v2\.f32 \[\2\+(\d+)\], \{(%f\d+), (%f\d+)\};")

    def swap(m: re.Match) -> str:
        ind, rd, a, b, row, c, d = m.groups()
        body = [f"selp.f32 %xqs0, {a}, {c}, %xqp0;", f"selp.f32 %xqs1, {b}, {d}, %xqp0;",
                "shfl.sync.bfly.b32 %xqr0, %xqs0, 1, 31, -1;", "shfl.sync.bfly.b32 %xqr1, %xqs1, 1, 31, -1;",
                f"selp.f32 %xqv0, %xqr0, {a}, %xqp0;", f"selp.f32 %xqv1, %xqr1, {b}, %xqp0;",
                f"selp.f32 %xqv2, {c}, %xqr0, %xqp0;", f"selp.f32 %xqv3, {d}, %xqr1, %xqp0;",
                f"selp.b64 %xqa0, {int(row) - 8}, 0, %xqp0;", f"add.s64 %xqa0, %xqa0, {rd};",
                "st.global.v4.f32 [%xqa0], {%xqv0, %xqv1, %xqv2, %xqv3};"]
        return "".join(ind + line for line in body)

    text, count = pair.subn(swap, build.ptx)
    assert count, "no pair of accumulator stores"
    text = _at_consumers(text, "    mov.u32 %xqt0, %tid.x;\n    and.b32 %xqt0, %xqt0, 1;\n"
                               "    setp.ne.u32 %xqp0, %xqt0, 0;\n")
    text = _declare(text, ".pred %xqp<1>", ".b32 %xqt<1>", ".f32 %xqs<2>", ".f32 %xqr<2>", ".f32 %xqv<4>",
                    ".b64 %xqa<1>")
    return dataclasses.replace(build, ptx=text, config=build.config + " +quad-stores-sim")


def stagger(build: gb.TilemmaBuild, spins: int = 200) -> gb.TilemmaBuild:
    """`build` (warp-specialized, two consumer warpgroups) with the second consumer warpgroup
    starting `spins` turns of a counting loop after the first: it then trails the first by what the
    ring allows, so that one warpgroup's epilogue runs while the other's products keep the tensor
    cores busy, as two warpgroups alternating tiles would (CUTLASS's ping-pong) but on shared stages."""
    delay = ("    mov.u32 %xz0, %tid.x;\n    setp.lt.u32 %xzp0, %xz0, 128;\n    @%xzp0 bra.uni $xz_done;\n"
             "    mov.u32 %xz1, 0;\n$xz_loop:\n    add.u32 %xz1, %xz1, 1;\n"
             f"    setp.lt.u32 %xzp1, %xz1, {spins};\n    @%xzp1 bra.uni $xz_loop;\n$xz_done:\n")
    text = _declare(_at_consumers(build.ptx, delay), ".pred %xzp<2>", ".b32 %xz<2>")
    return dataclasses.replace(build, ptx=text, config=build.config + f" +stagger-{spins}-sim")


def staged_stores(build: gb.TilemmaBuild) -> gb.TilemmaBuild:
    """`build` (a warpgroup kernel with an f32 D, unguarded stores, the pairs of a fragment's rows r
    and r + 8 in column order) storing its accumulators through shared memory, 32 columns (4 pairs)
    at a time: each lane writes its 8-byte pieces into its warp's 16 x 32 buffer, and after a warp
    barrier reads back 4 rows' 16 bytes and stores them whole."""
    pair = re.compile(r"(\s*)st\.global\.v2\.f32 \[(%rd\d+)\+0\], \{(%f\d+), (%f\d+)\};\n"
                      r"\s*st\.global\.v2\.f32 \[\2\+(\d+)\], \{(%f\d+), (%f\d+)\};")
    found = list(pair.finditer(build.ptx))
    assert found and len(found) % 4 == 0, "staged_stores: expected the accumulators' pairs of stores, 4 a chunk"
    row_bytes = int(found[0].group(5)) // 8  # D's row in bytes: the pair's rows are 8 apart
    out, at = [], 0
    for n, m in enumerate(found):
        ind, rd, a, b, _, c, d = m.groups()
        out.append(build.ptx[at:m.start()])
        j = n % 4
        code = [f"st.shared.v2.f32 [%xgw{j}], {{{a}, {b}}};", f"st.shared.v2.f32 [%xgw{j}+1024], {{{c}, {d}}};"]
        if j == 0:
            code.insert(0, f"mov.b64 %xga0, {rd};")
        if j == 3:
            code.append("bar.warp.sync -1;")
            for i in range(4):
                code.append(f"ld.shared.v4.f32 {{%xgv{4 * i}, %xgv{4 * i + 1}, %xgv{4 * i + 2}, %xgv{4 * i + 3}}}, [%xg7+{512 * i}];")
            code.append("add.s64 %xga0, %xga0, %xgo0;")
            for i in range(4):
                code.append(f"st.global.v4.f32 [%xga0+{4 * i * row_bytes}], {{%xgv{4 * i}, %xgv{4 * i + 1}, %xgv{4 * i + 2}, %xgv{4 * i + 3}}};")
            code.append("bar.warp.sync -1;")
        out.append("".join(ind + line for line in code))
        at = m.end()
    out.append(build.ptx[at:])
    base = (build.shared + 127) // 128 * 128
    setup = ["mov.u32 %xg0, %tid.x;", "shr.u32 %xg1, %xg0, 5;", "and.b32 %xg1, %xg1, 7;",  # the warp's buffer
             "mov.u32 %xg2, smem;", f"add.u32 %xg2, %xg2, {base};", "mad.lo.u32 %xg2, %xg1, 2048, %xg2;",
             "and.b32 %xg0, %xg0, 31;", "shr.u32 %xg3, %xg0, 2;", "and.b32 %xg4, %xg0, 3;",  # lane: row r, pair cp
             "shl.b32 %xg5, %xg3, 1;", "and.b32 %xg5, %xg5, 7;",  # the row's swizzle: 2r mod 8 chunks
             "mad.lo.u32 %xg6, %xg3, 128, %xg2;", "and.b32 %xg1, %xg4, 1;", "mad.lo.u32 %xg6, %xg1, 8, %xg6;",
             "shr.u32 %xg1, %xg4, 1;", "mad.lo.u32 %xg6, %xg1, 16, %xg6;"]
    for j in range(4):  # chunk (2j ^ s) + cp / 2 of row r, half cp % 2
        setup += [f"xor.b32 %xg1, %xg5, {2 * j};", f"mad.lo.u32 %xgw{j}, %xg1, 16, %xg6;"]
    setup += ["shr.u32 %xg3, %xg0, 3;", "and.b32 %xg4, %xg0, 7;",  # reading: row 4i + L / 8, chunk L % 8
              "mad.lo.u32 %xg7, %xg3, 128, %xg2;", "shl.b32 %xg5, %xg3, 1;", "and.b32 %xg5, %xg5, 7;",
              "xor.b32 %xg1, %xg4, %xg5;", "mad.lo.u32 %xg7, %xg1, 16, %xg7;",
              # the global offset from the lane's own first piece (row r, column 2 cp) to its row's 16 bytes
              "shr.u32 %xg3, %xg0, 2;", "and.b32 %xg5, %xg0, 3;", "shr.u32 %xg1, %xg0, 3;",
              "cvt.s64.u32 %xgo0, %xg1;", "cvt.s64.u32 %xgl0, %xg3;", "sub.s64 %xgo0, %xgo0, %xgl0;",
              f"mul.lo.s64 %xgo0, %xgo0, {row_bytes};", "shl.b32 %xg4, %xg4, 4;", "shl.b32 %xg5, %xg5, 3;",
              "sub.u32 %xg4, %xg4, %xg5;", "cvt.s64.s32 %xgl0, %xg4;", "add.s64 %xgo0, %xgo0, %xgl0;"]
    text = _at_consumers("".join(out), "".join(f"    {line}\n" for line in setup))
    text = _declare(text, ".b32 %xg<8>", ".b32 %xgw<4>", ".f32 %xgv<16>",
                    ".b64 %xga<1>", ".b64 %xgo<1>", ".b64 %xgl<1>")
    return dataclasses.replace(build, ptx=text, shared=base + 8 * 2048, config=build.config + " +staged-stores-sim")


def build(fam: str, size, config: str, ptx: str | None = None) -> gb.TilemmaBuild:
    text, name = gb.tilemma_ir(gb.FAMILIES[fam], size)
    return gb.tilemma_build(text, name, gb.compile_options("90a", ptx, **gb.parse_config(config)))


def sim_rows(out: str, families: tuple[str, ...], sizes: tuple, sim, config: str = "") -> int:
    """A simulation's run: each family's kernels at `sizes` as built (with `config`) and as `sim`
    makes them, with the peers (cuSPARSELt for sparse ones), samples interleaved in 3 rounds
    (`config_ab.interleaved`)."""
    import torch

    from benchmarks.config_ab import interleaved

    rows = []
    for name in families:
        fam = gb.FAMILIES[name]
        for size in sizes:
            plain = build(fam.name, size, config)
            torch.cuda.empty_cache()
            inp = gb.make_inputs(fam, size, torch)
            rows += interleaved(fam, gb.as_shape(size), [gb.kernel_from(plain), gb.kernel_from(sim(plain))], inp, 3,
                                torch)
    gb.write_csv(rows, out)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("restage", "mn-order", "release", "quad-stores", "stagger", "staged-stores"):
        print("\n".join(line.strip() for line in __doc__.strip().splitlines()[-6:]), file=sys.stderr)
        return 2
    gb.set_timing(6, 20)
    if argv[0] == "mn-order":  # the sparse kernels with an N-major B
        return sim_rows(argv[1], ("sparse-f16-pre",), (4096, 8192, (4096, 4096, 11008)), mn_order)
    if argv[0] == "quad-stores":  # the persistent sparse kernels, both B orders, and f16's
        return sim_rows(argv[1], ("sparse-f16-pre", "sparse-f16-pre-bcol", "f16"), (4096, 8192, (4096, 4096, 2048)),
                        quad_stores, "staged-stores=0")
    if argv[0] == "staged-stores":  # the persistent sparse kernels, both B orders
        return sim_rows(argv[1], ("sparse-f16-pre", "sparse-f16-pre-bcol"), (4096, 8192, (4096, 4096, 2048)),
                        staged_stores, "staged-stores=0")
    if argv[0] == "stagger":  # the persistent sparse kernels, both B orders, a short and a long delay
        for spins in (200, 1000):
            sim_rows(argv[1].replace(".csv", f"-{spins}.csv"), ("sparse-f16-pre", "sparse-f16-pre-bcol"),
                     (4096, 8192, (4096, 4096, 2048)), lambda b: stagger(b, spins))
        return 0
    if argv[0] == "release":  # the sparse kernels, both B orders
        return sim_rows(argv[1], ("sparse-f16-pre", "sparse-f16-pre-bcol"), (4096, 8192, (4096, 11008, 4096)),
                        release)
    import torch

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
