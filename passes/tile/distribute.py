"""`tile-distribute`: rewrites each planned kernel from `tile` ops into the simple warp-level loop.

A warp computes a warp tile of RM x RN instructions; a CTA holds WM x WN warps; the grid covers
the M x N tile (rounded up: fragment accesses are predicated at the tile's edge) and the batch,
all as `#warp.schedule` (`tile-plan`) says. The kernel becomes: thread and block ids (`gpu`),
each warp's origin (`arith` on `index`; CTAs in groups of `group_m` tile rows where the schedule
asks), the accumulator fragments (`warp.load` of C or `warp.constant`), an `scf.for` over K, one
instruction's K an iteration, carrying them, whose body loads the A and B fragments from global
memory (`warp.load`, `warp.load_sparse_a`, `warp.load_meta`, `warp.load_scale`) and multiplies
(`warp.mma`), and the stores of D (`warp.store`). Where the schedule splits K, grid z is batch x
split: the loop covers the split's part of K from zero, `warp.split_k_publish` hands the partials
to the tile's last CTA (appending the workspace and counter arguments it needs) and
`warp.split_k_sum` adds them and C, which is loaded before the publish, or between the two where
a thread could not hold it beside the partials. Where the schedule
widens 4-bit operands, the loop multiplies their stored m16n8k64 fragments (`warp-widen-int4`
turns each of those mmas into the selected 8-bit ones). Staging through shared memory is
`warp-stage-shared`'s.

The launch shape and each argument's role are recorded on the `func.func` (`warp.grid`,
`warp.block`, `warp.role` argument attributes); a checked sparse A gets an extra argument, the
sparsity error word.
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

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects import tile, warp
from tilemma.dialects.schedule import Schedule, ScheduleAttr
from tilemma.passes.errors import LoweringError, replaced
from tilemma.passes.tile.gemm_kernel import DYNAMIC, planning_view, read_kernel
from tilemma.passes.tile.plan import ceil_div, kernel_target, tiling_of
from tilemma.passes.tile.transpose_first import workspace_roles
from tilemma.passes.warp_to_ptx.sparse_a import NO_ERROR

ERROR_WORD = MemRefType(IntegerType(32, Signedness.UNSIGNED), [1])


# registers a thread keeps beside a split tile's partial sums and C (`_Kernel.c_after_publish`). H200, C
# loaded after the publish against before it (benchmarks/results/h200-2026-11-28j-split-c-*.csv): the
# 128 x 256 tf32 warpgroup CTAs (128 accumulator registers a thread) spilled 770-784 bytes with it before,
# none after, TFLOP/s 156.9-204.1 after against 157.0-201.6 (a wash to +2.5%); with it after everywhere,
# f16 16x4096x4096 (32 a thread) ran 51.8 against 60.4 (its loads no longer overlap the publish), s8
# 64x4096x4096 (64) 234 against 228; with this rule those are before again (60.0 / 60.4, 231 / 232)
SPLIT_C_HEADROOM = 64


class IndexBuilder:
    """Appends ops to a list: the small builders the distributing and staging passes share."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def add(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def const(self, value: int) -> SSAValue:
        return self.add(arith.ConstantOp.from_int_and_width(value, IndexType())).results[0]

    def affine(self, base: SSAValue, scale: int, offset: SSAValue | None) -> SSAValue:
        """base * scale (+ offset)."""
        v = self.add(arith.MuliOp(base, self.const(scale))).results[0] if scale != 1 else base
        return self.add(arith.AddiOp(v, offset)).results[0] if offset is not None else v

    def plus(self, base: SSAValue, offset: int) -> SSAValue:
        return self.add(arith.AddiOp(base, self.const(offset))).results[0] if offset else base

    def bounded(self, op, rows: bool, cols: bool):
        """Add a window op, marking the dimensions that cannot leave the tile."""
        op.set_in_bounds(rows, cols)
        return self.add(op)


def tile_window(op: tile.LoadOp | tile.StoreOp) -> tuple[tuple[int, ...], tuple[int, int, int]]:
    """(window, extent) of a tile.load or tile.store: its memref offsets, and the (batch, rows,
    cols) of the tile it moves - what the warp window ops take."""
    value = op.result if isinstance(op, tile.LoadOp) else op.value
    shape = value.type.get_shape()  # type: ignore[union-attr]
    return op.offset_values(), (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])


def operand_element(value: SSAValue):
    """Element type of an mma operand as the tile IR hands it over (after its casts)."""
    t = value.type
    assert isinstance(t, tile.TileLike)
    return t.element_type


class _Kernel(IndexBuilder):
    """Rewrites one kernel's body (read with `read_kernel`, which reports what is unsupported)."""

    def __init__(self, kernel: func.FuncOp, s: Schedule):
        super().__init__()
        self.kernel, self.g, self.s = kernel, read_kernel(kernel), s
        self.mma = self.g.mma
        self.variant_attr: warp.VariantAttr = self.mma.variant  # type: ignore[assignment]
        self.variant = self.variant_attr.variant
        self.t = tiling_of(self.variant, planning_view(self.g, 1), s)  # a `?` size's grid: `launch_grid`
        if s.widen is not None:  # the loop multiplies the stored 4-bit fragments (m16n8k64)
            native = dataclasses.replace(self.variant, k=64, atype=ELEMENTS[self.g.a.stored].ptx,
                                         btype=ELEMENTS[self.g.b.stored].ptx)
            self.variant_attr, self.variant = warp.VariantAttr(native), native
        bm, bn = self.t.cta_tile
        g = self.g
        mm, mn, mk = tile.size_multiple(kernel)
        self.m_exact, self.n_exact = tile.tiles_exactly(g.m, bm, mm), tile.tiles_exactly(g.n, bn, mn)
        self.ki = instruction_layouts(self.variant).warp_shape[2]  # K of one loop iteration
        self.k_exact = tile.tiles_exactly(g.k, self.ki, mk)
        self.sizes: dict[str, SSAValue] = {}  # symbol -> its `memref.dim` in the new body
        self.new_args: list[SSAValue] = []

    def size(self, symbol: str, static: int) -> SSAValue:
        """A size as an index value: the constant, or for `?` the `memref.dim` of the first
        argument dimension that is `symbol` (the launch checks that all of them agree)."""
        if static != DYNAMIC:
            return self.const(static)
        if symbol not in self.sizes:
            arg, dim = next((i, row.index(symbol)) for i, row in enumerate(self.g.sizes) if symbol in row)
            self.sizes[symbol] = self.add(memref.DimOp(self.new_args[arg], self.const(dim))).results[0]
        return self.sizes[symbol]

    def tiles(self, symbol: str, static: int, tile_size: int) -> SSAValue:
        """ceil(size / tile_size) as an index value."""
        if static != DYNAMIC:
            return self.const(ceil_div(static, tile_size))
        v = self.plus(self.size(symbol, static), tile_size - 1)
        return self.add(arith.DivUIOp(v, self.const(tile_size))).results[0]

    def aligned(self, op):
        """Mark an accumulator access: its column index (a sum of multiples of the instruction's
        N) is a multiple of N."""
        op.col_align = IntegerAttr(self.t.instr[1], i64)
        return op

    def source(self, value: SSAValue) -> tuple[tile.LoadOp, str | None]:
        """The tile.load an operand starts from (through casts and a compress), and the rounding
        of an f32 -> tf32 cast on the way."""
        owner, rounding = value.owner, None
        if isinstance(owner, tile.CompressOp):
            owner = owner.source.owner
        while isinstance(owner, tile.CastOp):
            rule = tile.CAST_RULES[(owner.source.type.element, owner.result.type.element)]  # type: ignore[union-attr]
            if rule.roundings:  # the cast's rounding, else its rule's default (rna for tf32)
                rounding = str(owner.rounding.data) if owner.rounding is not None else rule.default
            owner = owner.source.owner
        assert isinstance(owner, tile.LoadOp)  # read_kernel checked
        return owner, rounding

    def window(self, load: tile.LoadOp) -> tuple[tuple[int, ...], tuple[int, int, int]]:
        return tile_window(load)

    def frag(self, role: warp.Operand, element) -> warp.FragType:
        return warp.FragType(role, element, self.variant_attr)

    def operand_frag(self, role: warp.Operand, value: SSAValue, mem) -> warp.FragType:
        """The fragment type of an A or B operand: as the tile IR hands it over, or the stored
        4-bit one where the schedule widens."""
        element = tile.element_type(mem.stored) if self.s.widen is not None else operand_element(value)
        return self.frag(role, element)

    def run(self) -> None:
        g, t, mma = self.g, self.t, self.mma
        kernel = self.kernel
        args = list(kernel.body.block.args)
        roles: dict[SSAValue, list[str]] = {a: [] for a in args}
        new_body = Block(arg_types=[a.type for a in args])
        arg_of = dict(zip(args, new_body.args))
        for old_arg, new_arg in arg_of.items():
            new_arg.name_hint = old_arg.name_hint
        self.new_args = list(new_body.args)
        for op in kernel.body.block.ops:  # transposed views of arguments: read and written as they are
            if isinstance(op, tile.TransposeViewOp):
                arg_of[op.result] = self.add(tile.TransposeViewOp(arg_of[op.source])).result
                roles[op.result] = roles[op.source]  # (the same list: the argument's roles)

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
        self.split = None
        if self.s.split_k > 1:  # grid z is batch x split of K; the tile's number (batch, row, column) counts its CTAs
            splits = self.const(self.s.split_k)
            self.split = self.add(arith.RemUIOp(bz, splits)).results[0]
            bz = self.add(arith.DivUIOp(bz, splits)).results[0]
            row = self.affine(bz, t.grid[1], by)
            self.tile_id = self.add(arith.AddiOp(self.affine(row, t.grid[0], None), bx)).results[0]
        wid = self.add(arith.DivUIOp(tid, self.const(32))).results[0]
        warp_m = self.add(arith.RemUIOp(wid, self.const(wm))).results[0]
        warp_n = self.add(arith.DivUIOp(wid, self.const(wm))).results[0]
        if self.s.group_m:  # CTAs in groups of group_m rows of tiles, so that neighbours share L2
            by, bx = self.rasterize(bx, self.tiles("M", g.m, bm), self.tiles("N", g.n, bn))
        cta_row, cta_col = self.affine(by, bm, None), self.affine(bx, bn, None)
        warp_row, warp_col = self.affine(warp_m, rm * mi, None), self.affine(warp_n, rn * ni, None)
        row0 = self.add(arith.AddiOp(cta_row, warp_row)).results[0]
        col0 = self.add(arith.AddiOp(cta_col, warp_col)).results[0]
        rows = [self.plus(row0, i * mi) for i in range(rm)]
        cols = [self.plus(col0, j * ni) for j in range(rn)]
        zero = self.const(0)

        acc_type = mma.acc.type.element_type  # type: ignore[union-attr]
        acc_frag = self.frag(warp.Operand.ACC, acc_type)

        def initial(value) -> list[SSAValue]:
            """C's fragments: the splat of its constant `value`, or its loads."""
            if value is not None:
                attr = (IntegerAttr(int(value), i64) if isinstance(acc_type, IntegerType)
                        else FloatAttr(float(value), f64))
                return [self.add(warp.ConstantOp(attr, acc_frag)).results[0]] * (rm * rn)
            load, _ = self.source(mma.acc)
            roles[load.source].append("c")
            window, extent = self.window(load)
            return [
                self.aligned(self.bounded(warp.LoadOp(arg_of[load.source], [bz, rows[i], cols[j]], window, extent,
                                                      acc_frag), self.m_exact, self.n_exact)).results[0]
                for i in range(rm) for j in range(rn)
            ]

        c_value = g.c if isinstance(mma.acc.owner, tile.ConstantOp) else None
        if self.split is None:
            accs = initial(c_value)
            results = list(self.simple_loop(arg_of, roles, bz, rows, cols, accs, acc_frag, error, zero).results)
        else:  # each split multiplies from zero; C joins the sum of the partials
            partials = list(self.simple_loop(arg_of, roles, bz, rows, cols, initial(0), acc_frag, error, zero).results)
            if self.c_after_publish(partials):
                workspace = self.split_publish(new_body, partials, acc_type)
                init = initial(c_value)
            else:
                init = initial(c_value)
                workspace = self.split_publish(new_body, partials, acc_type)
            results = list(self.add(warp.SplitKSumOp(init, self.tile_id, workspace, self.s.split_k)).results)
        self.finish_body(kernel, new_body, args, roles, arg_of, bz, rows, cols, results, check)

    def simple_loop(self, arg_of, roles, bz, rows, cols, accs, acc_frag, error, zero):
        """The K loop with fragments straight from global memory, one instruction's K per
        iteration (dense A columns for mma.sp)."""
        g, mma = self.g, self.mma
        rm, rn = self.t.warp_tile
        ki = self.ki
        k_end = self.tiles("K", g.k, ki)  # steps, times the step below
        k_end = self.add(arith.MuliOp(k_end, self.const(ki))).results[0] if g.k == DYNAMIC else self.const(ceil_div(g.k, ki) * ki)
        k_base = None
        if self.split is not None:  # this split's part of K: split_chunk from its start (the last: the rest)
            chunk = self.s.split_chunk
            k_base = self.affine(self.split, chunk, None)
            left = self.add(arith.SubiOp(k_end, k_base)).results[0]
            k_end = self.add(arith.MinUIOp(left, self.const(chunk))).results[0]
        body = Block(arg_types=[IndexType()] + [acc_frag] * len(accs))
        k, iters = body.args[0], list(body.args[1:])
        outer, self.ops = self.ops, []
        if k_base is not None:  # loads at base + k (`warp-stage-shared` reads the base from this form)
            k = self.add(arith.AddiOp(k_base, k)).results[0]
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
        return self.add(scf.ForOp(zero, k_end, self.const(ki), accs, body))

    def c_after_publish(self, partials: list[SSAValue]) -> bool:
        """Whether C is loaded after `warp.split_k_publish` (by the tile's last CTA alone, once
        its partials are stored) rather than before it: where a thread holding both would keep
        fewer than `SPLIT_C_HEADROOM` of the registers it may have. Before it, C's loads overlap
        the publish's stores and fences; after it, they add a round trip to the last CTA."""
        held = sum(p.type.layout().b32_registers for p in partials)  # type: ignore[attr-defined]
        return 2 * held > kernel_target(self.kernel).limits.launch_registers(self.t.threads) - SPLIT_C_HEADROOM

    def split_publish(self, new_body: Block, partials: list[SSAValue], acc_type) -> SSAValue:
        """`warp.split_k_publish` of the tile's partial sums, with the two arguments it needs
        appended to the kernel: the workspace (one word, or double, per split, accumulator
        register and thread of every tile), which it returns for `warp.split_k_sum`, and a counter
        word per tile (0 before a launch, and after it)."""
        t, s = self.t, self.s
        tiles = t.tiles
        regs = len(partials) * instruction_layouts(self.variant).c.regs
        workspace = new_body.insert_arg(MemRefType(acc_type, [tiles * s.split_k * regs * t.threads]),
                                        len(new_body.args))
        workspace.name_hint = "split_workspace"
        counters = new_body.insert_arg(MemRefType(IntegerType(32, Signedness.UNSIGNED), [tiles]), len(new_body.args))
        counters.name_hint = "split_counters"
        self.add(warp.SplitKPublishOp(partials, self.split, self.tile_id, workspace, counters, s.split_k))
        return workspace

    def rasterize(self, pid, tiles_m: SSAValue, tiles_n: SSAValue):
        """(tile row, tile col) of CTA `pid` when CTAs run in groups of `group_m` tile rows."""
        group_m = self.s.group_m
        width = self.add(arith.MuliOp(tiles_n, self.const(group_m))).results[0]
        group = self.add(arith.DivUIOp(pid, width)).results[0]
        first = self.add(arith.MuliOp(group, self.const(group_m))).results[0]
        left = self.add(arith.SubiOp(tiles_m, first)).results[0]
        size = self.add(arith.MinUIOp(left, self.const(group_m))).results[0]
        within = self.add(arith.RemUIOp(pid, width)).results[0]
        row = self.add(arith.AddiOp(first, self.add(arith.RemUIOp(within, size)).results[0])).results[0]
        col = self.add(arith.DivUIOp(within, size)).results[0]
        return row, col

    def finish_body(self, kernel, new_body, args, roles, arg_of, bz, rows, cols, results, check) -> None:
        """Hand the accumulators to the epilogue as `warp.distributed` and carry the tile ops
        after the mma (the epilogue and the stores) over unchanged: `tile-distribute-epilogue`
        distributes them. Swap the body in; record the arguments' roles and the launch shape."""
        t, g = self.t, self.g
        dist = self.add(warp.DistributedOp(
            results, bz, rows, cols, (self.m_exact, self.n_exact), t.instr[1],
            self.mma.results[0].type)).results[0]
        mapping: dict[SSAValue, SSAValue] = {**arg_of, self.mma.results[0]: dist}
        carried = {*g.epilogue, *(s for s, _ in g.outputs)}
        for op in kernel.body.block.ops:
            if op in carried:
                new = self.add(op.clone(value_mapper=mapping))
                for old_op, new_op in zip(op.walk(), new.walk()):
                    replaced(old_op, new_op)
        for store, _ in g.outputs:
            roles[store.dest].append("d")
        for op, _ in g.inputs:
            roles[op.operands[0]].append("epilogue")
        self.add(func.ReturnOp())
        new_body.add_ops(self.ops)
        old = kernel.body.blocks[0]
        kernel.body.insert_block_before(new_body, old)
        kernel.body.detach_block(old)
        old.erase(safe_erase=False)
        arg_types = [a.type for a in new_body.args]
        kernel.function_type = func.FunctionType.from_lists(arg_types, [])
        workspace_roles(kernel, args, roles)
        arg_attrs = [
            DictionaryAttr({"warp.role": ArrayAttr(StringAttr(r) for r in roles[a])}) for a in args
        ]
        if g.dynamic:
            arg_attrs = [DictionaryAttr({**d.data, "warp.sizes": ArrayAttr(StringAttr(x) for x in sizes),
                                         "warp.strides": ArrayAttr(StringAttr(x) for x in strides)})
                         for d, sizes, strides in zip(arg_attrs, g.sizes, g.strides)]
        if check:
            arg_attrs.append(DictionaryAttr({
                "warp.role": ArrayAttr([StringAttr("sparsity_error")]),
                "warp.init": IntegerAttr(NO_ERROR, IntegerType(64)),
            }))
        if self.split is not None:
            arg_attrs += [DictionaryAttr({"warp.role": ArrayAttr([StringAttr("split_workspace")])}),
                          DictionaryAttr({"warp.role": ArrayAttr([StringAttr("split_counters")]),
                                          "warp.init": IntegerAttr(0, IntegerType(64))})]
        kernel.arg_attrs = ArrayAttr(arg_attrs)
        grid, grid_sizes = launch_grid(g, self.s, t)
        if self.split is not None:
            grid = (grid[0], grid[1], grid[2] * self.s.split_k)
        kernel.attributes["warp.grid"] = DenseArrayBase.from_list(i64, list(grid))
        if grid_sizes is not None:
            kernel.attributes["warp.grid_sizes"] = grid_sizes

        # a warp-specialized kernel's producer warps after the computing ones (`Schedule.producers`)
        kernel.attributes["warp.block"] = DenseArrayBase.from_list(i64, [t.threads + 32 * self.s.producers, 1, 1])

    def lhs_fragments(self, arg_of, roles, bz, rows, k, error):
        mma, rm = self.mma, self.t.warp_tile[0]
        if isinstance(mma.lhs.owner, tile.SparseFromOp):
            return self.pre_compressed_fragments(arg_of, roles, bz, rows, k)
        load, rounding = self.source(mma.lhs)
        roles[load.source].append("a")
        window, extent = self.window(load)
        ref = arg_of[load.source]
        frag = self.operand_frag(warp.Operand.A, mma.lhs, self.g.a)
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
        values, meta = pre_compressed_args(op, roles)
        window, extent = pre_window(op)
        half = self.add(arith.DivUIOp(k, self.const(2))).results[0]
        frag = self.frag(warp.Operand.A, operand_element(self.mma.lhs))
        meta_frag = self.frag(warp.Operand.META, IntegerType(32))
        a = [self.bounded(warp.LoadOp(arg_of[values], [bz, r, half], window, extent, frag), self.m_exact, True).results[0]
             for r in rows]
        e = [self.add(warp.LoadMetaOp(arg_of[meta], [bz, r, k], meta_frag)).results[0] for r in rows]
        return a, e

    def rhs_fragments(self, arg_of, roles, bz, cols, k):
        mma, rn = self.mma, self.t.warp_tile[1]
        load, rounding = self.source(mma.rhs)
        roles[load.source].append("b")
        window, extent = self.window(load)
        frag = self.operand_frag(warp.Operand.B, mma.rhs, self.g.b)
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


def launch_grid(g, s: Schedule, t) -> tuple[tuple[int, ...], ArrayAttr | None]:
    """The grid, and where a size is `?` what each axis is at launch (`warp.grid_sizes`: per axis,
    [count, [symbol, tile], ...]: count times ceil(size / tile) for each factor; `?` in the grid
    marks the axes with factors)."""
    if g.m != DYNAMIC and g.n != DYNAMIC:
        return t.grid, None
    bm, bn = t.cta_tile
    cols = (1, [("N", bn)]) if g.n == DYNAMIC else (ceil_div(g.n, bn), [])
    rows = (1, [("M", bm)]) if g.m == DYNAMIC else (ceil_div(g.m, bm), [])
    axes = [(cols[0] * rows[0], cols[1] + rows[1]), (1, []), (g.batch, [])] if s.group_m else \
        [cols, rows, (g.batch, [])]
    grid = tuple(DYNAMIC if factors else count for count, factors in axes)
    attr = ArrayAttr(ArrayAttr([IntegerAttr(count, i64), *(ArrayAttr([StringAttr(sym), IntegerAttr(tile_size, i64)])
                                                          for sym, tile_size in factors)])
                     for count, factors in axes)
    return grid, attr


def pre_compressed_args(op, roles):
    """The values and metadata arguments of a `tile.sparse_from`, with their ABI roles."""
    roles[op.values].append("a_values")
    roles[op.meta].append("a_meta")
    return op.values, op.meta


def pre_window(op) -> tuple[tuple[int, ...], tuple[int, int, int]]:
    """Window and extent of a `tile.sparse_from`'s values: the whole memref (M x Kp/2)."""
    shape = op.values.type.get_shape()
    return (0,) * len(shape), (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])


@dataclass(frozen=True)
class TileDistribute(ModulePass):
    """Distribute every kernel that `tile-plan` scheduled (`warp.schedule`) onto CTAs and warps."""

    name = "tile-distribute"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            mmas = [o for o in kernel.walk() if isinstance(o, tile.MMA_OPS)]
            if not mmas:
                continue
            attr = kernel.attributes.get("warp.schedule")
            if not isinstance(attr, ScheduleAttr):
                raise LoweringError(mmas[0], "run tile-plan before tile-distribute (no warp.schedule on the kernel)")
            _Kernel(kernel, attr.schedule).run()
