"""A kernel's tensor maps from its ABI to every launch path: the `ptx.entry` records and
`KernelABI.tensor_maps` (read from the entry, written to and read from the compile cache's JSON,
refused for launch-time sizes), the maps appended after the size parameters by the runner and
`Kernel.emulate` (tests/tma_kernels.py's copy, every byte against NumPy slicing, at a window's
offset), and the 128-byte map slots `Kernel.launch` and `cuda_runtime.launch` hand cuLaunchKernel
(driver calls faked: no GPU here; tests/gpu/test_tma_launch_gpu.py runs them on one)."""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np
import pytest
from xdsl.dialects.builtin import (ArrayAttr, DenseArrayBase, DictionaryAttr, IntegerAttr, IntegerType, MemRefType,
                                   Signedness, StringAttr, i64)
from xdsl.ir import Block, Region

from tilemma.compiler.driver import runner
from tilemma.compiler.driver.api import Kernel, LaunchError
from tilemma.compiler.driver.gpu_binary import gpu_binary_module
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.runtime.abi import KernelABI, tensor_map_from_record, tensor_map_record
from tilemma.compiler.runtime.tensor_map import MAP_BYTES, TensorMap, TensorMapError
from tilemma.compiler.verify.emulator import EmulationError
from tilemma.dialects import ptx

from tests import tma_kernels as T

MAPS = (T.MAP, TensorMap(1, 4, (256,), (), (64,), 0, 32))  # a second, 1-D map of the other argument


# ------------------------------------------------------------------------------------------ ABI
@pytest.mark.parametrize("m", MAPS, ids=["2d-offset", "1d"])
def test_the_record_round_trips(m):
    record = tensor_map_record(m)
    assert record.data["offset"] == IntegerAttr(m.offset, i64) and isinstance(record.data["dims"], DenseArrayBase)
    assert tensor_map_from_record(record) == m


def test_a_record_missing_a_field_is_refused():
    fields = dict(tensor_map_record(T.MAP).data)
    del fields["box"]
    with pytest.raises(ValueError, match="box should be a dense array"):
        tensor_map_from_record(DictionaryAttr(fields))


def _entry(records, params=(".u64 p_data", ".u64 p_out", ".align 64 .b8 tmap0[128]")) -> ptx.EntryOp:
    u8 = IntegerType(8, Signedness.UNSIGNED)
    abi = [DictionaryAttr({"name": StringAttr(p.name), "role": ArrayAttr([StringAttr(r) for r in p.roles]),
                           "type": MemRefType(u8, list(p.shape))}) for p in T.PARAMS]
    entry = ptx.EntryOp(T.ENTRY, list(params), Region(Block()), launch=((1, 1, 1), (T.THREADS, 1, 1)), abi=abi)
    if records is not None:
        entry.properties["tensor_maps"] = ArrayAttr(records)
    return entry


def test_from_entry_reads_the_maps():
    abi = KernelABI.from_entry(_entry([tensor_map_record(T.MAP)]))
    assert abi.tensor_maps == (T.MAP,)
    assert [p.name for p in abi.params] == ["p_data", "p_out"] and abi.params == T.PARAMS
    assert KernelABI.from_entry(_entry(None, (".u64 p_data", ".u64 p_out"))).tensor_maps == ()


@pytest.mark.parametrize("records, params, message", [
    ([], None, "1 tensor-map parameters, but 0 tensor_maps records"),
    ([tensor_map_record(T.MAP)] * 2, None, "1 tensor-map parameters, but 2"),
    ([tensor_map_record(dataclasses.replace(T.MAP, of=2))], None, "argument 2: the kernel has 2 array arguments"),
    ([tensor_map_record(dataclasses.replace(T.MAP, offset=8))], None, "multiple of 16 bytes, not 8"),
], ids=["no-record", "one-too-many", "of-past-the-pointers", "unaligned-offset"])
def test_from_entry_refuses_records_that_do_not_fit(records, params, message):
    with pytest.raises(ValueError, match=f"kernel {T.ENTRY}: .*{message}"):
        KernelABI.from_entry(_entry(records))


def test_to_dict_round_trips_the_maps():
    abi = dataclasses.replace(T.abi(MAPS), tiling=(2, 2, 1, 1, 0, 0))
    d = abi.to_dict()
    assert d["tensor_maps"][0] == {"of": 0, "element_bytes": 2, "dims": [168, 63], "strides": [384],
                                   "box": [32, 16], "swizzle": 0, "offset": T.OFFSET}
    assert KernelABI.from_dict(d, abi.tiling) == abi
    assert "tensor_maps" not in T.abi(()).to_dict()  # unchanged JSON for kernels without maps
    assert KernelABI.from_dict(T.abi(()).to_dict()) == T.abi(())


@pytest.mark.parametrize("edit, error", [
    (lambda m: m.update(dims=["168", 63]), TypeError),
    (lambda m: m.update(swizzle=128.0), TypeError),
    (lambda m: m.update(offset=None), TypeError),
    (lambda m: m.pop("box"), KeyError),
    (lambda m: m.update(of=2), ValueError),  # past the array arguments
    (lambda m: m.update(strides=[100]), TensorMapError),  # not a multiple of 16
    (lambda m: m.update(offset=T.OFFSET + 4), TensorMapError),
], ids=["dims-text", "swizzle-float", "offset-null", "no-box", "of-too-far", "stride", "offset-unaligned"])
def test_from_dict_refuses_a_malformed_map(edit, error):
    d = T.abi().to_dict()
    edit(d["tensor_maps"][0])
    with pytest.raises(error):
        KernelABI.from_dict(d)


@pytest.mark.parametrize("maps", [{}, [{"of": 0}], "x"], ids=["not-a-list", "incomplete", "text"])
def test_from_dict_refuses_a_malformed_map_list(maps):
    d = T.abi().to_dict() | {"tensor_maps": maps}
    with pytest.raises((TypeError, KeyError)):
        KernelABI.from_dict(d)


def test_persistent_round_trips_and_is_checked():
    """A persistent kernel's CTA count goes through the JSON record and back (absent: 0); a count
    that is not a non-negative integer is refused."""
    abi = dataclasses.replace(T.abi(), persistent=132)
    assert abi.to_dict()["persistent"] == 132 and KernelABI.from_dict(abi.to_dict()).persistent == 132
    assert "persistent" not in T.abi().to_dict() and KernelABI.from_dict(T.abi().to_dict()).persistent == 0
    for bad in (-1, 1.5, "132", True):
        with pytest.raises(TypeError, match="persistent"):
            KernelABI.from_dict(T.abi().to_dict() | {"persistent": bad})


def test_bind_refuses_maps_of_launch_time_sizes():
    dynamic = dataclasses.replace(T.abi(), symbols=("M",))
    with pytest.raises(ValueError, match="tensor maps of launch-time sizes are not supported yet"):
        dynamic.bind([p.shape for p in T.PARAMS], [p.strides for p in T.PARAMS])
    static = T.abi()
    assert static.bind([], []) == (static, ())  # a static kernel keeps its maps


def test_arguments_put_the_maps_after_the_sizes():
    a, b = np.zeros(4, np.uint8), np.zeros(4, np.uint8)
    args = T.abi(MAPS).arguments([a, b], (7, 9))
    assert args[:2] == [a, b] and args[2:4] == [np.uint32(7), np.uint32(9)] and args[4:] == list(MAPS)
    assert type(args[2]) is np.uint32


def test_gpu_binary_refuses_a_kernel_with_maps():
    with pytest.raises(ValueError, match=f"gpu-binary does not pass tensor maps yet, and kernel {T.ENTRY}"):
        gpu_binary_module([T.compiled()], "sm_90a")


# ------------------------------------------------------------------ the emulator's launch paths
def test_kernel_emulate_appends_the_map_at_its_offset():
    x, out = T.data(1), np.zeros(T.BOX_BYTES, np.uint8)
    Kernel(T.compiled()).emulate(x, out)
    np.testing.assert_array_equal(out, T.want(x))
    assert not np.array_equal(T.want(x), x[:T.BOX[1], :2 * T.BOX[0]].reshape(-1))  # the offset shows


def test_runner_execute_appends_the_map():
    k = T.compiled()
    x = T.data(2)
    outs = runner.execute(k, k.abi.arguments([x, np.zeros(T.BOX_BYTES, np.uint8)], k.scalars), "emulator")
    np.testing.assert_array_equal(outs[0], x)
    np.testing.assert_array_equal(outs[1], T.want(x))


def test_without_the_abis_map_the_launch_is_refused():
    """The PTX takes the map: a kernel whose ABI forgot it cannot run (what the plumbing adds)."""
    with pytest.raises(EmulationError, match="takes 3 parameters, got 2"):
        Kernel(T.compiled(())).emulate(T.data(), np.zeros(T.BOX_BYTES, np.uint8))


# ------------------------------------------------------ Kernel.launch's parameter slots (no GPU)
class FakeDriver:
    """cuLaunchKernel through Launcher's ctypes calls, recording what each launch hands the
    driver: per kernelParams entry its address and the bytes there (8 a pointer, 128 a map)."""

    def __init__(self, monkeypatch, sizes):
        self.sizes, self.launches, self.encoded = sizes, [], []
        monkeypatch.setattr(cuda_runtime, "_ensure_context", lambda ordinal=0: None)
        monkeypatch.setattr(cuda_runtime, "_prepare", lambda *args: 0x1234)
        monkeypatch.setattr(cuda_runtime, "_launchers", {})
        monkeypatch.setitem(cuda_runtime._contexts, 0, (None, 0x5678))
        monkeypatch.setattr(cuda_runtime, "_libcuda_calls", lambda: (lambda context: 0, self.launch_kernel))
        encoded = self.encoded

        def encode(m, base):  # the emulator's bytes in place of the driver's (none here)
            encoded.append(base)
            return m.emulated(base)

        monkeypatch.setattr(TensorMap, "encode", encode)

    def launch_kernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert func == 0x1234 and (gx, bx) == (1, T.THREADS) and params
        pointers = (ctypes.c_void_p * len(self.sizes)).from_address(params)
        self.launches.append([(p, ctypes.string_at(p, n)) for p, n in zip(pointers, self.sizes)])
        return 0


DATA, OUT = 0x7F00_0000_1000, 0x7F00_0020_0000


def _word(x: int) -> bytes:
    return x.to_bytes(8, "little")


def test_launch_fills_the_map_slot(monkeypatch):
    driver = FakeDriver(monkeypatch, (8, 8, MAP_BYTES))
    k = Kernel(T.compiled())
    k.launch(DATA, OUT)  # ints: the fast path
    [[(p0, data), (p1, out), (pm, raw)]] = driver.launches
    assert (data, out) == (_word(DATA), _word(OUT)) and p1 == p0 + 8
    assert pm % 64 == 0 and raw == T.MAP.emulated(DATA + T.OFFSET)
    assert driver.encoded == [DATA + T.OFFSET]

    k.launch(np.uint64(DATA), OUT)  # the checked path, the same address: not encoded again
    k.launch_unchecked(DATA, OUT)
    assert driver.encoded == [DATA + T.OFFSET] and all(launch[2] == (pm, raw) for launch in driver.launches)

    k.launch(np.uint64(DATA + 256), OUT)  # the checked path, a new address: encoded for it
    assert driver.encoded == [DATA + T.OFFSET, DATA + 256 + T.OFFSET]
    assert driver.launches[-1][2] == (pm, T.MAP.emulated(DATA + 256 + T.OFFSET))
    k.launch(DATA, OUT)  # the fast path, back to the first
    assert driver.encoded[-1] == DATA + T.OFFSET and driver.launches[-1][2][1] == raw


def test_launch_unchecked_refuses_a_map_the_tma_cannot_take(monkeypatch):
    FakeDriver(monkeypatch, (8, 8, MAP_BYTES))
    with pytest.raises(LaunchError, match=f"{T.ENTRY}: tensor map: the array's address .* not 16-byte aligned"):
        Kernel(T.compiled()).launch_unchecked(DATA + 8, OUT)


def test_each_map_has_its_own_aligned_slot(monkeypatch):
    driver = FakeDriver(monkeypatch, (8, 8, MAP_BYTES, MAP_BYTES))
    k = Kernel(dataclasses.replace(T.compiled(), abi=T.abi(MAPS)))
    k.launch_unchecked(DATA, OUT)
    [[_, _, (m0, raw0), (m1, raw1)]] = driver.launches
    assert m0 % 64 == 0 and m1 == m0 + MAP_BYTES
    assert raw0 == T.MAP.emulated(DATA + T.OFFSET) and raw1 == MAPS[1].emulated(OUT + 32)


def test_cuda_runtime_launch_takes_maps_last(monkeypatch):
    driver = FakeDriver(monkeypatch, (8, 8, MAP_BYTES))
    for _ in range(2):
        cuda_runtime.launch(T.PTX, T.ENTRY, (1, 1, 1), (T.THREADS, 1, 1), [DATA, OUT, T.MAP])
    assert driver.encoded == [DATA + T.OFFSET]
    assert [launch[2][1] for launch in driver.launches] == [T.MAP.emulated(DATA + T.OFFSET)] * 2
    with pytest.raises(TypeError, match="follows a TensorMap"):
        cuda_runtime.launch(T.PTX, T.ENTRY, (1, 1, 1), (T.THREADS, 1, 1), [DATA, T.MAP, OUT])
    with pytest.raises(TypeError, match="a TensorMap of argument 0, which is not an address"):
        cuda_runtime.launch(T.PTX, T.ENTRY, (1, 1, 1), (T.THREADS, 1, 1), [np.uint32(3), OUT, T.MAP])


def test_the_launcher_without_maps_is_unchanged(monkeypatch):
    driver = FakeDriver(monkeypatch, (8, 8))
    slots = (ctypes.c_uint64 * 2)(DATA, OUT)
    cuda_runtime.Launcher(T.PTX, T.ENTRY, (1, 1, 1), (T.THREADS, 1, 1), slots, 2).launch()
    [[(p0, data), (p1, out)]] = driver.launches
    assert p0 == ctypes.addressof(slots) and p1 == p0 + 8 and (data, out) == (_word(DATA), _word(OUT))
