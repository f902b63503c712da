"""`tilemma`: the driver. Subcommands: isa, gemm, compile, tune, run, cache.

Every failure the user can cause (bad IR, bad option, no legal instruction, a refused PTX) ends
as one located message on stderr and exit status 1; see `diagnostics.report_error`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tilemma.compiler.driver import instrument
from tilemma.compiler.driver.files import read_input, tune_cache_path, write_atomically
from tilemma.compiler.driver.reporting import run_reporting

# The compiler (xDSL, the passes, NumPy) is imported by the commands that run it: `tilemma compile`
# served from the compile cache starts in a few tens of milliseconds.


def _option_values(args: argparse.Namespace) -> dict:
    """The CompileOptions fields the flags give (sm included)."""
    if args.stages == 0 and args.stage_k is not None:
        raise ValueError("--stage-k sizes shared-memory stages; --stages 0 has none")
    if args.stages == 0 and args.no_swizzle:
        raise ValueError("--no-swizzle unswizzles shared-memory stages; --stages 0 has none")
    return dict(
        sm=args.sm,
        ptx=args.ptx or "",
        f32_precision=args.f32_precision,
        allow_slow=args.allow_slow,
        warps=args.warps or "",
        warp_tile=args.warp_tile or "",
        sparse_form=args.sparse_form,
        stages=args.stages,
        stage_k=args.stage_k or 0,
        split_k=args.split_k,
        swizzle=not args.no_swizzle,
        staged_stores=not args.no_staged_stores,
        pair_bytes=not args.no_pair_bytes,
        wgmma=args.wgmma,
        shared_transpose=not args.no_shared_transpose,
        transpose_first=args.transpose_first,
        producers=args.producers,
        # (--emit gpu-binary passes no tensor maps: the automatic TMA kernels keep cp.async there)
        tma=0 if args.tma == -1 and getattr(args, "emit", None) == "gpu-binary" else args.tma,
        cluster=args.cluster,
        persistent=args.persistent,
        tune_cache=_tune_cache(args.tune_cache),
        attention_rows=args.attention_rows,
        attention_block_n=args.attention_block_n,
        attention_q_shared=args.attention_q_shared or "",
        attention_ctas=args.attention_ctas,
    )


def _compile_options(args: argparse.Namespace):
    from tilemma.compiler.driver.pipeline import CompileOptions

    return CompileOptions(**_option_values(args))


#: What the flags give when none is used (`tilemma.compile`'s defaults): the compile cache is
#: keyed by the options as given, so these are left out of the key, and `tilemma compile g.mlir`
#: and `tilemma.compile(text)` share an entry. (Were one to differ from CompileOptions' default,
#: the two would only keep separate entries.)
_FLAG_DEFAULTS = dict(sm="90", ptx="", f32_precision="exact", allow_slow=False, warps="", warp_tile="",
                      sparse_form="ordered", stages=-1, stage_k=0, split_k=0, swizzle=True, staged_stores=True, pair_bytes=True, wgmma=False, shared_transpose=True, transpose_first=-1,
                      producers=-1, tma=-1, cluster=-1, persistent=-1, attention_rows=0,
                      attention_block_n=0, attention_q_shared="", attention_ctas=0)


def _compile(text: str, name: str, values: dict, observe: instrument.PassInstrument) -> list:
    """The kernels of `text`, from the compile cache when it has them (not when the passes are
    timed or dumped: that needs a compile that runs)."""
    from tilemma.compiler.driver import cache

    def build() -> list:
        from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

        return compile_text(text, name, CompileOptions(**values), observe)

    if observe.active:
        return build()
    given = {k: v for k, v in values.items() if k not in ("sm", "tune_cache") and _FLAG_DEFAULTS.get(k, _FLAG_DEFAULTS) != v}
    if values["tune_cache"] != os.environ.get("TILEMMA_TUNE_CACHE", ""):
        given["tune_cache"] = values["tune_cache"]
    return cache.compile_cached(text, values["sm"], given, build)[0]


def _tune_cache(flag: str | None) -> str:
    """--tune-cache, else $TILEMMA_TUNE_CACHE; a named cache that does not exist is refused
    (it would otherwise be ignored without a word)."""
    # $TILEMMA_TUNE_CACHE is configs.default_cache(), read here without importing the compiler
    path, source = (flag, "--tune-cache") if flag is not None else (os.environ.get("TILEMMA_TUNE_CACHE", ""),
                                                                    "$TILEMMA_TUNE_CACHE")
    return tune_cache_path(path, source)


def _add_compile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sm", default="90", help="target: 90, sm_90, 120a, sm_120a, ... (default 90)")
    p.add_argument("--ptx", help="PTX ISA version (default: newest the target and ptxas accept)")
    p.add_argument(
        "--f32-precision",
        default="exact",
        choices=("exact", "tf32", "3xtf32"),
        help="f32 operands: 'exact' refuses them, 'tf32' rounds them to tf32 (rna), '3xtf32' "
        "splits them into tf32 hi+lo parts and runs three mmas (close to f32 accuracy)",
    )
    p.add_argument("--allow-slow", action="store_true", help="keep families the target emulates")
    p.add_argument("--warps", help="warps per CTA as WMxWN (default up to 2x2)")
    p.add_argument(
        "--sparse-form",
        default="ordered",
        choices=("ordered", "sp"),
        help="sparse A: mma.sp::ordered_metadata where legal (default), or plain mma.sp",
    )
    p.add_argument("--warp-tile", help="instructions per warp as RMxRN")
    p.add_argument(
        "--stages", type=int, default=-1,
        help="shared-memory stages of the staged schedule, 2..5; 0: fragments straight from global "
        "memory; -1 (default): staged wherever it applies (aligned rows; see the README)",
    )
    p.add_argument("--stage-k", type=int,
                   help="K of one shared-memory stage (16, 32, ..., 1024 elements; default per type family, "
                   "e.g. 64 16-bit or 128 8-bit elements)")
    p.add_argument("--split-k", type=int, default=0, metavar="N",
                   help="CTAs sharing each output tile's K (partial sums added in order by the last): "
                   "0 (default) where the tiles leave SMs idle and K >= 1024, 1 never, N at most N")
    p.add_argument("--attention-rows", type=int, default=0, choices=(0, 16, 32),
                   help="attention: query rows a warp (default 32)")
    p.add_argument("--attention-block-n", type=int, default=0, choices=(0, 32, 64, 128),
                   help="attention: key rows a block (default 64)")
    p.add_argument("--attention-q-shared", choices=("yes", "no"),
                   help="attention: Q staged in shared memory (default: at head dim 128) or kept in registers")
    p.add_argument("--attention-ctas", type=int, default=0, choices=range(9), metavar="N",
                   help="attention: CTAs an SM is to hold at once, 1..8 (.minnctapersm; ptxas cuts the "
                   "registers a thread to fit them); 0 (default): the configuration's")
    p.add_argument("--tune-cache", help="tuning cache written by `tilemma tune` (default $TILEMMA_TUNE_CACHE)")
    p.add_argument("--no-swizzle", action="store_true",
                   help="keep shared buffers row-major (skip warp-swizzle-shared): for measuring bank conflicts")
    p.add_argument("--no-staged-stores", action="store_true",
                   help="store a warpgroup kernel's accumulators directly (skip warp-stage-stores): for measuring")
    p.add_argument("--no-pair-bytes", action="store_true",
                   help="transpose an M-major 8-bit A or N-major B with the fill (registers) instead of reading it "
                        "by byte-pair ldmatrix .trans")
    p.add_argument("--no-shared-transpose", action="store_true",
                   help="transpose a warpgroup kernel's 8-bit N-major B with the fill (registers) instead of in "
                        "shared memory by a producer warpgroup")
    p.add_argument("--transpose-first", type=int, choices=(-1, 0, 1), default=-1, metavar="{-1,0,1}",
                   help="an 8-bit N-major B transposed into a K-major workspace by a kernel of its own, launched "
                        "before the GEMM: -1 automatic (sm_90a, A M-major too, 512 rows and up), 0 never, 1 where "
                        "it can (an error where not)")
    p.add_argument("--wgmma", action="store_true",
                   help="multiply each stage by warpgroups' wgmma.mma_async from the swizzled shared stages "
                        "(--sm 90a; f16/bf16 into f32, A and B in either order; a pre-compressed sparse A; "
                        "s8/u8 into s32, a transposed operand through the fill) instead of mma.sync, or say "
                        "why not; without it sm_90a takes them where they can and win (configs.WGMMA_MIN_ROWS; "
                        "--sm 90: mma.sync)")
    p.add_argument("--producers", type=int, default=-1, choices=(-1, 0, 4),
                   help="a wgmma kernel's producer warpgroup: 4 warps that fill the stages while the others "
                        "multiply, meeting them at mbarriers (warp-specialize); 0: none; -1 (default): "
                        "configs.WGMMA_PRODUCERS's choice (the sparse and 16-bit kernels where it costs nothing: "
                        "plan_warpgroups.producers_by_themselves)")
    p.add_argument("--tma", type=int, default=-1, choices=(-1, 0, 1),
                   help="1: the producer warpgroup copies A's and B's stages with the TMA (one thread a stage "
                        "buffer, cp.async.bulk.tensor through tensor-map parameters) instead of cp.async "
                        "(static sizes, 16-byte strides, no fill, tf32 only truncated), or says why not; 0: "
                        "cp.async; -1 (default): configs.WGMMA_TMA's choice (the sparse and 16-bit kernels' producers)")
    p.add_argument("--cluster", type=int, default=-1, choices=(-1, 1, 2),
                   help="2: a TMA kernel's CTAs in pairs (a 2-CTA cluster along M) that share B's stages, each "
                        "copying half of B's blocks to both (multicast), or say why not; 1: none; -1 (default): "
                        "configs.WGMMA_CLUSTER's choice")
    p.add_argument("--persistent", type=int, default=-1, metavar="N",
                   help="N: a TMA kernel launched as N CTAs that loop over its tiles (where it has more), "
                        "or say why not; 0: one CTA a tile; -1 (default): configs.WGMMA_PERSISTENT's choice "
                        "(as many CTAs as the SMs hold)")
    instrument.add_arguments(p)


def cmd_gemm(args: argparse.Namespace) -> int:
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
    from tilemma.compiler.core.targets import parse_sm

    block_scale, vector_scales = args.scale, None
    if args.scale is not None and {"rows", "cols"} & set(args.scale.split(",")):
        block_scale, vector_scales = None, args.scale
    module = gemm_module(
        GemmSpec(
            args.m, args.n, args.k, args.a, args.b, args.acc, args.batch, args.bcast,
            args.satfinite, args.popc, args.shape, args.sparse_a not in (None, "compressed"), args.prune,
            block_scale, args.scale_block,
            args.sparse_a if args.sparse_a == "4:8" else None, args.b_layout,
            pre_compressed=args.sparse_a == "compressed", c=not args.no_c, rounding=args.rounding,
            bias=args.bias, act=args.act, vector_scales=vector_scales, alpha=args.alpha, out=args.out,
            aux=args.aux, dynamic=args.dynamic or "", a_layout=args.a_layout,
        )
    )
    if args.sm is not None:
        _check_selectable(module, args.sm)
    print(module)
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    from tilemma.compiler.driver.attention_generator import AttentionSpec, attention_text

    spec = AttentionSpec(args.b, args.h, args.s, args.d, args.causal, args.dtype, args.scale)
    if why := spec.problem():
        raise ValueError(why)
    print(attention_text(spec), end="")
    return 0


def _check_selectable(module, sm: str) -> None:
    """`gemm --sm`: the IR is target independent, so check that the target has an instruction
    for it (on a copy; any f32 precision, slow paths allowed) and say why not."""
    from tilemma.compiler.driver.pipeline import make_context
    from tilemma.passes.errors import LoweringError
    from tilemma.passes.tile.select_mma import SelectMma

    try:
        SelectMma(sm, "", "tf32", True).apply(make_context(), module.clone())
    except LoweringError as e:
        raise ValueError(f"--sm {sm}: {e.message}") from None


def cmd_compile(args: argparse.Namespace) -> int:
    text, name = read_input(args.file)
    values = _option_values(args)
    observe = instrument.from_arguments(args)
    try:
        if args.emit in ("mlir", "warp"):
            from tilemma.compiler.driver.pipeline import CompileOptions, lower, parse

            module, locations = parse(text, name)
            lower(module, locations, CompileOptions(**values), warp_level=args.emit == "warp", instrument=observe)
            _write(args.output, str(module) + "\n")
            if args.metadata:
                _emit_metadata(args, _compile(text, name, values, instrument.PassInstrument()))
            return 0
        kernels = _compile(text, name, values, observe)
    finally:
        observe.report()
    if args.emit == "json" or args.metadata:
        _emit_metadata(args, kernels)
        if args.emit == "json":
            return 0
    if args.emit == "gpu-binary":
        return _emit_gpu_binary(args, kernels)
    modules = list(dict.fromkeys(k.ptx for k in kernels))  # kernels of one target share a module
    if args.emit == "ptx":
        _write(args.output, "\n".join(modules))
        return 0
    if len(modules) != 1 and args.output:
        raise ValueError("--emit cubin -o FILE takes an input whose kernels make one PTX module")
    from tilemma.compiler.core.targets import parse_sm

    from tilemma.compiler.driver.cache import cubin as assemble

    for text_ in modules:
        cubin = assemble(text_, parse_sm(args.sm).name)
        names = [k.name for k in kernels if k.ptx == text_]
        path = args.output or f"{names[0]}.cubin"
        _write(path, cubin)
        if path != "-":
            print(f"{', '.join(names)}: wrote {path} ({len(cubin)} bytes)")
    return 0


def _emit_metadata(args: argparse.Namespace, kernels: list) -> None:
    """`--emit json` (to -o or stdout) / `--metadata FILE`: every kernel's ABI, one JSON object."""
    import json

    out = json.dumps({"kernels": [k.abi.to_dict() for k in kernels]}, indent=2) + "\n"
    if args.emit == "json":
        _write(args.output, out)
    if args.metadata:
        _write(args.metadata, out)


def _emit_gpu_binary(args: argparse.Namespace, kernels) -> int:
    from tilemma.compiler.driver.gpu_binary import gpu_binary_module
    from tilemma.compiler.core.targets import parse_sm

    _write(args.output, gpu_binary_module(kernels, parse_sm(args.sm).name))
    return 0


def _write(path: str | None, data: str | bytes) -> None:
    """To the file `path`, or to stdout when there is none or it is `-`."""
    binary = isinstance(data, bytes)
    if path and path != "-":
        write_atomically(path, data)  # a failure leaves an existing file as it was
    elif binary:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)


def cmd_tune(args: argparse.Namespace) -> int:
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.core.targets import parse_sm
    from tilemma.compiler.driver.tune import tune

    parse_sm(args.sm)
    if args.iters < 1:
        raise ValueError(f"--iters must be at least 1, got {args.iters}")
    if not cuda_runtime.gpu_available():
        raise ValueError(f"tune times kernels on a GPU: {cuda_runtime.gpu_unavailable_reason()}")

    return tune(args.types, args.classes, args.sm, args.cache, args.iters)


def cmd_run(args: argparse.Namespace) -> int:
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.driver.pipeline import compile_text
    from tilemma.compiler.driver.runner import check_size, run_compiled

    text, name = read_input(args.file)
    on = args.on
    if on == "auto":
        on = "gpu" if cuda_runtime.gpu_available() else "emulator"
    if on == "gpu" and not cuda_runtime.gpu_available():
        raise ValueError(f"--on gpu: no usable GPU ({cuda_runtime.gpu_unavailable_reason()})")
    options = _compile_options(args)
    if on == "gpu" and not args.ptx:
        major, minor = cuda_runtime.driver_max_ptx()
        from tilemma.compiler.core.targets import DEFAULT_PTX, PtxVersion

        newest = min(DEFAULT_PTX, PtxVersion(major, minor))
        options = type(options)(**{**options.__dict__, "ptx": str(newest)})
    inputs = _load_inputs(args.input or [])
    observe = instrument.from_arguments(args)
    try:
        kernels = compile_text(text, name, options, observe)
    finally:
        observe.report()
    kernels = [_dispatched(k, text, name, options, inputs, args.size) if k.abi.dynamic else k for k in kernels]
    for kernel in kernels:  # every kernel before the first runs
        check_size(kernel, on, args.allow_long)
    failed = 0
    for kernel in kernels:
        result = run_compiled(kernel, args.seed, on, inputs=inputs)
        print(result.line(), flush=True)
        failed += not result.ok
        if args.save:
            _save_outputs(args.save, kernel.name, result.outputs)
    return 1 if failed else 0


def _dispatched(kernel, text: str, name: str, options, inputs: dict, sizes: list[str] | None):
    """A kernel with `?` sizes as a launch runs it (`Kernel.bind`): the variant of the run's
    size class (`variants.variant_for`), compiled for it, bound to the run's sizes."""
    import dataclasses

    from tilemma.compiler.driver.pipeline import compile_text
    from tilemma.compiler.driver.runner import bind_sizes, launch_shapes
    from tilemma.compiler.driver.variants import variant_for

    shapes, strides = launch_shapes(kernel, inputs, sizes)
    variant = variant_for(kernel.abi, shapes, strides)
    if variant is not None:
        specialised = compile_text(text, name, dataclasses.replace(options, **variant._asdict()))
        kernel = next(k for k in specialised if k.name == kernel.name)
    return bind_sizes(kernel, shapes, strides)


def _load_inputs(specs: list[str]) -> dict:
    """`NAME=FILE.npy` pairs -> arrays (checked against the kernel's ABI when it runs)."""
    import numpy as np

    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input {spec}: expected NAME=FILE.npy (NAME: a kernel argument, e.g. a)")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise ValueError(f"--input {spec}: cannot read {path} as a .npy array ({e})") from None
    return inputs


def _save_outputs(directory: str, kernel: str, outputs: dict) -> None:
    import os

    import numpy as np

    os.makedirs(directory, exist_ok=True)
    for name, array in outputs.items():
        path = os.path.join(directory, f"{kernel}.{name}.npy")
        np.save(path, array)
        print(f"{kernel}: wrote {path} ({'x'.join(map(str, array.shape))} {array.dtype})", flush=True)


def cmd_cache(args: argparse.Namespace) -> int:
    from tilemma.compiler.driver import cache

    folder = cache.directory()
    if folder is None:
        print("the compile cache is off (TILEMMA_CACHE_DIR is set and empty)")
        return 0
    if args.cache_command == "clear":
        count, freed = cache.clear()
        print(f"{folder}: removed {count} entr{'y' if count == 1 else 'ies'} ({_size(freed)})")
        return 0
    found = cache.entries()
    print(f"{folder}: {len(found)} entr{'y' if len(found) == 1 else 'ies'}, {_size(sum(e.size for e in found))}")
    for e in found:
        what = e.what if e.valid else "(not a whole entry of this tilemma: ignored, rewritten when needed)"
        print(f"  {os.path.basename(e.path)[:16]}  {e.kind:<7}  {_size(e.size):>9}  {_age(e.age):>8} ago  {what}")
    return 0


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return ""


def _age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit}"
    return f"{seconds:.0f} s"


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return value


def tilemma_version() -> str:
    """The installed distribution's version (what `pip show tilemma` reports)."""
    from tilemma.compiler.core.version import version

    found = version()
    return "unknown (not installed)" if found == "0+unknown" else found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tilemma", description="tile-level matmul IR to PTX tensor-core instructions"
    )
    parser.add_argument("--version", action="version", version=f"tilemma {tilemma_version()}")
    sub = parser.add_subparsers(dest="command", required=True, prog=parser.prog)  # prog given: not worked out by formatting the usage (8 ms)

    from tilemma.compiler.driver import isa_commands

    isa_commands.register(sub)

    g = sub.add_parser("gemm", help="write the tile IR of a GEMM kernel D = A x B + C")
    g.add_argument("--m", type=int, required=True)
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--k", type=int, required=True)
    g.add_argument("--a", required=True, help="element type of A (MLIR or PTX name)")
    g.add_argument("--b", required=True, help="element type of B")
    g.add_argument("--acc", help="accumulator type (default: the matmul result type)")
    g.add_argument("--batch", type=int, help="batch size (rank 3 tiles)")
    g.add_argument("--dynamic", metavar="mnk",
                   help="these sizes are known only at launch (memref<?x...>, e.g. --dynamic mnk or m): "
                        "one kernel for every size; their --m/--n/--k values are ignored")
    g.add_argument("--bcast", choices=("a", "b"), help="this operand is a batch of 1, broadcast")
    g.add_argument("--satfinite", action="store_true", help="clamp integer accumulation")
    g.add_argument("--popc", choices=("xor", "and"), help="b1 operands: xor or and, then popc")
    g.add_argument("--shape", help="instruction shape to use, e.g. m16n8k8 (default: best)")
    g.add_argument(
        "--sparse-a",
        choices=("2:4", "4:8", "compressed"),
        help="A is structured sparse: 2:4 is 2 of every 4 (1 of 2 for tf32, 2 pairs of 4 for "
        "4-bit integers); 4:8 asks for aligned pairs for e2m1 (the sparse mxf4 kinds); compressed: "
        "A arrives 2:4-compressed as values and metadata (tile.sparse_from; f16/bf16)",
    )
    g.add_argument("--prune", action="store_true", help="with --sparse-a: keep the largest two")
    g.add_argument("--a-layout", choices=("row", "col"), default="row",
                   help="A's memory layout: row-major M x K (default) or column-major (M-major, "
                   "strided<[1, M]>)")
    g.add_argument("--b-layout", choices=("row", "col"), default="row",
                   help="B's memory layout: row-major K x N (default) or column-major (K-major, "
                   "strided<[1, K]>; what 1-bit operands need for the staged schedule, and what "
                   "8- and 4-bit ones are fastest with)")
    g.add_argument("--no-c", action="store_true",
                   help="D = A x B: no C argument, the accumulator starts at zero (what cuBLAS does "
                   "with beta = 0)")
    g.add_argument("--rounding", choices=("rna", "rn", "rz", "trunc"), default="rna",
                   help="how f32 operands of a tf32 GEMM are rounded to tf32 (default rna; rn and rz "
                   "need sm_90 and are one instruction each there, rna about two; trunc is none: the "
                   "mma reads the f32's top 19 bits, as cuBLAS and Triton do - rz, but a NaN whose "
                   "payload lies in the low 13 bits alone reads as an infinity)")
    g.add_argument("--scale", metavar="TYPE|rows,cols",
                   help="block scaling: scale type ue8m0 (f8E8M0FNU) or ue4m3; or the epilogue's "
                   "per-row and/or per-column scales of the accumulator (rows, cols or rows,cols: "
                   "D = acc * s_rows[m] * s_cols[n], the int8 dequantisation; vectors of the compute "
                   "type f32, f64 for an f64 GEMM)")
    g.add_argument(
        "--scale-block", type=int, default=32, choices=(16, 32, 64),
        help="with --scale: elements of K per scale factor (default 32; 64 for a sparse A)",
    )
    e = g.add_argument_group(
        "epilogue", "one tile.map after the mma, in f32 (f64 for an f64 GEMM): "
        "D = out(act(alpha * acc * s_rows[m] * s_cols[n] + bias))")
    e.add_argument("--alpha", type=float, help="multiply the accumulator by this constant")
    e.add_argument("--bias", choices=("col", "row"),
                   help="add a bias vector: col = b[n] (memref<N>, per output column, nn.Linear's), "
                   "row = b[m] (memref<M>); of the output type (f16 for fp8 outputs); batched, "
                   "one per batch unless its operand broadcasts (--bcast b: one shared b[n])")
    e.add_argument("--act", choices=("relu", "gelu", "gelu-tanh", "silu", "sigmoid"),
                   help="activation, composed from arith/math ops: relu = max(x, 0), gelu = "
                   "0.5x(1 + erf(x/sqrt2)), gelu-tanh = 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), "
                   "silu = x sigmoid(x), sigmoid = 1/(1 + exp(-x))")
    e.add_argument("--out", help="the stored type: f16, bf16, f32, f64, e4m3, e5m2 (default: the "
                   "accumulator's, f32 after an integer GEMM); fp8 saturates (cvt.rn.satfinite)")
    e.add_argument("--aux", action="store_true",
                   help="also store the pre-activation (f32) as a second output `pre` (needs --act)")
    g.add_argument("--sm", help="check that this target has an instruction for the kernel (the IR "
                   "itself is target independent)")
    g.set_defaults(func=cmd_gemm)

    at = sub.add_parser("attention", help="write the tile IR of attention O = softmax(scale Q K^T) V "
                                          "(b x h heads, s rows, head dim d)")
    at.add_argument("--b", type=int, required=True, help="batch")
    at.add_argument("--h", type=int, required=True, help="heads")
    at.add_argument("--s", type=int, required=True, help="sequence length (queries and keys)")
    at.add_argument("--d", type=int, required=True, help="head dim (the schedule takes 64 or 128)")
    at.add_argument("--causal", action="store_true", help="mask keys after the query (PyTorch's is_causal)")
    at.add_argument("--dtype", default="f16", choices=("f16", "bf16"), help="Q, K, V and O element type")
    at.add_argument("--scale", type=float, help="softmax scale (default 1/sqrt(d))")
    at.set_defaults(func=cmd_attention)

    c = sub.add_parser("compile", help="tile IR -> PTX (or cubin, or lowered IR)")
    c.add_argument("file", help="input file ('-' for stdin)")
    c.add_argument("--emit", choices=("ptx", "cubin", "mlir", "warp", "json", "gpu-binary"), default="ptx",
                   help="ptx (default), cubin (nvJitLink or ptxas), mlir (the IR after every pass: PTX ops), "
                   "warp (the kernel at warp level), json (each kernel's launch shape and argument ABI) or "
                   "gpu-binary (an MLIR gpu.binary of the PTX and a host function per kernel doing gpu.launch_func)")
    c.add_argument("--metadata", metavar="FILE", help="also write the kernels' JSON ABI (as --emit json) to FILE")
    c.add_argument("-o", "--output", metavar="FILE", help="output file ('-' for stdout)")
    _add_compile_options(c)
    c.set_defaults(func=cmd_compile)

    t = sub.add_parser("tune", help="time the candidate configurations on the GPU, write the tuning cache")
    t.add_argument("--types", nargs="+", default=["f16", "bf16"], help="operand types (default f16 bf16)")
    t.add_argument("--classes", nargs="+", default=["small", "medium", "large"],
                   choices=("small", "medium", "large"), help="size classes (1024^3, 4096^3, 8192^3)")
    t.add_argument("--sm", default="90")
    t.add_argument("--cache", required=True, help="the JSON cache to write (compile reads it via --tune-cache "
                   "or $TILEMMA_TUNE_CACHE)")
    t.add_argument("--iters", type=int, default=10, help="timed launches per configuration (default 10)")
    t.set_defaults(func=cmd_tune)

    r = sub.add_parser("run", help="compile, run on random inputs, compare with the reference")
    r.add_argument("file", help="input file ('-' for stdin)")
    r.add_argument("--on", choices=("auto", "gpu", "emulator"), default="auto")
    r.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="take argument NAME's values from a .npy array of its memref's shape and "
                   "element type (repeatable; the others stay random)")
    r.add_argument("--size", action="append", metavar="NAME=VALUE",
                   help="a size known at launch (M=37, N=..., K=...; or several, comma-separated) for a kernel "
                        "with ? sizes; sizes of --input arrays need none")
    r.add_argument("--allow-long", action="store_true",
                   help="run an emulation estimated to take more than 10 minutes (refused otherwise, saying "
                   "how long it would take)")
    r.add_argument("--save", metavar="DIR", help="write every output (D and an epilogue's other stores), each "
                   "shaped like its memref, to DIR/KERNEL.NAME.npy")
    _add_compile_options(r)
    r.set_defaults(func=cmd_run)

    k = sub.add_parser("cache", help="the compile cache: list its entries, or clear it",
                       description="The compile cache ($TILEMMA_CACHE_DIR, default ~/.cache/tilemma; "
                       "TILEMMA_CACHE_DIR= turns it off).")
    k.add_argument("cache_command", choices=("list", "clear"), help="list: entries, sizes, ages; clear: remove them")
    k.set_defaults(func=cmd_cache)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_reporting("tilemma", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
