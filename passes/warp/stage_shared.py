"""`warp-stage-shared`: the K loop through a ring of shared-memory stages, not yet pipelined.

Where `#warp.schedule` has `stages` S > 0, the simple K loop of `tile-distribute` (fragments
loaded from global memory one instruction's K at a time) becomes a loop over stages of
`stage_k` elements of K: the CTA copies its A (BM x BK, or BK x BM for an M-major A) and B
(BK x BN, or BN x BK for a K-major B) tiles into stage `kt % S` of two shared buffers
(`memref<S x R x C, 3>`) with `warp.copy_async` (skipped past K by an `scf.if`; zero-filled at a
ragged edge) - or, for an operand `#warp.schedule` fills (an 8-bit M-major A or N-major B), with
`warp.fill_load` + `warp.fill_store` into a K-major stage -, commits the group, waits for it
(`warp.async_wait`, whose token every read of the stage takes) and meets at a barrier; then each
warp reads its fragments from the stage (`warp.ldmatrix`, or `warp.load_shared` where a register
holds one element: f64, tf32 stored across its K rows) and multiplies them, one K step after
another. A pre-compressed A's metadata is staged with its values (`warp.copy_meta_async` into a
third ring, each warp's words one `warp.load_meta_shared` per instruction row and stage). The
ring is ready for `warp-pipeline`, which issues the copies S - 1 stages ahead; on its own the loop
is correct and waits for each stage right after copying it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core.memref_layout import DYNAMIC, symbolic_layout
from tilemma.compiler.layouts import sparse_format
from tilemma.dialects import tile, warp
from tilemma.dialects.schedule import Schedule, ScheduleAttr
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.distribute import IndexBuilder
from tilemma.passes.tile.gemm_kernel import planning_stride
from tilemma.passes.tile.plan import SHARED_LOAD_SHAPES, ceil_div, column_major, copy_vector
from tilemma.passes.warp.index_facts import multiple_of


@dataclass(frozen=True)
class MemView:
    """What staging needs of an operand's memref window: its stored element, bits and strides."""

    stored: str
    bits: int
    row_stride: int
    col_stride: int
    base: int

    @classmethod
    def of(cls, ref: MemRefType, window, multiple: int = 1) -> MemView:
        """A `?` stride counts as `planning_stride(multiple)` (`tile.stride_multiple`): its
        alignment, and never contiguous."""
        layout = symbolic_layout(ref)
        strides = [planning_stride(multiple) if s == DYNAMIC else s for s in layout.strides]
        stored = tile.element_name(ref.element_type)
        bits = ELEMENTS[stored].storage_bits
        base = layout.offset + sum(o * s for o, s in zip(window, strides) if o)
        return cls(stored, bits, strides[-2], strides[-1], base)


def k_loop(kernel: func.FuncOp) -> scf.ForOp:
    """The kernel's K loop: the `scf.for` of its body that multiplies (`tile-distribute` writes one;
    staged for warpgroups, its `warp.wgmma`s)."""
    loops = [o for o in kernel.body.block.ops if isinstance(o, scf.ForOp)
             and any(isinstance(x, warp.MmaOp | warp.WgmmaOp) for x in o.walk())]
    if len(loops) != 1:
        raise LoweringError(kernel, "expected one K loop (an scf.for with warp.mma, as tile-distribute writes it)")
    return loops[0]


def origin(load: warp.LoadOp, dim: int) -> tuple[SSAValue, SSAValue]:
    """(CTA origin, warp offset) of the first row (dim 1) or column (dim 2) a warp's fragment
    load reads: `tile-distribute` computes it as one `arith.addi` of the two."""
    add = load.indices[dim].owner
    if not isinstance(add, arith.AddiOp):
        raise LoweringError(load, "warp-stage-shared: expected the warp's origin as cta + warp offset "
                            "(the form tile-distribute writes)")
    return add.lhs, add.rhs


class _Stage(IndexBuilder):
    """Rewrites one kernel's K loop into the staged loop."""

    def __init__(self, kernel: func.FuncOp, s: Schedule):
        super().__init__()
        self.kernel, self.s = kernel, s
        self.loop = k_loop(kernel)
        body = self.loop.body.block
        self.mmas = [o for o in body.ops if isinstance(o, warp.MmaOp)]
        rm, rn = s.warp_tile
        if len(self.mmas) != rm * rn:
            raise LoweringError(self.mmas[0], f"expected {rm}x{rn} mmas in the K loop (the schedule's warp tile)")
        self.a_loads = [self.mmas[i * rn].a.owner for i in range(rm)]
        self.b_loads = [self.mmas[j].b.owner for j in range(rn)]
        self.metas = [self.mmas[i * rn].metadata.owner for i in range(rm)] if self.mmas[0].metadata else []
        for load in self.a_loads + self.b_loads:
            if not isinstance(load, warp.LoadOp):
                raise LoweringError(load, "warp-stage-shared stages fragments that warp.load reads from global memory")
        self.pre = bool(self.metas)
        if self.pre and not all(isinstance(m, warp.LoadMetaOp) for m in self.metas):
            raise LoweringError(self.mmas[0], "warp-stage-shared stages a sparse A only when its metadata is loaded (a pre-compressed A)")
        a0, b0 = self.a_loads[0], self.b_loads[0]
        self.bz = a0.indices[0]
        self.cta_row, self.warp_row = origin(a0, 1)
        self.cta_col, self.warp_col = origin(b0, 2)
        multiple = tile.stride_multiple(kernel)
        self.a = MemView.of(a0.ref.type, a0.window_values(), multiple)
        self.b = MemView.of(b0.ref.type, b0.window_values(), multiple)
        self.a_ref, self.b_ref = a0.ref, b0.ref
        # operands staged by the transposing fill (`#warp.schedule` fill): their stage is K-major
        # whatever their memory order, as a K-major A's or B's
        self.fill_a, self.fill_b = "a" in s.fill, "b" in s.fill
        # ... and those gathered element by element (`#warp.schedule` gather): staged as stored;
        # either way not copied by cp.async
        self.through_a, self.through_b = self.fill_a or "a" in s.gather, self.fill_b or "b" in s.gather
        self.a_m_major = column_major(self.a) and not self.fill_a
        # an 8-bit N-major B copied as stored into a ring of its own and written K-major from there
        # (`#warp.schedule` transpose, `warp.transpose_stage`): the warpgroups read it K-major
        self.transpose_b = "b" in s.transpose
        self.b_k_major = column_major(self.b) or self.fill_b or self.transpose_b
        # an 8-bit M-major A the warpgroups take from registers: its stage as stored (K x M), each
        # k32 step's fragments read by byte pairs (`#warp.schedule` pair_bytes "a" with wgmma)
        self.a_registers = s.mma == "wgmma" and "a" in s.pair_bytes
        # bytes a cp.async of A's and of B's stage copies (their runs' alignment), which the
        # warpgroups' in-place rounding follows chunk for chunk
        self.a_vector = copy_vector(self.a, self.a_m_major)
        self.b_vector = copy_vector(self.b, self.b_k_major and not self.transpose_b)
        v = self.mmas[0].a.type.variant
        self.variant = v
        # one element per register (f64; tf32 stored across its fragments' K rows): warp.load_shared
        shared_load = (v.m, v.n, v.k, v.atype) in SHARED_LOAD_SHAPES
        self.a_shared = shared_load or (self.a.bits == 32 and self.a_m_major)
        self.b_shared = shared_load or (self.b.bits == 32 and not self.b_k_major)
        # tf32 read across its K rows: a warp's columns start on a 128-byte line (its rows' or
        # columns' count x 4 bytes), so a value's column offset is an XOR of its row's address
        # (`xor_columns`: fewer live address registers, what lets the 4x8 warp tiles fit)
        self.xor_a = self.a_shared and self.a_m_major and self.a.bits == 32 and rm * v.m * 4 % 128 == 0
        self.xor_b = self.b_shared and not self.b_k_major and self.b.bits == 32 and rn * v.n * 4 % 128 == 0
        # the threads the copies are dealt to: all, or a warp-specialized kernel's producers (after the others)
        self.threads = 32 * s.producers if s.producers else s.threads
        self.first_thread = s.threads if s.producers else 0
        wm, wn = s.warps
        self.bm, self.bn = wm * rm * v.m, wn * rn * v.n
        # M from A's window (a pre-compressed A's is its values, M x Kp/2), K and N from B's
        # (DYNAMIC where known at launch)
        self.m, (self.k, self.n) = a0.extent_values()[1], b0.extent_values()[1:]

    def b_group(self) -> int:
        """B fragments a read gives: two instruction columns per ldmatrix .x4 of dense ldmatrix
        shapes (one at the warp tile's edge when RN is odd), else one."""
        return 1 if self.b_shared or self.pre else 2

    def run(self) -> None:
        s, loop = self.s, self.loop
        S, bk = s.stages, s.stage_k
        bm, bn = self.bm, self.bn
        space = IntegerAttr(warp.SHARED, i64)
        a_elem, b_elem = self.a_loads[0].ref.type.element_type, self.b_loads[0].ref.type.element_type
        self.wgmma = s.mma == "wgmma"
        # stages whose products run on (`warp.wgmma` pending); a sparse A's metadata registers,
        # which the tensor cores read until the products retire, get one set a stage in flight
        # when `warp-unroll-sparse` unrolls the loop
        self.in_flight = s.wgmma_in_flight
        # an M-major A or N-major B read by wgmma: blocks of 64 rows or columns, each K rows of 128
        # bytes (the descriptors' layout), stage s the blocks s * blocks ..
        self.a_blocks = bm // warp.N_BLOCK if self.wgmma and self.a_m_major and not self.a_registers else 0
        self.b_blocks = bn // warp.N_BLOCK if self.wgmma and not self.b_k_major else 0
        a_shape = ([S * self.a_blocks, bk, warp.N_BLOCK] if self.a_blocks
                   else [S, bk, bm] if self.a_m_major else [S, bm, bk // 2 if self.pre else bk])
        # a B transposed in shared memory: a ring of its K-major stages of its own (`b_stages`)
        b_shape = ([S * self.b_blocks, bk, warp.N_BLOCK] if self.b_blocks
                   else [s.b_stages, bn, bk] if self.b_k_major else [S, bk, bn])
        shared = [MemRefType(a_elem, a_shape, memory_space=space), MemRefType(b_elem, b_shape, memory_space=space)]
        if self.pre:  # a lane's words for the stage's k32 steps, 16 lanes a tile of the CTA's rows
            shared.append(MemRefType(self.metas[0].ref.type.element_type, [S, bm, bk // self.variant.k],
                                     memory_space=space))
        if self.transpose_b:  # B's stages as stored (K x N), which `warp.transpose_stage` reads
            shared.append(MemRefType(b_elem, [S, bk, bn], memory_space=space))
        # wgmma's 128-byte swizzle is a function of the address: its stages start on 1024 bytes
        align = warp.WGMMA_ALIGN if self.wgmma else 128
        self.s_a, self.s_b, *rest = (self.add(memref.AllocOp([], [], ty, IntegerAttr(align, i64))).results[0]
                                     for ty in shared)
        self.s_meta = rest.pop(0) if self.pre else None
        self.s_raw_b = rest.pop(0) if self.transpose_b else None
        k_size = self.size(self.b_ref, 1, self.k)
        base = self.k_base()
        if base is not None:  # a split of K (`split_k`): its part, from `base`, is the loop's range
            steps = self.add(arith.DivUIOp(self.plus(loop.ub, bk - 1), self.const(bk))).results[0]
        elif self.k == DYNAMIC:  # ceil(K / bk) stages, known at launch
            steps = self.add(arith.DivUIOp(self.plus(k_size, bk - 1), self.const(bk))).results[0]
        else:
            steps = self.const(ceil_div(self.k, bk))
        accs = self.pairs(list(loop.iter_args), to_pairs=True)
        acc_types = [a.type for a in accs]
        zero = self.const(0)
        if self.wgmma:  # A's rows of this warp's warpgroup: its first, the warp's row rounded down
            self.group_row = self.add(arith.MuliOp(self.add(arith.DivUIOp(self.warp_row, self.const(warp.WGMMA_ROWS))).results[0],
                                                   self.const(warp.WGMMA_ROWS))).results[0]
        body = Block(arg_types=[IndexType()] + acc_types)
        kt, carried = body.args[0], list(body.args[1:])
        outer, self.ops = self.ops, []
        k = self.affine(kt, bk, base)
        more = None if self.through_a and self.through_b else self.add(arith.CmpiOp(k, k_size, "ult")).results[0]
        stage = self.add(arith.RemUIOp(kt, self.const(S))).results[0]
        if not (self.through_a and self.through_b):
            outside, self.ops = self.ops, []
            self.copy(k, self.add(arith.RemUIOp(kt, self.const(S))).results[0])
            self.add(scf.YieldOp())
            then, self.ops = self.ops, outside
            self.add(scf.IfOp(more, [], then))
        if self.through_a or self.through_b:  # its own stage index, as the copies': stage 0's alone
            self.fill(k, self.add(arith.RemUIOp(kt, self.const(S))).results[0])
        self.add(warp.AsyncCommitOp())
        rounded = self.rounded_in_place()
        token = self.add(warp.AsyncWaitOp(0, proxy_fence=self.wgmma and not rounded)).results[0]
        for i, (dest, vector, rounding) in enumerate(rounded):  # the last one fences for the warpgroups
            token = self.add(warp.RoundStageOp(dest, stage, token, self.threads, vector, rounding,
                                               proxy_fence=i == len(rounded) - 1, first_thread=self.first_thread)).result
        b_stage = stage  # (B's slot in a K-major ring of its own)
        if self.s_raw_b is not None:  # (each thread reads back its own copies: no barrier before)
            if s.b_stages != S:
                b_stage = self.add(arith.RemUIOp(kt, self.const(s.b_stages))).results[0]
            token = self.add(warp.TransposeStageOp(self.s_raw_b, stage, self.s_b, b_stage, token,
                                                   self.threads, self.first_thread, proxy_fence=self.wgmma)).result
        self.add(gpu.BarrierOp())
        metas = self.stage_meta(stage, token)
        if self.wgmma:
            results = self.stage_wgmma(stage, token, carried, metas, b_stage)
        else:
            results = self.stage_mmas(stage, token, carried, metas)
        self.add(scf.YieldOp(*results))
        body.add_ops(self.ops)
        self.ops = outer
        staged = self.add(scf.ForOp(zero, steps, self.const(1), accs, body))
        out = list(staged.results)
        if self.wgmma and self.in_flight:  # the last stage's products may still run
            out = list(self.add(warp.WgmmaWaitOp(out)).results)
        out = self.pairs(out, to_pairs=False)
        Rewriter.insert_op(self.ops, InsertPoint.before(loop))
        for old, new in zip(loop.results, out):
            old.replace_all_uses_with(new)
        Rewriter.erase_op(loop, safe_erase=False)

    def rounded_in_place(self) -> list[tuple[SSAValue, int, str]]:
        """(stage buffer, copy vector, rounding) of each operand the warpgroups read as tf32 that
        cp.async copies as stored and that must be rounded (rna, rn, rz: not trunc, whose low bits
        the tensor cores ignore): `warp.round_stage` rounds it where it lies (the fill rounds
        those it stages itself)."""
        if not self.wgmma:
            return []
        out = []
        for load, dest, through, vector in ((self.a_loads[0], self.s_a, self.through_a, self.a_vector),
                                            (self.b_loads[0], self.s_b, self.through_b, self.b_vector)):
            rounding = load.rounding_mode
            if rounding not in (None, "trunc") and not through:
                out.append((dest, vector, rounding))
        return out

    def pairs(self, accs: list[SSAValue], to_pairs: bool) -> list[SSAValue]:
        """With `pair_bytes`, an A read by byte pairs gives each instruction row's accumulator its
        rows 2g, 2g + 1 where g, g + 8 belong, and B's pairs of instruction columns (j, j + 1) the
        even and the odd columns of their 16: the loop's initial accumulators go into that order
        (`warp.pair_rows`, `warp.pair_columns`; a splat is in it already) and its results back
        (`warp.unpair_rows`, `warp.unpair_columns`). As they are otherwise."""
        pair = self.s.pair_bytes
        if not pair or (to_pairs and len({a.owner for a in accs}) == 1 and isinstance(accs[0].owner, warp.ConstantOp)):
            return accs
        rm, rn = self.s.warp_tile
        out = list(accs)
        if "a" in pair:
            rows = warp.PairRowsOp if to_pairs else warp.UnpairRowsOp
            out = [self.add(rows(a)).result for a in out]
        if "b" in pair:
            cols = warp.PairColumnsOp if to_pairs else warp.UnpairColumnsOp
            for i in range(rm):
                for j in range(0, rn, 2):
                    at = i * rn + j
                    out[at:at + 2] = self.add(cols(out[at], out[at + 1])).results
        return out

    def k_base(self) -> SSAValue | None:
        """Where the loop's K starts when it is one split's part (`tile-distribute` then loads
        at `base + k`), else None (the loop covers K from 0)."""
        index = self.b_loads[0].indices[1]
        iv = self.loop.body.block.args[0]
        if index is iv:
            return None
        add = index.owner
        if not (isinstance(add, arith.AddiOp) and add.rhs is iv):
            raise LoweringError(self.b_loads[0], "warp-stage-shared: expected B's K index as the loop's, or a split's "
                                "base + it (the forms tile-distribute writes)")
        return add.lhs

    def size(self, ref: SSAValue, tile_dim: int, static: int) -> SSAValue:
        """A size of the GEMM as an index value: the constant, or for `?` the `memref.dim` of the
        memref dimension that covers tile dimension `tile_dim` (1: rows, 2: columns) of `ref`."""
        if static != DYNAMIC:
            return self.const(static)
        rank = len(ref.type.get_shape())  # type: ignore[union-attr]
        return self.add(memref.DimOp(ref, self.const(tile_dim - 3 + rank))).results[0]

    def copy(self, k: SSAValue, stage: SSAValue) -> None:
        """The CTA's copies of A and B at K `k` into `stage` (of those not filled: `fill`)."""
        a0, b0 = self.a_loads[0], self.b_loads[0]
        mm, mn, mk = tile.size_multiple(self.kernel)
        k_exact = tile.tiles_exactly(self.k, self.s.stage_k, mk)
        if self.pre:
            a_k = self.add(arith.DivUIOp(k, self.const(2))).results[0]
            a_exact = sparse_format.padded_k(self.k) % self.s.stage_k == 0
        else:
            a_k, a_exact = k, k_exact
        m_exact = tile.tiles_exactly(self.m, self.bm, mm)
        n_exact = tile.tiles_exactly(self.n, self.bn, mn)
        if self.a_blocks:  # an M-major A for wgmma: one copy a block of 64 rows
            self.block_copies(a0, self.s_a, stage, self.a_blocks,
                              lambda j: [self.bz, self.plus(self.cta_row, j * warp.N_BLOCK), a_k],
                              (m_exact, a_exact), self.a_vector, transpose=True)
        elif not self.through_a:
            self.bounded(warp.CopyAsyncOp(a0.ref, [self.bz, self.cta_row, a_k], self.s_a, stage, a0.window_values(),
                                          a0.extent_values(), self.threads, self.a_vector,
                                          transpose=self.a_m_major, first_thread=self.first_thread,
                                          one_offset=bool(self.first_thread)), m_exact, a_exact)
        if self.b_blocks:  # an N-major B for wgmma: one copy a block of 64 columns
            self.block_copies(b0, self.s_b, stage, self.b_blocks,
                              lambda j: [self.bz, k, self.plus(self.cta_col, j * warp.N_BLOCK)],
                              (k_exact, n_exact), self.b_vector)
        elif self.s_raw_b is not None:  # as stored, each thread the rows its transpose reads
            self.bounded(warp.CopyAsyncOp(b0.ref, [self.bz, k, self.cta_col], self.s_raw_b, stage, b0.window_values(),
                                          b0.extent_values(), self.threads, self.b_vector,
                                          first_thread=self.first_thread, for_transpose=True), k_exact, n_exact)
        elif not self.through_b:
            self.bounded(warp.CopyAsyncOp(b0.ref, [self.bz, k, self.cta_col], self.s_b, stage, b0.window_values(),
                                          b0.extent_values(), self.threads, self.b_vector,
                                          transpose=self.b_k_major, first_thread=self.first_thread,
                                          one_offset=bool(self.first_thread)), k_exact, n_exact)
        if self.s_meta is not None:
            m = self.metas[0]
            self.add(warp.CopyMetaAsyncOp(m.ref, [m.indices[0], self.cta_row, k], self.s_meta, stage, self.threads,
                                          self.first_thread))

    def block_copies(self, load: warp.LoadOp, dest: SSAValue, stage: SSAValue, blocks: int, at,
                     exact: tuple[bool, bool], vector: int, transpose: bool = False) -> None:
        """The copies of an operand the warpgroups read M- or N-major: block j (64 rows or columns,
        its window at `at(j)`) into stage stage * blocks + j of `dest`."""
        first = self.add(arith.MuliOp(stage, self.const(blocks))).results[0]
        for j in range(blocks):
            block = self.add(arith.AddiOp(first, self.const(j))).results[0]
            self.bounded(warp.CopyAsyncOp(load.ref, at(j), dest, block, load.window_values(), load.extent_values(),
                                          self.threads, vector, transpose=transpose, first_thread=self.first_thread),
                          *exact)

    def fill(self, k: SSAValue, stage: SSAValue) -> None:
        """The transposing fills of A and B at K `k` into `stage` (those `fill` names; loaded element
        by element where `gather` names them too), then the gathers (those only `gather` names):
        loads and stores, not guarded by K (rows past K load nothing), so that `warp-pipeline` can
        run the stores an iteration after the loads; the K dimension is never marked in bounds.
        Each writes its operand's stage whole (its shape the buffer's): a filled one K-major, a
        gathered one as copy() would; the window's transpose is the stage's (an M-major A's stage
        is K x M, a K-major or filled B's N x K)."""
        mm, mn, mk = tile.size_multiple(self.kernel)
        a0, b0 = self.a_loads[0], self.b_loads[0]
        # each stage wholly inside K or past it: K whole stages, and a split's part from a multiple of one
        base = self.k_base()
        k_aligned = tile.tiles_exactly(self.k, self.s.stage_k, mk) and (base is None or multiple_of(base, self.s.stage_k))
        operands = {"a": (a0, [self.bz, self.cta_row, k], self.s_a, self.a_m_major,
                          (tile.tiles_exactly(self.m, self.bm, mm), False), (False, k_aligned)),
                    "b": (b0, [self.bz, k, self.cta_col], self.s_b, self.b_k_major,
                          (False, tile.tiles_exactly(self.n, self.bn, mn)), (k_aligned, False))}
        fill, gather = self.s.fill, self.s.gather
        for gathered, which in ((False, fill), (True, "".join(w for w in gather if w not in fill))):
            for what in which:
                load0, indices, dest, transpose, (rows_in, cols_in), aligned = operands[what]
                shape = dest.type.get_shape()[1:]  # type: ignore[union-attr]
                load = self.bounded(warp.FillLoadOp(load0.ref, indices, load0.window_values(), load0.extent_values(),
                                                    shape, self.threads, transpose=transpose, gather=gathered,
                                                    by_element=not gathered and what in gather,
                                                    first_thread=self.first_thread,
                                                    aligned=(False, False) if what in gather else aligned),
                                    rows_in, cols_in)
                self.add(warp.FillStoreOp(load.result, dest, stage, self.threads, gather=gathered,
                                          rounding=load0.rounding_mode,  # f32 stored as tf32
                                          first_thread=self.first_thread))

    def stage_meta(self, stage: SSAValue, token: SSAValue) -> list[SSAValue]:
        """A pre-compressed A's metadata for the stage: per instruction row of the warp tile, its
        k32 steps' words from the metadata stage (none for other kernels)."""
        if self.s_meta is None:
            return []
        frag = self.metas[0].fragments[0].type
        rm = self.s.warp_tile[0]
        return [r for i in range(rm) for r in self.add(warp.LoadMetaSharedOp(
            self.s_meta, [stage, self.plus(self.warp_row, i * self.variant.m)], token, frag)).results]

    def stage_wgmma(self, stage: SSAValue, token: SSAValue, accs: list[SSAValue],
                    metas: list[SSAValue], b_stage: SSAValue) -> list[SSAValue]:
        """The stage multiplied by this warp's warpgroup (`#warp.schedule` mma = wgmma): its A rows
        are the group's 64 (`group_row`, computed once before the loop); a pre-compressed A's
        metadata words are this warp's own 16 rows' (`stage_meta`); an A from registers is this
        warp's 16 rows, a fragment a K step read by byte pairs (`a_registers`); B at `b_stage` of
        its ring (`stage`, or its slot in a K-major ring of its own)."""
        frags = []
        if self.a_registers:
            a_type, zero = self.a_loads[0].result.type, self.const(0)
            frags = [self.add(warp.LdMatrixOp(self.s_a, [stage, zero, self.warp_row], token, (kk, 0), a_type,
                                              trans=True)).results[0]
                     for kk in range(0, self.s.stage_k, self.variant.k)]
        own = [b_stage] if b_stage is not stage else []  # (B's stage where its ring is its own)
        return list(self.add(warp.WgmmaOp(self.s_a, self.s_b, [stage, self.group_row, *own], token, accs,
                                           self.b_blocks, self.in_flight, self.a_blocks, metas, frags)).results)

    def stage_mmas(self, stage: SSAValue, token: SSAValue, accs: list[SSAValue], metas: list[SSAValue]):
        """Each K step of the stage: its fragment reads (A by instruction row, B by `b_group`),
        then its mmas, row by row."""
        rm, rn = self.s.warp_tile
        ki = self.variant.k
        steps = self.s.stage_k // ki
        w = self.b_group()
        accs = list(accs)
        for st in range(steps):
            read_a, read_b = self.stage_reads(stage, token, st * ki)
            a = [read_a(i) for i in range(rm)]
            b = [f for j in range(0, rn, w) for f in read_b(j)]
            for i in range(rm):
                for j in range(rn):
                    accs[i * rn + j] = self.add(warp.MmaOp(a[i], b[j], accs[i * rn + j],
                                                           metadata=metas[i * steps + st] if metas else None)).results[0]
        return accs

    def stage_reads(self, stage: SSAValue, token: SSAValue, kk: int):
        """Readers of K step `kk` of a stage: i -> instruction row i's A fragment (ldmatrix .x4 from
        an M x K buffer, or .trans from a K x M one), and j -> the B fragments of instruction
        columns j.. (`b_group` of them: ldmatrix .x4 of two columns from an N x K buffer, or .trans
        from a K x N one). `warp.load_shared` per fragment for the shapes ldmatrix cannot read
        (`SHARED_LOAD_SHAPES`) and a tf32 operand stored across its K rows (an M-major A, a
        row-major B). A pre-compressed A's stage holds its values (column kk / 2), and each k32 B
        fragment is one .x4 of its own."""
        rn = self.s.warp_tile[1]
        pre = self.pre
        a_load, b_load = self.a_loads[0], self.b_loads[0]
        a_round, b_round = a_load.rounding_mode, b_load.rounding_mode
        a_type, b_type = a_load.result.type, b_load.result.type
        at, zero = self.const(kk), self.const(0)
        a_read = warp.LoadSharedOp if self.a_shared else warp.LdMatrixOp
        a_col = self.const(kk // 2) if pre else at  # a pre-compressed stage holds K/2 value columns

        def read_a(i: int) -> SSAValue:
            if not self.a_m_major:
                op = a_read(self.s_a, [stage, self.warp_row, a_col], token, (i * 16, 0), a_type, rounding=a_round)
            elif self.a_shared:  # a K x M buffer
                op = warp.LoadSharedOp(self.s_a, [stage, at, self.warp_row], token, (0, i * 16), a_type,
                                       transposed=True, rounding=a_round, xor_columns=self.xor_a)
            else:
                op = warp.LdMatrixOp(self.s_a, [stage, zero, self.warp_row], token, (kk, i * 16), a_type, trans=True)
            return self.add(op).results[0]

        def read_b(j: int) -> list[SSAValue]:
            if self.b_shared:  # one element per register
                op = (warp.LoadSharedOp(self.s_b, [stage, self.warp_col, at], token, (j * 8, 0), b_type,
                                        transposed=True, rounding=b_round) if self.b_k_major
                      else warp.LoadSharedOp(self.s_b, [stage, at, self.warp_col], token, (0, j * 8), b_type,
                                             rounding=b_round, xor_columns=self.xor_b))
            elif pre:
                op = (warp.LdMatrixOp(self.s_b, [stage, self.plus(self.warp_col, j * 8), at], token, (0, 0), b_type)
                      if self.b_k_major else
                      warp.LdMatrixOp(self.s_b, [stage, zero, self.plus(self.warp_col, j * 8)], token, (kk, 0), b_type,
                                      trans=True))
            else:
                n = self.plus(self.warp_col, j * 8)
                op = (warp.LdMatrixOp(self.s_b, [stage, n, at], token, (0, 0), b_type, min(2, rn - j), rounding=b_round)
                      if self.b_k_major else
                      warp.LdMatrixOp(self.s_b, [stage, zero, n], token, (kk, 0), b_type, min(2, rn - j), trans=True))
            return list(self.add(op).results)

        return read_a, read_b


@dataclass(frozen=True)
class WarpStageShared(ModulePass):
    """Stage the K loop of every kernel whose `#warp.schedule` has stages through shared memory."""

    name = "warp-stage-shared"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if isinstance(attr, ScheduleAttr) and attr.schedule.stages and "warp.grid" in kernel.attributes:
                _Stage(kernel, attr.schedule).run()
