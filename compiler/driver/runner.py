"""Runs a compiled kernel on random inputs and checks every output element against the reference.

Inputs are random values of each memref's element type (`reference.random_matrix`, fixed seed);
the expected D is `reference.mma_reference` on the tiles the kernel reads, after the element
conversions the tile IR asks for (tf32 rounding) — independent of the compiled code. Elements of
D's memref outside the stored tile must come back unchanged. On a GPU whose tensor-core arithmetic
the emulator has been proven to reproduce (`mma_arith.proven`), D must moreover be the emulator's,
word for word; the reference's bound stays as the second opinion.

A kernel with an epilogue (`GemmKernel.fused`: tile.map / tile.cast after the mma, or several
stores) is checked by `epilogue_reference`: the accumulator enters as want +- the GEMM's error
bound (a point for integers), the epilogue's ops carry that interval to each output, and every
element of every output must lie in its interval; each output's memref outside what is stored
there must be unchanged. Its memory inputs (bias vectors, scales, residual tiles) get random
values of their type like the operands, scaled after an integer GEMM so that a dequantisation
lands near 1, plus a few adversarial ones (large, tiny, -0); see `_epilogue_inputs`. A kernel
without an epilogue is compared exactly as before.

Memory layout of kernel arguments: each memref's strided layout (row-major unless it says
otherwise), buffers of the layout's span; elements of fewer than 8 bits packed densely with buffer
element i at bit i*bits (least significant first), as the lowering addresses them. Only the tiles
the kernel reads hold random values: every other buffer element (the layout's gaps, the memref
outside the tile, all of D) holds a sentinel (NaN, or the type's extreme value), so a kernel that
reads the wrong place gets a wrong answer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from tilemma.compiler.verify import reference
from tilemma.compiler.layouts import sparse_format, sparse_fragments
from tilemma.compiler.core.memref_layout import StridedLayout
from tilemma.compiler.driver.pipeline import CompiledKernel
from tilemma.dialects import tile
from tilemma.passes.tile.attention_kernel import AttentionKernel
from tilemma.passes.tile.gemm_kernel import GemmKernel, MemOperand


@dataclass(frozen=True)
class RunResult:
    kernel: str
    variant: str
    size: str
    max_abs: float
    max_rel: float
    ok: bool
    detail: str
    device: str
    outputs: dict = field(default_factory=dict, compare=False, repr=False)  # name -> memref values

    def line(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        return (
            f"{self.kernel}  {self.variant}  {self.size}  on {self.device}  "
            f"max_abs={self.max_abs:.3g} max_rel={self.max_rel:.3g}  {verdict}"
            + ("" if self.ok else f"  ({self.detail})")
        )


def pack_memory(values: np.ndarray, type_name: str) -> np.ndarray:
    """The bytes a kernel argument holds: packed bits for 4- and 1-bit types, one byte per
    element for fp6 (6 does not divide 8), else the values."""
    et = reference.element_type(type_name)
    if et.storage_bits < 8:
        return pack_bits(reference.to_bits(values, et).reshape(-1), et.bits)
    if et.storage_dtype != et.dtype:  # kept as codes: fp6, ue4m3
        return np.ascontiguousarray(reference.to_bits(values, et).astype(et.storage_dtype))
    return np.ascontiguousarray(values.astype(et.storage_dtype))


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Sub-byte codes packed densely, code i at bit i*bits, least significant bit first: each
    code's low `bits` bits unpacked little-endian, then packed little-endian, 8 to a byte."""
    low = np.unpackbits(codes.astype(np.uint8).reshape(-1, 1), axis=1, count=bits, bitorder="little")
    return np.packbits(low.reshape(-1), bitorder="little")


def _view(full: np.ndarray, mem: MemOperand, g: GemmKernel, rows: int, cols: int) -> np.ndarray:
    """The tile an operand reads out of its memref's buffer, through its strides (batch
    broadcast kept as batch 1)."""
    flat = full.reshape(-1)
    batches = 1 if mem.batch_stride == 0 else g.batch
    idx = (
        mem.base
        + np.arange(batches)[:, None, None] * mem.batch_stride
        + np.arange(rows)[None, :, None] * mem.row_stride
        + np.arange(cols)[None, None, :] * mem.col_stride
    )
    return flat[idx]


def sentinel(type_name: str) -> float | int:
    """What a buffer holds where the kernel must not read: NaN where the type has one, else its
    largest finite value (fp6, fp4), or the integer farthest from zero."""
    et = reference.element_type(type_name)
    if et.is_float:
        with np.errstate(invalid="ignore"):
            has_nan = bool(np.isnan(np.array(np.nan).astype(et.dtype).astype(np.float64)))
        return float("nan") if has_nan else float(et.max_finite)
    low, high = et.int_range
    return low if low < 0 else high


def _read_tiles(g: GemmKernel) -> list[tuple[MemOperand, int, int]]:
    """(operand, rows, columns) of every tile the kernel reads."""
    tiles = [(g.a, g.m, g.k), (g.b, g.k, g.n)]
    if g.a_meta is not None:  # pre-compressed A: values and metadata words
        tiles[0] = (g.a, *sparse_format.values_shape(g.m, g.k))
        tiles.append((g.a_meta, *sparse_format.meta_shape(g.m, g.k)))
    if isinstance(g.c, MemOperand):
        tiles.append((g.c, g.m, g.n))
    if g.scales:
        blocks = -(-g.k // g.scales[2])
        tiles += [(g.scales[0], g.m, blocks), (g.scales[1], blocks, g.n)]
    tiles += [(mem, g.m, g.n) for _, mem in g.inputs]  # the epilogue's (broadcast: strides 0)
    return tiles


def _logical(values: np.ndarray, mem: MemOperand) -> tuple[np.ndarray, str]:
    """Apply the tile IR's casts: the values the mma multiplies, and their type."""
    t = mem.stored
    for src, dst, rounding in mem.casts:
        rule = tile.CAST_RULES.get((src, dst))
        if rule is not None and dst == "tf32":
            values = reference.round_tf32(values.astype(np.float32), rounding or rule.default)
        elif rule is not None and rule.how == "extend":
            values = values.astype(reference.element_type(dst).dtype)
        else:
            raise ValueError(f"the reference has no cast {src} -> {dst}")
        t = dst
    return values, t


def instruction_k(kernel: CompiledKernel) -> int:
    """K of one mma of the kernel: .satfinite clamps after each of them."""
    return kernel.instruction.k


def _sparse_pattern(g: GemmKernel) -> str:
    """The pattern `tile.compress` enforces on A."""
    assert g.a.sparse_pattern is not None
    return g.a.sparse_pattern


def _prune_tiles(values: np.ndarray, g: GemmKernel, pattern: str) -> np.ndarray:
    """`values` (a memref's elements) with the A tile pruned to `pattern` (groups start at the
    tile's column 0; a ragged last group is padded with zeros)."""
    out = values.copy()
    for batch in _view(np.arange(values.size), g.a, g, g.m, g.k):
        out[batch] = _prune_ragged(out[batch], pattern)
    return out


def sparsity_error(word: int, g: GemmKernel, no_error: int) -> str | None:
    """Decode the kernel's sparsity error word (first offending group, row-major); `no_error`
    is the word's initial value (from the kernel's ABI)."""
    if word == no_error:
        return None
    pattern = sparse_fragments.pattern_for(_sparse_pattern(g))
    groups = -(-g.k // pattern.chunk)
    batch_row, group = divmod(word, groups)
    batch, row = divmod(batch_row, g.m)
    where = f"batch {batch}, " if g.a.batch_stride else ""
    lo = group * pattern.chunk
    return (
        f"A is not {pattern.name} sparse: {where}row {row}, group {group} (columns {lo}.."
        f"{min(lo + pattern.chunk, g.k) - 1}) has more than {pattern.kept_atoms} nonzero "
        f"{pattern.what}; compress with prune to keep the largest"
    )


#: The longest emulation `tilemma run` starts without `--allow-long` (estimated seconds).
MAX_EMULATION_SECONDS = 600.0


@dataclass(frozen=True)
class Estimate:
    """What running a kernel (`run_compiled`) costs the host, roughly: multiply-adds, host memory
    (the buffers, their masks and indices, the reference's float64 copies) and, in the emulator,
    seconds."""

    macs: int
    bytes: int
    seconds: float | None  # None on a GPU


def estimate(kernel: CompiledKernel, on: str) -> Estimate:
    from tilemma.compiler.verify import emulator

    g = kernel.gemm
    elements = sum(kernel.arg_sizes)
    if isinstance(g, AttentionKernel):  # two products; the reference's L x S matrices (S, P, bound terms)
        macs = g.batch * g.l * g.s * (g.d + g.dv)
        tiles = g.batch * (g.l * g.d + g.s * (g.d + g.dv) + 2 * g.l * g.dv + 4 * g.l * g.s)
    else:
        tiles = g.batch * (g.m * g.k + g.k * g.n + 2 * g.m * g.n)
        macs = g.batch * g.m * g.n * g.k
    seconds = macs / emulator.MACS_PER_SECOND if on == "emulator" else None
    return Estimate(macs, 32 * elements + 48 * tiles, seconds)


def check_size(kernel: CompiledKernel, on: str, allow_long: bool = False) -> None:
    """Refuse up front (ValueError) a run that would not fit in this machine's memory, or an
    emulation estimated past MAX_EMULATION_SECONDS unless `allow_long`: saying how big it is and
    how long it would take, instead of running out of memory (a 65536^3 GEMM) or running for hours
    without a word (4096^3)."""
    from tilemma.compiler.verify import emulator

    e = estimate(kernel, on)
    g = kernel.gemm
    size = f"{g.batch}x" if g.batch > 1 else ""
    shape = f"{g.l}x{g.s}x{g.d}" if isinstance(g, AttentionKernel) else f"{g.m}x{g.n}x{g.k}"
    what = f"{kernel.name}: {size}{shape} is {_count(e.macs)} multiply-adds"
    memory = _physical_memory()
    if memory and e.bytes > memory:
        raise ValueError(f"{what}; checking it needs about {_bytes(e.bytes)} of host memory (inputs and the NumPy "
                         f"reference), more than this machine's {_bytes(memory)}: run a smaller problem")
    if e.seconds is not None and e.seconds > MAX_EMULATION_SECONDS and not allow_long:
        raise ValueError(f"{what}; the CPU emulator would take about {_duration(e.seconds)} (it runs about "
                         f"{_count(emulator.MACS_PER_SECOND)} a second on two cores): pass --allow-long to run it "
                         "anyway, or run it on a GPU (--on gpu)")


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _count(n: float) -> str:
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f}"


def _bytes(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.0f} s"


def launch_shapes(kernel: CompiledKernel, inputs: dict[str, np.ndarray],
                  sizes: list[str] | None) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """The shapes and (packed) element strides of one run's buffers, one per parameter, for a
    kernel with `?` sizes: each size from an `--input` array of the argument it sizes, else from
    `sizes` (`NAME=VALUE`, comma-separated or repeated); a ValueError naming what is missing."""
    given: dict[str, int] = {}
    for spec in sizes or []:
        for part in filter(None, spec.split(",")):
            name, sep, value = part.partition("=")
            if not sep or not value.strip().isdigit():
                raise ValueError(f"--size {part}: expected NAME=VALUE with a non-negative integer, e.g. M=37")
            given[name.strip()] = int(value)
    abi = kernel.abi
    for p in abi.params:
        short = p.name.removeprefix("p_")
        if short in inputs:
            for sym, n in zip(p.sizes, inputs[short].shape):
                if sym:
                    given.setdefault(sym, int(n))
    unknown = set(given) - {s for p in abi.params for s in p.sizes}
    if unknown:
        raise ValueError(f"--size {', '.join(sorted(unknown))}: {kernel.name} has the sizes "
                         f"{', '.join(sorted({s for p in abi.params for s in p.sizes if s}))}")
    shapes = []
    for p in abi.params:
        missing = [s for s in p.sizes if s and s not in given]
        if missing:
            raise ValueError(f"{kernel.name}: {', '.join(missing)} known only at launch: give --size "
                             f"{missing[0]}=... (or an --input array for {p.name.removeprefix('p_')})")
        shapes.append(tuple(given[s] if s else n for s, n in zip(p.sizes or ("",) * len(p.shape), p.shape)))
    return shapes, [p.packed_strides(shape) for p, shape in zip(abi.params, shapes)]


def bind_sizes(kernel: CompiledKernel, shapes: list[tuple[int, ...]],
               strides: list[tuple[int, ...]]) -> CompiledKernel:
    """A kernel with `?` sizes bound to buffers of these shapes and strides (`launch_shapes`):
    its ABI static, its GEMM's sizes and strides the run's; a ValueError where they disagree
    with the kernel (`KernelABI.bind`)."""
    import dataclasses

    from tilemma.compiler.core.memref_layout import DYNAMIC

    abi = kernel.abi
    bound, values = abi.bind(shapes, strides)
    g = kernel.gemm
    by_symbol = dict(zip(abi.symbols, values))

    def mem(x):
        if not isinstance(x, MemOperand):
            return x
        st = bound.params[x.param].strides
        fix = {"batch_stride": st[0] if len(st) == 3 and x.batch_stride else x.batch_stride,
               "row_stride": st[-2] if x.row_stride == DYNAMIC else x.row_stride,
               "col_stride": st[-1] if x.col_stride == DYNAMIC else x.col_stride}
        return dataclasses.replace(x, **fix)

    sized = dataclasses.replace(
        g, **{d: by_symbol[d.upper()] for d in ("m", "n", "k") if getattr(g, d) == DYNAMIC},
        a=mem(g.a), b=mem(g.b), c=mem(g.c), d=mem(g.d), inputs=tuple((op, mem(x)) for op, x in g.inputs),
        outputs=tuple((op, mem(x)) for op, x in g.outputs), sizes=(), strides=())
    return dataclasses.replace(kernel, abi=bound, gemm=sized, scalars=values)


def run_compiled(
    kernel: CompiledKernel,
    seed: int,
    on: str,
    break_sparsity: tuple[int, int, int] | None = None,
    inputs: dict[str, np.ndarray] | None = None,
    ahead: str = "leaders",
) -> RunResult:
    """Run on `on` ("gpu", or "emulator": the CPU emulator of the same PTX) and compare with
    the reference. A compressed A gets random data with the pattern (or, for `prune`, without;
    the reference then uses the pruned A). `break_sparsity` = (batch, row, group) fills that
    group of A with nonzeros, to check that the kernel reports it. `inputs` replaces the random
    values of the named arguments by the caller's (each of its memref's shape and element type,
    placed through its layout; a checked sparse A is then taken as given; an epilogue input is
    then used as given too). The result's `outputs` holds every output (D, and the epilogue's
    other stores), each shaped like its memref. `ahead`: which warpgroups the emulator runs ahead
    (`Program.run`)."""
    if isinstance(kernel.gemm, AttentionKernel):
        from tilemma.compiler.driver.attention_run import run_attention

        return run_attention(kernel, seed, on, inputs)
    g = kernel.gemm
    rng = np.random.default_rng(seed)
    args: list[np.ndarray] = []
    values: dict[int, np.ndarray] = {}
    types = {g.a.param: g.a.stored, g.b.param: g.b.stored, g.d.param: g.d.stored}
    if isinstance(g.c, MemOperand):
        types[g.c.param] = g.c.stored
    if g.scales:
        for mem in g.scales[:2]:
            types[mem.param] = mem.stored
    for _, mem in (*g.inputs, *g.outputs):  # the epilogue's memory inputs, every output
        types.setdefault(mem.param, mem.stored)
    for i, p in enumerate(kernel.abi.params[: len(kernel.arg_sizes)]):
        types.setdefault(i, p.element)  # an argument the kernel never touches: sentinels only
    read: dict[int, np.ndarray] = {i: np.zeros(size, bool) for i, size in enumerate(kernel.arg_sizes)}
    for mem, rows, cols in _read_tiles(g):
        read[mem.param][_view(np.arange(read[mem.param].size), mem, g, rows, cols)] = True
    if g.a_meta is not None:
        types[g.a_meta.param] = META_TYPE
    for i, size in enumerate(kernel.arg_sizes):
        if types[i] == META_TYPE:
            values[i] = np.full(size, sparse_format.FILLER, np.uint32)
            continue
        values[i] = reference.random_matrix(types[i], (size,), rng)
        values[i][~read[i]] = sentinel(types[i])
    given = _place_inputs(kernel, inputs or {}, values, types)
    pre_a = _pre_compressed_a(g, values, given, rng) if g.a_meta is not None else None
    if g.a.sparse == "check" and g.a.param not in given:
        values[g.a.param] = _prune_tiles(values[g.a.param], g, _sparse_pattern(g))
        if break_sparsity is not None:
            batch, row, group = break_sparsity
            chunk = sparse_fragments.pattern_for(_sparse_pattern(g)).chunk
            idx = _view(np.arange(values[g.a.param].size), g.a, g, g.m, g.k)
            cols = idx[batch, row, group * chunk : (group + 1) * chunk]
            values[g.a.param][cols] = reference.random_matrix(g.a.stored, (cols.size,), rng)
    a_vals, a_type = _logical(_view(values[g.a.param], g.a, g, g.m, g.k), g.a) if pre_a is None else (pre_a, g.a.stored)
    if g.a.sparse == "prune":
        a_vals = np.stack([_prune_ragged(m, _sparse_pattern(g)) for m in a_vals])
    b_vals, b_type = _logical(_view(values[g.b.param], g.b, g, g.k, g.n), g.b)
    c_vals = (
        _view(values[g.c.param], g.c, g, g.m, g.n)
        if isinstance(g.c, MemOperand)
        else np.full((1, g.m, g.n), g.c, dtype=reference.element_type(g.acc_type).dtype)
    )
    if c_vals.shape[0] != g.batch:
        c_vals = np.broadcast_to(c_vals, (g.batch, g.m, g.n))
    scales = None
    if g.scales:
        sa_mem, sb_mem, block = g.scales
        blocks = -(-g.k // block)
        scales = reference.BlockScales(
            np.broadcast_to(_view(values[sa_mem.param], sa_mem, g, g.m, blocks), (g.batch, g.m, blocks)),
            np.broadcast_to(_view(values[sb_mem.param], sb_mem, g, blocks, g.n), (g.batch, blocks, g.n)),
            sa_mem.stored,
            block,
        )
        # A ragged last block: zero-pad K (zeros add nothing, whatever their scale).
        pad = blocks * block - g.k
        a_vals = np.pad(a_vals, ((0, 0), (0, 0), (0, pad)))
        b_vals = np.pad(b_vals, ((0, 0), (0, pad), (0, 0)))
        want = reference.scaled_mma_reference(
            a_vals, b_vals, c_vals, scales.sa, scales.sb, a_type=a_type, b_type=b_type,
            scale_type=scales.scale_type, block=block, acc_type=g.acc_type,
        )
    else:
        popc = getattr(g.mma, "popc", None)
        want = reference.mma_reference(
            a_vals, b_vals, c_vals, a_type=a_type, b_type=b_type, acc_type=g.acc_type,
            satfinite=getattr(g.mma, "satfinite", None) is not None,
            bitop=str(popc.data) if popc is not None else None, satfinite_step=instruction_k(kernel),
        )
    if g.fused:
        _epilogue_inputs(g, values, given, want, rng)
    for i in range(len(kernel.arg_sizes)):
        args.append(values[i] if types[i] == META_TYPE else pack_memory(values[i], types[i]))
    error_at = kernel.abi.index("sparsity_error")
    if error_at is not None:
        init = kernel.abi.params[error_at].init
        args.insert(error_at, np.full(1, init, np.uint32))
    scratch = kernel.abi.scratch_buffers()
    for at, buffer in scratch:
        args.insert(at, buffer)
    outs = execute(kernel, kernel.abi.arguments(args, kernel.scalars), on, ahead)
    broken = (sparsity_error(int(outs[error_at][0]), g, kernel.abi.params[error_at].init)  # type: ignore[arg-type]
              if error_at is not None else None)
    differs = _gpu_twin_differs(kernel, args, outs) if on == "gpu" else None
    for at, _ in scratch:
        p = kernel.abi.params[at]
        if p.init is not None and np.any(outs[at].view(np.uint32) != p.init):
            differs = (differs + "; " if differs else "") + f"the split-K counters were not set back to {p.init}"
    size = f"{g.batch}x" if g.batch > 1 else ""
    k = a_vals.shape[-1]
    a_full = np.broadcast_to(a_vals, (g.batch, g.m, k))
    b_full = np.broadcast_to(b_vals, (g.batch, b_vals.shape[-2], g.n))
    if g.fused:
        ok, max_abs, max_rel, detail, saved = _check_epilogue(
            kernel, values, args, outs, want, a_full, b_full, c_vals, a_type, b_type, scales)
    else:
        d_full = outs[g.d.param].view(reference.element_type(g.d.stored).dtype).reshape(-1)
        got = _view(d_full, g.d, g, g.m, g.n)
        cmp = reference.compare(
            got, want, acc_type=g.acc_type, a_type=a_type, b_type=b_type, k=k, a=a_full, b=b_full,
            c=c_vals, scales=scales,
        )
        outside_ok = _outside_unchanged(g, args, outs, g.d.param, [g.d])
        ok, max_abs, max_rel = cmp.ok and outside_ok, cmp.max_abs, cmp.max_rel
        detail = cmp.detail if not cmp.ok else ""
        if not outside_ok:
            detail = (detail + "; " if detail else "") + "elements outside the stored tile changed"
        saved = {kernel.abi.params[g.d.param].name.removeprefix("p_"): d_full[_positions(kernel, g.d.param)]}
    if differs:
        detail = (detail + "; " if detail else "") + differs
    if broken:
        detail = broken
    return RunResult(
        kernel.name, kernel.variant, f"{size}{g.m}x{g.n}x{g.k}", max_abs, max_rel,
        ok and not broken and not differs, detail, on, saved,
    )


def execute(kernel: CompiledKernel, args: list, on: str, ahead: str = "leaders") -> list[np.ndarray]:
    """Run `kernel` on `args` (host buffers, size parameters and tensor maps, in parameter order:
    `kernel.abi.arguments`) on `on` ("gpu", or "emulator": the CPU emulator of the same PTX, its
    warpgroups apart with `ahead` running ahead, `Program.run`), after the kernels it runs first
    (`KernelABI.prologue`); every buffer after the run."""
    if on not in ("gpu", "emulator"):
        raise ValueError(f"--on {on}: expected 'gpu' or 'emulator'")
    if on == "gpu":
        from tilemma.compiler.runtime import cuda_runtime

        def run(entry: str, grid, block, values: list, shared_bytes: int = 0) -> list[np.ndarray]:
            return cuda_runtime.run_kernel(kernel.ptx, entry, grid, block, values, shared_bytes=shared_bytes)
    else:
        from tilemma.compiler.verify import emulator

        def run(entry: str, grid, block, values: list, shared_bytes: int = 0) -> list[np.ndarray]:
            return emulator.emulate(kernel.ptx, entry, grid, block, values, shared_bytes=shared_bytes, ahead=ahead)
    return run(kernel.name, kernel.grid, kernel.block, kernel.abi.after_prologue(args, run), kernel.abi.shared_bytes)


def _outside_unchanged(g: GemmKernel, args: list[np.ndarray], outs: list[np.ndarray], param: int,
                       windows: list[MemOperand]) -> bool:
    """Do the elements of argument `param` outside every window stored to it hold what they held?"""
    dtype = reference.element_type(windows[0].stored).dtype
    full = outs[param].view(dtype).reshape(-1)
    mask = np.ones(full.size, dtype=bool)
    for mem in windows:
        mask[_view(np.arange(full.size), mem, g, g.m, g.n).reshape(-1)] = False
    before = args[param].view(dtype).reshape(-1)
    return np.array_equal(full[mask].view(np.uint8), before[mask].view(np.uint8))


# Values an epilogue input also gets, at a few random places of what the kernel reads: each
# float type's large and tiny magnitudes (large: past f16's range once an f32 epilogue adds it,
# tiny: normal, far below the accumulator), and -0; the integer extremes.
_ADVERSARIAL = {
    "f16": (2.0**14, -(2.0**14), 2.0**-14, -0.0),
    "bf16": (2.0**20, -(2.0**20), 2.0**-30, -0.0),
    "f32": (2.0**20, -(2.0**20), 2.0**-30, -0.0),
    "f64": (2.0**20, -(2.0**20), 2.0**-30, -0.0),
    "si32": (reference.INT32_MIN, reference.INT32_MAX, 0, -1),
}


def _epilogue_inputs(g: GemmKernel, values: dict, given: set[int], want: np.ndarray, rng) -> None:
    """Make the random values of the epilogue's memory inputs (bias vectors, scales, residual
    tiles) realistic: after an integer GEMM, float inputs are scaled by a power of two near
    1/sqrt(typical |acc|), so that a dequantisation acc * s_row * s_col lands near 1 and the
    activations see both signs; and a few elements of each get adversarial values. Arguments the
    caller gave, and arguments the GEMM itself reads, are left alone."""
    n_epilogue = len(g.inputs)
    tiles = _read_tiles(g)
    gemm = {mem.param for mem, _, _ in tiles[: len(tiles) - n_epilogue]}
    scale = 1.0
    if not reference.element_type(g.acc_type).is_float:
        rms = float(np.sqrt(np.mean(np.square(want.astype(np.float64))))) if want.size else 1.0
        scale = 2.0 ** -round(np.log2(max(np.sqrt(rms), 1.0)))
    done: set[int] = set()
    for _, mem in g.inputs:
        if mem.param in given or mem.param in gemm or mem.param in done:
            continue
        done.add(mem.param)
        et = reference.element_type(mem.stored)
        at = np.unique(_view(np.arange(values[mem.param].size), mem, g, g.m, g.n).reshape(-1))
        if et.is_float and scale != 1.0:
            values[mem.param][at] = (values[mem.param][at].astype(np.float64) * scale).astype(et.dtype)
        specials = _ADVERSARIAL.get(mem.stored, ())
        if at.size >= 4 * len(specials):
            for where, value in zip(rng.choice(at, len(specials), replace=False), specials):
                values[mem.param][where] = value


def _check_epilogue(kernel: CompiledKernel, values, args, outs, want, a_full, b_full, c_vals, a_type, b_type,
                    scales):
    """Every output of a fused kernel against the interval reference (`epilogue_reference`): the
    accumulator enters as want +- the GEMM's error bound (a point for integers), the epilogue's
    ops map intervals to intervals, each stored element must lie in its own; elements of an
    output's memref outside what is stored there must be unchanged."""
    from tilemma.compiler.verify import epilogue_reference as er

    g = kernel.gemm
    if reference.element_type(g.acc_type).is_float:
        if scales is not None:
            bound = reference.scaled_error_bound(
                a_full, b_full, c_vals, scales.sa, scales.sb, a_type=a_type, b_type=b_type,
                scale_type=scales.scale_type, block=scales.block, acc_type=g.acc_type, k=a_full.shape[-1])
        else:
            bound = reference.error_bound(a_full, b_full, c_vals, a_type=a_type, b_type=b_type,
                                          acc_type=g.acc_type, k=a_full.shape[-1])
    else:
        bound = 0
    acc = er.Interval.around(want, np.broadcast_to(bound, want.shape), g.acc_type)
    shape = (g.batch, g.m, g.n)
    inputs = {op: np.broadcast_to(_view(values[mem.param], mem, g, g.m, g.n), shape) for op, mem in g.inputs}
    env = er.evaluate_epilogue(g.epilogue, g.mma.results[0], acc, inputs)
    ok, max_abs, max_rel, details, saved = True, 0.0, 0.0, [], {}
    by_param: dict[int, list[MemOperand]] = {}
    for store, mem in g.outputs:
        by_param.setdefault(mem.param, []).append(mem)
        name = kernel.abi.params[mem.param].name.removeprefix("p_")
        full = outs[mem.param].view(reference.element_type(mem.stored).dtype).reshape(-1)
        result = er.check(_view(full, mem, g, g.m, g.n), env[store.value], name)
        ok &= result.ok
        max_abs, max_rel = max(max_abs, result.max_abs), max(max_rel, result.max_rel)
        if not result.ok:
            details.append(result.detail)
    for param, windows in by_param.items():
        name = kernel.abi.params[param].name.removeprefix("p_")
        full = outs[param].view(reference.element_type(windows[0].stored).dtype).reshape(-1)
        saved[name] = full[_positions(kernel, param)]
        if not _outside_unchanged(g, args, outs, param, windows):
            ok = False
            details.append(f"elements of {name} outside the stored tile changed")
    return ok, max_abs, max_rel, "; ".join(details), saved


def _gpu_twin_differs(kernel: CompiledKernel, args: list[np.ndarray], outs: list[np.ndarray]) -> str | None:
    """Where the emulator's arithmetic is proven for this GPU (`mma_arith.proven`), the GPU's
    output words must be the emulator's, bit for bit, on the same inputs; None when they are (or
    when the model is not proven there, when the kernel runs approximate instructions - `ex2.approx`,
    `tanh.approx`, ...: the emulator models those within the ISA's bound, not bit for bit, and the
    interval reference checks them - or when the GEMM is too large to emulate quickly,
    `emulator.QUICK_MACS`: the bound check alone)."""
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.verify import emulator, mma_arith

    g, v = kernel.gemm, kernel.instruction
    arch = cuda_runtime.device_arch()
    if (not mma_arith.proven(arch, v.atype, v.dtype, v.kind, v.shape)
            or g.batch * g.m * g.n * g.k > emulator.QUICK_MACS):
        return None
    program = emulator.compile_entry(kernel.ptx, kernel.name, arch)
    if program.approximate:
        return None
    args = kernel.abi.after_prologue(args, lambda entry, grid, block, values: emulator.compile_entry(
        kernel.ptx, entry, arch).run(grid, block, values))
    twin = program.run(kernel.grid, kernel.block, kernel.abi.arguments(args, kernel.scalars),
                       shared_bytes=kernel.abi.shared_bytes)
    for param in dict.fromkeys(mem.param for _, mem in g.outputs):
        gpu, cpu = (np.ascontiguousarray(x).view(np.uint8) for x in (outs[param], twin[param]))
        if np.array_equal(gpu, cpu):
            continue
        width = outs[param].dtype.itemsize
        bad = np.flatnonzero((gpu != cpu).reshape(-1, width).any(1))
        what = "D" if param == g.d.param else kernel.abi.params[param].name.removeprefix("p_")
        return (f"the GPU and the bit-exact emulator ({arch}) differ in {bad.size} words of {what}, first at "
                f"element {int(bad[0])} of its memref")
    return None


META_TYPE = "ui32"  # the metadata words of a pre-compressed A (uint32 buffers, not a value type)


def _pre_compressed_a(g: GemmKernel, values: dict, given: set[int], rng) -> np.ndarray:
    """The dense A [batch, M, K] of a pre-compressed A (`tile.sparse_from`). Unless the caller gave
    its values or metadata, a random 2:4 sparse A is made and written through
    `sparse_format.compress_a`; the reference multiplies its `decompress_a`."""
    assert g.a_meta is not None
    vs, ms = sparse_format.values_shape(g.m, g.k), sparse_format.meta_shape(g.m, g.k)
    v_at = _view(np.arange(values[g.a.param].size), g.a, g, *vs)
    m_at = _view(np.arange(values[g.a_meta.param].size), g.a_meta, g, *ms)
    dtype = reference.element_type(g.a.stored).dtype
    if not {g.a.param, g.a_meta.param} & given:
        dense = reference.random_matrix(g.a.stored, (v_at.shape[0], g.m, g.k), rng)
        dense = np.stack([_prune_ragged(x, "2:4") for x in dense]).astype(dtype)
        vals, meta = sparse_format.compress_a(dense)
        values[g.a.param][v_at] = vals
        values[g.a_meta.param][m_at] = meta
    return sparse_format.decompress_a(values[g.a.param][v_at].astype(dtype), values[g.a_meta.param][m_at], k=g.k)


def _param_index(kernel: CompiledKernel, name: str) -> int:
    names = [p.name for p in kernel.abi.params[: len(kernel.arg_sizes)]]
    for i, full in enumerate(names):
        if name in (full, full.removeprefix("p_")):
            return i
    raise ValueError(
        f"{kernel.name}: no argument {name!r}; its arguments are "
        + ", ".join(n.removeprefix("p_") for n in names)
    )


def _positions(kernel: CompiledKernel, i: int) -> np.ndarray:
    p = kernel.abi.params[i]
    return StridedLayout(p.shape, p.strides, p.offset).positions()


def _place_inputs(kernel: CompiledKernel, inputs: dict[str, np.ndarray], values: dict, types: dict) -> set[int]:
    """Write the caller's arrays into the argument buffers (checked against the ABI)."""
    placed = set()
    for name, array in inputs.items():
        i = _param_index(kernel, name)
        p = kernel.abi.params[i]
        want = np.dtype(np.uint32 if types[i] == META_TYPE else reference.element_type(types[i]).dtype)
        array = np.asarray(array)
        if array.shape != p.shape:
            raise ValueError(f"input {name}: shape {array.shape}, but the kernel's {name} is {'x'.join(map(str, p.shape))} ({types[i]})")
        if array.dtype != want:
            raise ValueError(f"input {name}: dtype {array.dtype}, but {types[i]} elements are given as {want}")
        values[i][_positions(kernel, i)] = array
        placed.add(i)
    return placed


def _prune_ragged(matrix: np.ndarray, pattern: str) -> np.ndarray:
    """prune() on an M x K matrix whose K need not be a multiple of the chunk."""
    chunk = sparse_fragments.pattern_for(pattern).chunk
    k = matrix.shape[1]
    padded = np.zeros((matrix.shape[0], -(-k // chunk) * chunk), matrix.dtype)
    padded[:, :k] = matrix
    return sparse_fragments.prune(padded, pattern)[:, :k]
