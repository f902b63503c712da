"""Probe of one warpgroup `wgmma.mma_async` on the GPU: shared-memory descriptors, swizzled operand
layouts and the accumulator fragment, against the emulator's tensor-core arithmetic; also its
2:4 sparse form (`sparse_probe_ptx`, A in the 128- or 64-byte swizzle), the 8-bit integer one
(`int8_probe_ptx`, against the wrapped int32 sums) and the tf32 one (`tf32_probe_ptx`, f32 operands
whose low 13 bits the tensor cores must ignore).

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


def sw64_kmajor(x: np.ndarray) -> np.ndarray:
    """Bytes of a rows x 32 (16-bit) K-major tile in the 64-byte swizzle: row r at r * 64, its
    16-byte granule g at g ^ ((r / 2) % 4)."""
    rows, k = x.shape
    assert k == 32 and x.dtype.itemsize == 2
    words = x.view(np.uint16).reshape(rows, 4, 8)
    out = np.zeros_like(words)
    for r in range(rows):
        for g in range(4):
            out[r, g ^ ((r // 2) % 4)] = words[r, g]
    return out.reshape(-1).view(np.uint8)


def descriptor(addr_reg: str, lbo: int, sbo: int, mode: int = 1) -> list[str]:
    """PTX building a descriptor in %rd_desc from a 32-bit shared address: swizzle `mode` 1 (128
    bytes) or 2 (64 bytes)."""
    const = (mode << 62) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16)
    return [f"cvt.u64.u32 %rd_desc, {addr_reg};",
            "shr.u64 %rd_desc, %rd_desc, 4;",
            "and.b64 %rd_desc, %rd_desc, 0x3FFF;",
            f"or.b64 %rd_desc, %rd_desc, {const};"]


def copy_images(images: list[tuple[str, int, int]]) -> list[str]:
    """PTX copying host-made images into shared memory (%r2 its base, %r1 the thread): for each
    (global pointer register, shared offset, bytes), 16 bytes a thread a step of 2048."""
    lines = []
    for src, off, size in images:
        for base in range(0, size, 128 * 16):
            lines += [
                f"mad.wide.u32 %rd5, %r1, 16, {src};",
                f"ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd5+{base}];",
                "mad.lo.u32 %r3, %r1, 16, %r2;",
                f"st.shared.v4.u32 [%r3+{off + base}], {{%r4, %r5, %r6, %r7}};",
            ]
    return lines


def lane_pointers(n: int) -> list[str]:
    """PTX pointing %rd7 into C (%rd3) and %rd8 into D (%rd4) at this lane's first accumulator
    element of the 64 x n tile: row = 16 * warp + lane / 4, col = 2 (lane % 4)."""
    return [
        "shr.u32 %r8, %r1, 5;", "and.b32 %r9, %r1, 31;",
        "shr.u32 %r10, %r9, 2;", "and.b32 %r11, %r9, 3;",
        "mad.lo.u32 %r12, %r8, 16, %r10;",  # row
        "shl.b32 %r13, %r11, 1;",  # col base
        f"mad.lo.u32 %r14, %r12, {n}, %r13;",  # element index of (row, col)
        "mul.wide.u32 %rd6, %r14, 4;",
        "add.u64 %rd7, %rd3, %rd6;", "add.u64 %rd8, %rd4, %rd6;",
    ]


def accumulators(n: int, dtype: str, store: bool) -> list[str]:
    """PTX loading C into (or storing D from) the n / 2 accumulator registers %d<i> by the
    fragment layout: register i holds row + 8 ((i % 4) / 2), col 8 (i / 4) + i % 2."""
    lines = []
    for i in range(n // 2):
        j, q = divmod(i, 4)
        off = ((8 * n if q >= 2 else 0) + 8 * j + (q % 2)) * 4
        lines.append(f"st.global.{dtype} [%rd8+{off}], %d{i};" if store else f"ld.global.{dtype} %d{i}, [%rd7+{off}];")
    return lines


def entry(n: int, dtype: str, version: str = "8.0", shared_bytes: int | None = None, meta: bool = False) -> list[str]:
    """The probe kernels' head: the module header, the entry (A, B, C, D pointers, and with `meta`
    the metadata words' `pe`), its registers (n / 2 accumulators of `dtype`; with `meta` the words
    %e), the parameters loaded, %r1 the thread and %r2 the shared base; shared memory declared
    inside with `shared_bytes`, else dynamic (`.extern`)."""
    params = ", ".join(f".param .u64 p{x}" for x in ("abcde" if meta else "abcd"))
    shared = [f".shared .align 1024 .b8 smem[{shared_bytes}];"] if shared_bytes is not None else []
    return [
        f".version {version}", ".target sm_90a", ".address_size 64",
        *([] if shared else [".extern .shared .align 1024 .b8 smem[];"]),
        f".visible .entry {ENTRY}({params})",
        "{",
        *shared,
        ".reg .b32 %r<16>;", *([".reg .b32 %e<8>;"] if meta else []), ".reg .b64 %rd<16>;",
        ".reg .b64 %rd_desc, %rd_a, %rd_b;",
        f".reg .{dtype} %d<{n // 2}>;", ".reg .pred %p<4>;",
        "ld.param.u64 %rd1, [pa];", "ld.param.u64 %rd2, [pb];", "ld.param.u64 %rd3, [pc];",
        "ld.param.u64 %rd4, [pd];", *(["ld.param.u64 %rd9, [pe];"] if meta else []),
        "mov.u32 %r1, %tid.x;",
        "mov.u32 %r2, smem;",
    ]


def probe_ptx(n: int, etype: str, b_mn_major: bool, lbo_b: int, sbo_b: int) -> str:
    """The kernel for D (64 x n, f32) = A (64 x 64) B (64 x n) + C; B K-major (an n x 64 image) or
    N-major (n / 64 blocks of 64 x 64)."""
    regs = n // 2
    a_bytes, b_bytes = 64 * 128, n * 128
    lines = entry(n, "f32", shared_bytes=a_bytes + b_bytes)
    lines += copy_images([("%rd1", 0, a_bytes), ("%rd2", a_bytes, b_bytes)])
    lines += ["fence.proxy.async.shared::cta;", "bar.sync 0;"]
    lines += lane_pointers(n) + accumulators(n, "f32", store=False)
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
    lines += accumulators(n, "f32", store=True)
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


def sparse_probe_ptx(n: int, etype: str, b_mn_major: bool, k: int, a_row: int = 128) -> str:
    """The kernel for D (64 x n) = A B + C with a 2:4 sparse A (`wgmma.mma_async.sp`, k32 steps,
    selector 0): A's kept values a K-major image of 64 rows of `a_row` bytes (128: the 128-byte
    swizzle, K / 2 of its 64 columns used; 64: the 64-byte swizzle, K = 64), each thread's
    metadata words (one a k32 step) from `pe`, B K-major (K / 64 blocks of n x 64) or N-major
    (n / 64 blocks of K x 64, LBO the block's bytes)."""
    regs, steps = n // 2, k // 32
    a_bytes, b_bytes = 64 * a_row, n * 2 * k
    lines = entry(n, "f32", "8.2", meta=True)
    lines += copy_images([("%rd1", 0, a_bytes), ("%rd2", a_bytes, b_bytes)])
    lines += ["mul.wide.u32 %rd10, %r1, 32;", "add.u64 %rd10, %rd10, %rd9;"]  # 8 words a thread
    lines += [f"ld.global.u32 %e{s}, [%rd10+{4 * s}];" for s in range(steps)]
    lines += ["fence.proxy.async.shared::cta;", "bar.sync 0;"]
    lines += lane_pointers(n)
    lines += accumulators(n, "f32", store=False)
    lines += ["wgmma.fence.sync.aligned;", "setp.eq.u32 %p1, 1, 1;"]
    dregs = ", ".join(f"%d{i}" for i in range(regs))
    for s in range(steps):
        lines.append(f"add.u32 %r15, %r2, {s * 32};")
        lines += descriptor("%r15", 16, 8 * a_row, 1 if a_row == 128 else 2)
        lines.append("mov.b64 %rd_a, %rd_desc;")
        if b_mn_major:
            b_off, lbo = a_bytes + s * 32 * 128, k * 128
        else:
            b_off, lbo = a_bytes + (s // 2) * n * 128 + (s % 2) * 64, 16
        lines.append(f"add.u32 %r15, %r2, {b_off};")
        lines += descriptor("%r15", lbo, 1024)
        lines.append("mov.b64 %rd_b, %rd_desc;")
        lines.append(f"wgmma.mma_async.sp.sync.aligned.m64n{n}k32.f32.{etype}.{etype} {{{dregs}}}, %rd_a, %rd_b, "
                     f"%e{s}, 0, %p1, 1, 1, 0, {int(b_mn_major)};")
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"]
    lines += accumulators(n, "f32", store=True)
    lines += ["ret;", "}"]
    return "\n".join(lines) + "\n"


def sparse_operands(n: int, k: int, etype: str, rng: np.random.Generator, adversarial: bool):
    """A 2:4 sparse A (64 x k, two random kept positions a chunk of 4), B (k x n), C."""
    a, b, c = operands(n, etype, rng, adversarial)
    if k != 64:
        a2, b2, _ = operands(n, etype, rng, adversarial)
        a, b = np.concatenate([a, a2], 1)[:, :k], np.concatenate([b, b2], 0)[:k]
    keep = np.zeros((64, k // 4, 4), bool)
    for r in range(64):
        for g in range(k // 4):
            keep[r, g, rng.choice(4, 2, replace=False)] = True
    a = np.where(keep.reshape(64, k), a, np.zeros_like(a))
    a[a == 0] = 0  # -0.0 as +0.0 would still count as kept
    return a, b, c


def sparse_reference(a, b, c, etype: str) -> np.ndarray:
    """mma.sp m16n8k32's arithmetic, one k32 step after another (the products of kept elements)."""
    from tilemma.compiler.verify import mma_arith
    model = mma_arith.model_for("sm_90", etype, None, "m16n8k32")
    d = c.astype(np.float64)
    kept = a != 0
    for s in range(0, a.shape[1], 32):
        d = mma_arith.fused_mma(a[:, s:s + 32].astype(np.float64), b[s:s + 32].astype(np.float64), d, model,
                                etype, etype, "f32", kept=kept[:, s:s + 32]).astype(np.float64)
    return d.astype(np.float32)


def sparse_case(n: int, etype: str, b_mn_major: bool, adversarial: bool, seed: int, a_row: int = 128):
    """((A, B, C), the kernel's arguments [A's image, B's image, C, D, the metadata words], the
    dynamic shared bytes, K) of one sparse variant (K = 128 for N <= 128 with A's 128-byte rows,
    else 64)."""
    from tilemma.compiler.layouts import sparse_format
    rng = np.random.default_rng(seed)
    k = 128 if n <= 128 and a_row == 128 else 64
    a, b, c = sparse_operands(n, k, etype, rng, adversarial)
    values, meta = sparse_format.compress_a(a)
    if a_row == 128:
        a_img = sw128_kmajor(np.pad(values, ((0, 0), (0, 64 - values.shape[1]))))
    else:
        a_img = sw64_kmajor(values)
    if b_mn_major:
        b_img = sw128_mnmajor(b)
    else:
        bt = np.ascontiguousarray(b.T)
        b_img = np.concatenate([sw128_kmajor(bt[:, j:j + 64]) for j in range(0, k, 64)])
    # thread t's word for k32 step s at e[t, s]: its warp's tile row, its lane's place; the lanes
    # selector 0 ignores (quad positions 2, 3) get random words
    e = rng.integers(0, 2**32, (128, 8), dtype=np.uint64).astype(np.uint32)
    for t in range(128):
        w, lane = divmod(t, 32)
        if lane & 3 < 2:
            for s in range(k // 32):
                e[t, s] = meta[w, sparse_format.meta_word(s, lane)]
    d = np.zeros((64, n), np.float32)
    return (a, b, c), [a_img, b_img, c, d, e], len(a_img) + len(b_img), k


def run_sparse(n: int, etype: str, b_mn_major: bool, adversarial: bool, seed: int, a_row: int = 128):
    from tilemma.compiler.runtime import cuda_runtime
    (a, b, c), args, shared, k = sparse_case(n, etype, b_mn_major, adversarial, seed, a_row)
    ptx = sparse_probe_ptx(n, etype, b_mn_major, k, a_row)
    out = cuda_runtime.run_kernel(ptx, ENTRY, (1, 1, 1), (128, 1, 1), args, shared_bytes=shared)
    got = out[3].view(np.uint32)
    want = sparse_reference(a, b, c, etype).view(np.uint32)
    ref64 = a.astype(np.float64) @ b.astype(np.float64) + c
    return int((got != want).sum()), float(np.abs(out[3] - ref64).max())


def sw128_bytes(x: np.ndarray) -> np.ndarray:
    """Bytes of a rows x 128-byte K-major tile (any element size) in the 128-byte swizzle."""
    rows = x.shape[0]
    raw = np.ascontiguousarray(x).view(np.uint8).reshape(rows, 8, 16)
    out = np.zeros_like(raw)
    for r in range(rows):
        for g in range(8):
            out[r, g ^ (r % 8)] = raw[r, g]
    return out.reshape(-1)


def kmajor_probe_ptx(n: int, shape: str, dtype: str, a_rows_bytes: int = 128, steps: int = 4,
                     immediates: str = "", a_registers: bool = False) -> str:
    """The kernel for D (64 x n) = A B + C, both operands K-major images of 128-byte rows (A 64 rows,
    B n rows) in the 128-byte swizzle, `steps` instructions `shape` 32 bytes of K apart; C and D
    `dtype` in the accumulator's fragment, `immediates` after scale-d. With `a_registers` A is a
    plain row-major array of 128-byte rows instead (64 x 32 f32, or 64 x 128 8-bit integers), each
    thread loading its 4 words a step into registers as mma.sync's A fragment of the step's K
    (m16n8k8 tf32: a0 (g, c), a1 (g + 8, c), a2 (g, c + 4), a3 (g + 8, c + 4); m16n8k32 8-bit: the
    same words, 4 k each: a0 (g, 4c ..), .., a3 (g + 8, 16 + 4c ..); of its warp's 16 rows, g =
    lane / 4, c = lane % 4), the A the instruction takes from registers."""
    regs = n // 2
    a_bytes, b_bytes = 64 * a_rows_bytes, n * 128
    lines = entry(n, dtype)
    if a_registers:
        lines.insert(lines.index(".reg .b64 %rd_desc, %rd_a, %rd_b;"), f".reg .b32 %a<{4 * steps}>;")
    lines += copy_images([("%rd1", 0, a_bytes), ("%rd2", a_bytes, b_bytes)])
    lines += ["fence.proxy.async.shared::cta;", "bar.sync 0;"]
    lines += lane_pointers(n)
    lines += accumulators(n, dtype, store=False)
    if a_registers:  # the lane's A words: row 16 w + g (%r12), word c (%r11), 32 words a row
        lines += ["mad.lo.u32 %r15, %r12, 32, %r11;", "mul.wide.u32 %rd10, %r15, 4;", "add.u64 %rd10, %rd1, %rd10;"]
        for s in range(steps):
            for i in range(4):
                lines.append(f"ld.global.b32 %a{4 * s + i}, [%rd10+{(8 * (i % 2) * 32 + 8 * s + 4 * (i // 2)) * 4}];")
    lines += ["wgmma.fence.sync.aligned;", "setp.eq.u32 %p1, 1, 1;"]
    dregs = ", ".join(f"%d{i}" for i in range(regs))
    for s in range(steps):
        if a_registers:
            a_operand = "{" + ", ".join(f"%a{4 * s + i}" for i in range(4)) + "}"
        else:
            lines.append(f"add.u32 %r15, %r2, {s * 32};")
            lines += descriptor("%r15", 16, 1024)
            lines.append("mov.b64 %rd_a, %rd_desc;")
            a_operand = "%rd_a"
        lines.append(f"add.u32 %r15, %r2, {a_bytes + s * 32};")
        lines += descriptor("%r15", 16, 1024)
        lines.append("mov.b64 %rd_b, %rd_desc;")
        lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}{shape} {{{dregs}}}, {a_operand}, %rd_b, %p1{immediates};")
    lines += ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"]
    lines += accumulators(n, dtype, store=True)
    lines += ["ret;", "}"]
    return "\n".join(lines) + "\n"


def int8_probe_ptx(n: int, etype: str = "s8", a_registers: bool = False) -> str:
    """The kernel for D (64 x n, s32) = A (64 x 128) B (128 x n) + C with 8-bit integers
    (`wgmma.mma_async ... m64nNk32.s32.T.T`, both operands K-major: 128 K a 128-byte row, 4 k32
    steps 32 bytes apart), C and D s32 in the f32 accumulator's fragment; with `a_registers` A
    from registers (`kmajor_probe_ptx`)."""
    return kmajor_probe_ptx(n, f"k32.s32.{etype}.{etype}", "s32", a_registers=a_registers)


def int8_case(n: int, etype: str, adversarial: bool, seed: int, a_registers: bool = False):
    """(A, B, C) and the kernel's arguments: 8-bit A (64 x 128) and B (128 x n), s32 C; adversarial:
    the extremes of the type and a C near the int32 limits, so that D wraps. With `a_registers` A
    is passed as it is (row-major), else as its swizzled image."""
    rng = np.random.default_rng(seed)
    dt = np.int8 if etype == "s8" else np.uint8
    lo, hi = (-128, 128) if etype == "s8" else (0, 256)
    a = rng.integers(lo, hi, (64, 128)).astype(dt)
    b = rng.integers(lo, hi, (128, n)).astype(dt)
    c = rng.integers(-2**31, 2**31, (64, n)).astype(np.int32) if adversarial else rng.integers(-1000, 1000, (64, n)).astype(np.int32)
    if adversarial:
        a[::3] = lo if etype == "s8" else hi - 1
        b[:, ::2] = lo if etype == "s8" else hi - 1
    args = [a.copy() if a_registers else sw128_bytes(a), sw128_bytes(np.ascontiguousarray(b.T)), c,
            np.zeros((64, n), np.int32)]
    return (a, b, c), args


def int8_reference(a, b, c) -> np.ndarray:
    """D = A B + C in int32, wrapping (no .satfinite)."""
    total = a.astype(np.int64) @ b.astype(np.int64) + c
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def run_int8(n: int, etype: str, adversarial: bool, seed: int, a_registers: bool = False):
    from tilemma.compiler.runtime import cuda_runtime
    (a, b, c), args = int8_case(n, etype, adversarial, seed, a_registers)
    out = cuda_runtime.run_kernel(int8_probe_ptx(n, etype, a_registers), ENTRY, (1, 1, 1), (128, 1, 1), args,
                                  shared_bytes=args[0].nbytes + args[1].nbytes)
    return int((out[3] != int8_reference(a, b, c)).sum()), 0.0


def tf32_probe_ptx(n: int, a_registers: bool = False) -> str:
    """The kernel for D (64 x n, f32) = A (64 x 32) B (32 x n) + C with tf32 operands held as f32
    (`wgmma.mma_async ... m64nNk8.f32.tf32.tf32`, both K-major: K 32 a 128-byte row, 4 k8 steps 32
    bytes apart; no transpose immediates exist for tf32), or with `a_registers` A from registers."""
    return kmajor_probe_ptx(n, "k8.f32.tf32.tf32", "f32", immediates=", 1, 1", a_registers=a_registers)


def tf32_case(n: int, adversarial: bool, seed: int, a_registers: bool = False):
    """(A, B, C) and the kernel's arguments: f32 A (64 x 32), B (32 x n) with random low mantissa
    bits (which tf32 must ignore), C f32; adversarial: wide exponents, cancelling pairs down K,
    f32 subnormals and a wide C. With `a_registers` A is passed as it is (row-major), else as its
    swizzled image."""
    rng = np.random.default_rng(seed)
    if adversarial:
        a = (rng.standard_normal((64, 32)) * np.exp2(rng.integers(-60, 60, (64, 32)))).astype(np.float32)
        b = (rng.standard_normal((32, n)) * np.exp2(rng.integers(-60, 60, (32, n)))).astype(np.float32)
        b[1::2] = -b[0::2]  # cancellation down K
        a[:, 1::2] = a[:, 0::2]
        a[::7, ::5] = np.float32(3e-39)  # subnormal
        b[::3, ::11] = np.float32(-7e-40)
        c = (rng.standard_normal((64, n)) * np.exp2(rng.integers(-60, 60, (64, n)))).astype(np.float32)
    else:
        a = rng.standard_normal((64, 32)).astype(np.float32)
        b = rng.standard_normal((32, n)).astype(np.float32)
        c = rng.standard_normal((64, n)).astype(np.float32)
    args = [a.copy() if a_registers else sw128_bytes(a), sw128_bytes(np.ascontiguousarray(b.T)), c,
            np.zeros((64, n), np.float32)]
    return (a, b, c), args


def tf32_reference(a, b, c) -> np.ndarray:
    """mma.sync m16n8k8 tf32's arithmetic on the operands' top 19 bits (the low 13 ignored)."""
    from tilemma.compiler.verify import mma_arith
    model = mma_arith.model_for("sm_90", "tf32", None, "m16n8k8")

    def tf32(x):
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    return mma_arith.fused_mma(tf32(a), tf32(b), c.astype(np.float64), model, "tf32", "tf32", "f32").astype(np.float32)


def run_tf32(n: int, adversarial: bool, seed: int, a_registers: bool = False):
    from tilemma.compiler.runtime import cuda_runtime
    (a, b, c), args = tf32_case(n, adversarial, seed, a_registers)
    out = cuda_runtime.run_kernel(tf32_probe_ptx(n, a_registers), ENTRY, (1, 1, 1), (128, 1, 1), args,
                                  shared_bytes=64 * 128 + n * 128)
    want = tf32_reference(a, b, c)
    ref64 = a.astype(np.float64) @ b.astype(np.float64) + c
    return int((out[3].view(np.uint32) != want.view(np.uint32)).sum()), float(np.abs(out[3] - ref64).max())


def variant(*args) -> str:
    """One variant's verdict ("mismatched-words max-error", or ERR and the last line of its
    error), run as `python -m tools.wgmma_probe ARGS` in a process of its own."""
    import subprocess
    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", *map(str, args)], capture_output=True, text=True)
    return r.stdout.strip() or ("ERR " + r.stderr.strip().splitlines()[-1][:90])


def main(argv: list[str]) -> int:
    """Every variant in a process of its own (a fault leaves the CUDA context unusable)."""
    if argv and argv[0] == "i8":
        etype, n, adv = argv[1], int(argv[2]), argv[3] == "1"
        bad, _ = run_int8(n, etype, adv, seed=n + adv, a_registers=len(argv) > 4 and argv[4] == "1")
        print(bad, 0)
        return 0
    if argv and argv[0] == "tf32":
        n, adv = int(argv[1]), argv[2] == "1"
        bad, err = run_tf32(n, adv, seed=n + adv, a_registers=len(argv) > 3 and argv[3] == "1")
        print(bad, f"{err:.3g}")
        return 0
    if argv and argv[0] == "sp":
        etype, n, mn, adv = argv[1], int(argv[2]), argv[3] == "1", argv[4] == "1"
        a_row = int(argv[5]) if len(argv) > 5 else 128
        bad, err = run_sparse(n, etype, mn, adv, seed=n + adv, a_row=a_row)
        print(bad, f"{err:.3g}")
        return 0
    if argv:
        etype, n, mn, lbo, sbo, adv = argv[0], int(argv[1]), argv[2] == "1", int(argv[3]), int(argv[4]), argv[5] == "1"
        bad, err = run(n, etype, mn, lbo, sbo, adv, seed=n + adv)
        print(bad, f"{err:.3g}")
        return 0
    for etype in ("f16", "bf16"):
        for n in (64, 128, 256):
            for mn, lbo, sbo in ((False, 16, 1024), (True, 64 * 128, 1024), (True, 1024, 64 * 128)):
                for adv in (False, True):
                    print(etype, n, "N-major" if mn else "K-major", lbo, sbo, "adv" if adv else "rand",
                          variant(etype, n, int(mn), lbo, sbo, int(adv)), sep="\t", flush=True)
            for mn in (False, True):
                for adv in (False, True):
                    for a_row in (128, 64):
                        print("sparse", etype, n, "N-major" if mn else "K-major", "adv" if adv else "rand",
                              f"A rows {a_row}", variant("sp", etype, n, int(mn), int(adv), a_row), sep="\t", flush=True)
    for etype in ("s8", "u8"):
        for n in (64, 128, 256):
            for adv in (False, True):
                for regs in (False, True):
                    print("int8", etype, n, "adv" if adv else "rand", "A registers" if regs else "A shared",
                          variant("i8", etype, n, int(adv), int(regs)), sep="\t", flush=True)
    for n in (64, 128, 256):
        for adv in (False, True):
            for regs in (False, True):
                print("tf32", n, "adv" if adv else "rand", "A registers" if regs else "A shared",
                      variant("tf32", n, int(adv), int(regs)), sep="\t", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
