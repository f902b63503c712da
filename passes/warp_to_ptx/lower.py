"""`warp-to-ptx`: lowers warp-level kernels to one `ptx.module`, one small pattern per op.

PTX registers are names, not SSA values, so while the patterns run, each lowered value is
replaced by a `ptx.regs` op that names its registers (or holds an immediate); a pattern fires
once its operands are in registers and puts the PTX for its op in front of it. Index arithmetic
(`arith`) is 32-bit; a fragment's registers come from its type's layout. `scf.for` becomes a
loop with the `iter_args` in registers: an accumulator used by exactly one `warp.mma` is updated
in place, so the loop needs no copies. Once a kernel holds only PTX, it becomes a `ptx.entry`
that keeps the launch shape and the argument ABI; all kernels of a target share one module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from math import prod

from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, IntegerAttr, MemRefType, ModuleOp, StringAttr, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from tilemma.compiler.layouts import fragments, scale_fragments
from tilemma.compiler.layouts import sparse_format as fmt
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects.ptx_builder import BANKS, RegisterFile
from tilemma.dialects import ptx, tile, warp
from tilemma.dialects.schedule import ScheduleAttr
from tilemma.dialects.tile import element_name
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import PTX_TYPE
from tilemma.passes.warp_to_ptx.memref_strides import window_of
from tilemma.passes.tile.select_mma import scale_count
from tilemma.passes.warp_to_ptx.sparse_a import SparseALoader, metadata_linear

_PTX_OPS = (ptx.InstOp, ptx.MmaOp, ptx.LabelOp, ptx.CommentOp, ptx.RegsOp)


SHARED_SYMBOL = "smem"  # the kernel's dynamic shared memory (.extern .shared)


@dataclass
class _Kernel:
    regs: RegisterFile
    lane: str
    shared_bytes: int = 0
    entry: Operation | None = None  # the last op of the preamble: thread-invariant code goes after it
    hoisted: dict[tuple, list] = field(default_factory=dict)

    def thread_invariant(self, key: tuple, build) -> list:
        """Registers computed once at the kernel's entry by `build(emitter)` (shared by every op
        asking with the same key): values that depend only on the thread index."""
        if key not in self.hoisted:
            e = fio.Emitter(self.regs)
            self.hoisted[key] = build(e)
            assert self.entry is not None
            anchor = self.entry
            block = anchor.parent_block()
            assert block is not None
            for o in e.ops:
                block.insert_op_after(o, anchor)
                anchor = o
            self.entry = anchor
        return self.hoisted[key]


@dataclass
class _Loop:
    iv: str
    carried: list[list[str]]


@dataclass
class LoweringState:
    """What the patterns of one pass run share: each kernel's register file and lane register,
    and the registers of the loops being lowered."""

    kernels: dict[func.FuncOp, _Kernel] = field(default_factory=dict)
    loops: dict[scf.ForOp, _Loop] = field(default_factory=dict)

    def kernel(self, op: Operation) -> _Kernel:
        parent = op.parent_op()
        while not isinstance(parent, func.FuncOp):
            assert parent is not None
            parent = parent.parent_op()
        return self.kernels[parent]


def regs(value: SSAValue) -> list[str] | None:
    """The registers of a lowered value (None while it is not lowered yet)."""
    return value.owner.names() if isinstance(value.owner, ptx.RegsOp) else None


def reg(value: SSAValue) -> str | None:
    r = regs(value)
    return r[0] if r else None


def _finish(op: Operation, rewriter: PatternRewriter, e: fio.Emitter, results: list[list[str]] | None = None) -> None:
    """Insert the emitted PTX before the matched op; replace its results by their registers."""
    rewriter.insert(e.ops, InsertPoint.before(op))
    if results is None:
        rewriter.erase(op)
        return
    new = [ptx.RegsOp(r, res.type) for r, res in zip(results, op.results)]
    rewriter.replace(op, new, [n.result for n in new])


# ---------------------------------------------------------------------------------------------
# Index arithmetic and ids.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerConstant(RewritePattern):
    """`arith.constant` becomes an immediate."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.value, IntegerAttr):
            return
        rewriter.replace(op, ptx.RegsOp([str(op.value.value.data)], op.result.type))


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

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) not in _ARITH:
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
        if rhs.isdigit() and int(rhs) > 0 and int(rhs) & (int(rhs) - 1) == 0 and type(op) in _POW2:
            opcode, rhs = _POW2[type(op)](int(rhs))  # unsigned division by 2^n: a shift or a mask
        e.emit(opcode, d, e.in_register(lhs), rhs)
        _finish(op, rewriter, e, [[d]])


_POW2 = {
    arith.DivUIOp: lambda v: ("shr.u32", str(v.bit_length() - 1)),
    arith.RemUIOp: lambda v: ("and.b32", str(v - 1)),
}

_SPECIAL = {gpu.ThreadIdOp: "%tid", gpu.BlockIdOp: "%ctaid"}


@dataclass
class LowerId(RewritePattern):
    """`gpu.thread_id` / `gpu.block_id` read the special registers."""

    state: LoweringState

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, (gpu.ThreadIdOp, gpu.BlockIdOp)):
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        d = e.reg("b32")
        e.emit("mov.u32", d, f"{_SPECIAL[type(op)]}.{op.dimension.data.value.lower()}")
        _finish(op, rewriter, e, [[d]])


# ---------------------------------------------------------------------------------------------
# The K loop.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerFor(RewritePattern):
    """`scf.for` with static bounds and at least one iteration: first its block arguments get
    registers; once the body is PTX, the loop is laid out in place (a bottom-tested loop)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        kernel = self.state.kernel(op)
        body = op.body.block
        if op not in self.state.loops:
            inits = [regs(v) for v in op.iter_args]
            if any(r is None for r in inits):
                return
            loop = _Loop(kernel.regs.reg("b32"), [])
            for arg, init in zip(body.args[1:], inits):
                if not init:  # no registers (an async token)
                    loop.carried.append([])
                    continue
                bank = _bank_of(arg.type)  # type: ignore[arg-type]
                loop.carried.append([kernel.regs.reg(bank) for _ in init])  # type: ignore[union-attr]
            self.state.loops[op] = loop
            first = body.first_op
            for arg, names in zip(body.args, [[loop.iv]] + loop.carried):
                bound = ptx.RegsOp(names, arg.type)
                rewriter.insert(bound, InsertPoint.before(first) if first else InsertPoint.at_end(body))
                arg.replace_all_uses_with(bound.result)
            return
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        yielded = [regs(v) for v in yield_op.operands]
        if any(not isinstance(o, _PTX_OPS) for o in body.ops if o is not yield_op) or any(r is None for r in yielded):
            return
        lb, ub, step = reg(op.lb), reg(op.ub), reg(op.step)
        if lb is None or ub is None or step is None:
            return
        if not all(x.lstrip("-").isdigit() for x in (lb, ub, step)):
            raise LoweringError(op, "warp-to-ptx: scf.for needs constant bounds and step")
        loop = self.state.loops.pop(op)
        e = fio.Emitter(kernel.regs)
        inits = [regs(v) for v in op.iter_args]
        if int(lb) >= int(ub):  # no iteration: the results are the initial values
            _finish(op, rewriter, e, inits)  # type: ignore[arg-type]
            return
        for dst, src in zip(loop.carried, inits):
            _copy(e, dst, src)  # type: ignore[arg-type]
        e.emit("mov.u32", loop.iv, lb)
        start = kernel.regs.label("k_loop")
        e.ops.append(ptx.LabelOp(start))
        rewriter.insert(e.ops, InsertPoint.before(op))
        rewriter.erase(yield_op)
        rewriter.inline_block(body, InsertPoint.before(op))
        tail = fio.Emitter(kernel.regs)
        for dst, src in zip(loop.carried, yielded):
            _copy(tail, dst, src)  # type: ignore[arg-type]
        more = tail.reg("pred")
        tail.emit("add.u32", loop.iv, loop.iv, step)
        tail.emit("setp.lt.u32", more, loop.iv, ub)
        tail.emit("bra.uni", start, guard=more)
        _finish(op, rewriter, tail, loop.carried)


_CMPI = {"ult": "lt.u32", "ule": "le.u32", "ugt": "gt.u32", "uge": "ge.u32", "eq": "eq.u32", "ne": "ne.u32"}


@dataclass
class LowerCmpi(RewritePattern):
    """`arith.cmpi` (unsigned, on index values) as a `setp` into a predicate register."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
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


# ---------------------------------------------------------------------------------------------
# Fragments.
# ---------------------------------------------------------------------------------------------


def _layout(frag: warp.FragType) -> fragments.FragmentLayout:
    lays = instruction_layouts(frag.variant)
    return {warp.Operand.A: lays.a, warp.Operand.B: lays.b, warp.Operand.ACC: lays.c}[frag.role]


def _ptx_type(frag: warp.FragType) -> str:
    return PTX_TYPE[element_name(frag.element)]


def _bank_of(frag: warp.FragType) -> str:
    """Register bank of a fragment: .f32/.f64 for float accumulators and f32 data, .f64 for
    64-bit operands, else .b32 (packed and integer data)."""
    if frag.role in (warp.Operand.META, warp.Operand.SCALE_A, warp.Operand.SCALE_B):
        return "b32"  # (a metadata word's element is i32, which has no PTX operand type)
    t = _ptx_type(frag)
    if t == "f64":
        return "f64"
    if t == "f32" and (frag.role == warp.Operand.ACC or _layout(frag).reg_bits == 32):
        return "f32"
    return "b32"


def _count(frag: warp.FragType) -> int:
    if frag.role in (warp.Operand.META, warp.Operand.SCALE_A, warp.Operand.SCALE_B):
        return 1
    return _layout(frag).regs


@dataclass
class LowerFragConstant(RewritePattern):
    """`warp.constant`: every register of the fragment set to the splat."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.ConstantOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        e = fio.Emitter(self.state.kernel(op).regs)
        bank = _bank_of(frag)
        out = e.reg_list(bank, _count(frag))
        literal = fio.splat_literal(op.scalar(), frag.variant.ctype)
        for r in out:
            e.emit(f"mov.{bank}", r, literal)
        _finish(op, rewriter, e, [out])


def _open(e: fio.Emitter, op, lane: str, weights: tuple[tuple[int, ...], tuple[int, ...]],
          col_scale: int = 1) -> fio.Access | None:
    """Per-lane access of a window op: lane part of the coordinates (columns scaled by
    `col_scale`, compressed -> dense) plus the op's indices."""
    base, idx = reg(op.ref), [reg(i) for i in op.indices]
    if base is None or any(i is None for i in idx):
        return None
    batch, row0, col0 = idx
    row = e.lane_linear(lane, weights[0], row0)
    if col_scale == 1:
        col = e.lane_linear(lane, weights[1], col0)
    else:
        col = e.lane_linear(lane, weights[1], "0")
        e.emit("mul.lo.u32", col, col, col_scale)
        e.emit("add.u32", col, col, col0)
    return fio.open_access(e, window_of(op), base, batch, row, col)  # type: ignore[arg-type]


@dataclass
class LowerLoad(RewritePattern):
    """`warp.load`: each value from its place in the window, converted, packed into registers."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        e = fio.Emitter(kernel.regs)
        access = _open(e, op, kernel.lane, (lin.row_w, lin.col_w))
        if access is None:
            return
        bank = _bank_of(frag)
        out = e.reg_list(bank, lay.regs)
        rounding = str(op.rounding.data) if op.rounding is not None else None
        fio.fill_fragment(e, out, access, lin, lay, bank, _ptx_type(frag), rounding)
        _finish(op, rewriter, e, [out])


@dataclass
class LowerStore(RewritePattern):
    """`warp.store`: each accumulator value to its place in the window."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.StoreOp, rewriter: PatternRewriter) -> None:
        frag = op.value.type
        assert isinstance(frag, warp.FragType)
        values = regs(op.value)
        if values is None:
            return
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        e = fio.Emitter(kernel.regs)
        access = _open(e, op, kernel.lane, (lin.row_w, lin.col_w))
        if access is None:
            return
        fio.store_fragment(e, values, access, lin, lay, _bank_of(frag))
        _finish(op, rewriter, e)


@dataclass
class LowerSparseA(RewritePattern):
    """`warp.load_sparse_a`: dense chunks read, compressed in registers (`sparse_a`)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadSparseAOp, rewriter: PatternRewriter) -> None:
        frag = op.values.type
        assert isinstance(frag, warp.FragType)
        v = frag.variant
        error = reg(op.error) if op.error is not None else None
        batch = reg(op.indices[0])
        if (op.error is not None and error is None) or batch is None:
            return
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin_a, lin_e = fragments.linear_form(lay), metadata_linear(v)
        e = fio.Emitter(kernel.regs)
        loader = SparseALoader(e, v, op.prune is not None, error, batch)
        geo = loader.geo
        # A's lane columns count kept elements (chunk/kept apart), the metadata's count fields
        # (two per chunk): both scale to dense columns.
        a = _open(e, op, kernel.lane, (lin_a.row_w, lin_a.col_w), geo.chunk // geo.kept)
        meta = _open(e, op, kernel.lane, (lin_e.row_w, lin_e.col_w), geo.chunk // 2)
        if a is None or meta is None:
            return
        values, word = e.reg_list("b32", lay.regs), e.reg("b32")
        loader.fill_a(a, values, lin_a, lay)
        loader.fill_metadata(meta, word, lin_e)
        _finish(op, rewriter, e, [values, [word]])


@dataclass
class LowerLoadMeta(RewritePattern):
    """`warp.load_meta`: one `ld.global.v{count}.u32` per lane at its words of the metadata row
    (`sparse_format`: word 64 * (step // 4) + 4 * q + step % 4 of the row of tile row // 16,
    q = 2 * (lane // 4) + lane % 2; lanes at quad positions 2 and 3 repeat their neighbours',
    which the instruction ignores), predicated on the tile and the K group existing (else the
    filler: the staged loop loads stages ahead, past the last)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadMetaOp, rewriter: PatternRewriter) -> None:
        base, idx = reg(op.ref), [reg(i) for i in op.indices]
        if base is None or any(i is None for i in idx):
            return
        batch, row, k = idx
        kernel = self.state.kernel(op)
        ref = op.ref.type
        assert isinstance(ref, MemRefType)
        shape = ref.get_shape()
        tiles, width = shape[-2:]
        batch_bytes = 4 * tiles * width if len(shape) == 3 and shape[0] > 1 else 0

        def lane_bytes(e: fio.Emitter) -> list:
            quad, odd, off = e.reg("b32"), e.reg("b32"), e.reg("b32")
            e.emit("bfe.u32", quad, kernel.lane, 2, 3)
            e.emit("and.b32", odd, kernel.lane, 1)
            e.emit("shl.b32", quad, quad, 1)
            e.emit("add.u32", quad, quad, odd)
            e.emit("mul.lo.u32", off, quad, 4 * fmt.STEPS_PER_GROUP)
            return [off]

        [lane_off] = kernel.thread_invariant(("meta-lane",), lane_bytes)
        e = fio.Emitter(kernel.regs)
        tile_, step, group, within, off = (e.reg("b32") for _ in range(5))
        e.emit("shr.u32", tile_, e.in_register(row), 4)  # type: ignore[arg-type]
        inside, in_row = e.reg("pred"), e.reg("pred")
        e.emit("setp.lt.u32", inside, tile_, tiles)
        e.emit("shr.u32", step, e.in_register(k), 5)  # type: ignore[arg-type]
        e.emit("shr.u32", group, step, 2)
        e.emit("setp.lt.u32", in_row, group, width // fmt.GROUP_WORDS)
        e.emit("and.pred", inside, inside, in_row)
        e.emit("and.b32", within, step, fmt.STEPS_PER_GROUP - 1)
        e.emit("mad.lo.u32", off, tile_, 4 * width, lane_off)
        e.emit("mad.lo.u32", off, group, 4 * fmt.GROUP_WORDS, off)
        e.emit("mad.lo.u32", off, within, 4, off)
        addr = e.reg("b64")
        e.emit("cvt.u64.u32", addr, off)
        if batch_bytes:
            t = e.reg("b64")
            fio._mul_wide(e, t, batch, batch_bytes)  # type: ignore[arg-type]
            e.emit("add.s64", addr, addr, t)
        e.emit("add.s64", addr, addr, base)
        out = e.reg_list("b32", len(op.fragments))
        for r in out:
            e.emit("mov.b32", r, fmt.FILLER)
        vec = f".v{len(out)}" if len(out) > 1 else ""
        dst = "{" + ", ".join(out) + "}" if len(out) > 1 else out[0]
        e.emit(f"ld.global{vec}.u32", dst, f"[{addr}]", guard=inside)
        _finish(op, rewriter, e, [[r] for r in out])


@dataclass
class LowerScale(RewritePattern):
    """`warp.load_scale`: byte j of the lane's register = the scale of K block j of the
    instruction, for the canonical selectors {0, 0} (lanes at byte j hold K block j)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadScaleOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        is_a = frag.role == warp.Operand.SCALE_A
        weights, per_instr = scale_fragments.scale_linear("a" if is_a else "b", f"{scale_count(frag.variant)}X")
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        no_lane = (0,) * len(weights)
        access = _open(e, op, kernel.lane, (weights, no_lane) if is_a else (no_lane, weights))
        if access is None:
            return
        out = e.reg("b32")
        e.emit("mov.b32", out, 0)
        for j in range(per_instr):
            row, col = (0, j) if is_a else (j, 0)
            t = e.reg("b32")
            fio.load_element(e, access, access.window.offset(row, col), access.pred(e, row, col), t, "b32")
            e.emit("bfi.b32", out, t, out, 8 * j, 8)
        _finish(op, rewriter, e, [[out]])


@dataclass
class LowerSplitTf32(RewritePattern):
    """`warp.split_tf32`: hi = tf32(x), lo = tf32(x - hi), both rounded rna."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.SplitTf32Op, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        if src is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        hi, lo = e.reg_list("b32", len(src)), e.reg_list("b32", len(src))
        for x, h, l in zip(src, hi, lo):
            hi_f, rest = e.reg("f32"), e.reg("f32")
            e.emit("cvt.rna.tf32.f32", h, x)
            e.emit("mov.b32", hi_f, h)
            e.emit("sub.f32", rest, x, hi_f)
            e.emit("cvt.rna.tf32.f32", l, rest)
        _finish(op, rewriter, e, [hi, lo])


@dataclass
class LowerWiden(RewritePattern):
    """`warp.widen`: per source register, its low four nibbles (K 8t..8t+3) and high four
    (8t+4..8t+7) spread to bytes, sign-extended for s4; A's registers (rows g, g+8; K halves)
    regroup as each half's a0..a3, B's as b0, b1."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.WidenOp, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        if src is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        signed = element_name(op.source.type.element) == "si4"  # type: ignore[union-attr]

        def spread(r: str, high: bool) -> str:
            """Four nibbles of r to the four bytes of a new register."""
            x, t = e.reg("b32"), e.reg("b32")
            e.emit("shr.u32" if high else "and.b32", x, r, 16 if high else 0xFFFF)
            e.emit("shl.b32", t, x, 8)  # nibble pairs to bytes 0 and 2
            e.emit("or.b32", x, x, t)
            e.emit("and.b32", x, x, 0x00FF00FF)
            e.emit("shl.b32", t, x, 4)  # then one nibble a byte
            e.emit("or.b32", x, x, t)
            e.emit("and.b32", x, x, 0x0F0F0F0F)
            if signed:  # bit 3 set: the byte's top four bits too (8 x 30 = 0xF0, no carry out)
                e.emit("and.b32", t, x, 0x08080808)
                e.emit("mul.lo.u32", t, t, 30)
                e.emit("or.b32", x, x, t)
            return x

        if len(src) == 4:  # A: rows g and g+8 of K half 0 (a0, a1), then of half 1 (a2, a3)
            halves = [[spread(src[2 * h], False), spread(src[2 * h + 1], False),
                       spread(src[2 * h], True), spread(src[2 * h + 1], True)] for h in (0, 1)]
        else:  # B: one register a K half
            halves = [[spread(r, False), spread(r, True)] for r in src]
        _finish(op, rewriter, e, halves)


@dataclass
class LowerMma(RewritePattern):
    """`warp.mma`: one `mma` instruction; d reuses c's registers when this is c's only use."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MmaOp, rewriter: PatternRewriter) -> None:
        groups = [regs(x) for x in (op.a, op.b, op.c)]
        extra_values = [x for x in (op.metadata, op.scale_a, op.scale_b) if x is not None]
        extras = [reg(x) for x in extra_values]
        if any(g is None for g in groups) or any(x is None for x in extras):
            return
        a, b, c = groups
        frag = op.c.type
        assert isinstance(frag, warp.FragType)
        e = fio.Emitter(self.state.kernel(op).regs)
        in_place = op.c.has_one_use() and all(r.startswith("%") for r in c)  # type: ignore[union-attr]
        d = list(c) if in_place else e.reg_list(_bank_of(frag), len(c))  # type: ignore[arg-type]
        extra: list[str] = []
        if op.metadata is not None:
            extra += [extras.pop(0), "0"]  # type: ignore[list-item]
        if op.scale_a is not None:
            extra += [extras[0], "{0, 0}", extras[1], "{0, 0}"]  # type: ignore[list-item]
        e.ops.append(ptx.MmaOp(frag.variant.opcode, d, a, b, c, extra))  # type: ignore[arg-type]
        _finish(op, rewriter, e, [d])


@dataclass
class LowerReturn(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        if op.parent_op() not in self.state.kernels:
            return
        rewriter.replace(op, ptx.InstOp("ret"), [])


# ---------------------------------------------------------------------------------------------
# Shared memory.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerSharedAlloc(RewritePattern):
    """`memref.alloc` in shared memory: a 128-byte aligned slice of the kernel's dynamic shared
    memory; the value is its 32-bit shared address."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        ref = op.memref.type
        if not warp.is_shared(ref):
            return
        kernel = self.state.kernel(op)
        offset = -(-kernel.shared_bytes // 128) * 128
        size = prod(ref.get_shape()) * tile.element_bits(element_name(ref.element_type)) // 8  # type: ignore[union-attr]
        kernel.shared_bytes = offset + size
        e = fio.Emitter(kernel.regs)
        r = e.reg("b32")
        e.emit("mov.u32", r, SHARED_SYMBOL)
        if offset:
            e.emit("add.u32", r, r, offset)
        _finish(op, rewriter, e, [[r]])


def _shared_geometry(ref: MemRefType) -> tuple[int, int, int]:
    """(bits per element, bytes per row, bytes per stage) of a stages x rows x cols buffer
    (sub-byte elements packed, as in global memory)."""
    _, rows, cols = ref.get_shape()
    bits = tile.element_bits(element_name(ref.element_type))
    return bits, cols * bits // 8, rows * cols * bits // 8


def _column_bytes(e: fio.Emitter, dst: str, col: str, bits: int, sign: str = "u") -> None:
    """dst = the bytes of `col` elements (whole bytes for sub-byte elements: staged reads and
    copies start at 16-byte granules, and sub-byte extents end on a byte); `sign` "s" for a
    count that may be negative."""
    if bits >= 8:
        e.emit(f"mul.lo.{sign}32", dst, col, bits // 8)
    else:
        e.emit(f"shr.{sign}32", dst, col, (8 // bits).bit_length() - 1)


def _stage_read(op: warp.LdMatrixOp | warp.LoadSharedOp):
    """The registers of a stage read's buffer and (stage, row, col) indices, None until all are
    lowered, then the buffer's geometry (`_shared_geometry`)."""
    base, idx = reg(op.ref), [reg(i) for i in op.indices]
    if base is None or any(i is None for i in idx):
        return None
    return (base, *idx, *_shared_geometry(op.ref.type))  # type: ignore[arg-type]


def _round_tf32(e: fio.Emitter, op: warp.LdMatrixOp | warp.LoadSharedOp, regs: list[str]) -> None:
    """An f32 buffer read as tf32 fragments: each register converted as the op's rounding says."""
    if op.rounding is not None:
        for r in regs:
            e.emit(f"cvt.{op.rounding.data.value}.tf32.f32", r, r)  # type: ignore[union-attr]


def _shared_address(e: fio.Emitter, base: str, stage: str, stage_bytes: int, row: str, row_bytes: int,
                    col_bytes: str, swizzle: bool, mult: int = 1) -> str:
    """Shared address of (stage, row, byte column), with the granule swizzle if asked."""
    # the part that does not depend on the stage first (loop-invariant where row and column are)
    offset = _shared_offset(e, row, row_bytes, col_bytes, swizzle, mult)
    addr = e.reg("b32")
    e.emit("mad.lo.u32", addr, e.in_register(stage), stage_bytes, base)
    e.emit("add.u32", addr, addr, offset)
    return addr


def _shared_offset(e: fio.Emitter, row: str, row_bytes: int, col_bytes: str, swizzle: bool, mult: int = 1) -> str:
    """Byte offset of (row, byte column) within a stage, swizzled if asked (phase multiplier
    `mult`, warp.SwizzleAttr)."""
    offset = e.reg("b32")
    if swizzle:  # the emitted form of warp.swizzle_granule
        per_line, period = warp.swizzle_phases(row_bytes)
        e.emit("shr.u32", offset, row, per_line.bit_length() - 1)
        if mult != 1:
            e.emit("mul.lo.u32", offset, offset, mult)
        e.emit("and.b32", offset, offset, period - 1)
        e.emit("shl.b32", offset, offset, 4)
        e.emit("xor.b32", offset, offset, col_bytes)  # granule ^ phase, offset within it kept
    else:
        e.emit("mov.u32", offset, col_bytes)
    e.emit("mad.lo.u32", offset, row, row_bytes, offset)
    return offset


@dataclass
class LowerCopyAsync(RewritePattern):
    """`warp.copy_async`: thread t copies chunks t, t + T, ... of the tile (row-major chunks of
    `vector` bytes), each a `cp.async`. The address is the tile origin's (uniform: the only part
    that moves with K) plus the thread's byte offset (loop-invariant), so the K loop advances
    one pointer. Unless `in_bounds` says the tile lies inside the window, each chunk's source
    size is the part inside the window (0 past its edge: nothing is read, it is zero-filled)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.CopyAsyncOp, rewriter: PatternRewriter) -> None:
        ptr, dst, stage = reg(op.ref), reg(op.dest), reg(op.stage)
        idx = [reg(i) for i in op.indices]
        if ptr is None or dst is None or stage is None or any(i is None for i in idx):
            return
        batch, row0, col0 = (x for x in idx)
        window = window_of(op)
        # The shared rows run along the window's `outer` dimension, their contiguous chunks along
        # `inner` (rows and columns of the window, swapped when the copy transposes).
        t = op.transpose is not None
        outer, inner = (2, 1) if t else (1, 2)
        if window.strides[inner] != 1:
            raise LoweringError(op, "warp.copy_async copies runs of contiguous elements: the window's "
                                f"{'rows' if t else 'columns'} must have stride 1")
        o0, i0 = (col0, row0) if t else (row0, col0)
        o_in, i_in = window.in_bounds[outer - 1], window.in_bounds[inner - 1]
        o_ext, i_ext = window.extent[outer], window.extent[inner]
        ref = op.dest.type
        assert isinstance(ref, MemRefType)
        bits, row_bytes, stage_bytes = _shared_geometry(ref)
        _, rows, _ = ref.get_shape()
        w = op.vector.value.data
        threads = op.threads.value.data
        per_row = row_bytes // w
        total = rows * per_row
        kernel = self.state.kernel(op)
        row_step, swizzle = window.strides[outer] * bits // 8, op.swizzle is not None
        mult = warp.swizzle_mult(op)
        chunks = -(-total // threads)

        def thread_parts(e: fio.Emitter) -> list:
            """Per chunk: (guard, shared row, element in the row, global byte offset, shared byte offset)."""
            tid = e.reg("b32")
            e.emit("mov.u32", tid, "%tid.x")
            parts = []
            for i in range(chunks):
                c = e.reg("b32")
                e.emit("add.u32", c, tid, i * threads)
                guard = None
                if (i + 1) * threads > total:
                    guard = e.reg("pred")
                    e.emit("setp.lt.u32", guard, c, total)
                row, vec, col, col_bytes = e.reg("b32"), e.reg("b32"), e.reg("b32"), e.reg("b32")
                e.emit("div.u32", row, c, per_row)
                e.emit("rem.u32", vec, c, per_row)
                e.emit("mul.lo.u32", col, vec, w * 8 // bits)
                e.emit("mul.lo.u32", col_bytes, vec, w)
                offset, col64 = e.reg("b64"), e.reg("b64")
                fio._mul_wide(e, offset, row, row_step)
                e.emit("cvt.u64.u32", col64, col_bytes)
                e.emit("add.s64", offset, offset, col64)
                parts.append((guard, row, col, offset, _shared_offset(e, row, row_bytes, col_bytes, swizzle, mult)))
            return parts

        parts = kernel.thread_invariant(("copy", threads, w, per_row, total, row_step, row_bytes, swizzle, mult), thread_parts)
        e = fio.Emitter(kernel.regs)
        origin = fio.open_access(e, window, ptr, batch, row0, col0)  # type: ignore[arg-type]
        if window.sub_byte:  # a bit address; tile origins start on 4-byte runs (plan.copy_vector)
            e.emit("shr.u64", origin.ptr, origin.ptr, 3)
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, dst)
        for guard, row, col, offset, shared_offset in parts:
            src = e.reg("b64")
            e.emit("add.s64", src, origin.ptr, offset)
            size: str | int = w
            if not (o_in and i_in):
                # bytes inside the window: clamp((inner extent - index) * bits / 8, 0, w), 0 on
                # an outer index past the edge (sub-byte extents end on a byte: `stageable`)
                size = e.reg("b32")
                if i_in:
                    e.emit("mov.u32", size, w)
                else:
                    index = e.reg("b32")
                    e.emit("add.u32", index, col, e.in_register(i0))  # type: ignore[arg-type]
                    e.emit("sub.s32", size, i_ext, index)
                    _column_bytes(e, size, size, bits, "s")
                    e.emit("min.s32", size, size, w)
                    e.emit("max.s32", size, size, 0)
                if not o_in:
                    index, inside = e.reg("b32"), e.reg("pred")
                    e.emit("add.u32", index, row, e.in_register(o0))  # type: ignore[arg-type]
                    e.emit("setp.lt.u32", inside, index, o_ext)
                    e.emit("selp.b32", size, size, 0, inside)
                some = e.reg("pred")
                e.emit("setp.ne.u32", some, size, 0)
                e.emit("selp.b64", src, src, ptr, some)  # nothing is read: any valid address
            addr = e.reg("b32")
            e.emit("add.u32", addr, stage_base, shared_offset)
            kind = "cg" if w == 16 else "ca"
            sizes = (w,) if size == w else (w, size)
            e.emit(f"cp.async.{kind}.shared.global", f"[{addr}]", f"[{src}]", *sizes, guard=guard)
        _finish(op, rewriter, e)


@dataclass
class LowerAsyncGroups(RewritePattern):
    """`warp.async_commit` / `warp.async_wait` as cp.async group instructions."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, warp.AsyncCommitOp):
            rewriter.replace(op, ptx.InstOp("cp.async.commit_group"), [])
        elif isinstance(op, warp.AsyncWaitOp):  # its token has no registers
            token = ptx.RegsOp([], op.token.type)
            rewriter.replace(op, [ptx.InstOp("cp.async.wait_group", [str(op.pending.value.data)]), token],
                             [token.result])
        elif isinstance(op, gpu.BarrierOp):
            rewriter.replace(op, ptx.InstOp("bar.sync", ["0"]), [])


@dataclass
class LowerLdMatrix(RewritePattern):
    """`warp.ldmatrix`: lanes 8q..8q+7 give the rows of 8x8 (16-byte) matrix q, in fragment
    register order. A (x4, M x K buffer): rows +0/+8, then the K row's second 16 bytes; B from an
    N x K buffer: the second 16 bytes, then n +8 for a second fragment (x4); B `trans` (K x N
    buffer, 16-bit): k rows +0/+8, then n +8. A static row offset that keeps the swizzle phase
    is an immediate."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LdMatrixOp, rewriter: PatternRewriter) -> None:
        read = _stage_read(op)
        if read is None:
            return
        base, stage, row0, col0, bits, row_bytes, stage_bytes = read
        frag = op.fragments[0].type
        assert isinstance(frag, warp.FragType)
        swizzle = op.swizzle is not None
        row_off, col_off = op.offset_values()
        per_line, period = warp.swizzle_phases(row_bytes)
        period_rows = per_line * period
        imm_rows = row_off if (not swizzle or row_off % period_rows == 0) else 0
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        lane = kernel.lane
        is_a, trans = frag.role == warp.Operand.A, op.trans is not None
        sparse_b = not is_a and frag.variant.sparse is not None  # one k32 B fragment per .x4
        wide = is_a or len(op.fragments) == 2 or sparse_b
        half_row = 128 // bits  # elements in 16 bytes: the second half of a K row
        # (lane bit, step) of the row and of the column of a lane's matrix row
        if is_a:
            row_part, col_part = (3, 8), (4, half_row)
        elif sparse_b:  # lane bit 4 moves to K + 16 (added below)
            row_part, col_part = ((3, 8), None) if trans else (None, (3, half_row))
        elif trans:
            row_part, col_part = (3, 8), ((4, 8) if wide else None)
        else:
            row_part, col_part = ((4, 8) if wide else None), (3, half_row)
        row, col = e.reg("b32"), e.reg("b32")
        e.emit("and.b32", row, lane, 7)
        if row_part is not None:
            bit = e.reg("b32")
            e.emit("bfe.u32", bit, lane, row_part[0], 1)
            e.emit("mad.lo.u32", row, bit, row_part[1], row)
        e.emit("add.u32", row, row, e.in_register(row0))  # type: ignore[arg-type]
        if row_off != imm_rows:
            e.emit("add.u32", row, row, row_off)
        if col_part is not None:
            e.emit("bfe.u32", col, lane, col_part[0], 1)
            e.emit("mad.lo.u32", col, col, col_part[1], e.in_register(col0))  # type: ignore[arg-type]
        else:
            e.emit("mov.u32", col, col0)
        if sparse_b:  # matrices 2 and 3: the fragment's second k16 half
            upper = e.reg("b32")
            e.emit("bfe.u32", upper, lane, 4, 1)
            if trans:
                e.emit("mad.lo.u32", row, upper, 16, row)
            else:
                e.emit("mad.lo.u32", col, upper, 2 * half_row, col)
        if col_off:
            e.emit("add.u32", col, col, col_off)
        _column_bytes(e, col, col, bits)
        addr = _shared_address(e, base, stage, stage_bytes, row, row_bytes, col, swizzle,  # type: ignore[arg-type]
                               warp.swizzle_mult(op))
        out = e.reg_list("b32", 4 if wide else 2)
        shape = ("x4" if wide else "x2") + (".trans" if trans else "")
        e.emit(f"ldmatrix.sync.aligned.m8n8.{shape}.shared.b16", "{" + ", ".join(out) + "}",
               f"[{addr}+{imm_rows * row_bytes}]")
        _round_tf32(e, op, out)
        _finish(op, rewriter, e, [out] if is_a or sparse_b else [out[2 * f: 2 * f + 2] for f in range(len(op.fragments))])


@dataclass
class LowerLoadShared(RewritePattern):
    """`warp.load_shared`: one `ld.shared` per register, at the value's place in the fragment
    table (transposed for a `transposed` buffer). Offsets of whole swizzle periods (rows) and
    128-byte lines (columns) keep the granule phase, so they are immediates; the values whose
    offsets differ only by such periods share one address computation."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadSharedOp, rewriter: PatternRewriter) -> None:
        read = _stage_read(op)
        if read is None:
            return
        base, stage, row0, col0, bits, row_bytes, stage_bytes = read
        esz = bits // 8  # 32- and 64-bit elements only (the verifier)
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        swizzle, mult = op.swizzle is not None, warp.swizzle_mult(op)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        # (lane weights, per-value offsets) of the buffer's rows and columns
        rows, cols = (lin.row_w, lin.row_off), (lin.col_w, lin.col_off)
        if op.transposed is not None:
            rows, cols = cols, rows
        per_line, period = warp.swizzle_phases(row_bytes)
        # offsets of whole swizzle periods (rows) and 128-byte lines (columns) keep the phase
        period_rows, period_cols = (per_line * period, period * 16 // esz) if swizzle else (1, 1)
        row_off, col_off = op.offset_values()
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        row = e.lane_linear(kernel.lane, rows[0], row0)  # type: ignore[arg-type]
        col = e.lane_linear(kernel.lane, cols[0], col0)  # type: ignore[arg-type]
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, base)  # type: ignore[arg-type]
        bank = _bank_of(frag)
        out = e.reg_list(bank, lay.regs)
        suffix = fio._word_suffix(bank)
        addrs: dict[tuple[int, int], str] = {}
        for v, r in enumerate(out):
            dr, dc = row_off + rows[1][v], col_off + cols[1][v]
            key = (dr % period_rows, dc % period_cols)
            if key not in addrs:
                vr, cb = row, e.reg("b32")
                if key[0]:
                    vr = e.reg("b32")
                    e.emit("add.u32", vr, row, key[0])
                e.emit("add.u32", cb, col, key[1])
                e.emit("mul.lo.u32", cb, cb, esz)
                addrs[key] = e.reg("b32")
                e.emit("add.u32", addrs[key], stage_base, _shared_offset(e, vr, row_bytes, cb, swizzle, mult))
            imm = (dr - key[0]) * row_bytes + (dc - key[1]) * esz
            e.emit(f"ld.shared.{suffix}", r, f"[{addrs[key]}+{imm}]")
        _round_tf32(e, op, out)
        _finish(op, rewriter, e, [out])


# ---------------------------------------------------------------------------------------------
# The pass.
# ---------------------------------------------------------------------------------------------


def _param_name(arg: SSAValue, index: int) -> str:
    return f"p_{arg.name_hint or f'arg{index}'}"


def _abi(kernel: func.FuncOp) -> list[DictionaryAttr]:
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
    out = []
    for i, arg in enumerate(kernel.body.block.args):
        entry = {"name": StringAttr(_param_name(arg, i)), "type": arg.type}
        if i < len(attrs):
            entry |= {k.removeprefix("warp."): v for k, v in attrs[i].data.items()}
        out.append(DictionaryAttr(entry))
    return out


@dataclass(frozen=True)
class WarpToPtx(ModulePass):
    """Lower every warp-level kernel (`func.func` with `warp.grid`) to PTX."""

    name = "warp-to-ptx"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = [k for k in op.body.ops if isinstance(k, func.FuncOp) and "warp.grid" in k.attributes]
        for k in op.body.ops:
            if isinstance(k, func.FuncOp) and k not in kernels and any(
                o.dialect_name() in ("tile", "warp") for o in k.walk()
            ):
                raise LoweringError(k, "run tile-select-mma and tile-to-warp (tile-plan, tile-distribute, ...) before warp-to-ptx")
        if not kernels:
            return
        for mma in (o for k in kernels for o in k.walk() if isinstance(o, warp.MmaOp)):
            if mma.split_tf32 is not None:
                raise LoweringError(mma, "run warp-split-tf32 before warp-to-ptx (3xTF32 mmas)")
        state = LoweringState()
        abis = {k: _abi(k) for k in kernels}
        for k in kernels:
            state.kernels[k] = self._preamble(k)
        PatternRewriteWalker(
            GreedyRewritePatternApplier([
                LowerConstant(), LowerArith(state), LowerCmpi(state), LowerId(state), LowerFor(state), LowerIf(state),
                LowerFragConstant(state), LowerLoad(state), LowerStore(state), LowerSparseA(state),
                LowerScale(state), LowerSplitTf32(state), LowerWiden(state), LowerMma(state), LowerReturn(state),
                LowerSharedAlloc(state), LowerCopyAsync(state), LowerAsyncGroups(), LowerLdMatrix(state),
                LowerLoadMeta(state), LowerLoadShared(state),
            ]),
        ).rewrite_module(op)
        modules: dict[tuple[str, str], ptx.ModuleOp_] = {}
        for k in kernels:
            entry = self._entry(k, state.kernels[k], abis[k])
            target = k.attributes["warp.target"]
            assert isinstance(target, warp.TargetAttr)
            key = (target.sm.data, target.ptx.data)
            if key not in modules:
                modules[key] = ptx.ModuleOp_(key[1], key[0], [])
                op.body.block.insert_op_before(modules[key], k)
            modules[key].body.block.add_op(entry)
            k.detach()
            k.erase()

    @staticmethod
    def _preamble(kernel: func.FuncOp) -> _Kernel:
        """Parameters into global pointers, and the lane id: the registers every pattern uses."""
        state = _Kernel(RegisterFile(), "")
        e = fio.Emitter(state.regs)
        block = kernel.body.block
        bound = []
        for i, arg in enumerate(block.args):
            r = e.reg("b64")
            e.emit("ld.param.u64", r, f"[{_param_name(arg, i)}]")
            e.emit("cvta.to.global.u64", r, r)
            bound.append(ptx.RegsOp([r], arg.type))
        state.lane = e.reg("b32")
        e.emit("mov.u32", state.lane, "%laneid")
        first = block.first_op
        assert first is not None
        grid, threads = kernel.attributes["warp.grid"], kernel.attributes["warp.block"]
        (wm, wn), (rm, rn), stages, stage_k = _tiling(kernel)
        variant = next(o for o in kernel.walk() if isinstance(o, warp.MmaOp)).c.type.variant  # type: ignore[union-attr]
        gx, gy, gz = grid.get_values()  # type: ignore[union-attr]
        e.ops.insert(0, ptx.CommentOp(
            f"{variant.opcode}: grid ({gx}, {gy}, {gz}), block ({threads.get_values()[0]}, 1, 1); "  # type: ignore[union-attr]
            f"warps {wm}x{wn}, warp tile {rm}x{rn} instructions"
            + (f", {stages} shared-memory stages of K {stage_k}" if stages else "")
        ))
        for new in [*e.ops, *bound]:
            block.insert_op_before(new, first)
        state.entry = e.ops[-1]
        for arg, b in zip(list(block.args), bound):
            arg.replace_all_uses_with(b.result)
        return state

    @staticmethod
    def _entry(kernel: func.FuncOp, state: _Kernel, abi: list[DictionaryAttr]) -> ptx.EntryOp:
        block = kernel.body.block
        left = [o for o in block.ops if not isinstance(o, _PTX_OPS)]
        if left:
            raise LoweringError(left[0], f"warp-to-ptx: {left[0].name} has no lowering to PTX")
        body = [o for o in block.ops if not isinstance(o, ptx.RegsOp)]
        for o in body:
            o.detach()
        grid = tuple(kernel.attributes["warp.grid"].get_values())  # type: ignore[union-attr]
        threads = tuple(kernel.attributes["warp.block"].get_values())  # type: ignore[union-attr]
        params = [f".u64 {_param_name(a, i)}" for i, a in enumerate(block.args)]
        shared = [ptx.SharedOp(SHARED_SYMBOL, 128)] if state.shared_bytes else []
        region = Region(Block([*shared, *state.regs.declarations(), *body]))
        entry = ptx.EntryOp(kernel.sym_name.data, params, region, threads[0], (grid, threads), abi)
        if state.shared_bytes:
            entry.shared_bytes = IntegerAttr(state.shared_bytes, 64)
        entry.tiling = DenseArrayBase.from_list(i64, [v for part in _tiling(kernel) for v in (
            part if isinstance(part, tuple) else (part,))])
        return entry


def _tiling(kernel: func.FuncOp) -> tuple[tuple[int, int], tuple[int, int], int, int]:
    """Warps, warp tile, stages and stage K of a kernel's `#warp.schedule`."""
    attr = kernel.attributes.get("warp.schedule")
    if not isinstance(attr, ScheduleAttr):
        raise LoweringError(kernel, "warp-to-ptx: the kernel has no #warp.schedule (run tile-plan and tile-distribute)")
    s = attr.schedule
    return s.warps, s.warp_tile, s.stages, s.stage_k if s.stages else 0
