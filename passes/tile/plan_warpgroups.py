"""`tile-plan`'s warpgroup kernels (sm_90a's `wgmma.mma_async`, `#warp.schedule` mma = wgmma): which
kernels the warpgroups can take (`wgmma_unsupported`), how a tf32 one stages its operands
(`tf32_staging`), the schedule key of their defaults and rules in `configs` (`wgmma_schedule`), their
tiles and stages (`wgmma_tiles`, `plan_wgmma`), and the refusals of forced ones. `plan.plan` asks
here when `--wgmma` forces them or `configs.WGMMA_MIN_ROWS` lets them choose themselves; the tiling,
split-K and wave arithmetic they share with the mma.sync kernels stays in `plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func

from tilemma.compiler.core import configs, targets
from tilemma.compiler.layouts import sparse_format
from tilemma.dialects import tile, warp
from tilemma.dialects.schedule import Schedule
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.plan import (
    GRID_LIMITS,
    GROUP_M,
    ceil_div,
    choose_tiling,
    column_major,
    copy_vector,
    parse_pair,
    split,
    wave_use,
    wrong_order,
)


def wgmma_unsupported(g, variant, target: targets.SmTarget, why_not: str | None, fill: str, gather: str,
                      pair: str = "") -> str | None:
    """Why a kernel cannot be multiplied by warpgroups (`#warp.schedule` mma = wgmma), None if it
    can: sm_90a, a dense 16-bit mma into f32 (`warp.WGMMA_TYPES`) or the sparse one of a
    pre-compressed A, an 8-bit integer one into s32 (K-major A and B, those the fill stages
    K-major, or an M-major A taken from registers by byte pairs, `pair`), or a tf32 one of f32
    operands (any order and rounding: `tf32_staging`), that stages
    (`stageable`), read as stored (16-bit A and B in either order), every row copied by cp.async."""
    if not target.is_arch(90):
        return f"the warpgroup mma is the arch-specific target sm_90a's, not {target}'s"
    shape = sparse_format.SHAPE if g.a_meta is not None else f"m16n8k{8 * warp.WGMMA_STEP_BYTES // max(g.a.bits, 1)}"
    if (variant.atype, variant.btype, variant.dtype) not in warp.WGMMA_TYPES or variant.shape != shape \
            or bool(variant.sparse) != (g.a_meta is not None) or variant.satfinite:
        return (f"the warpgroups here take {', '.join(f'{a} x {b} -> {d}' for a, b, d in sorted(warp.WGMMA_TYPES))} "
                f"(dense, the 16-bit ones also sparse from a pre-compressed A), not {variant.opcode}")
    if why_not:
        return f"the kernel cannot be staged: {why_not}"
    if (g.a.casts or g.b.casts) and not (variant.atype == "tf32" and tf32_rounding(g.a) and tf32_rounding(g.b)):
        return "A and B must be read as stored (or f32 read as tf32)"
    if gather:
        return "every row of A and B must be 4-byte aligned for cp.async (no gather)"
    if g.a.bits == 8 and any(wrong_order(g, w) and w not in fill + pair for w in "ab"):
        return ("8-bit integers are read K-major (no transposes): A row-major and B column-major, an M-major A "
                "read from registers by byte pairs, or an operand the transposing fill can stage K-major")
    return None


def tma_unsupported(g, variant, producers: int, fill: str, pair: str = "", transpose: str = "") -> str | None:
    """Why a warpgroup kernel's stages cannot be copied by the TMA (`Schedule.copy` tma), None if
    they can: a producer warpgroup issues the copies, of stages as stored (no fill; a tf32 stage
    rounded in place would need the producers to wait for the TMA's bytes first), of static sizes
    (a tensor map is made once, at compile time), whose base and strides the TMA can address
    (16-byte multiples, whole-byte elements). A pre-compressed A's metadata stays on cp.async."""
    if not producers:
        return "the TMA's copies are a producer warpgroup's (producers=4)"
    if fill:
        return f"the transposing fill stages {' and '.join(fill.upper())} through registers, not by copies"
    if transpose:
        return (f"each producer thread copies the rows of {transpose.upper()} it transposes in shared memory itself "
                "(cp.async), so that it reads back only its own copies")
    if pair:  # (`#warp.swizzled<1, fold>`: `warp-swizzle-shared`)
        return "an A read from registers by byte pairs is staged in a swizzle no tensor map writes"
    if variant.atype == "tf32" and any(tf32_rounding(m) != "trunc" for m in (g.a, g.b)):
        return "a tf32 stage is rounded where it lies once copied; the TMA copies only truncated tf32 (rounding trunc)"
    if any(any(row) for row in (*g.sizes, *g.strides)):
        return "sizes known at launch: a tensor map is made at compile time"
    for name, m in (("A", g.a), ("B", g.b)):
        if m.bits < 8:
            return f"{name}'s elements are {m.bits}-bit; the TMA moves whole bytes"
        nbytes = m.bits // 8
        outer = [s for s in (m.row_stride, m.col_stride, m.batch_stride) if s != 1 and s]
        if 1 not in (m.row_stride, m.col_stride) or any(s * nbytes % 16 for s in outer) or m.base * nbytes % 16:
            return (f"{name}'s strides ({m.row_stride}, {m.col_stride}) and offset {m.base} are no tensor map's: one "
                    "contiguous dimension, the others and the offset multiples of 16 bytes")
    return None


def cluster_unsupported(g, tma: int, bm: int) -> str | None:
    """Why a warpgroup kernel's CTAs cannot run in pairs that share B's stages (`Schedule.cluster`
    2), None if they can: its producers copy by the TMA (whose multicast writes both CTAs' stages),
    and its tiles pair up along M (an even number of tile rows; the grid's groups of `GROUP_M`
    rows are even, so the pair's consecutive CTAs have one column of tiles)."""
    if tma <= 0:
        return "the CTAs of a cluster share B's stages by the TMA's multicast (tma=1, producers=4)"
    if (rows := ceil_div(g.m, bm)) % 2:
        return f"M = {g.m} makes {rows} row{'s' if rows > 1 else ''} of {bm}-row tiles, which do not pair into clusters of 2 CTAs"
    return None


def persistent_unsupported(g, tma: int, cluster: int) -> str | None:
    """Why a warpgroup kernel cannot be persistent (`Schedule.persistent`), None if it can: its
    producers copy by the TMA (a stage's arrival counts its bytes, so that the ring runs on from
    tile to tile with no group to wait for), without a cluster (whose producers wait for the peer's
    releases before they leave), over one batch (the grid's one dimension of tiles)."""
    if tma <= 0:
        return "a persistent kernel's producers copy by the TMA (tma=1, producers=4)"
    if cluster > 1:
        return "a persistent kernel runs without a cluster (cluster=1)"
    if g.batch > 1:
        return f"a persistent kernel loops over one batch's tiles, not {g.batch}"
    return None


def producers_by_themselves(g, t, bn: int, stage_k: int, need: int, target: targets.SmTarget, variant,
                            fill: str, pair: str, splits: int) -> bool:
    """Whether a schedule of `configs.WGMMA_PRODUCERS` takes its producer warpgroup unasked: where
    B's stages are whole (N and K divide into them), their copies can be the TMA's (as measured:
    `configs.WGMMA_TMA`), the kernel would not split K without them (`splits`: a producer
    warpgroup's kernel does not, and its CTAs would leave SMs idle), the CTA has two consumer
    warpgroups or more, and the producers cost no residency: the grid fits in one wave, or the SMs' shared memory would
    hold one CTA at a time without them too (their register split leaves room for one CTA of 384
    threads). H200, sparse, 128 x 128 CTAs (`configs.WGMMA_NARROW`), samples interleaved,
    dense-equivalent TFLOP/s with / without (results/h200-2026-11-28-sparse-narrow-producers-ab.csv, -narrow-producers-2.csv):
    one wave, N-major B 512x4096x4096 808 / 728, 512x4096x11008 855 / 736, 128x4096x4096 260 / 230,
    1024x2048x4096 857 / 777; K-major B 512x4096x4096 658 / 520, 1024x2048x4096 757 / 581. Past a
    wave, where the K-major B's stages of K 64 let two CTAs share an SM, they lose (768x4096x4096
    491 / 537, 640x4096x4096 437 / 478); the N-major B's K 128 stages hold one CTA an SM, and they
    gain (768x4096x4096 650 / 583). One consumer warpgroup (16 and 64 rows) is a draw: 16x11008x4096
    56 / 59, 64x11008x4096 234 / 224."""
    whole = g.n % bn == 0 and g.k % stage_k == 0
    one_an_sm = target.limits.shared_per_sm // (need + target.limits.shared_reserve) <= 1  # (shared memory)
    return whole and tma_unsupported(g, variant, 4, fill, pair) is None and splits == 1 and t.warps[0] >= 8 \
        and (t.tiles <= target.limits.sms or one_an_sm)


def shared_transpose(g, bn: int, stage_k: int, fill: str, producers: int) -> str:
    """The operand ("b", or "" for none) a warpgroup kernel copies as stored and transposes in
    shared memory stage by stage (`#warp.schedule` transpose, `warp.transpose_stage`) instead of
    filling it through registers from global memory: an 8-bit N-major B the fill would stage, its
    rows whole 16-byte copies, its stage split evenly over a producer warpgroup
    (`warp.TransposeLayout`), which transposes each stage while the consumers multiply the one
    before (not where producers are refused: 0). The fill's loads wait on global memory with one
    stage in flight (ncu: long-scoreboard stalls; with its loads replaced by a register read the
    same kernel ran 1047-1231 TOP/s), where the copies run stages ahead. H200, s8 with A M-major
    and B N-major 4096^3: 804 TOP/s against mma.sync's byte pairs' 762, samples interleaved
    (results/h200-2026-11-28i-s8-transpose-ab.csv); the fill reached 548 (no producers) and 580
    (producers) in calls of the same session."""
    if "b" not in fill or g.b.bits != 8 or producers == 0 or copy_vector(g.b) < 16:
        return ""
    return "b" if warp.TransposeLayout.of(bn, stage_k, g.b.bits, 4 * 32) is not None else ""


def transposed_shared(t, stages: int, stage_k: int, bits_per_k: int) -> int:
    """Bytes of shared memory of a kernel of tiling `t` that transposes B in shared memory
    (8-bit): A's stages and B's as stored (`bits_per_k`), and B's K-major ring
    (`Schedule.b_stages`)."""
    ring = Schedule(t.warps, t.warp_tile, stages, stage_k, mma="wgmma", transpose="b").b_stages
    return stages * stage_k * bits_per_k // 8 + ring * t.cta_tile[1] * stage_k


def persistent_ctas(threads: int, need: int, target: targets.SmTarget) -> int:
    """The CTAs of a persistent kernel: as many as the SMs hold at once (`Limits.resident_ctas`)."""
    return max(1, target.limits.resident_ctas(threads, need)) * target.limits.sms


def tf32_rounding(mem) -> str | None:
    """The rounding by which an f32 operand becomes tf32 (its one cast), None if it is not one."""
    if len(mem.casts) == 1 and mem.casts[0][:2] == ("f32", "tf32"):
        return mem.casts[0][2] or tile.CAST_RULES[("f32", "tf32")].default
    return None


def tf32_staging(g) -> str:
    """The operands a tf32 wgmma kernel fills: wgmma reads tf32 K-major from the stage itself, so
    an operand stored M- or N-major is transposed by the fill, which rounds it on its way into
    shared memory; a K-major one is copied as stored by cp.async and, unless truncated (the tensor
    cores ignore the low bits), rounded where it lies (`warp.round_stage`). Copying the K-major ones
    through registers instead, rounding on the way, lost (H200 4096^3 rna: 204 TFLOP/s with 16-byte
    vectors, 160 a word at a time, against 227 rounded in place; results/h200-2026-11-27-tf32-rounding-*.csv).
    So did A taken from registers (wgmma's register-A form: ldmatrix of the K-major stage, rounded
    in registers, the loop unrolled by two for them; H100 rna 4096^3 / 8192^3 228 / 235 against
    226 / 226 in place, rn 242 / 247 against 227 / 232, N-major B 204 against 207 with spills), though
    an A not rounded at all runs 245 against 228 (H200): results/h100-2026-11-28-tf32-a-registers.csv.
    A 32-bit fill loading 16 bytes (4 lines) at a time, a quarter of the loads, lost 20-30%
    (H100 4096^3, N-major B, truncated: 192 against 279; results/h100-2026-11-28-tf32-fill-quads.csv)."""
    return "".join(w for w in "ab" if wrong_order(g, w))


def wgmma_schedule(g) -> str:
    """The wgmma kernel's key in `configs` (its defaults, `WGMMA_NARROW`, `WGMMA_MIN_ROWS`)."""
    if g.a.bits == 8:
        return "8bit-wgmma"
    if g.a.bits == 32:  # tf32: as stored, rounded in place, or filled (`tf32_staging`)
        if tf32_staging(g):
            return "tf32-wgmma-fill"
        return "tf32-wgmma" if tf32_rounding(g.a) == tf32_rounding(g.b) == "trunc" else "tf32-wgmma-rounded"
    if g.a_meta is None:
        return "16bit-wgmma"
    return "sparse-wgmma-k-major-b" if column_major(g.b) else "sparse-wgmma"


@dataclass(frozen=True)
class WgmmaTiles:
    """A wgmma kernel's tiles, and the stages (count, K) that go with them unless forced."""

    warps: tuple[int, int]
    warp_tile: tuple[int, int]
    stages: int
    stage_k: int
    narrow: bool = False  # `configs.WGMMA_NARROW`'s tiles (the default's would not fill a wave)


def wgmma_tiles(g, schedule: str, default: configs.Config, warps, warp_tile, target: targets.SmTarget) -> WgmmaTiles:
    """The tiles of a wgmma kernel: the forced ones, else the default's,
    with `configs.WGMMA_NARROW`'s where the default's CTAs would not fill a wave; no more
    warpgroups than M has 64-row blocks, and B's columns cut to N (whole 64-column blocks for an
    N-major B; a power of two of them for a filled 32-bit one, which `FillLayout` splits)."""
    stages, stage_k = default.stages, default.stage_k
    forced_warps = warps is not None
    narrow = False
    if warps is None:  # no more warpgroups than M's 64-row blocks
        wm = parse_pair(default.warps, "warps")[0]  # type: ignore[index]
        warps = (min(wm, 4 * ceil_div(g.m, warp.WGMMA_ROWS)), 1)
    if warp_tile is None:
        rn = parse_pair(default.warp_tile, "warp-tile")[1]  # type: ignore[index]
        ctas = ceil_div(g.m, warps[0] * 16) * ceil_div(g.n, 8 * rn) * g.batch  # type: ignore[index]
        if narrow := ctas < target.limits.one_wave:
            tiles = configs.WGMMA_NARROW.get(schedule, configs.WGMMA_NARROW["16bit-wgmma"])
            rn, stages = parse_pair(tiles.warp_tile, "warp-tile")[1], tiles.stages  # type: ignore[index]
            if schedule in configs.WGMMA_NARROW:  # (the dense 16-bit ones' stage K is theirs alone)
                stage_k = tiles.stage_k
            if not forced_warps:
                warps = (min(warps[0], parse_pair(tiles.warps, "warps")[0]), 1)  # type: ignore[index]
        block = 1 if column_major(g.b) else warp.N_BLOCK // 8
        cut = ceil_div(ceil_div(g.n, 8), block) * block
        if g.a.bits == 32 and wrong_order(g, "b"):  # B's lines a power of two, which the 32-bit fill splits
            cut = 1 << (cut - 1).bit_length()
        rn = min(rn, cut)
        while not warp.wgmma_n_legal(g.mma.variant.variant.atype, 8 * rn):  # (8-bit integers: N 16 apart)
            rn += 1
        warp_tile = (1, rn)
    return WgmmaTiles(warps, warp_tile, stages, stage_k, narrow)  # type: ignore[arg-type]


def wgmma_tiling_error(g, warps, warp_tile, stage_k: int) -> str | None:
    """Why forced wgmma tiles do not fit the instruction (None if they do)."""
    (wm, wn), (rm, rn) = warps, warp_tile
    if wm % 4 or wn != 1 or rm != 1 or 8 * rn > warp.WGMMA_MAX_N:
        return (f"warpgroups take warps W x 1 (W a multiple of 4: warpgroups down M) and warp tile 1 x RN "
                f"(N = 8 RN up to {warp.WGMMA_MAX_N}), not warps {wm}x{wn}, warp tile {rm}x{rn}")
    if not warp.wgmma_n_legal(g.mma.variant.variant.atype, 8 * rn):
        return (f"m64n{8 * rn} is no {g.mma.variant.variant.atype} wgmma: N 8, 16, 24 or a multiple of 16 for "
                f"8-bit integers (warp tile 1 x RN, N = 8 RN)")
    if not column_major(g.b) and 8 * rn % warp.N_BLOCK:
        return f"an N-major B is read in blocks of {warp.N_BLOCK} columns: warp tile 1 x RN with RN a multiple of 8"
    if g.a_meta is not None:  # the kept values' rows: 128 bytes, or 64 (the 64-byte swizzle)
        if stage_k * g.a.bits not in (8 * 256, 8 * 128):
            return (f"a pre-compressed A's stages are K 128 or 64 for the descriptors (its K / 2 values rows of "
                    f"128 or 64 bytes, B's 128-byte rows a multiple), not {stage_k}")
        if column_major(g.b) and stage_k * g.b.bits != 8 * 128:
            return (f"with a K-major B a pre-compressed A's stages are K 64 (B's rows 128 bytes, A's kept values "
                    f"64), not {stage_k}")
    elif stage_k * g.a.bits != 8 * 128:
        return f"the descriptors read stages of 128-byte K rows: stage-k {1024 // g.a.bits} for {g.a.bits}-bit operands, not {stage_k}"
    return None


def plan_wgmma(kernel: func.FuncOp, g, variant, target: targets.SmTarget, why_not, fill: str, gather: str,
               warps, warp_tile, stages: int, stage_k: int, split_k: int, automatic: bool = False,
               producers: int = -1, tma: int = -1, cluster: int = -1, persistent: int = -1,
               pair: str = "", transpose_b: bool = True) -> Schedule | None:
    """The schedule of a kernel multiplied by warpgroups (`wgmma`): its tiles (`wgmma_tiles`), the
    default stages of 128-byte K rows (`configs` 16bit-wgmma), as many as fit the target's shared
    memory (at least 2), the 8-bit operands `fill` names (tf32: `tf32_staging`'s) transposed K-major
    by the fill, or a LoweringError saying why not (None, when `automatic`, where the fill cannot
    split the tiles' stages evenly, or `configs.WGMMA_WAVE` says the grid would not fill a wave:
    the kernel keeps mma.sync). `producers` (-1: `configs.WGMMA_PRODUCERS`', where
    `producers_by_themselves`): a producer warpgroup that fills the stages (copies or the
    transposing fill) while the others multiply (K not split); `tma` (-1: `configs.WGMMA_TMA`'s
    where the TMA can, `tma_unsupported`): the producers' copies the TMA's; `cluster` (-1:
    `configs.WGMMA_CLUSTER`'s where it can, `cluster_unsupported`): CTAs in pairs that share B;
    `persistent` (-1: `configs.WGMMA_PERSISTENT`'s, as many CTAs as the SMs hold, `persistent_ctas`;
    0: none; N: N CTAs): CTAs that loop over the tiles, where there are more tiles than CTAs."""
    mma = g.mma
    if why := wgmma_unsupported(g, variant, target, why_not, fill, gather, pair):
        raise LoweringError(mma, f"wgmma: {why}")
    if variant.atype == "tf32":
        fill = tf32_staging(g)
    if stages == 0:
        raise LoweringError(mma, "wgmma: the warpgroups read their operands from shared memory; stages=0 cannot take it")
    schedule = wgmma_schedule(g)
    default = configs.default(target, schedule)
    tiles = wgmma_tiles(g, schedule, default, warps, warp_tile, target)
    warps, warp_tile, default_stages = tiles.warps, tiles.warp_tile, tiles.stages
    stage_k = stage_k or tiles.stage_k
    if why := wgmma_tiling_error(g, warps, warp_tile, stage_k):
        raise LoweringError(mma, f"wgmma: {why}")
    t = choose_tiling(mma, variant, g.m, g.n, g.batch, warps, warp_tile, target, wgmma=True)
    if t.grid[0] * t.grid[1] > GRID_LIMITS[0]:
        raise LoweringError(mma, f"{t.grid[0] * t.grid[1]} CTAs exceed the CUDA limit of {GRID_LIMITS[0]}")
    bm, bn = t.cta_tile
    limit = target.limits.shared_per_cta
    transpose = shared_transpose(g, bn, stage_k, fill, producers) if transpose_b else ""
    if transpose:  # (`shared_transpose`: a producer warpgroup transposes, its copies each thread's own)
        fill, producers = fill.replace(transpose, ""), 4
    elif automatic and g.a.bits == 8 and fill:
        return None  # the register fill loses to mma.sync's byte-pair reads (results/h200-2026-11-27-s8-wgmma-fill.csv)
    # a pre-compressed A: K / 2 values, and their metadata staged with them (2 bits a value)
    bits_per_k = bm * (g.a.bits // 2 + 1 if g.a_meta is not None else g.a.bits) + bn * g.b.bits
    forced = stages > 0
    # the stage K is the descriptors' (128-byte rows): only a default's stages are cut
    stages, _ = configs.fit_shared(stages if forced else default_stages, stage_k, bits_per_k, limit, schedule,
                                   cut_stages=not forced, cut_k=False, read_k=warp.WGMMA_K)
    if transpose:  # B's own K-major ring beside the stages of B as stored: as many stages as fit
        while stages > 2 and not forced and transposed_shared(t, stages, stage_k, bits_per_k) > limit:
            stages -= 1
    if (need := transposed_shared(t, stages, stage_k, bits_per_k) if transpose
            else stages * stage_k * bits_per_k // 8) > limit:
        raise LoweringError(mma, f"wgmma: {stages} stages of a {bm}x{bn} CTA tile need {need} bytes of "
                            f"shared memory; a CTA has at most {limit} on {target}: use fewer stages or a smaller tile")
    if producers < 0:  # (`configs.WGMMA_PRODUCERS`, where they cost no residency: `producers_by_themselves`)
        mine = configs.WGMMA_PRODUCERS.get(schedule, 0)
        alone = split(g, variant, t, stages, stage_k, split_k, target, mma, schedule)[0] if mine else 1
        by_themselves = mine and producers_by_themselves(g, t, bn, stage_k, need, target, variant, fill, pair, alone)
        producers = mine if by_themselves else 0
        ring = configs.WGMMA_PRODUCER_STAGES.get(schedule, 0) if producers and not forced and not tiles.narrow else 0
        if (ring := min(ring, max(stages, ceil_div(g.k, stage_k)))) > stages:  # (no more stages than K has)
            stages, _ = configs.fit_shared(ring, stage_k, bits_per_k, limit, schedule, cut_stages=True, cut_k=False,
                                           read_k=warp.WGMMA_K)
            need = stages * stage_k * bits_per_k // 8
    fillers = 32 * producers if producers else t.threads  # the threads that fill (a producer warpgroup's)
    for what in fill:  # each filled operand's K-major stage over those threads (`FillLayout`)
        lines, mem = (bm, g.a) if what == "a" else (bn, g.b)
        if warp.FillLayout.of(lines, stage_k, mem.bits, fillers) is None:
            if automatic:
                return None
            raise LoweringError(mma, f"wgmma: the transposing fill of {what.upper()} cannot split a {lines} x "
                                f"{stage_k} stage evenly over {fillers} threads; choose other warps or warp-tile")
    if producers and split_k > 1:
        raise LoweringError(mma, "producers: a producer warpgroup's kernel does not split K (split-k 1)")
    why = tma_unsupported(g, variant, producers, fill, pair, transpose)
    if tma > 0 and why:
        raise LoweringError(mma, f"tma: {why}")
    if tma < 0:  # (`configs.WGMMA_TMA`)
        tma = int(why is None and configs.WGMMA_TMA.get(schedule, False))
    why = cluster_unsupported(g, tma, bm)
    if cluster > 1 and why:
        raise LoweringError(mma, f"cluster: {why}")
    if cluster < 0:  # (`configs.WGMMA_CLUSTER`)
        cluster = configs.WGMMA_CLUSTER.get(schedule, 1) if why is None else 1
    why = persistent_unsupported(g, tma, cluster)
    if persistent > 0 and why:
        raise LoweringError(mma, f"persistent: {why}")
    if persistent < 0:  # (`configs.WGMMA_PERSISTENT`)
        by_itself = why is None and configs.WGMMA_PERSISTENT.get(schedule)
        persistent = persistent_ctas(t.threads + 32 * producers, need, target) if by_itself else 0
    persistent = persistent if persistent < t.tiles else 0  # (no fewer tiles than CTAs: one a CTA)
    splits, chunk = split(g, variant, t, stages, stage_k, 1 if producers else split_k, target, mma, schedule)
    wave = configs.WGMMA_WAVE.get(f"{schedule}-transpose" if transpose else schedule)
    if automatic and wave is not None and (splits > wave[0] or t.tiles * splits < target.limits.one_wave
                                           or wave_use(t.tiles * splits, target) < wave[1]):
        return None  # (`configs.WGMMA_WAVE`) mma.sync's smaller tiles do better
    return Schedule(t.warps, t.warp_tile, stages, stage_k, "ahead", GROUP_M, None, splits, chunk, fill, mma="wgmma",
                    producers=producers, copy="tma" if tma else "async", cluster=cluster, persistent=persistent,
                    pair_bytes=pair, transpose=transpose)
