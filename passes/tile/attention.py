"""`tile-attention`: a kernel of S = Q K^T, P = softmax(S), O = P V (`read_attention`) becomes the
FlashAttention-2 schedule at the warp level, S and P never leaving registers.

A CTA takes a block of 16 rm x warps query rows of one head (grid: query blocks x heads), each
warp 16 rm of them (`AttentionConfig`), its Q fragments in registers for the whole kernel or
staged once in shared memory and read per key block. It walks the key/value rows in blocks of
`block_n`: K^T and V blocks are copied into two-stage shared buffers by `warp.copy_async` (the
next block while this one is multiplied), read by `warp.ldmatrix` (V with .trans, as a row-major
B). Per block, in registers: S = Q K^T (`warp.mma`, each B fragment used by every m16 tile),
keys past S's length and (causal) after the query masked to -inf (`warp.mask`: only in the blocks
that need it, a second loop after the blocks every row of the CTA sees whole), the row max
(`warp.row_reduce`), the running max m and alpha = exp2((m_old - m_new) c) (a `warp.map` of rows;
c = scale log2 e), P = exp2(S c - m c) (one FFMA and EX2 an element, as FA2) and the running sum
l = l alpha + rowsum(P), O = O alpha, then P cast to the operand type and read as the A fragments
of the second mma (`warp.to_lhs`: the same registers), O += P V. After the last block O (1 / l)
is cast and stored. Causal CTAs stop at the last block one of their rows can see, the longest
(the last query blocks) first.

Numerics: m and l are exact f32 maxima and sums of the computed values; exp2 is
`ex2.approx.ftz.f32` (`fastmath<afn>`; at most 2 ulp, results below 2^-126 flushed); P is rounded
to f16/bf16 before P V, as FA2 does - what `verify/attention_reference.py` bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, math as mathd, memref, scf
from xdsl.dialects.arith import FastMathFlag, FastMathFlagsAttr
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    f32,
    f64,
    i64,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from tilemma.dialects import tile, warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.attention_kernel import AttentionKernel, is_attention, read_attention
from tilemma.passes.tile.distribute import IndexBuilder, tile_window
from tilemma.passes.tile.plan import GRID_LIMITS, ceil_div, column_major, copy_vector, kernel_target
from tilemma.passes.warp.stage_shared import MemView

STAGES = 2  # K/V blocks in shared memory: the next copied while this one is multiplied
AFN = FastMathFlagsAttr([FastMathFlag.APPROX_FUNC])  # exp2 as ex2.approx.ftz: P below 2^-126 is 0


@dataclass(frozen=True)
class AttentionConfig:
    """How `tile-attention` tiles a kernel: `warps` warps of `rm` m16 tiles (16 rm query rows)
    each, key/value blocks of `block_n` rows, Q's fragments in registers for the whole kernel or
    (`q_shared`) staged once in shared memory and read by ldmatrix per block (FA2's choice at head
    dim 128, where 32 query rows a warp leave no registers for Q). `ctas`: the CTAs an SM is to
    hold at once (`.minnctapersm`: ptxas keeps each thread within the SM's registers / that many
    CTAs); 0 asks for none."""

    warps: int = 4
    rm: int = 2
    block_n: int = 64
    q_shared: bool = False
    ctas: int = 0

    @property
    def block_m(self) -> int:
        return 16 * self.rm * self.warps

    @staticmethod
    def default(d: int) -> AttentionConfig:
        """Measured on an H200 (b4 h16 s4096, `benchmarks/attention_bench.py --configs`, causal
        and not): 32 query rows a warp and 64-key blocks at both head dims; Q in registers at 64,
        staged at 128 (32 rows of O, S and Q leave no registers; staged, ptxas spills 36 bytes
        and it still beats 32-key blocks, 16 rows, or 16 rows with 3 CTAs an SM at 168
        registers: 0.91x of it)."""
        return AttentionConfig(4, 2, 64, q_shared=d > 64)


class _Attention(IndexBuilder):
    def __init__(self, kernel: func.FuncOp, a: AttentionKernel, c: AttentionConfig):
        super().__init__()
        self.kernel, self.a, self.c = kernel, a, c
        self.variant = a.mma_s.variant  # type: ignore[attr-defined]
        self.elem = a.mma_s.lhs.type.element_type  # type: ignore[union-attr]
        self.bm, self.bn, self.rm = c.block_m, c.block_n, c.rm
        self.threads = 32 * c.warps

    def frag(self, role: warp.Operand, element=None) -> warp.FragType:
        return warp.FragType(role, element if element is not None else f32 if role == warp.Operand.ACC else self.elem,
                             self.variant)

    def map(self, inputs: list[SSAValue], results: list, body) -> list[SSAValue]:
        """A warp.map of `inputs` (fragments or rows) whose body `body(b, args) -> values` builds
        with `b(op)` adding an op to the body."""
        block = Block(arg_types=[f32] * len(inputs))

        def b(op):
            block.add_op(op)
            return op.results[0]

        values = body(b, list(block.args))
        block.add_op(warp.MapYieldOp(*values))
        return list(self.add(warp.MapOp(inputs, results, Region(block))).results)

    def shared(self, shape: list[int]) -> SSAValue:
        ty = MemRefType(self.elem, shape, memory_space=IntegerAttr(warp.SHARED, i64))
        return self.add(memref.AllocOp([], [], ty, IntegerAttr(128, i64))).results[0]

    def run(self) -> None:
        a, kernel, rm = self.a, self.kernel, self.rm
        old = kernel.body.blocks[0]
        new_body = Block(arg_types=[x.type for x in old.args])
        args = list(new_body.args)
        for new, was in zip(args, old.args):  # the PTX parameters keep the IR's names
            new.name_hint = was.name_hint
        q_ref, kt_ref, v_ref, o_ref = (args[m.param] for m in (a.q, a.kt, a.v, a.o))
        operands = {"q": a.mma_s.lhs, "kt": a.mma_s.rhs, "v": a.mma_o.rhs}  # type: ignore[attr-defined]
        loads = {name: tile_window(value.owner) for name, value in operands.items()}  # type: ignore[arg-type]
        bx = self.add(gpu.BlockIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))).results[0]
        bz = self.add(gpu.BlockIdOp(gpu.DimensionAttr(gpu.DimensionEnum.Y))).results[0]
        tid = self.add(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))).results[0]
        warp_id = self.add(arith.DivUIOp(tid, self.const(32))).results[0]
        if a.causal:  # the longest query blocks (the last) first: the short ones fill the last wave
            bx = self.add(arith.SubiOp(self.const(ceil_div(a.l, self.bm) - 1), bx)).results[0]
        cta_row = self.add(arith.MuliOp(bx, self.const(self.bm))).results[0]
        warp_row = self.add(arith.MuliOp(warp_id, self.const(16 * rm))).results[0]
        q_row = self.add(arith.AddiOp(cta_row, warp_row)).results[0]
        q_rows = [self.plus(q_row, 16 * i) for i in range(rm)]  # each m16 tile's first query row
        zero = self.const(0)
        kv_exact, q_exact = a.s % self.bn == 0, a.l % self.bm == 0  # no access can leave the tensors

        # the K^T and V stages (and Q's, once)
        kt_view, v_view, q_view = (self._view(loads[n][0], r) for n, r in (("kt", kt_ref), ("v", v_ref), ("q", q_ref)))
        self.kt_k_major = column_major(kt_view)  # K stored S x D: the stage holds it as N x K
        self.v_k_major = column_major(v_view)
        s_k = self.shared([STAGES, self.bn, a.d] if self.kt_k_major else [STAGES, a.d, self.bn])
        s_v = self.shared([STAGES, a.dv, self.bn] if self.v_k_major else [STAGES, self.bn, a.dv])
        q_load = loads["q"]
        if self.c.q_shared:
            if column_major(q_view):
                raise LoweringError(a.mma_s, "attention: Q is staged with its head dim contiguous (row-major)")
            s_q = self.shared([1, self.bm, a.d])
            self.bounded(warp.CopyAsyncOp(q_ref, [bz, cta_row, zero], s_q, zero, q_load[0], q_load[1], self.threads,
                                          copy_vector(q_view), transpose=False, one_offset=True), q_exact, True)
            q_frags = None
        else:  # the warp's A fragments in registers, once
            q_frags = [[self.bounded(warp.LoadOp(q_ref, [bz, q_rows[i], self.const(kd * 16)], q_load[0], q_load[1],
                                                 self.frag(warp.Operand.A)), q_exact, True).results[0]
                        for kd in range(a.d // 16)] for i in range(rm)]

        blocks = self.const(ceil_div(a.s, self.bn))
        if a.causal:  # the blocks holding a column <= the CTA's last row
            last = self.add(arith.MinUIOp(self.plus(cta_row, self.bm), self.const(a.l))).results[0]
            seen = self.add(arith.DivUIOp(self.plus(last, self.bn - 1), self.const(self.bn))).results[0]
            blocks = self.add(arith.MinUIOp(blocks, seen)).results[0]

        def copy(j: SSAValue, stage: SSAValue) -> None:
            kv = self.add(arith.MuliOp(j, self.const(self.bn))).results[0]
            kt_load, v_load = loads["kt"], loads["v"]
            self.bounded(warp.CopyAsyncOp(kt_ref, [bz, zero, kv], s_k, stage, kt_load[0], kt_load[1], self.threads,
                                          copy_vector(kt_view, self.kt_k_major), transpose=self.kt_k_major,
                                          one_offset=True),
                         True, kv_exact)
            self.bounded(warp.CopyAsyncOp(v_ref, [bz, kv, zero], s_v, stage, v_load[0], v_load[1], self.threads,
                                          copy_vector(v_view, self.v_k_major), transpose=self.v_k_major,
                                          one_offset=True),
                         kv_exact, True)

        copy(zero, zero)  # with Q's copy, one group: the first block's wait covers both
        self.add(warp.AsyncCommitOp())

        acc = self.frag(warp.Operand.ACC)
        rows = warp.RowsType(f32, self.variant)
        n_o = a.dv // 8
        o_init = [self._zero_acc(acc) for _ in range(rm * n_o)]
        ml_init = [v for _ in range(rm) for v in self.map([], [rows, rows], lambda b, _: [
            b(arith.ConstantOp(FloatAttr(-math.inf, f32))), b(arith.ConstantOp(FloatAttr(0.0, f32)))])]

        def block_loop(count: SSAValue, first: SSAValue | None, init: list[SSAValue], masked: bool) -> list[SSAValue]:
            """`count` key blocks from block `first` (0 if None): the loop of FA2's main step,
            `masked` where some key of a block lies past S or (causal) after some query row."""
            body = Block(arg_types=[IndexType()] + [v.type for v in init])
            t, carried = body.args[0], list(body.args[1:])
            o = carried[:rm * n_o]
            ml = carried[rm * n_o:]
            outer, self.ops = self.ops, []
            j = t if first is None else self.add(arith.AddiOp(first, t)).results[0]
            # block j's copies done (each thread's), then seen by all: the barrier also says every
            # warp is past block j - 1, so its stage takes block j + 1's copies from here on (FA2's
            # one barrier a block)
            token = self.add(warp.AsyncWaitOp(0)).results[0]
            self.add(gpu.BarrierOp())
            nxt = self.plus(j, 1)
            more = self.add(arith.CmpiOp(nxt, blocks, "ult")).results[0]
            outside, self.ops = self.ops, []
            copy(nxt, self.add(arith.RemUIOp(nxt, self.const(STAGES))).results[0])
            self.add(scf.YieldOp())
            then, self.ops = self.ops, outside
            self.add(scf.IfOp(more, [], then))
            self.add(warp.AsyncCommitOp())
            stage = self.add(arith.RemUIOp(j, self.const(STAGES))).results[0]
            kv = self.add(arith.MuliOp(j, self.const(self.bn))).results[0]

            # S = Q K^T: per k16 step, each B pair read once and used by every m16 tile
            n_s = self.bn // 8
            s_frags = [self._zero_acc(acc) for _ in range(rm * n_s)]
            b_type = self.frag(warp.Operand.B)
            for kd in range(a.d // 16):
                if q_frags is None:
                    qa = [self.add(warp.LdMatrixOp(s_q, [zero, warp_row, zero], token, (16 * i, kd * 16),
                                                   self.frag(warp.Operand.A), xor_columns=True)).results[0]
                          for i in range(rm)]
                else:
                    qa = [q_frags[i][kd] for i in range(rm)]
                for nt in range(0, n_s, 2):
                    if self.kt_k_major:  # an N x K stage
                        read = warp.LdMatrixOp(s_k, [stage, zero, zero], token, (nt * 8, kd * 16), b_type, 2,
                                               xor_columns=True)
                    else:  # a K x N stage
                        read = warp.LdMatrixOp(s_k, [stage, zero, zero], token, (kd * 16, nt * 8), b_type, 2, trans=True,
                                               xor_columns=True)
                    pair = list(self.add(read).results)
                    for i in range(rm):
                        for t in range(2):
                            f = i * n_s + nt + t
                            s_frags[f] = self.add(warp.MmaOp(qa[i], pair[t], s_frags[f])).results[0]
            if masked:
                limit = None if kv_exact else self.const(a.s)
                s_frags = [self.add(warp.MaskOp(f, q_rows[x // n_s], self.plus(kv, (x % n_s) * 8), limit, a.causal,
                                                -math.inf)).results[0]
                           for x, f in enumerate(s_frags)]

            # the online softmax (FA2), per m16 tile: running max m, sum l, O rescaled by alpha
            c = a.scale * math.log2(math.e)

            def new_max(b, x):
                m_prev, m_cur = x
                m_new = b(arith.MaximumfOp(m_prev, m_cur))
                # a row with nothing unmasked yet keeps exp2 finite: its max counts as 0 (FA2)
                inf = b(arith.ConstantOp(FloatAttr(-math.inf, f32)))
                is_inf = b(arith.CmpfOp(m_new, inf, "oeq"))
                zero_f = b(arith.ConstantOp(FloatAttr(0.0, f32)))
                safe = b(arith.SelectOp(is_inf, zero_f, m_new))
                cf = b(arith.ConstantOp(FloatAttr(c, f32)))
                m_c = b(arith.MulfOp(safe, cf))
                alpha = b(mathd.Exp2Op(fastmath=AFN, operand=b(arith.SubfOp(b(arith.MulfOp(m_prev, cf)), m_c))))
                return [m_new, m_c, alpha]

            def prob(b, x):
                s, mc = x
                cf = b(arith.ConstantOp(FloatAttr(c, f32)))
                return [b(mathd.Exp2Op(fastmath=AFN, operand=b(mathd.FmaOp(s, cf, b(arith.NegfOp(mc))))))]

            ml_new: list[SSAValue] = []
            p_half: list[SSAValue] = []
            half = self.frag(warp.Operand.ACC, self.elem)
            for i in range(rm):
                tile_s = s_frags[i * n_s:(i + 1) * n_s]
                m_old, l_old = ml[2 * i], ml[2 * i + 1]
                m_block = self.add(warp.RowReduceOp("max", tile_s)).results[0]
                m_new, m_c, alpha = self.map([m_old, m_block], [rows, rows, rows], new_max)
                tile_p = [self.map([f, m_c], [acc], prob)[0] for f in tile_s]
                l_block = self.add(warp.RowReduceOp("add", tile_p)).results[0]
                [l_new] = self.map([l_old, alpha, l_block], [rows], lambda b, x: [b(mathd.FmaOp(x[0], x[1], x[2]))])
                for x in range(i * n_o, (i + 1) * n_o):
                    o[x] = self.map([o[x], alpha], [acc], lambda b, y: [b(arith.MulfOp(y[0], y[1]))])[0]
                ml_new += [m_new, l_new]
                # P in the operand type at once: the f32 values die before the next tile's are made
                p_half += [self.add(warp.CastOp(p, half, a.p_rounding)).results[0] for p in tile_p]

            # O += P V, P read as the A fragments of its k16 slices, each V pair used by every m16 tile
            p_lhs = [[self.add(warp.ToLhsOp([p_half[i * n_s + 2 * kk], p_half[i * n_s + 2 * kk + 1]],
                                            self.frag(warp.Operand.A))).results[0]
                      for kk in range(self.bn // 16)] for i in range(rm)]
            for kk in range(self.bn // 16):
                for dt in range(0, n_o, 2):
                    if self.v_k_major:  # an N x K stage (V stored with S contiguous)
                        read = warp.LdMatrixOp(s_v, [stage, zero, zero], token, (dt * 8, kk * 16), b_type, 2,
                                               xor_columns=True)
                    else:  # a K x N stage: V as stored
                        read = warp.LdMatrixOp(s_v, [stage, zero, zero], token, (kk * 16, dt * 8), b_type, 2, trans=True,
                                               xor_columns=True)
                    pair = list(self.add(read).results)
                    for i in range(rm):
                        for t in range(2):
                            x = i * n_o + dt + t
                            o[x] = self.add(warp.MmaOp(p_lhs[i][kk], pair[t], o[x])).results[0]
            self.add(scf.YieldOp(*o, *ml_new))
            body.add_ops(self.ops)
            self.ops = outer
            return list(self.add(scf.ForOp(zero, count, self.const(1), init, body)).results)

        # the blocks every query row of the CTA sees whole, then those that need the mask
        if a.causal:
            whole = self.add(arith.DivUIOp(self.plus(cta_row, 1), self.const(self.bn))).results[0]
            whole = self.add(arith.MinUIOp(whole, self.const(a.s // self.bn))).results[0]
        else:
            whole = blocks if kv_exact else self.const(a.s // self.bn)
        results = block_loop(whole, None, [*o_init, *ml_init], masked=False)
        if a.causal or not kv_exact:
            rest = self.add(arith.SubiOp(blocks, whole)).results[0]
            results = block_loop(rest, whole, results, masked=True)
        o_final = results[:rm * n_o]
        l_final = [results[rm * n_o + 2 * i + 1] for i in range(rm)]

        # O / l, in the output's type: one division a row, then products (FA2's)
        inv = [self.map([l], [rows], lambda b, y: [b(arith.DivfOp(b(arith.ConstantOp(FloatAttr(1.0, f32))), y[0]))])[0]
               for l in l_final]
        out = [self.map([f, inv[x // n_o]], [acc], lambda b, y: [b(arith.MulfOp(y[0], y[1]))])[0]
               for x, f in enumerate(o_final)]
        o_elem = o_ref.type.element_type  # type: ignore[union-attr]
        if tile.element_name(o_elem) != "f32":
            out = [self.add(warp.CastOp(f, self.frag(warp.Operand.ACC, o_elem), a.o_rounding)).results[0] for f in out]
        o_window = tile_window(a.store)  # type: ignore[arg-type]
        for x, f in enumerate(out):
            store = warp.StoreOp(f, o_ref, [bz, q_rows[x // n_o], self.const((x % n_o) * 8)], o_window[0], o_window[1])
            store.col_align = IntegerAttr(8, i64)
            self.bounded(store, q_exact, True)
        self.add(func.ReturnOp())
        new_body.add_ops(self.ops)
        kernel.body.insert_block_before(new_body, old)
        kernel.body.detach_block(old)
        old.erase(safe_erase=False)
        roles = {a.q.param: "q", a.kt.param: "k", a.v.param: "v", a.o.param: "d"}
        kernel.arg_attrs = ArrayAttr([DictionaryAttr({"warp.role": ArrayAttr([StringAttr(roles[i])] if i in roles else [])})
                                      for i in range(len(args))])
        kernel.attributes["warp.grid"] = DenseArrayBase.from_list(i64, [ceil_div(a.l, self.bm), a.batch, 1])
        kernel.attributes["warp.block"] = DenseArrayBase.from_list(i64, [self.threads, 1, 1])
        if self.c.ctas:
            kernel.attributes["warp.min_ctas"] = IntegerAttr(self.c.ctas, i64)

    def _zero_acc(self, acc: warp.FragType) -> SSAValue:
        return self.add(warp.ConstantOp(FloatAttr(0.0, f64), acc)).results[0]

    def _view(self, window, ref: SSAValue) -> MemView:
        view = MemView.of(ref.type, window)  # type: ignore[arg-type]
        by_column = column_major(view)
        if copy_vector(view, by_column) < 4 or (view.row_stride != 1 and view.col_stride != 1):
            raise LoweringError(self.a.mma_s, f"attention: {ref.type} is not read in contiguous, 4-byte aligned rows "
                                              f"(cp.async); the schedule stages K and V with it")
        return view


@dataclass(frozen=True)
class TileAttention(ModulePass):
    """Rewrite every kernel holding a `tile.softmax` (attention, `read_attention`) into the
    FlashAttention-2 schedule at the warp level. Options (0 / "": the default for the head dim and
    the mask, `AttentionConfig.default`): `rows-per-warp` (16 or 32 query rows a warp), `block-n`
    (key rows a block: 32, 64 or 128), `q-shared` ("yes": Q staged in shared memory, "no": in
    registers), `ctas-per-sm` (CTAs an SM is to hold at once, 1..8: ptxas cuts the registers a
    thread to fit them, at least 64; the SM's shared memory must hold them; 0: the default)."""

    name = "tile-attention"

    rows_per_warp: int = 0
    block_n: int = 0
    q_shared: str = ""
    ctas_per_sm: int = 0

    def config(self, d: int) -> AttentionConfig:
        c = AttentionConfig.default(d)
        if self.rows_per_warp not in (0, 16, 32):
            raise ValueError(f"tile-attention: rows-per-warp must be 16 or 32, got {self.rows_per_warp}")
        if self.block_n not in (0, 32, 64, 128):
            raise ValueError(f"tile-attention: block-n must be 32, 64 or 128, got {self.block_n}")
        if self.q_shared not in ("", "yes", "no"):
            raise ValueError(f"tile-attention: q-shared must be yes or no, got {self.q_shared!r}")
        if not 0 <= self.ctas_per_sm <= 8:
            raise ValueError(f"tile-attention: ctas-per-sm must be 1..8 (0: the default), got {self.ctas_per_sm}")
        return AttentionConfig(c.warps, self.rows_per_warp // 16 or c.rm, self.block_n or c.block_n,
                               c.q_shared if not self.q_shared else self.q_shared == "yes",
                               self.ctas_per_sm or c.ctas)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            if is_attention(kernel):
                a = read_attention(kernel)
                c = self.config(a.d)
                _check_limits(kernel, a, c)
                _Attention(kernel, a, c).run()


def _check_limits(kernel: func.FuncOp, a: AttentionKernel, c: AttentionConfig) -> None:
    """The configuration against the target's record: the K/V stages (and Q's) in shared memory,
    the grid's query blocks."""
    target = kernel_target(kernel)
    limit = target.limits.shared_per_cta
    bytes_ = STAGES * c.block_n * (a.d + a.dv) * 2 + (c.block_m * a.d * 2 if c.q_shared else 0)
    if bytes_ > limit:
        raise LoweringError(a.mma_s, f"attention: {STAGES} stages of {c.block_n} keys at head dims {a.d}/{a.dv}"
                                     f"{' and a staged Q' if c.q_shared else ''} need {bytes_} bytes of shared memory; "
                                     f"a CTA has at most {limit} on {target} ({limit // 1024} KiB): take a smaller block-n")
    if c.ctas:
        reserve = target.limits.shared_reserve
        if c.ctas * (bytes_ + reserve) > target.limits.shared_per_sm:
            raise LoweringError(a.mma_s, f"attention: {c.ctas} CTAs an SM need {c.ctas} x ({bytes_} + {reserve}) bytes "
                                         f"of shared memory; an SM has {target.limits.shared_per_sm} on {target}: "
                                         f"ask for fewer CTAs or a smaller block-n")
    if ceil_div(a.l, c.block_m) > GRID_LIMITS[0] or a.batch > GRID_LIMITS[1]:
        raise LoweringError(a.mma_s, f"attention: {ceil_div(a.l, c.block_m)} query blocks x {a.batch} heads exceed the "
                                     f"CUDA grid limits ({GRID_LIMITS[0]} x {GRID_LIMITS[1]})")
