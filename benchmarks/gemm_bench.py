"""GEMM benchmark: tilemma against cuBLAS (torch) and Triton on the GPU, in one run.

GEMMs per family, square (`--sizes N`) or any M x N x K (`--shapes MxNxK`); TFLOP/s (TOP/s for s8;
dense-equivalent 2*M*N*K for sparse) is the median of
CUDA-event samples, each timing back-to-back launches (captured in a CUDA graph where that works,
so that Python launch overhead is not measured). Inputs are random. tilemma's result is checked
once per (family, size) against a float64 torch product with the per-element bound of
`reference.error_bound` (exact for s8), so a fast wrong kernel is reported as wrong, not fast; the
peers get a sanity check with their output rounding added. Triton runs in two subprocesses,
default and `DISABLE_MMA_V3=1` (its mma.sync path), each with its own cache, because the variable
is read when Triton compiles. Whatever fails becomes a row carrying its error; nothing stops the run.

    python -m benchmarks.gemm_bench [--families f16 s8] [--sizes 1024 4096] [--tilemma-sizes 1024]
                                    [--shapes 16x4096x4096 257x129x4096] [--csv out.csv] [--plot out.png]
                                    [--budget 280] [--samples 15] [--warmup-ms 50]

`benchmarks/matrix.py` runs the family x layout x shape matrix of issue 23 through this module.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Sequence

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.verify import reference


@dataclass(frozen=True)
class Family:
    """One benchmarked element-type family: the tilemma GEMM and the torch dtypes of its operands."""

    name: str
    a: str  # tilemma element type of A and B (their memrefs hold the storage type: f32 for tf32)
    acc: str  # tilemma type of C and D
    sparse: bool = False  # A is 2:4 sparse (tilemma's tile.compress, checked)
    b_col: bool = False  # B is stored column-major (K-major): what staging needs for 8-bit
    a_col: bool = False  # A is stored column-major (M-major)
    triton_precision: str | None = None  # tl.dot input_precision (None: Triton's default)
    rounding: str = "rna"  # tf32: how tilemma rounds the f32 operands (`tilemma gemm --rounding`)
    pre_compressed: bool = False  # with sparse: A arrives compressed (tile.sparse_from, sparse_format)
    out: str | None = None  # tilemma type of D where it is not the accumulator's (rounded by the epilogue)

    @property
    def torch_in(self) -> str:
        """torch dtype of A and B: their storage dtype's name (float32 for tf32)."""
        return ELEMENTS[self.a].storage_dtype.name

    @property
    def torch_out(self) -> str:
        """torch dtype of D (tilemma, Triton): the accumulator's unless `out` says otherwise."""
        return ELEMENTS[self.out or self.acc].storage_dtype.name

    @property
    def exact(self) -> bool:
        return self.acc == "si32"

    @property
    def tf32(self) -> bool:
        return self.a == "tf32"


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("f16", "f16", "f32"),
        Family("bf16", "bf16", "f32"),
        Family("s8", "si8", "si32", b_col=True),
        Family("tf32", "tf32", "f32", triton_precision="tf32", b_col=True),
        # rn: one F2FP per register on sm_90 where rna takes about two instructions
        Family("tf32-rn", "tf32", "f32", triton_precision="tf32", b_col=True,
               rounding="rn"),
        # trunc: no conversion, the mma reads the f32's top 19 bits (what cuBLAS and Triton's tf32 do)
        Family("tf32-trunc", "tf32", "f32", triton_precision="tf32", b_col=True, rounding="trunc"),
        Family("tf32-brow-trunc", "tf32", "f32", triton_precision="tf32", rounding="trunc"),
        Family("tf32-acol-trunc", "tf32", "f32", triton_precision="tf32", a_col=True, b_col=True, rounding="trunc"),
        Family("tf32-acol-brow-trunc", "tf32", "f32", triton_precision="tf32", a_col=True, rounding="trunc"),
        Family("f64", "f64", "f64", triton_precision="ieee"),
        Family("sparse-f16", "f16", "f32", sparse=True),
        Family("sparse-f16-pre", "f16", "f32", sparse=True, pre_compressed=True),
        # the operand orders (every implementation reads the same stored layout)
        Family("f16-acol", "f16", "f32", a_col=True),
        Family("f16-acol-bcol", "f16", "f32", a_col=True, b_col=True),
        Family("f16-bcol", "f16", "f32", b_col=True),
        Family("bf16-acol", "bf16", "f32", a_col=True),
        Family("bf16-bcol", "bf16", "f32", b_col=True),
        Family("bf16-acol-bcol", "bf16", "f32", a_col=True, b_col=True),
        Family("tf32-brow", "tf32", "f32", triton_precision="tf32"),
        Family("tf32-acol", "tf32", "f32", triton_precision="tf32", a_col=True, b_col=True),
        Family("tf32-acol-brow", "tf32", "f32", triton_precision="tf32", a_col=True),
        Family("f64-acol", "f64", "f64", triton_precision="ieee", a_col=True),
        Family("f64-bcol", "f64", "f64", triton_precision="ieee", b_col=True),
        Family("f64-acol-bcol", "f64", "f64", triton_precision="ieee", a_col=True, b_col=True),
        Family("sparse-f16-pre-bcol", "f16", "f32", sparse=True, pre_compressed=True, b_col=True),
        # D stored as f16 (f32 accumulators): what cuSPARSELt writes for f16 operands (torch's `sa @ b`)
        Family("sparse-f16-pre-d16", "f16", "f32", sparse=True, pre_compressed=True, out="f16"),
        Family("sparse-f16-pre-bcol-d16", "f16", "f32", sparse=True, pre_compressed=True, b_col=True, out="f16"),
        # 8-bit in the orders ldmatrix cannot transpose: tilemma's transposing fill
        Family("s8-brow", "si8", "si32"),
        Family("s8-acol", "si8", "si32", a_col=True, b_col=True),
        Family("s8-acol-brow", "si8", "si32", a_col=True),
    )
}


def family_variant(fam: Family, a_col: bool, b_col: bool) -> Family | None:
    """The family with `fam`'s element types (and sparsity, rounding) whose operands are stored in
    the order a_col / b_col (column-major where True), or None where there is none."""
    def same(f: Family) -> bool:
        return (f.a, f.acc, f.out, f.sparse, f.pre_compressed, f.rounding, f.triton_precision) == \
               (fam.a, fam.acc, fam.out, fam.sparse, fam.pre_compressed, fam.rounding, fam.triton_precision)

    return next((f for f in FAMILIES.values() if same(f) and (f.a_col, f.b_col) == (a_col, b_col)), None)


def layout_label(fam: Family) -> str:
    """`A row, B col` and so on: the stored order of the family's operands (a pre-compressed A
    has none: `A pre`)."""
    a = "pre" if fam.pre_compressed else ("col" if fam.a_col else "row")
    return f"A {a}, B {'col' if fam.b_col else 'row'}"


Shape = tuple[int, int, int]  # (M, N, K): D is M x N, A is M x K, B is K x N


def parse_shape(text: str) -> Shape:
    """`4096` -> (4096, 4096, 4096); `8192x4096x4096` -> (M, N, K). ValueError on anything else."""
    parts = text.strip().lower().split("x")
    if len(parts) == 1:
        parts *= 3
    try:
        if len(parts) != 3:
            raise ValueError
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"size {text!r}: N (square) or MxNxK") from None
    if min(m, n, k) < 1:
        raise ValueError(f"size {text!r}: sizes must be positive")
    return m, n, k


def shape_label(shape: Shape) -> str:
    return "x".join(map(str, shape))


def as_shape(size: int | Shape) -> Shape:
    """A square size N as (N, N, N); a shape as it is."""
    return (size, size, size) if isinstance(size, int) else tuple(size)  # type: ignore[return-value]


SIZES = (1024, 2048, 4096, 8192)
# Implementations in table order. For sparse-f16, "cublas" is the dense f16 GEMM of the same size.
IMPLS = ("cublas", "triton", "triton-mma.sync", "torch-sparse", "tilemma")
TRITON_MODES = {"triton-mma.sync": {"DISABLE_MMA_V3": "1"}, "triton": {}}
SAMPLES = 15  # timed samples per measurement; the median is reported
SAMPLE_MS = 2.0  # launches per sample are chosen so that a sample lasts about this long
WARMUP_MS = 50.0  # untimed running first (clocks, caches, JIT)


@dataclass
class Row:
    family: str
    size: int
    impl: str
    ms: float | None = None
    tflops: float | None = None
    config: str = ""  # tilemma: instruction and tiling; Triton: the best tile configuration
    instruction: str = ""  # Triton: wgmma / mma.sync, read from the PTX it compiled
    check: str = ""  # "exact", "bound" (tilemma's tight check), "sanity" (peers)
    timing: str = ""  # "graph" or "eager"
    error: str = ""
    device: str = ""
    shape: str = ""  # MxNxK (size is M); empty in CSVs written before shapes: size^3

    @property
    def ok(self) -> bool:
        return self.tflops is not None and not self.error


def row_shape(row: Row) -> Shape:
    return parse_shape(row.shape) if row.shape else as_shape(row.size)


def new_row(fam: Family, size: int | Shape, impl: str, **kw: Any) -> Row:
    """The row of family `fam` at `size` (N or (M, N, K)) for implementation `impl`."""
    shape = as_shape(size)
    return Row(fam.name, shape[0], impl, shape=shape_label(shape), **kw)


def flops(size: int | Shape) -> float:
    """2 M N K (N^3 for a square size N)."""
    m, n, k = as_shape(size)
    return 2.0 * m * n * k


# ---------------------------------------------------------------------------------------------
# The tilemma side: the one adapter that knows how kernels are compiled and launched.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TilemmaBuild:
    """What a compile produced, as plain data (it crosses process boundaries: `precompile`)."""

    ptx: str
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    config: str  # instruction and tiling
    scratch: tuple[tuple[int, int, bool], ...] = ()  # split-K, B's transpose: (parameter index, bytes, zeroed)
    tensor_maps: tuple = ()  # TensorMap per tensor-map parameter: passed after the pointers
    prologue: tuple = ()  # abi.Prologue per kernel launched first (B transposed first)


@dataclass(frozen=True)
class TilemmaKernel:
    """A compiled kernel: `launch(pointers, stream)` queues it (after the kernels it runs first) on
    device addresses, in argument order, less the scratch (`scratch`: the caller's, at those
    parameter indices, the counters zeroed); `config` says which instruction and tiling it uses;
    `ptx` is its module."""

    launch: Callable[[Sequence[int], int], None]
    config: str
    ptx: str
    name: str
    scratch: tuple[tuple[int, int, bool], ...] = ()
    prologue: tuple = ()  # the kernels `launch` runs first (abi.Prologue)


def tilemma_build(ir_text: str, name: str, options: Any) -> TilemmaBuild:
    """Compile tile IR (one GEMM kernel, as `tilemma gemm` writes it) with `CompileOptions`; no GPU."""
    from tilemma.compiler.driver.pipeline import compile_text

    [k] = compile_text(ir_text, name, options)
    from tilemma.compiler.runtime.abi import SCRATCH_ROLES

    scratch = tuple((i, p.nbytes, p.init is not None) for i, p in enumerate(k.abi.params)
                    if set(SCRATCH_ROLES) & set(p.roles))
    first = " + B transposed first" if k.abi.prologue else ""
    return TilemmaBuild(k.ptx, k.name, tuple(k.grid), tuple(k.block), k.abi.shared_bytes,
                        f"{k.variant} {k.abi.config}{first}", scratch, k.abi.tensor_maps, k.abi.prologue)


def kernel_from(build: TilemmaBuild) -> TilemmaKernel:
    """The launcher of a build (on the GPU: `cuda_runtime.launch`, which loads the module once and
    encodes the tensor maps for the pointers they map)."""
    from tilemma.compiler.runtime import cuda_runtime

    def launch(pointers: Sequence[int], stream: int = 0) -> None:
        for first in build.prologue:
            cuda_runtime.launch(build.ptx, first.entry, first.grid, first.block, [pointers[i] for i in first.args],
                                0, stream)
        cuda_runtime.launch(build.ptx, build.name, build.grid, build.block, [*pointers, *build.tensor_maps],
                            build.shared, stream)

    return TilemmaKernel(launch, build.config, build.ptx, build.name, build.scratch, build.prologue)


def tilemma_kernel(ir_text: str, name: str, options: Any) -> TilemmaKernel:
    """Compile tile IR (one GEMM kernel, as `tilemma gemm` writes it) with `CompileOptions`."""
    return kernel_from(tilemma_build(ir_text, name, options))


def precompile_one(job: tuple) -> TilemmaBuild | str:
    """`precompile`'s worker: (family name, shape, config, sm, ptx) -> the build, or the error."""
    fam, shape, config, sm, ptx = job
    try:
        text, name = tilemma_ir(FAMILIES[fam], shape)
        return tilemma_build(text, name, compile_options(sm, ptx, **parse_config(config)))
    except Exception as exc:  # the row says it
        return _error(exc)


def precompile(jobs: Sequence[tuple[str, Shape, str]], sm: str, ptx: str, processes: int) -> dict:
    """tilemma's kernels for (family name, shape, config) compiled ahead of time in `processes`
    processes (the compiler is pure Python: one core each): {job: TilemmaBuild or error text}."""
    import concurrent.futures
    import multiprocessing

    todo = [(f, tuple(s), c, sm, ptx) for f, s, c in dict.fromkeys(jobs)]
    if processes <= 1 or len(todo) < 2:
        return {job[:3]: precompile_one(job) for job in todo}
    # spawn: the parent may hold a CUDA context, which forked children must not inherit
    with concurrent.futures.ProcessPoolExecutor(min(processes, len(todo)),
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        return {job[:3]: out for job, out in zip(todo, pool.map(precompile_one, todo, chunksize=2))}


def tilemma_ir(fam: Family, size: int | Shape) -> tuple[str, str]:
    """The tile IR text and kernel name of family `fam` at size N (square) or shape (M, N, K)."""
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    m, n, k = as_shape(size)
    # D = A x B, no C: what the peers compute (cuBLAS with beta = 0, Triton's kernel)
    spec = GemmSpec(m, n, k, fam.a, fam.a, fam.acc, sparse_a=fam.sparse and not fam.pre_compressed,
                    b_layout="col" if fam.b_col else "row", a_layout="col" if fam.a_col else "row",
                    pre_compressed=fam.pre_compressed,
                    c=False, rounding=fam.rounding, out=fam.out)
    return str(gemm_module(spec)), spec.name


def default_ptx() -> str:
    """The newest PTX version the driver JITs, up to 9.0; without a GPU (`sass_check` only
    assembles) "", the compiler's own default."""
    from tilemma.compiler.runtime import cuda_runtime

    try:
        major, minor = min((9, 0), cuda_runtime.driver_max_ptx())
    except cuda_runtime.NoGpuError:
        return ""
    return f"{major}.{minor}"


def compile_options(sm: str = "90", ptx: str | None = None, **tiling: Any) -> Any:
    """Options for `tilemma_kernel`: PTX `ptx`, or (None) the newest the driver JITs, up to 9.0."""
    from tilemma.compiler.driver.pipeline import CompileOptions

    if tiling.get("wgmma") and sm in ("90", "sm_90"):  # wgmma is sm_90a's (arch-specific) alone
        sm = "90a"
    return CompileOptions(sm=sm, ptx=ptx or default_ptx(), **tiling)


# ---------------------------------------------------------------------------------------------
# Checking. Array code written with operators only, so that it runs on torch and NumPy alike.
# ---------------------------------------------------------------------------------------------

SENTINEL = {True: -(1 << 31), False: math.nan}  # D before the launch under test (exact: int32)
NO_ERROR_WORD = -1  # passes.sparse_a.NO_ERROR (0xFFFFFFFF) as an int32


def round_tf32_bits(bits, mode: str = "rna"):
    """f32 bit patterns (int32) rounded to tf32 as cvt.<mode>.tf32.f32 (rna: ties away from zero;
    rn: ties to even), for finite values below the largest tf32: add half a unit of the 13 dropped
    bits (less one for rn when the kept part is even), drop them; rz and trunc only drop them."""
    if mode in ("rz", "trunc"):
        return bits & -0x2000
    if mode == "rn":
        return (bits + 0xFFF + ((bits >> 13) & 1)) & -0x2000
    return (bits + 0x1000) & -0x2000


def check(got, want, magnitude, *, acc: str, k: int, slack: float = 0.0) -> str | None:
    """None when every element of `got` is within the bound of `want`, else what went wrong.

    `got`, `want` and `magnitude` (S_ij = sum_k |a_ik*b_kj| + |c_ij|) are float64 arrays; `magnitude`
    None asks for equality (integers). The bound is `reference.error_bound`'s, (K + 1) *
    step_error(acc) * S + floor(acc), plus `slack` * S for a peer's own input or output rounding.
    """
    if magnitude is None:
        bound = 0.0
    else:
        step, floor = reference._STEP_ERROR[acc], reference._FLOOR[acc]
        bound = ((k + 1) * step + slack) * magnitude + floor
    return out_of_bound(got, want, bound)


def out_of_bound(got, want, bound) -> str | None:
    """None when |got - want| <= bound everywhere (`bound` a number or an array of got's shape;
    NaN counts as out of bound), else how many elements are out and the first of them."""
    diff = abs(got - want)
    bad = ~(diff <= bound)  # NaN counts as bad
    count = int(bad.sum())
    if count == 0:
        return None
    first = int(bad.reshape(-1).nonzero()[0][0])
    row, col = divmod(first, got.shape[-1])
    g, w = float(got.reshape(-1)[first]), float(want.reshape(-1)[first])
    limit = float(bound) if isinstance(bound, (int, float)) else float(bound.reshape(-1)[first])
    return (f"{count} of {got.numel() if hasattr(got, 'numel') else got.size} elements out of "
            f"bound; first at ({row}, {col}): got {g!r}, want {w!r}, bound {limit:g}")


# ---------------------------------------------------------------------------------------------
# Inputs, references and timing (torch)
# ---------------------------------------------------------------------------------------------


def prune_24(a, torch):
    """Keep the two largest magnitudes of every 4 consecutive elements of each row."""
    m, k = a.shape
    groups = a.reshape(m, k // 4, 4)
    keep = torch.zeros_like(groups, dtype=torch.bool)
    keep.scatter_(-1, groups.abs().float().topk(2, dim=-1).indices, True)
    return (groups * keep).reshape(m, k)


def make_inputs(fam: Family, size: int | Shape, torch, seed: int = 0) -> dict:
    """Random A (M x K) and B (K x N) on the device (every implementation computes D = A x B: no
    C) and the float64 reference: A x B, and S = |A| x |B|."""
    m, n, k = as_shape(size)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt_in = getattr(torch, fam.torch_in)
    if fam.exact:
        a, b = (torch.randint(-128, 128, dims, generator=gen, device="cuda", dtype=dt_in)
                for dims in ((m, k), (k, n)))
    else:
        a, b = (torch.randn(*dims, generator=gen, device="cuda").to(dt_in) for dims in ((m, k), (k, n)))
    if fam.sparse:
        a = prune_24(a, torch)
    av, bv = a, b
    if fam.tf32:  # the values the tensor cores multiply
        av, bv = (round_tf32_bits(x.view(torch.int32), fam.rounding).view(torch.float32) for x in (a, b))
    av, bv = av.double(), bv.double()
    ab = av @ bv  # exact for s8 (|sums| < 2^53); far inside the bound for the float families
    s = None if fam.exact else av.abs() @ bv.abs()
    # the matrices as every implementation reads them: column-major where the family says so
    a_op = a.t().contiguous().t() if fam.a_col else a
    b_op = b.t().contiguous().t() if fam.b_col else b
    return {"a": a, "b": b, "a_op": a_op, "b_op": b_op, "ab": ab, "s": s}


def output(fam: Family, size: int | Shape, torch):
    """An uninitialized M x N D of the family's output dtype, on the device."""
    m, n, _ = as_shape(size)
    return torch.empty(m, n, device="cuda", dtype=getattr(torch, fam.torch_out))


def median_ms(fn: Callable[[], Any], torch) -> tuple[float, str]:
    """Median milliseconds per call of `fn` over SAMPLES samples, and how they were run."""
    return median_ms_interleaved([fn], torch)[0]


def _repeated(fn: Callable[[], Any], torch) -> tuple[Callable[[], None], int, str]:
    """`fn` repeated back to back for about SAMPLE_MS: (run, repetitions, "graph" or "eager"),
    captured in a CUDA graph where that works."""
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    stop.record()
    torch.cuda.synchronize()
    reps = max(1, min(200, math.ceil(SAMPLE_MS / max(start.elapsed_time(stop) / 3, 1e-3))))
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        return graph.replay, reps, "graph"
    except Exception as exc:  # a launch that cannot be captured: time it eagerly
        print(f"  (graph capture failed, timing eagerly: {exc})", file=sys.stderr)
        torch.cuda.synchronize()

        def run() -> None:
            for _ in range(reps):
                fn()

        return run, reps, "eager"


def median_ms_interleaved(fns: Sequence[Callable[[], Any]], torch) -> list[tuple[float, str]]:
    """`median_ms` of each of `fns`, their samples taken in turn (A B A B ...) after each one's
    warm-up, so that a drift of the clocks during the measurement touches all of them alike:
    what a ratio of two of them (an epilogue's cost) needs."""
    runs = [_repeated(fn, torch) for fn in fns]
    for run, _, _ in runs:
        began = time.perf_counter()
        while (time.perf_counter() - began) * 1e3 < WARMUP_MS:
            run()
            torch.cuda.synchronize()
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in runs] for _ in range(SAMPLES)]
    for sample in events:
        for (run, _, _), (begin, end) in zip(runs, sample):
            begin.record()
            run()
            end.record()
    torch.cuda.synchronize()
    return [(statistics.median(sample[i][0].elapsed_time(sample[i][1]) / reps for sample in events), how)
            for i, (_, reps, how) in enumerate(runs)]


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
    return text if len(text) <= 300 else text[:297] + "..."


def measured(row: Row, fn: Callable[[], Any], torch) -> Row:
    row.ms, row.timing = median_ms(fn, torch)
    row.tflops = flops(row_shape(row)) / row.ms / 1e9
    return row


def guarded(row: Row, body: Callable[[Row], Row], deadline: float) -> Row:
    """Run one measurement; a failure or an exhausted time budget becomes the row's error."""
    if time.monotonic() > deadline:
        row.error = "skipped: time budget spent"
        return row
    try:
        return body(row)
    except Exception as exc:
        traceback.print_exc()
        row.ms = row.tflops = None
        row.error = _error(exc)
        return row


def peer_check(row: Row, got, inp: dict, fam: Family, torch) -> None:
    """Sanity-check a peer's D = A x B (no C), allowing for its output type and tf32 rounding."""
    slack = 0.0 if fam.exact else torch.finfo(got.dtype).eps + (2.0**-9 if fam.tf32 else 0.0)
    problem = check(got.double(), inp["ab"], inp["s"], acc=fam.acc, k=row_shape(row)[2], slack=slack)
    if problem:
        raise AssertionError(f"wrong result: {problem}")
    row.check = "exact" if fam.exact else "sanity"


# ---------------------------------------------------------------------------------------------
# The implementations
# ---------------------------------------------------------------------------------------------


def peers(fam: Family) -> tuple[str, ...]:
    """The peers of `fam` (`peer_fn`'s impls): cuBLAS, and cuSPARSELt where A is 2:4 sparse."""
    return ("cublas", "torch-sparse") if fam.sparse else ("cublas",)


def peer_fn(fam: Family, inp: dict, torch, impl: str) -> tuple[Callable[[], Any], str]:
    """Peer `impl`'s product for inputs `inp`, with its configuration text: cuBLAS (`torch._int_mm`,
    cuBLASLt, for 8-bit), or cuSPARSELt (torch's semi-structured sparse), its A compressed here
    once from A as stored row-major (not timed, as tilemma's pre-compressed A)."""
    a, b = inp["a_op"], inp["b_op"]
    if impl == "torch-sparse":
        sa = torch.sparse.to_sparse_semi_structured(inp["a"])
        return (lambda: sa @ b), type(sa).__name__ + (", B column-major" if fam.b_col else "")
    cols = "".join(f", {x} column-major" for x, col in (("A", fam.a_col), ("B", fam.b_col)) if col)
    if fam.exact:  # torch._int_mm: cuBLASLt (fast with a column-major B)
        return (lambda: torch._int_mm(a, b)), "torch._int_mm" + cols
    # cuBLAS's tf32 path for f32 operands (tilemma's tf32 family), not SGEMM: set here, where
    # every caller (the matrix, config_ab, ptx_sims) builds its peer
    torch.backends.cuda.matmul.allow_tf32 = True
    tf32 = ", allow_tf32" if fam.torch_in == "float32" else ""
    return (lambda: a @ b), f"torch.matmul {fam.torch_in}{tf32}" + cols


def cublas_rows(fam: Family, n: int | Shape, inp: dict, torch, deadline: float) -> list[Row]:
    def peer(impl: str) -> Callable[[Row], Row]:
        def body(row: Row) -> Row:
            fn, row.config = peer_fn(fam, inp, torch, impl)
            peer_check(row, fn(), inp, fam, torch)
            return measured(row, fn, torch)
        return body

    return [guarded(new_row(fam, n, impl), peer(impl), deadline) for impl in peers(fam)]


def parse_config(text: str) -> dict[str, Any]:
    """`warps=2x4,warp-tile=4x8,stages=3,split-k=1` -> CompileOptions fields ('' -> the defaults)."""
    out: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        key = key.strip().replace("-", "_")
        ints = ("stages", "stage_k", "split_k", "producers", "tma", "cluster", "persistent", "transpose_first")
        out[key] = int(value) if key in ints else (value.strip() != "0" if key in ("swizzle", "pair_bytes", "wgmma", "staged_stores", "shared_transpose") else value.strip())
    return out


def tilemma_arguments(fam: Family, inp: dict, d, torch) -> tuple[list[int], Any]:
    """The kernel's argument pointers for inputs `inp` and output `d`, and its sparsity error word
    (None where it has none): A and B as the family stores them (`make_inputs`' a_op, b_op), a
    pre-compressed A as values and metadata (compressed on the host once per size, not timed)."""
    pointers = [inp["a_op"].data_ptr(), inp["b_op"].data_ptr(), d.data_ptr()]
    word = None
    if fam.pre_compressed:
        from tilemma.compiler.layouts import sparse_format

        if "pre" not in inp:  # once per size, shared by the configurations
            values, meta = sparse_format.compress_a(inp["a"].cpu().numpy())
            inp["pre"] = (torch.from_numpy(values).cuda(), torch.from_numpy(meta.view("int32")).cuda())
        pointers[:1] = [x.data_ptr() for x in inp["pre"]]
    elif fam.sparse:
        word = torch.full((1,), NO_ERROR_WORD, dtype=torch.int32, device="cuda")
        pointers.append(word.data_ptr())
    return pointers, word


def tilemma_launcher(fam: Family, n: int | Shape, inp: dict, kernel: TilemmaKernel, torch) -> tuple[Callable[[], None], Any, Any]:
    """A launch of `kernel` on inputs `inp`, with its D (filled with a sentinel) and its sparsity
    error word (None where it has none); split-K's workspace and counters are made here (zeroed
    once: the kernel leaves them at 0). All of them live as long as the launch does."""
    d = output(fam, n, torch).fill_(SENTINEL[fam.exact])
    pointers, word = tilemma_arguments(fam, inp, d, torch)
    scratch = []
    for index, nbytes, zeroed in kernel.scratch:
        scratch.append((torch.zeros if zeroed else torch.empty)(max(nbytes, 4), dtype=torch.uint8, device="cuda"))
        pointers.insert(index, scratch[-1].data_ptr())

    def launch(_buffers=(d, word, scratch)) -> None:  # (bound: what the pointers point into lives on)
        kernel.launch(pointers, torch.cuda.current_stream().cuda_stream)

    return launch, d, word


def tilemma_checked(fam: Family, n: int | Shape, inp: dict, kernel: TilemmaKernel, torch) -> Callable[[], None]:
    """`tilemma_launcher`'s launch, run once and checked against the reference (AssertionError
    saying what is wrong)."""
    launch, d, word = tilemma_launcher(fam, n, inp, kernel, torch)
    launch()
    torch.cuda.synchronize()
    if word is not None and int(word.item()) != NO_ERROR_WORD:
        raise AssertionError(f"the kernel reports A is not 2:4 sparse (error word {word.item()})")
    magnitude = None if fam.exact else inp["s"]
    # a narrower D than the accumulator: its one rounding (the output type's epsilon) on top
    slack = torch.finfo(d.dtype).eps if fam.out and not fam.exact else 0.0
    problem = check(d.double(), inp["ab"], magnitude, acc=fam.acc, k=as_shape(n)[2], slack=slack)
    if problem:
        raise AssertionError(f"wrong result: {problem}")
    return launch


def tilemma_row(fam: Family, n: int | Shape, inp: dict, torch, deadline: float, sm: str, config: str = "",
                compiled: TilemmaKernel | None = None) -> Row:
    """tilemma's kernel for `fam` at `n` (compiled here, or `compiled` ahead of time), checked
    and timed."""
    def body(row: Row) -> Row:
        if compiled is not None:
            kernel = compiled
        else:
            text, name = tilemma_ir(fam, n)
            kernel = tilemma_kernel(text, name, compile_options(sm, **parse_config(config)))
        row.config = kernel.config
        launch = tilemma_checked(fam, n, inp, kernel, torch)
        row.check = "exact" if fam.exact else "bound"
        return measured(row, launch, torch)

    return guarded(new_row(fam, n, "tilemma"), body, deadline)


def triton_rows(impl: str, fam: Family, n: int | Shape, inp: dict, torch, deadline: float) -> list[Row]:
    """The best of `triton_gemm.CONFIGS` for this family (worker side)."""
    from benchmarks import triton_gemm

    a, b = inp["a_op"], inp["b_op"]
    d = output(fam, n, torch)
    best: Row | None = None
    failures = []
    for config in triton_gemm.CONFIGS[a.element_size()]:
        row = new_row(fam, n, impl, config="BMxBNxBK={}x{}x{} warps={} stages={}".format(*config))

        def body(row: Row, config=config) -> Row:
            d.fill_(SENTINEL[fam.exact])  # what a failed launch would leave must not pass the check
            compiled = triton_gemm.matmul(a, b, d, config, fam.triton_precision)
            row.instruction = triton_gemm.instruction(compiled.asm["ptx"])
            peer_check(row, d, inp, fam, torch)
            return measured(row, lambda: triton_gemm.matmul(a, b, d, config, fam.triton_precision), torch)

        row = guarded(row, body, deadline)
        if row.ok and (best is None or row.tflops > best.tflops):  # type: ignore[operator]
            best = row
        elif not row.ok:
            failures.append(f"[{row.config}] {row.error}")
    if best is None:
        return [new_row(fam, n, impl, error="; ".join(failures) or "no configuration")]
    if failures:
        best.config += f" ({len(failures)} other configs failed: {failures[0][:120]})"
    if impl == "triton-mma.sync" and best.instruction == "wgmma":
        best.error = "DISABLE_MMA_V3=1 was ignored: the kernel uses wgmma"
    return [best]


# ---------------------------------------------------------------------------------------------
# Driving: the main process times cuBLAS and tilemma, and starts one worker per Triton mode.
# ---------------------------------------------------------------------------------------------


Cell = tuple[Family, Shape]


def cell_label(fam: Family, shape: Shape) -> str:
    """`f16-acol:16x4096x4096`: a (family, shape) pair as the Triton workers take it."""
    return f"{fam.name}:{shape_label(shape)}"


def parse_cell(text: str) -> Cell:
    name, _, shape = text.partition(":")
    if name not in FAMILIES:
        raise ValueError(f"cell {text!r}: unknown family {name!r}")
    return FAMILIES[name], parse_shape(shape)


def timing_argv() -> list[str]:
    """The timing settings as worker arguments, so that the workers time as this process does."""
    return ["--samples", str(SAMPLES), "--warmup-ms", str(WARMUP_MS)]


def operand_strides(fam: Family, shape: Shape) -> tuple[tuple[int, int], ...]:
    """The strides of A (M x K), B (K x N) and D (M x N) as `make_inputs` and `output` store them."""
    m, n, k = shape
    return ((1, m) if fam.a_col else (k, 1)), ((1, k) if fam.b_col else (n, 1)), (n, 1)


def warm_triton(cells: Sequence[Cell], processes: int, seconds: float) -> None:
    """Compile Triton's kernels for `cells` (every configuration, one per specialization) in
    `processes` processes into this process's Triton cache, so that the measurements load them
    instead of compiling one after the other; gives up after `seconds`. Failures only cost time:
    the measurement compiles what is missing."""
    import concurrent.futures
    import multiprocessing

    from benchmarks import triton_gemm

    jobs = {}
    for fam, shape in cells:
        strides = operand_strides(fam, shape)
        dtypes = (fam.torch_in, fam.torch_in, fam.torch_out)
        for config in triton_gemm.CONFIGS[ELEMENTS[fam.a].storage_dtype.itemsize]:
            key = (dtypes, config, fam.triton_precision, triton_gemm.specialization(shape, *strides))
            jobs.setdefault(key, (dtypes, shape, *strides, config, fam.triton_precision))
    if processes <= 1 or len(jobs) < 2:
        return
    began = time.monotonic()
    pool = concurrent.futures.ProcessPoolExecutor(min(processes, len(jobs)), mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(triton_gemm.warm, job) for job in jobs.values()]
    done, waiting = concurrent.futures.wait(futures, timeout=seconds)
    pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.result() for f in done if f.exception() is None and f.result()]
    print(f"  Triton: {len(done)} of {len(jobs)} kernels compiled ahead in {time.monotonic() - began:.0f} s"
          + (f" ({len(errors)} failed: {errors[0]})" if errors else ""), file=sys.stderr, flush=True)


def run_triton_worker(impl: str, cells: Sequence[Cell], budget: float, warm_processes: int = 0) -> int:
    import torch

    deadline = time.monotonic() + budget
    device = torch.cuda.get_device_name()
    if warm_processes > 1:
        try:
            warm_triton(cells, warm_processes, budget * 0.3)
        except Exception as exc:  # only an optimization
            print(f"  Triton: compiling ahead failed: {_error(exc)}", file=sys.stderr, flush=True)
    for fam, shape in cells:
        if time.monotonic() > deadline:  # not even the inputs
            rows = [new_row(fam, shape, impl, error="skipped: time budget spent")]
            for row in rows:
                row.device = device
                print("ROW " + json.dumps(asdict(row)), flush=True)
            continue
        try:
            rows = triton_rows(impl, fam, shape, make_inputs(fam, shape, torch), torch, deadline)
        except Exception as exc:
            traceback.print_exc()
            rows = [new_row(fam, shape, impl, error=_error(exc))]
        for row in rows:
            row.device = device
            print("ROW " + json.dumps(asdict(row)), flush=True)
        torch.cuda.empty_cache()
    return 0


def worker_subprocess(module: str, impl: str, argv: Sequence[str], budget: float,
                      row_cls: type = Row) -> tuple[list[Row], str]:
    """Run `python -m module --triton-worker impl *argv --budget B` in Triton mode `impl`'s
    environment with its own cache; the rows (`row_cls`) it printed as `ROW {json}` lines, kept
    even when it dies or runs out of time, and why any others are missing. The cache is a fresh
    temporary folder, or `$TILEMMA_BENCH_TRITON_CACHE/impl` where that variable names a folder
    (kept between runs: what the parts of `benchmarks.matrix` on one machine share)."""
    env = {**os.environ, **TRITON_MODES[impl]}
    cmd = [sys.executable, "-m", module, "--triton-worker", impl, *argv, "--budget", str(max(budget - 10, 1))]
    kept = os.environ.get("TILEMMA_BENCH_TRITON_CACHE", "").strip()
    with tempfile.TemporaryDirectory(prefix=f"tilemma-{impl}-cache-") as cache:
        if kept:
            cache = os.path.join(os.path.abspath(kept), impl)
            os.makedirs(cache, exist_ok=True)
        env["TRITON_CACHE_DIR"] = cache
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget,
                                  cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            out, err, why = proc.stdout, proc.stderr, f"worker exited with {proc.returncode}"
        except subprocess.TimeoutExpired as exc:
            out, err = (x.decode() if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
            why = f"worker killed after {budget:.0f} s"
    sys.stderr.write(err)
    names = {f.name for f in fields(row_cls)}
    rows = [row_cls(**{k: v for k, v in json.loads(line[4:]).items() if k in names})
            for line in out.splitlines() if line.startswith("ROW ")]
    last = err.strip().splitlines()[-1:] if err.strip() else []
    return rows, f"{why}: {last[0][:200] if last else 'no output'}"


def triton_cells(impl: str, cells: Sequence[Cell], budget: float, warm_processes: int = 0) -> list[Row]:
    """Run one Triton mode on `cells` in its own process (own environment and cache), its kernels
    compiled ahead in `warm_processes` processes (`warm_triton`; 0: none); rows it printed are
    kept even when it dies or runs out of time, and every missing one becomes an error row."""
    rows, why = worker_subprocess("benchmarks.gemm_bench", impl,
                                  ["--cells", *(cell_label(f, s) for f, s in cells), *timing_argv(),
                                   "--triton-warm", str(warm_processes)], budget)
    done = {(r.family, row_shape(r)) for r in rows}
    rows += [new_row(f, s, impl, error=why) for f, s in cells if (f.name, s) not in done]
    return rows


def triton_subprocess(impl: str, families: list[Family], sizes: Sequence[int | Shape], budget: float) -> list[Row]:
    """`triton_cells` on every family at every size (N or (M, N, K))."""
    return triton_cells(impl, [(f, as_shape(n)) for f in families for n in sizes], budget)


def run_cells(cells: Sequence[Cell], *, peers: Any = None, tilemma: Any = None, configs: Sequence[str] = ("",),
              sm: str = "90", budget: float = 3600.0, skip: Sequence[str] = (), main_share: float = 1.0,
              precompiled: dict | None = None, warm_processes: int = 0) -> list[Row]:
    """Every implementation on `cells` (family, shape), in this order: cuBLAS and tilemma per
    cell in this process, within `main_share` of the `budget` (seconds), then each Triton mode
    not in `skip` in its own worker on the dense cells, sharing what is left. `peers` and
    `tilemma` (sets of (family name, shape); None: every cell) say where cuBLAS (and Triton) and
    where tilemma run; `precompiled` maps (family name, shape, config) to a `precompile` result;
    `warm_processes` compile the Triton workers' kernels ahead (`warm_triton`)."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gemm_bench: torch sees no CUDA device; this benchmark needs the GPU")
    started = time.monotonic()
    deadline = started + budget
    device = torch.cuda.get_device_name()
    rows: list[Row] = []
    wanted = lambda which, fam, shape: which is None or (fam.name, shape) in which  # noqa: E731
    main_deadline = started + budget * main_share
    for fam, shape in cells:
        ours = wanted(tilemma, fam, shape)
        if time.monotonic() > main_deadline:  # not even the inputs
            impls = (["cublas", *(["torch-sparse"] if fam.sparse else [])] if wanted(peers, fam, shape) else [])
            rows += [new_row(fam, shape, impl, error="skipped: time budget spent")
                     for impl in impls + (["tilemma"] * len(configs) if ours else [])]
            continue
        print(f"{fam.name} {shape_label(shape)}: cuBLAS{' and tilemma' if ours else ''}", file=sys.stderr, flush=True)
        try:
            inp = make_inputs(fam, shape, torch)
        except Exception as exc:
            traceback.print_exc()
            rows += [new_row(fam, shape, "cublas", error=_error(exc))]
            continue
        if wanted(peers, fam, shape):
            rows += cublas_rows(fam, shape, inp, torch, main_deadline)
        if ours:
            for config in configs:
                build = (precompiled or {}).get((fam.name, shape, config))
                if isinstance(build, str):  # the compile failed
                    rows.append(new_row(fam, shape, "tilemma", error=build))
                    continue
                rows.append(tilemma_row(fam, shape, inp, torch, main_deadline, sm, config,
                                        kernel_from(build) if build is not None else None))
        del inp
        torch.cuda.empty_cache()
    dense = [(f, s) for f, s in cells if not f.sparse and wanted(peers, f, s)]
    modes = [m for m in TRITON_MODES if m not in skip]
    for i, impl in enumerate(modes):
        left = deadline - time.monotonic()
        print(f"{impl}: {left:.0f} s of budget left", file=sys.stderr, flush=True)
        if dense and left > 5:
            rows += triton_cells(impl, dense, left / (len(modes) - i), warm_processes)
        elif dense:
            rows += [new_row(f, s, impl, error="skipped: time budget spent") for f, s in dense]
    for row in rows:
        row.device = row.device or device
    return rows


def run(args: argparse.Namespace) -> list[Row]:
    families = [FAMILIES[f] for f in args.families]
    shapes = sorted(set(args.shapes) | set(args.tilemma_shapes), key=lambda s: (s[0] * s[1] * s[2], s))
    cells = [(fam, s) for fam in families for s in shapes]
    return run_cells(cells, peers={(f.name, s) for f, s in cells if s in args.shapes},
                     tilemma={(f.name, s) for f, s in cells if s in args.tilemma_shapes},
                     configs=args.tilemma_configs, sm=args.sm, budget=args.budget, skip=args.skip,
                     warm_processes=args.triton_warm)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _cell(row: Row | None) -> str:
    if row is None:
        return "—"
    if row.error.startswith("skipped"):
        return "skip"
    if not row.ok:
        return "wrong" if "wrong result" in row.error else "error"
    mark = {"wgmma": " wg", "mma.sync": " ms", "fma": " fma"}.get(row.instruction, "")
    return f"{row.tflops:.1f}{mark}"


def _ratio(ours: Row | None, theirs: Row | None) -> str:
    if ours is None or theirs is None or not ours.ok or not theirs.ok:
        return "—"
    return f"{ours.tflops / theirs.tflops:.3f}"  # type: ignore[operator]


# (header, cell from the rows of one line by implementation)
RATIOS: tuple[tuple[str, Callable[[dict[str, Row]], str]], ...] = (
    ("tilemma/cuBLAS", lambda by: _ratio(by.get("tilemma"), by.get("cublas"))),
    ("tilemma/Triton-ms", lambda by: _ratio(by.get("tilemma"), by.get("triton-mma.sync"))),
)
LEGEND = ("TFLOP/s (TOP/s for s8; sparse: dense-equivalent; cublas for sparse-f16 is dense "
          "f16). wg/ms: Triton used wgmma/mma.sync.")


def _family_order(key: tuple) -> tuple:
    """Families in FAMILIES' order, then sizes, shapes (MxNxK) by their FLOPs."""
    rest = [(flops(parse_shape(x)), parse_shape(x)) if isinstance(x, str) and "x" in x else x for x in key[1:]]
    return (list(FAMILIES).index(key[0]) if key[0] in FAMILIES else 99, key[0], *rest)


def table(rows: list[Row], *, impls: Sequence[str] = IMPLS, ratios=RATIOS,
          keys: Sequence[str] = ("family", "size"), headers: Sequence[str] | None = None,
          order: Callable[[tuple], Any] = _family_order, legend: str = LEGEND,
          config_impls: Sequence[str] = ("tilemma", "triton", "triton-mma.sync")) -> str:
    """TFLOP/s per implementation (`impls`, those present) for each line (the rows' attributes
    `keys`, headed `headers`, sorted by `order`), then the `ratios` columns; the configurations
    of `config_impls` and the failed rows with their errors are listed underneath. gemm_bench's:
    per (family, size), tilemma's ratios to cuBLAS and to Triton's mma.sync path."""
    def key(r: Row) -> tuple:
        return tuple(getattr(r, k) for k in keys)

    by_line: dict[tuple, dict[str, Row]] = {}
    for r in rows:
        by_line.setdefault(key(r), {})[r.impl] = r
    present = [i for i in impls if any(r.impl == i for r in rows)]
    head = [*(headers or keys), *present, *(h for h, _ in ratios)]
    body = []
    for line in sorted(by_line, key=order):
        by = by_line[line]
        body.append([*map(str, line), *(_cell(by.get(i)) for i in present), *(cell(by) for _, cell in ratios)])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(legend)
    label = lambda r: " ".join(map(str, key(r)))  # noqa: E731
    configs = [f"  {label(r)} {r.impl}: {r.config}" for r in rows if r.ok and r.impl in config_impls]
    failed = [f"  {label(r)} {r.impl}: {r.error}" for r in rows if r.error]
    if configs:
        lines += ["configurations:", *configs]
    if failed:
        lines += ["failed or skipped:", *failed]
    return "\n".join(lines)


def write_csv(rows: list[Row], path: str) -> None:
    """Every row, with the fields of the first row's class (Row or a subclass)."""
    cls = type(rows[0]) if rows else Row
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(cls)])
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))


def write_dicts(rows: Sequence[dict], path: str) -> None:
    """Rows as plain dicts (the benchmarks that have their own columns), the first row's keys the header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: str, row_cls: type = Row) -> list[Row]:
    types = {fl.name: fl.type for fl in fields(row_cls)}

    def convert(name: str, value: str):
        if types[name] in ("int", int):
            return int(value)
        if types[name] in ("float | None", float):
            return float(value) if value else None
        return value

    with open(path, newline="") as f:
        return [row_cls(**{k: convert(k, v) for k, v in line.items()}) for line in csv.DictReader(f)]


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gemm_bench", description=__doc__.split("\n")[0])
    p.add_argument("--families", nargs="+", default=list(FAMILIES), metavar="F",
                   help=f"families to run (default all: {' '.join(FAMILIES)})")
    p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), metavar="N",
                   help="square sizes M = N = K for the peers (default 1024 2048 4096 8192)")
    p.add_argument("--tilemma-sizes", nargs="+", type=int, metavar="N",
                   help="sizes for tilemma (default: --sizes); may differ from the peers'")
    p.add_argument("--shapes", nargs="+", metavar="MxNxK",
                   help="shapes for every implementation instead of --sizes: MxNxK (D is M x N, the sum runs "
                   "over K; any positive sizes, e.g. 16x4096x4096 257x129x4096) or N (square)")
    p.add_argument("--samples", type=int, default=SAMPLES,
                   help=f"timed samples per measurement, the median reported (default {SAMPLES})")
    p.add_argument("--warmup-ms", type=float, default=WARMUP_MS,
                   help=f"untimed running before each measurement (default {WARMUP_MS:g})")
    p.add_argument("--skip", nargs="+", default=[], metavar="IMPL", choices=list(TRITON_MODES),
                   help="leave out a Triton mode: triton, triton-mma.sync")
    p.add_argument("--sm", default="90", help="target tilemma compiles for (default 90)")
    p.add_argument("--tilemma-configs", nargs="+", default=[""], metavar="CFG",
                   help="tilemma configurations to measure, e.g. 'warps=2x4,warp-tile=4x8,stages=3' "
                   "('' = the compiler's default)")
    p.add_argument("--csv", help="write every row to this CSV file")
    p.add_argument("--plot", help="write a PNG of TFLOP/s against size per family (matplotlib)")
    p.add_argument("--budget", type=float, default=3600.0,
                   help="seconds; measurements not started by then become 'skipped' rows")
    p.add_argument("--triton-worker", choices=list(TRITON_MODES), help=argparse.SUPPRESS)
    p.add_argument("--cells", nargs="+", default=[], help=argparse.SUPPRESS)  # a worker's FAMILY:MxNxK
    p.add_argument("--triton-warm", type=int, default=0, metavar="P",
                   help="compile Triton's kernels ahead in P processes before timing them (default 0: as they come)")
    args = p.parse_args(argv)
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        p.error(f"unknown family {', '.join(unknown)}: choose from {', '.join(FAMILIES)}")
    tilemma_sizes_given = args.tilemma_sizes is not None
    if not tilemma_sizes_given:
        args.tilemma_sizes = args.sizes
    bad = [n for n in [*args.sizes, *args.tilemma_sizes] if n < 16 or n % 16]
    if bad:
        p.error(f"size {bad[0]}: sizes must be positive multiples of 16")
    try:
        args.shapes = [parse_shape(s) for s in args.shapes] if args.shapes else [as_shape(n) for n in args.sizes]
        args.cells = [parse_cell(c) for c in args.cells]
    except ValueError as exc:
        p.error(str(exc))
    args.tilemma_shapes = [as_shape(n) for n in args.tilemma_sizes] if tilemma_sizes_given else list(args.shapes)
    if args.samples < 1 or args.warmup_ms < 0:
        p.error("--samples must be at least 1 and --warmup-ms not negative")
    set_timing(args.samples, args.warmup_ms)
    return args


def set_timing(samples: int, warmup_ms: float) -> None:
    """Samples per measurement and the warm-up before it, for every measurement from now on."""
    global SAMPLES, WARMUP_MS
    SAMPLES, WARMUP_MS = samples, warmup_ms


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.triton_worker:
        cells = args.cells or [(FAMILIES[f], s) for f in args.families for s in args.shapes]
        return run_triton_worker(args.triton_worker, cells, args.budget, args.triton_warm)
    try:
        rows = run(args)
    except ModuleNotFoundError as exc:
        print(f"gemm_bench needs torch and a GPU: {exc}", file=sys.stderr)
        return 1
    if args.csv:
        write_csv(rows, args.csv)
    if args.plot:
        from benchmarks import plot

        try:
            plot.plot(rows, args.plot)
        except ImportError:
            print(f"no matplotlib here: write the plot elsewhere with "
                  f"`python -m benchmarks.plot {args.csv or 'ROWS.csv'} {args.plot}`", file=sys.stderr)
    square = all(m == n == k for m, n, k in [*args.shapes, *args.tilemma_shapes])
    print(table(rows) if square else table(rows, keys=("family", "shape")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
