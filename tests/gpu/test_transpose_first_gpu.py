"""An 8-bit N-major B transposed first by a kernel of its own (`tile-transpose-first`) on an sm_90
GPU: D equals numpy's A @ B (+ C) wrapped to int32, every word, through the runner, `Kernel.launch`
(the launcher's workspace and the caller's, B changed between launches, so each must transpose it
again), `launch_unchecked`, a CUDA graph and a torch custom op; the transposing kernel alone moves
every byte."""

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.runtime import cuda_runtime
from tilemma.passes.warp_to_ptx.transpose_kernel import launch, transpose_entry
from tilemma.dialects import ptx

from tests.wgmma_cases import compiled, exactly_a_times_b, is_sm90

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not is_sm90(), reason="needs an sm_90 GPU (wgmma is sm_90a's)")]
torch = pytest.importorskip("torch")

CASES = {  # (spec, options): forced at odd and warpgroup sizes, and the automatic choice
    "100x48x80-forced": (GemmSpec(100, 48, 80, "s8", "s8", "s32", a_layout="col"), {"transpose_first": 1}),
    "512x256x128-noc": (GemmSpec(512, 256, 128, "s8", "s8", "s32", a_layout="col", c=False), {"transpose_first": 1}),
    "1024-u8": (GemmSpec(1024, 1024, 1024, "u8", "u8", "s32", a_layout="col"), {"transpose_first": 1}),
    "4096x2048x256": (GemmSpec(4096, 2048, 256, "s8", "s8", "s32", a_layout="col"), {}),
    "2048x4096x1040": (GemmSpec(2048, 4096, 1040, "s8", "s8", "s32", a_layout="col", c=False), {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_d_is_a_times_b_on_the_gpu(name):
    spec, options = CASES[name]
    kernel = compiled(spec, **options)
    assert kernel.abi.prologue, kernel.abi.config
    exactly_a_times_b(spec, kernel, "gpu", seed=13)


@pytest.mark.parametrize("k, n", [(144, 272), (4096, 11008)])
def test_the_transposing_kernel_alone(k, n):
    module = ptx.ModuleOp_("8.0", "sm_90a", [transpose_entry("t", k, n, "p_src", "p_dst")])
    import io

    text = io.StringIO()
    ptx.print_module(module, text)
    src = np.random.default_rng(n).integers(-128, 128, (k, n), dtype=np.int8)
    grid, block = launch(k, n)
    _, dst = cuda_runtime.run_kernel(text.getvalue(), "t", grid, block, [src, np.zeros((n, k), np.int8)])
    assert np.array_equal(dst.view(np.int8).reshape(n, k), src.T)


def test_launches_transpose_b_each_time():
    """`Kernel.launch` with torch tensors, the workspace the launcher's, then the caller's, B
    rewritten before each launch; `launch_unchecked`; a CUDA graph replayed after B changed; a
    custom op."""
    import tilemma.torch

    spec = GemmSpec(512, 512, 384, "s8", "s8", "s32", a_layout="col", c=False)
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90a", transpose_first=1)
    assert [p.roles for p in k.abi.params][-1] == ("transposed_b",)
    rng = np.random.default_rng(8)
    a = rng.integers(-128, 128, (512, 384), dtype=np.int8)
    ta = torch.from_numpy(a.T.copy()).cuda().t()  # M-major
    d = torch.empty(512, 512, dtype=torch.int32, device="cuda")
    workspace = torch.empty_strided((384, 512), (1, 384), dtype=torch.int8, device="cuda")

    def check(b: np.ndarray) -> None:
        torch.cuda.synchronize()
        want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
        assert np.array_equal(d.cpu().numpy(), want)

    tb = torch.empty(384, 512, dtype=torch.int8, device="cuda")
    for scratch in ((), (workspace,)):
        for seed in range(3):
            b = np.random.default_rng(seed).integers(-128, 128, (384, 512), dtype=np.int8)
            tb.copy_(torch.from_numpy(b))
            d.fill_(-1)
            k.launch(ta, tb, d, *scratch)
            check(b)
    b = rng.integers(-128, 128, (384, 512), dtype=np.int8)
    tb.copy_(torch.from_numpy(b))
    k.launch_unchecked(ta.data_ptr(), tb.data_ptr(), d.data_ptr(), workspace.data_ptr())
    check(b)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k.launch(ta, tb, d, stream=torch.cuda.current_stream())
    b = rng.integers(-128, 128, (384, 512), dtype=np.int8)
    tb.copy_(torch.from_numpy(b))
    d.fill_(-1)
    graph.replay()
    check(b)
    op = tilemma.torch.custom_op(k, "transpose_first_test::gemm")
    out = op(ta, tb)
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy(), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))
