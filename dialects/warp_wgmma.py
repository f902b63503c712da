"""`warp.wgmma`: one stage of the K loop multiplied by a warpgroup's `wgmma.mma_async` (sm_90a).

A warpgroup (4 consecutive warps) multiplies a 64-row slice of the stage's A by the stage's whole B
with one m64nNk16 instruction a K step (k32 for 8-bit integers, k8 for tf32: 32 bytes of K); both operands are read from shared memory through
descriptors, so no fragment of A or B lives in registers. Warp w of the group holds rows
16 (w mod 4) .. + 15 of the m64 x N accumulator as N / 8 m16n8 accumulator fragments (the mma.sync
C layout, register by register), which is why a wgmma kernel's warps are W x 1 with warp tile
1 x N / 8 (`#warp.schedule` mma = wgmma): everything after the K loop (the epilogue, split-K) is
the mma.sync kernel's.

Its lowering fences, issues the K steps, commits them and waits until at most `pending` such
groups run: with 0 the stage may be refilled once every thread has passed the next barrier, as after
`warp.ldmatrix` reads; with 1 (`#warp.schedule`'s `wgmma_in_flight`) the stage's products still run
while the next stage's are issued, so the ring is refilled a stage later (`warp-pipeline` copies
S - 2 stages ahead) and `warp.wgmma_wait` after the K loop waits for the last before the
accumulators are read. The buffers must be in the layouts the descriptors name: A M x K and
B N x K (K-major) or B as N / 64 blocks of K x 64 (N-major, `b_blocks`), with rows of 128 bytes
swizzled as `#warp.swizzled<1>` (the hardware's 128-byte swizzle when each stage starts on a
1024-byte boundary, which the allocation's alignment gives).

With `metas` (a pre-compressed 2:4 A, `tile.sparse_from`) it is the sparse `wgmma.mma_async.sp`
m64nNk32: A's stage holds the kept values (K / 2 columns, so a 128-byte row covers K 128) and each
warp passes one metadata word a k32 step, the `e` word mma.sp m16n8k32 (selector 0) takes for
its 16 rows - the layout and arithmetic tools/wgmma_probe.py measured on an H200.

With `a_frags` (8-bit integers) A comes from registers instead: each warp passes its 16 rows as one
mma.sync m16n8k32 A fragment a k32 step (the layout the probe measured), read from the stage by
whatever reads suit it (`warp.ldmatrix` byte pairs of an M-major A, which no descriptor can
transpose for 8-bit elements); `a` is then the stage they came from, not read by the instruction.
The tensor cores read those registers until the products retire, so a loop that leaves them
running is unrolled (`warp-unroll-sparse`) before they are loaded again.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    prop_def,
    var_operand_def,
    var_result_def,
)
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core.isa_rows import wgmma_n_legal
from tilemma.dialects.attributes import Operand, element_bits, element_name
from tilemma.dialects.swizzle import SwizzledLayoutAttr, row_bytes
from tilemma.dialects.warp import FragType, verify_meta_fragments
from tilemma.dialects.warp_shared import AsyncTokenType, _shared_stage

# (A, B, D) element types (PTX names) wgmma takes from the 128-byte-swizzled stages here: 16-bit
# floats into f32 (A and B in either order), 8-bit integers into s32 and tf32 (f32 stages, their
# low 13 bits ignored) into f32, both K-major only (those forms have no transposes); proven bit for
# bit on an H200 / H100 (tools/wgmma_probe.py: against mma_arith, and the wrapped int32 sums)
WGMMA_TYPES = {("f16", "f16", "f32"), ("bf16", "bf16", "f32"), ("s8", "s8", "s32"), ("u8", "u8", "s32"),
               ("tf32", "tf32", "f32")}
K_MAJOR_ONLY = {"s8", "u8", "tf32"}  # operand types whose wgmma has no transposes
WGMMA_K = 16  # K of one m64nNk16 step (16-bit)
WGMMA_STEP_BYTES = 32  # bytes of K a dense step reads along a K-major row (k16 16-bit, k32 8-bit)
WGMMA_SP_K = 32  # K of one sparse m64nNk32 step (16 kept values a row)
WGMMA_ROWS = 64  # rows of A a warpgroup multiplies
WGMMA_MAX_N = 256
SWIZZLE_BYTES = 128  # the row the descriptors' 128-byte swizzle mode addresses
N_BLOCK = 64  # columns of an N-major B block: one 128-byte row of 16-bit elements
WGMMA_ALIGN = 1024  # bytes a wgmma stage's start is aligned to: the 128-byte swizzle's 8 rows


@irdl_op_definition
class WgmmaOp(IRDLOperation):
    """`warp.wgmma %a[stage, row(, b stage)], %b after %token, %accs`: this warp's part of its
    warpgroup's product of A rows `row` .. + 63 of stage `stage` (an S x BM x BK buffer, K-major,
    or with `a_blocks` = BM / 64 an (S * a_blocks) x BK x 64 M-major one whose stage s is blocks
    s * a_blocks .., the warpgroup's rows one block) and the stage's B (S x BN x BK K-major, or with
    `b_blocks` = BN / 64 an (S * b_blocks) x BK x 64 N-major buffer, its stage s blocks
    s * b_blocks ..), every K step of the stage; `accs` are the warp's N / 8 accumulator fragments,
    the results the same after the stage. A third index is B's stage where B's ring is shorter
    than A's (a B transposed in shared memory, `warp.transpose_stage`). With `metas` (one word a k32 step of the stage) A is a
    pre-compressed 2:4 A's kept values (K-major, K / 2 columns) and the instruction the sparse one."""

    name = "warp.wgmma"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    indices = var_operand_def(IndexType)  # [stage, A row] or [stage, A row, B stage]
    token = operand_def(AsyncTokenType)
    accs = var_operand_def(FragType)
    metas = var_operand_def(FragType)  # a sparse A's metadata words, one a k32 step (none: dense)
    a_frags = var_operand_def(FragType)  # A from registers: one fragment a K step (none: the descriptor)
    outs = var_result_def(FragType)
    a_blocks = prop_def(IntegerAttr)  # 0: A K-major; else M-major blocks of 64 rows a stage
    b_blocks = prop_def(IntegerAttr)  # 0: B K-major; else N-major blocks of 64 columns a stage
    pending = prop_def(IntegerAttr)  # groups of wgmmas left running after it (0 or 1)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = ("$a `[` $indices `]` `,` $b `after` $token `,` $accs (`meta` $metas^ `:` type($metas))? "
                       "(`regs` $a_frags^ `:` type($a_frags))? "
                       "attr-dict `:` type($a) `,` type($b) `,` type($accs) `->` type($outs)")

    def __init__(self, a: SSAValue, b: SSAValue, indices: Sequence[SSAValue], token: SSAValue,
                 accs: Sequence[SSAValue], b_blocks: int = 0, pending: int = 0, a_blocks: int = 0,
                 metas: Sequence[SSAValue] = (), a_frags: Sequence[SSAValue] = ()):
        super().__init__(operands=[a, b, indices, token, accs, metas, a_frags], result_types=[[x.type for x in accs]],
                         properties={"a_blocks": IntegerAttr(a_blocks, i64), "b_blocks": IntegerAttr(b_blocks, i64),
                                     "pending": IntegerAttr(pending, i64)})

    @property
    def n(self) -> int:
        """N of the warpgroup's instruction: 8 columns an accumulator fragment."""
        return 8 * len(self.accs)

    @property
    def sparse(self) -> bool:
        return bool(self.metas)

    @property
    def k_step(self) -> int:
        """K of one instruction: 32 bytes of K (k16 16-bit, k32 8-bit), twice that sparse."""
        bits = element_bits(element_name(self.a.type.element_type))  # type: ignore[union-attr]
        return 8 * WGMMA_STEP_BYTES // bits * (2 if self.sparse else 1)

    @property
    def stage_k(self) -> int:
        """K of the stage: A's columns (twice a sparse A's kept ones), an M-major A's block rows, or
        the K steps of an A from registers."""
        if self.a_frags:
            return len(self.a_frags) * self.k_step
        k = self.a.type.get_shape()[1 if self.a_blocks.value.data else 2]  # type: ignore[union-attr]
        return 2 * k if self.sparse else k

    @property
    def stages(self) -> int:
        return self.a.type.get_shape()[0] // max(self.a_blocks.value.data, 1)  # type: ignore[union-attr]

    def verify_(self) -> None:
        a = _shared_stage(self.a.type, "warp.wgmma A")
        b = _shared_stage(self.b.type, "warp.wgmma B")
        if len(self.indices) not in (2, 3):
            raise VerifyException("warp.wgmma: indices are [stage, A row] or [stage, A row, B stage]")
        if not self.accs or len(self.accs) != len(self.outs) or self.n > WGMMA_MAX_N:
            raise VerifyException(f"warp.wgmma: 1 to {WGMMA_MAX_N // 8} accumulators (N up to {WGMMA_MAX_N}), "
                                  "as many results")
        types = {x.type for x in (*self.accs, *self.outs)}
        frag = next(iter(types))
        if len(types) != 1 or not isinstance(frag, FragType) or frag.role != Operand.ACC:
            raise VerifyException("warp.wgmma: accumulators and results are accumulator fragments of one type")
        v = frag.variant
        # an f32 stage is read as tf32 (the tensor cores ignore its low 13 bits)
        elems = (*(_read_as(ELEMENTS[element_name(x.element_type)].ptx) for x in (a, b)), v.dtype)
        shape = (16, 8, self.k_step)
        if elems not in WGMMA_TYPES or (v.atype, v.btype) != elems[:2] or (v.m, v.n, v.k) != shape \
                or bool(v.sparse) != self.sparse:
            raise VerifyException(f"warp.wgmma: {' x '.join(elems[:2])} -> {v.dtype} is not a wgmma here (takes "
                                  f"{', '.join(f'{x} x {y} -> {z}' for x, y, z in sorted(WGMMA_TYPES))}, accumulated "
                                  f"as m16n8k{self.k_step}{' sparse' if self.sparse else ''} fragments)")
        if not wgmma_n_legal(v.atype, self.n):
            raise VerifyException(f"warp.wgmma: m64n{self.n} is no {v.atype} wgmma (N 8, 16, 24 or a multiple of 16 "
                                  "for 8-bit integers)")
        if elems[0] in K_MAJOR_ONLY and (self.a_blocks.value.data or self.b_blocks.value.data):
            raise VerifyException("warp.wgmma: 8-bit integer and tf32 operands are read K-major (no a_blocks / b_blocks)")
        sa, ra, ca = a.get_shape()
        a_blocks, bk = self.a_blocks.value.data, self.stage_k
        if self.a_frags:
            self._verify_a_frags(v, elems[0])
        if self.sparse:
            verify_meta_fragments(self.metas, "warp.wgmma metadata")
            if a_blocks or len(self.metas) != bk // WGMMA_SP_K:
                raise VerifyException(f"warp.wgmma: a sparse A is K-major, with one metadata word a k{WGMMA_SP_K} "
                                      f"step of the stage ({bk // WGMMA_SP_K}), not {len(self.metas)}")
        # a sparse A's kept values may also be 64-byte rows (K 64 stages: the 64-byte swizzle)
        a_rows = (SWIZZLE_BYTES, SWIZZLE_BYTES // 2) if self.sparse else (SWIZZLE_BYTES,)
        if (not self.a_frags and row_bytes(a) not in a_rows) or row_bytes(b) != SWIZZLE_BYTES or (
                not self.a_frags and (sa % a_blocks if a_blocks else ra % WGMMA_ROWS)):
            raise VerifyException(f"warp.wgmma: A and B stages have rows of {SWIZZLE_BYTES} bytes (32 f32, 64 16-bit or 128 "
                                  f"8-bit elements of K, or of M or N for an M-major A or N-major B; a sparse A's kept "
                                  f"values 128 or 64 bytes), A a multiple of {WGMMA_ROWS} rows or a_blocks blocks "
                                  "a stage")
        for what, ref in (("A", a), ("B", b))[1 if self.a_frags else 0:]:  # (an A from registers: its reads')
            layout = ref.layout
            if isinstance(layout, SwizzledLayoutAttr) and (layout.mult.data != 1 or layout.fold.data):
                raise VerifyException(f"warp.wgmma: {what} must be #warp.swizzled<1> (the hardware's 128-byte "
                                      "swizzle), or not yet swizzled")
        blocks = self.b_blocks.value.data
        sb, rb, cb = b.get_shape()
        if blocks == 0:
            own = len(self.indices) == 3  # (B's stage its own index: a ring no longer than A's)
            if (rb, cb) != (self.n, bk) or (sb > self.stages if own else sb != self.stages):
                raise VerifyException(f"warp.wgmma: a K-major B stage is N x K = {self.n} x {bk}, as many stages as A "
                                      "(at most as many with an index of its own)")
        elif blocks * N_BLOCK != self.n or (rb, cb) != (bk, N_BLOCK) or sb != blocks * self.stages:
            raise VerifyException(f"warp.wgmma: an N-major B is {blocks} blocks of K x {N_BLOCK} = {bk} x {N_BLOCK} "
                                  f"a stage (N = {self.n})")
        if self.pending.value.data not in (0, 1):
            raise VerifyException("warp.wgmma: pending is 0 or 1 (groups of wgmmas left running)")
        if bk % self.k_step:
            raise VerifyException(f"warp.wgmma: the stage's K is a multiple of the instruction's K ({self.k_step})")

    def _verify_a_frags(self, v, atype: str) -> None:
        """An A from registers: 8-bit integers, dense, one A fragment of the accumulators' instruction
        a k32 step of the stage (the one mma.sync m16n8k32 takes: 4 registers a thread)."""
        if atype not in ("s8", "u8") or self.sparse or self.a_blocks.value.data:
            raise VerifyException("warp.wgmma: A from registers (a_frags) is modelled for dense 8-bit integers, "
                                  "read as K x M-ordered fragments, not through a_blocks")
        for x in self.a_frags:
            if not isinstance(x.type, FragType) or x.type.role != Operand.A or x.type.variant != v:
                raise VerifyException(f"warp.wgmma: a_frags are A fragments of {v.opcode}, one a k{self.k_step} step")
        _, ra, ca = self.a.type.get_shape()  # type: ignore[union-attr]
        if len(self.a_frags) * self.k_step not in (ra, ca):
            raise VerifyException(f"warp.wgmma: {len(self.a_frags)} A fragments cover K {len(self.a_frags) * self.k_step}, "
                                  f"not the stage's ({ra} x {ca})")


def _read_as(ptx: str) -> str:
    """The type wgmma reads a stage's elements as: f32 as tf32."""
    return "tf32" if ptx == "f32" else ptx


@irdl_op_definition
class WgmmaWaitOp(IRDLOperation):
    """`warp.wgmma_wait %accs`: waits for every wgmma of this warp's warpgroup still running
    (`wgmma.wait_group 0`); the accumulators it returns are theirs, safe to read."""

    name = "warp.wgmma_wait"
    accs = var_operand_def(FragType)
    outs = var_result_def(FragType)
    assembly_format = "$accs attr-dict `:` type($accs) `->` type($outs)"

    def __init__(self, accs: Sequence[SSAValue]):
        super().__init__(operands=[accs], result_types=[[x.type for x in accs]])

    def verify_(self) -> None:
        if [x.type for x in self.accs] != [x.type for x in self.outs]:
            raise VerifyException("warp.wgmma_wait: returns its accumulators, as many and of the same types")
