"""`tile-attention`: a kernel of S = Q K^T, P = softmax(S), O = P V (`read_attention`) becomes the
FlashAttention-2 schedule at the warp level, S and P never leaving registers.

A CTA takes BM = 16 x warps query rows of one head (grid: query blocks x heads), each warp 16
of them, with its Q fragments loaded once. It walks the key/value rows in blocks of BN: K^T and V
blocks are copied into two-stage shared buffers by `warp.copy_async` (the next block while this
one is multiplied), read by `warp.ldmatrix` (V with .trans, as a row-major B). Per block, in
registers: S = Q K^T (`warp.mma`), columns past S's length and (causal) above the diagonal
masked to -inf (`warp.mask`), the row max (`warp.row_reduce`), the running max m and the
rescaling factor alpha = exp2((m_old - m_new) c) (a `warp.map` of rows; c = scale log2 e, one
FFMA and EX2 per element as FA2), P = exp2(S c - m c) and the running sum l = l alpha + rowsum(P),
O = O alpha, then P cast to the operand type and read as the A fragments of the second mma
(`warp.to_lhs`: the same registers), O += P V. After the last block O / l is cast and stored.
Causal kernels stop at the last block a query row of the CTA can see.

Numerics: m and l are exact f32 maxima and sums of the computed values; exp2 is `ex2.approx.f32`
(`scalar_math`: at most 2 ulp); P is rounded to f16/bf16 before P V, as FA2 does - what
`verify/attention_reference.py` bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, math as mathd, memref, scf
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
from tilemma.passes.tile.distribute import IndexBuilder
from tilemma.passes.tile.plan import ceil_div, column_major, copy_vector
from tilemma.passes.warp.stage_shared import MemView

WARPS = 4  # warps of a CTA, each 16 query rows
BLOCK_N = 64  # key/value rows a block
STAGES = 2


class _Attention(IndexBuilder):
    def __init__(self, kernel: func.FuncOp, a: AttentionKernel):
        super().__init__()
        self.kernel, self.a = kernel, a
        self.variant = a.mma_s.variant  # type: ignore[attr-defined]
        self.elem = a.mma_s.lhs.type.element_type  # type: ignore[union-attr]
        self.bm, self.bn = 16 * WARPS, BLOCK_N
        self.threads = 32 * WARPS

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

    def run(self) -> None:
        a, kernel = self.a, self.kernel
        old = kernel.body.blocks[0]
        new_body = Block(arg_types=[x.type for x in old.args])
        args = list(new_body.args)
        for new, was in zip(args, old.args):  # the PTX parameters keep the IR's names
            new.name_hint = was.name_hint
        q_ref, kt_ref, v_ref, o_ref = (args[m.param] for m in (a.q, a.kt, a.v, a.o))
        loads = {m.param: self._load_of(m) for m in (a.q, a.kt, a.v)}
        bx = self.add(gpu.BlockIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))).results[0]
        bz = self.add(gpu.BlockIdOp(gpu.DimensionAttr(gpu.DimensionEnum.Y))).results[0]
        tid = self.add(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))).results[0]
        warp_id = self.add(arith.DivUIOp(tid, self.const(32))).results[0]
        cta_row = self.add(arith.MuliOp(bx, self.const(self.bm))).results[0]
        q_row = self.add(arith.AddiOp(cta_row, self.add(arith.MuliOp(warp_id, self.const(16))).results[0])).results[0]
        zero = self.const(0)

        # Q: the warp's A fragments, once
        q_load = loads[a.q.param]
        q_frags = [self.bounded(warp.LoadOp(q_ref, [bz, q_row, self.const(kd * 16)], q_load[0], q_load[1],
                                            self.frag(warp.Operand.A)), False, True).results[0]
                   for kd in range(a.d // 16)]

        # the K^T and V stages
        kt_view, v_view = self._view(a.kt, kt_ref), self._view(a.v, v_ref)
        self.kt_k_major = column_major(kt_view)  # K stored S x D: the stage holds it as N x K
        self.v_k_major = column_major(v_view)
        space = IntegerAttr(warp.SHARED, i64)
        s_k = self.add(memref.AllocOp([], [], MemRefType(
            self.elem, [STAGES, self.bn, a.d] if self.kt_k_major else [STAGES, a.d, self.bn], memory_space=space),
            IntegerAttr(128, i64))).results[0]
        s_v = self.add(memref.AllocOp([], [], MemRefType(
            self.elem, [STAGES, a.dv, self.bn] if self.v_k_major else [STAGES, self.bn, a.dv], memory_space=space),
            IntegerAttr(128, i64))).results[0]

        blocks = self.const(ceil_div(a.s, self.bn))
        if a.causal:  # the blocks holding a column <= the CTA's last row
            last = self.add(arith.MinUIOp(self.plus(cta_row, self.bm), self.const(a.l))).results[0]
            seen = self.add(arith.DivUIOp(self.plus(last, self.bn - 1), self.const(self.bn))).results[0]
            blocks = self.add(arith.MinUIOp(blocks, seen)).results[0]

        def copy(j: SSAValue, stage: SSAValue) -> None:
            kv = self.add(arith.MuliOp(j, self.const(self.bn))).results[0]
            kt_load, v_load = loads[a.kt.param], loads[a.v.param]
            self.add(warp.CopyAsyncOp(kt_ref, [bz, zero, kv], s_k, stage, kt_load[0], kt_load[1], self.threads,
                                      copy_vector(kt_view, self.kt_k_major), transpose=self.kt_k_major))
            self.add(warp.CopyAsyncOp(v_ref, [bz, kv, zero], s_v, stage, v_load[0], v_load[1], self.threads,
                                      copy_vector(v_view, self.v_k_major), transpose=self.v_k_major))

        copy(zero, zero)
        self.add(warp.AsyncCommitOp())

        acc = self.frag(warp.Operand.ACC)
        rows = warp.RowsType(f32, self.variant)
        o_init = [self._zero_acc(acc) for _ in range(a.dv // 8)]
        m_init, l_init = self.map([], [rows, rows], lambda b, _: [
            b(arith.ConstantOp(FloatAttr(-math.inf, f32))), b(arith.ConstantOp(FloatAttr(0.0, f32)))])

        body = Block(arg_types=[IndexType()] + [acc] * len(o_init) + [rows, rows])
        j, carried = body.args[0], list(body.args[1:])
        o, m_old, l_old = carried[:-2], carried[-2], carried[-1]
        outer, self.ops = self.ops, []
        nxt = self.plus(j, 1)
        more = self.add(arith.CmpiOp(nxt, blocks, "ult")).results[0]
        outside, self.ops = self.ops, []
        copy(nxt, self.add(arith.RemUIOp(nxt, self.const(STAGES))).results[0])
        self.add(scf.YieldOp())
        then, self.ops = self.ops, outside
        self.add(scf.IfOp(more, [], then))
        self.add(warp.AsyncCommitOp())
        token = self.add(warp.AsyncWaitOp(1)).results[0]
        self.add(gpu.BarrierOp())
        stage = self.add(arith.RemUIOp(j, self.const(STAGES))).results[0]
        kv = self.add(arith.MuliOp(j, self.const(self.bn))).results[0]

        # S = Q K^T, one n8 tile of keys at a time
        s_frags = [self._zero_acc(acc) for _ in range(self.bn // 8)]
        b_type = self.frag(warp.Operand.B)
        for kd in range(a.d // 16):
            for nt in range(0, self.bn // 8, 2):
                if self.kt_k_major:  # an N x K stage
                    read = warp.LdMatrixOp(s_k, [stage, zero, zero], token, (nt * 8, kd * 16), b_type, 2)
                else:  # a K x N stage
                    read = warp.LdMatrixOp(s_k, [stage, zero, zero], token, (kd * 16, nt * 8), b_type, 2, trans=True)
                pair = list(self.add(read).results)
                for t in range(2):
                    s_frags[nt + t] = self.add(warp.MmaOp(q_frags[kd], pair[t], s_frags[nt + t])).results[0]
        if a.causal or a.s % self.bn:
            limit = self.const(a.s) if a.s % self.bn else None
            s_frags = [self.add(warp.MaskOp(f, q_row, self.plus(kv, nt * 8), limit, a.causal, -math.inf)).results[0]
                       for nt, f in enumerate(s_frags)]

        # the online softmax (FA2): running max m, sum l, O rescaled by alpha
        c = a.scale * math.log2(math.e)
        m_block = self.add(warp.RowReduceOp("max", s_frags)).results[0]

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
            alpha = b(mathd.Exp2Op(b(arith.SubfOp(b(arith.MulfOp(m_prev, cf)), m_c))))
            return [m_new, m_c, alpha]

        m_new, m_c, alpha = self.map([m_old, m_block], [rows, rows, rows], new_max)

        def prob(b, x):
            s, mc = x
            cf = b(arith.ConstantOp(FloatAttr(c, f32)))
            return [b(mathd.Exp2Op(b(mathd.FmaOp(s, cf, b(arith.NegfOp(mc))))))]

        p_frags = [self.map([f, m_c], [acc], prob)[0] for f in s_frags]
        l_block = self.add(warp.RowReduceOp("add", p_frags)).results[0]
        [l_new] = self.map([l_old, alpha, l_block], [rows], lambda b, x: [b(mathd.FmaOp(x[0], x[1], x[2]))])
        o = [self.map([f, alpha], [acc], lambda b, x: [b(arith.MulfOp(x[0], x[1]))])[0] for f in o]

        # O += P V, P read as the A fragments of its k16 slices
        half = self.frag(warp.Operand.ACC, self.elem)
        p_half = [self.add(warp.CastOp(p, half)).results[0] for p in p_frags]
        p_lhs = [self.add(warp.ToLhsOp([p_half[2 * kk], p_half[2 * kk + 1]], self.frag(warp.Operand.A))).results[0]
                 for kk in range(self.bn // 16)]
        for kk in range(self.bn // 16):
            for dt in range(0, a.dv // 8, 2):
                if self.v_k_major:  # an N x K stage (V stored with S contiguous)
                    read = warp.LdMatrixOp(s_v, [stage, zero, zero], token, (dt * 8, kk * 16), b_type, 2)
                else:  # a K x N stage: V as stored
                    read = warp.LdMatrixOp(s_v, [stage, zero, zero], token, (kk * 16, dt * 8), b_type, 2, trans=True)
                pair = list(self.add(read).results)
                for t in range(2):
                    o[dt + t] = self.add(warp.MmaOp(p_lhs[kk], pair[t], o[dt + t])).results[0]
        self.add(gpu.BarrierOp())  # everyone is done with this stage before it is copied into again
        self.add(scf.YieldOp(*o, m_new, l_new))
        body.add_ops(self.ops)
        self.ops = outer
        loop = self.add(scf.ForOp(zero, blocks, self.const(1), [*o_init, m_init, l_init], body))
        results = list(loop.results)
        o_final, l_final = results[:-2], results[-1]

        # O / l, in the output's type
        out = [self.map([f, l_final], [acc], lambda b, x: [b(arith.DivfOp(x[0], x[1]))])[0] for f in o_final]
        o_elem = o_ref.type.element_type  # type: ignore[union-attr]
        if tile.element_name(o_elem) != "f32":
            out = [self.add(warp.CastOp(f, self.frag(warp.Operand.ACC, o_elem))).results[0] for f in out]
        o_window = self._store_window()
        for dt, f in enumerate(out):
            store = warp.StoreOp(f, o_ref, [bz, q_row, self.const(dt * 8)], o_window[0], o_window[1])
            store.col_align = IntegerAttr(8, i64)
            self.bounded(store, False, True)
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

    def _zero_acc(self, acc: warp.FragType) -> SSAValue:
        return self.add(warp.ConstantOp(FloatAttr(0.0, f64), acc)).results[0]

    def _load_of(self, mem) -> tuple[tuple[int, ...], tuple[int, int, int]]:
        """(window, extent) of the tile.load of argument `mem.param`."""
        for op in self.kernel.walk():
            if isinstance(op, tile.LoadOp) and op.source is self.kernel.body.block.args[mem.param]:
                shape = op.result.type.get_shape()  # type: ignore[union-attr]
                batch = shape[0] if len(shape) == 3 else 1
                return op.offset_values(), (batch, shape[-2], shape[-1])
        raise AssertionError("read_attention found the load")

    def _store_window(self) -> tuple[tuple[int, ...], tuple[int, int, int]]:
        store = next(o for o in self.kernel.walk() if isinstance(o, tile.StoreOp))
        shape = store.value.type.get_shape()  # type: ignore[union-attr]
        return store.offset_values(), (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])

    def _view(self, mem, ref: SSAValue) -> MemView:
        view = MemView.of(ref.type, self._load_of(mem)[0])  # type: ignore[arg-type]
        by_column = column_major(view)
        if copy_vector(view, by_column) < 4 or (view.row_stride != 1 and view.col_stride != 1):
            raise LoweringError(self.a.mma_s, f"attention: {ref.type} is not read in contiguous, 4-byte aligned rows "
                                              f"(cp.async); the schedule stages K and V with it")
        return view


@dataclass(frozen=True)
class TileAttention(ModulePass):
    """Rewrite every kernel holding a `tile.softmax` (attention, `read_attention`) into the
    FlashAttention-2 schedule at the warp level."""

    name = "tile-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            if is_attention(kernel):
                _Attention(kernel, read_attention(kernel)).run()
