"""`#warp.schedule`: how one kernel is laid out over CTAs, warps, shared memory and registers.

`tile-plan` decides it once (forced options, the tuning cache, the target's defaults and
limits) and writes it on the kernel's `func.func` as `warp.schedule`; every later pass of the
tile -> warp chain reads its fields and none re-decides them:

    #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 3, stage_k = 64, reads = interleaved,
                   group_m = 8, widen = #warp.variant<m16n8k32, s32, s8, s8, s32>>

`stages = 0` is the simple schedule (fragments straight from global memory; no stage fields
are printed then). `reads`: how `warp-prefetch-fragments` orders the stage reads (`ahead`: the
whole next K step before a step's mmas; `interleaved`: as registers free up). `group_m`: CTAs
run in groups of that many tile rows (0: the grid's own order). `widen`: 4-bit operands staged as
stored, their m16n8k64 fragments widened to this 8-bit instruction's (`warp-widen-int4`).
`split_k`, `split_chunk` (printed only when split_k > 1): K split across `split_k` CTAs per
output tile (grid z is batch x split), each multiplying `split_chunk` elements of K (the last the
rest); the partial sums meet in a workspace and the last CTA to arrive adds them in split order
(`warp.split_k_publish`, `warp.split_k_sum`). `fill` (printed when set): the operands (`a`, `b`,
`ab`) staged by a transposing fill through registers (`warp.fill_load` / `warp.fill_store`)
instead of `cp.async`: 8- or 4-bit operands stored with M or N contiguous, whose K-major stage
neither `cp.async` nor `ldmatrix` produces. `gather` (printed when set): the operands (8- or
16-bit) whose rows are not 4-byte aligned for `cp.async`, loaded element by element through
registers: copied as stored (the same ops, `gather`), or, for those `fill` names too (8-bit, their
lines not 4-byte aligned or M or N not a multiple of 4), transposed by the fill
(`warp.fill_load {by_element}`). `pair_bytes`
(printed when set: `a`, `b`, `ab`): 8-bit operands stored M- (A) or N-contiguous (B) copied by
`cp.async` as stored (K x M, K x N) and read by `warp.ldmatrix {trans}` of byte pairs: an A
fragment's rows g and g + 8 are rows 2g and 2g + 1 of its 16, a B read's two fragments the even
and the odd columns of 16; the accumulators go into that order before the K loop
(`warp.pair_rows`, `warp.pair_columns`) and back after it (`warp.unpair_rows`, `warp.unpair_columns`).
`mma` (printed when not `sync`): `wgmma`, the stage multiplied by warpgroups (`warp.wgmma`: Hopper's
`wgmma.mma_async` reading both operands from the 128-byte-swizzled stage, sm_90a; with pair_bytes
`a`, an 8-bit M-major A from registers, its byte-pair fragments each warp's) instead of each
warp's ldmatrix + `mma.sync`; warps W x 1 (W a multiple of 4: W / 4 warpgroups down M) of warp tile
1 x RN, so that warp w's accumulators are rows 16 (w mod 4) .. + 15 of its warpgroup's m64 tile,
the wgmma accumulator layout. `producers` (printed when set: 4): a warp-specialized kernel, whose
producer warpgroup (those warps, after the W x 1 consumers) fills the stage ring while the consumers
multiply, the two meeting at mbarriers a stage (`warp-specialize`) instead of a CTA-wide barrier.
`copy` (printed when not `async`): how those producers copy A's and B's stages: `async`, each
thread a share of the `cp.async` chunks; `tma`, one thread a `warp.copy_tma` a stage buffer (the
Hopper tensor-memory accelerator), its bytes counted by the stage's `full` mbarrier. `cluster`
(printed when above 1: 2): a TMA kernel's CTAs run in clusters of that many consecutive CTAs (of
one column of tiles, `group_m` even), which share B's stages: each CTA copies its share of B's
blocks to every CTA of the cluster (multicast), and a stage is free once all their consumers are
done with it. `persistent` (printed when set): a TMA kernel launched as that many CTAs (at most the
tiles), each of which loops over the output tiles pid, pid + persistent, ...: its producers run
into the next tile's stages while its consumers store the last one's products, the stage ring and
its mbarriers' phases carried on from tile to tile (`warp-specialize`). `transpose` (printed
when set: `b`): a warpgroup kernel's 8-bit N-major B copied by `cp.async` as stored into a ring of
its own and written K-major stage by stage from there, in shared memory (`warp.transpose_stage`),
instead of by the transposing fill from global memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, NoneAttr, StringAttr, i64
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.isa import MmaVariant
from tilemma.dialects.attributes import VariantAttr

READS = ("ahead", "interleaved")
FILLS = ("", "a", "b", "ab")
PAIR_BYTES = ("", "a", "b", "ab")
MMAS = ("sync", "wgmma")
COPIES = ("async", "tma")


@dataclass(frozen=True)
class Schedule:
    """The fields of `#warp.schedule`, as Python values."""

    warps: tuple[int, int]
    warp_tile: tuple[int, int]
    stages: int = 0
    stage_k: int = 0
    reads: str = "ahead"
    group_m: int = 0
    widen: MmaVariant | None = None
    split_k: int = 1
    split_chunk: int = 0
    fill: str = ""
    gather: str = ""
    pair_bytes: str = ""
    mma: str = "sync"
    producers: int = 0
    copy: str = "async"
    cluster: int = 1
    persistent: int = 0
    transpose: str = ""

    @property
    def threads(self) -> int:
        """The threads that compute (a warp-specialized kernel's consumers)."""
        return 32 * self.warps[0] * self.warps[1]

    @property
    def block_threads(self) -> int:
        """The CTA's threads: the computing warps and any producer warps after them."""
        return self.threads + 32 * self.producers

    @property
    def wgmma_in_flight(self) -> int:
        """Stages of warpgroup mmas left running when the next stage's begin (`warp.wgmma`
        pending): one where the ring has a stage to spare for it (3 or more), so the copies run
        S - 2 stages ahead (`warp-pipeline`), else none (a sparse A's loop is then unrolled by
        two, `warp-unroll-sparse`, for its metadata registers). None where B is transposed in
        shared memory (`transpose`): its K-major ring then takes 2 stages instead of 3, which
        leaves room for 3 stages of copies instead of 2 (H200, s8 with A M-major and B N-major
        4096^3, one call: 818 against 684 TOP/s with one in flight)."""
        return int(self.mma == "wgmma" and self.stages >= 3 and not self.transpose)

    @property
    def b_stages(self) -> int:
        """Stages of B's K-major ring: the ring's, or for a B transposed in shared memory
        (`transpose`) those the warpgroups may still read - the stage, and those whose products are
        in flight - and the one written meanwhile. Stage j's slot was stage j - R's: without
        producers every thread has passed the barrier of stage j - 1, which it reaches once its
        wait retired stage j - 1 - in_flight's products; with producers, `warp-specialize`
        transposes stage j once the release of stage j - in_flight - 2 is waited for (R >=
        in_flight + 2 either way)."""
        return min(self.stages, self.wgmma_in_flight + 2) if self.transpose else self.stages


@irdl_attr_definition
class ScheduleAttr(ParametrizedAttribute):
    """`#warp.schedule<warps = WMxWN, warp_tile = RMxRN, stages = S, stage_k = K, reads = R,
    group_m = G, widen = #warp.variant<...>>` (see the module docstring)."""

    name = "warp.schedule"
    warps: DenseArrayBase
    warp_tile: DenseArrayBase
    stages: IntegerAttr
    stage_k: IntegerAttr
    reads: StringAttr
    group_m: IntegerAttr
    widen: Attribute  # VariantAttr, or NoneAttr
    split_k: IntegerAttr
    split_chunk: IntegerAttr
    fill: StringAttr
    gather: StringAttr
    pair_bytes: StringAttr
    mma: StringAttr
    producers: IntegerAttr
    copy: StringAttr
    cluster: IntegerAttr
    persistent: IntegerAttr
    transpose: StringAttr

    def __init__(self, s: Schedule):
        super().__init__(
            DenseArrayBase.from_list(i64, list(s.warps)),
            DenseArrayBase.from_list(i64, list(s.warp_tile)),
            IntegerAttr(s.stages, i64),
            IntegerAttr(s.stage_k, i64),
            StringAttr(s.reads),
            IntegerAttr(s.group_m, i64),
            VariantAttr(s.widen) if s.widen is not None else NoneAttr(),
            IntegerAttr(s.split_k, i64),
            IntegerAttr(s.split_chunk, i64),
            StringAttr(s.fill),
            StringAttr(s.gather),
            StringAttr(s.pair_bytes),
            StringAttr(s.mma),
            IntegerAttr(s.producers, i64),
            StringAttr(s.copy),
            IntegerAttr(s.cluster, i64),
            IntegerAttr(s.persistent, i64),
            StringAttr(s.transpose),
        )

    @property
    def schedule(self) -> Schedule:
        return Schedule(
            tuple(self.warps.get_values()),  # type: ignore[arg-type]
            tuple(self.warp_tile.get_values()),  # type: ignore[arg-type]
            self.stages.value.data,
            self.stage_k.value.data,
            self.reads.data,
            self.group_m.value.data,
            self.widen.variant if isinstance(self.widen, VariantAttr) else None,
            self.split_k.value.data,
            self.split_chunk.value.data,
            self.fill.data,
            self.gather.data,
            self.pair_bytes.data,
            self.mma.data,
            self.producers.value.data,
            self.copy.data,
            self.cluster.value.data,
            self.persistent.value.data,
            self.transpose.data,
        )

    def verify(self) -> None:
        s = self.schedule
        if len(s.warps) != 2 or len(s.warp_tile) != 2 or min(*s.warps, *s.warp_tile) < 1:
            raise VerifyException("#warp.schedule: warps and warp_tile are two positive sizes (MxN)")
        if s.stages < 0 or s.stages == 1 or (s.stages and s.stage_k < 1):
            raise VerifyException("#warp.schedule: stages is 0 (no shared memory) or 2 or more, with a positive stage_k")
        if s.reads not in READS:
            raise VerifyException(f"#warp.schedule: reads must be one of {', '.join(READS)}, got {s.reads!r}")
        if s.group_m < 0:
            raise VerifyException("#warp.schedule: group_m is not negative")
        if s.split_k < 1 or (s.split_k > 1 and s.split_chunk < 1):
            raise VerifyException("#warp.schedule: split_k is 1 or more, with a positive split_chunk when above 1")
        for what, value in (("fill", s.fill), ("gather", s.gather)):
            if value not in FILLS or (value and not s.stages):
                raise VerifyException(f"#warp.schedule: {what} names staged operands ({', '.join(f for f in FILLS if f)}), "
                                      f"not {value!r}")
        if s.pair_bytes not in PAIR_BYTES or (s.pair_bytes and not s.stages) \
                or any(w in s.fill + s.gather for w in s.pair_bytes) or ("b" in s.pair_bytes and s.warp_tile[1] % 2):
            raise VerifyException("#warp.schedule: pair_bytes names staged operands (a, b, ab) that no fill or gather "
                                  f"stages, B in a warp tile of an even number of columns, not {s.pair_bytes!r}")
        if s.mma not in MMAS:
            raise VerifyException(f"#warp.schedule: mma must be one of {', '.join(MMAS)}, got {s.mma!r}")
        if s.mma == "wgmma" and (not s.stages or s.warps[0] % 4 or s.warps[1] != 1 or s.warp_tile[0] != 1
                                 or s.warp_tile[1] > 32 or s.gather or s.pair_bytes not in ("", "a") or s.widen):
            raise VerifyException("#warp.schedule: mma = wgmma needs a staged schedule of warps W x 1 (W a multiple "
                                  "of 4) and warp tile 1 x RN (RN at most 32: N up to 256), with no gather or widen "
                                  "(a fill writes its K-major stages as the warpgroups read them) and pair_bytes "
                                  "at most \"a\" (an A the warpgroups take from registers)")
        if s.producers not in (0, 4) or (s.producers and (s.mma != "wgmma" or s.split_k > 1)):
            raise VerifyException("#warp.schedule: producers is 0 or 4 (one producer warpgroup), for mma = wgmma "
                                  "and no split_k")
        if s.copy not in COPIES or (s.copy == "tma" and (not s.producers or s.fill)):
            raise VerifyException(f"#warp.schedule: copy is one of {', '.join(COPIES)}; tma copies are a producer "
                                  f"warpgroup's, of stages no fill writes, not {s.copy!r}")
        if s.cluster not in (1, 2) or (s.cluster > 1 and (s.copy != "tma" or not s.group_m or s.group_m % s.cluster)):
            raise VerifyException("#warp.schedule: cluster is 1 or 2; 2 shares B's stages by the TMA (copy = tma) "
                                  f"between CTAs of one column of tiles (group_m a multiple of it), not {s.cluster}")
        if s.persistent < 0 or (s.persistent and (s.copy != "tma" or s.cluster > 1)):
            raise VerifyException("#warp.schedule: persistent is 0 or the CTAs of a TMA kernel (copy = tma) "
                                  f"without a cluster that loop over its tiles, not {s.persistent}")
        if s.transpose not in ("", "b") or (s.transpose and (s.mma != "wgmma" or s.copy != "async"
                                                             or "b" in s.fill + s.gather + s.pair_bytes)):
            raise VerifyException("#warp.schedule: transpose names a warpgroup kernel's B (b) copied by cp.async as "
                                  f"stored and transposed in shared memory, which no fill or gather stages, not "
                                  f"{s.transpose!r}")
        if not isinstance(self.widen, VariantAttr | NoneAttr):
            raise VerifyException("#warp.schedule: widen names a #warp.variant")

    def print_parameters(self, printer: Printer) -> None:
        s = self.schedule
        parts = [f"warps = {s.warps[0]}x{s.warps[1]}", f"warp_tile = {s.warp_tile[0]}x{s.warp_tile[1]}",
                 f"stages = {s.stages}"]
        if s.stages:
            parts += [f"stage_k = {s.stage_k}", f"reads = {s.reads}", f"group_m = {s.group_m}"]
            if s.fill:
                parts.append(f"fill = {s.fill}")
            if s.gather:
                parts.append(f"gather = {s.gather}")
            if s.pair_bytes:
                parts.append(f"pair_bytes = {s.pair_bytes}")
            if s.mma != "sync":
                parts.append(f"mma = {s.mma}")
            if s.producers:
                parts.append(f"producers = {s.producers}")
            if s.copy != "async":
                parts.append(f"copy = {s.copy}")
            if s.cluster > 1:
                parts.append(f"cluster = {s.cluster}")
            if s.persistent:
                parts.append(f"persistent = {s.persistent}")
            if s.transpose:
                parts.append(f"transpose = {s.transpose}")
        if s.split_k > 1:
            parts += [f"split_k = {s.split_k}", f"split_chunk = {s.split_chunk}"]
        printer.print_string("<" + ", ".join(parts))
        if isinstance(self.widen, VariantAttr):
            printer.print_string(", widen = ")
            printer.print_attribute(self.widen)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        fields: dict = {}
        start = parser.pos

        with parser.in_angle_brackets():
            while True:
                key = parser.parse_identifier()
                parser.parse_punctuation("=")
                if key in ("warps", "warp_tile"):
                    fields[key] = _parse_pair(parser)
                elif key in ("stages", "stage_k", "group_m", "split_k", "split_chunk", "producers", "cluster",
                             "persistent"):
                    fields[key] = parser.parse_integer()
                elif key in ("reads", "fill", "gather", "pair_bytes", "mma", "copy", "transpose"):
                    fields[key] = parser.parse_identifier()
                elif key == "widen":
                    v = parser.parse_attribute()
                    if not isinstance(v, VariantAttr):
                        parser.raise_error("widen takes a #warp.variant<...>")
                    fields[key] = v.variant
                else:
                    parser.raise_error(f"unknown #warp.schedule field {key!r}")
                if not parser.parse_optional_punctuation(","):
                    break
        if "warps" not in fields or "warp_tile" not in fields:
            parser.raise_error("#warp.schedule needs warps and warp_tile", start, parser.pos)
        return ScheduleAttr(Schedule(**fields)).parameters


def _parse_pair(parser: AttrParser) -> tuple[int, int]:
    """`2x4`: the lexer reads an integer then the identifier `x4`."""
    at = parser.pos
    first = parser.parse_integer(allow_negative=False, allow_boolean=False)
    rest = parser.parse_identifier()
    if not rest.startswith("x") or not rest[1:].isdigit():
        parser.raise_error("expected a size pair such as 2x4", at, parser.pos)
    return first, int(rest[1:])

