"""Staged f64 (and tf32 with a row-major B): `warp.load_shared` fragments from a swizzled
cp.async ring, in the emulator.

f64 `mma` is a chain of IEEE fmas in k order (compiler/mma_arith.py), and the staged loop runs K
in order, one instruction after the other as the simple path does (fragments straight from
global memory), so a staged kernel must give exactly the simple path's bits (tf32 too: the same
mmas on the same rounded values) and, for f64, those of an independent fma chain over the whole
K; the reference
(compiler/reference.py, Dot2) checks every element as well. The swizzle's bank behaviour for the
f64 fragment patterns is counted from the same formula the lowering emits.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilemma.compiler.layouts import fragments
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.compiler.core.isa import MmaVariant
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.dialects import warp

F64 = MmaVariant(16, 8, 16, "f64", "f64", "f64", "f64")


def _kernel(text: str, name: str, **options):
    [kernel] = compile_text(text, name, CompileOptions(sm="90", **options))
    return kernel


def _spec_kernel(spec: GemmSpec, **options):
    return _kernel(str(gemm_module(spec)), spec.name, **options)


def _staged(kernel) -> bool:
    return ("ld.shared.f64" in kernel.ptx or "ld.shared.b32" in kernel.ptx) and "cp.async" in kernel.ptx


STRIDED = """func.func @strided(%a: memref<130x200xf64, strided<[208, 1], offset: 8>>, %b: memref<200x70xf64, strided<[72, 1]>>, %c: memref<130x70xf64>, %d: memref<130x70xf64, strided<[80, 1]>>) {
  %ta = tile.load %a[0, 0] : memref<130x200xf64, strided<[208, 1], offset: 8>> -> !tile.tile<130x200xf64>
  %tb = tile.load %b[0, 0] : memref<200x70xf64, strided<[72, 1]>> -> !tile.tile<200x70xf64>
  %tc = tile.load %c[0, 0] : memref<130x70xf64> -> !tile.tile<130x70xf64>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<130x200xf64>, !tile.tile<200x70xf64>, !tile.tile<130x70xf64> -> !tile.tile<130x70xf64>
  tile.store %td, %d[0, 0] : !tile.tile<130x70xf64>, memref<130x70xf64, strided<[80, 1]>>
  func.return
}"""

CASES = {
    # 2 x 2 CTAs of the default 128 x 64 tile, both ragged; K 136: five K 32 stages through the
    # ring of three, the last one ragged
    "odd": lambda **o: _spec_kernel(GemmSpec(130, 70, 136, "f64", "f64", "f64"), **o),
    "odd-kmajor": lambda **o: _spec_kernel(GemmSpec(130, 70, 136, "f64", "f64", "f64", b_layout="col"), **o),
    "batched": lambda **o: _spec_kernel(GemmSpec(37, 45, 83, "f64", "f64", "f64", batch=3), **o),
    "broadcast-b": lambda **o: _spec_kernel(GemmSpec(70, 33, 50, "f64", "f64", "f64", batch=2, bcast="b"), **o),
    "broadcast-a": lambda **o: _spec_kernel(GemmSpec(33, 70, 50, "f64", "f64", "f64", batch=2, bcast="a"), **o),
    "strided": lambda **o: _kernel(STRIDED, "strided", **o),
    "one-stage-k": lambda **o: _spec_kernel(GemmSpec(40, 24, 16, "f64", "f64", "f64"), **o),
    # tf32 with a row-major B: A through ldmatrix, B through warp.load_shared (rounded rna)
    "tf32-odd": lambda **o: _spec_kernel(GemmSpec(130, 70, 200, "tf32", "tf32", "f32"), **o),
    "tf32-batched": lambda **o: _spec_kernel(GemmSpec(37, 45, 83, "tf32", "tf32", "f32", batch=3), **o),
    "tf32-broadcast-b": lambda **o: _spec_kernel(GemmSpec(70, 33, 50, "tf32", "tf32", "f32", batch=2, bcast="b"), **o),
    # an M-major A too: both through warp.load_shared, their column offsets as XORs (`xor_columns`)
    "tf32-acol-odd": lambda **o: _spec_kernel(GemmSpec(130, 70, 200, "tf32", "tf32", "f32", a_layout="col"), **o),
}


@pytest.mark.parametrize("name", CASES)
def test_staged_f64_matches_reference_and_simple_path_bits(name):
    staged = CASES[name]()
    assert _staged(staged), "f64 and tf32 (row-major B) take the staged schedule by default"
    if name in ("tf32-odd", "tf32-acol-odd"):  # 8-tile warp columns: a line's offsets XOR a row's address
        assert re.search(r"xor\.b32 (%r\d+), %r\d+, (32|64|96);\n\s+ld\.shared\.b32 %r\d+, \[\1\+\d+\]", staged.ptx)
    got = run_compiled(staged, seed=5, on="emulator")
    assert got.ok, got.line()
    simple = CASES[name](stages=0)
    assert not _staged(simple)
    want = run_compiled(simple, seed=5, on="emulator")
    assert want.ok, want.line()
    for x, y in zip(got.outputs.values(), want.outputs.values()):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        np.testing.assert_array_equal(x.view(f"u{x.itemsize}"), y.view(f"u{y.itemsize}"))


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
# Banks: the words of each warp-wide ld.shared.f64, as the lowering addresses them
# ---------------------------------------------------------------------------------------------

ROW_B = """func.func @f(%a: memref<256x256xf64>, %b: memref<256x256xf64{b}>, %d: memref<256x256xf64>) {{
  %ta = tile.load %a[0, 0] : memref<256x256xf64> -> !tile.tile<256x256xf64>
  %tb = tile.load %b[0, 0] : memref<256x256xf64{b}> -> !tile.tile<256x256xf64>
  %z = tile.constant 0.0 : !tile.tile<256x256xf64>
  %td = tile.mma %ta, %tb, %z : !tile.tile<256x256xf64>, !tile.tile<256x256xf64>, !tile.tile<256x256xf64> -> !tile.tile<256x256xf64>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xf64>, memref<256x256xf64>
  func.return
}}"""


def _swizzled(b_layout: str, **tiling):
    from xdsl.context import Context

    from tilemma.compiler.driver.pipeline import parse
    from tilemma.passes.tile.select_mma import SelectMma
    from tilemma.passes.warp.swizzle_shared import SwizzleShared
    from tilemma.passes.tile_to_warp import TileToWarp

    module, _ = parse(ROW_B.format(b=b_layout), "f")
    ctx = Context()
    for p in (SelectMma(sm="90"), TileToWarp(**tiling), SwizzleShared()):
        p.apply(ctx, module)
    return [o for o in module.walk() if isinstance(o, warp.LoadSharedOp)]


@pytest.mark.parametrize("b_layout,tiling", [
    ("", {}),
    ("", dict(warps="1x2", warp_tile="1x2", stages=2)),  # 16-f64 (128-byte) B rows
    # 128-f64 (1 KiB) B rows (4x4 warps of these tiles spill: 128 registers a thread of 512)
    ("", dict(warps="2x4", warp_tile="2x4", stages=2)),
    (", strided<[1, 256]>", {}),
])
def test_f64_fragment_reads_take_the_fewest_wavefronts(b_layout, tiling):
    """Every ld.shared.f64 of every A and B fragment takes 2 wavefronts (256 bytes: the fewest);
    for a row-major B that needs the phase multiplier 5, since the plain XOR leaves a fragment's
    4 k rows x 64 bytes in one half of the banks (4 wavefronts)."""
    from tilemma.passes.warp.swizzle_shared import read_wavefronts

    loads = _swizzled(b_layout, **tiling)
    assert loads and all(warp.swizzle_mult(op.ref.type) is not None for op in loads)
    for op in loads:
        nvals = 8 if op.result.type.role == warp.Operand.A else 4
        assert read_wavefronts(op, warp.swizzle_mult(op.ref.type)) == 2 * nvals
        assert read_wavefronts(op, None) > 2 * nvals  # unswizzled: up to 8 rows in one bank group
    row_major_b = [op for op in loads if op.result.type.role == warp.Operand.B and op.transposed is None]
    for op in row_major_b:
        assert warp.swizzle_mult(op.ref.type) == 5 and read_wavefronts(op, 1) == 4 * 4
    assert bool(row_major_b) == (b_layout == "")


def test_odd_multipliers_keep_eight_rows_at_one_column_apart():
    """What ldmatrix and the copies rely on holds for every multiplier the pass may pick."""
    from tilemma.passes.warp.swizzle_shared import MULTIPLIERS

    for row_bytes in (64, 128, 256, 512):
        per_line, period = warp.swizzle_phases(row_bytes)
        rows = np.arange(8 * per_line, step=per_line)[:period]
        for mult in MULTIPLIERS:
            for granule in range(min(8, row_bytes // 16)):
                placed = warp.swizzle_granule(rows, granule, row_bytes, mult)
                assert len(set(placed.tolist())) == period


def test_wavefront_model():
    from tilemma.passes.warp.swizzle_shared import wavefronts

    lane = np.arange(32)
    assert wavefronts(lane * 4, 4) == 1  # one word per bank
    assert wavefronts(lane * 8, 8) == 2  # 256 bytes
    assert wavefronts(lane * 128, 4) == 32  # one bank, 32 words
    assert wavefronts(np.zeros(32, int), 4) == 1  # a broadcast
    # 8-byte loads are served a half-warp at a time: each half here reads 2 rows of 128 bytes
    # in its own 16 banks (2 wavefronts each), which a whole-warp count would call 2 in all
    halves = (lane % 8) * 8 + (lane // 8 % 2) * 128 + (lane // 16) * 64
    assert wavefronts(halves, 8) == 4
    assert wavefronts(np.concatenate([halves[::2], halves[1::2]]), 8) == 4


def test_tf32_row_major_b_reads_take_the_fewest_wavefronts():
    """A tf32 B fragment read from a K x N stage: 4 k rows x 32 bytes per ld.shared.b32, one
    wavefront with the multiplier 5 the pass picks (2 with the plain XOR)."""
    from xdsl.context import Context

    from tilemma.compiler.driver.pipeline import parse
    from tilemma.passes.tile.select_mma import SelectMma
    from tilemma.passes.warp.swizzle_shared import SwizzleShared, read_wavefronts
    from tilemma.passes.tile_to_warp import TileToWarp

    spec = GemmSpec(256, 256, 256, "tf32", "tf32", "f32")
    module, _ = parse(str(gemm_module(spec)), spec.name)
    for p in (SelectMma(sm="90"), TileToWarp(), SwizzleShared()):
        p.apply(Context(), module)
    loads = [o for o in module.walk() if isinstance(o, warp.LoadSharedOp)]
    assert loads and all(o.result.type.role == warp.Operand.B for o in loads)
    for op in loads:
        assert warp.swizzle_mult(op.ref.type) == 5
        assert read_wavefronts(op, 5) == 2 and read_wavefronts(op, 1) == 4


def test_every_64bit_candidate_compiles_to_what_it_says_and_is_right():
    """`tilemma tune` times these; each one is a staged kernel that the emulator checks."""
    from tilemma.compiler.core import configs

    spec = GemmSpec(70, 45, 40, "f64", "f64", "f64")
    assert configs.family("f64", "f64") == "64bit"
    for cand in configs.CANDIDATES["64bit"]:
        k = _spec_kernel(spec, warps=cand.warps, warp_tile=cand.warp_tile, stages=cand.stages,
                         stage_k=cand.stage_k, tune_cache="")
        assert k.abi.config == str(cand) and _staged(k)
        res = run_compiled(k, seed=2, on="emulator")
        assert res.ok, f"{cand}: {res.line()}"


@pytest.mark.parametrize("edit,message", [
    # one group fewer waited for: a stage is read while its copies are in flight
    (("cp.async.wait_group 1;", "cp.async.wait_group 2;"), "cp.async in flight"),
    # no barrier between this iteration's ld.shared reads and the next refill of that stage
    (("bar.sync 0;", "// bar.sync 0;"), "race"),
])
def test_emulator_catches_a_broken_staged_f64_kernel(edit, message):
    """The waits and barriers the ld.shared reads rely on are load-bearing in the emulator."""
    import dataclasses

    from tilemma.compiler.verify.emulator import EmulationError

    kernel = CASES["odd"]()
    assert edit[0] in kernel.ptx
    bad = dataclasses.replace(kernel, ptx=kernel.ptx.replace(*edit))
    with pytest.raises(EmulationError, match=message):
        run_compiled(bad, seed=5, on="emulator")


def test_a_reader_that_misses_the_multiplier_reads_wrong_elements():
    """Copies and readers must agree on the swizzle: the readers' x5 dropped gives wrong data."""
    import dataclasses
    import re

    kernel = CASES["odd"]()
    lines = kernel.ptx.split("\n")
    # the multiplier of the B reads (inside the K loop; the copies' is computed at the entry)
    loop = next(i for i, l in enumerate(lines) if l.startswith("$k_loop"))
    muls = [i for i, l in enumerate(lines) if i > loop and re.search(r"mul\.lo\.u32 %r\d+, %r\d+, 5;", l)]
    assert muls
    for i in muls:
        lines[i] = lines[i].replace(", 5;", ", 1;")
    res = run_compiled(dataclasses.replace(kernel, ptx="\n".join(lines)), seed=5, on="emulator")
    assert not res.ok


@pytest.mark.parametrize("options,message", [
    # f64 fragments are two registers a value: a 4x4 warp tile holds 224 of them
    (dict(warp_tile="4x4"), "warp tile 4x4 holds 224 fragment registers per thread"),
    (dict(warps="2x2", warp_tile="2x4", stages=5, stage_k=128), "5 stages of K 128 with a 64x64 CTA tile need 655360 bytes of shared memory"),
    (dict(stages=3, stage_k=8), "stage-k must be 0 \\(automatic\\) or one of 16, 32, 64, 128, 256, 512, 1024, got 8"),
])
def test_f64_limits_are_located_errors(options, message):
    with pytest.raises(Exception, match=message):
        _spec_kernel(GemmSpec(256, 256, 256, "f64", "f64", "f64"), **options)
