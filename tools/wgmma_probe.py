"""Probe of one warpgroup `wgmma.mma_async` on the GPU: shared-memory descriptors, swizzled operand
layouts and the accumulator fragment, against the emulator's tensor-core arithmetic.

A one-CTA kernel (128 threads, one warpgroup) copies host-made images of A and B (already in the
128-byte-swizzle layout the descriptors name) into shared memory, loads C into the accumulator
registers by the fragment layout, runs K / 16 `wgmma.mma_async` on descriptors it builds, and stores
D back by the same layout. Comparing D's bits with `mma_arith.fused_mma` checks the descriptor
encoding, the layouts and the arithmetic at once.
"""

from __future__ import annotations

import sys

import numpy as np

ENTRY = "wgmma_probe"


def sw128_kmajor(x: np.ndarray) -> np.ndarray:
    """Bytes of a rows x 64 (16-bit) K-major tile in the 128-byte swizzle: row r at r * 128, its
    16-byte granule g at g ^ (r % 8)."""
    rows, k = x.shape
    assert k == 64 and x.dtype.itemsize == 2
    words = x.view(np.uint16).reshape(rows, 8, 8)
    out = np.zeros_like(words)
    for r in range(rows):
        for g in range(8):
            out[r, g ^ (r % 8)] = words[r, g]
    return out.reshape(-1).view(np.uint8)


def sw128_mnmajor(x: np.ndarray) -> np.ndarray:
    """Bytes of a K x N (16-bit, N contiguous) tile as N / 64 blocks of K rows of 128 bytes, each
    block swizzled as a K-major one (granule g of K row k at g ^ (k % 8))."""
    k, n = x.shape
    return np.concatenate([sw128_kmajor(x[:, j:j + 64]) for j in range(0, n, 64)])


def descriptor(addr_reg: str, lbo: int, sbo: int) -> list[str]:
    """PTX building a 128-byte-swizzle descriptor in %rd_desc from a 32-bit shared address."""
    const = (1 << 62) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16)
    return [f"cvt.u64.u32 %rd_desc, {addr_reg};",
            "shr.u64 %rd_desc, %rd_desc, 4;",
            "and.b64 %rd_desc, %rd_desc, 0x3FFF;",
            f"or.b64 %rd_desc, %rd_desc, {const};"]


def probe_ptx(n: int, etype: str, b_mn_major: bool, lbo_b: int, sbo_b: int) -> str:
    """The kernel for D (64 x n, f32) = A (64 x 64) B (64 x n) + C; B K-major (an n x 64 image) or
    N-major (n / 64 blocks of 64 x 64)."""
    regs = n // 2
    a_bytes, b_bytes = 64 * 128, n * 128
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        f".visible .entry {ENTRY}(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)",
        "{",
        f".shared .align 1024 .b8 smem[{a_bytes + b_bytes}];",
        ".reg .b32 %r<16>;", ".reg .b64 %rd<16>;", ".reg .b64 %rd_desc, %rd_a, %rd_b;",
        f".reg .f32 %d<{regs}>;", ".reg .pred %p<4>;",
        "ld.param.u64 %rd1, [pa];", "ld.param.u64 %rd2, [pb];", "ld.param.u64 %rd3, [pc];",
        "ld.param.u64 %rd4, [pd];",
        "mov.u32 %r1, %tid.x;",
        "mov.u32 %r2, smem;",
    ]
    # copy the images: 16 bytes a thread a step
    for src, off, size in (("%rd1", 0, a_bytes), ("%rd2", a_bytes, b_bytes)):
        for base in range(0, size, 128 * 16):
            lines += [
                f"mad.wide.u32 %rd5, %r1, 16, {src};",
                f"ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd5+{base}];",
                f"mad.lo.u32 %r3, %r1, 16, %r2;",
                f"st.shared.v4.u32 [%r3+{off + base}], {{%r4, %r5, %r6, %r7}};",
            ]
    lines += ["fence.proxy.async.shared::cta;", "bar.sync 0;"]
    # lane coordinates: row = 16 * warp + lane / 4 (+ 8), col = 8 j + 2 (lane % 4) (+ 1)
    lines += [
        "shr.u32 %r8, %r1, 5;", "and.b32 %r9, %r1, 31;",
        "shr.u32 %r10, %r9, 2;", "and.b32 %r11, %r9, 3;",
        "mad.lo.u32 %r12, %r8, 16, %r10;",  # row
        "shl.b32 %r13, %r11, 1;",  # col base
        f"mad.lo.u32 %r14, %r12, {n}, %r13;",  # element index of (row, col)
        "mul.wide.u32 %rd6, %r14, 4;",
        "add.u64 %rd7, %rd3, %rd6;", "add.u64 %rd8, %rd4, %rd6;",
    ]
    for i in range(regs):
        j, q = divmod(i, 4)
        off = ((8 * n if q >= 2 else 0) + 8 * j + (q % 2)) * 4
        lines.append(f"ld.global.f32 %d{i}, [%rd7+{off}];")
    lines += ["wgmma.fence.sync.aligned;"]
    trans_b = 1 if b_mn_major else 0
    shape = f"m64n{n}k16.f32.{etype}.{etype}"
    dregs = ", ".join(f"%d{i}" for i in range(regs))
    lines.append("setp.eq.u32 %p1, 1, 1;")
    for s in range(4):
        lines.append(f"add.u32 %r15, %r2, {s * 32};")
        lines += descriptor("%r15", 16, 1024)
        lines.append("mov.b64 %rd_a, %rd_desc;")
        b_off = a_bytes + (s * 16 * 128 if b_mn_major else s * 32)
        lines.append(f"add.u32 %r15, %r2, {b_off};")
        lines += descriptor("%r15", lbo_b if b_mn_major else 16, sbo_b if b_mn_major else 1024)
        lines.append("mov.b64 %rd_b, %rd_desc;")
        lines.append(f"wgmma.mma_async.sync.aligned.{shape} {{{dregs}}}, %rd_a, %rd_b, %p1, 1, 1, 0, {trans_b};")
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"]
    for i in range(regs):
        j, q = divmod(i, 4)
        off = ((8 * n if q >= 2 else 0) + 8 * j + (q % 2)) * 4
        lines.append(f"st.global.f32 [%rd8+{off}], %d{i};")
    lines += ["ret;", "}"]
    return "\n".join(lines) + "\n"


def operands(n: int, etype: str, rng: np.random.Generator, adversarial: bool):
    """A (64 x 64), B (64 x n) of `etype` and C (64 x n, f32): random, or with wide exponents,
    cancelling pairs and subnormals."""
    import ml_dtypes
    dt = np.float16 if etype == "f16" else ml_dtypes.bfloat16
    if adversarial:
        a = (rng.standard_normal((64, 64)) * np.exp2(rng.integers(-14, 12, (64, 64)))).astype(dt)
        b = (rng.standard_normal((64, n)) * np.exp2(rng.integers(-14, 12, (64, n)))).astype(dt)
        b[1::2] = (-b[0::2].astype(np.float32)).astype(dt)  # cancellation down K
        a[:, 1::2] = a[:, 0::2]
        a[::7, ::5] = np.array(6e-8 if etype == "f16" else 1e-39, dtype=np.float32).astype(dt)
        c = (rng.standard_normal((64, n)) * np.exp2(rng.integers(-30, 30, (64, n)))).astype(np.float32)
    else:
        a = rng.standard_normal((64, 64)).astype(dt)
        b = rng.standard_normal((64, n)).astype(dt)
        c = rng.standard_normal((64, n)).astype(np.float32)
    return a, b, c


def reference(a, b, c, etype: str) -> np.ndarray:
    from tilemma.compiler.verify import mma_arith
    model = mma_arith.model_for("sm_90", etype, None, "m16n8k16")
    return mma_arith.fused_mma(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64),
                               model, etype, etype, "f32")


def run(n: int, etype: str, b_mn_major: bool, lbo_b: int, sbo_b: int, adversarial: bool, seed: int):
    from tilemma.compiler.runtime import cuda_runtime
    rng = np.random.default_rng(seed)
    a, b, c = operands(n, etype, rng, adversarial)
    a_img = sw128_kmajor(a)
    b_img = sw128_mnmajor(b) if b_mn_major else sw128_kmajor(np.ascontiguousarray(b.T))
    ptx = probe_ptx(n, etype, b_mn_major, lbo_b, sbo_b)
    d = np.zeros((64, n), np.float32)
    out = cuda_runtime.run_kernel(ptx, ENTRY, (1, 1, 1), (128, 1, 1), [a_img, b_img, c, d])
    got = out[3].view(np.uint32)
    want = reference(a, b, c, etype).astype(np.float32).view(np.uint32)
    ref64 = a.astype(np.float64) @ b.astype(np.float64) + c
    return int((got != want).sum()), float(np.abs(out[3] - ref64).max())


def main(argv: list[str]) -> int:
    """Every variant in a process of its own (a fault leaves the CUDA context unusable)."""
    import subprocess
    if argv:
        etype, n, mn, lbo, sbo, adv = argv[0], int(argv[1]), argv[2] == "1", int(argv[3]), int(argv[4]), argv[5] == "1"
        bad, err = run(n, etype, mn, lbo, sbo, adv, seed=n + adv)
        print(bad, f"{err:.3g}")
        return 0
    for etype in ("f16", "bf16"):
        for n in (64, 128, 256):
            for mn, lbo, sbo in ((False, 16, 1024), (True, 64 * 128, 1024), (True, 1024, 64 * 128)):
                for adv in (False, True):
                    args = [etype, str(n), str(int(mn)), str(lbo), str(sbo), str(int(adv))]
                    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", *args],
                                       capture_output=True, text=True)
                    verdict = r.stdout.strip() or ("ERR " + r.stderr.strip().splitlines()[-1][:90])
                    print(etype, n, "N-major" if mn else "K-major", lbo, sbo, "adv" if adv else "rand",
                          verdict, sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
