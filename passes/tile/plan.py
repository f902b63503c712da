"""`tile-plan`: decides how each selected GEMM kernel is laid out, once, as `#warp.schedule`.

The configuration comes from the options (forced), else the tuning cache, else the target's
defaults (`compiler/core/configs.py`, with size-class adjustments); it is checked against the
hardware's limits here, with a located refusal, so that every later pass of the chain
(`tile-distribute`, `warp-stage-shared`, `warp-pipeline`, `warp-prefetch-fragments`,
`warp-widen-int4`) only reads the `warp.schedule` attribute written on the `func.func`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction
from math import gcd

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from tilemma.compiler.core import configs, targets
from tilemma.compiler.core.elements import BY_PTX, FP8
from tilemma.compiler.layouts import sparse_format
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects import tile, warp
from tilemma.dialects.schedule import Schedule, ScheduleAttr
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import DYNAMIC, PLANNING_SIZE, GemmKernel, planning_view, read_kernel

GRID_LIMITS = (2**31 - 1, 65535, 65535)
INDEX_LIMIT = 2**31  # coordinates are computed in 32 bits
GROUP_M = 8  # CTA rows of tiles per group of the rasterized order (Triton's GROUP_SIZE_M)
# Split-K where the output tiles leave SMs idle: at most this many CTAs share a tile's K, each at
# least SPLIT_MIN_STEPS steps of it (a stage, or an instruction's K on the simple schedule).
SPLIT_MAX = 16
SPLIT_MIN_STEPS = 4
SPLIT_MIN_K = 1024  # automatic split-K only for a K this long: shorter ones gain too little
# Dense shapes staged with `warp.load_shared` (one element per register, which ldmatrix cannot
# read): (m, n, k, A type) -> element bits. Their B may be row-major (K x N) or K-major.
SHARED_LOAD_SHAPES = {(16, 8, 16, "f64"): 64}


def ceil_div(a: int, b: int) -> int:
    """a / b rounded up (tiles covering a size)."""
    return -(-a // b)


def parse_pair(text: str, option: str) -> tuple[int, int] | None:
    """`2x4` -> (2, 4); '' -> None; a ValueError naming the option otherwise."""
    if not text:
        return None
    if why := configs.pair_error(text, option):
        raise ValueError(f"tile-plan: {why}")
    x, y = (int(p) for p in text.lower().split("x"))
    return x, y


@dataclass(frozen=True)
class Tiling:
    instr: tuple[int, int, int]
    warp_tile: tuple[int, int]
    warps: tuple[int, int]
    grid: tuple[int, int, int]

    @property
    def threads(self) -> int:
        return 32 * self.warps[0] * self.warps[1]

    @property
    def cta_tile(self) -> tuple[int, int]:
        return self.warps[0] * self.warp_tile[0] * self.instr[0], self.warps[1] * self.warp_tile[1] * self.instr[1]

    @property
    def tiles(self) -> int:
        """Output tiles, batches included: the grid's CTAs before a split of K."""
        return self.grid[0] * self.grid[1] * self.grid[2]


def tiling_of(variant, g: GemmKernel, s: Schedule) -> Tiling:
    """The grid a schedule gives a kernel: tiles of the CTA's rows x columns (one flattened
    dimension where CTAs run in groups, `group_m`), times the batch."""
    mi, ni, ki = instruction_layouts(variant).warp_shape
    wm, wn = s.warps
    rm, rn = s.warp_tile
    grid = (ceil_div(g.n, wn * rn * ni), ceil_div(g.m, wm * rm * mi), g.batch)
    if s.group_m:
        grid = (grid[0] * grid[1], 1, g.batch)
    return Tiling((mi, ni, ki), (rm, rn), (wm, wn), grid)


def kernel_target(kernel: func.FuncOp) -> targets.SmTarget:
    """The kernel's target (`warp.target`, set by tile-select-mma; sm_90, its default, without)."""
    attr = kernel.attributes.get("warp.target")
    return targets.parse_sm(attr.sm.data if isinstance(attr, warp.TargetAttr) else "sm_90")


def choose_tiling(mma: Operation, variant, m: int, n: int, batch: int,
                  warps: tuple[int, int] | None, warp_tile: tuple[int, int] | None,
                  target: targets.SmTarget, wgmma: bool = False) -> Tiling:
    """The default tiling (or the requested one), checked against the target's limits. A wgmma
    warp holds only its accumulators (and a sparse A's metadata words of a K 128 stage): A and B
    are read from shared memory by the instruction."""
    lays = instruction_layouts(variant)
    mi, ni, ki = lays.warp_shape
    rm, rn = warp_tile or (min(2, ceil_div(m, mi)), min(max(1, 32 // ni), ceil_div(n, ni)))
    wm, wn = warps or (min(2, ceil_div(m, rm * mi)), min(2, ceil_div(n, rn * ni)))
    t = Tiling((mi, ni, ki), (rm, rn), (wm, wn), (ceil_div(n, wn * rn * ni), ceil_div(m, wm * rm * mi), batch))
    limits = target.limits
    if t.threads > limits.threads_per_cta:
        raise LoweringError(
            mma, f"warps {wm}x{wn} make a CTA of {t.threads} threads; a CTA holds at most "
            f"{limits.threads_per_cta} ({limits.threads_per_cta // 32} warps) on {target}",
        )
    # 32-bit registers: an f64 value takes two
    held = ((rm * rn, lays.c),) if wgmma else ((rm * rn, lays.c), (rm, lays.a), (rn, lays.b))
    regs = sum(n * lay.b32_registers for n, lay in held)
    if variant.sparse:
        regs += 4 * rm if wgmma else rm
    budget = limits.thread_registers(t.threads)  # .maxntid: the CTA shares the SM's file
    if regs > budget - 40:
        raise LoweringError(
            mma, f"warp tile {rm}x{rn} holds {regs} fragment registers per thread; with the "
            f"addressing that exceeds the {budget} registers a thread of a {t.threads}-thread CTA "
            f"can have on {target} ({limits.registers_per_thread} a thread, "
            f"{limits.registers_per_sm} an SM): use a smaller warp tile or fewer warps",
        )
    for axis, (g, limit) in enumerate(zip(t.grid, GRID_LIMITS)):
        if g > limit:
            raise LoweringError(
                mma, f"grid {t.grid} exceeds the CUDA limit of {limit} CTAs in {'xyz'[axis]}",
            )
    return t


def copy_vector(mem, by_column: bool = False) -> int:
    """Bytes per cp.async for an operand: the widest of 16/8/4 that keeps every contiguous run
    of the window (its rows; its columns for a K-major B or an M-major A) aligned (0 when even 4
    does not)."""
    stride = mem.col_stride if by_column else mem.row_stride
    g = gcd(stride * mem.bits, mem.base * mem.bits, 128) // 8  # in bits: sub-byte elements are packed
    return g if g >= 4 else 0


def column_major(mem) -> bool:
    """Whether an operand's window is stored column by column (each column contiguous): an
    M-major A (M x K), a K-major B (K x N)."""
    return mem.row_stride == 1 and mem.col_stride != 1


def stageable(g, variant, fill: str = "", gather: str = "") -> str | None:
    """Why a kernel cannot take the staged schedule (None if it can): a dense mma whose K rows
    are 16 bytes (tf32 m16n8k8, 16-bit m16n8k16, 8-bit m16n8k32, 4-bit m16n8k64, 1-bit
    m16n8k256), operands read as stored (tf32: f32 rounded), and f64 m16n8k16 (128-byte K rows,
    read with `warp.load_shared`); A with contiguous K rows (or M columns), B with contiguous K
    columns (or N rows) - an operand stored the other way round is read with ldmatrix .trans
    (16-bit), `warp.load_shared` (tf32, f64) or, for the 8-bit operands `fill` names
    (`fillable`), written K-major by a transposing fill; every run aligned for cp.async (or the
    fill's 32-bit loads) - or, for the operands `gather` names (`gatherable`), copied element by
    element -, and sub-byte K rows ending on a byte. A pre-compressed sparse A:
    `pre_compressed_stageable`."""
    if g.a_meta is not None:
        return pre_compressed_stageable(g, variant)
    if variant.atype == "f64" and variant.shape != "m16n8k16":
        return (f"f64 staging needs m16n8k16 (sm_90); {variant.shape}'s K of {variant.k} is a 32-byte "
                f"shared row, too short for the 16-byte granule swizzle and a pipelined stage")
    bits = SHARED_LOAD_SHAPES.get((variant.m, variant.n, variant.k, variant.atype)) or warp.LDMATRIX_SHAPES.get(
        (variant.m, variant.n, variant.k))
    if bits is None or variant.sparse or variant.block_scale:
        return (f"staging covers dense m16n8k8 (tf32), m16n8k16 (16-bit, f64), m16n8k32 (8-bit), m16n8k64 "
                f"(4-bit) and m16n8k256 (1-bit), not {variant.shape}{' sparse' if variant.sparse else ''}")
    if variant.atype not in configs.STAGED_ELEMENTS[bits] or variant.btype not in configs.STAGED_ELEMENTS[bits]:
        return f"staging covers {', '.join(configs.STAGED_TYPES)} operands, not {variant.atype} x {variant.btype}"
    widened = [[c[:2] for c in mem.casts] == [(mem.stored, tile.INT4_WIDENED.get(mem.stored))] for mem in (g.a, g.b)]
    for what, mem, wide in (("A", g.a, widened[0]), ("B", g.b, widened[1])):
        if mem.casts and [c[:2] for c in mem.casts] != [("f32", "tf32")] and not wide:
            return f"{what} must be read as stored (or as f32 rounded to tf32, or 4-bit integers widened to 8)"
    if widened[0] != widened[1]:
        return "A and B must both be 4-bit integers widened to 8-bit, or neither"
    m_major = column_major(g.a)
    if not m_major and g.a.col_stride != 1:
        return "A must have contiguous rows or columns"
    if bits <= 8 and m_major and "a" not in fill:
        return (f"{g.a.bits}-bit A must be K-major (a row-major M x K memref): ldmatrix transposes only "
                f"16-bit elements, and {g.a.bits}-bit fragments pack {32 // g.a.bits} elements a register")
    k_major = column_major(g.b)
    if not k_major and g.b.col_stride != 1:
        return "B must have contiguous rows or columns"
    if bits <= 8 and not k_major and "b" not in fill:
        return (f"{g.b.bits}-bit B must be K-major (a column-major K x N memref, strided<[1, K]>): ldmatrix "
                f"transposes only 16-bit elements, and {g.b.bits}-bit fragments pack {32 // g.b.bits} elements "
                f"a register")
    if g.a.bits < 8 and g.k * g.a.bits % 8:
        return (f"K = {g.k} {g.a.bits}-bit elements end inside a byte: cp.async copies whole bytes, and "
                f"the byte's other bits would enter the product")
    for what, mem, by_col in (("A", g.a, m_major), ("B", g.b, k_major)):
        if not copy_vector(mem, by_col) and what.lower() not in gather:
            return (f"{what}'s {'columns' if by_col else 'rows'} are not 4-byte aligned (stride "
                    f"{mem.col_stride if by_col else mem.row_stride}, offset {mem.base} elements)")
    if getattr(g.mma, "split_tf32", None) is not None:
        return "3xTF32 is not staged"
    return None


def fillable(g, variant, kernel: func.FuncOp) -> str:
    """The operands (`a`, `b`) a transposing fill can stage (`warp.fill_load`): 8- or 4-bit, staged
    as stored (8-bit read as stored; 4-bit integers read as m16n8k64 fragments, natively or
    widened to 8-bit in registers), stored with M (A) or N (B) contiguous. 4-bit ones need that
    extent a multiple of a 32-bit word's 8 elements (a word lies wholly inside it or outside; a
    `?` one by `tile.size_multiple`); 8-bit ones of another extent, or whose lines are not 4-byte
    aligned, are loaded element by element (`gatherable` names them too). Whether the CTA's tile
    splits evenly over its threads is `FillLayout`'s to say once the tile is chosen."""
    mm, mn, _ = tile.size_multiple(kernel)
    staged_bits = 4 if widens(g, variant) else BY_PTX[variant.atype].bits
    out = ""
    for what, mem, size, multiple in (("a", g.a, g.m, mm), ("b", g.b, g.n, mn)):
        as_stored = not mem.casts or [c[:2] for c in mem.casts] == [(mem.stored, tile.INT4_WIDENED.get(mem.stored))]
        if mem.bits in warp.FILL_BITS and mem.bits == staged_bits and as_stored and wrong_order(g, what) \
                and (mem.bits == 8 or tile.tiles_exactly(size, 32 // mem.bits, multiple)):
            out += what
    return out


def wrong_order(g, what: str) -> bool:
    """Whether an operand is stored with M (A) or N (B) contiguous: the order the fill transposes."""
    return column_major(g.a) if what == "a" else not column_major(g.b) and g.b.col_stride == 1


def ragged(g, kernel: func.FuncOp) -> str:
    """The operands (`a`, `b`) whose M (A) or N (B) is not a multiple of 4 (a `?` one by
    `tile.size_multiple`): a 32-bit word of 8-bit elements along it would straddle its edge. Read
    before the planning view, which puts a hint in a `?` size's place."""
    mm, mn, _ = tile.size_multiple(kernel)
    return "".join(what for what, size, multiple in (("a", g.m, mm), ("b", g.n, mn))
                   if not tile.tiles_exactly(size, 4, multiple))


def gatherable(g, variant, fill: str, ragged_words: str) -> str:
    """The operands (`a`, `b`) a gather stages (`warp.fill_load` with `gather`, or `by_element`
    where `fill` names them): 8- or 16-bit, read as stored, whose runs are not 4-byte aligned for
    cp.async (an odd K, N or M of 16-bit elements, a stride or offset not a multiple of 4 bytes),
    in an order ldmatrix reads from a stage that holds them as stored (16-bit either way; 8-bit A
    K-major, B K-major); and the 8-bit operands `fill` transposes whose lines are not 4-byte aligned
    or that `ragged_words` names (`ragged`)."""
    out = ""
    for what, mem, by_col, readable in (("a", g.a, column_major(g.a), not column_major(g.a)),
                                        ("b", g.b, column_major(g.b), column_major(g.b))):
        if mem.casts or BY_PTX[variant.atype].bits != mem.bits:
            continue
        if what in fill:
            if mem.bits == 8 and (not copy_vector(mem, by_col) or what in ragged_words):
                out += what
        elif (mem.bits == 16 or (mem.bits == 8 and readable)) and not copy_vector(mem, by_col):
            out += what
    return out


def pairable(g, variant, fill: str, gather: str) -> str:
    """The operands (`a`, `b`) the fill would transpose that can instead be copied as stored and
    read by ldmatrix .trans of byte pairs (`#warp.schedule` pair_bytes): 8-bit, read as stored,
    their lines aligned for cp.async and M or N a multiple of 4 (not gathered), into 32-bit
    accumulators (rows and columns are put back in order by exchanging whole registers). B only
    where its rows take 16-byte copies (`configs.PAIR_B_COPY`)."""
    if BY_PTX[variant.ctype].bits != 32:
        return ""
    return "".join(what for what, mem in (("a", g.a), ("b", g.b))
                   if what in fill and what not in gather and mem.bits == 8 and not mem.casts
                   and (what == "a" or copy_vector(mem) >= configs.PAIR_B_COPY))


def pre_compressed_stageable(g, variant) -> str | None:
    """Why a pre-compressed sparse A kernel cannot be staged (None if it can): its values stage
    like a dense 16-bit A (their m16n8k32 fragment is the m16n8k16 A of the values), B like a
    dense 16-bit B, read as stored (rows contiguous: ldmatrix .trans, or K-major), 4-byte aligned."""
    if g.b.casts or g.b.stored not in ("f16", "bf16"):
        return f"B must be f16 or bf16 read as stored, not {g.b.stored}"
    k_major = column_major(g.b)
    if not k_major and g.b.col_stride != 1:
        return "B must have contiguous rows or columns"
    if not copy_vector(g.b, k_major):
        return f"B's {'columns' if k_major else 'rows'} are not 4-byte aligned"
    return None


def widens(g, variant) -> bool:
    """Whether 4-bit operands run as the 8-bit mma (select-mma's widening): staged as stored,
    their m16n8k64 fragments widened in registers (`warp.widen`)."""
    return g.a.bits == 4 and variant.k == 32


def default_schedule(g, variant, fill: str = "", gather: str = "", pair: str = "") -> str:
    """The key of a staged kernel's default configuration in `configs.DEFAULTS`."""
    if g.a_meta is not None:
        return "sparse-16bit"
    if gather and g.a.bits in (8, 16) and BY_PTX[variant.atype].name not in FP8:
        return f"{g.a.bits}bit-gather"
    if g.a.bits == 64:
        return "64bit"
    if g.a.bits == 32:
        # an M-major A or a row-major B is read with warp.load_shared, as f64; operands fed to the
        # mma as they are (`rounding trunc`) leave the issue slots of the conversions free
        key = "32bit" if column_major(g.b) and not column_major(g.a) else "32bit-row-b"
        trunc = all(cast[2] == "trunc" for op in (g.a, g.b) for cast in op.casts) and g.a.casts and g.b.casts
        return f"{key}-trunc" if trunc else key
    if g.a.bits == 8:
        if BY_PTX[variant.atype].name in FP8:
            return "fp8"
        return f"8bit-fill-{fill}" if fill else f"8bit-pairs-{pair}" if pair else "8bit"
    if widens(g, variant):
        return f"4bit-widened-fill-{fill}" if fill else "4bit-widened"
    return f"{g.a.bits}bit-fill-{fill}" if fill else f"{g.a.bits}bit"


def splittable(g, variant) -> str | None:
    """Why a kernel's K cannot be split across CTAs (None if it can): the partial sums travel in
    the accumulator's type and are added in split order, which reproduces the unsplit sum's
    meaning only for a 32- or 64-bit accumulator that wraps or rounds (not a saturating one), and
    the workspace is laid out per output tile of a static problem."""
    if g.dynamic:
        return "its sizes are known only at launch"
    if variant.sparse or variant.block_scale or g.a_meta is not None:
        return "split-K covers dense mma, not sparse or block-scaled ones"
    if variant.satfinite:
        return "a saturating (.satfinite) accumulator does not add up in parts"
    if BY_PTX[variant.dtype].name not in warp.SPLIT_ELEMENTS:
        return (f"partial sums of a {variant.dtype} accumulator would round to {variant.dtype}; split-K adds "
                f"{', '.join(warp.SPLIT_ELEMENTS)} ones")
    return None


def split(g, variant, t: Tiling, stages: int, stage_k: int, forced: int, target: targets.SmTarget,
          mma, schedule: str = "") -> tuple[int, int]:
    """(splits, K elements per split) for a kernel: `forced` splits at most (>= 2; 1: none), or
    where 0 (K at least SPLIT_MIN_K) as many as make one CTA per SM of the target, or two where the
    tiles leave a quarter of the SMs idle, or for `configs.EVEN_WAVES`' schedules of fewer tiles than
    two waves as many (up to theirs) as keep the most of the SMs' CTA slots busy (`wave_use`), each
    split at least SPLIT_MIN_STEPS steps long. Splits cover whole steps (stages, or instruction K on
    the simple schedule), none empty."""
    if forced == 1:
        return 1, 0
    why = splittable(g, variant)
    step = stage_k if stages else t.instr[2]
    total = ceil_div(g.k, step)
    if forced:
        if why:
            raise LoweringError(mma, f"split-k={forced}: {why}")
        if total < 2:
            raise LoweringError(mma, f"split-k={forced}: K = {g.k} is one step of {step}; there is nothing to split")
        want = min(forced, total)
    else:
        tiles, sms = t.tiles, target.limits.sms
        if why or g.k < SPLIT_MIN_K:
            return 1, 0
        # as many CTAs as SMs; two splits where the tiles leave a quarter of them idle
        # (benchmarks/split_k_sweep.py on an H100: 32 tiles best at 4-6 splits, 64 at 2-4, 86 at 2, 128 at 1)
        want = max(sms // tiles, 2 if 4 * tiles < 3 * sms else 1)
        most = configs.EVEN_WAVES.get(schedule, 0)
        if most and tiles < 2 * sms:  # (past two waves the last one's idle share matters less than
            # the partial sums' traffic) the fewest splits that keep the most slots busy, where they
            # keep more than `want`
            best = max(range(1, most + 1), key=lambda n: (wave_use(tiles * n, target), -n))
            if wave_use(tiles * best, target) > wave_use(tiles * want, target):
                want = best
        want = min(want, total // SPLIT_MIN_STEPS, SPLIT_MAX)
        if want < 2:
            return 1, 0
    chunk = ceil_div(total, want)
    splits = ceil_div(total, chunk)
    # the workspace holds every accumulator register of every thread, split and tile, indexed in 32 bits
    words = (t.tiles * splits * t.threads * t.warp_tile[0] * t.warp_tile[1]
             * instruction_layouts(variant).c.regs)
    if t.grid[2] * splits > GRID_LIMITS[2]:
        if forced:
            raise LoweringError(mma, f"split-k={forced}: {t.grid[2]} batches x {splits} splits exceed the CUDA limit "
                                f"of {GRID_LIMITS[2]} CTAs in z")
        return 1, 0
    if words >= INDEX_LIMIT:
        if forced:
            raise LoweringError(mma, f"split-k={forced}: the workspace would hold {words} partial sums; 2^31 or more "
                                "are not supported (its offsets are 32-bit): split less, or not at all")
        return 1, 0
    return splits, chunk * step


def more_stages(g, t: Tiling, stages: int, stage_k: int, bits_per_k: int, split_k: tuple[int, int],
                target: targets.SmTarget, unsplit: bool) -> tuple[int, int, int]:
    """(stages, splits, K a split) with `configs.MORE_STAGES`' fourth stage where it applies: the
    ring fits a CTA, every CTA of the grid is resident at once with it (the SMs' shared memory and
    registers hold as many as the grid needs of each) and the K loop runs at least
    `MORE_STAGES_MIN_STEPS` stages a CTA. With `unsplit`, where the split only evens the wave, the
    unsplit kernel is tried first (`UNSPLIT_MORE_STAGES`)."""
    want, limits = configs.MORE_STAGES_COUNT, target.limits
    ring = want * stage_k * bits_per_k // 8
    splits, chunk = split_k
    if stages >= want or ring > limits.shared_per_cta:
        return stages, splits, chunk
    tiles = t.tiles
    resident = limits.resident_ctas(t.threads, ring)  # CTAs an SM holds with the ring

    def applies(n: int, k_chunk: int) -> bool:
        steps = ceil_div(k_chunk if n > 1 else g.k, stage_k)
        return steps >= configs.MORE_STAGES_MIN_STEPS and tiles * n <= resident * limits.sms

    if unsplit and splits > 1 and wave_use(tiles * splits, target) <= wave_use(tiles, target) and applies(1, 0):
        return want, 1, 0
    return (want, splits, chunk) if applies(splits, chunk) else (stages, splits, chunk)


def wave_use(ctas: int, target) -> Fraction:
    """The share of the SMs' CTA slots a grid of `ctas` one-CTA-an-SM tiles keeps busy over its
    waves (1 where the last wave is full)."""
    sms = target.limits.sms
    return Fraction(ctas, ceil_div(ctas, sms) * sms)


def default_tiles(g, variant, schedule: str, default: configs.Config, warps: tuple[int, int] | None, size_class: str,
                  split_k: int, target: targets.SmTarget) -> tuple[tuple[int, int] | None, tuple[int, int]]:
    """(warps, warp tile) of a staged kernel whose warp tile is not forced: the schedule's default
    (`warps` where forced) under the shape rules of `configs` - WAVE_WARPS, SMALL_TILES,
    MEDIUM_WIDE and LARGE_WARPS choose the warps (None where no choice fits: `choose_tiling`'s own,
    up to 2x2), then the rows are halved while the tiles leave SMs idle (KEEP_ROWS,
    KEEP_ROWS_PAST_L2: where split-K fills the wave instead)."""
    rm, rn = parse_pair(default.warp_tile, "warp-tile")  # type: ignore[misc]
    rm, rn = min(rm, ceil_div(g.m, 16)), min(rn, ceil_div(g.n, 8))
    dm, dn = parse_pair(default.warps, "warps")  # type: ignore[misc]

    def tiles(wm: int, wn: int, rm: int) -> int:
        """CTAs of wm x wn warps of rm x rn instruction tiles."""
        return ceil_div(g.m, wm * rm * 16) * ceil_div(g.n, wn * rn * 8) * g.batch

    fewer = configs.WAVE_WARPS.get(schedule)
    if warps is None and fewer is not None:  # fewer warps where they fill the last wave: see WAVE_WARPS
        fm, fn = parse_pair(fewer, "warps")  # type: ignore[misc]
        default_ctas = tiles(dm, dn, rm)
        if (g.m >= fm * rm * 16 and g.n >= fn * rn * 8 and default_ctas >= target.limits.one_wave
                and wave_use(tiles(fm, fn, rm), target) >= wave_use(default_ctas, target) + configs.WAVE_WARPS_GAIN):
            warps = (fm, fn)
    small = configs.SMALL_TILES.get(schedule)
    if warps is None and small is not None:  # rows kept, columns narrowed: see SMALL_TILES
        (nm, nn), (nr, nc) = parse_pair(small[0], "warps"), parse_pair(small[1], "warp-tile")  # type: ignore[misc]
        # the default's rows do not fit, or leave SMs idle even halved (as below) to 2 a warp
        idle = g.m < dm * rm * 16 or tiles(dm, dn, min(rm, 2)) < target.limits.one_wave
        if idle and g.m >= nm * nr * 16 and g.n >= nn * nc * 8:
            warps, rm, rn = (nm, nn), nr, nc
    if warps is None:
        large = size_class == "large" and schedule in configs.LARGE_WARPS
        if size_class == "medium" and schedule in configs.MEDIUM_WIDE:
            # where the wide CTAs fill a wave, and their last wave leaves no more SMs idle than
            # the default's (configs.MEDIUM_WIDE)
            lm, ln = parse_pair(configs.LARGE_WARPS[schedule], "warps")  # type: ignore[misc]
            wide, narrow = tiles(lm, ln, rm), tiles(dm, dn, rm)
            large = wide >= target.limits.one_wave and wave_use(wide, target) >= wave_use(narrow, target)
        for choice in ((configs.LARGE_WARPS[schedule],) if large else ()) + (default.warps,):
            wm, wn = parse_pair(choice, "warps")  # type: ignore[misc]
            if g.m >= wm * rm * 16 and g.n >= wn * rn * 8:  # one CTA fits the problem
                warps = (wm, wn)
                break
    wm, wn = warps or (2, 2)
    # Small problems: halve the CTA's rows while that leaves SMs idle (fewer tiles than
    # about one wave of the target's SMs); KEEP_ROWS schedules (and KEEP_ROWS_PAST_L2 ones
    # whose operands outgrow half the L2), where split-K fills the wave instead (K of at least
    # configs.KEEP_ROWS_MIN_K, split-K not forced off), only while the rows exceed M.
    operand_bytes = g.batch * g.k * (g.m * g.a.bits + g.n * g.b.bits) // 8
    keep = ((schedule in configs.KEEP_ROWS
             or (schedule in configs.KEEP_ROWS_PAST_L2 and 2 * operand_bytes > target.limits.l2))
            and g.k >= configs.KEEP_ROWS_MIN_K and split_k != 1 and not splittable(g, variant))
    while rm > 2 and tiles(wm, wn, rm) < target.limits.one_wave and (not keep or wm * rm * 16 > g.m):
        rm //= 2
    return warps, (rm, rn)


def plan(kernel: func.FuncOp, g: GemmKernel, warps, warp_tile, stages: int = -1, stage_k: int = 0,
         split_k: int = 0, pair_bytes: bool = True, wgmma: bool = False, producers: int = -1,
         tma: int = -1, cluster: int = -1, persistent: int = -1, shared_transpose: bool = True) -> Schedule:
    """The schedule of one kernel (`read_kernel`'s GEMM) under the given options (None, -1, 0:
    not forced), or a LoweringError at its mma saying which limit a configuration breaks."""
    mma = g.mma
    variant = mma.variant.variant  # type: ignore[union-attr]
    target = kernel_target(kernel)
    # before the view: a `?` size's multiple, not its hint
    fill, ragged_words = fillable(g, variant, kernel), ragged(g, kernel)
    g = planning_view(g, tile.stride_multiple(kernel), tile.plan_sizes(kernel))
    if g.a_meta is not None:
        if variant.shape != sparse_format.SHAPE or variant.atype not in tile.PRE_COMPRESSED:
            raise LoweringError(
                mma, f"a pre-compressed A (tile.sparse_from) feeds the 16-bit {sparse_format.SHAPE} "
                f"mma.sp (its metadata layout), not {variant.opcode}",
            )
        tiles, words = sparse_format.meta_shape(g.m, g.k)
        if 4 * tiles * words >= 2**32:  # warp.load_meta addresses a batch's words in 32 bits
            raise LoweringError(
                mma, f"the metadata of a {g.m} x {g.k} pre-compressed A is {4 * tiles * words} bytes; "
                f"more than 4 GiB a batch is not supported (its offsets are 32-bit)",
            )
    for what, size in (("M", g.m), ("N", g.n), ("K", g.k)):
        if size >= INDEX_LIMIT:
            raise LoweringError(
                mma, f"{what} = {size}: tiles of 2^31 or more elements along a dimension "
                f"are not supported (coordinates are 32-bit)",
            )
    gather = gatherable(g, variant, fill, ragged_words)
    why_not = stageable(g, variant, fill, gather)
    # 8-bit operands the fill would transpose, read by byte-pair ldmatrix .trans instead
    pair = pairable(g, variant, fill, gather) if pair_bytes else ""
    # the warpgroups read 8-bit stages K-major: an M-major A they take from registers instead, read
    # by byte pairs (`wgmma_pair`); the other operands the fill transposes, or for an N-major B a
    # producer warpgroup in shared memory (`plan_warpgroups.shared_transpose`); by themselves only
    # the latter, the fill loses to the byte-pair reads (H200, s8 B row-major 4096^3 632 against
    # 805 TOP/s, results/h200-2026-11-27-s8-wgmma-fill.csv)
    wgmma_pair = "a" if "a" in pair and g.a.bits == 8 else ""
    wgmma_fill = "".join(w for w in fill if w not in wgmma_pair) if g.a.bits == 8 else ""
    fill = "".join(w for w in fill if w not in pair)
    forced_stages = max(stages, 0)
    if stages > 0 and why_not:
        raise LoweringError(mma, f"stages={stages}: this kernel cannot be staged through shared memory: {why_not}")
    # sm_90a's warpgroups where they can and win (`configs.WGMMA_MIN_ROWS`), unless a configuration is forced
    automatic = ((warps, warp_tile, stages, stage_k) == (None, None, -1, 0)
                 and g.m >= configs.WGMMA_MIN_ROWS[plan_warpgroups.wgmma_schedule(g)]
                 and plan_warpgroups.wgmma_unsupported(g, variant, target, why_not, wgmma_fill, gather,
                                                       wgmma_pair) is None)
    if wgmma or automatic:
        planned = plan_warpgroups.plan_wgmma(kernel, g, variant, target, why_not, wgmma_fill, gather, warps,
                                             warp_tile, stages, stage_k, split_k, automatic=not wgmma,
                                             producers=producers, tma=tma, cluster=cluster,
                                             persistent=persistent, pair=wgmma_pair, transpose_b=shared_transpose)
        if planned is not None:
            return planned
    if persistent > 0:
        raise LoweringError(mma, "persistent: persistent CTAs are warpgroup kernels' (wgmma, sm_90a) with a producer "
                                 "warpgroup copying by the TMA; this kernel runs mma.sync")
    if cluster > 1:
        raise LoweringError(mma, "cluster: clusters share B's stages between warpgroup kernels (wgmma, sm_90a) by "
                                 "the TMA; this kernel runs mma.sync")
    if tma > 0:
        raise LoweringError(mma, "tma: the TMA's copies are a producer warpgroup's, which feeds the warpgroup mma "
                                 "(wgmma, sm_90a); this kernel runs mma.sync")
    if producers > 0:
        raise LoweringError(mma, "producers: a producer warpgroup feeds the warpgroup mma (wgmma, sm_90a); this "
                                 "kernel runs mma.sync")
    schedule = default_schedule(g, variant, fill, gather, pair)
    default = configs.default(target, schedule)
    fit = dict(cut_stages=stages < 0, cut_k=not stage_k)  # defaults, cut to fit the target below
    size_class = configs.size_class(g.m, g.n, g.k, g.batch)
    if stages < 0:
        stages = default.stages
    stages = 0 if (stages == 0 or why_not) else stages
    stage_k = stage_k or default.stage_k
    # 4-bit integers staged as stored, read as m16n8k64 fragments and widened for 8-bit mmas
    widen = bool(stages) and widens(g, variant)
    read_k = 64 if widen else variant.k  # K of one fragment read
    if stages and stage_k % read_k:
        raise LoweringError(mma, f"stage-k {stage_k} is not a multiple of the fragments' K ({read_k})")
    if stages and warp_tile is None:
        warps, warp_tile = default_tiles(g, variant, schedule, default, warps, size_class, split_k, target)
        halved = configs.HALVED_ROWS_STAGES.get(schedule)
        if halved and fit["cut_stages"] and fit["cut_k"] and warp_tile[0] < parse_pair(default.warp_tile, "warp-tile")[0]:
            stages, stage_k = halved  # type: ignore[misc]
    t = choose_tiling(mma, variant, g.m, g.n, g.batch, warps, warp_tile, target)
    if "b" in pair and t.warp_tile[1] % 2:  # the pair reads take B fragments two instruction columns at a time
        fill, pair = "".join(sorted(fill + "b")), pair.replace("b", "")
    if not stages:
        splits, chunk = split(g, variant, t, 0, 0, split_k, target, mma)
        return Schedule(t.warps, t.warp_tile, split_k=splits, split_chunk=chunk)
    if t.grid[0] * t.grid[1] > GRID_LIMITS[0]:
        raise LoweringError(mma, f"{t.grid[0] * t.grid[1]} CTAs exceed the CUDA limit of {GRID_LIMITS[0]}")
    bm, bn = t.cta_tile
    # compressed: K/2 values, and their metadata staged with them (2 bits a value)
    a_bits = g.a.bits // 2 + 1 if g.a_meta is not None else g.a.bits
    limit = target.limits.shared_per_cta
    bits_per_k = bm * a_bits + bn * g.b.bits
    stages, stage_k = configs.fit_shared(stages, stage_k, bits_per_k, limit, schedule, read_k=read_k, **fit)
    need = stages * stage_k * bits_per_k // 8
    if need > limit:
        raise LoweringError(
            mma, f"{stages} stages of K {stage_k} with a {bm}x{bn} CTA tile need "
            f"{need} bytes of shared memory; a CTA has at most {limit} on {target} "
            f"({limit // 1024} KiB): use fewer stages or a smaller stage-k",
        )

    def uneven(k: int) -> list[tuple[str, str, int, int]]:
        """(kind, operand, rows, cols) of each fill and gather whose chunks do not cover a stage of K
        `k` evenly over the threads (`FillLayout`, `GatherLayout`): a filled stage is K-major
        (lines x K), a gathered one as stored (rows along the strided dimension)."""
        out = []
        for what in dict.fromkeys(fill + gather):  # a filled operand's gather loads its chunks
            mem, cols = (g.a, bm) if what == "a" else (g.b, bn)
            if what in fill:
                kind, layout, shape = "transposing fill", warp.FillLayout, (cols, k)
            else:  # the stage's rows are K's where the operand's K runs across its memory rows
                k_rows = column_major(g.a) if what == "a" else not column_major(g.b)
                kind, layout, shape = "gather", warp.GatherLayout, (k, cols) if k_rows else (cols, k)
            if layout.of(*shape, mem.bits, t.threads) is None:
                out.append((kind, what, *shape))
        return out

    if uneven(stage_k) and fit["cut_k"] and 2 * stage_k in configs.STAGE_KS:
        # a default stage K too short for the chunks (a 4-bit fill's hold 64 elements of K): twice
        # as long, in as many of the stages as fit (at least 2)
        longer = next((s for s in range(stages, 1, -1) if s * 2 * stage_k * bits_per_k // 8 <= limit), 0)
        if longer and not uneven(2 * stage_k):
            stages, stage_k = longer, 2 * stage_k
    for kind, what, rows, cols in uneven(stage_k):
        if forced_stages:
            raise LoweringError(mma, f"stages={forced_stages}: the {kind} of {what.upper()} cannot split a "
                                f"{rows} x {cols} stage evenly over {t.threads} threads; choose other warps, "
                                f"warp-tile or stage-k")
        splits, chunk = split(g, variant, t, 0, 0, split_k, target, mma)
        return Schedule(t.warps, t.warp_tile, split_k=splits, split_chunk=chunk)
    interleave = schedule in configs.INTERLEAVED_READS and not widen
    splits, chunk = split(g, variant, t, stages, stage_k, split_k, target, mma, schedule)
    if fit["cut_stages"] and size_class != "large" and schedule in configs.MORE_STAGES:
        stages, splits, chunk = more_stages(g, t, stages, stage_k, bits_per_k, (splits, chunk), target,
                                            split_k == 0 and schedule in configs.UNSPLIT_MORE_STAGES)
    return Schedule(t.warps, t.warp_tile, stages, stage_k, "interleaved" if interleave else "ahead", GROUP_M,
                    variant if widen else None, splits, chunk, fill, gather, pair)


def tuned_config(kernel: func.FuncOp, mma, tune_cache: str):
    """The tuning cache's (`tune_cache`) configuration for this kernel, if it has one."""
    cache = configs.load(tune_cache)
    if not cache or mma.variant.variant.sparse:  # the cache's entries were measured on dense kernels
        return None
    v = mma.variant.variant
    target = kernel.attributes.get("warp.target")
    shape = mma.acc.type.get_shape()
    batch = shape[0] if len(shape) == 3 else 1
    k = mma.lhs.type.get_shape()[-1]
    hint = tile.plan_sizes(kernel) or (PLANNING_SIZE,) * 3
    m, n, k = (h if d == DYNAMIC else d for d, h in zip((shape[-2], shape[-1], k), hint))
    key = configs.cache_key(target.sm.data if target else "", v.atype, v.btype, v.ctype,
                            configs.size_class(m, n, k, batch))
    return cache.get(key)


@dataclass(frozen=True)
class TilePlan(ModulePass):
    """Options: `warps` (WMxWN warps per CTA, default up to 2x2), `warp-tile` (RMxRN
    instructions per warp; default up to 2 x (32 / instruction N), or 4x8 when staged) and
    `stages` (the ring of shared-memory stages of the staged schedule, 2..5; 0: fragments straight
    from global memory; -1, the default: staged where it applies, see `stageable`) and `stage-k`
    (K of one stage; 0, the default: 128 bytes of K) and `split-k` (CTAs sharing an output tile's K,
    at most: 1 none, 0 (default) automatic where the tiles leave SMs idle, see `split`) and
    `pair-bytes` (true, the default: an M-major 8-bit A or N-major B copied as stored and read by
    byte-pair ldmatrix .trans, `pairable`; false: transposed by the fill) and `wgmma` (true: each
    stage multiplied by warpgroups' wgmma.mma_async, sm_90a, `plan_warpgroups.plan_wgmma`, or a located refusal
    where the kernel cannot take it; false, the default: so are the sm_90a kernels that can take it
    of at least `configs.WGMMA_MIN_ROWS` rows (by their wgmma schedule: 16-bit, sparse, 8-bit, tf32) whose
    configuration is not forced) and `producers` (4: a warpgroup kernel whose producer warpgroup fills
    the stages, `warp-specialize`; 0: none; -1, the default: `configs.WGMMA_PRODUCERS`, the sparse
    and 16-bit warpgroup kernels where `plan_warpgroups.producers_by_themselves`) and `tma` (1: those
    producers copy A's and B's stages with the TMA, `Schedule.copy`, or a located refusal where they
    cannot; 0: cp.async; -1, the default: `configs.WGMMA_TMA`, the sparse and 16-bit kernels'
    producers, where they can) and `cluster` (2: those TMA
    kernels' CTAs in pairs that share B's stages, `Schedule.cluster`, or a located refusal; 1: none;
    -1, the default: `configs.WGMMA_CLUSTER`'s choice, where they can) and `persistent` (N: those TMA
    kernels launched as N CTAs that loop over the tiles, `Schedule.persistent`, or a located refusal;
    0: none; -1, the default: `configs.WGMMA_PERSISTENT`'s, as many as the SMs hold) and
    `shared-transpose` (true, the default: a warpgroup kernel's 8-bit N-major B transposed in shared
    memory by a producer warpgroup where it can, `plan_warpgroups.shared_transpose`, which the
    warpgroups then take by themselves; false: by the fill). When none of
    warps, warp-tile and stages is given, a configuration in the tuning cache `tune-cache` (JSON,
    `compiler/core/configs.py`) wins. Defaults are the kernel's target's (`configs.default`), their
    stages and stage K cut to fit its shared memory."""

    name = "tile-plan"

    warps: str = ""
    warp_tile: str = ""
    stages: int = -1
    stage_k: int = 0
    tune_cache: str = ""
    split_k: int = 0
    pair_bytes: bool = True
    wgmma: bool = False
    producers: int = -1
    tma: int = -1
    cluster: int = -1
    persistent: int = -1
    shared_transpose: bool = True

    @property
    def automatic(self) -> bool:
        """Whether the tiling is left to the planner (nothing forced, the byte pairs allowed):
        where `tile-transpose-product` may change which product it plans."""
        return ((self.warps, self.warp_tile, self.stages, self.stage_k, self.split_k)
                == ("", "", -1, 0, 0) and self.pair_bytes and not self.wgmma
                and (self.producers, self.tma, self.cluster, self.persistent) == (-1, -1, -1, -1))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps, warp_tile = parse_pair(self.warps, "warps"), parse_pair(self.warp_tile, "warp-tile")
        if why := configs.stages_error(self.stages) or configs.stage_k_error(self.stage_k):
            raise ValueError(f"tile-plan: {why}")
        if self.cluster not in (-1, 1, 2):
            raise ValueError(f"tile-plan: cluster is -1 (automatic), 1 (none) or 2 (pairs of CTAs), got {self.cluster!r}")
        if not isinstance(self.persistent, int) or isinstance(self.persistent, bool) or self.persistent < -1:
            raise ValueError(f"tile-plan: persistent is -1 (automatic), 0 (none) or the CTAs, got {self.persistent!r}")
        if self.tma not in (-1, 0, 1):
            raise ValueError(f"tile-plan: tma is -1 (automatic), 0 (cp.async) or 1 (the TMA), got {self.tma!r}")
        if self.producers not in (-1, 0, 4):
            raise ValueError(f"tile-plan: producers is -1 (automatic), 0 (none) or 4 (a producer warpgroup), "
                             f"got {self.producers!r}")
        if not isinstance(self.split_k, int) or isinstance(self.split_k, bool) or not 0 <= self.split_k <= SPLIT_MAX:
            raise ValueError(f"tile-plan: split-k must be 0 (automatic), 1 (none) or up to {SPLIT_MAX}, got {self.split_k!r}")
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            mmas = [o for o in kernel.walk() if isinstance(o, (*tile.MMA_OPS, tile.MatmulOp))]
            if not mmas:
                continue
            unselected = [m for m in mmas if isinstance(m, tile.MatmulOp) or m.variant is None]
            if unselected:
                raise LoweringError(unselected[0], "run tile-select-mma before tile-plan")
            g = read_kernel(kernel)
            w, t, st, sk = warps, warp_tile, self.stages, self.stage_k
            tuned = (tuned_config(kernel, mmas[0], self.tune_cache) if (warps, warp_tile, self.stages) == (None, None, -1)
                     and not (self.wgmma or self.tma > 0 or self.cluster > 1 or self.persistent > 0) else None)
            schedule = None
            if tuned is not None:
                try:
                    schedule = plan(kernel, g, parse_pair(tuned.warps, "warps"), parse_pair(tuned.warp_tile, "warp-tile"),
                                    tuned.stages, tuned.stage_k, self.split_k, self.pair_bytes)
                except LoweringError as e:  # measured on another kernel of its class: not an error here
                    print(f"tilemma: note: {self.tune_cache}: the tuned configuration {tuned} does not apply to "
                          f"@{kernel.sym_name.data} ({e.message}); using the defaults", file=sys.stderr)
            kernel.attributes["warp.schedule"] = ScheduleAttr(schedule or plan(kernel, g, w, t, st, sk, self.split_k,
                                                                               self.pair_bytes, self.wgmma,
                                                                               self.producers, self.tma,
                                                                               self.cluster, self.persistent,
                                                                               self.shared_transpose))

# The warpgroup kernels' planning builds on this module's tiling and split-K; imported last so
# that either module may be imported first (its functions are looked up when `plan` runs).
from tilemma.passes.tile import plan_warpgroups  # noqa: E402
