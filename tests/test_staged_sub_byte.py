"""Staged 4- and 1-bit operands (s4/u4 m16n8k64, b1 m16n8k256): packed K rows copied with
cp.async into the swizzled ring and read with ldmatrix, in the emulator; on sm_90, where s4 mma is
slow, the same 4-bit fragments widened in registers (`warp.widen`) for s8 mmas.

A packed K-major row is bytes like any other: 16 bytes hold 32 s4 or 128 b1 elements, and the
fragment registers of these shapes are ldmatrix's 8x8 b16 matrices, as for 8-bit. What differs
is the addressing: element columns become byte offsets by a shift, and a K row must end on a
byte (cp.async zero-fills whole bytes). Integer mma is exact, so a staged kernel must give the
simple path's words (fragments straight from global memory) as well as the reference's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled


def _kernel(text: str, name: str, sm: str, **options):
    [kernel] = compile_text(text, name, CompileOptions(sm=sm, **options))
    return kernel


def _spec_kernel(spec: GemmSpec, sm: str, **options):
    return _kernel(str(gemm_module(spec)), spec.name, sm, **options)


def _staged(kernel) -> bool:
    return "cp.async" in kernel.ptx and "ldmatrix" in kernel.ptx


STRIDED = """func.func @strided(%a: memref<130x200xsi4, strided<[208, 1], offset: 8>>, %b: memref<200x70xsi4, strided<[1, 216]>>, %c: memref<130x70xsi32>, %d: memref<130x70xsi32, strided<[80, 1]>>) {
  %ta = tile.load %a[0, 0] : memref<130x200xsi4, strided<[208, 1], offset: 8>> -> !tile.tile<130x200xsi4>
  %tb = tile.load %b[0, 0] : memref<200x70xsi4, strided<[1, 216]>> -> !tile.tile<200x70xsi4>
  %tc = tile.load %c[0, 0] : memref<130x70xsi32> -> !tile.tile<130x70xsi32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<130x200xsi4>, !tile.tile<200x70xsi4>, !tile.tile<130x70xsi32> -> !tile.tile<130x70xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<130x70xsi32>, memref<130x70xsi32, strided<[80, 1]>>
  func.return
}"""


def _s(m, n, k, t, **kw):
    return GemmSpec(m, n, k, t, t, "s32", b_layout="col", **kw)


# name -> kernel factory. s4 is native m16n8k64 on sm_80 (sm_90 widens it to s8 unless the shape
# is asked for); b1 is m16n8k256 everywhere.
CASES = {
    "s4-odd": lambda **o: _spec_kernel(_s(130, 70, 200, "s4"), "80", **o),
    "u4-batched": lambda **o: _spec_kernel(_s(37, 45, 136, "u4", batch=3), "80", **o),
    "s4-broadcast-b": lambda **o: _spec_kernel(_s(70, 33, 264, "s4", batch=2, bcast="b"), "80", **o),
    "s4-sm90-shape": lambda **o: _spec_kernel(_s(130, 70, 200, "s4", shape="m16n8k64"), "90", **o),
    "s4-strided": lambda **o: _kernel(STRIDED, "strided", "80", **o),
    "s4-one-stage-k": lambda **o: _spec_kernel(_s(40, 24, 64, "s4"), "80", **o),
    # sm_90: staged as 4-bit, widened to s8/u8 fragments in registers (K permuted within 8s)
    "s4-widened-odd": lambda **o: _spec_kernel(_s(130, 70, 200, "s4"), "90", **o),
    "u4-widened-batched": lambda **o: _spec_kernel(_s(37, 45, 136, "u4", batch=3), "90", **o),
    "s4-widened-broadcast-a": lambda **o: _spec_kernel(_s(33, 70, 264, "s4", batch=2, bcast="a"), "90", **o),
    "s4-widened-strided": lambda **o: _kernel(STRIDED, "strided", "90", **o),
    "b1-xor-odd": lambda **o: _spec_kernel(_s(130, 70, 544, "b1", popc="xor"), "90", **o),
    "b1-and-batched": lambda **o: _spec_kernel(_s(37, 45, 1056, "b1", popc="and", batch=2), "90", **o),
    "b1-xor-broadcast-a": lambda **o: _spec_kernel(_s(33, 70, 800, "b1", popc="xor", batch=2, bcast="a"), "80", **o),
    "b1-one-stage-k": lambda **o: _spec_kernel(_s(40, 24, 256, "b1", popc="xor"), "90", **o),
}


@pytest.mark.parametrize("name", CASES)
def test_staged_sub_byte_matches_reference_and_simple_path(name):
    staged = CASES[name]()
    assert _staged(staged), "K-major sub-byte operands with byte-aligned rows take the staged schedule"
    got = run_compiled(staged, seed=5, on="emulator")
    assert got.ok, got.line()
    simple = CASES[name](stages=0)
    assert not _staged(simple)
    want = run_compiled(simple, seed=5, on="emulator")
    assert want.ok, want.line()
    for x, y in zip(got.outputs.values(), want.outputs.values()):
        np.testing.assert_array_equal(np.ascontiguousarray(x), np.ascontiguousarray(y))


@pytest.mark.parametrize("options", [
    dict(warps="2x2", warp_tile="4x8", stages=3, stage_k=256),
    dict(warps="2x1", warp_tile="2x4", stages=5, stage_k=64),  # 32-byte stage rows
    dict(warps="1x2", warp_tile="1x2", stages=2, stage_k=128),
])
def test_forced_s4_configurations(options):
    kernel = _spec_kernel(_s(257, 129, 448, "s4"), "80", **options)
    assert _staged(kernel)
    res = run_compiled(kernel, seed=8, on="emulator")
    assert res.ok, res.line()


@pytest.mark.parametrize("options", [
    dict(stages=4, stage_k=256),  # 32-byte stage rows
    dict(warps="2x4", warp_tile="2x4", stages=2, stage_k=1024),
])
def test_forced_b1_configurations(options):
    kernel = _spec_kernel(_s(150, 77, 1280, "b1", popc="and"), "90", **options)
    assert _staged(kernel)
    res = run_compiled(kernel, seed=8, on="emulator")
    assert res.ok, res.line()


def test_extreme_s4_values_against_int64():
    """Every product at the extremes (-8 x -8, 7 x -8) through the staged kernel, checked
    against an int64 product computed here."""
    from tilemma.compiler.verify import emulator
    from tilemma.compiler.driver.runner import pack_memory

    m, n, k = 48, 40, 320
    kernel = _spec_kernel(_s(m, n, k, "s4"), "80")
    assert _staged(kernel)
    rng = np.random.default_rng(3)
    a = rng.choice(np.array([-8, 7, -1], np.int8), size=(m, k))
    b = rng.choice(np.array([-8, 7], np.int8), size=(k, n))
    c = rng.integers(-(2**31), 2**31 - 2**20, size=(m, n), dtype=np.int64).astype(np.int32)
    # B is K-major: column j's K elements are contiguous
    bufs = [pack_memory(a.reshape(-1), "si4"), pack_memory(np.ascontiguousarray(b.T).reshape(-1), "si4"),
            c.reshape(-1).copy(), np.zeros(m * n, np.int32)]
    outs = emulator.emulate(kernel.ptx, kernel.name, kernel.grid, kernel.block, bufs,
                            shared_bytes=kernel.abi.shared_bytes)
    want = a.astype(np.int64) @ b.astype(np.int64) + c
    np.testing.assert_array_equal(outs[3].view(np.int32).reshape(m, n).astype(np.int64), want)


@pytest.mark.parametrize("options", [
    dict(warps="2x2", warp_tile="4x4", stages=4, stage_k=128),
    dict(warps="2x1", warp_tile="1x3", stages=2, stage_k=64),  # one fragment read per stage
])
def test_forced_widened_configurations(options):
    kernel = _spec_kernel(_s(257, 129, 448, "s4"), "90", **options)
    assert _staged(kernel) and "m16n8k32.row.col.s32.s8.s8.s32" in kernel.ptx
    res = run_compiled(kernel, seed=8, on="emulator")
    assert res.ok, res.line()


@pytest.mark.parametrize("pattern, replacement", [
    (r"mul\.lo\.u32 (%r\d+), \1, 30;", r"mov.u32 \1, 0;"),  # no sign extension: -8..-1 read as 8..15
    (r"and\.b32 (%r\d+), \1, 252645135;", r"mov.u32 \1, \1;"),  # no 0x0F0F0F0F mask
], ids=["sign", "mask"])
def test_a_broken_widening_gives_wrong_products(pattern, replacement):
    """The widening's sign extension and masks are load-bearing: with one of them removed (every
    instance neutralised) the emulator's result differs from the reference."""
    import re

    kernel = CASES["s4-widened-odd"]()
    assert re.search(pattern, kernel.ptx)
    bad = re.sub(pattern, replacement, kernel.ptx)
    res = run_compiled(dataclasses.replace(kernel, ptx=bad), seed=5, on="emulator")
    assert not res.ok


def test_a_reader_that_drops_the_byte_shift_reads_wrong_elements():
    """ldmatrix's column is an element index turned into bytes by a shift (two s4 a byte): a reader
    that skips it reads other K columns, and the check fails."""
    import re

    kernel = CASES["s4-odd"]()
    shifts = re.findall(r"shr\.u32 (%r\d+), \1, 1;", kernel.ptx)
    assert shifts
    bad = re.sub(r"shr\.u32 (%r\d+), \1, 1;", r"mov.u32 \1, \1;", kernel.ptx)
    res = run_compiled(dataclasses.replace(kernel, ptx=bad), seed=5, on="emulator")
    assert not res.ok


@pytest.mark.parametrize("spec, message", [
    (GemmSpec(37, 45, 232, "s4", "s4", "s32"), "4-bit B must be K-major"),
    (_s(37, 45, 201, "s4"), "K = 201 4-bit elements end inside a byte"),
    (_s(37, 45, 202, "s4"), "A's rows are not 4-byte aligned"),
    (_s(37, 45, 260, "b1", popc="xor"), "K = 260 1-bit elements end inside a byte"),
])
def test_unstageable_sub_byte_kernels(spec, message):
    """Forced stages are refused with the reason; by default the simple path runs, and is right."""
    with pytest.raises(Exception, match=message):
        _spec_kernel(spec, "80", stages=3)
    kernel = _spec_kernel(spec, "80")
    assert not _staged(kernel)
    res = run_compiled(kernel, seed=2, on="emulator")
    assert res.ok, res.line()
