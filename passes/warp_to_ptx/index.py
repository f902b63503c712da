"""`warp-to-ptx` patterns for what is not a warp op: index arithmetic (`arith`, 32-bit unsigned,
folded where both sides are immediates), thread and block ids (`gpu`), the K loop (`scf.for`
with its `iter_args` in registers, laid out as a bottom-tested loop once its body is PTX),
uniform branches (`scf.if`) and the kernel's `func.return`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from tilemma.dialects import ptx, tile, warp
from tilemma.dialects.ptx_builder import BANKS
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.state import (
    _PTX_OPS,
    LoweringState,
    _bank_of,
    _finish,
    _Loop,
    all_regs,
    reg,
)

# ---------------------------------------------------------------------------------------------
# Index arithmetic and ids.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerConstant(RewritePattern):
    """`arith.constant` becomes an immediate."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.value, IntegerAttr) or in_map_body(op):
            return
        rewriter.replace(op, ptx.RegsOp([str(op.value.value.data)], op.result.type))


def in_map_body(op: Operation) -> bool:
    """Scalar ops of a `warp.map` body are the map's to lower, not index arithmetic."""
    return isinstance(op.parent_op(), warp.MapOp)


_ARITH = {
    arith.AddiOp: ("add.u32", lambda a, b: a + b),
    arith.SubiOp: ("sub.u32", lambda a, b: a - b),
    arith.MuliOp: ("mul.lo.u32", lambda a, b: a * b),
    arith.DivUIOp: ("div.u32", lambda a, b: a // b),
    arith.RemUIOp: ("rem.u32", lambda a, b: a % b),
    arith.MinUIOp: ("min.u32", min),
}


@dataclass
class LowerArith(RewritePattern):
    """32-bit unsigned `arith` on index values (the table `_ARITH`); constants fold."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.DivUIOp | arith.RemUIOp
                          | arith.MinUIOp, rewriter: PatternRewriter) -> None:
        if in_map_body(op):  # (the annotation lists _ARITH's keys)
            return
        lhs, rhs = reg(op.operands[0]), reg(op.operands[1])
        if lhs is None or rhs is None:
            return
        opcode, fold = _ARITH[type(op)]
        if not lhs.startswith("%") and not rhs.startswith("%"):
            value = fold(int(lhs), int(rhs))
            rewriter.replace(op, ptx.RegsOp([str(value)], op.results[0].type))
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        d = e.reg("b32")
        e.emit(opcode, d, e.in_register(lhs), rhs)
        _finish(op, rewriter, e, [[d]])

@dataclass
class LowerDim(RewritePattern):
    """`memref.dim` of a kernel argument: the register its `?` size was loaded into at the
    kernel's entry (a static size is its immediate)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DimOp, rewriter: PatternRewriter) -> None:
        base, index = reg(op.source), reg(op.index)
        if base is None or index is None:
            return
        ref = op.source.type
        if not index.isdigit() or not isinstance(ref, MemRefType) or int(index) >= len(ref.get_shape()):
            raise LoweringError(op, "warp-to-ptx: memref.dim needs a constant dimension of the memref")
        static = ref.get_shape()[int(index)]
        symbols = self.state.kernel(op).memrefs.get(base)
        size = str(static) if static >= 0 else symbols.sizes[int(index)] if symbols else None
        if size is None:
            raise LoweringError(op, "warp-to-ptx: memref.dim reads a size of a kernel argument")
        rewriter.replace(op, ptx.RegsOp([size], op.result.type))


@dataclass
class LowerTransposeView(RewritePattern):
    """`tile.transpose_view` of a kernel argument: the argument's own pointer register, typed as the
    view, whose strides its readers and writers take (only static views reach here: `read_kernel`)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.TransposeViewOp, rewriter: PatternRewriter) -> None:
        base = reg(op.source)
        if base is None:
            return
        kernel = self.state.kernel(op)
        if base not in kernel.args or kernel.memrefs.get(base):
            raise LoweringError(op, "warp-to-ptx: tile.transpose_view views a kernel argument of static sizes")
        rewriter.replace(op, ptx.RegsOp([base], op.result.type))


_SPECIAL = {gpu.ThreadIdOp: "%tid", gpu.BlockIdOp: "%ctaid"}


@dataclass
class LowerId(RewritePattern):
    """`gpu.thread_id` / `gpu.block_id` read the special registers."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: gpu.ThreadIdOp | gpu.BlockIdOp, rewriter: PatternRewriter) -> None:
        e = fio.Emitter(self.state.kernel(op).regs)
        d = e.reg("b32")
        e.emit("mov.u32", d, f"{_SPECIAL[type(op)]}.{op.dimension.data.value.lower()}")
        _finish(op, rewriter, e, [[d]])


# ---------------------------------------------------------------------------------------------
# The K loop.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerFor(RewritePattern):
    """`scf.for` with a constant step: first its block arguments get registers; once the body is
    PTX, the loop is laid out in place (a bottom-tested loop, behind a test for no iteration where a
    bound is known only at launch: K's, or a persistent kernel's first tile, its CTA's index)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        kernel = self.state.kernel(op)
        body = op.body.block
        if op not in self.state.loops:
            inits = all_regs(op.iter_args)
            if inits is None:
                return
            loop = _Loop(kernel.regs.reg("b32"), [])
            for arg, init in zip(body.args[1:], inits):
                if not init:  # no registers (an async token)
                    loop.carried.append([])
                    continue
                # the accumulators (and prefetched fragments), or a fill's words (`!warp.staged`)
                # and a softmax's running rows (`!warp.rows`, f32), or a count (a persistent
                # kernel's stage ring, index)
                assert isinstance(arg.type, warp.FragType | warp.StagedType | warp.RowsType | IndexType)
                bank = (_bank_of(arg.type) if isinstance(arg.type, warp.FragType)
                        else "f32" if isinstance(arg.type, warp.RowsType) else "b32")
                loop.carried.append([kernel.regs.reg(bank) for _ in init])
            self.state.loops[op] = loop
            first = body.first_op
            for arg, names in zip(body.args, [[loop.iv]] + loop.carried):
                bound = ptx.RegsOp(names, arg.type)
                rewriter.insert(bound, InsertPoint.before(first) if first else InsertPoint.at_end(body))
                arg.replace_all_uses_with(bound.result)
            return
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        yielded = all_regs(yield_op.operands)
        if any(not isinstance(o, _PTX_OPS) for o in body.ops if o is not yield_op) or yielded is None:
            return
        lb, ub, step = reg(op.lb), reg(op.ub), reg(op.step)
        if lb is None or ub is None or step is None:
            return
        if not step.lstrip("-").isdigit():
            raise LoweringError(op, "warp-to-ptx: scf.for needs a constant step")
        loop = self.state.loops.pop(op)
        e = fio.Emitter(kernel.regs)
        inits = all_regs(op.iter_args)
        assert inits is not None  # they were before the body was
        static = all(x.lstrip("-").isdigit() for x in (lb, ub))
        if static and int(lb) >= int(ub):  # no iteration: the results are the initial values
            _finish(op, rewriter, e, inits)
            return
        for dst, src in zip(loop.carried, inits):
            _copy(e, dst, src)
        e.emit("mov.u32", loop.iv, lb)
        done = None
        if not static:  # a bound known at launch (uniform): none, or some iterations
            done = kernel.regs.label("k_done")
            empty = e.reg("pred")
            e.emit("setp.ge.u32", empty, lb, ub)
            e.emit("bra.uni", done, guard=empty)
        start = kernel.regs.label("k_loop")
        e.ops.append(ptx.LabelOp(start))
        rewriter.insert(e.ops, InsertPoint.before(op))
        rewriter.erase(yield_op)
        rewriter.inline_block(body, InsertPoint.before(op))
        tail = fio.Emitter(kernel.regs)
        for dst, src in zip(loop.carried, yielded):
            _copy(tail, dst, src)
        more = tail.reg("pred")
        tail.emit("add.u32", loop.iv, loop.iv, step)
        tail.emit("setp.lt.u32", more, loop.iv, ub)
        tail.emit("bra.uni", start, guard=more)
        if done is not None:
            tail.ops.append(ptx.LabelOp(done))
        _finish(op, rewriter, tail, loop.carried)


_CMPI = {"ult": "lt.u32", "ule": "le.u32", "ugt": "gt.u32", "uge": "ge.u32", "eq": "eq.u32", "ne": "ne.u32"}


@dataclass
class LowerCmpi(RewritePattern):
    """`arith.cmpi` (unsigned, on index values) as a `setp` into a predicate register."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
        if in_map_body(op):
            return
        lhs, rhs = reg(op.lhs), reg(op.rhs)
        if lhs is None or rhs is None:
            return
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        if predicate not in _CMPI:
            raise LoweringError(op, f"warp-to-ptx: arith.cmpi {predicate} is not supported (unsigned index comparisons)")
        e = fio.Emitter(self.state.kernel(op).regs)
        p = e.reg("pred")
        e.emit(f"setp.{_CMPI[predicate]}", p, e.in_register(lhs), rhs)
        _finish(op, rewriter, e, [[p]])


@dataclass
class LowerIf(RewritePattern):
    """`scf.if` without results or else branch, on a condition the whole CTA shares: a uniform
    branch around the lowered body."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.IfOp, rewriter: PatternRewriter) -> None:
        if op.results or (op.false_region.blocks and len(op.false_region.block.ops) > 1):
            raise LoweringError(op, "warp-to-ptx: scf.if with results or an else branch is not supported")
        cond = reg(op.cond)
        body = op.true_region.block
        yield_op = body.last_op
        if cond is None or any(not isinstance(o, _PTX_OPS) for o in body.ops if o is not yield_op):
            return
        kernel = self.state.kernel(op)
        skip = kernel.regs.label("skip")
        e = fio.Emitter(kernel.regs)
        e.emit("bra.uni", skip, guard=f"!{cond}")
        rewriter.insert(e.ops, InsertPoint.before(op))
        if yield_op is not None:
            rewriter.erase(yield_op)
        rewriter.inline_block(body, InsertPoint.before(op))
        rewriter.replace(op, ptx.LabelOp(skip), [])


def _copy(e: fio.Emitter, dst: list[str], src: list[str]) -> None:
    for d, s in zip(dst, src):
        if d != s:
            e.emit(f"mov.{_bank_name(d)}", d, s)


def _bank_name(register: str) -> str:
    for bank, prefix in sorted(BANKS.items(), key=lambda kv: -len(kv[1])):
        if register.startswith(prefix):
            return bank
    raise AssertionError(register)


@dataclass
class LowerReturn(RewritePattern):
    """A kernel's `func.return`: `ret`."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        if op.parent_op() not in self.state.kernels:
            return
        rewriter.replace(op, ptx.InstOp("ret"), [])
