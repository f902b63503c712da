"""`tile-tile-warps`: distributes each selected GEMM kernel over CTAs, warps and instructions,
rewriting its body from `tile` ops into warp-level IR.

A warp computes a warp tile of RM x RN instructions; a CTA holds WM x WN warps; the grid covers
the M x N tile (rounded up: fragment accesses are predicated at the tile's edge) and the batch.
The kernel becomes: thread and block ids (`gpu`), each warp's origin (`arith` on `index`), the
accumulator fragments (`warp.load` of C or `warp.constant`), an `scf.for` over K carrying them,
whose body loads the A and B fragments (`warp.load`, `warp.load_sparse_a`, `warp.load_scale`) and
multiplies (`warp.mma`), and the stores of D (`warp.store`). The launch shape and each argument's
role are recorded on the `func.func` (`warp.grid`, `warp.block`, `warp.role` argument
attributes); a checked sparse A gets an extra argument, the sparsity error word.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from tilemma.compiler.core import configs, targets
from tilemma.compiler.layouts import sparse_format
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects import tile, warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import PTX_TYPE, read_kernel
from tilemma.passes.warp_to_ptx.sparse_a import NO_ERROR

STAGES = (2, 3, 4, 5)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
STAGE_KS = (16, 32, 64, 128, 256, 512, 1024)  # elements of K a stage may hold (1024 1-bit: 128 bytes)
INDEX_LIMIT = 2**31  # coordinates are computed in 32 bits
ERROR_WORD = MemRefType(IntegerType(32, Signedness.UNSIGNED), [1])


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pair(text: str, option: str) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        x, y = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"tile-tile-warps: {option} must look like 2x4, got {text!r}") from None
    if x <= 0 or y <= 0:
        raise ValueError(f"tile-tile-warps: {option} must be positive, got {text!r}")
    return x, y


@dataclass(frozen=True)
class Tiling:
    instr: tuple[int, int, int]
    warp_tile: tuple[int, int]
    warps: tuple[int, int]
    grid: tuple[int, int, int]

    @property
    def threads(self) -> int:
        return 32 * self.warps[0] * self.warps[1]

    @property
    def cta_tile(self) -> tuple[int, int]:
        return self.warps[0] * self.warp_tile[0] * self.instr[0], self.warps[1] * self.warp_tile[1] * self.instr[1]


@dataclass(frozen=True)
class TileWarps(ModulePass):
    """Options: `warps` (WMxWN warps per CTA, default up to 2x2), `warp-tile` (RMxRN
    instructions per warp; default up to 2 x (32 / instruction N), or 4x8 when staged) and
    `stages` (the ring of shared-memory stages of the staged schedule, 2..5; 0: fragments straight
    from global memory; -1, the default: staged where it applies, see `stageable`) and `stage-k`
    (K of one stage; 0, the default: 128 bytes of K). When none of warps, warp-tile and stages is given, a
    configuration in the tuning cache `tune-cache` (JSON, `compiler/configs.py`) wins. Defaults are
    the kernel's target's (`configs.default`), their stages and stage K cut to fit its shared memory."""

    name = "tile-tile-warps"

    warps: str = ""
    warp_tile: str = ""
    stages: int = -1
    stage_k: int = 0
    tune_cache: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps, warp_tile = _pair(self.warps, "warps"), _pair(self.warp_tile, "warp-tile")
        if self.stages not in (-1, 0, *STAGES):
            raise ValueError(f"tile-tile-warps: stages must be -1 (automatic), 0 (no shared memory) or 2..5, got {self.stages}")
        if self.stage_k not in (0, *STAGE_KS):
            raise ValueError(f"tile-tile-warps: stage-k must be 0 (automatic) or one of "
                             f"{', '.join(map(str, STAGE_KS))}, got {self.stage_k}")
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            mmas = [o for o in kernel.walk() if isinstance(o, tile.MMA_OPS)]
            if not mmas:
                continue
            if any(m.variant is None for m in mmas):
                raise LoweringError(mmas[0], "run tile-select-mma before tile-tile-warps")
            w, t, st, sk = warps, warp_tile, self.stages, self.stage_k
            tuned = self.tuned(kernel, mmas[0]) if (warps, warp_tile, self.stages) == (None, None, -1) else None
            if tuned is not None:
                w, t, st, sk = _pair(tuned.warps, "warps"), _pair(tuned.warp_tile, "warp-tile"), tuned.stages, tuned.stage_k
            _Distribute(kernel, w, t, st, sk).run()

    def tuned(self, kernel: func.FuncOp, mma):
        """The tuning cache's configuration for this kernel, if it has one."""
        cache = configs.load(self.tune_cache)
        if not cache or mma.variant.variant.sparse:  # the cache's entries were measured on dense kernels
            return None
        v = mma.variant.variant
        target = kernel.attributes.get("warp.target")
        shape = mma.acc.type.get_shape()
        batch = shape[0] if len(shape) == 3 else 1
        k = mma.lhs.type.get_shape()[-1]
        key = configs.cache_key(target.sm.data if target else "", v.atype, v.btype, v.ctype,
                                configs.size_class(shape[-2], shape[-1], k, batch))
        return cache.get(key)


def kernel_target(kernel: func.FuncOp) -> targets.SmTarget:
    """The kernel's target (`warp.target`, set by tile-select-mma; sm_90, its default, without)."""
    attr = kernel.attributes.get("warp.target")
    return targets.parse_sm(attr.sm.data if isinstance(attr, warp.TargetAttr) else "sm_90")


def choose_tiling(mma: Operation, variant, m: int, n: int, batch: int,
                  warps: tuple[int, int] | None, warp_tile: tuple[int, int] | None,
                  target: targets.SmTarget) -> Tiling:
    """The default tiling (or the requested one), checked against the target's limits."""
    lays = instruction_layouts(variant)
    mi, ni, ki = lays.warp_shape
    rm, rn = warp_tile or (min(2, _ceil(m, mi)), min(max(1, 32 // ni), _ceil(n, ni)))
    wm, wn = warps or (min(2, _ceil(m, rm * mi)), min(2, _ceil(n, rn * ni)))
    t = Tiling((mi, ni, ki), (rm, rn), (wm, wn), (_ceil(n, wn * rn * ni), _ceil(m, wm * rm * mi), batch))
    limits = target.limits
    if t.threads > limits.threads_per_cta:
        raise LoweringError(
            mma, f"warps {wm}x{wn} make a CTA of {t.threads} threads; a CTA holds at most "
            f"{limits.threads_per_cta} ({limits.threads_per_cta // 32} warps) on {target}",
        )
    # 32-bit registers: an f64 value takes two
    regs = sum(n * lay.regs * max(1, lay.reg_bits // 32) for n, lay in ((rm * rn, lays.c), (rm, lays.a), (rn, lays.b)))
    if variant.sparse:
        regs += rm
    budget = limits.thread_registers(t.threads)  # .maxntid: the CTA shares the SM's file
    if regs > budget - 40:
        raise LoweringError(
            mma, f"warp tile {rm}x{rn} holds {regs} fragment registers per thread; with the "
            f"addressing that exceeds the {budget} registers a thread of a {t.threads}-thread CTA "
            f"can have on {target} ({limits.registers_per_thread} a thread, "
            f"{limits.registers_per_sm} an SM): use a smaller warp tile or fewer warps",
        )
    for axis, (g, limit) in enumerate(zip(t.grid, GRID_LIMITS)):
        if g > limit:
            raise LoweringError(
                mma, f"grid {t.grid} exceeds the CUDA limit of {limit} CTAs in {'xyz'[axis]}",
            )
    return t


# k32 steps of mmas between a pre-compressed A's metadata load and its first use: one stage of
# one step left the load's latency exposed (ncu: long-scoreboard stalls, 1.6 a issued instruction)
META_AHEAD_STEPS = 2
# B read groups (`_Distribute.b_group`) read ahead of their mmas (`_Distribute.stage_steps`): one
# group of mmas covers a read's latency
B_AHEAD = 2
GROUP_M = 8  # CTA rows of tiles per group of the rasterized order (Triton's GROUP_SIZE_M)


def copy_vector(mem, k_major: bool = False) -> int:
    """Bytes per cp.async for an operand: the widest of 16/8/4 that keeps every contiguous run
    of the window (its rows; its columns for a K-major B) aligned (0 when even 4 does not)."""
    from math import gcd

    stride = mem.col_stride if k_major else mem.row_stride
    g = gcd(stride * mem.bits, mem.base * mem.bits, 128) // 8  # in bits: sub-byte elements are packed
    return g if g >= 4 else 0


def b_k_major(mem) -> bool:
    """Whether B is stored K-major (column-major K x N: each column contiguous)."""
    return mem.row_stride == 1 and mem.col_stride != 1


FP8 = ("e4m3", "e5m2")
# Dense shapes staged with `warp.load_shared` (one element per register, which ldmatrix cannot
# read): (m, n, k, A type) -> element bits. Their B may be row-major (K x N) or K-major.
SHARED_LOAD_SHAPES = {(16, 8, 16, "f64"): 64}


def stageable(g, variant) -> str | None:
    """Why a kernel cannot take the staged schedule (None if it can): a dense mma whose K rows
    are 16 bytes (tf32 m16n8k8, 16-bit m16n8k16, 8-bit m16n8k32, 4-bit m16n8k64, 1-bit
    m16n8k256), operands read as stored (tf32: f32 rounded), and f64 m16n8k16 (128-byte K rows,
    read with `warp.load_shared`); A with contiguous K rows; B with contiguous N rows (16-bit:
    ldmatrix .trans; tf32 and f64: `warp.load_shared`) or K-major; every run aligned for
    cp.async, and sub-byte K rows ending on a byte. A pre-compressed sparse A:
    `pre_compressed_stageable`."""
    if g.a_meta is not None:
        return pre_compressed_stageable(g, variant)
    if variant.atype == "f64" and variant.shape != "m16n8k16":
        return (f"f64 staging needs m16n8k16 (sm_90); {variant.shape}'s K of {variant.k} is a 32-byte "
                f"shared row, too short for the 16-byte granule swizzle and a pipelined stage")
    bits = SHARED_LOAD_SHAPES.get((variant.m, variant.n, variant.k, variant.atype)) or warp.LDMATRIX_SHAPES.get(
        (variant.m, variant.n, variant.k))
    if bits is None or variant.sparse or variant.block_scale:
        return (f"staging covers dense m16n8k8 (tf32), m16n8k16 (16-bit, f64), m16n8k32 (8-bit), m16n8k64 "
                f"(4-bit) and m16n8k256 (1-bit), not {variant.shape}{' sparse' if variant.sparse else ''}")
    if variant.atype not in configs.STAGED_ELEMENTS[bits] or variant.btype not in configs.STAGED_ELEMENTS[bits]:
        return f"staging covers {', '.join(configs.STAGED_TYPES)} operands, not {variant.atype} x {variant.btype}"
    widened = [[c[:2] for c in mem.casts] == [(mem.stored, tile.INT4_WIDENED.get(mem.stored))] for mem in (g.a, g.b)]
    for what, mem, wide in (("A", g.a, widened[0]), ("B", g.b, widened[1])):
        if mem.casts and [c[:2] for c in mem.casts] != [("f32", "tf32")] and not wide:
            return f"{what} must be read as stored (or as f32 rounded to tf32, or 4-bit integers widened to 8)"
    if widened[0] != widened[1]:
        return "A and B must both be 4-bit integers widened to 8-bit, or neither"
    if g.a.col_stride != 1:
        return "A must have contiguous rows (K-major)"
    k_major = b_k_major(g.b)
    if not k_major and g.b.col_stride != 1:
        return "B must have contiguous rows or columns"
    if bits <= 8 and not k_major:
        return (f"{bits}-bit B must be K-major (a column-major K x N memref, strided<[1, K]>): ldmatrix "
                f"transposes only 16-bit elements, and {bits}-bit fragments pack {32 // bits} elements a register")
    if g.a.bits < 8 and g.k * g.a.bits % 8:
        return (f"K = {g.k} {g.a.bits}-bit elements end inside a byte: cp.async copies whole bytes, and "
                f"the byte's other bits would enter the product")
    for what, mem, km in (("A", g.a, False), ("B", g.b, k_major)):
        if not copy_vector(mem, km):
            return (f"{what}'s {'columns' if km else 'rows'} are not 4-byte aligned (stride "
                    f"{mem.col_stride if km else mem.row_stride}, offset {mem.base} elements)")
    if getattr(g.mma, "split_tf32", None) is not None:
        return "3xTF32 is not staged"
    return None


def pre_compressed_stageable(g, variant) -> str | None:
    """Why a pre-compressed sparse A kernel cannot be staged (None if it can): its values stage
    like a dense 16-bit A (their m16n8k32 fragment is the m16n8k16 A of the values), B like a
    dense 16-bit B, read as stored (rows contiguous: ldmatrix .trans, or K-major), 4-byte aligned."""
    if g.b.casts or g.b.stored not in ("f16", "bf16"):
        return f"B must be f16 or bf16 read as stored, not {g.b.stored}"
    k_major = b_k_major(g.b)
    if not k_major and g.b.col_stride != 1:
        return "B must have contiguous rows or columns"
    if not copy_vector(g.b, k_major):
        return f"B's {'columns' if k_major else 'rows'} are not 4-byte aligned"
    return None


def widens(g, variant) -> bool:
    """Whether 4-bit operands run as the 8-bit mma (select-mma's widening): staged as stored,
    their m16n8k64 fragments widened in registers (`warp.widen`)."""
    return g.a.bits == 4 and variant.k == 32


def default_schedule(g, variant) -> str:
    """The key of a staged kernel's default configuration in `configs.DEFAULTS`."""
    if g.a_meta is not None:
        return "sparse-16bit"
    if g.a.bits == 64:
        return "64bit"
    if g.a.bits == 32:
        return "32bit" if b_k_major(g.b) else "32bit-row-b"
    if g.a.bits == 8:
        return "fp8" if variant.atype in FP8 else "8bit"
    if widens(g, variant):
        return "4bit-widened"
    return f"{g.a.bits}bit"


class _Distribute:
    """Rewrites one kernel's body (read with `read_kernel`, which reports what is unsupported)."""

    def __init__(self, kernel: func.FuncOp, warps, warp_tile, stages: int = -1, stage_k: int = 0):
        self.kernel, self.g = kernel, read_kernel(kernel)
        self.target = kernel_target(kernel)
        self.mma = self.g.mma
        self.variant_attr: warp.VariantAttr = self.mma.variant  # type: ignore[assignment]
        self.variant = self.variant_attr.variant
        self.batched = len(self.mma.acc.type.get_shape()) == 3  # type: ignore[union-attr]
        g = self.g
        if g.a_meta is not None:
            if self.variant.shape != sparse_format.SHAPE or self.variant.atype not in tile.PRE_COMPRESSED:
                raise LoweringError(
                    self.mma, f"a pre-compressed A (tile.sparse_from) feeds the 16-bit {sparse_format.SHAPE} "
                    f"mma.sp (its metadata layout), not {self.variant.opcode}",
                )
            tiles, words = sparse_format.meta_shape(g.m, g.k)
            if 4 * tiles * words >= 2**32:  # warp.load_meta addresses a batch's words in 32 bits
                raise LoweringError(
                    self.mma, f"the metadata of a {g.m} x {g.k} pre-compressed A is {4 * tiles * words} bytes; "
                    f"more than 4 GiB a batch is not supported (its offsets are 32-bit)",
                )
        for what, size in (("M", g.m), ("N", g.n), ("K", g.k)):
            if size >= INDEX_LIMIT:
                raise LoweringError(
                    self.mma, f"{what} = {size}: tiles of 2^31 or more elements along a dimension "
                    f"are not supported (coordinates are 32-bit)",
                )
        why_not = stageable(self.g, self.variant)
        if stages > 0 and why_not:
            raise LoweringError(self.mma, f"stages={stages}: this kernel cannot be staged through shared memory: {why_not}")
        schedule = default_schedule(g, self.variant)
        default = configs.default(self.target, schedule)
        fit = dict(cut_stages=stages < 0, cut_k=not stage_k)  # defaults, cut to fit the target below
        size_class = configs.size_class(g.m, g.n, g.k, g.batch)
        if stages < 0:
            stages = (configs.SMALL_STAGES.get(schedule) if size_class == "small" else None) or default.stages
        self.stages = 0 if (stages == 0 or why_not) else stages
        self.stage_k = stage_k = stage_k or default.stage_k
        # 4-bit integers staged as stored, read as m16n8k64 fragments and widened for 8-bit mmas
        self.widen = widens(g, self.variant)
        self.read_k = 64 if self.widen else self.variant.k  # K of one fragment read
        self.interleave = schedule in configs.INTERLEAVED_READS and not self.widen  # (stage_steps)
        if self.stages and stage_k % self.read_k:
            raise LoweringError(self.mma, f"stage-k {stage_k} is not a multiple of the fragments' K ({self.read_k})")
        if self.stages and warp_tile is None:
            rm, rn = _pair(default.warp_tile, "warp-tile")  # type: ignore[misc]
            rm, rn = min(rm, _ceil(g.m, 16)), min(rn, _ceil(g.n, 8))
            if warps is None:
                large = size_class == "large" and schedule in configs.LARGE_WARPS
                for choice in ((configs.LARGE_WARPS[schedule],) if large else ()) + (default.warps,):
                    wm, wn = _pair(choice, "warps")  # type: ignore[misc]
                    if g.m >= wm * rm * 16 and g.n >= wn * rn * 8:  # one CTA fits the problem
                        warps = (wm, wn)
                        break
            wm, wn = warps or (2, 2)
            # Small problems: halve the CTA's rows while that leaves SMs idle (fewer tiles than
            # about one wave of the target's SMs).
            while rm > 2 and _ceil(g.m, wm * rm * 16) * _ceil(g.n, wn * rn * 8) * g.batch < self.target.limits.one_wave:
                rm //= 2
            warp_tile = (rm, rn)
        self.t = choose_tiling(self.mma, self.variant, g.m, g.n, g.batch, warps, warp_tile, self.target)
        if self.stages:
            self.t = Tiling(self.t.instr, self.t.warp_tile, self.t.warps,
                            (self.t.grid[0] * self.t.grid[1], 1, g.batch))
            if self.t.grid[0] > GRID_LIMITS[0]:
                raise LoweringError(self.mma, f"{self.t.grid[0]} CTAs exceed the CUDA limit of {GRID_LIMITS[0]}")
        if self.stages:
            bm, bn = self.t.cta_tile
            a_bits = g.a.bits // 2 if g.a_meta is not None else g.a.bits  # compressed: K/2 values
            limit = self.target.limits.shared_per_cta
            self.stages, self.stage_k = configs.fit_shared(
                self.stages, self.stage_k, bm * a_bits + bn * g.b.bits, limit, schedule, read_k=self.read_k, **fit)
            need = self.stages * self.stage_k * (bm * a_bits + bn * g.b.bits) // 8
            if need > limit:
                raise LoweringError(
                    self.mma, f"{self.stages} stages of K {self.stage_k} with a {bm}x{bn} CTA tile need "
                    f"{need} bytes of shared memory; a CTA has at most {limit} on {self.target} "
                    f"({limit // 1024} KiB): use fewer stages or a smaller stage-k",
                )
        self.ops: list[Operation] = []
        bm, bn = self.t.cta_tile
        self.m_exact, self.n_exact, self.k_exact = g.m % bm == 0, g.n % bn == 0, g.k % self.t.instr[2] == 0

    # -- small builders -------------------------------------------------------------------

    def add(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def const(self, value: int) -> SSAValue:
        return self.add(arith.ConstantOp.from_int_and_width(value, IndexType())).results[0]

    def affine(self, base: SSAValue, scale: int, offset: SSAValue | None) -> SSAValue:
        """base * scale (+ offset)."""
        v = self.add(arith.MuliOp(base, self.const(scale))).results[0] if scale != 1 else base
        return self.add(arith.AddiOp(v, offset)).results[0] if offset is not None else v

    def bounded(self, op, rows: bool, cols: bool):
        """Add a window op, marking the dimensions that cannot leave the tile."""
        op.set_in_bounds(rows, cols)
        return self.add(op)

    def aligned(self, op):
        """Mark an accumulator access: its column index (a sum of multiples of the instruction's
        N) is a multiple of N."""
        op.col_align = IntegerAttr(self.t.instr[1], i64)
        return op

    def plus(self, base: SSAValue, offset: int) -> SSAValue:
        return self.add(arith.AddiOp(base, self.const(offset))).results[0] if offset else base

    # -- operands -------------------------------------------------------------------------

    def source(self, value: SSAValue) -> tuple[tile.LoadOp, str | None]:
        """The tile.load an operand starts from (through casts and a compress), and the rounding
        of an f32 -> tf32 cast on the way."""
        owner, rounding = value.owner, None
        if isinstance(owner, tile.CompressOp):
            owner = owner.source.owner
        while isinstance(owner, tile.CastOp):
            if owner.rounding is not None:
                rounding = str(owner.rounding.data)
            owner = owner.source.owner
        assert isinstance(owner, tile.LoadOp)  # read_kernel checked
        return owner, rounding

    def window(self, load: tile.LoadOp) -> tuple[tuple[int, ...], tuple[int, int, int]]:
        shape = load.result.type.get_shape()  # type: ignore[union-attr]
        batch = shape[0] if len(shape) == 3 else 1
        return load.offset_values(), (batch, shape[-2], shape[-1])

    def frag(self, role: warp.Operand, element) -> warp.FragType:
        return warp.FragType(role, element, self.variant_attr)

    def stored_frag(self, role: warp.Operand, mem) -> warp.FragType:
        """A fragment of the m16n8k64 instruction of a widened 4-bit operand, as stored."""
        native = dataclasses.replace(self.variant, k=64, atype=PTX_TYPE[self.g.a.stored],
                                     btype=PTX_TYPE[self.g.b.stored])
        return warp.FragType(role, tile.element_type(mem.stored), warp.VariantAttr(native))

    # -- the kernel -----------------------------------------------------------------------

    def run(self) -> None:
        g, t, mma = self.g, self.t, self.mma
        kernel = self.kernel
        args = list(kernel.body.block.args)
        roles: dict[SSAValue, list[str]] = {a: [] for a in args}
        new_body = Block(arg_types=[a.type for a in args])
        arg_of = dict(zip(args, new_body.args))
        for old_arg, new_arg in arg_of.items():
            new_arg.name_hint = old_arg.name_hint

        check = isinstance(mma.lhs.owner, tile.CompressOp) and mma.lhs.owner.prune is None
        error = new_body.insert_arg(ERROR_WORD, len(args)) if check else None
        if error is not None:
            error.name_hint = "sparsity_error"

        mi, ni, ki = t.instr
        rm, rn = t.warp_tile
        wm, _ = t.warps
        bm, bn = t.cta_tile
        tid = self.add(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))).results[0]
        bx, by, bz = (self.add(gpu.BlockIdOp(gpu.DimensionAttr(d))).results[0]
                      for d in (gpu.DimensionEnum.X, gpu.DimensionEnum.Y, gpu.DimensionEnum.Z))
        wid = self.add(arith.DivUIOp(tid, self.const(32))).results[0]
        warp_m = self.add(arith.RemUIOp(wid, self.const(wm))).results[0]
        warp_n = self.add(arith.DivUIOp(wid, self.const(wm))).results[0]
        if self.stages:  # CTAs in groups of GROUP_M rows of tiles, so that neighbours share L2
            by, bx = self.rasterize(bx, _ceil(g.m, bm), _ceil(g.n, bn))
        self.cta_row, self.cta_col = self.affine(by, bm, None), self.affine(bx, bn, None)
        self.warp_row, self.warp_col = self.affine(warp_m, rm * mi, None), self.affine(warp_n, rn * ni, None)
        row0 = self.add(arith.AddiOp(self.cta_row, self.warp_row)).results[0]
        col0 = self.add(arith.AddiOp(self.cta_col, self.warp_col)).results[0]
        rows = [self.plus(row0, i * mi) for i in range(rm)]
        cols = [self.plus(col0, j * ni) for j in range(rn)]
        zero = self.const(0)

        acc_type = mma.acc.type.element_type  # type: ignore[union-attr]
        acc_frag = self.frag(warp.Operand.ACC, acc_type)
        if isinstance(mma.acc.owner, tile.ConstantOp):
            value = g.c
            attr = (IntegerAttr(int(value), i64) if isinstance(acc_type, IntegerType)
                    else FloatAttr(float(value), f64))
            splat = self.add(warp.ConstantOp(attr, acc_frag)).results[0]
            accs = [splat] * (rm * rn)
        else:
            load, _ = self.source(mma.acc)
            roles[load.source].append("c")
            window, extent = self.window(load)
            accs = [
                self.aligned(self.bounded(warp.LoadOp(arg_of[load.source], [bz, rows[i], cols[j]], window, extent,
                                                      acc_frag), self.m_exact, self.n_exact)).results[0]
                for i in range(rm) for j in range(rn)
            ]

        if self.stages:
            results = self.staged_loop(arg_of, roles, bz, accs, acc_frag)
        else:
            results = list(self.simple_loop(arg_of, roles, bz, rows, cols, accs, acc_frag, error, zero).results)
        self.finish_body(kernel, new_body, args, roles, arg_of, bz, rows, cols, results, check)

    def simple_loop(self, arg_of, roles, bz, rows, cols, accs, acc_frag, error, zero):
        """The K loop with fragments straight from global memory, one instruction's K per
        iteration (dense A columns for mma.sp)."""
        g, mma = self.g, self.mma
        rm, rn = self.t.warp_tile
        ki = self.t.instr[2]
        steps = _ceil(g.k, ki)
        body = Block(arg_types=[IndexType()] + [acc_frag] * len(accs))
        k, iters = body.args[0], list(body.args[1:])
        outer, self.ops = self.ops, []
        a_frags, metas = self.lhs_fragments(arg_of, roles, bz, rows, k, error)
        b_frags = self.rhs_fragments(arg_of, roles, bz, cols, k)
        scales = self.scale_fragments(arg_of, roles, bz, rows, cols, k) if g.scales else None
        split = getattr(mma, "split_tf32", None) is not None
        results = []
        for i in range(rm):
            for j in range(rn):
                results.append(self.add(warp.MmaOp(
                    a_frags[i], b_frags[j], iters[i * rn + j],
                    metadata=metas[i] if metas else None,
                    scales=(scales[0][i], scales[1][j]) if scales else None,
                    split_tf32=split,
                )).results[0])
        self.add(scf.YieldOp(*results))
        body.add_ops(self.ops)
        self.ops = outer
        return self.add(scf.ForOp(zero, self.const(steps * ki), self.const(ki), accs, body))

    def rasterize(self, pid, tiles_m: int, tiles_n: int):
        """(tile row, tile col) of CTA `pid` when CTAs run in groups of GROUP_M tile rows."""
        width = GROUP_M * tiles_n
        group = self.add(arith.DivUIOp(pid, self.const(width))).results[0]
        first = self.add(arith.MuliOp(group, self.const(GROUP_M))).results[0]
        left = self.add(arith.SubiOp(self.const(tiles_m), first)).results[0]
        size = self.add(arith.MinUIOp(left, self.const(GROUP_M))).results[0]
        within = self.add(arith.RemUIOp(pid, self.const(width))).results[0]
        row = self.add(arith.AddiOp(first, self.add(arith.RemUIOp(within, size)).results[0])).results[0]
        col = self.add(arith.DivUIOp(within, size)).results[0]
        return row, col

    def staged_loop(self, arg_of, roles, bz, accs, acc_frag):
        """The K loop through a ring of S shared-memory stages, software-pipelined twice over.
        Copies: the CTA copies A (BM x BK) and B (BK x BN) tiles with cp.async, S-1 stages ahead
        of the stage the warps multiply; a copy past K is skipped (`scf.if`), so the copies
        that run never cross K where K is a multiple of BK. Fragments: read from the stages ahead
        of their mmas, the whole next K step at once or as registers free up (`stage_steps`);
        those a stage starts with travel as loop-carried values; the last stage is peeled so that
        nothing past K is read."""
        g, t, S = self.g, self.t, self.stages
        bm, bn = t.cta_tile
        bk = self.stage_k
        self.b_k_major = b_k_major(g.b)
        # which fragments come from warp.load_shared instead of ldmatrix: both operands of the
        # SHARED_LOAD_SHAPES; a row-major 32-bit (tf32) B, whose K x N stage ldmatrix cannot
        # transpose (.trans moves 16-bit elements)
        self.a_shared = (self.variant.m, self.variant.n, self.variant.k, self.variant.atype) in SHARED_LOAD_SHAPES
        self.b_shared = self.a_shared or (g.b.bits == 32 and not self.b_k_major)
        space = IntegerAttr(warp.SHARED, i64)
        pre = g.a_meta is not None  # the stage holds A's compressed values: K/2 columns
        shared = [MemRefType(tile.element_type(g.a.stored), [S, bm, bk // 2 if pre else bk], memory_space=space),
                  MemRefType(tile.element_type(g.b.stored), [S, bn, bk] if self.b_k_major else [S, bk, bn],
                             memory_space=space)]
        self.s_a, self.s_b = (self.add(memref.AllocOp([], [], ty, IntegerAttr(128, i64))).results[0] for ty in shared)
        load_b, _ = self.source(self.mma.rhs)
        k_exact = g.k % bk == 0
        if pre:
            a_src, meta = self.pre_compressed_args(self.mma.lhs.owner, roles)
            self.meta_ref, self.meta_batch = arg_of[meta], bz
            row0 = self.add(arith.AddiOp(self.cta_row, self.warp_row)).results[0]
            self.meta_rows = [self.plus(row0, i * 16) for i in range(t.warp_tile[0])]
            win_a, ext_a = self.pre_window(self.mma.lhs.owner)
            a_exact = sparse_format.padded_k(g.k) % bk == 0
        else:
            load_a, _ = self.source(self.mma.lhs)
            a_src, a_exact = load_a.source, k_exact
            roles[a_src].append("a")
            win_a, ext_a = self.window(load_a)
        roles[load_b.source].append("b")
        win_b, ext_b = self.window(load_b)

        def copy(k: SSAValue, stage: SSAValue) -> None:
            a_k = self.add(arith.DivUIOp(k, self.const(2))).results[0] if pre else k
            self.bounded(warp.CopyAsyncOp(arg_of[a_src], [bz, self.cta_row, a_k], self.s_a, stage,
                                          win_a, ext_a, t.threads, copy_vector(g.a)), self.m_exact, a_exact)
            self.bounded(warp.CopyAsyncOp(arg_of[load_b.source], [bz, k, self.cta_col], self.s_b, stage,
                                          win_b, ext_b, t.threads, copy_vector(g.b, self.b_k_major),
                                          transpose=self.b_k_major), k_exact, self.n_exact)

        steps = _ceil(g.k, bk)
        for s in range(S - 1):  # the prologue: stages that start past K stay empty
            if s < steps:
                copy(self.const(s * bk), self.const(s))
            self.add(warp.AsyncCommitOp())
        self.add(warp.AsyncWaitOp(S - 2))
        self.add(gpu.BarrierOp())
        # a pre-compressed A's metadata is loaded `meta_ahead` stages before its mmas (one
        # group per stage in flight, carried with the fragments)
        self.meta_ahead = _ceil(META_AHEAD_STEPS, bk // t.instr[2]) if pre else 0
        frags = self.stage_fragments(self.const(0), 0)
        for d in range(self.meta_ahead):
            frags += self.stage_meta(self.const(d * bk))
        zero = self.const(0)
        if steps > 1:
            body = Block(arg_types=[IndexType()] + [acc_frag] * len(accs) + [f.type for f in frags])
            kt, carried = body.args[0], list(body.args[1:])
            outer, self.ops = self.ops, []
            ahead = self.plus(kt, S - 1)
            k_ahead = self.add(arith.MuliOp(ahead, self.const(bk))).results[0]
            more = self.add(arith.CmpiOp(k_ahead, self.const(g.k), "ult")).results[0]
            stage = self.add(arith.RemUIOp(kt, self.const(S))).results[0]
            following = self.add(arith.RemUIOp(self.plus(kt, 1), self.const(S))).results[0]
            # the refill, into the stage the previous iteration freed (its reads all came
            # before that iteration's barrier)
            loop_ops, self.ops = self.ops, []
            copy(k_ahead, self.add(arith.RemUIOp(ahead, self.const(S))).results[0])
            self.add(scf.YieldOp())
            then, self.ops = self.ops, loop_ops
            self.add(scf.IfOp(more, [], then))
            self.add(warp.AsyncCommitOp())
            meta_k = self.add(arith.MuliOp(self.plus(kt, self.meta_ahead), self.const(bk))).results[0] if pre else None
            accs_out, nxt = self.stage_steps(stage, following, carried[:len(accs)], carried[len(accs):], meta_k)
            self.add(scf.YieldOp(*accs_out, *nxt))
            body.add_ops(self.ops)
            self.ops = outer
            loop = self.add(scf.ForOp(zero, self.const(steps - 1), self.const(1), [*accs, *frags], body))
            accs, frags = list(loop.results[:len(accs)]), list(loop.results[len(accs):])
        accs, _ = self.stage_steps(self.const((steps - 1) % S), None, accs, frags)
        self.add(warp.AsyncWaitOp(0))  # nothing in flight when the CTA ends
        return accs

    def stage_fragments(self, stage: SSAValue, kk: int) -> list[SSAValue]:
        """The fragments a stage starts with, of its K step `kk`: A, and B's first `b_ahead`
        groups (`stage_reads`)."""
        read_a, read_b = self.stage_reads(stage, kk)
        return ([read_a(i) for i in range(self.t.warp_tile[0])]
                + [f for g in range(self.b_ahead()) for f in read_b(g * self.b_group())])

    def b_group(self) -> int:
        """B fragments a read gives: two instruction columns per ldmatrix .x4 of dense ldmatrix
        shapes (one at the warp tile's edge when RN is odd), else one."""
        return 1 if self.b_shared or self.g.a_meta is not None else 2

    def b_ahead(self) -> int:
        """B groups read ahead: B_AHEAD, at most a K step's (all of them where the whole next
        step is read ahead)."""
        groups = _ceil(self.t.warp_tile[1], self.b_group())
        return min(B_AHEAD, groups) if self.interleave else groups

    def stage_reads(self, stage: SSAValue, kk: int):
        """Readers of K step `kk` of a stage: i -> instruction row i's A fragment (ldmatrix .x4),
        and j -> the B fragments of instruction columns j.. (`b_group` of them: ldmatrix .x4 of
        two columns from an N x K buffer, or .trans from a K x N one). `warp.load_shared` per
        fragment for the shapes ldmatrix cannot read (`SHARED_LOAD_SHAPES`) and a row-major tf32
        B. A pre-compressed A's stage holds its values (column kk / 2), and each k32 B fragment
        is one .x4 of its own."""
        rn = self.t.warp_tile[1]
        pre = self.g.a_meta is not None
        (_, a_round), (_, b_round) = (None, None) if pre else self.source(self.mma.lhs), self.source(self.mma.rhs)
        a_type = self.frag(warp.Operand.A, _operand_element(self.mma.lhs))
        b_type = self.frag(warp.Operand.B, _operand_element(self.mma.rhs))
        if self.widen:  # the stored 4-bit fragments of m16n8k64 (`warp.widen` makes the mma's)
            a_type, b_type = (self.stored_frag(role, mem) for role, mem in ((warp.Operand.A, self.g.a),
                                                                            (warp.Operand.B, self.g.b)))
        at, zero = self.const(kk), self.const(0)
        a_read = warp.LoadSharedOp if self.a_shared else warp.LdMatrixOp
        a_col = self.const(kk // 2) if pre else at  # a pre-compressed stage holds K/2 value columns

        def read_a(i: int) -> SSAValue:
            return self.add(a_read(self.s_a, [stage, self.warp_row, a_col], (i * 16, 0), a_type,
                                   rounding=a_round)).results[0]

        def read_b(j: int) -> list[SSAValue]:
            if self.b_shared:  # one element per register
                op = (warp.LoadSharedOp(self.s_b, [stage, self.warp_col, at], (j * 8, 0), b_type,
                                        transposed=True, rounding=b_round) if self.b_k_major
                      else warp.LoadSharedOp(self.s_b, [stage, at, self.warp_col], (0, j * 8), b_type,
                                             rounding=b_round))
            elif pre:
                op = (warp.LdMatrixOp(self.s_b, [stage, self.plus(self.warp_col, j * 8), at], (0, 0), b_type)
                      if self.b_k_major else
                      warp.LdMatrixOp(self.s_b, [stage, zero, self.plus(self.warp_col, j * 8)], (kk, 0), b_type,
                                      trans=True))
            else:
                n = self.plus(self.warp_col, j * 8)
                op = (warp.LdMatrixOp(self.s_b, [stage, n, at], (0, 0), b_type, min(2, rn - j), rounding=b_round)
                      if self.b_k_major else
                      warp.LdMatrixOp(self.s_b, [stage, zero, n], (kk, 0), b_type, min(2, rn - j), trans=True))
            return list(self.add(op).results)

        return read_a, read_b

    def stage_meta(self, k: SSAValue) -> list[SSAValue]:
        """A pre-compressed A's metadata for the stage at K `k`: per instruction row of the warp
        tile, one vector load of its k32 steps' words (none for other kernels)."""
        if self.g.a_meta is None:
            return []
        steps = self.stage_k // self.t.instr[2]
        meta = self.frag(warp.Operand.META, IntegerType(32))
        return [r for i in range(self.t.warp_tile[0])
                for r in self.add(warp.LoadMetaOp(self.meta_ref, [self.meta_batch, self.meta_rows[i], k], meta, steps)).results]

    def stage_steps(self, stage, following, accs, frags, meta_k=None):
        """The mmas of one stage, K step by K step. Where `interleave` (configs.INTERLEAVED_READS)
        a step's mmas go column by column (instruction rows in order within a column), reading
        fragments as the registers of the ones they replace free up, so that about a fragment set
        is live, not two: register pressure (a 4x8 mma.sp warp tile spilled when whole sets were
        double-buffered): after the mmas of a B group, the group `b_ahead` groups on is read (the
        next step's first groups at a step's end); after a row's mma of a step's last column,
        that row's A of the next step. Elsewhere the whole next step is read before a step's mmas
        (row by row; 4-bit fragments widened right before them). `frags` holds
        what the stage starts with (`stage_fragments`); what the following stage starts with is
        returned, read after waiting for that stage, right before its first read (nothing after
        the last stage). A pre-compressed A's metadata rides at the end of `frags`, a group per
        stage from this one on; the group `meta_ahead` stages on (at `meta_k`) is loaded from
        global memory before this stage's mmas."""
        rm, rn = self.t.warp_tile
        ki = self.read_k
        w, ahead = self.b_group(), self.b_ahead()
        groups, steps = _ceil(rn, w), self.stage_k // ki
        nb = min(ahead * w, rn)  # B fragments a step starts with
        metas = frags[rm + nb:rm + nb + rm * steps] if self.g.a_meta is not None else []
        next_metas = frags[rm + nb + rm * steps:] + self.stage_meta(meta_k) if following is not None and metas else []
        readers: dict[int, tuple] = {}

        def read(s: int):  # step s's readers; s == steps: the following stage's first step
            if s not in readers:
                if s == steps:
                    self.add(warp.AsyncWaitOp(self.stages - 2))
                    self.add(gpu.BarrierOp())
                readers[s] = self.stage_reads(stage if s < steps else following, s % steps * ki)
            return readers[s]

        last = steps if following is not None else steps - 1  # the last step read
        a, b = {0: frags[:rm]}, {0: frags[rm:rm + nb]}
        accs = list(accs)
        if not self.interleave:  # the whole next step read before this step's mmas, row by row
            for s in range(steps):
                if s < last:
                    a[s + 1] = [read(s + 1)[0](i) for i in range(rm)]
                    b[s + 1] = [f for g in range(groups) for f in read(s + 1)[1](g * w)]
                for a_h, b_h in self.widened(a[s], b[s]):
                    for i in range(rm):
                        for j in range(rn):
                            accs[i * rn + j] = self.add(warp.MmaOp(a_h[i], b_h[j], accs[i * rn + j],
                                                                   metadata=metas[i * steps + s] if metas else None)).results[0]
            return accs, (a[steps] + b[steps] + next_metas if following is not None else [])
        for s in range(steps):
            for g in range(groups):
                for j in range(g * w, min(g * w + w, rn)):
                    for i in range(rm):
                        accs[i * rn + j] = self.add(warp.MmaOp(a[s][i], b[s][j], accs[i * rn + j],
                                                               metadata=metas[i * steps + s] if metas else None)).results[0]
                        if j == rn - 1 and s < last:
                            a.setdefault(s + 1, []).append(read(s + 1)[0](i))
                s_b, g_b = divmod(s * groups + g + ahead, groups)
                if s_b <= last:
                    b.setdefault(s_b, []).extend(read(s_b)[1](g_b * w))
        return accs, (a[steps] + b[steps] + next_metas if following is not None else [])

    def widened(self, a: list[SSAValue], b: list[SSAValue]):
        """The (A, B) fragments of each mma K step of a read: the read's own, or the two K halves
        of widened 4-bit fragments (`warp.widen`), widened right before their mmas."""
        if not self.widen:
            return [(a, b)]
        a_type = self.frag(warp.Operand.A, _operand_element(self.mma.lhs))
        b_type = self.frag(warp.Operand.B, _operand_element(self.mma.rhs))
        wa = [self.add(warp.WidenOp(x, a_type)).results for x in a]
        wb = [self.add(warp.WidenOp(x, b_type)).results for x in b]
        return [([x[h] for x in wa], [x[h] for x in wb]) for h in (0, 1)]

    def finish_body(self, kernel, new_body, args, roles, arg_of, bz, rows, cols, results, check) -> None:
        """Store D; swap the body in; record the arguments' roles and the launch shape."""
        t = self.t
        rm, rn = t.warp_tile
        store = next(o for o in kernel.walk() if isinstance(o, tile.StoreOp))
        roles[store.dest].append("d")
        window = store.offset_values()
        shape = store.value.type.get_shape()  # type: ignore[union-attr]
        extent = (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])
        for i in range(rm):
            for j in range(rn):
                self.aligned(self.bounded(warp.StoreOp(results[i * rn + j], arg_of[store.dest],
                                                       [bz, rows[i], cols[j]], window, extent),
                                          self.m_exact, self.n_exact))
        self.add(func.ReturnOp())
        new_body.add_ops(self.ops)
        old = kernel.body.blocks[0]
        kernel.body.insert_block_before(new_body, old)
        kernel.body.detach_block(old)
        old.erase(safe_erase=False)
        arg_types = [a.type for a in new_body.args]
        kernel.function_type = func.FunctionType.from_lists(arg_types, [])
        arg_attrs = [
            DictionaryAttr({"warp.role": ArrayAttr(StringAttr(r) for r in roles[a])}) for a in args
        ]
        if check:
            arg_attrs.append(DictionaryAttr({
                "warp.role": ArrayAttr([StringAttr("sparsity_error")]),
                "warp.init": IntegerAttr(NO_ERROR, IntegerType(64)),
            }))
        kernel.arg_attrs = ArrayAttr(arg_attrs)
        kernel.attributes["warp.grid"] = DenseArrayBase.from_list(i64, list(t.grid))
        kernel.attributes["warp.block"] = DenseArrayBase.from_list(i64, [t.threads, 1, 1])
        kernel.attributes["warp.tiling"] = DenseArrayBase.from_list(
            i64, [*t.warps, *t.warp_tile, self.stages, self.stage_k if self.stages else 0]
        )

    def lhs_fragments(self, arg_of, roles, bz, rows, k, error):
        mma, rm = self.mma, self.t.warp_tile[0]
        if isinstance(mma.lhs.owner, tile.SparseFromOp):
            return self.pre_compressed_fragments(arg_of, roles, bz, rows, k)
        load, rounding = self.source(mma.lhs)
        roles[load.source].append("a")
        window, extent = self.window(load)
        ref = arg_of[load.source]
        element = _operand_element(mma.lhs)
        frag = self.frag(warp.Operand.A, element)
        if isinstance(mma.lhs.owner, tile.CompressOp):
            prune = mma.lhs.owner.prune is not None
            meta = self.frag(warp.Operand.META, IntegerType(32))
            ops = [self.bounded(warp.LoadSparseAOp(ref, [bz, rows[i], k], window, extent, frag, meta,
                                                   error=error, prune=prune), self.m_exact, self.k_exact)
                   for i in range(rm)]
            return [o.results[0] for o in ops], [o.results[1] for o in ops]
        return [self.bounded(warp.LoadOp(ref, [bz, rows[i], k], window, extent, frag, rounding),
                             self.m_exact, self.k_exact).results[0] for i in range(rm)], None

    def pre_compressed_fragments(self, arg_of, roles, bz, rows, k):
        """A pre-compressed A (`tile.sparse_from`): the values' fragment is a plain load at
        compressed column k / 2 (the m16n8k32 A is the dense m16n8k16 A of the values), the
        metadata one word per lane (`warp.load_meta`)."""
        op = self.mma.lhs.owner
        values, meta = self.pre_compressed_args(op, roles)
        window, extent = self.pre_window(op)
        half = self.add(arith.DivUIOp(k, self.const(2))).results[0]
        frag = self.frag(warp.Operand.A, _operand_element(self.mma.lhs))
        meta_frag = self.frag(warp.Operand.META, IntegerType(32))
        a = [self.bounded(warp.LoadOp(arg_of[values], [bz, r, half], window, extent, frag), self.m_exact, True).results[0]
             for r in rows]
        e = [self.add(warp.LoadMetaOp(arg_of[meta], [bz, r, k], meta_frag)).results[0] for r in rows]
        return a, e

    @staticmethod
    def pre_compressed_args(op, roles):
        """The values and metadata arguments of a `tile.sparse_from`, with their ABI roles."""
        roles[op.values].append("a_values")
        roles[op.meta].append("a_meta")
        return op.values, op.meta

    @staticmethod
    def pre_window(op) -> tuple[tuple[int, ...], tuple[int, int, int]]:
        """Window and extent of a `tile.sparse_from`'s values: the whole memref (M x Kp/2)."""
        shape = op.values.type.get_shape()
        return (0,) * len(shape), (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])

    def rhs_fragments(self, arg_of, roles, bz, cols, k):
        mma, rn = self.mma, self.t.warp_tile[1]
        load, rounding = self.source(mma.rhs)
        roles[load.source].append("b")
        window, extent = self.window(load)
        frag = self.frag(warp.Operand.B, _operand_element(mma.rhs))
        return [self.bounded(warp.LoadOp(arg_of[load.source], [bz, k, cols[j]], window, extent, frag, rounding),
                             self.k_exact, self.n_exact).results[0] for j in range(rn)]

    def scale_fragments(self, arg_of, roles, bz, rows, cols, k):
        mma = self.mma
        kb = self.add(arith.DivUIOp(k, self.const(mma.block_size))).results[0]
        out = []
        for value, role, name in ((mma.scale_a, warp.Operand.SCALE_A, "scale_a"),
                                  (mma.scale_b, warp.Operand.SCALE_B, "scale_b")):
            load, _ = self.source(value)
            roles[load.source].append(name)
            window, extent = self.window(load)
            frag = self.frag(role, value.type.element_type)  # type: ignore[union-attr]
            if role == warp.Operand.SCALE_A:
                out.append([self.add(warp.LoadScaleOp(arg_of[load.source], [bz, r, kb], window, extent, frag)).results[0] for r in rows])
            else:
                out.append([self.add(warp.LoadScaleOp(arg_of[load.source], [bz, kb, c], window, extent, frag)).results[0] for c in cols])
        return out


def _operand_element(value: SSAValue):
    """Element type of an mma operand as the tile IR hands it over (after its casts)."""
    t = value.type
    assert isinstance(t, tile.TileLike)
    return t.element_type
