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

from tilemma.compiler import configs
from tilemma.compiler.mma_layouts import instruction_layouts
from tilemma.dialects import tile, warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.gemm_kernel import read_kernel
from tilemma.passes.sparse_a import NO_ERROR

STAGES = (2, 3, 4, 5)
DEFAULT_STAGES = 4
MAX_THREADS = 1024  # per CTA, every target
MAX_REGISTERS = 255  # per thread
GRID_LIMITS = (2**31 - 1, 65535, 65535)
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
    (K of one stage, default 32). When none of warps, warp-tile and stages is given, a
    configuration in the tuning cache `tune-cache` (JSON, `compiler/configs.py`) wins."""

    name = "tile-tile-warps"

    warps: str = ""
    warp_tile: str = ""
    stages: int = -1
    stage_k: int = 32
    tune_cache: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps, warp_tile = _pair(self.warps, "warps"), _pair(self.warp_tile, "warp-tile")
        if self.stages not in (-1, 0, *STAGES):
            raise ValueError(f"tile-tile-warps: stages must be -1 (automatic), 0 (no shared memory) or 2..5, got {self.stages}")
        if self.stage_k not in (16, 32, 64, 128):
            raise ValueError(f"tile-tile-warps: stage-k must be 16, 32, 64 or 128, got {self.stage_k}")
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
        if not cache:
            return None
        v = mma.variant.variant
        target = kernel.attributes.get("warp.target")
        shape = mma.acc.type.get_shape()
        batch = shape[0] if len(shape) == 3 else 1
        k = mma.lhs.type.get_shape()[-1]
        key = configs.cache_key(target.sm.data if target else "", v.atype, v.btype, v.ctype,
                                configs.size_class(shape[-2], shape[-1], k, batch))
        return cache.get(key)


def choose_tiling(mma: Operation, variant, m: int, n: int, batch: int,
                  warps: tuple[int, int] | None, warp_tile: tuple[int, int] | None) -> Tiling:
    """The default tiling (or the requested one), checked against the hardware's limits."""
    lays = instruction_layouts(variant)
    mi, ni, ki = lays.warp_shape
    rm, rn = warp_tile or (min(2, _ceil(m, mi)), min(max(1, 32 // ni), _ceil(n, ni)))
    wm, wn = warps or (min(2, _ceil(m, rm * mi)), min(2, _ceil(n, rn * ni)))
    t = Tiling((mi, ni, ki), (rm, rn), (wm, wn), (_ceil(n, wn * rn * ni), _ceil(m, wm * rm * mi), batch))
    if t.threads > MAX_THREADS:
        raise LoweringError(
            mma, f"warps {wm}x{wn} make a CTA of {t.threads} threads; a CTA holds at most "
            f"{MAX_THREADS} (32 warps)",
        )
    regs = rm * rn * lays.c.regs + rm * lays.a.regs + rn * lays.b.regs
    if variant.sparse:
        regs += rm
    if regs > MAX_REGISTERS - 40:
        raise LoweringError(
            mma, f"warp tile {rm}x{rn} holds {regs} fragment registers per thread; with the "
            f"addressing that exceeds the {MAX_REGISTERS} registers a thread can have: use a "
            f"smaller warp tile",
        )
    for axis, (g, limit) in enumerate(zip(t.grid, GRID_LIMITS)):
        if g > limit:
            raise LoweringError(
                mma, f"grid {t.grid} exceeds the CUDA limit of {limit} CTAs in {'xyz'[axis]}",
            )
    return t


ONE_WAVE = 120  # CTAs that keep most of a 132-SM H100 busy
GROUP_M = 8  # CTA rows of tiles per group of the rasterized order (Triton's GROUP_SIZE_M)


def copy_vector(mem) -> int:
    """Bytes per cp.async for an operand: the widest of 16/8/4 that keeps every row of the
    window aligned (0 when even 4 does not)."""
    from math import gcd

    size = mem.bits // 8
    g = gcd(mem.row_stride * size, mem.base * size, 16)
    return g if g >= 4 else 0


def stageable(g, variant) -> str | None:
    """Why a kernel cannot take the staged schedule (None if it can): 16-bit dense m16n8k16
    operands read as stored, rows contiguous and aligned for cp.async."""
    if (variant.m, variant.n, variant.k) != (16, 8, 16) or variant.sparse or variant.block_scale:
        return f"staging covers dense m16n8k16, not {variant.shape}{' sparse' if variant.sparse else ''}"
    if variant.atype not in ("f16", "bf16") or variant.btype != variant.atype:
        return f"staging covers 16-bit (f16, bf16) operands, not {variant.atype} x {variant.btype}"
    for what, mem in (("A", g.a), ("B", g.b)):
        if mem.casts or mem.col_stride != 1:
            return f"{what} must be read as stored, with contiguous rows"
        if not copy_vector(mem):
            return f"{what}'s rows are not 4-byte aligned (row stride {mem.row_stride}, offset {mem.base} elements)"
    if getattr(g.mma, "split_tf32", None) is not None:
        return "3xTF32 is not staged"
    return None


class _Distribute:
    """Rewrites one kernel's body (read with `read_kernel`, which reports what is unsupported)."""

    def __init__(self, kernel: func.FuncOp, warps, warp_tile, stages: int = -1, stage_k: int = 32):
        self.stage_k = stage_k
        self.kernel, self.g = kernel, read_kernel(kernel)
        self.mma = self.g.mma
        self.variant_attr: warp.VariantAttr = self.mma.variant  # type: ignore[assignment]
        self.variant = self.variant_attr.variant
        self.batched = len(self.mma.acc.type.get_shape()) == 3  # type: ignore[union-attr]
        g = self.g
        for what, size in (("M", g.m), ("N", g.n), ("K", g.k)):
            if size >= INDEX_LIMIT:
                raise LoweringError(
                    self.mma, f"{what} = {size}: tiles of 2^31 or more elements along a dimension "
                    f"are not supported (coordinates are 32-bit)",
                )
        why_not = stageable(self.g, self.variant)
        if stages > 0 and why_not:
            raise LoweringError(self.mma, f"stages={stages}: this kernel cannot be staged through shared memory: {why_not}")
        self.stages = 0 if (stages == 0 or why_not) else (stages if stages > 0 else DEFAULT_STAGES)
        if self.stages and warp_tile is None:
            rm, rn = min(4, _ceil(g.m, 16)), min(8, _ceil(g.n, 8))
            wm, wn = warps or (2, 2)
            # Small problems: halve the CTA's rows while that leaves SMs idle (fewer tiles than
            # about one wave of an H100's 132 SMs).
            while rm > 2 and _ceil(g.m, wm * rm * 16) * _ceil(g.n, wn * rn * 8) * g.batch < ONE_WAVE:
                rm //= 2
            warp_tile = (rm, rn)
        self.t = choose_tiling(self.mma, self.variant, g.m, g.n, g.batch, warps, warp_tile)
        if self.stages:
            self.t = Tiling(self.t.instr, self.t.warp_tile, self.t.warps,
                            (self.t.grid[0] * self.t.grid[1], 1, g.batch))
            if self.t.grid[0] > GRID_LIMITS[0]:
                raise LoweringError(self.mma, f"{self.t.grid[0]} CTAs exceed the CUDA limit of {GRID_LIMITS[0]}")
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
                self.bounded(warp.LoadOp(arg_of[load.source], [bz, rows[i], cols[j]], window, extent, acc_frag),
                             self.m_exact, self.n_exact).results[0]
                for i in range(rm) for j in range(rn)
            ]

        if self.stages:
            loop = self.staged_loop(arg_of, roles, bz, accs, acc_frag)
        else:
            loop = self.simple_loop(arg_of, roles, bz, rows, cols, accs, acc_frag, error, zero)
        self.finish_body(kernel, new_body, args, roles, arg_of, bz, rows, cols, loop, check)

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
        """The K loop through a ring of shared-memory stages: the CTA copies A (BM x BK) and B
        (BK x BN) tiles with cp.async, S-1 stages ahead of the stage the warps multiply
        (prologue, then one stage per iteration; each iteration waits for its stage, syncs,
        refills the stage freed by the previous iteration and reads its own with ldmatrix)."""
        g, t, S = self.g, self.t, self.stages
        rm, rn = t.warp_tile
        bm, bn = t.cta_tile
        bk = self.stage_k
        element = g.a.stored
        elem_type = tile.element_type(element)
        shared = [MemRefType(elem_type, [S, bm, bk], memory_space=IntegerAttr(warp.SHARED, i64)),
                  MemRefType(elem_type, [S, bk, bn], memory_space=IntegerAttr(warp.SHARED, i64))]
        s_a, s_b = (self.add(memref.AllocOp([], [], ty, IntegerAttr(128, i64))).results[0] for ty in shared)
        (load_a, _), (load_b, _) = self.source(self.mma.lhs), self.source(self.mma.rhs)
        roles[load_a.source].append("a")
        roles[load_b.source].append("b")
        win_a, ext_a = self.window(load_a)
        win_b, ext_b = self.window(load_b)

        def copy(k: SSAValue, stage: SSAValue) -> None:
            self.add(warp.CopyAsyncOp(arg_of[load_a.source], [bz, self.cta_row, k], s_a, stage,
                                      win_a, ext_a, t.threads, copy_vector(g.a)))
            self.add(warp.CopyAsyncOp(arg_of[load_b.source], [bz, k, self.cta_col], s_b, stage,
                                      win_b, ext_b, t.threads, copy_vector(g.b)))
            self.add(warp.AsyncCommitOp())

        for s in range(S - 1):
            copy(self.const(s * bk), self.const(s))
        steps = _ceil(g.k, bk)
        body = Block(arg_types=[IndexType()] + [acc_frag] * len(accs))
        kt, iters = body.args[0], list(body.args[1:])
        outer, self.ops = self.ops, []
        self.add(warp.AsyncWaitOp(S - 2))
        self.add(gpu.BarrierOp())
        ahead = self.plus(kt, S - 1)
        copy(self.add(arith.MuliOp(ahead, self.const(bk))).results[0],
             self.add(arith.RemUIOp(ahead, self.const(S))).results[0])
        stage = self.add(arith.RemUIOp(kt, self.const(S))).results[0]
        a_type, b_type = (self.frag(r, elem_type) for r in (warp.Operand.A, warp.Operand.B))
        zero = self.const(0)
        b_cols = [self.plus(self.warp_col, j * 8) for j in range(0, rn, 2)]
        for kk in range(0, bk, 16):
            at = self.const(kk)
            a = [self.add(warp.LdMatrixOp(s_a, [stage, self.warp_row, at], (i * 16, 0), a_type)).results[0]
                 for i in range(rm)]
            b = [f for j in range(0, rn, 2)  # .x4.trans: fragments j and j + 1 at once
                 for f in self.add(warp.LdMatrixOp(s_b, [stage, zero, b_cols[j // 2]], (kk, 0), b_type,
                                                   min(2, rn - j))).results]
            iters = [self.add(warp.MmaOp(a[i], b[j], iters[i * rn + j])).results[0]
                     for i in range(rm) for j in range(rn)]
        self.add(scf.YieldOp(*iters))
        body.add_ops(self.ops)
        self.ops = outer
        loop = self.add(scf.ForOp(self.const(0), self.const(steps), self.const(1), accs, body))
        self.add(warp.AsyncWaitOp(0))  # the copies of stages past K land before the CTA ends
        return loop

    def finish_body(self, kernel, new_body, args, roles, arg_of, bz, rows, cols, loop, check) -> None:
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
                self.bounded(warp.StoreOp(loop.results[i * rn + j], arg_of[store.dest],
                                          [bz, rows[i], cols[j]], window, extent), self.m_exact, self.n_exact)
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
