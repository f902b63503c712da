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
from xdsl.dialects import arith, func, gpu, scf
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
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from tilemma.compiler.mma_layouts import instruction_layouts
from tilemma.compiler import sparse_fragments
from tilemma.dialects import tile, warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.gemm_kernel import read_kernel
from tilemma.passes.sparse_a import NO_ERROR

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
    """Options: `warps` (WMxWN warps per CTA, default up to 2x2) and `warp-tile` (RMxRN
    instructions per warp, default up to 2 x (32 / instruction N)), both clamped to the problem."""

    name = "tile-tile-warps"

    warps: str = ""
    warp_tile: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps, warp_tile = _pair(self.warps, "warps"), _pair(self.warp_tile, "warp-tile")
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            mmas = [o for o in kernel.walk() if isinstance(o, tile.MMA_OPS)]
            if not mmas:
                continue
            if any(m.variant is None for m in mmas):
                raise LoweringError(mmas[0], "run tile-select-mma before tile-tile-warps")
            _Distribute(kernel, warps, warp_tile).run()


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


class _Distribute:
    """Rewrites one kernel's body (read with `read_kernel`, which reports what is unsupported)."""

    def __init__(self, kernel: func.FuncOp, warps, warp_tile):
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
        self.t = choose_tiling(self.mma, self.variant, g.m, g.n, g.batch, warps, warp_tile)
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
                rounding = owner.rounding.data
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
        g, t, v, mma = self.g, self.t, self.variant, self.mma
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
        row0 = self.affine(by, bm, self.affine(warp_m, rm * mi, None))
        col0 = self.affine(bx, bn, self.affine(warp_n, rn * ni, None))
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

        # The K loop: one instruction's K per iteration (dense A columns for mma.sp).
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
        loop = self.add(scf.ForOp(zero, self.const(steps * ki), self.const(ki), accs, body))

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

        # Swap the body; record roles and the launch shape.
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
            i64, [*t.warps, *t.warp_tile]
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
