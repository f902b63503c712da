"""Reading and checking a kernel's launch arguments: what a torch tensor, CuPy array, DLPack or
`__cuda_array_interface__` object, or int address describes (`read`), whether it is the buffer the
kernel's ABI says (`check`, LaunchError naming the parameter), and the parameter slots a launch
fills (`Prepared`, with the O(1) path for torch tensors). Apart from the API so that the buffer
protocols and the launch's hot path are one concern, free of compiling."""

from __future__ import annotations

import ctypes
import math
import sys
import threading
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from tilemma.compiler.runtime.abi import SCRATCH_ROLES
from tilemma.compiler.runtime.tensor_map import MapSlots, TensorMapError

if TYPE_CHECKING:
    from tilemma.compiler.driver.api import Kernel
    from tilemma.compiler.runtime.abi import Param

#: Buffers must start on this boundary (allocators give 256): the kernels' vector and cp.async
#: accesses are aligned relative to their buffer's start.
ALIGNMENT = 16


class LaunchError(ValueError):  # raised here; public as tilemma.LaunchError (api re-exports it)
    """An argument does not match the kernel's ABI; the message names the parameter and what
    was expected. `Kernel.emulate` also raises it for a problem too large to emulate quickly."""


@dataclass(frozen=True)
class Buffer:
    """What a launch needs to know of one argument, read without touching the GPU."""

    address: int  # of the view's first element
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None: C-contiguous
    dtype: str  # NumPy / ml_dtypes / torch name: float16, bfloat16, int8, ...
    device: int | None  # CUDA ordinal, None when only the driver can tell
    what: str  # how the caller passed it, for messages


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


def where(i: int, p: Param) -> str:
    return f"argument {i} ({p.name.removeprefix('p_')})"


def count_message(kernel: Kernel, got: int) -> str:
    params = kernel.abi.params
    scratch = [p.name for p in params if set(SCRATCH_ROLES) & set(p.roles)]
    also = f" (or {len(params) - len(scratch)}, without the scratch {', '.join(scratch)})" if scratch else ""
    return f"{kernel.name} takes {len(params)} arguments{also} ({', '.join(p.name for p in params)}), got {got}"


def read(arg: Any, i: int, p: Param, stream: int) -> Buffer | int:
    """The buffer an argument describes (an int stays an address)."""
    import numpy as np

    if isinstance(arg, (int, np.integer)) and not isinstance(arg, (bool, np.bool_)):
        if not 0 <= int(arg) < 1 << 64:
            raise LaunchError(f"{where(i, p)}: address {arg} is not a 64-bit device address")
        return int(arg)
    if type(arg).__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        if arg.device.type != "cuda":
            raise LaunchError(f"{where(i, p)}: a torch tensor on {arg.device}; the kernel needs "
                              "CUDA device memory (move it with .cuda())")
        return Buffer(arg.data_ptr(), tuple(arg.shape), tuple(arg.stride()), str(arg.dtype).removeprefix("torch."),
                       arg.device.index, "torch tensor")
    if hasattr(arg, "__cuda_array_interface__"):
        return _from_cai(arg.__cuda_array_interface__, i, p)
    if hasattr(arg, "__dlpack__"):
        return _from_dlpack(arg, i, p, stream)
    raise LaunchError(f"{where(i, p)}: {type(arg).__name__} is not a device buffer; pass a torch tensor, "
                      "a CuPy array, an object with __cuda_array_interface__ or __dlpack__, or an int address")


def _from_cai(cai: dict, i: int, p: Param) -> Buffer:
    import numpy as np

    try:
        dtype = np.dtype(cai["typestr"])
    except TypeError:
        raise LaunchError(f"{where(i, p)}: unknown __cuda_array_interface__ typestr {cai['typestr']!r}") from None
    strides = cai.get("strides")
    if strides is not None:
        if any(s % dtype.itemsize for s in strides):
            raise LaunchError(f"{where(i, p)}: strides {tuple(strides)} bytes are not whole {dtype.name} elements")
        strides = tuple(s // dtype.itemsize for s in strides)
    return Buffer(int(cai["data"][0]), tuple(cai["shape"]), strides, dtype.name, None, "__cuda_array_interface__")


# DLPack's DLTensor and DLManagedTensor (dlpack.h); codes 0 int, 1 uint, 2 float, 4 bfloat.
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13
_DL_TYPES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


def _from_dlpack(arg: Any, i: int, p: Param, stream: int) -> Buffer:
    device_type, device_id = arg.__dlpack_device__()
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        hint = " (Kernel.emulate runs the kernel on NumPy arrays, in the CPU emulator)" if device_type == _DL_CPU else ""
        raise LaunchError(f"{where(i, p)}: DLPack device type {device_type} is not CUDA memory{hint}")
    # The producer orders its pending work before our stream (1: DLPack's legacy default stream).
    capsule = arg.__dlpack__(stream=stream or 1)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))  # the capsule's destructor frees it
    shape = tuple(t.shape[d] for d in range(t.ndim))
    strides = tuple(t.strides[d] for d in range(t.ndim)) if t.strides else None
    kind = _DL_TYPES.get(t.code)
    if kind is None or t.lanes != 1:
        raise LaunchError(f"{where(i, p)}: DLPack type code {t.code} ({t.bits} bits, {t.lanes} lanes) "
                          f"is not {p.dtype.name}; pass it as a torch tensor or a uint8 view")
    return Buffer((t.data or 0) + t.byte_offset, shape, strides, f"{kind}{t.bits}", device_id, "DLPack tensor")


@dataclass(frozen=True)
class Expected:
    """What a buffer for one parameter must look like (worked out once per parameter)."""

    dtypes: tuple[str, ...]  # its dtype, or raw bytes / words of the same size
    packed: bool  # sub-byte elements: a contiguous uint8 buffer of `nbytes`
    nbytes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset_bytes: int
    layout: str  # how to name `strides` in a message


@cache
def expected(p: Param) -> Expected:
    if p.is_words:
        dtypes: tuple[str, ...] = ("uint32", "int32")
    elif p.dtype.itemsize == 1 and p.dtype.kind not in "iu":
        dtypes = (p.dtype.name, "uint8")
    else:
        dtypes = (p.dtype.name,)
    layout = "row-major (contiguous)" if p.strides == row_major(p.shape) else "the memref's layout"
    return Expected(dtypes, p.packing == "bits", p.nbytes, p.shape, p.strides, p.offset * p.dtype.itemsize, layout)


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def check(b: Buffer | int, i: int, p: Param, want: Expected | None = None, *, host: bool = False) -> int:
    """The address the kernel gets for this argument, after checking it against `p`. `host`: a
    host array `Kernel.emulate` copies into the kernel's layout: dtype and shape only (no
    strides, contiguity or alignment to check; returns 0)."""
    if isinstance(b, int):
        return b
    want = want or expected(p)
    argument = f"{where(i, p)}, a {b.what}"
    if b.dtype not in want.dtypes:
        raise LaunchError(f"{argument}: dtype {b.dtype}, expected {' or '.join(want.dtypes)} ({p.element} elements)")
    strides = b.strides if b.strides is not None else row_major(b.shape)
    if want.packed:
        contiguous = host or all(s == r for s, r, n in zip(strides, row_major(b.shape), b.shape) if n > 1)
        if math.prod(b.shape) != want.nbytes or not contiguous:
            raise LaunchError(f"{argument}: expected a contiguous uint8 buffer of {want.nbytes} bytes ({p.span} "
                              f"{p.element} elements packed, least significant bits first), got shape "
                              f"{b.shape}{'' if contiguous else ' not contiguous'}")
        base = b.address
    else:
        if b.shape != want.shape:
            raise LaunchError(f"{argument}: shape {b.shape}, expected {want.shape}")
        if not host and any(s != w for s, w, n in zip(strides, want.strides, want.shape) if n > 1):
            raise LaunchError(f"{argument}: strides {strides} elements, expected {want.strides}: {want.layout}")
        base = b.address - want.offset_bytes
    if host:
        return 0
    if base % ALIGNMENT:
        raise LaunchError(f"{argument}: its buffer starts at {base:#x}, not on a {ALIGNMENT}-byte boundary "
                          "as the kernel assumes (allocators give 256)")
    return base


def whole(p: Param, want: Expected) -> bool:
    """Whether a host array's elements, in C order, are the kernel's buffer as it is (packed
    bytes, or a row-major memref at offset 0)."""
    return want.packed or (p.offset == 0 and p.strides == row_major(p.shape))


def positions(p: Param) -> Any:
    """The buffer position of each element of `p`'s memref, in its shape."""
    from tilemma.compiler.core.memref_layout import StridedLayout

    return StridedLayout(p.shape, p.strides, p.offset).positions()


def host_buffer(x: Any, p: Param, want: Expected) -> Any:
    """The buffer the emulator gets for a host array: its values at their places in the memref's
    layout (`Param.span` elements; gaps zero), in native byte order. The emulator copies it."""
    import numpy as np

    dtype = x.dtype.newbyteorder("=")
    if whole(p, want):
        return np.ascontiguousarray(x, dtype=dtype).reshape(-1)
    buffer = np.zeros(p.span, dtype)
    buffer[positions(p)] = x
    return buffer


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
                raise LaunchError(f"{where(i, p)}: {e}") from None
        found.setdefault(device, where(i, p))
    if len(found) > 1:
        raise LaunchError(f"{kernel}: buffers on several devices: "
                          + ", ".join(f"{w} on cuda:{d}" for d, w in found.items()))
    return next(iter(found), 0)


class Prepared:
    """What a kernel's launches share, worked out at its first launch: the expected buffers, the
    parameter buffer the driver reads (one 64-bit slot per pointer and size parameter, then a
    128-byte slot per tensor map, `maps`, with the array of pointers to the slots that
    cuLaunchKernel takes, all built once and rewritten in place), per-parameter tuples for the
    O(1) torch check, and the loaded function per device. `lock` guards the slots between writing
    them and the launch (the driver copies them at the launch). After `fast` or `checked` (and
    `own_scratch`) wrote the pointer slots, `fill_maps` encodes the maps for them."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.params = kernel.abi.params
        self.n = len(self.params)
        # a split-K kernel's scratch (the last parameters): given by the caller, or this launcher's
        # own per device and stream (`cuda_runtime.Scratch`) when the caller gives only the others
        self.scratch = [i for i, p in enumerate(self.params) if set(SCRATCH_ROLES) & set(p.roles)]
        self.user_n = self.n - len(self.scratch)
        self._scratch: dict[tuple[int, int], Any] = {}
        self.wants = [expected(p) for p in self.params]
        self.slots = (ctypes.c_uint64 * max(1, self.n + len(kernel.scalars)))()
        for i, v in enumerate(kernel.scalars):  # size parameters (.u32: the slot's low word)
            self.slots[self.n + i] = v
        # tensor maps (the last parameters), encoded for the pointer slots of their arguments
        self.maps = MapSlots(kernel.abi.tensor_maps) if kernel.abi.tensor_maps else None
        self.lock = threading.Lock()
        self.device = 0
        self._launchers: dict[Any, Any] = {}  # per device, and per (prologue entry, device)
        self.torch: tuple | None = None  # (torch.Tensor, per-parameter (dtypes, shape, strides, offset bytes))
        if "torch" in sys.modules:
            self._with_torch(sys.modules["torch"])

    def _with_torch(self, torch: Any) -> None:
        rows = []
        for want in self.wants:
            dtypes = frozenset(t for t in (getattr(torch, name, None) for name in want.dtypes)
                               if isinstance(t, torch.dtype))
            if want.packed:
                rows.append((dtypes, (want.nbytes,), (1,), 0))
            else:
                rows.append((dtypes, want.shape, want.strides, want.offset_bytes))
        self.torch = (torch.Tensor, tuple(rows))

    def own_scratch(self, handle: int) -> None:
        """The scratch slots pointed at this launcher's scratch for the device and stream: made at
        the first launch on them, outside a CUDA graph capture (allocating and zeroing are not
        stream work). A capture on a stream without one takes the device's from another stream
        (the graph's replays then share it with that stream's launches: do not run both at once)."""
        key = (self.device, handle)
        scratch = self._scratch.get(key)
        if scratch is None:
            from tilemma.compiler.runtime import cuda_runtime

            if cuda_runtime.stream_capturing(handle):
                scratch = next((s for (device, _), s in self._scratch.items() if device == self.device), None)
                if scratch is None:
                    raise LaunchError(
                        f"{self.kernel.name}: the first launch on a device of a kernel with scratch cannot be "
                        "captured in a CUDA graph (its scratch is allocated then): launch it once before capturing, "
                        f"or pass {', '.join(self.params[i].name.removeprefix('p_') for i in self.scratch)} "
                        "(counters zeroed) yourself")
            else:
                ps = [self.params[i] for i in self.scratch]
                scratch = cuda_runtime.Scratch([p.nbytes for p in ps], [p.init is not None for p in ps], self.device)
            self._scratch[key] = scratch
        for i, address in zip(self.scratch, scratch.addresses):
            self.slots[i] = address

    def fast(self, args: tuple) -> bool:
        """Write the slots for arguments that are all exactly what the ABI says (torch tensors on
        one device, ints): True; False at the first that needs `checked` (nothing launched)."""
        if len(args) != self.n and (len(args) != self.user_n or not self.scratch):
            return False
        tensor, rows = self.torch or (None, ())
        slots, device = self.slots, -1
        for i, a in enumerate(args):
            kind = type(a)
            if kind is int:
                if not 0 <= a < 18446744073709551616:
                    return False
                slots[i] = a
                continue
            if kind is not tensor:
                return False
            dtypes, shape, strides, offset = rows[i]
            if a.dtype not in dtypes or a.shape != shape or a.stride() != strides:
                return False
            on = a.get_device()
            address = a.data_ptr() - offset
            if on < 0 or address & (ALIGNMENT - 1) or (device >= 0 and on != device):
                return False
            device = on
            slots[i] = address
        self.device = device if device >= 0 else 0
        return True

    def checked(self, args: tuple, handle: int) -> None:
        """Every argument read and checked as the message needs (LaunchError on a mismatch),
        then the slots written."""
        if len(args) != self.n and (len(args) != self.user_n or not self.scratch):
            raise LaunchError(count_message(self.kernel, len(args)))
        buffers = [read(arg, i, p, handle) for i, (arg, p) in enumerate(zip(args, self.params))]
        addresses = [check(b, i, p, want) for i, (b, p, want) in enumerate(zip(buffers, self.params, self.wants))]
        self.device = _device(self.kernel.name, buffers, self.params[:len(buffers)])
        if self.torch is None and "torch" in sys.modules:
            self._with_torch(sys.modules["torch"])
        for i, address in enumerate(addresses):
            self.slots[i] = address

    def fill_maps(self) -> None:
        """The tensor maps encoded for the addresses now in the slots (each only where its
        argument's address changed since the last launch); LaunchError where the TMA refuses one
        (an address `launch_unchecked` was given that is not 16-byte aligned)."""
        if self.maps is not None:
            try:
                self.maps.fill(self.slots)
            except TensorMapError as e:
                raise LaunchError(f"{self.kernel.name}: {e}") from None

    def launch(self, device: int, stream: int) -> None:
        """Queue the kernels the kernel runs first (`KernelABI.prologue`, on their arguments' slots)
        and then the kernel, with the values now in the slots."""
        for first in self.kernel.abi.prologue:
            launcher, slots = self._first(first, device)
            for j, i in enumerate(first.args):
                slots[j] = self.slots[i]
            launcher.launch(stream)
        self.launcher(device).launch(stream)

    def _first(self, first: Any, device: int) -> tuple[Any, Any]:
        """The launcher of a kernel run first on `device`, and its slots."""
        key = (first.entry, device)
        found = self._launchers.get(key)  # (keyed apart from the kernel's own, by device alone)
        if found is None:
            from tilemma.compiler.runtime import cuda_runtime

            slots = (ctypes.c_uint64 * max(1, len(first.args)))()
            found = self._launchers[key] = (cuda_runtime.Launcher(self.kernel.ptx, first.entry, first.grid,
                                                                  first.block, slots, len(first.args),
                                                                  ordinal=device), slots)
        return found

    def launcher(self, device: int) -> Any:
        launcher = self._launchers.get(device)
        if launcher is None:
            from tilemma.compiler.runtime import cuda_runtime

            k = self.kernel
            launcher = cuda_runtime.Launcher(k.ptx, k.name, k.grid, k.block, self.slots, self.n + len(k.scalars),
                                             k.shared_bytes, device, self.maps.addresses if self.maps else ())
            self._launchers[device] = launcher
        return launcher
