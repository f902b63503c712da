"""Byte-pair reads of 8-bit operands stored the other way round on the GPU (an M-major A, an N-major
B: `ldmatrix .x4.trans` of K row pairs, `prmt`, the accumulators' butterflies, the folded swizzle):
D bit for bit as the emulator computes it (the runner's twin check) at odd sizes, with split-K,
batched, fp8 and an epilogue."""

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]

CASES = [
    GemmSpec(130, 80, 200, "s8", "s8", "s32"),
    GemmSpec(260, 144, 520, "u8", "s8", "s32"),
    GemmSpec(132, 112, 260, "s8", "u8", "s32", a_layout="col"),  # both by pairs
    GemmSpec(132, 96, 300, "u8", "s8", "s32", a_layout="col", b_layout="col"),  # A by pairs
    GemmSpec(100, 72, 96, "e4m3", "e5m2", "f32", a_layout="col", b_layout="col"),
    GemmSpec(20, 4096, 4096, "s8", "s8", "s32", a_layout="col"),  # split-K
    GemmSpec(132, 64, 160, "s8", "s8", "s32", batch=2, a_layout="col"),
    GemmSpec(1024, 1024, 1024, "u8", "u8", "s32", a_layout="col"),
    GemmSpec(64, 96, 128, "s8", "s8", "s32", a_layout="col", vector_scales="rows,cols", out="f16"),
    GemmSpec(100, 80, 96, "e4m3", "e5m2", "f32"),
    GemmSpec(16, 4096, 4096, "s8", "s8", "s32"),  # split-K or narrow tiles (the automatic choice)
    GemmSpec(100, 64, 96, "s8", "s8", "s32", batch=3),
    GemmSpec(1024, 1024, 1024, "s8", "s8", "s32"),
    GemmSpec(64, 96, 128, "s8", "s8", "s32", vector_scales="rows,cols", out="f16"),
]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: s.name)
def test_pair_bytes_on_the_gpu_are_the_emulators_bits(spec):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90"))
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in kernel.ptx and "shfl.sync.bfly.b32" in kernel.ptx
    result = run_compiled(kernel, seed=5, on="gpu")
    assert result.ok, result.line()



@pytest.mark.parametrize("m,n,k", [(96, 144, 208), (48, 64, 96), (512, 256, 1024)])
def test_pair_bytes_with_sizes_known_at_launch_on_the_gpu(m, n, k):
    """One kernel of `?` sizes promised multiples of 16 (so B is read by byte pairs), launched
    through the API at several sizes: D bit for bit as the emulator's."""
    import numpy as np
    import torch

    import tilemma
    from tilemma.compiler.verify import reference

    [kernel] = tilemma.compile(str(gemm_module(GemmSpec(1, 1, 1, "si8", "si8", "si32", dynamic="mnk"))), sm="90",
                               size_multiple="16x16x16", stride_multiple=16)
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" in kernel.ptx and "shfl.sync.bfly.b32" in kernel.ptx
    rng = np.random.default_rng(m + n + k)
    a = reference.random_matrix("si8", (m, k), rng).astype(np.int8)
    b = reference.random_matrix("si8", (k, n), rng).astype(np.int8)
    c = reference.random_matrix("si32", (m, n), rng).astype(np.int32)
    d = np.zeros_like(c)
    kernel.emulate(a, b, c, d, max_macs=1 << 28)
    dt = torch.zeros(m, n, dtype=torch.int32, device="cuda")
    kernel.launch(*(torch.from_numpy(x).cuda() for x in (a, b, c)), dt)
    torch.cuda.synchronize()
    assert np.array_equal(dt.cpu().numpy(), d)
