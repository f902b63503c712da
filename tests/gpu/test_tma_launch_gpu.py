"""A kernel whose ABI has a tensor map (tests/tma_kernels.py: a TMA copy of a window at an offset)
launched on device memory through `Kernel.launch`'s fast path (torch tensors), its checked path,
`launch_unchecked` (the map re-encoded for a new address) and `runner.execute` (run_kernel), every
output byte against NumPy slicing of the input; the emulator's run of the same is
tests/test_tma_launch.py."""

from __future__ import annotations

import numpy as np
import pytest

from tilemma.compiler.driver import runner
from tilemma.compiler.driver.api import Kernel
from tilemma.compiler.runtime import cuda_runtime

from tests import tma_kernels as T

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
    pytest.mark.skipif(cuda_runtime.gpu_available() and cuda_runtime.device_arch() not in ("sm_90", "sm_90a"),
                       reason="the kernel is sm_90a PTX"),
]
torch = pytest.importorskip("torch")


def test_kernel_launch_passes_the_map():
    k = Kernel(T.compiled())
    xs = [torch.from_numpy(T.data(seed)).cuda() for seed in range(3)]
    out = torch.zeros(T.BOX_BYTES, dtype=torch.uint8, device="cuda")
    for x in xs:  # torch tensors: the fast path; each a new address, so a new encoding
        out.zero_()
        k.launch(x, out)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), T.want(x.cpu().numpy()))
    out.zero_()
    k.launch(xs[0].data_ptr(), out.data_ptr())  # ints again on the first: the map of its address
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), T.want(xs[0].cpu().numpy()))
    out.zero_()
    k.launch(np.uint64(xs[1].data_ptr()), out)  # the checked path
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), T.want(xs[1].cpu().numpy()))
    out.zero_()
    k.launch_unchecked(xs[2].data_ptr(), out.data_ptr())
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), T.want(xs[2].cpu().numpy()))


def test_runner_execute_passes_the_map():
    k = T.compiled()
    x = T.data(5)
    outs = runner.execute(k, k.abi.arguments([x, np.zeros(T.BOX_BYTES, np.uint8)], k.scalars), "gpu")
    np.testing.assert_array_equal(outs[1], T.want(x))


def test_cuda_runtime_launch_passes_the_map():
    x = torch.from_numpy(T.data(6)).cuda()
    out = torch.zeros(T.BOX_BYTES, dtype=torch.uint8, device="cuda")
    cuda_runtime.launch(T.PTX, T.ENTRY, (1, 1, 1), (T.THREADS, 1, 1), [x.data_ptr(), out.data_ptr(), T.MAP])
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), T.want(x.cpu().numpy()))
