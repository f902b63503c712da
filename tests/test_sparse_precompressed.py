"""The pre-compressed sparse A (`tile.sparse_from`, `compiler/sparse_format.py`) compiled for
sm_90 and run in the CPU emulator, simple and staged, at odd sizes, batched and broadcast, f16 and
bf16: every element of D against the reference on the decompressed A. Also: the kernel really
reads the metadata (a wrong word fails; the sm_90a sparse warpgroups' kernel too), the ABI roles,
and the located refusals."""

import numpy as np
import pytest

from tilemma.compiler.layouts import sparse_format
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

STAGED = {"stages": -1}
SIMPLE = {"stages": 0}
WGMMA = {"sm": "90a", "wgmma": True}  # sparse warpgroups (wgmma.mma_async.sp)


def compile_spec(spec: GemmSpec, **options):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(**{"sm": "90", **options}))
    return kernel


def spec(m, n, k, t="f16", acc="f32", **kw):
    return GemmSpec(m, n, k, t, t, acc, pre_compressed=True, **kw)


@pytest.mark.parametrize("options", [SIMPLE, STAGED], ids=["simple", "staged"])
@pytest.mark.parametrize(
    "s",
    [
        spec(130, 70, 200),
        spec(130, 70, 200, "bf16"),
        spec(37, 20, 75, "bf16", batch=3, bcast="a"),
        spec(37, 20, 75, batch=2, bcast="b"),
        spec(37, 20, 75, acc="f16", batch=2),
        spec(45, 33, 90, b_layout="col"),
    ],
    ids=lambda s: s.name,
)
def test_emulator(s, options):
    kernel = compile_spec(s, **options)
    assert ("stages=0" in kernel.abi.config) == (options is SIMPLE), kernel.abi.config
    result = run_compiled(kernel, 3, "emulator")
    assert result.ok, result.line()
    assert result.variant.startswith("mma.sp::ordered_metadata.sync.aligned.m16n8k32")


@pytest.mark.parametrize("config", [
    {"stages": 2, "stage_k": 32}, {"stages": 4, "stage_k": 128}, {"warps": "1x2", "warp_tile": "4x4", "stages": 3},
])
def test_staged_configurations(config):
    result = run_compiled(compile_spec(spec(70, 40, 300), **config), 4, "emulator")
    assert result.ok, result.line()


@pytest.mark.parametrize("config", [{"stages": 4, "stage_k": 32}, {"stages": 2, "stage_k": 128}],
                         ids=["k32x4", "k128x2"])
def test_metadata_stage_past_the_last_tile(config):
    """A CTA of 32 rows a warp over an A of 20 rows: the metadata copies of its 16-row tiles past
    the memref's (2) read its last tile instead of memory past the buffer (the emulator fails any
    such read), and K = 256 is whole 128-wide groups, so no stage starts past a row's last."""
    kernel = compile_spec(spec(20, 16, 256), warps="2x1", warp_tile="2x2", **config)
    result = run_compiled(kernel, 5, "emulator")
    assert result.ok, result.line()


@pytest.mark.parametrize("options", [SIMPLE, STAGED, WGMMA], ids=["simple", "staged", "wgmma"])
def test_metadata_is_read(options):
    """Values of one 2:4 A with the metadata of another: D must differ from the reference."""
    s = spec(32, 16, 64)
    kernel = compile_spec(s, **options)
    assert kernel.variant.startswith("wgmma.mma_async.sp" if options is WGMMA else "mma.sp"), kernel.variant
    rng = np.random.default_rng(0)
    a = sparse_format.decompress_a(*sparse_format.compress_a(rng.standard_normal((32, 64)).astype(np.float16), prune=True))
    values, meta = sparse_format.compress_a(a)
    good = run_compiled(kernel, 1, "emulator", inputs={"a_values": values, "a_meta": meta})
    assert good.ok, good.line()
    other = sparse_format.compress_a(np.roll(a, 1, axis=1), prune=True)[1]
    assert (other != meta).any()
    bad = run_compiled(kernel, 1, "emulator", inputs={"a_values": values, "a_meta": other})
    assert bad.ok  # the reference decompresses what it is given: the kernel follows the metadata
    np.testing.assert_raises(AssertionError, np.testing.assert_array_equal, bad.outputs["d"], good.outputs["d"])


def test_abi_roles():
    kernel = compile_spec(spec(37, 20, 75, batch=2))
    roles = {p.name: (p.roles, p.dtype.name, p.shape) for p in kernel.abi.params}
    assert roles["p_a_values"] == (("a_values",), "float16", (2, 37, 48))
    assert roles["p_a_meta"] == (("a_meta",), "uint32", (2, 3, 64))
    assert kernel.abi.index("sparsity_error") is None


def test_refusals():
    with pytest.raises(LocatedVerifyError, match="feeds the 16-bit m16n8k32 mma.sp"):
        compile_spec(spec(16, 8, 32, acc="f32", shape="m16n8k16"))
    with pytest.raises(ValueError, match="takes f16 or bf16 A, not si8"):
        gemm_module(spec(16, 8, 32, t="si8", acc="si32"))
    with pytest.raises(LocatedVerifyError, match="stage-k 16 is not a multiple"):
        compile_spec(spec(16, 8, 32), stages=2, stage_k=16)


@pytest.mark.parametrize("options", [SIMPLE, STAGED], ids=["simple", "staged"])
@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_adversarial_a(t, options):
    """Groups with one or no nonzero (their free slots hold zeros), negative zeros, wide
    magnitudes, whole zero rows and a ragged K: the kernel's D against the reference, every element."""
    import ml_dtypes

    dtype = np.float16 if t == "f16" else ml_dtypes.bfloat16
    m, n, k = 45, 24, 90
    rng = np.random.default_rng(7)
    dense = (rng.choice([-1, 1], (m, k)) * 2.0 ** rng.integers(-6, 7, (m, k))).astype(dtype)
    padded = np.zeros((m, 92), dtype)
    padded[:, :k] = dense
    a = sparse_format.decompress_a(*sparse_format.compress_a(padded, prune=True))[:, :k]
    a[rng.random(a.shape) < 0.3] = 0
    a[rng.random(a.shape) < 0.1] = -0.0
    a[5] = 0
    kernel = compile_spec(spec(m, n, k, t), **options)
    values, meta = sparse_format.compress_a(a)
    result = run_compiled(kernel, 8, "emulator", inputs={"a_values": values, "a_meta": meta})
    assert result.ok, result.line()
