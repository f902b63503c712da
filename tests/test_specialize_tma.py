"""The producers' copies by the TMA (`tile-plan{tma}`, `warp.copy_tma`): the located refusals,
the tensor maps each kernel's ABI carries (what every launch encodes), the op's verifier, ptxas
with no spills, the clusters that share B's stages (`tile-plan{cluster=2}`), and in the emulator - which models the TMA's copy, its zeros past the array and
its swizzle, and the mbarrier's transaction count (tests/test_emulator_tma.py) - every output
word equal to the mma.sync (mma.sp) kernel's of the same problem. (Lit:
tests/lit/passes/warp-specialize-tma.mlir; GPU: tests/gpu/test_specialize_gpu.py.)"""

import re

import pytest
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, f16, i64
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.runtime.tensor_map import TensorMap
from tilemma.compiler.verify.emulator.program import AHEAD
from tilemma.dialects import warp

from tests.specialize_cases import CLUSTER, CLUSTER_CASES, PERSISTENT, PERSISTENT_CASES, TMA, TMA_CASES
from tests.wgmma_cases import assert_assembles_without_spills, compiled, like_the_sm90_kernel, needs_ptxas

F16 = GemmSpec(4096, 4096, 4096, "f16", "f16", "f32")


@pytest.mark.parametrize("ahead", AHEAD)
@pytest.mark.parametrize("spec, extra, sm90", TMA_CASES, ids=[c[0].name for c in TMA_CASES])
def test_emulated_like_the_mma_sync_kernel(spec, extra, sm90, ahead):
    """Every output word the mma.sync kernel's, either side of each role running ahead (`ahead`)."""
    like_the_sm90_kernel(spec, {**TMA, **extra}, "emulator", 11, "wgmma", sm90, ahead)


@pytest.mark.parametrize("ahead", AHEAD)
@pytest.mark.parametrize("spec, extra, sm90", CLUSTER_CASES, ids=[c[0].name for c in CLUSTER_CASES])
def test_clusters_emulated_like_the_mma_sync_kernel(spec, extra, sm90, ahead):
    """Pairs of CTAs sharing B's stages (multicast halves, both consumers releasing each stage,
    the producers' tail): every output word the mma.sync kernel's, rank 0 ahead of rank 1 in the
    emulator and rank 1 ahead of rank 0 (`ahead`)."""
    like_the_sm90_kernel(spec, {**CLUSTER, **extra}, "emulator", 11, "wgmma", sm90, ahead)


@pytest.mark.parametrize("ahead", AHEAD)
@pytest.mark.parametrize("spec, extra, sm90", PERSISTENT_CASES, ids=[c[0].name for c in PERSISTENT_CASES])
def test_persistent_emulated_like_the_mma_sync_kernel(spec, extra, sm90, ahead):
    """A grid of fewer CTAs than tiles, each looping over its tiles with the ring carried on: every
    output word the mma.sync kernel's, either side of each role ahead (`ahead`)."""
    like_the_sm90_kernel(spec, {**PERSISTENT, **extra}, "emulator", 11, "wgmma", sm90, ahead)


def test_a_persistent_kernel_loops_over_its_tiles():
    """3 CTAs over 8 tiles: the grid, the config and the ABI's record say so; each role's loop starts
    at the CTA's index and steps by the grid; the consumers release the stage still in flight after
    each tile (one arrival more than the unrolled loop's); a tile count past the grid's is no loop."""
    k = compiled(GemmSpec(256, 512, 1024, "f16", "f16", "f32"), wgmma=True, **PERSISTENT,
                 warps="8x1", warp_tile="1x16")
    assert k.abi.grid == (3, 1, 1) and k.abi.persistent == 3 and k.abi.config.endswith("tma=1 persistent=3")
    assert k.abi.to_dict()["persistent"] == 3 and type(k.abi).from_dict(k.abi.to_dict()).persistent == 3
    assert len(re.findall(r"mov\.u32 %r\d+, %ctaid\.x;", k.ptx)) == 1  # read once, the loops' start
    assert len(re.findall(r"setp\.ge\.u32 %p\d+, %r\d+, 8;", k.ptx)) == 2  # each role's: no tile left
    assert len(re.findall(r"add\.u32 %r\d+, %r\d+, 3;", k.ptx)) >= 2  # the next tile, P on
    one = compiled(GemmSpec(256, 512, 1024, "f16", "f16", "f32"), wgmma=True, **{**PERSISTENT, "persistent": 8},
                   warps="8x1", warp_tile="1x16")
    assert one.abi.grid == (8, 1, 1) and one.abi.persistent == 0  # a CTA a tile: not persistent


@pytest.mark.parametrize("spec, expected", [
    # a K-major B: as many CTAs as the SMs hold (one: 205 KiB of stages, a ring of
    # `configs.WGMMA_PRODUCER_STAGES`' 5), over more tiles
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
     "stages=5 stage-k=64 producers=4 tma=1 persistent=132"),
    (GemmSpec(512, 11008, 4096, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
     "stages=5 stage-k=64 producers=4 tma=1 persistent=132"),
    # an N-major B too, with its stage one TMA copy (`warp-tma-blocks`)
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
     "stages=5 stage-k=64 producers=4 tma=1 persistent=132"),
    # ... where a tile is no whole number of rings too (63 stages on a ring of 5)
    (GemmSpec(4096, 4096, 4032, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
     "stages=5 stage-k=64 producers=4 tma=1 persistent=132"),
    # no more stages than K has (4 of K 64), and not with fewer tiles than CTAs
    (GemmSpec(2048, 2048, 256, "f16", "f16", "f32", pre_compressed=True), "stages=4 stage-k=64 producers=4 tma=1"),
    # the narrow tiles (`configs.WGMMA_NARROW`) keep theirs, and fewer tiles than CTAs: one a CTA
    (GemmSpec(512, 4096, 4096, "f16", "f16", "f32", pre_compressed=True), "stages=4 stage-k=128 producers=4 tma=1"),
], ids=lambda x: x.name if isinstance(x, GemmSpec) else None)
def test_persistent_by_itself(spec, expected):
    """`configs.WGMMA_PERSISTENT` and `configs.WGMMA_PRODUCER_STAGES`: the sparse kernels, where they can."""
    k = compiled(spec, "90a")
    assert k.abi.config.endswith(expected), k.abi.config


def _without_tail(ptx: str) -> str:
    """The cluster kernel with its producers' tail wait (the last mbarrier wait before they leave)
    always passing: they leave before the peer's last releases."""
    lines = ptx.split("\n")
    leave = next(i for i, line in enumerate(lines) if re.fullmatch(r"\s*@%p\d+ ret;", line))
    wait = max(i for i in range(leave) if "mbarrier.try_wait.parity" in lines[i])
    pred = re.search(r"try_wait\.parity\.shared::cta\.b64 (%p\d+),", lines[wait]).group(1)
    lines[wait] = f"    setp.eq.u32 {pred}, 1, 1;"
    return "\n".join(lines)


def _without_peer_release(ptx: str) -> str:
    """... with the consumers' releases at the peer's `empty` barriers dropped (and their count)."""
    out = re.sub(r"\n\s*(@%p\d+ )?mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\];", "", ptx)
    return re.sub(r"(mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\]), 264;", r"\1, 256;", out)


def _without_cluster_sync(ptx: str) -> str:
    """... with no cluster barrier between making the mbarriers and using the peer's."""
    out = re.sub(r"\n\s*barrier\.cluster\.(arrive|wait)[.a-z]*;", "", ptx)
    assert "barrier.cluster" not in out
    return out


@pytest.mark.parametrize("broken, error", [(_without_tail, "has exited"),
                                           (_without_peer_release, "a wgmma.mma_async still reads|not yet landed"),
                                           (_without_cluster_sync, "used before mbarrier.init")],
                         ids=["no-tail", "no-peer-release", "no-cluster-sync"])
@pytest.mark.parametrize("ahead", AHEAD)
def test_the_emulator_catches_a_cluster_kernel_that_leaves_early_or_skips_the_peer(broken, error, ahead):
    """The emulator runs a cluster's CTA ranks (and each role's warpgroups) apart from the start,
    rank 0 ahead or rank 1 (`Program._execute_apart`, `ahead`): producers that leave before the
    peer's last releases, a stage refilled by multicast before the peer's consumers released it,
    or a peer's barrier used before the peer made it (no cluster sync) fail the run either way,
    where a lockstep run computed the right D from all three; the kernel as built runs right."""
    import dataclasses

    from tilemma.compiler.driver.runner import run_compiled
    from tilemma.compiler.verify.emulator.machine import EmulationError

    k = compiled(GemmSpec(256, 256, 512, "f16", "f16", "f32"), wgmma=True, **CLUSTER)
    assert run_compiled(k, 3, "emulator", ahead=ahead).ok
    ptx = broken(k.ptx)
    assert ptx != k.ptx
    with pytest.raises(EmulationError, match=error):
        run_compiled(dataclasses.replace(k, ptx=ptx), 3, "emulator", ahead=ahead)


def test_a_cluster_kernel_shares_b():
    """The entry asks for clusters of 2; B's two blocks a stage are issued one by each CTA's producer,
    to both; each CTA's consumers release a stage at their own barrier and, lane 0 a warp, at the
    peer's, whose count says so (256 + 8); the producers wait for the last stages' releases."""
    k = compiled(GemmSpec(256, 256, 512, "f16", "f16", "f32"), wgmma=True, **CLUSTER)
    assert ".reqnctapercluster 2, 1, 1\n" in k.ptx and k.abi.config.endswith("tma=1 cluster=2")
    multicast = re.findall(r"@(%p\d+) cp\.async\.bulk\.tensor\.2d\.[^ ]*\.multicast::cluster ", k.ptx)
    assert len(multicast) == 2 and multicast[0] != multicast[1]  # one issuing CTA each
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\], 264;", k.ptx)) == 4
    assert "mapa.shared::cluster.u32" in k.ptx and "mbarrier.arrive.shared::cluster.b64 _," in k.ptx
    assert "fence.mbarrier_init.release.cluster;\n    barrier.cluster.arrive.release.aligned;" in k.ptx


@pytest.mark.parametrize("s, sm, kw, message", [
    (F16, "90a", {"wgmma": True, "producers": 0}, "tma: the TMA's copies are a producer warpgroup's (producers=4)"),
    (F16, "90", {}, "tma: the TMA's copies are a producer warpgroup's, which feeds the warpgroup mma"),
    (GemmSpec(256, 256, 512, "s8", "s8", "s32"), "90a", {"wgmma": True, "shared_transpose": False},
     "tma: the transposing fill stages B through registers"),
    (GemmSpec(256, 256, 512, "s8", "s8", "s32"), "90a", {"wgmma": True},
     "tma: each producer thread copies the rows of B it transposes in shared memory itself"),
    (GemmSpec(256, 256, 512, "tf32", "tf32", "f32", b_layout="col", rounding="rna"), "90a", {"wgmma": True},
     "tma: a tf32 stage is rounded where it lies"),
    (GemmSpec(256, 256, 512, "f16", "f16", "f32", dynamic="mnk"), "90a", {"wgmma": True, "stride_multiple": 8},
     "tma: sizes known at launch"),
    (GemmSpec(256, 256, 1004, "f16", "f16", "f32"), "90a", {"wgmma": True},
     "tma: A's strides (1004, 1) and offset 0 are no tensor map's"),
    (F16, "90a", {"wgmma": True, "tma": 0, "cluster": 2}, "cluster: the CTAs of a cluster share B's stages by the TMA"),
    (GemmSpec(384, 256, 512, "f16", "f16", "f32"), "90a", {"wgmma": True, "cluster": 2},
     "cluster: M = 384 makes 3 rows of 128-row tiles, which do not pair"),
    (F16, "90", {"cluster": 2}, "cluster: clusters share B's stages between warpgroup kernels"),
    (F16, "90a", {"wgmma": True, "tma": 0, "persistent": 100},
     "persistent: a persistent kernel's producers copy by the TMA"),
    (F16, "90a", {"wgmma": True, "cluster": 2, "persistent": 100},
     "persistent: a persistent kernel runs without a cluster"),
    (GemmSpec(512, 512, 512, "f16", "f16", "f32", batch=2), "90a", {"wgmma": True, "persistent": 4},
     "persistent: a persistent kernel loops over one batch's tiles, not 2"),
    (F16, "90", {"persistent": 100}, "persistent: persistent CTAs are warpgroup kernels'"),
])
def test_refusals_are_located(s, sm, kw, message):
    from tilemma.compiler.driver.diagnostics import LocatedVerifyError

    with pytest.raises(LocatedVerifyError) as e:
        compiled(s, sm, **{"producers": 4, "tma": 1, **kw})
    assert message in str(e.value) and e.value.span is not None


def test_the_abi_carries_the_maps():
    """A map per operand, after the pointers: A's rows (K contiguous) in boxes of the 128 x 64
    stage, B's as stored (N contiguous) in the 64 x 64 blocks of the stage, both in the 128-byte
    swizzle the warpgroups read; a batched A's third dimension, one matrix a box, beside a
    broadcast B's two."""
    k = compiled(GemmSpec(130, 200, 1000, "f16", "f16", "f32"), wgmma=True, **TMA)
    assert k.abi.tensor_maps == (TensorMap(0, 2, (1000, 130), (2000,), (64, 128), 128),
                                 TensorMap(1, 2, (200, 1000), (400,), (64, 64), 128))
    assert ".param .u64 p_d,\n    .param .align 64 .b8 p_a_map0[128],\n    .param .align 64 .b8 p_b_map0[128]\n" in k.ptx
    batched = compiled(GemmSpec(96, 256, 384, "u8", "u8", "s32", batch=2, bcast="b", b_layout="col"), wgmma=True, **TMA)
    a_map, b_map = batched.abi.tensor_maps
    assert (a_map.dims, a_map.strides, a_map.box) == ((384, 96, 2), (384, 96 * 384), (128, 128, 1))
    assert (b_map.dims, b_map.strides, b_map.box) == ((384, 256), (384,), (128, 128))  # two blocks a stage
    sparse = compiled(GemmSpec(128, 256, 1024, "f16", "f16", "f32", pre_compressed=True), wgmma=True, **TMA)
    assert [m.of for m in sparse.abi.tensor_maps] == [0, 2]  # the values and B; the metadata stays on cp.async
    assert "cp.async.cg.shared.global" in sparse.ptx and "cp.async.bulk.tensor.2d" in sparse.ptx


@needs_ptxas
@pytest.mark.parametrize("spec", [
    F16,
    GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
], ids=lambda s: s.name)
def test_ptxas_no_spills(spec):
    assert_assembles_without_spills(compiled(spec, wgmma=True, **TMA).ptx)


def _copy(dest: MemRefType, rows: int = 64) -> warp.CopyTmaOp:
    ref = create_ssa_value(MemRefType(f16, [rows, 4096]))
    bars = create_ssa_value(MemRefType(i64, [4], memory_space=IntegerAttr(warp.SHARED, i64)))
    i = create_ssa_value(IndexType())
    return warp.CopyTmaOp(ref, [i, i, i], create_ssa_value(dest), i, bars, i, (0, 0), (1, rows, 4096), 256)


@pytest.mark.parametrize("layout, cols, rows, message", [
    (warp.SwizzledLayoutAttr(1), 64, 64, None),
    (warp.SwizzledLayoutAttr(3), 64, 64, "no TMA swizzle writes the layout"),
    (warp.SwizzledLayoutAttr(1, True), 64, 64, "no TMA swizzle writes the layout"),
    (warp.SwizzledLayoutAttr(1), 128, 64, "no TMA swizzle writes the layout"),  # 256-byte rows
    (warp.SwizzledLayoutAttr(1), 64, 512, "is no TMA box"),
])
def test_the_verifier_takes_only_what_a_tensor_map_writes(layout, cols, rows, message):
    op = _copy(MemRefType(f16, [4, rows, cols], layout, IntegerAttr(warp.SHARED, i64)), rows)
    if message is None:
        op.verify()
        assert op.box_bytes == rows * cols * 2
    else:
        with pytest.raises(VerifyException, match=message):
            op.verify()


def test_a_map_parameter_never_takes_an_argument_s_name():
    """An argument called `a_map0` keeps its name; A's map takes the next free one, and the kernel
    still runs right in the emulator (every element within the reference's bound)."""
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
    from tilemma.compiler.driver.runner import run_compiled

    text = """func.func @k(%a: memref<256x128xf16>, %b: memref<128x256xf16>, %a_map0: memref<256x256xf32>) {
  %ta = tile.load %a[0, 0] : memref<256x128xf16> -> !tile.tile<256x128xf16>
  %tb = tile.load %b[0, 0] : memref<128x256xf16> -> !tile.tile<128x256xf16>
  %zero = tile.constant 0.0 : !tile.tile<256x256xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<256x128xf16>, !tile.tile<128x256xf16>, !tile.tile<256x256xf32> -> !tile.tile<256x256xf32>
  tile.store %td, %a_map0[0, 0] : !tile.tile<256x256xf32>, memref<256x256xf32>
  func.return
}"""
    [k] = compile_text(text, "k", CompileOptions(sm="90a", wgmma=True, **TMA))
    params = re.findall(r"\.param [^\n]*?(\w+)(?:\[128\])?,?\n", k.ptx)
    assert params == ["p_a", "p_b", "p_a_map0", "p_a_map1", "p_b_map0"]
    result = run_compiled(k, 5, "emulator")
    assert result.ok, result.line()
