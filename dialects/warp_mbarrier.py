"""The `warp` ops of a warp-specialized kernel (`#warp.schedule` producers): its mbarriers and roles.

A producer warpgroup fills the stage ring while the consumer warps multiply, and the two meet at
two mbarriers a stage instead of a CTA-wide barrier: `full` (the producers arrive once a stage
has landed) and `empty` (the consumers arrive once their mmas no longer read it). An mbarrier
array is a `memref<S x i64, 3>` (8 bytes a barrier, shared memory); `warp.mbarrier_init` makes
them, `warp.mbarrier_arrive` counts a thread's arrival (`warp.mbarrier_expect_tx`: one thread's, with
the bytes of its TMA copies, `warp_tma`), `warp.mbarrier_wait` waits for a phase
(its parity: the n-th use of a stage waits for phase n) and gives the `!warp.async_token` that
orders the stage's reads after it, as `warp.async_wait` does in the unspecialized kernel.
`warp.retire` ends the threads whose condition holds (the producers, after their loop), so that
what follows is the consumers' alone; `warp.set_max_registers` moves registers between the roles.

In a cluster (`#warp.schedule` cluster = 2: CTAs in pairs that share B's stages, each copying
half of them to both) a stage is free only once both CTAs' consumers are done with it:
`warp.mbarrier_arrive_peers` arrives at the other CTA's barrier too, and `warp.cluster_sync`
makes sure the peers' barriers are made before anyone arrives at them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import I1, IndexType, IntegerAttr, IntegerType, MemRefType, UnitAttr, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.warp_shared import AsyncTokenType, is_shared

MBARRIER_BYTES = 8
MAX_ARRIVALS = (1 << 20) - 1  # an mbarrier's expected count (PTX ISA: 2^20 - 1)
MAX_TX_BYTES = (1 << 20) - 1  # and its transaction count's range (PTX ISA: up to 2^20 - 1)
CLUSTERS = (1, 2)  # CTAs a cluster of a warp-specialized kernel holds (along the grid's x)


def _barriers(ref, what: str) -> MemRefType:
    if not (isinstance(ref, MemRefType) and is_shared(ref) and len(ref.get_shape()) == 1
            and isinstance(ref.element_type, IntegerType) and ref.element_type.width.data == 64):
        raise VerifyException(f"{what} must be a 1-d shared memref of i64 (one 8-byte mbarrier each)")
    return ref


@irdl_op_definition
class MbarrierInitOp(IRDLOperation):
    """`warp.mbarrier_init %bars {count = N}`: thread 0 of the CTA makes every barrier of the array,
    each phase expecting N arrivals. A CTA-wide barrier after it publishes them."""

    name = "warp.mbarrier_init"
    bars = operand_def(MemRefType)
    count = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$bars attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, count: int):
        super().__init__(operands=[bars], properties={"count": IntegerAttr(count, i64)})

    def verify_(self) -> None:
        _barriers(self.bars.type, "warp.mbarrier_init")
        if not 1 <= self.count.value.data <= MAX_ARRIVALS:
            raise VerifyException(f"warp.mbarrier_init: count is 1 to {MAX_ARRIVALS}")


class _ArriveOp(IRDLOperation):
    """An arrival of each thread that runs it at barrier `index` of `bars`."""

    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    assembly_format = "$bars `[` $index `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue):
        super().__init__(operands=[bars, index])

    def verify_(self) -> None:
        _barriers(self.bars.type, self.name)


@irdl_op_definition
class MbarrierArriveOp(_ArriveOp):
    """`warp.mbarrier_arrive %bars[%i]`: each thread that runs it arrives once at barrier i."""

    name = "warp.mbarrier_arrive"


@irdl_op_definition
class MbarrierExpectTxOp(IRDLOperation):
    """`warp.mbarrier_expect_tx %bars[%i] {bytes = B, thread = T}`: thread T of the CTA arrives
    once at barrier i and adds B bytes to the transactions its phase waits for (the bytes of the
    `warp.copy_tma`s it issues next, counted as they land)."""

    name = "warp.mbarrier_expect_tx"
    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    bytes = prop_def(IntegerAttr)
    thread = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$bars `[` $index `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, nbytes: int, thread: int):
        super().__init__(operands=[bars, index], properties={"bytes": IntegerAttr(nbytes, i64),
                                                             "thread": IntegerAttr(thread, i64)})

    def verify_(self) -> None:
        _barriers(self.bars.type, "warp.mbarrier_expect_tx")
        if not 1 <= self.bytes.value.data <= MAX_TX_BYTES:
            raise VerifyException(f"warp.mbarrier_expect_tx: bytes is 1 to {MAX_TX_BYTES} (a phase's transaction count)")
        if self.thread.value.data < 0:
            raise VerifyException("warp.mbarrier_expect_tx: thread is a thread of the CTA (0 or more)")


@irdl_op_definition
class AsyncArriveOp(_ArriveOp):
    """`warp.async_arrive %bars[%i]`: each thread that runs it arrives at barrier i once its
    `cp.async` copies so far have landed (`cp.async.mbarrier.arrive.noinc`, one of the arrivals the
    barrier was made to expect): no group, no wait, and nothing for the thread to do when they land.
    For what generic loads read (a pre-compressed A's metadata): the arrival fences nothing for the
    async proxy, which the warpgroups' operands would need."""

    name = "warp.async_arrive"


@irdl_op_definition
class MbarrierArrivePeersOp(IRDLOperation):
    """`warp.mbarrier_arrive_peers %bars[%i]`: lane 0 of each warp that runs it arrives once at
    barrier i of every other CTA of its cluster (whose warps' work on what the barrier guards is
    done: a warpgroup's wgmma reads end together, at its wait)."""

    name = "warp.mbarrier_arrive_peers"
    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    cluster = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$bars `[` $index `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, cluster: int):
        super().__init__(operands=[bars, index], properties={"cluster": IntegerAttr(cluster, i64)})

    def verify_(self) -> None:
        _barriers(self.bars.type, "warp.mbarrier_arrive_peers")
        if self.cluster.value.data not in CLUSTERS[1:]:
            raise VerifyException(f"warp.mbarrier_arrive_peers: cluster is one of {CLUSTERS[1:]} CTAs")


@irdl_op_definition
class ClusterSyncOp(IRDLOperation):
    """`warp.cluster_sync`: every thread of the cluster's CTAs arrives, and none goes on before all
    have, after a fence that publishes the mbarriers made before it to the peers (barrier.cluster)."""

    name = "warp.cluster_sync"
    assembly_format = "attr-dict"


@irdl_op_definition
class MbarrierWaitOp(IRDLOperation):
    """`%t = warp.mbarrier_wait %bars[%i], %parity`: waits until the phase of that parity (0 or 1)
    of barrier i has completed; what the threads that arrived in it wrote is then visible, which
    the token carries to the reads."""

    name = "warp.mbarrier_wait"
    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    parity = operand_def(IndexType)
    token = result_def(AsyncTokenType)
    assembly_format = "$bars `[` $index `]` `,` $parity attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, parity: SSAValue):
        super().__init__(operands=[bars, index, parity], result_types=[AsyncTokenType()])

    def verify_(self) -> None:
        _barriers(self.bars.type, "warp.mbarrier_wait")


@irdl_op_definition
class RetireOp(IRDLOperation):
    """`warp.retire %cond`: the threads for which `cond` holds end here (whole warps: a role)."""

    name = "warp.retire"
    cond = operand_def(I1)
    assembly_format = "$cond attr-dict"

    def __init__(self, cond: SSAValue):
        super().__init__(operands=[cond])


@irdl_op_definition
class SetMaxRegistersOp(IRDLOperation):
    """`warp.set_max_registers {count = N, increase}`: the warpgroups that run it hold at most N
    registers a thread from here on (`setmaxnreg`, sm_90a): taken (`increase`) or given back. A
    warp-specialized CTA starts with the registers file / threads each; its producers give theirs
    back, its consumers take them for the accumulators."""

    name = "warp.set_max_registers"
    count = prop_def(IntegerAttr)
    increase = opt_prop_def(UnitAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, count: int, increase: bool):
        props: dict = {"count": IntegerAttr(count, i64)}
        if increase:
            props["increase"] = UnitAttr()
        super().__init__(properties=props)

    def verify_(self) -> None:
        n = self.count.value.data
        if n % 8 or not 24 <= n <= 256:
            raise VerifyException(f"warp.set_max_registers: count is a multiple of 8 from 24 to 256, not {n}")
