"""`warp.wgmma` as `wgmma.mma_async` on shared-memory descriptors (sm_90a).

A descriptor names a matrix in shared memory: its start address, the leading (LBO) and stride (SBO)
byte offsets between 8 x 16-byte core matrices, and the swizzle mode, each offset in 16-byte units.
The stages here are all in the 128-byte-swizzle layout (mode 1): 8 rows of 128 bytes a 1024-byte
atom, so SBO is 1024; a K-major operand's K step s starts 32 s bytes into its rows (the hardware
applies the swizzle to the address, which is why the stages start on 1024 bytes); an M-major A's or
N-major B's starts 16 s rows down, its 64-wide blocks LBO apart. The encoding and layouts were
checked on an H200 by tools/wgmma_probe.py (K-major and N-major B, N 64-256), bit for bit against
mma_arith; the M-major A by the GPU tests (the kernels' D bit for bit as the mma.sync kernels').
The sparse `wgmma.mma_async.sp` (a pre-compressed A) reads A's kept values as a dense K-major A of
half the K (a k32 step 32 bytes along the rows; rows of 128 bytes, or of 64 in the 64-byte
swizzle, mode 2, SBO 512, for stages of K 64) and takes each warp's metadata word of the step
with selector 0, measured the same way. An A from registers (`a_frags`, 8-bit integers) is the
step's fragment registers `{a0, a1, a2, a3}` in place of A's descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.dialects import warp
from tilemma.dialects.attributes import element_bits, element_name
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_ops import accumulates_in_place
from tilemma.passes.warp_to_ptx.shared import _shared_geometry, _swizzle
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, all_reg, all_regs, reg

SWIZZLE_MODES = {128: 1, 64: 2}  # descriptor bits 62-63 by swizzled row bytes (the 64-byte: a sparse A)


def descriptor_bits(lbo: int, sbo: int, row_bytes: int = 128) -> int:
    """The constant part of a descriptor of `row_bytes`-byte swizzled rows (all but the start address)."""
    return (SWIZZLE_MODES[row_bytes] << 62) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16)


@dataclass
class LowerWgmma(RewritePattern):
    """`warp.wgmma`: the accumulators into the output registers (in place where this is their
    last use inside the loop), `wgmma.fence`, one `wgmma.mma_async` a K step of the stage on
    descriptors advanced by immediates, then commit, and wait until `pending` groups run."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.WgmmaOp, rewriter: PatternRewriter) -> None:
        a_base, b_base, idx, accs = reg(op.a), reg(op.b), all_reg(op.indices), all_regs(op.accs)
        metas, a_frags = all_reg(op.metas), all_regs(op.a_frags)
        if a_base is None or b_base is None or idx is None or accs is None or metas is None or a_frags is None:
            return
        for what, ref in (("A", op.a.type), ("B", op.b.type))[1 if a_frags else 0:]:
            on, mult, fold = _swizzle(ref)
            if not on or mult != 1 or fold:
                raise LoweringError(op, f"warp.wgmma reads 128-byte-swizzled stages (#warp.swizzled<1>); its {what} "
                                    "buffer is not (run warp-swizzle-shared; --no-swizzle cannot take mma = wgmma)")
        stage, row, *b_stage = idx  # (B's own stage where its ring is its own)
        a_ref, b_ref = op.a.type, op.b.type
        assert isinstance(a_ref, MemRefType) and isinstance(b_ref, MemRefType)
        a_blocks, b_blocks = op.a_blocks.value.data, op.b_blocks.value.data
        steps = op.stage_k // op.k_step
        frag = op.accs[0].type
        assert isinstance(frag, warp.FragType)
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        # K of a step: B's the instruction's, A's half that for a sparse A's kept values
        a_desc, a_step = ("", 0) if a_frags else \
            self._operand(e, a_base, stage, a_ref, a_blocks, op.k_step // (2 if op.sparse else 1), row)
        b_desc, b_step = self._operand(e, b_base, b_stage[0] if b_stage else stage, b_ref, b_blocks, op.k_step)
        dtype = frag.variant.dtype  # f32, or s32 for 8-bit integers
        flat = [r for regs in accs for r in regs]
        in_place = all(accumulates_in_place(op, v, regs) for v, regs in zip(op.accs, accs))
        bank = "b32" if dtype == "s32" else dtype  # (the register bank of an s32 accumulator)
        d = list(flat) if in_place else e.reg_list(bank, len(flat))
        if not in_place:
            if op.pending.value.data:  # the accumulators may be a running group's: wait before reading them
                e.emit("wgmma.wait_group.sync.aligned", 0)
            for dst, src in zip(d, flat):
                e.emit(f"mov.{bank}", dst, src)
        [scale_d] = kernel.thread_invariant(("wgmma scale-d",), _true)  # D = A B + D
        e.emit("wgmma.fence.sync.aligned")
        sp = ".sp" if op.sparse else ""
        opcode = (f"wgmma.mma_async{sp}.sync.aligned.m64n{op.n}k{op.k_step}.{dtype}.{frag.variant.atype}."
                  f"{frag.variant.btype}")
        # the floats' immediates: scale-a, scale-b, and for 16-bit ones trans-a, trans-b (the
        # integer forms have none, tf32 no transposes)
        imms = () if dtype == "s32" else (1, 1) if frag.variant.atype == "tf32" else \
            (1, 1, int(bool(a_blocks)), int(bool(b_blocks)))
        for s in range(steps):
            da, db = a_desc, b_desc
            if s:
                da, db = (da, e.reg("b64")) if a_frags else (e.reg("b64"), e.reg("b64"))
                if not a_frags:
                    e.emit("add.s64", da, a_desc, a_step * s >> 4)
                e.emit("add.s64", db, b_desc, b_step * s >> 4)
            if a_frags:  # the step's A fragment, from registers
                da = "{" + ", ".join(a_frags[s]) + "}"
            meta = (metas[s], 0) if op.sparse else ()  # the step's word, selector 0
            e.emit(opcode, "{" + ", ".join(d) + "}", da, db, *meta, scale_d, *imms)
        e.emit("wgmma.commit_group.sync.aligned")
        e.emit("wgmma.wait_group.sync.aligned", op.pending.value.data)
        per = len(flat) // len(accs)
        _finish(op, rewriter, e, [d[i * per:(i + 1) * per] for i in range(len(accs))])

    @classmethod
    def _operand(cls, e: fio.Emitter, base: str, stage: str, ref: MemRefType, blocks: int, k: int,
                 row: str | None = None) -> tuple[str, int]:
        """(descriptor, bytes between K steps of `k` elements) of one operand's part of the stage:
        the stage (an M- or N-major operand's first block), and for A the warpgroup's `row`s (an
        M-major A's block row / 64)."""
        _, row_bytes, block_bytes = _shared_geometry(ref)
        addr = e.reg("b32")
        e.emit("mad.lo.u32", addr, e.in_register(stage), block_bytes * max(blocks, 1), base)
        if row is not None:
            e.emit("mad.lo.u32", addr, e.in_register(row), block_bytes // warp.WGMMA_ROWS if blocks else row_bytes,
                   addr)
        # LBO: an M- or N-major operand's blocks apart (K-major: unused, 16); SBO: 8 rows; a K
        # step is its elements' bytes along a K-major row, k rows down a block
        desc = cls._descriptor(e, addr, block_bytes if blocks else 16, 8 * row_bytes, row_bytes)
        elem_bytes = element_bits(element_name(ref.element_type)) // 8
        return desc, k * row_bytes if blocks else k * elem_bytes

    @staticmethod
    def _descriptor(e: fio.Emitter, addr: str, lbo: int, sbo: int, row_bytes: int) -> str:
        """A 64-bit descriptor of the matrix at shared address `addr` (14 bits of addr / 16)."""
        desc = e.reg("b64")
        e.emit("cvt.u64.u32", desc, addr)
        e.emit("shr.u64", desc, desc, 4)
        e.emit("and.b64", desc, desc, 0x3FFF)
        e.emit("or.b64", desc, desc, descriptor_bits(lbo, sbo, row_bytes))
        return desc


@dataclass
class LowerWgmmaWait(RewritePattern):
    """`warp.wgmma_wait`: `wgmma.wait_group 0`; the accumulators keep their registers."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.WgmmaWaitOp, rewriter: PatternRewriter) -> None:
        accs = all_regs(op.accs)
        if accs is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        e.emit("wgmma.wait_group.sync.aligned", 0)
        _finish(op, rewriter, e, [list(regs) for regs in accs])


def _true(e: fio.Emitter) -> list[str]:
    """A predicate register that holds: wgmma's scale-d (a predicate operand, not an immediate)."""
    p = e.reg("pred")
    e.emit("setp.ne.b32", p, 1, 0)
    return [p]
