"""`warp-stage-stores`: the epilogue of a warpgroup kernel stores its accumulators through shared
memory, as whole rows.

A `warp.store` of an m16n8 fragment of 32-bit values writes, per warp instruction, 8 rows' 32
bytes (`st.global.v2`; of 16-bit values 8 rows' 16 bytes, `st.global.b32`): a 128 x 256 f32 tile
takes 64 such stores a thread, which stall on the LSU queue (ncu: `lg_throttle`) while the next
tile's products wait. The adjacent fragments of one 16-row block that make 128-byte rows (four
of 32-bit values, eight of 16-bit ones) become one `warp.store_staged`, which writes them into
the warp's own slot of a shared staging buffer and stores them back as 16-byte pieces of whole
rows: each store covering 4 rows' 128-byte lines. The slot is the
warp's alone (`slot` = thread / 32; a warp-specialized kernel's computing warps come first), so
only the warp meets (`bar.warp.sync`), never the CTA. The buffer's 16-byte granules are swizzled
by the row times 5 (`#warp.swizzled<5>`): the lanes' 8-byte writes of rows g and g + 8 and the
16-byte reads of one row each touch every bank once.

Simulated on an H200 before it was built (`benchmarks/ptx_sims.py staged-stores`,
results/h200-2026-11-28h-staged-stores-sim.csv), persistent 2:4 sparse f16 with an f32 D,
dense-equivalent TFLOP/s, samples interleaved: N-major B 4096^3 898 / 919 / 892 against 864 /
886 / 862 as built (cuSPARSELt 895 / 916 / 888), 8192^3 946 / 939 / 940 against 919 / 920 / 913.
As built (results/h200-2026-11-28h-staged-stores-ab.csv, medians of 3 rounds, staged / plain):
sparse N-major B 4096^3 908 / 873 (cuSPARSELt 905), 8192^3 941 / 928 (958); with an f16 D, as
cuSPARSELt writes it, 945 / 801 (895) and 965 / 874 (958); f16 4096^3 609 / 593, s8 1256 / 1196.

It applies to kernels whose `#warp.schedule` has `mma = wgmma` (where it was measured), with no
split of K (a tf32 512x4096x4096 kernel of split-k 2 lost 1%: 189 / 189 against 191 / 192, two
runs) and not both operands transposed by the fill (tf32 with A M-major and B N-major, 4096^3: rna
160 against 198 TFLOP/s; ncu 978 against 821 us, the same PTX K loop assembled into 213 registers
against 238 and 2% more instructions; trunc 711 against 702 us). It takes runs of stores of one
memref window of the fragments' element with contiguous columns, rows and origin aligned to 16
bytes, the column a multiple of a 16-byte piece and the columns whole pieces (in bounds, or a
static number of columns that is a multiple of a piece: a ragged edge is guarded piece by piece);
and only where the buffer (computing warps x 2 KiB) fits beside the kernel's other shared buffers
in the target's shared memory a CTA. Other stores are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import warp
from tilemma.dialects.attributes import element_bits, element_name
from tilemma.dialects.schedule import ScheduleAttr
from tilemma.dialects.swizzle import SwizzledLayoutAttr
from tilemma.passes.tile.plan import kernel_target
from tilemma.passes.warp.index_facts import constant_step, multiple_of
from tilemma.passes.warp.op_runs import run_after
from tilemma.passes.warp_to_ptx.shared import place_alloc, place_shared

SWIZZLE_MULT = 5  # rows 0-3 (and 4-7) of a half-warp's 8-byte writes on 4 different granule pairs


def _bits(op: warp.StoreOp) -> int:
    frag = op.value.type
    assert isinstance(frag, warp.FragType)
    return element_bits(element_name(frag.element))


def _stageable(op: warp.StoreOp) -> bool:
    """Whether `op` can start a staged store: an m16n8 accumulator of a window that takes one
    (`warp.staged_window_problem`), at a column that is a multiple of a 16-byte piece (its
    `col_align`, or what the index provably is)."""
    frag = op.value.type
    assert isinstance(frag, warp.FragType)
    if (frag.variant.m, frag.variant.n) != (16, 8) or warp.staged_window_problem(
            op.ref.type, frag.element, op.extent_values()[2], op.in_bounds_values()[1]) is not None:
        return False
    piece = 128 // _bits(op)
    return op.col_align_value() % piece == 0 or multiple_of(op.indices[2], piece)


def _continues(first: warp.StoreOp, op: warp.StoreOp, j: int) -> bool:
    """Whether `op` stores block j of the run `first` starts: the next 8 columns of its block row."""
    return (op.value.type == first.value.type and op.ref is first.ref
            and op.indices[0] is first.indices[0] and op.indices[1] is first.indices[1]
            and constant_step(first.indices[2], op.indices[2]) == 8 * j
            and op.window == first.window and op.extent == first.extent and op.in_bounds == first.in_bounds)


def _runs(kernel: func.FuncOp) -> list[list[warp.StoreOp]]:
    runs, taken = [], set()
    for op in kernel.walk():
        if isinstance(op, warp.StoreOp) and op not in taken and _stageable(op):
            blocks = warp.staged_blocks(_bits(op))
            run = run_after(op, blocks, lambda later, j, first=op: _continues(first, later, j))
            if len(run) == blocks:
                runs.append(run)
                taken.update(run)
    return runs


def _shared_in_use(kernel: func.FuncOp) -> tuple[int, Operation | None]:
    """Bytes of shared memory the kernel's buffers take (placed as the lowering places them), and
    the last of their allocs in the entry block."""
    used, last = 0, None
    for op in kernel.walk():
        if isinstance(op, memref.AllocOp) and warp.is_shared(op.memref.type):
            used = place_alloc(used, op)[1]
            if op.parent is kernel.body.block:
                last = op
    return used, last


def stage_stores(kernel: func.FuncOp, slots: int) -> int:
    """Rewrite the kernel's runs of stores (`slots` computing warps); how many became staged."""
    runs = _runs(kernel)
    if not runs:
        return 0
    frag = runs[0][0].value.type
    assert isinstance(frag, warp.FragType)
    buffer_type = MemRefType(frag.element, [slots, warp.STAGED_ROWS, warp.staged_cols(_bits(runs[0][0]))],
                             SwizzledLayoutAttr(SWIZZLE_MULT), IntegerAttr(warp.SHARED, i64))
    used, last = _shared_in_use(kernel)
    if place_shared(used, buffer_type)[1] > kernel_target(kernel).limits.shared_per_cta:
        return 0
    runs = [r for r in runs if r[0].value.type.element == frag.element]  # one buffer, of one element type
    alloc = memref.AllocOp([], [], buffer_type, IntegerAttr(128, i64))
    tid = gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X))
    lanes = arith.ConstantOp(IntegerAttr(32, IndexType()))
    slot = arith.DivUIOp(tid.result, lanes.result)
    where = InsertPoint.after(last) if last is not None else InsertPoint.at_start(kernel.body.block)
    Rewriter.insert_op([alloc, tid, lanes, slot], where)
    for run in runs:
        first = run[0]
        piece = 128 // _bits(first)
        align = first.col_align_value() if first.col_align_value() % piece == 0 else piece  # (or `multiple_of`)
        staged = warp.StoreStagedOp([s.value for s in run], alloc.memref, slot.result, first.ref,
                                    list(first.indices), first.window_values(), first.extent_values(), align,
                                    first.in_bounds_values())
        Rewriter.insert_op(staged, InsertPoint.after(run[-1]))
        for s in run:
            Rewriter.erase_op(s)
    return len(runs)


@dataclass(frozen=True)
class WarpStageStores(ModulePass):
    """Store the accumulators of every warpgroup kernel through shared memory (see the module)."""

    name = "warp-stage-stores"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if isinstance(attr, ScheduleAttr) and attr.schedule.mma == "wgmma" and attr.schedule.split_k == 1 \
                    and attr.schedule.fill != "ab":
                stage_stores(kernel, attr.schedule.threads // 32)
