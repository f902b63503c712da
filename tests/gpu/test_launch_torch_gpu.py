"""The launch path on the GPU (issue 22): the checked launch's O(1) path and its fallback, the
unchecked launch, strided views with an offset, launches captured in a CUDA graph, launches from
several threads; and `tilemma.torch.custom_op` eagerly, under torch.compile(fullgraph=True) and in
a CUDA graph. Results are compared with torch's own float64 product."""

import threading

import pytest

import tilemma
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]
torch = pytest.importorskip("torch")

STRIDED = """
func.func @strided(%a: memref<32x16xf16, strided<[24, 1], offset: 8>>, %b: memref<16x8xf16, strided<[1, 16]>>,
                   %d: memref<32x8xf16>) {
  %ta = tile.load %a[0, 0] : memref<32x16xf16, strided<[24, 1], offset: 8>> -> !tile.tile<32x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16, strided<[1, 16]>> -> !tile.tile<16x8xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<32x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<32x8xf16>
  tile.store %td, %d[0, 0] : !tile.tile<32x8xf16>, memref<32x8xf16>
  func.return
}
"""


def ptx_version() -> str:
    major, minor = min((9, 0), cuda_runtime.driver_max_ptx())
    return f"{major}.{minor}"


def kernel(m=37, n=91, k=53, **kw) -> tilemma.Kernel:
    [kern] = tilemma.compile(str(gemm_module(GemmSpec(m, n, k, "f16", "f16", "f32", **kw))), ptx=ptx_version())
    return kern


def operands(m, n, k, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).half()
    b = torch.randn(k, n, device="cuda", generator=g).half()
    c = torch.randn(m, n, device="cuda", generator=g)
    return a, b, c


def expect(d, a, b, c=None):
    want = a.double() @ b.double() + (c.double() if c is not None else 0)
    tolerance = 1e-3 if d.dtype == torch.float32 else 2e-2  # an f16 D is rounded to f16
    torch.testing.assert_close(d.double(), want, rtol=tolerance, atol=tolerance)


# ------------------------------------------------------------------------------------ launch


def test_checked_launch_repeated_then_a_mismatch_still_refused():
    k = kernel()
    for seed in range(3):  # the first launch prepares, the others take the O(1) path
        a, b, c = operands(37, 91, 53, seed)
        d = torch.full((37, 91), float("nan"), device="cuda")
        k.launch(a, b, c, d)
        torch.cuda.synchronize()
        expect(d, a, b, c)
    d.fill_(7.0)
    with pytest.raises(tilemma.LaunchError, match=r"argument 1 \(b\).*dtype float32, expected float16"):
        k.launch(a, b.float(), c, d)
    with pytest.raises(tilemma.LaunchError, match=r"argument 0 \(a\): a torch tensor on cpu"):
        k.launch(a.cpu(), b, c, d)
    with pytest.raises(tilemma.LaunchError, match=r"strides \(1, 37\) elements, expected \(53, 1\)"):
        k.launch(a.t().contiguous().t(), b, c, d)
    with pytest.raises(tilemma.LaunchError, match="takes 4 arguments"):
        k.launch(a, b, c)
    torch.cuda.synchronize()
    assert bool((d == 7.0).all())  # nothing was launched


def test_ints_and_tensors_mixed_and_unchecked_launch():
    k = kernel(64, 64, 64)
    a, b, c = operands(64, 64, 64, 1)
    d = torch.zeros(64, 64, device="cuda")
    k.launch(a.data_ptr(), b, c.data_ptr(), d)
    torch.cuda.synchronize()
    expect(d, a, b, c)
    d.zero_()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    k.launch_unchecked(a.data_ptr(), b.data_ptr(), c.data_ptr(), d.data_ptr(), stream=stream.cuda_stream)
    stream.synchronize()
    expect(d, a, b, c)
    with pytest.raises(tilemma.LaunchError, match="takes 4 arguments"):
        k.launch_unchecked(a.data_ptr())


def test_strided_views_with_an_offset_take_the_fast_path_correctly():
    [k] = tilemma.compile(STRIDED, ptx=ptx_version())
    buf = torch.randn(8 + 32 * 24, device="cuda").half()
    a = buf.as_strided((32, 16), (24, 1), 8)  # the view 8 elements into its buffer
    b = torch.randn(8, 16, device="cuda").half().t()  # column-major 16x8
    d = torch.zeros(32, 8, device="cuda", dtype=torch.half)
    for _ in range(2):
        k.launch(a, b, d)
        torch.cuda.synchronize()
        expect(d, a, b)


def test_launches_captured_in_a_cuda_graph_replay_on_new_data():
    k = kernel(128, 128, 64)
    a, b, c = operands(128, 128, 64, 2)
    d = torch.zeros(128, 128, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture: the module is loaded here
        k.launch(a, b, c, d, stream=side)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k.launch(a, b, c, d, stream=torch.cuda.current_stream())
    for seed in (3, 4):
        na, nb, nc = operands(128, 128, 64, seed)
        a.copy_(na), b.copy_(nb), c.copy_(nc)
        d.zero_()
        graph.replay()
        torch.cuda.synchronize()
        expect(d, na, nb, nc)


def test_launches_from_several_threads():
    k = kernel(64, 64, 64)
    cases = [operands(64, 64, 64, s) + (torch.zeros(64, 64, device="cuda"),) for s in range(8)]
    torch.cuda.synchronize()

    def work(case):
        for _ in range(20):
            k.launch(*case)

    threads = [threading.Thread(target=work, args=(case,)) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    for a, b, c, d in cases:
        expect(d, a, b, c)


# ------------------------------------------------------------------------------------ torch op


def test_custom_op_eager_compiled_and_graphed():
    import tilemma.torch

    k = kernel(64, 96, 128)
    gemm = tilemma.torch.custom_op(k, "tilemma_test::gemm_f16")
    a, b, c = operands(64, 96, 128, 5)
    d = gemm(a, b, c)
    assert d.shape == (64, 96) and d.dtype == torch.float32 and d.stride() == (96, 1)
    expect(d, a, b, c)
    expect(torch.ops.tilemma_test.gemm_f16(a, b, c), a, b, c)
    torch.library.opcheck(gemm, (a, b, c), test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))

    def f(a, b, c):
        return torch.relu(gemm(a * 2, b, c)) + 1

    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(a, b, c), torch.relu((2 * a).double() @ b.double() + c.double()).float() + 1,
                               rtol=1e-3, atol=1e-3)
    # in a CUDA graph
    static = [x.clone() for x in (a, b, c)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gemm(*static)
    na, nb, nc = operands(64, 96, 128, 6)
    for x, y in zip(static, (na, nb, nc)):
        x.copy_(y)
    graph.replay()
    torch.cuda.synchronize()
    expect(out, na, nb, nc)
    # torch.compile's own CUDA graphs
    graphed = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = graphed(na, nb, nc)
    torch.testing.assert_close(got, torch.relu((2 * na).double() @ nb.double() + nc.double()).float() + 1,
                               rtol=1e-3, atol=1e-3)


def test_custom_op_inputs_and_errors():
    import tilemma.torch

    k = kernel(32, 40, 48)
    gemm = tilemma.torch.custom_op(k, "tilemma_test::gemm_layouts")
    a, b, c = operands(32, 40, 48, 7)
    expect(gemm(a, b.t().contiguous().t(), c), a, b, c)  # a column-major B is laid out first
    with pytest.raises(tilemma.LaunchError, match="b is torch.float32 .*expected torch.float16"):
        gemm(a, b.float(), c)
    assert tilemma.torch.custom_op(k, "tilemma_test::gemm_layouts") is gemm
    with pytest.raises(ValueError, match="custom op tilemma_test::gemm_layouts is registered already"):
        tilemma.torch.custom_op(kernel(32, 40, 48), "tilemma_test::gemm_layouts")  # another Kernel
    with pytest.raises(ValueError, match="expected 'namespace::name'"):
        tilemma.torch.custom_op(k, "gemm")


def test_custom_op_of_a_checked_sparse_kernel_returns_its_error_word():
    import tilemma.torch
    from tilemma.compiler.layouts import sparse_fragments

    k = kernel(32, 24, 64, sparse_a=True)
    gemm = tilemma.torch.custom_op(k, "tilemma_test::sparse_gemm")
    a, b, c = operands(32, 24, 64, 8)
    a = torch.from_numpy(sparse_fragments.prune(a.cpu().numpy(), "2:4")).cuda()
    d, word = gemm(a, b, c)
    assert word.dtype == torch.int32 and k.sparsity_error(int(word.item()) & 0xFFFFFFFF) is None
    expect(d, a, b, c)
    a[7, 20:24] = 1.0  # row 7, group 5: four nonzeros
    _, word = gemm(a, b, c)
    assert "row 7, group 5" in k.sparsity_error(int(word.item()) & 0xFFFFFFFF)


def test_readme_torch_example_runs_as_written():
    import pathlib

    text = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    api = text.split("## Python API", 1)[1]
    first = api.split("```python\n", 1)[1].split("```", 1)[0]
    example = api.split("### torch", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(first, "README.md", "exec"), scope)
    exec(compile(example, "README.md", "exec"), scope)
