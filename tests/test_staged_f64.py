"""Staged f64: `warp.load_shared` fragments from a swizzled cp.async ring, in the emulator.

f64 `mma` is a chain of IEEE fmas in k order (compiler/mma_arith.py), and the staged loop runs K
in order, so a staged kernel must give exactly the bits of the simple path (fragments straight
from global memory) and of an independent fma chain over the whole K; the reference
(compiler/reference.py, Dot2) checks every element as well. The swizzle's bank behaviour for the
f64 fragment patterns is counted from the same formula the lowering emits.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilemma.compiler import fragments, mma_arith
from tilemma.compiler.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.mma_layouts import instruction_layouts
from tilemma.compiler.isa import MmaVariant
from tilemma.compiler.pipeline import CompileOptions, compile_text
from tilemma.compiler.runner import run_compiled
from tilemma.dialects import warp

F64 = MmaVariant(16, 8, 16, "f64", "f64", "f64", "f64")


def _kernel(text: str, name: str, **options):
    [kernel] = compile_text(text, name, CompileOptions(sm="90", **options))
    return kernel


def _spec_kernel(spec: GemmSpec, **options):
    return _kernel(str(gemm_module(spec)), spec.name, **options)


def _staged(kernel) -> bool:
    return "ld.shared.f64" in kernel.ptx and "cp.async" in kernel.ptx


STRIDED = """func.func @strided(%a: memref<130x200xf64, strided<[208, 1], offset: 8>>, %b: memref<200x70xf64, strided<[72, 1]>>, %c: memref<130x70xf64>, %d: memref<130x70xf64, strided<[80, 1]>>) {
  %ta = tile.load %a[0, 0] : memref<130x200xf64, strided<[208, 1], offset: 8>> -> !tile.tile<130x200xf64>
  %tb = tile.load %b[0, 0] : memref<200x70xf64, strided<[72, 1]>> -> !tile.tile<200x70xf64>
  %tc = tile.load %c[0, 0] : memref<130x70xf64> -> !tile.tile<130x70xf64>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<130x200xf64>, !tile.tile<200x70xf64>, !tile.tile<130x70xf64> -> !tile.tile<130x70xf64>
  tile.store %td, %d[0, 0] : !tile.tile<130x70xf64>, memref<130x70xf64, strided<[80, 1]>>
  func.return
}"""

CASES = {
    "odd": lambda **o: _spec_kernel(GemmSpec(130, 70, 200, "f64", "f64", "f64"), **o),
    "odd-kmajor": lambda **o: _spec_kernel(GemmSpec(130, 70, 200, "f64", "f64", "f64", b_layout="col"), **o),
    "batched": lambda **o: _spec_kernel(GemmSpec(37, 45, 83, "f64", "f64", "f64", batch=3), **o),
    "broadcast-b": lambda **o: _spec_kernel(GemmSpec(70, 33, 50, "f64", "f64", "f64", batch=2, bcast="b"), **o),
    "broadcast-a": lambda **o: _spec_kernel(GemmSpec(33, 70, 50, "f64", "f64", "f64", batch=2, bcast="a"), **o),
    "strided": lambda **o: _kernel(STRIDED, "strided", **o),
    "one-stage-k": lambda **o: _spec_kernel(GemmSpec(40, 24, 16, "f64", "f64", "f64"), **o),
}


@pytest.mark.parametrize("name", CASES)
def test_staged_f64_matches_reference_and_simple_path_bits(name):
    staged = CASES[name]()
    assert _staged(staged), "f64 should take the staged schedule by default"
    got = run_compiled(staged, seed=5, on="emulator")
    assert got.ok, got.line()
    simple = CASES[name](stages=0)
    assert not _staged(simple)
    want = run_compiled(simple, seed=5, on="emulator")
    assert want.ok, want.line()
    for x, y in zip(got.outputs.values(), want.outputs.values()):
        np.testing.assert_array_equal(np.asarray(x).view(np.uint64), np.asarray(y).view(np.uint64))


@pytest.mark.parametrize("config", [
    dict(warps="2x2", warp_tile="2x4", stages=2, stage_k=32),
    dict(warps="4x2", warp_tile="2x2", stages=4, stage_k=16),
    dict(warps="1x1", warp_tile="1x1", stages=5, stage_k=64),
])
def test_staged_f64_configs_bit_exact_to_an_fma_chain(config):
    """Every element equals fma(a[K-1], b[K-1], ... fma(a[0], b[0], c)) in IEEE f64, on data whose
    products cancel and round (normal values over 40 binades)."""
    m, n, k = 50, 36, 97
    rng = np.random.default_rng(11)

    def wide(*shape):
        return rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))

    a, b, c = wide(m, k), wide(k, n), wide(m, n)
    kernel = _spec_kernel(GemmSpec(m, n, k, "f64", "f64", "f64", b_layout="col"), **config)
    assert _staged(kernel)
    res = run_compiled(kernel, seed=11, on="emulator", inputs={"a": a, "b": b, "c": c})
    assert res.ok, res.line()
    want = mma_arith.fma_chain(a, b, c)
    got = np.asarray(res.outputs["d"]).reshape(want.shape)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


# ---------------------------------------------------------------------------------------------
# Banks: the words of one warp-wide ld.shared.f64, as the lowering addresses them
# ---------------------------------------------------------------------------------------------


def _wavefronts(byte_addresses: np.ndarray) -> int:
    """Shared-memory wavefronts a warp's 8-byte loads need at least: the most distinct 4-byte
    words any one of the 32 banks must deliver."""
    words = np.unique(np.concatenate([byte_addresses // 4, byte_addresses // 4 + 1]))
    return int(np.bincount(words % 32, minlength=32).max())


def _addresses(operand: str, transposed: bool, row_bytes: int, swizzle: bool) -> list[np.ndarray]:
    lays = instruction_layouts(F64)
    rows, cols = fragments.coords(lays.a if operand == "a" else lays.b)
    if transposed:
        rows, cols = cols, rows
    out = []
    for v in range(rows.shape[1]):
        r, c = rows[:, v], cols[:, v] * 8
        if swizzle:
            c = warp.swizzle_granule(r, c // 16, row_bytes) * 16 + c % 16
        out.append(r * row_bytes + c)
    return out


@pytest.mark.parametrize("operand,transposed,row_bytes,swizzled,plain", [
    ("a", False, 128, 2, 8),  # A, M x K stage of 16 f64: 8 rows at one column -> 8 ways unswizzled
    ("b", True, 128, 2, 8),  # K-major B, N x K stage: the same pattern
    ("b", False, 512, 4, 4),  # row-major B, K x N stage: 4 k rows x 64 bytes stay in one half
])
def test_f64_fragment_reads_and_the_granule_swizzle(operand, transposed, row_bytes, swizzled, plain):
    """The 16-byte granule XOR makes the A and K-major B reads take the minimum 2 wavefronts
    (256 bytes); a row-major B's 4 k rows x 64 bytes XOR within one 64-byte half and take 4."""
    for addr in _addresses(operand, transposed, row_bytes, True):
        assert _wavefronts(addr) == swizzled
    for addr in _addresses(operand, transposed, row_bytes, False):
        assert _wavefronts(addr) == plain
