"""A stage wider than a swizzle span copied as one TMA box of several (`warp-tma-blocks`,
`warp.copy_tma`'s `blocks`): what the pass proves before it merges (`multiple_of`), the op's
verifier, the three-dimensional map a merged copy's kernel carries, and which kernels merge.
Emulated word for word against the mma.sync kernel: tests/specialize_cases.py's TMA_CASES (an
M-major A and an N-major B whose last tile's blocks leave the array, a batch, a ragged K);
lit: tests/lit/passes/warp-tma-blocks.mlir; GPU: tests/gpu/test_specialize_gpu.py."""

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, NoneAttr, f16, i64
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.runtime.tensor_map import TensorMap
from tilemma.dialects import warp
from tilemma.passes.warp.tma_blocks import multiple_of

from tests.specialize_cases import TMA
from tests.wgmma_cases import assert_assembles_without_spills, compiled, needs_ptxas


def _index(value: int | None = None):
    if value is None:
        return create_ssa_value(IndexType())
    return arith.ConstantOp(IntegerAttr(value, IndexType())).result


def test_multiple_of_sees_constants_products_and_sums():
    x = _index()
    assert multiple_of(_index(256), 64) and not multiple_of(_index(96), 64)
    assert multiple_of(arith.MuliOp(x, _index(256)).result, 64)
    assert multiple_of(arith.MuliOp(_index(128), x).result, 64)
    assert not multiple_of(arith.MuliOp(x, _index(32)).result, 64)
    assert not multiple_of(x, 64)  # unknown
    tile = arith.MuliOp(x, _index(256)).result
    assert multiple_of(arith.AddiOp(tile, _index(64)).result, 64)
    assert not multiple_of(arith.AddiOp(tile, _index(16)).result, 64)
    assert not multiple_of(arith.AddiOp(tile, x).result, 64)


def _copy(blocks: int | None, cols_extent: int = 4096, transpose: bool = False, cols: int = 64) -> warp.CopyTmaOp:
    ref = create_ssa_value(MemRefType(f16, [512, 4096]))
    bars = create_ssa_value(MemRefType(i64, [4], memory_space=IntegerAttr(warp.SHARED, i64)))
    layout = warp.SwizzledLayoutAttr(1) if cols == 64 else NoneAttr()  # (another width: an unswizzled stage)
    dest = create_ssa_value(MemRefType(f16, [16, 64, cols], layout, IntegerAttr(warp.SHARED, i64)))
    i = create_ssa_value(IndexType())
    extent = (1, cols_extent, 512) if transpose else (1, 512, cols_extent)
    op = warp.CopyTmaOp(ref, [i, i, i], dest, i, bars, i, (0, 0), extent, 256, transpose)
    if blocks is not None:
        op.blocks = IntegerAttr(blocks, i64)
    return op


@pytest.mark.parametrize("blocks, extent, transpose, message", [
    (None, 4096, False, None),
    (4, 4096, False, None),
    (4, 4096, True, None),
    (4, 4000, False, "need a window of whole blocks; its extent is 4000"),
    (4, 4000, True, "blocks of 64 rows need a window of whole blocks"),
    (1, 4096, False, "blocks is 2 to 256 stages, not 1"),
    (300, 4096, False, "blocks is 2 to 256 stages, not 300"),
    (4, 4104, False, "blocks of 24 columns: a block is a swizzle's span, a power of two"),
])
def test_the_verifier_takes_whole_blocks(blocks, extent, transpose, message):
    op = _copy(blocks, extent, transpose, 24 if extent == 4104 else 64)
    if message is None:
        op.verify()
        assert op.box_bytes == (blocks or 1) * 64 * 64 * 2 and op.block_count == (blocks or 1)
    else:
        with pytest.raises(VerifyException, match=message):
            op.verify()


def test_a_merged_copy_s_map_counts_blocks():
    """The 4096^3 sparse kernel with an N-major B: B's stage of 256 columns is one 3-d box (64
    columns, 64 K rows, 4 blocks) of a map whose third dimension strides 64 columns; A's stays 2-d."""
    k = compiled(GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True), wgmma=True, **TMA,
                 warps="8x1", warp_tile="1x32")
    a, b = k.abi.tensor_maps
    assert b == TensorMap(2, 2, (64, 4096, 64), (8192, 128), (64, 64, 4), 128)
    assert len(a.dims) == 2
    assert k.ptx.count("cp.async.bulk.tensor.3d") == 1 and k.ptx.count("cp.async.bulk.tensor.2d") == 1
    assert type(k.abi).from_dict(k.abi.to_dict()).tensor_maps == k.abi.tensor_maps


@pytest.mark.parametrize("spec, merged", [
    (GemmSpec(512, 512, 512, "f16", "f16", "f32"), True),  # an N-major B of 2 blocks
    (GemmSpec(512, 512, 512, "f16", "f16", "f32", b_layout="col"), False),  # K-major: one block a stage
    (GemmSpec(512, 200, 512, "f16", "f16", "f32"), False),  # 200 columns: no whole blocks
    (GemmSpec(512, 512, 512, "f16", "f16", "f32", a_layout="col", b_layout="col"), True),  # an M-major A
], ids=lambda x: getattr(x, "name", str(x)))
def test_which_kernels_merge(spec, merged):
    k = compiled(spec, wgmma=True, **TMA)
    assert ("cp.async.bulk.tensor.3d" in k.ptx) == merged
    assert any(len(m.box) == 3 for m in k.abi.tensor_maps) == merged


def test_clusters_keep_their_multicast_halves():
    """In a cluster B's blocks are shared out between the CTAs (each multicasts its half): they stay
    copies of their own."""
    k = compiled(GemmSpec(512, 512, 512, "f16", "f16", "f32"), wgmma=True, producers=4, tma=1, cluster=2)
    assert "multicast::cluster" in k.ptx and "cp.async.bulk.tensor.3d" not in k.ptx


@needs_ptxas
def test_ptxas_takes_the_merged_copies():
    for spec in (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
                 GemmSpec(192, 320, 1000, "f16", "f16", "f32", a_layout="col"),
                 GemmSpec(96, 192, 320, "bf16", "bf16", "f32", batch=2)):
        assert_assembles_without_spills(compiled(spec, wgmma=True, **TMA).ptx)
