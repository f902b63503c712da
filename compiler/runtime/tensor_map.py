"""Tensor maps: what the Hopper tensor-memory accelerator (TMA, `cp.async.bulk.tensor`) copies a
box of a global array by, passed to a kernel as a 128-byte `.param .align 64 .b8 NAME[128]`.

`TensorMap` names the array (the kernel argument it maps, and the bytes from that argument's
address to the map's base: a window's origin), its element size, its dimensions (innermost first,
in elements) and the byte strides of the outer ones, the box one copy moves (elements a
dimension) and the swizzle the box is written to shared memory in. A compiled kernel's maps are
part of its ABI (`KernelABI.tensor_maps`); every launch path encodes them for the addresses of
the arguments they map and passes them after the size parameters. On a GPU
`encode` asks the driver (`cuTensorMapEncodeTiled`, through ctypes on the libcuda that
cuda-bindings loads, as the launcher's cuLaunchKernel: cuda-bindings' own wrapper takes driver
types this module would only build to unwrap again); the map itself is opaque. The emulator
reads its own encoding of the same fields instead (`emulated` / `decode`): the kernel never
reads a map's bytes, only hands the map to `cp.async.bulk.tensor`.

What the driver refuses, `check` refuses first, with the reason: a 16-byte-aligned base and
strides, boxes of 1 to 256 elements a dimension, the inner box at most the swizzle's span.
Elements outside the array are written as zeros (no NaN fill, no interleave, no L2 promotion).
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

# the driver's CUtensorMapDataType by element bytes (unsigned integers: the copy moves bits)
_DATA_TYPES = {1: 0, 2: 1, 4: 2, 8: 4}
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle by the swizzle's span in bytes
MAP_BYTES = 128
_MAX_RANK = 5
_MAX_BOX = 256


class TensorMapError(ValueError):
    """A tensor map the TMA cannot take (the reason says which field)."""


@dataclass(frozen=True)
class TensorMap:
    """A tensor map of kernel argument `of` (an array argument; the map's base is its address
    plus `offset` bytes, a multiple of 16 so that the base stays 16-byte aligned):
    `element_bytes` a element; `dims` its sizes, innermost first; `strides` the bytes between
    consecutive indices of each outer dimension (len(dims) - 1 of them); `box` the elements one
    copy moves a dimension; `swizzle` the span in bytes of the shared-memory swizzle the box is
    written in (0: none; 128: each 16-byte granule's bits 4-6 XORed with address bits 7-9)."""

    of: int
    element_bytes: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 128
    offset: int = 0

    @property
    def box_bytes(self) -> int:
        """Bytes one copy writes to shared memory (the whole box, zeros where it leaves the array)."""
        n = self.element_bytes
        for b in self.box:
            n *= b
        return n

    def check(self, base: int | None = None) -> None:
        """Raise TensorMapError where the TMA would refuse the map (with `base`, its address too)."""
        rank = len(self.dims)
        if self.element_bytes not in _DATA_TYPES:
            raise TensorMapError(f"tensor map: elements of {self.element_bytes} bytes (1, 2, 4 or 8)")
        if not 1 <= rank <= _MAX_RANK or len(self.box) != rank or len(self.strides) != rank - 1:
            raise TensorMapError(f"tensor map: {rank} dimensions (1 to {_MAX_RANK}), a box size each and a stride "
                                 f"for each but the innermost; got box {self.box}, strides {self.strides}")
        if any(d < 1 or d > 1 << 32 for d in self.dims):
            raise TensorMapError(f"tensor map: dimensions of 1 to 2^32 elements, not {self.dims}")
        if any(s % 16 or s < 16 or s >= 1 << 40 for s in self.strides):
            raise TensorMapError(f"tensor map: strides are positive multiples of 16 bytes below 2^40, not {self.strides}")
        if any(not 1 <= b <= _MAX_BOX for b in self.box):
            raise TensorMapError(f"tensor map: a box of 1 to {_MAX_BOX} elements a dimension, not {self.box}")
        if self.box[0] * self.element_bytes % 16:
            raise TensorMapError(f"tensor map: the inner box is a multiple of 16 bytes, not {self.box[0]} elements of "
                                 f"{self.element_bytes}")
        if self.swizzle not in SWIZZLES or (self.swizzle and self.box[0] * self.element_bytes > self.swizzle):
            raise TensorMapError(f"tensor map: swizzle {self.swizzle} bytes (0, 32, 64 or 128), the inner box at most "
                                 f"its span ({self.box[0] * self.element_bytes} bytes)")
        if self.offset % 16:
            raise TensorMapError(f"tensor map: the offset from its argument's address is a multiple of 16 bytes, not "
                                 f"{self.offset}")
        if base is not None and base % 16:
            raise TensorMapError(f"tensor map: the array's address {base:#x} is not 16-byte aligned")

    def encode(self, base: int) -> bytes:
        """The driver's 128-byte map whose base is device address `base` (cuTensorMapEncodeTiled): the
        address of argument `of` plus `offset`, which the caller adds."""
        self.check(base)
        rank = len(self.dims)
        out = (ctypes.c_uint8 * MAP_BYTES)()
        dims = (ctypes.c_uint64 * rank)(*self.dims)
        strides = (ctypes.c_uint64 * max(rank - 1, 1))(*self.strides)
        box = (ctypes.c_uint32 * rank)(*self.box)
        steps = (ctypes.c_uint32 * rank)(*([1] * rank))
        code = _encode_tiled()(out, _DATA_TYPES[self.element_bytes], rank, ctypes.c_void_p(base), dims, strides, box,
                               steps, 0, SWIZZLES[self.swizzle], 0, 0)
        if code:
            raise TensorMapError(f"tensor map: cuTensorMapEncodeTiled refused {self} at {base:#x} (CUresult {code})")
        return bytes(out)

    def emulated(self, base: int) -> bytes:
        """The emulator's 128-byte map whose base is `base` (argument `of`'s address plus `offset`;
        its own encoding, `decode`)."""
        self.check(base)
        rank = len(self.dims)
        pad = _MAX_RANK - rank
        fields = struct.pack("<QIII", base, self.element_bytes, rank, self.swizzle)
        fields += struct.pack(f"<{_MAX_RANK}Q", *self.dims, *[1] * pad)
        fields += struct.pack(f"<{_MAX_RANK - 1}Q", *self.strides, *[0] * (_MAX_RANK - 1 - len(self.strides)))
        fields += struct.pack(f"<{_MAX_RANK}H", *self.box, *[1] * pad)
        return fields.ljust(MAP_BYTES, b"\0")


class MapSlots:
    """Host storage for the tensor-map parameters of repeated launches (`cuda_runtime.Launcher`):
    128 bytes a map, each 64-byte aligned as its `.param .align 64` declaration, at `addresses`
    (what the kernelParams array points at). `fill` encodes a map only when the base it is for
    changed since the last: encoding is a driver call of microseconds, a launch on the same
    buffers costs a comparison per map."""

    def __init__(self, maps: tuple[TensorMap, ...] | list[TensorMap]):
        self.maps = tuple(maps)
        self._raw = (ctypes.c_uint8 * (MAP_BYTES * len(self.maps) + 64))()
        start = ctypes.addressof(self._raw)
        first = start + (-start % 64)
        self.addresses = [first + MAP_BYTES * i for i in range(len(self.maps))]
        self._bases: list[int | None] = [None] * len(self.maps)

    def fill(self, values) -> None:
        """Encode each map (`TensorMap.encode`) for the address its argument has in `values` (the
        launch's 64-bit parameter values, by parameter index) plus its offset, where that differs
        from the last; TensorMapError, leaving that map to be encoded again, where the TMA refuses it."""
        for i, m in enumerate(self.maps):
            base = int(values[m.of]) + m.offset
            if self._bases[i] != base:
                self._bases[i] = None
                ctypes.memmove(self.addresses[i], m.encode(base), MAP_BYTES)
                self._bases[i] = base

    def raw(self, i: int) -> bytes:
        """The 128 bytes map `i` holds now."""
        return ctypes.string_at(self.addresses[i], MAP_BYTES)


def decode(raw: bytes) -> tuple[int, TensorMap]:
    """(base address, map) of the emulator's encoding (`TensorMap.emulated`)."""
    base, element, rank, swizzle = struct.unpack_from("<QIII", raw, 0)
    at = struct.calcsize("<QIII")
    dims = struct.unpack_from(f"<{_MAX_RANK}Q", raw, at)[:rank]
    at += 8 * _MAX_RANK
    strides = struct.unpack_from(f"<{_MAX_RANK - 1}Q", raw, at)[:rank - 1]
    at += 8 * (_MAX_RANK - 1)
    box = struct.unpack_from(f"<{_MAX_RANK}H", raw, at)[:rank]
    return base, TensorMap(-1, element, tuple(dims), tuple(strides), tuple(box), swizzle)


_encode: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]


def _encode_tiled():
    """cuTensorMapEncodeTiled of the driver library cuda-bindings loaded (ctypes)."""
    global _encode
    if _encode is None:
        f = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        f.restype = ctypes.c_int
        _encode = f
    return _encode
