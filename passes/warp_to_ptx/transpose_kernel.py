"""The kernel that transposes an 8-bit N-major B into its K-major workspace before a GEMM
(`tile-transpose-first`): a `ptx.entry` of its own in the GEMM's module, which every launch of the
GEMM runs first (`ptx.entry` prologue, `KernelABI.prologue`).

Each CTA (256 threads) moves a 128 x 128-byte tile: its rows (K) read whole, 16 bytes a thread,
into shared memory as stored; then each thread takes four columns (N) of 16 rows, one word a row,
turns each 4 x 4 block of bytes with `prmt`, and stores each column's 16 bytes of K with one
16-byte store, the eight lanes of a column group its whole 128 bytes: each store of a warp writes
four whole 128-byte lines. (Lanes along N instead, 16 bytes into each of 32 lines a store, ran
1.6-2.0 TB/s on an H200, half Triton's block transpose.) The 16-byte chunks of a row sit XOR-ed
with the row's 16-row group, so that the eight row groups a warp reads at once fall in different
banks. K and N are multiples of 16 (`transpose_first.why_not`), so a 16-byte piece lies wholly
inside or outside the matrix; those outside are neither read nor written.
"""

from __future__ import annotations

from tilemma.dialects import ptx
from tilemma.dialects.ptx_builder import PtxBuilder
from tilemma.passes.warp_to_ptx.transpose_stage import transpose_bytes

TILE = 128  # bytes of K and of N a CTA moves
THREADS = 256
_SHARED = "transpose_tile"


def launch(k: int, n: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The grid and block that transpose a K x N matrix."""
    return (-(-n // TILE), -(-k // TILE), 1), (THREADS, 1, 1)


def transpose_entry(name: str, k: int, n: int, source: str, dest: str) -> ptx.EntryOp:
    """`.entry name(.u64 source, .u64 dest)`: dest[j * k + i] = source[i * n + j] (bytes) for a
    K x N row-major `source` and its N x K row-major (K-major) transpose `dest`."""
    if k % 16 or n % 16:
        raise ValueError(f"transpose_entry: K = {k} and N = {n} must be multiples of 16")
    b = PtxBuilder()
    src, dst = b.reg("b64"), b.reg("b64")
    for reg, param in ((src, source), (dst, dest)):
        b.emit("ld.param.u64", reg, f"[{param}]")
        b.emit("cvta.to.global.u64", reg, reg)
    tid, bx, by = b.special("%tid.x"), b.special("%ctaid.x"), b.special("%ctaid.y")
    n0, k0 = b.reg("b32"), b.reg("b32")
    b.emit("shl.b32", n0, bx, 7)
    b.emit("shl.b32", k0, by, 7)
    base = b.reg("b32")
    b.emit("mov.u32", base, _SHARED)

    # rows in: thread t moves 16 bytes (column chunk t % 8) of rows t / 8 + 32 i, to chunk
    # (t % 8) ^ (row / 16 % 8) of the row in shared memory
    row, col, n_at, in_n = b.reg("b32"), b.reg("b32"), b.reg("b32"), b.reg("pred")
    b.emit("shr.u32", row, tid, 3)
    b.emit("and.b32", col, tid, 7)
    b.emit("shl.b32", col, col, 4)
    b.emit("add.u32", n_at, n0, col)
    b.emit("setp.lt.u32", in_n, n_at, n)
    for i in range(TILE * TILE // 16 // THREADS):
        r, k_at, ok, wide, address, shared, swizzle = (b.reg("b32"), b.reg("b32"), b.reg("pred"), b.reg("b64"),
                                                       b.reg("b64"), b.reg("b32"), b.reg("b32"))
        b.emit("add.u32", r, row, 32 * i)
        b.emit("add.u32", k_at, k0, r)
        b.emit("setp.lt.u32", ok, k_at, k)
        b.emit("and.pred", ok, ok, in_n)
        b.emit("mul.wide.u32", wide, k_at, n)
        b.emit("add.s64", address, src, wide)
        b.emit("cvt.u64.u32", wide, n_at)
        b.emit("add.s64", address, address, wide)
        words = b.regs("b32", 4)
        for w in words:
            b.emit("mov.u32", w, 0)
        b.emit("ld.global.v4.u32", "{" + ", ".join(words) + "}", f"[{address}]", guard=ok)
        b.emit("and.b32", swizzle, r, 0x70)  # (row / 16 % 8) * 16
        b.emit("xor.b32", swizzle, swizzle, col)
        b.emit("mad.lo.u32", shared, r, TILE, swizzle)
        b.emit("add.u32", shared, shared, base)
        b.emit("st.shared.v4.u32", f"[{shared}]", "{" + ", ".join(words) + "}")
    b.emit("bar.sync", 0)

    # columns out: lane l of warp w takes rows 16 (l % 8) ... + 15 and columns 4 g ... 4 g + 3,
    # g = 4 w + l / 8: word g of those rows, at (g ^ 4 (l % 8)) in shared memory
    warp, lane, group, kg, first, swizzled = (b.reg("b32"), b.reg("b32"), b.reg("b32"), b.reg("b32"), b.reg("b32"),
                                              b.reg("b32"))
    b.emit("shr.u32", warp, tid, 5)
    b.emit("and.b32", lane, tid, 31)
    b.emit("and.b32", kg, lane, 7)
    b.emit("shr.u32", group, lane, 3)
    b.emit("mad.lo.u32", group, warp, 4, group)
    b.emit("shl.b32", swizzled, kg, 2)
    b.emit("xor.b32", swizzled, swizzled, group)
    b.emit("shl.b32", first, kg, 4 + 7)  # (16 kg) * TILE
    b.emit("mad.lo.u32", first, swizzled, 4, first)
    b.emit("add.u32", first, first, base)
    rows = b.regs("b32", 16)
    for j, reg in enumerate(rows):
        b.emit("ld.shared.u32", reg, f"[{first}+{j * TILE}]")
    # per column: its 16 bytes of K as four words, each 4 x 4 block of bytes transposed
    columns = [list(c) for c in zip(*(transpose_bytes(b, *rows[4 * i:4 * i + 4]) for i in range(4)))]
    k_at, n_at, ok, in_k = b.reg("b32"), b.reg("b32"), b.reg("pred"), b.reg("pred")
    b.emit("shl.b32", k_at, kg, 4)
    b.emit("add.u32", k_at, k_at, k0)
    b.emit("setp.lt.u32", in_k, k_at, k)
    b.emit("mad.lo.u32", n_at, group, 4, n0)
    b.emit("setp.lt.u32", ok, n_at, n)  # N is a multiple of 4: the lane's four columns in or out together
    b.emit("and.pred", ok, ok, in_k)
    wide, address = b.reg("b64"), b.reg("b64")
    b.emit("mul.wide.u32", wide, n_at, k)
    b.emit("add.s64", address, dst, wide)
    b.emit("cvt.u64.u32", wide, k_at)
    b.emit("add.s64", address, address, wide)
    for c, words in enumerate(columns):
        b.emit("st.global.v4.u32", f"[{address}+{c * k}]", "{" + ", ".join(words) + "}", guard=ok)
    b.emit("ret")
    entry = b.entry(name, [f".u64 {source}", f".u64 {dest}"], THREADS)
    entry.body.block.insert_op_before(ptx.SharedOp(_SHARED, 16, TILE * TILE), entry.body.block.first_op)
    return entry
