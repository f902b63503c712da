"""The public Python API: tile IR in, kernels out, launched on the caller's own device buffers.

    kernels = tilemma.compile(text, sm="90")        # or an xDSL ModuleOp; CompileOptions as keywords
    k = kernels[0]; k.abi.to_json(); k.cubin()      # what the kernel expects; the assembled kernel
    k.launch(a, b, c, d, stream=s)                  # torch tensors, CuPy arrays, DLPack, int addresses

A kernel argument is a view of exactly its memref: the memref's shape and dtype, its strides in
elements (row-major unless the memref's layout says otherwise); a strided memref's `offset` is where
the view starts in the kernel's buffer, so the kernel gets the view's address minus the offset.
Sub-byte operands (si4, ui4, f4E2M1FN, i1) are packed (`runner.pack_memory`) and passed as the whole
buffer: contiguous uint8 of `Param.nbytes` bytes. Nothing is copied and nothing is synchronized.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, fields
from functools import cache, cached_property
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.runtime.abi import KernelABI, Param
from tilemma.compiler.driver.diagnostics import USER_ERRORS
from tilemma.compiler.driver.pipeline import CompiledKernel, CompileOptions, compile_module, compile_text

__all__ = ["CompileError", "LaunchError", "Kernel", "compile"]

#: Buffers must start on this boundary (allocators give 256): the kernels' vector and cp.async
#: accesses are aligned relative to their buffer's start.
ALIGNMENT = 16


class CompileError(ValueError):
    """The input or an option is wrong; the message is the located diagnostic (`file:line:col`,
    the source line and a caret where the input was text)."""


class LaunchError(ValueError):
    """An argument does not match the kernel's ABI; the message names the parameter and what
    was expected."""


def compile(module_or_text: str | ModuleOp, sm: str = "90", *, filename: str | None = None,
            **options: Any) -> list[Kernel]:
    """Compile tile IR (text, or an xDSL ModuleOp, which is cloned: the caller's is left as it is)
    for target `sm` ("90", "sm_90", "120a", ...). `options` are `CompileOptions` fields (ptx,
    f32_precision, warps, stages, ...); `filename` names text input in diagnostics. One Kernel per
    `func.func` of the input."""
    valid = [f.name for f in fields(CompileOptions) if f.name != "sm"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"compile() got unknown option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        opts = CompileOptions(sm=str(sm), **options)
        if isinstance(module_or_text, str):
            compiled = compile_text(module_or_text, filename or "<input>", opts)
        elif isinstance(module_or_text, ModuleOp):
            module = module_or_text.clone()
            _verify(module, filename or "<module>")
            compiled = compile_module(module, {}, filename or "<module>", opts)
        else:
            raise TypeError(f"compile() takes tile IR as text or an xDSL ModuleOp, not {type(module_or_text).__name__}")
    except USER_ERRORS as e:
        raise CompileError(str(e).strip()) from None
    return [Kernel(k) for k in compiled]


def _verify(module: ModuleOp, filename: str) -> None:
    """Verify a module built in Python: with no source positions, the message names the op."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, ValueError) as e:
            symbol = op.properties.get("sym_name")
            what = f"{op.name} @{symbol.data}" if isinstance(symbol, StringAttr) else op.name
            raise CompileError(f"{filename}: in {what}: {str(e).strip()}") from None


@dataclass(frozen=True)
class _Buffer:
    """What a launch needs to know of one argument, read without touching the GPU."""

    address: int  # of the view's first element
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None: C-contiguous
    dtype: str  # NumPy / ml_dtypes / torch name: float16, bfloat16, int8, ...
    device: int | None  # CUDA ordinal, None when only the driver can tell
    what: str  # how the caller passed it, for messages


class Kernel:
    """One compiled kernel: its PTX, launch shape and ABI, and a launcher."""

    def __init__(self, compiled: CompiledKernel):
        self.compiled = compiled

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
    def _wants(self) -> list[_Expected]:
        return [_expected(p) for p in self.abi.params]

    @cached_property
    def _cubin(self) -> bytes:
        from tilemma.compiler.runtime.ptxas import assemble

        return assemble(self.ptx, self.sm)

    def cubin(self) -> bytes:
        """The module assembled for the kernel's target (nvJitLink in process, else ptxas;
        `ptxas.PtxasError` quotes refused lines), computed once."""
        return self._cubin

    def sparsity_error(self, word: int) -> str | None:
        """What a checked sparse kernel's error word says after the launch: None (no error), else
        the first row and group of A that break the pattern."""
        from tilemma.compiler.driver.runner import sparsity_error

        at = self.abi.index("sparsity_error")
        if at is None:
            raise ValueError(f"{self.name} has no sparsity error word (its A is not checked sparse)")
        return sparsity_error(int(word), self.compiled.gemm, self.abi.params[at].init)  # type: ignore[arg-type]

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
        returns at once: synchronize the stream before reading results."""
        from tilemma.compiler.runtime import cuda_runtime

        params = self.abi.params
        if len(args) != len(params):
            raise LaunchError(f"{self.name} takes {len(params)} arguments "
                              f"({', '.join(p.name for p in params)}), got {len(args)}")
        handle = stream_handle(stream)
        buffers = [_read(arg, i, p, handle) for i, (arg, p) in enumerate(zip(args, params))]
        addresses = [_check(b, i, p, want) for i, (b, p, want) in enumerate(zip(buffers, params, self._wants))]
        device = _device(self.name, buffers, params)
        cuda_runtime.launch(self.ptx, self.name, self.grid, self.block, addresses,
                            shared_bytes=self.shared_bytes, stream=handle, device=device)


def stream_handle(stream: Any) -> int:
    """The CUstream handle, as an int, of what a caller may pass as a stream."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if isinstance(getattr(stream, attribute, None), int):
            return getattr(stream, attribute)
    if hasattr(stream, "getPtr"):  # an older cuda.bindings CUstream: int() is its handle
        return int(stream)
    raise TypeError(f"stream: {type(stream).__name__} is not a CUDA stream (a torch or CuPy stream, "
                    "a CUstream, or an int handle)")


def _where(i: int, p: Param) -> str:
    return f"argument {i} ({p.name.removeprefix('p_')})"


def _read(arg: Any, i: int, p: Param, stream: int) -> _Buffer | int:
    """The buffer an argument describes (an int stays an address)."""
    if isinstance(arg, (int, np.integer)) and not isinstance(arg, (bool, np.bool_)):
        if not 0 <= int(arg) < 1 << 64:
            raise LaunchError(f"{_where(i, p)}: address {arg} is not a 64-bit device address")
        return int(arg)
    if type(arg).__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        if arg.device.type != "cuda":
            raise LaunchError(f"{_where(i, p)}: a torch tensor on {arg.device}; the kernel needs "
                              "CUDA device memory (move it with .cuda())")
        return _Buffer(arg.data_ptr(), tuple(arg.shape), tuple(arg.stride()), str(arg.dtype).removeprefix("torch."),
                       arg.device.index, "torch tensor")
    if hasattr(arg, "__cuda_array_interface__"):
        return _from_cai(arg.__cuda_array_interface__, i, p)
    if hasattr(arg, "__dlpack__"):
        return _from_dlpack(arg, i, p, stream)
    raise LaunchError(f"{_where(i, p)}: {type(arg).__name__} is not a device buffer; pass a torch tensor, "
                      "a CuPy array, an object with __cuda_array_interface__ or __dlpack__, or an int address")


def _from_cai(cai: dict, i: int, p: Param) -> _Buffer:
    try:
        dtype = np.dtype(cai["typestr"])
    except TypeError:
        raise LaunchError(f"{_where(i, p)}: unknown __cuda_array_interface__ typestr {cai['typestr']!r}") from None
    strides = cai.get("strides")
    if strides is not None:
        if any(s % dtype.itemsize for s in strides):
            raise LaunchError(f"{_where(i, p)}: strides {tuple(strides)} bytes are not whole {dtype.name} elements")
        strides = tuple(s // dtype.itemsize for s in strides)
    return _Buffer(int(cai["data"][0]), tuple(cai["shape"]), strides, dtype.name, None, "__cuda_array_interface__")


# DLPack's DLTensor and DLManagedTensor (dlpack.h); codes 0 int, 1 uint, 2 float, 4 bfloat.
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_TYPES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


def _from_dlpack(arg: Any, i: int, p: Param, stream: int) -> _Buffer:
    device_type, device_id = arg.__dlpack_device__()
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise LaunchError(f"{_where(i, p)}: DLPack device type {device_type} is not CUDA memory")
    # The producer orders its pending work before our stream (1: DLPack's legacy default stream).
    capsule = arg.__dlpack__(stream=stream or 1)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))  # the capsule's destructor frees it
    shape = tuple(t.shape[d] for d in range(t.ndim))
    strides = tuple(t.strides[d] for d in range(t.ndim)) if t.strides else None
    kind = _DL_TYPES.get(t.code)
    if kind is None or t.lanes != 1:
        raise LaunchError(f"{_where(i, p)}: DLPack type code {t.code} ({t.bits} bits, {t.lanes} lanes) "
                          f"is not {p.dtype.name}; pass it as a torch tensor or a uint8 view")
    return _Buffer((t.data or 0) + t.byte_offset, shape, strides, f"{kind}{t.bits}", device_id, "DLPack tensor")


@dataclass(frozen=True)
class _Expected:
    """What a buffer for one parameter must look like (worked out once per parameter)."""

    dtypes: tuple[str, ...]  # its dtype, or raw bytes / words of the same size
    packed: bool  # sub-byte elements: a contiguous uint8 buffer of `nbytes`
    nbytes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset_bytes: int
    layout: str  # how to name `strides` in a message


@cache
def _expected(p: Param) -> _Expected:
    if p.is_words:
        dtypes: tuple[str, ...] = ("uint32", "int32")
    elif p.dtype.itemsize == 1 and p.dtype.kind not in "iu":
        dtypes = (p.dtype.name, "uint8")
    else:
        dtypes = (p.dtype.name,)
    layout = "row-major (contiguous)" if p.strides == _row_major(p.shape) else "the memref's layout"
    return _Expected(dtypes, p.packing == "bits", p.nbytes, p.shape, p.strides, p.offset * p.dtype.itemsize, layout)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def _check(b: _Buffer | int, i: int, p: Param, want: _Expected | None = None) -> int:
    """The address the kernel gets for this argument, after checking it against `p`."""
    if isinstance(b, int):
        return b
    want = want or _expected(p)
    where = f"{_where(i, p)}, a {b.what}"
    if b.dtype not in want.dtypes:
        raise LaunchError(f"{where}: dtype {b.dtype}, expected {' or '.join(want.dtypes)} ({p.element} elements)")
    strides = b.strides if b.strides is not None else _row_major(b.shape)
    if want.packed:
        contiguous = all(s == r for s, r, n in zip(strides, _row_major(b.shape), b.shape) if n > 1)
        if math.prod(b.shape) != want.nbytes or not contiguous:
            raise LaunchError(f"{where}: expected a contiguous uint8 buffer of {want.nbytes} bytes ({p.span} "
                              f"{p.element} elements packed, least significant bits first), got shape "
                              f"{b.shape}{'' if contiguous else ' not contiguous'}")
        base = b.address
    else:
        if b.shape != want.shape:
            raise LaunchError(f"{where}: shape {b.shape}, expected {want.shape}")
        if any(s != w for s, w, n in zip(strides, want.strides, want.shape) if n > 1):
            raise LaunchError(f"{where}: strides {strides} elements, expected {want.strides}: {want.layout}")
        base = b.address - want.offset_bytes
    if base % ALIGNMENT:
        raise LaunchError(f"{where}: its buffer starts at {base:#x}, not on a {ALIGNMENT}-byte boundary "
                          "as the kernel assumes (allocators give 256)")
    return base


def _device(kernel: str, buffers: list, params: tuple[Param, ...]) -> int:
    """The one CUDA device every buffer lives on (0 when only addresses were given)."""
    from tilemma.compiler.runtime import cuda_runtime

    found: dict[int, str] = {}
    for i, (b, p) in enumerate(zip(buffers, params)):
        if isinstance(b, int):
            continue
        device = b.device
        if device is None:
            try:
                device = cuda_runtime.pointer_device(b.address)
            except ValueError as e:
                raise LaunchError(f"{_where(i, p)}: {e}") from None
        found.setdefault(device, _where(i, p))
    if len(found) > 1:
        raise LaunchError(f"{kernel}: buffers on several devices: "
                          + ", ".join(f"{w} on cuda:{d}" for d, w in found.items()))
    return next(iter(found), 0)
