"""The tensor-memory accelerator's tile copy in the emulator (`tma_ops`, the mbarrier's transaction
count in `mbarrier_ops`) and the tensor maps it reads (`compiler/runtime/tensor_map.py`): the
probe kernel of tools/tma_probe.py against its expected shared bytes (the same 5 variants an
H100 ran byte for byte: tests/gpu/test_tma_gpu.py), and the kernels a wrong protocol makes."""

from __future__ import annotations

import numpy as np
import pytest
from tilemma.compiler.runtime.tensor_map import TensorMap, TensorMapError, decode
from tilemma.compiler.verify.emulator import EmulationError, emulate

from tools import tma_probe as P


@pytest.mark.parametrize("variant", P.VARIANTS, ids=lambda v: "x".join(map(str, v)))
def test_probe_matches_the_expected_bytes(variant):
    assert P.run(variant, "emulator") == 0


def test_the_swizzle_is_what_is_checked():
    """The 128-byte swizzle's box differs from the unswizzled one's in most bytes, so the probe tells them apart."""
    eb, cols, rows, c0, c1, _ = P.VARIANTS[0]
    args, want = P.case(eb, cols, rows, c0, c1, 128)
    _, plain = P.case(eb, cols, rows, c0, c1, 0)
    box = eb * cols * rows
    assert (want[:box] != plain[:box]).mean() > 0.5


def _probe(variant=P.VARIANTS[0]):
    args, _ = P.case(*variant)
    return P.probe_ptx(args[1].box_bytes), args


@pytest.mark.parametrize("old, new, message", [
    # the threads read whether or not the phase completed
    ("mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;\n@!%p2 bra.uni $wait;", "",
     r"race: thread \(1, 0, 0\).*which thread \(0, 0, 0\)"),
    ("[%r3], 5120;", "[%r3], 5136;", "deadlock"),  # more bytes expected than land
    ("cvta.param.u64 %rd6, %rd5;", "add.u64 %rd6, %rd5, 256;", "not the address of a tensor-map parameter"),
    ("mov.u32 %r2, smem;", "mov.u32 %r2, smem;\nadd.u32 %r2, %r2, 128;", "1024-byte aligned"),  # a swizzled box
], ids=["read-before-the-wait", "more-bytes-expected", "not-a-map", "misaligned-destination"])
def test_a_wrong_protocol_is_an_error(old, new, message):
    text, args = _probe()
    wrong = text.replace(old, new)
    assert wrong != text
    with pytest.raises(EmulationError, match=message):
        emulate(wrong, P.ENTRY, 1, 128, args, max_steps=20_000)


def test_the_emulated_map_round_trips():
    m = TensorMap(3, 2, (4096, 300, 7), (8192, 8192 * 300), (64, 128, 1), 128)
    base, back = decode(m.emulated(0x10_0000_0040))
    assert base == 0x10_0000_0040 and back == TensorMap(-1, 2, m.dims, m.strides, m.box, 128)


@pytest.mark.parametrize("fields, message", [
    ((3, (64, 8), (128,), (32, 8), 128), "elements of 3 bytes"),
    ((2, (64, 8), (120,), (32, 8), 128), "multiples of 16 bytes"),
    ((2, (64, 8), (128,), (300, 8), 128), "a box of 1 to 256"),
    ((2, (64, 8), (128,), (7, 8), 0), "multiple of 16 bytes"),
    ((2, (256, 8), (512,), (128, 8), 128), "at most its span"),
    ((2, (64, 8), (), (32, 8), 128), "a stride for each"),
])
def test_maps_the_tma_would_refuse_are_refused(fields, message):
    with pytest.raises(TensorMapError, match=message):
        TensorMap(0, *fields).check()


def test_a_misaligned_array_is_refused():
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        TensorMap(0, 2, (64, 8), (128,), (32, 8)).emulated(0x10_0000_0008)


def test_a_map_of_a_scalar_argument_is_refused():
    text, args = _probe()
    args[0] = np.uint64(0)
    with pytest.raises(EmulationError, match="must be a TensorMap of an array argument"):
        emulate(text, P.ENTRY, 1, 128, args)
