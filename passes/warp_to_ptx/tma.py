"""The TMA's copies in PTX (`dialects/warp_tma.py`): `warp.copy_tma` is one
`cp.async.bulk.tensor.Nd ... tile.mbarrier::complete_tx::bytes` of the issuing thread, through a
tensor map of its window, and `warp.mbarrier_expect_tx` that thread's
`mbarrier.arrive.expect_tx`. A multicast copy (a cluster's shared B) is issued by that thread of
the CTA of its rank alone, `.multicast::cluster` to every CTA of the cluster (a 16-bit mask of
all of them); `warp.mbarrier_arrive_peers` is lane 0's `mbarrier.arrive.shared::cluster` at the
peers' barrier (`mapa` of its own; the default release at CTA scope, as CUTLASS's consumers arrive:
the cluster-scope release cost 60% of the sparse kernel's speed on an H200, 360 against 852
TFLOP/s), and `warp.cluster_sync` the fence for the barriers just made
and `barrier.cluster`.

The map is made here, once per distinct window and box, from what the IR fixes: the window's
extent (its dimensions, innermost first: the contiguous one, then the other, then the batch where
the window has one), its strides in bytes, the stage as the box, the stage layout's swizzle, and
the window's origin as a byte offset from its argument's address. It becomes a 128-byte parameter
after the size parameters (`_Kernel.tensor_map`) with its ABI record (`ptx.EntryOp` tensor_maps),
from which every launch encodes it for the argument's address.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.runtime.tensor_map import TensorMap, TensorMapError
from tilemma.dialects import ptx, warp
from tilemma.dialects.warp_mbarrier import MBARRIER_BYTES
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.mbarrier import _barrier
from tilemma.passes.warp_to_ptx.shared import _shared_geometry
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, _Kernel, reg


def _one_thread(kernel: _Kernel, thread: int, rank: int | None = None) -> str:
    """A predicate register, true in thread `thread` of the CTA alone (with `rank`, of the CTA of
    that rank in its cluster alone); computed once a kernel."""
    mine = _cluster_rank(kernel) if rank is not None else None

    def build(e: fio.Emitter) -> list[str]:
        tid, pred = e.reg("b32"), e.reg("pred")
        e.emit("mov.u32", tid, "%tid.x")
        e.emit("setp.eq.u32", pred, tid, thread)
        if mine is not None:
            ours = e.reg("pred")
            e.emit("setp.eq.u32", ours, mine, rank)
            e.emit("and.pred", pred, pred, ours)
        return [pred]
    return kernel.thread_invariant(("one-thread", thread, rank), build)[0]


def _cluster_rank(kernel: _Kernel) -> str:
    """A register holding the CTA's rank in its cluster (read once a kernel)."""
    def build(e: fio.Emitter) -> list[str]:
        r = e.reg("b32")
        e.emit("mov.u32", r, "%cluster_ctarank")
        return [r]
    return kernel.thread_invariant(("cluster-rank",), build)[0]


def _cta_mask(kernel: _Kernel, mask: int) -> str:
    """A 16-bit register holding the CTA mask `mask` of a multicast (made once a kernel)."""
    def build(e: fio.Emitter) -> list[str]:
        r = e.reg("b16")
        e.emit("mov.b16", r, mask)
        return [r]
    return kernel.thread_invariant(("cta-mask", mask), build)[0]


def tensor_map(op: warp.CopyTmaOp, window: fio.Window, argument: int) -> tuple[TensorMap, list[tuple[int, int]]]:
    """The map of `op`'s window (of kernel argument `argument`) whose box is its stage (N stages
    side by side with `blocks = N`), and its coordinates innermost first, each as (which of the
    op's batch, row, col indices, the divisor it is counted in): with `blocks` the stage's width
    is a dimension of its own, whose coordinate is 0 (index -1), and the contiguous index counts
    widths."""
    ref = op.dest.type
    assert isinstance(ref, MemRefType)
    bits, _, _ = _shared_geometry(ref)
    _, rows, cols = ref.get_shape()
    size = bits // 8
    t = op.transpose is not None
    inner, outer = (1, 2) if t else (2, 1)  # the window's contiguous dimension, then the other
    if any(isinstance(x, str) for x in (*window.strides, *window.extent, window.base)):
        raise LoweringError(op, "warp.copy_tma: the window's sizes and strides are static (its tensor map is made "
                                "at compile time)")
    if window.strides[inner] != 1:
        raise LoweringError(op, f"warp.copy_tma: the window's {'rows' if t else 'columns'} are contiguous (stride 1), "
                                f"not of stride {window.strides[inner]}")
    n = op.block_count
    if n == 1:
        dims, strides, box = [window.extent[inner], window.extent[outer]], [window.strides[outer] * size], [cols, rows]
        coords = [(inner, 1), (outer, 1)]
    else:  # (the width, the other side, the widths): the verifier saw whole widths
        dims = [cols, window.extent[outer], window.extent[inner] // cols]
        strides, box = [window.strides[outer] * size, cols * size], [cols, rows, n]
        coords = [(-1, 1), (outer, 1), (inner, cols)]
    if window.extent[0] > 1 and window.strides[0]:  # a batch of windows: a dimension more, one a box
        dims.append(window.extent[0])
        strides.append(window.strides[0] * size)
        box.append(1)
        coords.append((0, 1))
    tmap = TensorMap(argument, size, tuple(dims), tuple(strides), tuple(box), warp.tma_swizzle(ref) or 0,
                     offset=window.base * size)
    try:
        tmap.check()  # (the offset too: a map's base stays 16-byte aligned)
    except TensorMapError as e:
        raise LoweringError(op, f"warp.copy_tma: {e}") from None
    return tmap, coords


def _coordinate(e: fio.Emitter, idx: list, which: int, by: int) -> str:
    """A copy's coordinate: index `which` of the op's (batch, row, col), over `by` (a power of two
    the index is a multiple of: the copy's verifier and `warp-tma-blocks`), or 0 (`which` -1)."""
    if which < 0:
        return e.in_register("0")
    if by == 1:
        return e.in_register(idx[which])
    out = e.reg("b32")
    e.emit("shr.u32", out, e.in_register(idx[which]), by.bit_length() - 1)
    return out


@dataclass
class LowerCopyTma(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.CopyTmaOp, rewriter: PatternRewriter) -> None:
        ptr, dst, stage, bars, slot = reg(op.ref), reg(op.dest), reg(op.stage), reg(op.bars), reg(op.slot)
        idx = [reg(i) for i in op.indices]
        if None in (ptr, dst, stage, bars, slot) or None in idx:
            return
        kernel = self.state.kernel(op)
        if ptr not in kernel.args:
            raise LoweringError(op, "warp.copy_tma copies from a kernel argument (its tensor map is a parameter)")
        tmap, coords = tensor_map(op, fio.window_of(op, kernel.memrefs.get(ptr)), kernel.args[ptr][0])
        address = kernel.tensor_map(ptr, tmap)
        cluster = op.multicast.value.data if op.multicast is not None else 1
        issue = _one_thread(kernel, op.thread.value.data, op.rank.value.data if op.rank is not None else None)
        e = fio.Emitter(kernel.regs)
        _, _, stage_bytes = _shared_geometry(op.dest.type)  # type: ignore[arg-type]
        at = e.reg("b32")
        e.emit("mad.lo.u32", at, e.in_register(stage), stage_bytes, dst)  # type: ignore[arg-type]
        where = ", ".join(_coordinate(e, idx, c, by) for c, by in coords)
        operands = [f"[{at}]", f"[{address}, {{{where}}}]", _barrier(e, e.in_register(bars), slot)]  # type: ignore[arg-type]
        opcode = f"cp.async.bulk.tensor.{len(coords)}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        if cluster > 1:  # to every CTA of the cluster
            operands.append(_cta_mask(kernel, (1 << cluster) - 1))
            opcode += ".multicast::cluster"
        e.emit(opcode, *operands, guard=issue)
        _finish(op, rewriter, e)


@dataclass
class LowerMbarrierExpectTx(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MbarrierExpectTxOp, rewriter: PatternRewriter) -> None:
        bars, index = reg(op.bars), reg(op.index)
        if bars is None or index is None:
            return
        kernel = self.state.kernel(op)
        issue = _one_thread(kernel, op.thread.value.data)
        e = fio.Emitter(kernel.regs)
        token = e.reg("b64")  # the arrival's state: not used
        e.emit("mbarrier.arrive.expect_tx.shared::cta.b64", token, _barrier(e, e.in_register(bars), index),
               op.bytes.value.data, guard=issue)
        _finish(op, rewriter, e)


@dataclass
class LowerMbarrierArrivePeers(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MbarrierArrivePeersOp, rewriter: PatternRewriter) -> None:
        bars, index = reg(op.bars), reg(op.index)
        if bars is None or index is None:
            return
        kernel = self.state.kernel(op)
        cluster = op.cluster.value.data
        lane0 = kernel.thread_invariant(("lane-0",), lambda e: [_lane0(e, kernel.lane)])[0]
        rank = _cluster_rank(kernel)
        e = fio.Emitter(kernel.regs)
        local = e.reg("b32")  # the barrier's shared address, which mapa maps to each peer's
        e.emit("mad.lo.u32", local, e.in_register(index), MBARRIER_BYTES, e.in_register(bars))
        for step in range(1, cluster):  # each other CTA of the cluster
            peer, there = e.reg("b32"), e.reg("b32")
            e.emit("add.u32", peer, rank, step)
            if cluster & (cluster - 1) == 0:
                e.emit("and.b32", peer, peer, cluster - 1)
            else:
                e.emit("rem.u32", peer, peer, cluster)
            e.emit("mapa.shared::cluster.u32", there, local, peer)
            e.emit("mbarrier.arrive.shared::cluster.b64", "_", f"[{there}]", guard=lane0)
        _finish(op, rewriter, e)


def _lane0(e: fio.Emitter, lane: str) -> str:
    pred = e.reg("pred")
    e.emit("setp.eq.u32", pred, lane, 0)
    return pred


@dataclass
class LowerClusterSync(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.ClusterSyncOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, [ptx.InstOp("fence.mbarrier_init.release.cluster", []),
                              ptx.InstOp("barrier.cluster.arrive.release.aligned", []),
                              ptx.InstOp("barrier.cluster.wait.acquire.aligned", [])], [])
