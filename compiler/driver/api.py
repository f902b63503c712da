"""The public Python API: tile IR in, kernels out, launched on the caller's own device buffers.

    kernels = tilemma.compile(text, sm="90")        # or an xDSL ModuleOp; CompileOptions as keywords
    k = kernels[0]; k.abi.to_json(); k.cubin()      # what the kernel expects; the assembled kernel
    k.launch(a, b, c, d, stream=s)                  # torch tensors, CuPy arrays, DLPack, int addresses
    k.emulate(a, b, c, d)                           # NumPy arrays, in the CPU emulator (no GPU)

A kernel argument is a view of exactly its memref: the memref's shape and dtype, its strides in
elements (row-major unless the memref's layout says otherwise); a strided memref's `offset` is where
the view starts in the kernel's buffer, so the kernel gets the view's address minus the offset.
Sub-byte operands (si4, ui4, f4E2M1FN, i1) are packed (`runner.pack_memory`) and passed as the whole
buffer: contiguous uint8 of `Param.nbytes` bytes. Nothing is copied and nothing is synchronized.
"""

from __future__ import annotations

import math
import re
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tilemma.compiler.driver.launch_args import (Buffer, Expected, LaunchError, Prepared, check, count_message,
                                                 expected, host_buffer, positions, read, row_major, stream_handle,
                                                 where, whole)
from tilemma.compiler.driver.variants import STRIDE_MULTIPLES, Bound, Variant, variant_for

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from tilemma.compiler.driver.pipeline import CompiledKernel
    from tilemma.compiler.runtime.abi import KernelABI

# Imported when first needed, not here: a compile served from the cache (compile_cache) needs
# neither xDSL nor the passes, and a fresh process should not pay for them.

__all__ = ["CompileError", "LaunchError", "Kernel", "compile"]

# Under the names tests and tilemma.torch use from here.
_check, _expected, _read = check, expected, read


class CompileError(ValueError):
    """The input or an option is wrong; the message is the located diagnostic (`file:line:col`,
    the source line and a caret where the input was text)."""


def compile(module_or_text: str | ModuleOp, sm: str = "90", *, filename: str | None = None,
            cache: bool = True, **options: Any) -> list[Kernel]:
    """Compile tile IR (text, or an xDSL ModuleOp, which is cloned: the caller's is left as it is)
    for target `sm` ("90", "sm_90", "120a", ...). `options` are `CompileOptions` fields (ptx,
    f32_precision, warps, stages, ...); `filename` names text input in diagnostics. One Kernel per
    `func.func` of the input.

    The result comes from the compile cache on disk when the same input was compiled with the same
    target and options before, by this tilemma (`compiler/driver/cache.py`; `$TILEMMA_CACHE_DIR`);
    `cache=False` compiles and leaves the cache alone.

    A keyword of the wrong type raises TypeError naming it (`warps="2x2"`, not 4 or (2, 2);
    `allow_slow=True`, not "no"); a `tune_cache` that does not exist raises ValueError."""
    options = _checked_options(sm, filename, cache, options)
    if isinstance(module_or_text, str):
        text = module_or_text
        build = lambda: _compile_text(text, sm, filename, options)  # noqa: E731
    else:
        from xdsl.dialects.builtin import ModuleOp

        if not isinstance(module_or_text, ModuleOp):
            raise TypeError(f"compile() takes tile IR as text or an xDSL ModuleOp, not {type(module_or_text).__name__}")
        _check_nesting(module_or_text, filename or "<module>")
        module = module_or_text.clone()
        _verify(module, filename or "<module>")
        build = lambda: _compile_module(module, sm, filename, options)  # noqa: E731
        text = _printed(module) if cache else None
    source = None if text is None else (text, str(sm), filename, cache, options)
    if not cache or text is None:
        return [Kernel(k, source) for k in build()]
    from tilemma.compiler.driver import cache as compile_cache

    kernels, _ = compile_cache.compile_cached(text, str(sm), options, build)
    return [Kernel(k, source) for k in kernels]


#: The type each option takes, and how a message says it (CompileOptions' fields but `sm`;
#: tests/test_hostile_input.py checks that the two agree). Checked here, without importing the
#: compiler: a compile served from the cache needs no xDSL.
_OPTION_TYPES: dict[str, tuple[type, str]] = {
    "ptx": (str, "a PTX ISA version as a string, such as '8.7' ('' for the newest)"),
    "f32_precision": (str, "one of 'exact', 'tf32', '3xtf32'"),
    "allow_slow": (bool, "True or False"),
    "warps": (str, "a string such as '2x2' ('' for the default)"),
    "warp_tile": (str, "a string such as '1x4' ('' for the default)"),
    "sparse_form": (str, "'ordered' or 'sp'"),
    "stages": (int, "an int: -1 (automatic), 0 or 2..5"),
    "stage_k": (int, "an int: 0 (automatic) or 16, 32, ..., 1024"),
    "split_k": (int, "an int: 0 (automatic), 1 (none) or up to 16, the CTAs sharing a tile's K"),
    "swizzle": (bool, "True or False"),
    "staged_stores": (bool, "True or False: a warpgroup kernel's accumulators stored through shared memory, as whole rows"),
    "pair_bytes": (bool, "True or False: an M-major 8-bit A or N-major B read by byte-pair ldmatrix .trans, "
                         "or transposed by the fill"),
    "wgmma": (bool, "True or False: each stage multiplied by warpgroups' wgmma.mma_async (sm_90a)"),
    "shared_transpose": (bool, "True or False: a warpgroup kernel's 8-bit N-major B transposed in shared memory by "
                               "a producer warpgroup (where it can), or by the fill through registers"),
    "transpose_first": (int, "an int: -1 (automatic), 0 (never) or 1: an 8-bit N-major B transposed into a K-major "
                              "workspace by a kernel of its own, launched first"),
    "producers": (int, "an int: -1 (automatic), 0 (none) or 4: a producer warpgroup fills a wgmma kernel's stages"),
    "tma": (int, "an int: -1 (automatic), 0 (cp.async) or 1: the producer warpgroup copies the stages with the TMA"),
    "cluster": (int, "an int: -1 (automatic), 1 (none) or 2: a TMA kernel's CTAs in pairs that share B's stages"),
    "persistent": (int, "an int: -1 (automatic), 0 (none) or N: a TMA kernel's N CTAs loop over its tiles"),
    "tune_cache": (str, "the path of a tuning cache, as a str or os.PathLike ('' for none)"),
    "stride_multiple": (int, "an int: 0 (what the IR says) or the multiple every ? stride is"),
    "size_multiple": (str, "'MxNxK' ('' for what the IR says): the multiples the ? sizes M, N, K are"),
    "plan_sizes": (str, "'MxNxK' ('' for a large problem's configuration): what ? sizes are configured for"),
    "attention_rows": (int, "an int: 0 (the default), 16 or 32 query rows a warp (attention)"),
    "attention_block_n": (int, "an int: 0 (the default), 32, 64 or 128 key rows a block (attention)"),
    "attention_q_shared": (str, "'yes' or 'no' ('' for the default): Q staged in shared memory (attention)"),
    "attention_ctas": (int, "an int: 0 (the default) or 1..8 CTAs an SM is to hold at once (attention)"),
}


def _checked_options(sm: Any, filename: Any, cache: Any, options: dict[str, Any]) -> dict[str, Any]:
    """`options` with their types checked (TypeError naming the option), `tune_cache` as a str
    path that exists (ValueError)."""
    import numbers
    import os

    from tilemma.compiler.driver.files import tune_cache_path

    def kind(value: Any) -> str:
        return f"{type(value).__name__} {value!r}"[:120]

    if not isinstance(sm, (str, int)) or isinstance(sm, bool):
        raise TypeError(f"compile(): sm must be a target such as '90' or 'sm_120a', got {kind(sm)}")
    if filename is not None and not isinstance(filename, str):
        raise TypeError(f"compile(): filename must be a str or None, got {kind(filename)}")
    if not isinstance(cache, bool):
        raise TypeError(f"compile(): cache must be True or False, got {kind(cache)}")
    unknown = sorted(set(options) - set(_OPTION_TYPES))
    if unknown:
        raise TypeError(f"compile() got unknown option(s) {', '.join(unknown)}; valid: {', '.join(_OPTION_TYPES)}")
    checked = dict(options)
    if "tune_cache" in checked and isinstance(checked["tune_cache"], os.PathLike):
        checked["tune_cache"] = os.fspath(checked["tune_cache"])
    for name, value in checked.items():
        want, what = _OPTION_TYPES[name]
        if want is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
            checked[name] = value = int(value)  # a NumPy integer too
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise TypeError(f"compile(): option {name} must be {what}, got {kind(value)}")
    plan = checked.get("plan_sizes", "")
    if plan and not re.fullmatch(r"[1-9]\d{0,9}x[1-9]\d{0,9}x[1-9]\d{0,9}", plan):
        raise ValueError(f"compile(): plan_sizes must be 'MxNxK' with positive sizes, got {plan!r}")
    sizes = checked.get("size_multiple", "")
    if sizes and not re.fullmatch(r"[1-9]\d{0,9}x[1-9]\d{0,9}x[1-9]\d{0,9}", sizes):
        raise ValueError(f"compile(): size_multiple must be 'MxNxK' with positive multiples, got {sizes!r}")
    if checked.get("stride_multiple", 0) not in STRIDE_MULTIPLES + (0,):
        raise ValueError(f"compile(): stride_multiple must be 0 or one of {', '.join(map(str, STRIDE_MULTIPLES))}, "
                         f"got {checked['stride_multiple']!r}")
    try:
        if "tune_cache" in checked:
            tune_cache_path(checked["tune_cache"], "compile(): tune_cache")
        else:  # the default, $TILEMMA_TUNE_CACHE, is refused as the CLI refuses it
            tune_cache_path(os.environ.get("TILEMMA_TUNE_CACHE", ""), "$TILEMMA_TUNE_CACHE")
    except ValueError as e:
        raise CompileError(str(e)) from None
    return checked


def _check_nesting(module: ModuleOp, filename: str) -> None:
    """Refuse a module whose regions nest deeper than text input may (`diagnostics.MAX_NESTING`
    brackets, two per region): cloning, verifying and printing it recurse per level. Walked
    without recursion."""
    from tilemma.compiler.driver.diagnostics import MAX_NESTING

    limit = MAX_NESTING // 2
    stack = [(module, 0)]
    while stack:
        op, depth = stack.pop()
        for region in op.regions:
            if depth + 1 > limit:
                raise CompileError(f"{filename}: {op.name}: regions nested more than {limit} deep; tilemma takes "
                                   "at most that")
            stack.extend((inner, depth + 1) for block in region.blocks for inner in block.ops)


def _options(sm: str, options: dict):
    from tilemma.compiler.driver.pipeline import CompileOptions

    valid = [f for f in CompileOptions.__dataclass_fields__ if f != "sm"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"compile() got unknown option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    return CompileOptions(sm=str(sm), **options)


def _compile_text(text: str, sm: str, filename: str | None, options: dict) -> list[CompiledKernel]:
    from tilemma.compiler.driver.diagnostics import USER_ERRORS
    from tilemma.compiler.driver.pipeline import compile_text

    opts = _options(sm, options)
    try:
        return compile_text(text, filename or "<input>", opts)
    except USER_ERRORS as e:
        raise CompileError(str(e).strip()) from None
    except RecursionError:  # past what the nesting limits catch: still the input's
        raise CompileError("the input nests too deeply for tilemma (Python's recursion limit)") from None


def _compile_module(module: ModuleOp, sm: str, filename: str | None, options: dict) -> list[CompiledKernel]:
    from tilemma.compiler.driver.diagnostics import USER_ERRORS
    from tilemma.compiler.driver.pipeline import compile_module

    opts = _options(sm, options)
    try:
        return compile_module(module, {}, filename or "<module>", opts)
    except USER_ERRORS as e:
        raise CompileError(str(e).strip()) from None
    except RecursionError:  # past what the nesting limits catch: still the input's
        raise CompileError("the input nests too deeply for tilemma (Python's recursion limit)") from None


def _printed(module: ModuleOp) -> str | None:
    """The module's text, what the compile cache keys a ModuleOp by (None: it cannot be printed,
    so it is compiled without the cache)."""
    try:
        return str(module)
    except Exception:
        return None


def _verify(module: ModuleOp, filename: str) -> None:
    """Verify a module built in Python: with no source positions, the message names the op."""
    from xdsl.dialects.builtin import StringAttr
    from xdsl.utils.exceptions import VerifyException

    from tilemma.compiler.driver.diagnostics import verify_one

    for op in module.walk():
        try:
            verify_one(op)
        except (VerifyException, ValueError) as e:
            symbol = op.properties.get("sym_name")
            what = f"{op.name} @{symbol.data}" if isinstance(symbol, StringAttr) else op.name
            raise CompileError(f"{filename}: in {what}: {str(e).strip()}") from None



class Kernel:
    """One compiled kernel: its PTX, launch shape and ABI, and a launcher.

    A kernel with `?` sizes (`dynamic`) serves every size: `launch` and `emulate` read the sizes
    and strides from the buffers, check them (`KernelABI.bind`) and run the variant for their
    class. The class is the multiple their `?` strides and contiguous `?` sizes share (16 bytes
    of the operands' elements, or anything): one variant each, compiled at its first use (and
    kept in the compile cache), never again for a new size of a class it has (`bind`)."""

    def __init__(self, compiled: CompiledKernel, source: tuple | None = None, scalars: tuple[int, ...] = ()):
        self.compiled = compiled  # a pipeline.CompiledKernel, or a cache.CachedKernel
        self._source = source  # (text, sm, filename, cache, options): to compile a specialised variant
        self.scalars = scalars  # a bound kernel's size parameters (the values of `abi.symbols`)
        self._bound: dict[tuple, Kernel] = {}
        self._variants: dict[Variant, Kernel] = {}

    dynamic = property(lambda self: self.abi.dynamic, doc="whether sizes are parameters, known at launch")

    def bind(self, shapes: list[tuple[int, ...]], strides: list[tuple[int, ...]]) -> Kernel:
        """The kernel that runs on buffers of these shapes and element strides (one each per
        parameter): for a kernel with `?` sizes, the variant of their class with its ABI bound
        (static shapes, the grid, `scalars`); a static kernel itself. LaunchError where they do
        not fit the kernel."""
        if not self.dynamic:
            return self
        key = (tuple(map(tuple, shapes)), tuple(map(tuple, strides)))
        bound = self._bound.get(key)
        if bound is None:
            variant = self._variant(*key)
            try:
                abi, values = variant.abi.bind(*key)
            except ValueError as e:
                raise LaunchError(f"{self.name}: {e}") from None
            bound = Kernel(Bound(variant.compiled, abi), scalars=values)
            if len(self._bound) > 256:  # a bounded memo: shapes of one model, not every size ever seen
                self._bound.clear()
            self._bound[key] = bound
        return bound

    def _variant(self, shapes, strides) -> Kernel:
        """The variant for buffers of these shapes and strides (`variants.variant_for`), compiled
        at its first use; this kernel where it serves them already."""
        variant = variant_for(self.abi, shapes, strides)
        if variant is None:
            return self
        if variant not in self._variants:
            if self._source is None:
                return self
            text, sm, filename, cache, options = self._source
            kernels = compile(text, sm, filename=filename, cache=cache, **{**options, **variant._asdict()})
            self._variants[variant] = next(k for k in kernels if k.name == self.name)
        return self._variants[variant]

    name = property(lambda self: self.compiled.name)
    ptx = property(lambda self: self.compiled.ptx, doc="the PTX module holding this kernel")
    abi: KernelABI = property(lambda self: self.compiled.abi)  # type: ignore[assignment]
    grid = property(lambda self: self.abi.grid)
    block = property(lambda self: self.abi.block)
    shared_bytes = property(lambda self: self.abi.shared_bytes, doc="dynamic shared memory per CTA")
    sm = property(lambda self: self.abi.sm)
    instruction = property(lambda self: self.abi.instruction)

    def __repr__(self) -> str:
        return f"<Kernel {self.name}: {self.instruction}, grid {self.grid}, block {self.block}>"

    @cached_property
    def _wants(self) -> list[Expected]:
        return [expected(p) for p in self.abi.params]

    @cached_property
    def _cubin(self) -> bytes:
        from tilemma.compiler.driver import cache

        return cache.cubin(self.ptx, self.sm)

    def cubin(self) -> bytes:
        """The module assembled for the kernel's target (nvJitLink in process, else ptxas;
        `ptxas.PtxasError` quotes refused lines), computed once (and kept in the compile cache)."""
        return self._cubin

    def sparsity_error(self, word: int) -> str | None:
        """What a checked sparse kernel's error word says after the launch: None (no error), else
        the first row and group of A that break the pattern."""
        from tilemma.compiler.driver.runner import sparsity_error

        at = self.abi.index("sparsity_error")
        if at is None:
            raise ValueError(f"{self.name} has no sparsity error word (its A is not checked sparse)")
        return sparsity_error(int(word), self.compiled.gemm, self.abi.params[at].init)  # type: ignore[arg-type]

    @cached_property
    def _launch(self) -> Prepared:
        if self.dynamic:  # its grid and size parameters are a bound kernel's (`bind`)
            raise LaunchError(f"{self.name} has sizes known only at launch: launch_unchecked takes the kernel "
                              "that `bind(shapes, strides)` returns for the buffers' sizes")
        return Prepared(self)

    def launch(self, *args: Any, stream: Any = None) -> None:
        """Queue the kernel on the caller's buffers, one per `abi.params` entry, in order: torch
        tensors, CuPy arrays, objects with `__cuda_array_interface__` or `__dlpack__`, or ints
        (device addresses of the buffer start, not checked). Each is checked against its parameter
        (shape, dtype, strides, device, 16-byte alignment) before anything runs; a mismatch raises
        LaunchError. A checked sparse kernel's `sparsity_error` parameter takes a one-element
        uint32 (or int32) buffer the caller sets to that parameter's `init` (0xFFFFFFFF: no error)
        before the launch and reads afterwards (decode it with `sparsity_error`).

        `stream`: a torch or CuPy stream, a `cuda.bindings` CUstream, an object with
        `__cuda_stream__`, or an int handle; None means the legacy default stream (handle 0).
        Runs in the primary context of the buffers' device (device 0 if only ints are given) and
        returns at once: synchronize the stream before reading results.

        Host cost: the first launch on a device loads the module; after that, torch tensors and
        ints are checked in O(1) each against what was worked out once per kernel (a few
        microseconds); other kinds of buffers take the general reading, as do tensors that differ
        from the ABI (for the message). Launches may be captured in a CUDA graph."""
        prepared = self.__dict__.get("_launch")  # made at a static kernel's first launch
        if prepared is None:
            if self.dynamic:  # the kernel bound to these sizes: by the tensors' shapes and strides if seen
                try:
                    bound = self._bound.get((tuple(a.shape for a in args), tuple(a.stride() for a in args)))
                except (AttributeError, TypeError):
                    bound = None
                return (bound or self._bind_buffers(args, stream)).launch(*args, stream=stream)
            prepared = self._launch
        handle = 0 if stream is None else stream_handle(stream)
        with prepared.lock:
            if not prepared.fast(args):
                prepared.checked(args, handle)
            if len(args) < prepared.n:  # the scratch (split-K's, B's copy): the launcher's own
                prepared.own_scratch(handle)
            prepared.fill_maps()
            prepared.launch(prepared.device, handle)

    def emulate(self, *arrays: Any, arch: str | None = None, max_macs: int | None = None,
                ahead: str = "leaders") -> None:
        """Run the kernel's PTX in the CPU emulator (`tilemma.compiler.verify.emulator`) on NumPy
        arrays: `launch` for a machine without a GPU.

        One array per `abi.params` entry, in order, each what `launch` takes for that parameter:
        its `shape` and `dtype` (`Param.dtype`: ml_dtypes' bfloat16 and float8_* for bf16 and fp8,
        uint8 codes for fp6 and ue4m3, float32 for tf32, uint32 for words; launch's alternatives,
        uint8 for one-byte floats and int32 for words, pass too), a parameter packed in `bits`
        (`Param.packing`: si4, ui4, f4E2M1FN, i1) its packed bytes, a uint8 array of `nbytes`
        (`runner.pack_memory` packs them). They are checked as `launch` checks them: a wrong count,
        type, dtype or shape raises LaunchError naming the parameter, before anything runs. The
        one difference is strides: an array is copied into its memref's layout (`strides`,
        `offset`; gaps hold zeros), so a strided parameter takes its logical view in any NumPy
        layout. A checked sparse kernel's `sparsity_error` takes a one-element array set to its
        `init`, read afterwards with `sparsity_error`, as with `launch`.

        Like `launch`, it returns None and leaves the results in the caller's arrays, so code
        written for `launch` runs here with NumPy arrays in place of device buffers: the
        parameters the kernel writes (`Param.is_output`: D, an epilogue's other outputs, the error
        word) get their final contents in place (elements the kernel does not store keep theirs;
        they must be writable arrays); the others are read, never written.

        `arch`: the GPU whose tensor-core arithmetic mma follows (`mma_arith.MODELS`); by default
        the kernel's target (`sm`) where the emulator has a model of its mma there, else sm_90
        (`mma_arith.DEFAULT_ARCH`). Approximate instructions (ex2.approx, tanh.approx, ...) are
        modelled within the ISA's bound, not bit for bit. A GEMM of more than `max_macs`
        multiply-adds (batch x M x N x K; default `emulator.QUICK_MACS`, 2**26, up to which the
        runner checks a GPU against the emulator: about 15 s on two cores) raises LaunchError
        instead of running for minutes; pass a larger `max_macs` to wait for it. `ahead`: in a
        warp-specialized kernel, which warpgroups (and cluster ranks) the emulator runs ahead,
        "leaders" (each role's first, rank 0) or "laggards" (the others): a kernel right on a GPU
        is right with either."""
        import numpy as np

        from tilemma.compiler.verify import emulator

        params = self.abi.params
        scratch = self.abi.scratch_buffers()
        if scratch and len(arrays) == len(params) - len(scratch):  # split-K's, B's copy: provided here
            arrays = (*arrays, *(b.reshape(params[i].shape) for i, b in scratch))  # (B's copy: K x N)
        if len(arrays) != len(params):
            raise LaunchError(count_message(self, len(arrays)))
        if self.dynamic:
            for i, (x, p) in enumerate(zip(arrays, params)):
                if not isinstance(x, np.ndarray):
                    raise LaunchError(f"{where(i, p)}: {type(x).__name__} is not a NumPy array (emulate takes "
                                      "NumPy arrays; launch takes device buffers)")
            # each array is copied into its memref's layout, its `?` strides packed
            strides = [p.packed_strides(x.shape) for x, p in zip(arrays, params)]
            return self.bind([x.shape for x in arrays], strides).emulate(*arrays, arch=arch, max_macs=max_macs)
        wants = self._wants
        for i, (x, p, want) in enumerate(zip(arrays, params, wants)):
            if not isinstance(x, np.ndarray):
                raise LaunchError(f"{where(i, p)}: {type(x).__name__} is not a NumPy array (emulate takes "
                                  "NumPy arrays; launch takes device buffers)")
            check(Buffer(0, x.shape, None, x.dtype.name, None, "NumPy array"), i, p, want, host=True)
            if p.is_output and not x.flags.writeable:
                raise LaunchError(f"{where(i, p)}, a NumPy array: read-only, but the kernel writes it "
                                  "(its results are left in the array)")
        limit = emulator.QUICK_MACS if max_macs is None else max_macs
        macs = self._macs_over(limit)
        if macs is not None:
            raise LaunchError(f"{self.name}: {macs} multiply-adds (batch x M x N x K) are more than the "
                              f"emulator runs quickly (max_macs={limit}); pass a larger max_macs to emulate "
                              "it anyway")
        arch = arch or self._emulator_arch()
        buffers = [host_buffer(x, p, want) for x, p, want in zip(arrays, params, wants)]
        buffers = self.abi.after_prologue(buffers, lambda entry, grid, block, values: self._program(
            arch, entry).run(grid, block, values))
        outs = self._program(arch).run(self.grid, self.block, self.abi.arguments(buffers, self.scalars),
                                       shared_bytes=self.shared_bytes, ahead=ahead)
        for x, p, want, out in zip(arrays, params, wants, outs):
            if p.is_output:
                x[...] = out.reshape(x.shape) if whole(p, want) else out[positions(p)]

    def _bind_buffers(self, args: tuple, stream: Any) -> Kernel:
        """`bind` to device buffers: their shapes and strides, read as `launch` reads them."""
        if len(args) != len(self.abi.params):
            raise LaunchError(count_message(self, len(args)))
        handle = 0 if stream is None else stream_handle(stream)
        shapes, strides = [], []
        for i, (arg, p) in enumerate(zip(args, self.abi.params)):
            b = read(arg, i, p, handle)
            if isinstance(b, int):
                raise LaunchError(f"{where(i, p)}: an address does not say its size; a kernel with ? sizes takes "
                                  "buffers (torch tensors, CuPy arrays, ...), or bind() first and launch the result")
            shapes.append(b.shape)
            strides.append(b.strides if b.strides is not None else row_major(b.shape))
        return self.bind(shapes, strides)

    def _emulator_arch(self) -> str:
        """The kernel's target where the emulator models its mma's arithmetic there, else the
        emulator's default (sm_90)."""
        from tilemma.compiler.core import isa
        from tilemma.compiler.verify import mma_arith

        sm = self.sm
        if not sm or not self.instruction or self.instruction.startswith("wgmma"):  # wgmma: sm_90's alone
            return mma_arith.DEFAULT_ARCH
        v = isa.parse_opcode(self.instruction)
        if v.dtype in ("s32", "f64"):  # exact arithmetic: the same on every target
            return sm
        try:  # as the emulator picks a model (`emulator.mma`): variants sm lacks run as sm_120a's
            mma_arith.model_for(sm if v.supported_on(sm) else "sm_120a", v.atype, v.kind, v.shape)
        except ValueError:
            return mma_arith.DEFAULT_ARCH
        return sm

    def _program(self, arch: str, entry: str | None = None) -> Any:
        """The kernel (or `entry` of its module, one it runs first) decoded for the emulator with
        `arch`'s arithmetic (once per arch)."""
        programs = self.__dict__.setdefault("_programs", {})
        key = (arch, entry or self.name)
        if key not in programs:
            from tilemma.compiler.verify import emulator

            programs[key] = emulator.compile_entry(self.ptx, key[1], arch)
        return programs[key]

    def _macs_over(self, limit: float) -> int | None:
        """The GEMM's multiply-adds (batch x M x N x K) if they exceed `limit`, else None. First a
        bound from the ABI's shapes: every output holds at least batch x M x N elements, and K is
        at most a dimension of A (of the values of a compressed A: twice one) and of B. Only a
        bound over `limit` reads the exact count from what the kernel computes (`compiled.gemm`,
        which a kernel served from the compile cache recompiles its source for)."""
        params = self.abi.params
        outputs = [math.prod(p.shape) for p in params if "d" in p.roles]
        a = next((p for p in params if "a" in p.roles), None)
        b = next((p for p in params if "b" in p.roles), None)
        if outputs and a is not None and b is not None:
            sparse = 2 if self.instruction.startswith("mma.sp") else 1
            if min(outputs) * min(max(a.shape) * sparse, max(b.shape)) <= limit:
                return None
        if self.scalars:  # bound from `?` sizes: batch x M x N from D, K from A (M x K)
            macs = min(outputs) * a.shape[-1] if outputs and a is not None else 0
            return macs if macs > limit else None
        g = self.compiled.gemm
        macs = g.batch * g.m * g.n * g.k
        return macs if macs > limit else None

    def launch_unchecked(self, *addresses: int, stream: int = 0, device: int = 0) -> None:
        """`launch` with the checks left out, for hot loops: one device address (int) per
        parameter (the view's address minus its memref offset, as `launch` computes it), `stream`
        an int handle, `device` the ordinal. Only the argument count is checked: a wrong address
        is a fault on the device, not an error here."""
        prepared = self.__dict__.get("_launch") or self._launch
        if len(addresses) != prepared.n:
            raise LaunchError(count_message(self, len(addresses)))
        with prepared.lock:
            slots = prepared.slots
            for i, address in enumerate(addresses):
                slots[i] = address
            prepared.fill_maps()
            prepared.launch(device, stream)
