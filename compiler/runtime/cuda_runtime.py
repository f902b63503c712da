"""Run PTX on the GPU through the CUDA driver (`cuda.bindings.driver`), checked at every call.

This is the last step of proving a lowering right: the driver JIT-compiles the emitted PTX for the
device it runs on, launches it on NumPy data, and hands the results back for comparison with
`tilemma.compiler.verify.reference`. It is deliberately thin: the primary context of each device (the one
torch and CuPy share), modules cached per device, and `launch` on the caller's device memory and
stream for the public API (`tilemma.compiler.driver.api`), so that a failure points at the PTX and not at
this wrapper.

Every driver call goes through `_check`, which turns a non-success `CUresult` into `CudaError`
carrying the driver's own error name and text (and, when the JIT refused the PTX, its error log).

Without a GPU (no `cuda-bindings`, no `libcuda`, or no device) nothing here raises at import:
`gpu_available()` answers False and says why in `gpu_unavailable_reason()`; the functions that need
the device raise `NoGpuError`.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Sequence

import numpy as np

from tilemma.compiler.runtime.tensor_map import MAP_BYTES, MapSlots, TensorMap

__all__ = [
    "CudaError",
    "NoGpuError",
    "gpu_available",
    "gpu_unavailable_reason",
    "device_arch",
    "device_name",
    "driver_version",
    "driver_max_ptx",
    "ptx_isa_for_cuda",
    "load_module",
    "run_kernel",
    "time_kernel",
    "launch",
    "Launcher",
    "pointer_device",
]

# NVIDIA's "PTX ISA release history" table (PTX ISA manual, release notes), newest first: the first
# CUDA release (as cuDriverGetVersion spells it, 1000*major + 10*minor) that accepts each PTX ISA
# version. The same table ships as `cuda.bindings.utils._ptx_utils._ptx_to_cuda`. Note that CUDA
# 12.6 stayed at PTX 8.5 (8.6 came with 12.7) and 12.8 is PTX 8.7, not 8.8.
_CUDA_TO_PTX: tuple[tuple[int, tuple[int, int]], ...] = (
    (13050, (9, 5)),
    (13040, (9, 4)),
    (13030, (9, 3)),
    (13020, (9, 2)),
    (13010, (9, 1)),
    (13000, (9, 0)),
    (12090, (8, 8)),
    (12080, (8, 7)),
    (12070, (8, 6)),
    (12050, (8, 5)),
    (12040, (8, 4)),
    (12030, (8, 3)),
    (12020, (8, 2)),
    (12010, (8, 1)),
    (12000, (8, 0)),
    (11080, (7, 8)),
    (11070, (7, 7)),
    (11060, (7, 6)),
    (11050, (7, 5)),
    (11040, (7, 4)),
    (11030, (7, 3)),
    (11020, (7, 2)),
    (11010, (7, 1)),
    (11000, (7, 0)),
    (10020, (6, 5)),
    (10010, (6, 4)),
    (10000, (6, 3)),
    (9020, (6, 2)),
    (9010, (6, 1)),
    (9000, (6, 0)),
)

_JIT_LOG_BYTES = 1 << 16
_DEFAULT_MAX_DYNAMIC_SHARED = 48 * 1024


def ptx_isa_for_cuda(cuda_version: int) -> tuple[int, int]:
    """Newest PTX ISA version a CUDA release accepts, e.g. 13000 -> (9, 0), 12080 -> (8, 7).

    A release newer than the table gets the newest PTX version known here: it accepts at least that,
    and claiming more would emit PTX the driver may refuse ("unsupported toolchain").
    """
    for first_release, ptx in _CUDA_TO_PTX:
        if cuda_version >= first_release:
            return ptx
    raise ValueError(f"CUDA version {cuda_version} predates PTX ISA 6.0 (CUDA 9.0); unsupported")


class CudaError(Exception):
    """A CUDA driver call failed.

    `call` is the driver function, `code` the `CUresult` (None when there was none), `name`/`text`
    the driver's cuGetErrorName/cuGetErrorString, and `log` the JIT error log when the PTX was refused.
    """

    def __init__(self, call: str, code: Any = None, *, log: str = "", detail: str = ""):
        self.call = call
        self.code = code
        self.name, self.text = _error_name_and_text(code) if code is not None else ("", "")
        self.log = log
        message = f"{call} failed" if call else ""
        if code is not None:
            message += f": {self.name}" + (f" ({self.text})" if self.text else "")
        if detail:
            message = f"{message}\n{detail}" if message else detail
        if log:
            message += "\nJIT log:\n" + log
        super().__init__(message)


class NoGpuError(CudaError):
    """No usable GPU in this process; the message says why (no cuda-bindings, no libcuda, no device)."""

    def __init__(self, reason: str):
        super().__init__("", detail=f"no GPU available: {reason}")
        self.reason = reason


def _driver():
    from cuda.bindings import driver  # imported lazily: cuda-bindings is an optional dependency

    return driver


def _error_name_and_text(code: Any) -> tuple[str, str]:
    """Driver's name and description of a CUresult; falls back to the enum name if those fail."""
    fallback = getattr(code, "name", str(code))
    try:
        driver = _driver()
        err, name = driver.cuGetErrorName(code)
        err2, text = driver.cuGetErrorString(code)
        name_s = name.decode() if err == driver.CUresult.CUDA_SUCCESS and name else fallback
        text_s = text.decode() if err2 == driver.CUresult.CUDA_SUCCESS and text else ""
        return name_s, text_s
    except Exception:  # the driver library may be the thing that is missing
        return fallback, ""


def _check(call: str, result: Any, **kwargs: Any) -> Any:
    """Unpack a cuda-bindings result tuple `(CUresult, *values)`, raising CudaError on failure.

    Returns None, the single value, or the tuple of values.
    """
    driver = _driver()
    if not isinstance(result, tuple):
        result = (result,)
    err, values = result[0], result[1:]
    if err != driver.CUresult.CUDA_SUCCESS:
        raise CudaError(call, err, **kwargs)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _call(name: str, *args: Any) -> Any:
    return _check(name, getattr(_driver(), name)(*args))


# ---------------------------------------------------------------------------------------------
# Process state: probe once, retain each device's primary context once, cache modules by
# (device, text).
# ---------------------------------------------------------------------------------------------

_lock = threading.RLock()
_probe: tuple[bool, str] | None = None  # (available, reason when not)
_contexts: dict[int, tuple[Any, Any]] = {}  # ordinal -> (CUdevice, primary CUcontext)
_modules: dict[tuple[int, str], Any] = {}
_functions: dict[tuple[int, str, str], Any] = {}
_prepared: dict[tuple[int, str, str, int], Any] = {}  # functions checked and opted in for a shared size


def _probe_gpu() -> tuple[bool, str]:
    global _probe
    with _lock:
        if _probe is not None:
            return _probe
        try:
            driver = _driver()
        except Exception as exc:  # ImportError, or a broken install
            _probe = (False, f"cuda-bindings is not importable ({exc})")
            return _probe
        try:
            (err,) = driver.cuInit(0)
            if err != driver.CUresult.CUDA_SUCCESS:
                name, text = _error_name_and_text(err)
                _probe = (False, f"cuInit failed: {name} {text}".strip())
                return _probe
            err, count = driver.cuDeviceGetCount()
            if err != driver.CUresult.CUDA_SUCCESS:
                name, text = _error_name_and_text(err)
                _probe = (False, f"cuDeviceGetCount failed: {name} {text}".strip())
            elif count < 1:
                _probe = (False, "the driver reports no CUDA device")
            else:
                _probe = (True, "")
        except Exception as exc:  # libcuda missing: cuda-bindings raises instead of returning
            _probe = (False, f"the CUDA driver library could not be loaded ({type(exc).__name__}: {exc})")
        return _probe


def gpu_available() -> bool:
    """True when cuda-bindings imports, cuInit succeeds and there is at least one device.

    Cached for the process; never raises, so test collection can call it on any machine.
    """
    try:
        return _probe_gpu()[0]
    except Exception:
        return False


def gpu_unavailable_reason() -> str | None:
    """Why `gpu_available()` is False (for skip messages), or None when a GPU is there."""
    available, reason = _probe_gpu()
    return None if available else reason


def _ensure_context(ordinal: int = 0) -> Any:
    """Retain device `ordinal`'s primary context (once), make it current on the calling thread and
    return the CUdevice.

    The primary context is the one the runtime API, cupy and torch share, so kernels launched here
    coexist with them. Contexts are current per thread, hence cuCtxSetCurrent on every entry.
    """
    available, reason = _probe_gpu()
    if not available:
        raise NoGpuError(reason)
    with _lock:
        if ordinal not in _contexts:
            device = _call("cuDeviceGet", ordinal)
            _contexts[ordinal] = (device, _call("cuDevicePrimaryCtxRetain", device))
        device, context = _contexts[ordinal]
        _call("cuCtxSetCurrent", context)
        return device


def driver_version() -> int:
    """cuDriverGetVersion: the newest CUDA the installed driver supports, e.g. 13000 for 13.0."""
    available, reason = _probe_gpu()
    if not available:
        raise NoGpuError(reason)
    return int(_call("cuDriverGetVersion"))


def driver_max_ptx() -> tuple[int, int]:
    """Newest PTX ISA version the driver's JIT accepts, from cuDriverGetVersion (13000 -> (9, 0))."""
    return ptx_isa_for_cuda(driver_version())


def device_arch(ordinal: int = 0) -> str:
    """The device's target name from its compute capability, e.g. "sm_90" for an H100.

    Arch-specific variants (sm_90a) are a compile-time choice, not a device property.
    """
    device = _ensure_context(ordinal)
    driver = _driver()
    attr = driver.CUdevice_attribute
    major = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
    minor = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
    return f"sm_{int(major)}{int(minor)}"


def device_name() -> str:
    """The device's marketing name, e.g. "NVIDIA H100 80GB HBM3"."""
    raw = _call("cuDeviceGetName", 256, _ensure_context())
    return bytes(raw).split(b"\0", 1)[0].decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


def _c_string(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()


def load_module(ptx: str, ordinal: int = 0) -> Any:
    """JIT-load a PTX module into device `ordinal`'s primary context (cached by device and text)
    and return the CUmodule.

    Uses cuModuleLoadDataEx with error/info log buffers so that a refusal raises CudaError whose
    message carries the JIT's own explanation (the line and the reason), not just
    CUDA_ERROR_INVALID_PTX.
    """
    _ensure_context(ordinal)
    with _lock:
        module = _modules.get((ordinal, ptx))
        if module is not None:
            return module
        driver = _driver()
        opt = driver.CUjit_option
        error_log = bytearray(_JIT_LOG_BYTES)
        info_log = bytearray(_JIT_LOG_BYTES)
        options = [
            opt.CU_JIT_ERROR_LOG_BUFFER,
            opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_INFO_LOG_BUFFER,
            opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ]
        values = [error_log, len(error_log), info_log, len(info_log)]
        image = ptx.encode() + b"\0"  # the driver reads PTX as a NUL-terminated string
        result = driver.cuModuleLoadDataEx(image, len(options), options, values)
        err = result[0]
        if err != driver.CUresult.CUDA_SUCCESS:
            log = _c_string(error_log)
            info = _c_string(info_log)
            if info:
                log = f"{log}\n{info}" if log else info
            raise CudaError("cuModuleLoadDataEx", err, log=log or "(the JIT left no log)")
        module = result[1]
        _modules[ordinal, ptx] = module
        return module


def _function(ptx: str, entry: str, ordinal: int = 0) -> Any:
    with _lock:
        key = (ordinal, ptx, entry)
        func = _functions.get(key)
        if func is None:
            module = load_module(ptx, ordinal)
            driver = _driver()
            err, func = driver.cuModuleGetFunction(module, entry.encode())
            if err != driver.CUresult.CUDA_SUCCESS:
                raise CudaError(
                    "cuModuleGetFunction", err, detail=f"no .entry named {entry!r} in the PTX module"
                )
            _functions[key] = func
        return func


# ---------------------------------------------------------------------------------------------
# Launching
# ---------------------------------------------------------------------------------------------


class _Launch:
    """Device buffers and the kernelParams array for one argument list; frees on close().

    Each kernel parameter is passed as a pointer to host memory holding its value (cuLaunchKernel's
    `kernelParams`): an ndarray becomes a device allocation whose address is held in a uint64; a NumPy
    scalar is held in a one-element array of its own dtype, so a np.int32 is passed as 4 bytes, a
    np.float64 as 8, exactly as the .param declaration in the PTX expects; a TensorMap its 128
    bytes, encoded for the device address of the array argument it maps plus its offset.
    """

    def __init__(self, args: Sequence[Any]):
        self.host: list[np.ndarray] = []  # contiguous host copies of the array arguments
        self.device: list[Any] = []  # matching CUdeviceptr
        self._holders: list[np.ndarray] = []
        pointers: dict[int, int] = {}  # argument index -> device address of an array argument
        try:
            for index, arg in enumerate(args):
                if isinstance(arg, np.ndarray):
                    host = np.ascontiguousarray(arg)
                    dptr = _call("cuMemAlloc", max(host.nbytes, 1))
                    self.host.append(host)
                    self.device.append(dptr)
                    if host.nbytes:
                        _call("cuMemcpyHtoD", dptr, host.ctypes.data, host.nbytes)
                    pointers[index] = int(dptr)
                    self._holders.append(np.array([int(dptr)], dtype=np.uint64))
                elif isinstance(arg, np.generic):
                    self._holders.append(np.array([arg], dtype=arg.dtype))
                elif isinstance(arg, TensorMap):  # its 128 bytes, once its array has an address
                    self._holders.append(np.zeros(MAP_BYTES, np.uint8))
                else:
                    raise TypeError(
                        f"kernel argument {index} is {type(arg).__name__}; pass an np.ndarray (copied "
                        "to the device), a NumPy scalar such as np.int32(n) (its dtype fixes the "
                        "parameter's size) or a TensorMap of an array argument"
                    )
            for index, arg in enumerate(args):
                if isinstance(arg, TensorMap):
                    if arg.of not in pointers:
                        raise TypeError(f"kernel argument {index}: a TensorMap of argument {arg.of}, which is not "
                                        "an array")
                    base = pointers[arg.of] + arg.offset  # the map's base: the argument's address + offset
                    self._holders[index][:] = np.frombuffer(arg.encode(base), np.uint8)
            self._pointers = np.array([h.ctypes.data for h in self._holders], dtype=np.uint64)
        except BaseException:
            self.close(raising=False)
            raise

    @property
    def params(self) -> int:
        """Address of the void*[] that cuLaunchKernel reads (0 = no parameters)."""
        return int(self._pointers.ctypes.data) if len(self._holders) else 0

    def copy_back(self) -> list[np.ndarray]:
        outputs = []
        for host, dptr in zip(self.host, self.device, strict=True):
            out = np.empty_like(host)
            if out.nbytes:
                _call("cuMemcpyDtoH", out.ctypes.data, dptr, out.nbytes)
            outputs.append(out)
        return outputs

    def close(self, raising: bool = True) -> None:
        device, self.device = self.device, []
        first_error: Exception | None = None
        for dptr in device:
            try:
                _call("cuMemFree", dptr)
            except Exception as exc:  # keep freeing the rest
                first_error = first_error or exc
        if raising and first_error is not None:
            raise first_error


def _dims(value: Sequence[int], what: str) -> tuple[int, int, int]:
    dims = tuple(int(v) for v in value)
    if len(dims) != 3 or any(v < 1 for v in dims):
        raise ValueError(f"{what} must be three positive integers, got {tuple(value)!r}")
    return dims  # type: ignore[return-value]


def check_shared_bytes(shared_bytes: int, static_bytes: int, limit: int, arch: str) -> None:
    """Refuse a launch whose static plus dynamic shared memory exceeds what one CTA may use
    (`limit`: the device's opt-in maximum, 232448 = 227 KiB on sm_90) with a message, not a
    launch failure the driver would report as CUDA_ERROR_INVALID_VALUE."""
    if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
        raise ValueError(f"shared_bytes must be a non-negative integer, got {shared_bytes!r}")
    if static_bytes + shared_bytes > limit:
        raise ValueError(
            f"shared_bytes={shared_bytes}: with the kernel's {static_bytes} bytes of static shared memory "
            f"that is {static_bytes + shared_bytes} bytes per CTA; {arch} allows at most {limit} "
            f"({limit // 1024} KiB)"
        )


def _prepare(ptx: str, entry: str, shared_bytes: int, ordinal: int = 0) -> Any:
    """The function, its dynamic shared memory checked against the device and opted into (once
    per device, kernel and size)."""
    key = (ordinal, ptx, entry, shared_bytes)
    if key in _prepared:
        return _prepared[key]
    func = _function(ptx, entry, ordinal)
    driver = _driver()
    limit = _call(
        "cuDeviceGetAttribute",
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        _ensure_context(ordinal),
    )
    static = _call("cuFuncGetAttribute", driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func)
    check_shared_bytes(shared_bytes, int(static), int(limit), device_arch(ordinal))
    if shared_bytes > _DEFAULT_MAX_DYNAMIC_SHARED:
        # More than 48 KiB of dynamic shared memory must be opted into per function.
        _call(
            "cuFuncSetAttribute",
            func,
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            int(shared_bytes),
        )
    _prepared[key] = func
    return func


def _launch(func: Any, grid: tuple[int, int, int], block: tuple[int, int, int], shared_bytes: int,
            launch: _Launch) -> None:
    _call("cuLaunchKernel", func, *grid, *block, int(shared_bytes), 0, launch.params, 0)


def run_kernel(
    ptx: str,
    entry: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: list[np.ndarray | np.generic],
    shared_bytes: int = 0,
) -> list[np.ndarray]:
    """Launch `entry` of `ptx` once and return the device's final contents of every array argument.

    Arrays are copied byte for byte (made C-contiguous first; sub-byte element types must already be
    packed the way the kernel reads them) to fresh device buffers, passed as pointers, and copied
    back after cuCtxSynchronize. The result has one array per ndarray argument, in argument order
    (scalars are passed by value and not returned). Device memory is freed even on failure.

    `shared_bytes` is the dynamic shared memory per CTA (what `.extern .shared` names); above
    48 KiB the kernel is opted in, above the device's limit the launch is refused (ValueError).

    A fault inside the kernel (illegal address, trap) surfaces as CudaError from the synchronize;
    such errors are sticky: the process's context cannot run anything afterwards.
    """
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    _ensure_context()
    func = _prepare(ptx, entry, shared_bytes)
    launch = _Launch(args)
    try:
        _launch(func, grid, block, shared_bytes, launch)
        _call("cuCtxSynchronize")
        outputs = launch.copy_back()
    except BaseException:
        launch.close(raising=False)
        raise
    launch.close()
    return outputs


_libcuda: Any = None


def _libcuda_calls() -> tuple[Any, Any]:
    """cuCtxSetCurrent and cuLaunchKernel of the driver library cuda-bindings loaded, called
    through ctypes: a launch then costs one foreign call each, no per-call Python objects."""
    global _libcuda
    if _libcuda is None:
        lib = ctypes.CDLL("libcuda.so.1")  # the library cuda.bindings already loaded: same handles
        set_current = lib.cuCtxSetCurrent
        set_current.argtypes, set_current.restype = [ctypes.c_void_p], ctypes.c_int
        launch_kernel = lib.cuLaunchKernel
        launch_kernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        launch_kernel.restype = ctypes.c_int
        _libcuda = (set_current, launch_kernel)
    return _libcuda


class Scratch:
    """Device memory a kernel needs besides its operands (a split-K kernel's workspace and counters),
    kept for the process on device `ordinal`: `sizes` bytes each, those in `zeroed` set to 0 once
    (the kernel leaves its counters at 0 again). One per (kernel, device, stream): launches on one
    stream run in order, so they may share it."""

    def __init__(self, sizes: Sequence[int], zeroed: Sequence[bool], ordinal: int = 0):
        _ensure_context(ordinal)
        self.addresses: list[int] = []
        with _lock:
            for size, zero in zip(sizes, zeroed):
                ptr = _call("cuMemAlloc", max(int(size), 4))
                if zero:
                    _call("cuMemsetD8", ptr, 0, max(int(size), 4))
                self.addresses.append(int(ptr))


class Launcher:
    """One kernel of a PTX module prepared for repeated launches on device `ordinal`: the module
    loaded (once per device and text), the function opted into its dynamic shared memory, and
    the kernelParams array built once over `slots`, the caller's ctypes array of one 64-bit value
    per parameter (device addresses), which the caller rewrites in place before each `launch`
    (the driver copies the values when the launch is queued, so a launch captured in a CUDA graph
    keeps the values it was given). `maps` are the addresses of the 128-byte host storage of the
    tensor-map parameters that follow the `count` slots (`tensor_map.MapSlots`, which the caller
    fills before each launch likewise)."""

    def __init__(self, ptx: str, entry: str, grid: Sequence[int], block: Sequence[int], slots: Any,
                 count: int, shared_bytes: int = 0, ordinal: int = 0, maps: Sequence[int] = ()):
        self.grid, self.block = _dims(grid, "grid"), _dims(block, "block")
        _ensure_context(ordinal)
        func = _prepare(ptx, entry, shared_bytes, ordinal)
        self.entry, self.ordinal = entry, ordinal
        self._slots = slots  # kept alive with the pointers into it
        self._pointers = kernel_params(slots, count, maps)
        params = ctypes.addressof(self._pointers) if count + len(maps) else None
        self._context = int(_contexts[ordinal][1])
        self._set_current, launch_kernel = _libcuda_calls()
        self._call = (launch_kernel, int(func), *self.grid, *self.block, int(shared_bytes), params)

    def launch(self, stream: int = 0) -> None:
        """Queue one launch on the CUstream handle `stream` (0: the legacy default stream) with
        the values now in the slots; nothing is synchronized."""
        code = self._set_current(self._context)
        if code:
            raise CudaError("cuCtxSetCurrent", _driver().CUresult(code))
        launch_kernel, func, gx, gy, gz, bx, by, bz, shared, params = self._call
        code = launch_kernel(func, gx, gy, gz, bx, by, bz, shared, stream or None, params, None)
        if code:
            raise CudaError("cuLaunchKernel", _driver().CUresult(code), detail=f"launching {self.entry}")


def kernel_params(slots: Any, count: int, maps: Sequence[int] = ()) -> Any:
    """The void*[] cuLaunchKernel reads: the addresses of the first `count` 64-bit slots of
    `slots`, then `maps` (each tensor map's 128-byte storage)."""
    base = ctypes.addressof(slots)
    pointers = [base + 8 * i for i in range(count)] + [int(m) for m in maps]
    return (ctypes.c_void_p * max(1, len(pointers)))(*pointers)


_launchers: dict[tuple[int, str, str, tuple, tuple, int, int, tuple], tuple[Launcher, Any, MapSlots]] = {}


def launch(
    ptx: str,
    entry: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[int | np.generic],
    shared_bytes: int = 0,
    stream: int = 0,
    device: int = 0,
) -> None:
    """Queue one launch of `entry` on memory that is already on the device, and return at once.

    Each Python int is a device address passed as a 64-bit pointer (a torch tensor's `data_ptr()`,
    a cupy array's `.data.ptr`); a NumPy scalar is passed by value; a TensorMap (the last
    arguments, as a kernel's tensor-map parameters are) is encoded for the address argument
    `of` holds plus its offset, again only when that changes. `stream` is a CUstream handle as
    an int (0: the legacy default stream, torch's default), so that events another library records
    on that stream time the launch; `device` the ordinal whose primary context runs it. Nothing is
    synchronized: faults surface at the caller's next synchronization. Prepared launchers are
    kept per kernel, device and argument count (see `Launcher`, which `tilemma.Kernel` uses).
    """
    values: list[int] = []
    maps: list[TensorMap] = []
    for index, arg in enumerate(args):
        if isinstance(arg, TensorMap):
            maps.append(arg)
            continue
        if maps:
            raise TypeError(f"kernel argument {index} follows a TensorMap; tensor maps are the last parameters")
        if isinstance(arg, np.generic):
            values.append(int.from_bytes(np.array([arg], dtype=arg.dtype).tobytes().ljust(8, b"\0"), "little"))
        elif isinstance(arg, int) and not isinstance(arg, bool) and 0 <= arg < 1 << 64:
            values.append(arg)
        else:
            raise TypeError(
                f"kernel argument {index} is {arg!r}; pass a device address (a non-negative int), "
                "a NumPy scalar such as np.int32(n) or a TensorMap of an address argument"
            )
    for index, m in enumerate(maps, len(values)):
        if not 0 <= m.of < len(values) or isinstance(args[m.of], np.generic):
            raise TypeError(f"kernel argument {index}: a TensorMap of argument {m.of}, which is not an address")
    key = (device, ptx, entry, tuple(grid), tuple(block), int(shared_bytes), len(values), tuple(maps))
    with _lock:
        found = _launchers.get(key)
        if found is None:
            slots = (ctypes.c_uint64 * max(1, len(values)))()
            storage = MapSlots(maps)
            launcher = Launcher(ptx, entry, grid, block, slots, len(values), shared_bytes, device, storage.addresses)
            found = _launchers[key] = (launcher, slots, storage)
        launcher, slots, storage = found
        for i, value in enumerate(values):
            slots[i] = value
        storage.fill(slots)
        launcher.launch(stream)


def time_kernel(
    ptx: str,
    entry: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: list[np.ndarray | np.generic],
    iters: int = 20,
    warmup: int = 3,
    shared_bytes: int = 0,
) -> float:
    """Milliseconds per launch, averaged over `iters` back-to-back launches timed with CUDA events.

    Arguments are uploaded once; `warmup` untimed launches first absorb JIT and first-touch costs.
    The kernels may overwrite their inputs between launches, so time only kernels for which that is
    harmless (it is for benchmarks of D = A*B + C into a separate D).
    """
    if iters < 1 or warmup < 0:
        raise ValueError("iters must be >= 1 and warmup >= 0")
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    _ensure_context()
    func = _prepare(ptx, entry, shared_bytes)
    driver = _driver()
    launch = _Launch(args)
    events: list[Any] = []
    try:
        for _ in range(warmup):
            _launch(func, grid, block, shared_bytes, launch)
        _call("cuCtxSynchronize")
        start = _call("cuEventCreate", int(driver.CUevent_flags.CU_EVENT_DEFAULT))
        events.append(start)
        stop = _call("cuEventCreate", int(driver.CUevent_flags.CU_EVENT_DEFAULT))
        events.append(stop)
        _call("cuEventRecord", start, 0)
        for _ in range(iters):
            _launch(func, grid, block, shared_bytes, launch)
        _call("cuEventRecord", stop, 0)
        _call("cuEventSynchronize", stop)
        _call("cuCtxSynchronize")  # surfaces a fault in any of the launches
        elapsed = float(_call("cuEventElapsedTime", start, stop))
    except BaseException:
        for event in events:
            try:
                _call("cuEventDestroy", event)
            except Exception:
                pass
        launch.close(raising=False)
        raise
    for event in events:
        _call("cuEventDestroy", event)
    launch.close()
    return elapsed / iters


def stream_capturing(stream: int) -> bool:
    """Whether the CUstream handle `stream` (0: the legacy default stream) is being captured into
    a CUDA graph (cuStreamIsCapturing)."""
    driver = _driver()
    status = _call("cuStreamIsCapturing", driver.CUstream(stream) if stream else driver.CUstream(0))
    return int(status) != int(driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def pointer_device(address: int) -> int:
    """The ordinal of the device whose memory `address` points into (device or managed memory);
    ValueError for host memory or an address the driver does not know."""
    available, reason = _probe_gpu()
    if not available:
        raise NoGpuError(reason)
    driver = _driver()
    attr = driver.CUpointer_attribute
    err, kind = driver.cuPointerGetAttribute(attr.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
    if err != driver.CUresult.CUDA_SUCCESS or int(kind) == int(driver.CUmemorytype.CU_MEMORYTYPE_HOST):
        raise ValueError(f"address {address:#x} is not CUDA device memory")
    return int(_call("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address))
