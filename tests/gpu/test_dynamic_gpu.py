"""Kernels with sizes known at launch on the GPU: one compile serves every size; each launch's D
must equal, bit for bit, what the emulator (proven bit-exact on these kernels) computes from the
same inputs, in both stride classes (16-byte rows: cp.async; anything else: rows loaded element
by element), and the launch refuses buffers that disagree with each other."""

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]
torch = pytest.importorskip("torch")

SIZES = [(37, 91, 53), (130, 72, 256), (1, 4096, 64), (257, 129, 320), (64, 64, 16), (200, 17, 72), (128, 256, 256)]
FAMILIES = [("f16", "f16", "f32", "row"), ("bf16", "bf16", "f32", "row"), ("si8", "si8", "si32", "col"),
            ("f16", "f16", "f16", "row"),
            ("si8", "si8", "si32", "row"),  # the transposing fill (byte by byte at an odd N)
            ("tf32", "tf32", "f32", "col")]  # a strided<[1, ?]> B copied K-major


@pytest.fixture(scope="module", params=FAMILIES, ids=lambda f: "-".join(f))
def family(request):
    a, b, acc, layout = request.param
    [k] = tilemma.compile(str(gemm_module(GemmSpec(1, 1, 1, a, b, acc, b_layout=layout, dynamic="mnk"))), sm="90")
    return request.param, k


def _torch(x: np.ndarray):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


@pytest.mark.parametrize("m,n,k", SIZES)
def test_one_kernel_every_size_bitwise_as_the_emulator(family, m, n, k):
    (a_t, b_t, acc, layout), kernel = family
    rng = np.random.default_rng(m * 1000 + n + k)
    a = reference.random_matrix(a_t, (m, k), rng).astype(reference.element_type(a_t).dtype)
    b = reference.random_matrix(b_t, (k, n), rng).astype(reference.element_type(b_t).dtype)
    c = reference.random_matrix(acc, (m, n), rng).astype(reference.element_type(acc).dtype)
    d = np.zeros_like(c)
    kernel.emulate(a, b, c, d, max_macs=1 << 28)
    bt = _torch(b.T.copy()).T if layout == "col" else _torch(b)  # K-major B: each column contiguous
    dt = torch.zeros_like(_torch(c))
    kernel.launch(_torch(a), bt, _torch(c), dt)
    torch.cuda.synchronize()
    got = dt.cpu().numpy()
    assert got.view(np.uint8).tobytes() == d.view(np.uint8).tobytes(), (
        f"{m}x{n}x{k}: {int((got != d).sum())} elements differ from the emulator")


def test_launch_refuses_buffers_that_disagree(family):
    (a_t, b_t, acc, layout), kernel = family
    dt = {"f16": torch.half, "bf16": torch.bfloat16, "si8": torch.int8, "tf32": torch.float32}[a_t]
    ct = {"f32": torch.float32, "si32": torch.int32, "f16": torch.half}[acc]
    a = torch.zeros(32, 48, device="cuda", dtype=dt)
    b = torch.zeros(40, 16, device="cuda", dtype=dt)  # K = 40, A says 48
    if layout == "col":
        b = b.T.contiguous().T
    c = torch.zeros(32, 16, device="cuda", dtype=ct)
    with pytest.raises(tilemma.LaunchError, match="K"):
        kernel.launch(a, b, c, torch.zeros_like(c))


def test_custom_op_of_a_dynamic_kernel_under_torch_compile():
    """`tilemma.torch.custom_op` on a kernel with ? sizes: D's shape comes from the inputs', in
    eager calls and under torch.compile(fullgraph=True, dynamic=True), at several sizes."""
    import tilemma.torch

    [kernel] = tilemma.compile(str(gemm_module(GemmSpec(1, 1, 1, "f16", "f16", "f32", c=False, dynamic="mnk"))),
                               sm="90")
    op = tilemma.torch.custom_op(kernel, "dynamic_test::gemm")
    compiled = torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True, dynamic=True)
    for m, n, k in ((37, 91, 53), (128, 256, 64), (5, 40, 72)):
        a = torch.randn(m, k, device="cuda").half()
        b = torch.randn(k, n, device="cuda").half()
        want = a.float() @ b.float()
        d = op(a, b)
        assert d.shape == (m, n) and d.dtype == torch.float32
        torch.testing.assert_close(d, want, rtol=2e-3, atol=2e-3)
        torch.testing.assert_close(compiled(a, b), 2 * want, rtol=2e-3, atol=4e-3)
