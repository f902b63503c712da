"""Warp-specialized warpgroup kernels (`producers=4`: a producer warpgroup fills the stages, the
consumers multiply, full/empty mbarriers between) on the GPU: D within the reference's bound and
bit for bit the GPU's own mma.sync (mma.sp) kernel of the same problem, and the emulator's where the
kernel is small enough to emulate (the runner's twin check); and big ones, whose rings wrap many
times, equal to the unspecialized warpgroup kernel word for word."""

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime

from tests.specialize_cases import (CASES, CLUSTER, CLUSTER_CASES, PERSISTENT, PERSISTENT_CASES, SPECIALIZED, TMA,
                                    TMA_CASES)
from tests.wgmma_cases import compiled, like_the_sm90_kernel

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available() or cuda_runtime.device_arch() not in ("sm_90", "sm_90a"),
                       reason="needs an sm_90 GPU (wgmma, setmaxnreg: sm_90a)"),
]


@pytest.mark.parametrize("spec, options, sm90", CASES, ids=[c[0].name for c in CASES])
def test_like_the_mma_sync_kernel(spec, options, sm90):
    like_the_sm90_kernel(spec, {**SPECIALIZED, **options}, "gpu", 7, "wgmma", sm90)


@pytest.mark.parametrize("spec", [
    GemmSpec(2048, 2048, 4096, "f16", "f16", "f32"),
    GemmSpec(1024, 2048, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="rna"),
    GemmSpec(1024, 2048, 4096, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(1024, 1024, 4096, "f16", "f16", "f32", pre_compressed=True),
], ids=lambda s: s.name)
def test_like_the_unspecialized_kernel(spec):
    fed = run_compiled(compiled(spec, wgmma=True, **SPECIALIZED), 3, "gpu")
    plain = run_compiled(compiled(spec, wgmma=True, producers=0, split_k=1), 3, "gpu")  # K unsplit, as the specialized
    assert fed.ok and plain.ok, (fed.line(), plain.line())
    for name, out in fed.outputs.items():
        assert np.array_equal(out.view(np.uint8), plain.outputs[name].view(np.uint8)), name


@pytest.mark.parametrize("spec, options, sm90", TMA_CASES, ids=[c[0].name for c in TMA_CASES])
def test_tma_like_the_mma_sync_kernel(spec, options, sm90):
    """The producers' copies by the TMA (driver-encoded tensor maps): D as the mma.sync kernel's."""
    like_the_sm90_kernel(spec, {**TMA, **options}, "gpu", 7, "wgmma", sm90)


@pytest.mark.parametrize("spec, options, sm90", CLUSTER_CASES, ids=[c[0].name for c in CLUSTER_CASES])
def test_cluster_like_the_mma_sync_kernel(spec, options, sm90):
    """Pairs of CTAs sharing B's stages by multicast: D as the mma.sync kernel's."""
    like_the_sm90_kernel(spec, {**CLUSTER, **options}, "gpu", 7, "wgmma", sm90)


@pytest.mark.parametrize("spec, options, sm90", PERSISTENT_CASES, ids=[c[0].name for c in PERSISTENT_CASES])
def test_persistent_like_the_mma_sync_kernel(spec, options, sm90):
    """Fewer CTAs than tiles, each looping over its tiles: D as the mma.sync kernel's."""
    like_the_sm90_kernel(spec, {**PERSISTENT, **options}, "gpu", 7, "wgmma", sm90)


_BIG = [
    GemmSpec(2048, 2048, 4096, "f16", "f16", "f32"),
    GemmSpec(1024, 2048, 4096, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(1024, 1024, 4096, "f16", "f16", "f32", pre_compressed=True),
    GemmSpec(1024, 1000, 1000, "bf16", "bf16", "f32", a_layout="col", b_layout="col"),
]


@pytest.mark.parametrize("spec", _BIG, ids=lambda s: s.name)
@pytest.mark.parametrize("options, baseline", [(TMA, {**SPECIALIZED, "tma": 0}), (CLUSTER, {**TMA, "cluster": 1}),
                                               ({**TMA, "persistent": 20}, {**TMA, "persistent": 0})],
                         ids=["tma-like-cp-async", "cluster-like-one-cta", "persistent-like-a-cta-a-tile"])
def test_like_the_simpler_kernel(spec, options, baseline):
    """Rings that wrap many times: the TMA's kernel word for word the cp.async producers', a
    cluster's the single-CTA TMA kernel's, 20 persistent CTAs' the one-CTA-a-tile kernel's."""
    got = run_compiled(compiled(spec, wgmma=True, **options), 3, "gpu")
    want = run_compiled(compiled(spec, wgmma=True, **baseline), 3, "gpu")
    assert got.ok and want.ok, (got.line(), want.line())
    for name, out in got.outputs.items():
        assert np.array_equal(out.view(np.uint8), want.outputs[name].view(np.uint8)), name


@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_sparse_defaults_like_the_mma_sp_kernel(b_layout):
    """The sparse kernels' defaults on sm_90a: producers by the TMA, persistent, and a ring of 5
    stages (`configs.WGMMA_PRODUCER_STAGES`) that a tile's 17 stages do not fill whole (its
    buffers follow the ring from tile to tile): D as the mma.sp kernel's, word for word."""
    spec = GemmSpec(2048, 4096, 1088, "f16", "f16", "f32", pre_compressed=True, b_layout=b_layout)
    assert compiled(spec).abi.config.endswith("stages=5 stage-k=64 producers=4 tma=1 persistent=132")
    like_the_sm90_kernel(spec, {}, "gpu", 7, "wgmma", "mma.sp")
