"""`tile-transpose-first`: an 8-bit N-major B transposed into a K-major workspace by a kernel of its
own, which every launch path runs before the GEMM (`KernelABI.prologue`). The transposing kernel's
bytes against NumPy's transpose, the rule, the refusals, and whole kernels in the emulator (the
runner, `Kernel.emulate`) against the exact integer product."""

import io

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.gpu_binary import gpu_binary_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime.abi import KernelABI
from tilemma.compiler.verify.emulator.program import emulate
from tilemma.dialects import ptx
from tilemma.passes.warp_to_ptx.transpose_kernel import launch, transpose_entry


def _kernel(spec: GemmSpec, **options):
    [k] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90a", **options))
    return k


@pytest.mark.parametrize("k, n", [(16, 16), (48, 80), (128, 128), (144, 272), (272, 144)])
def test_transposing_kernel_moves_every_byte(k, n):
    """Partial tiles on both edges included: dest is source transposed, byte for byte, and the
    source is left as it was."""
    module = ptx.ModuleOp_("8.0", "sm_90a", [transpose_entry("t", k, n, "p_src", "p_dst")])
    text = io.StringIO()
    ptx.print_module(module, text)
    src = np.random.default_rng(k * n).integers(-128, 128, (k, n), dtype=np.int8)
    dst = np.full((n, k), 0x5A, np.int8)
    grid, block = launch(k, n)
    out_src, out_dst = emulate(text.getvalue(), "t", grid, block, [src, dst])
    assert np.array_equal(out_dst.view(np.int8).reshape(n, k), src.T)
    assert np.array_equal(out_src.view(np.int8).reshape(k, n), src)


def test_transposing_kernel_refuses_sizes_it_does_not_cover():
    with pytest.raises(ValueError, match="multiples of 16"):
        transpose_entry("t", 40, 24, "p_src", "p_dst")


def test_automatic_rule():
    """sm_90a, 8-bit, A M-major and B N-major, 512 rows and up: transposed first; fewer rows, a
    K-major B, A K-major (tile-transpose-product's) or sm_90: not."""
    big = _kernel(GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col", c=False))
    [first] = big.abi.prologue
    roles = [p.roles for p in big.abi.params]
    assert roles == [("a",), ("b",), ("d",), ("transposed_b",)]
    assert first.args == (1, 3) and first.entry == f"{big.name}_transpose_b" and first.grid == (32, 32, 1)
    assert big.abi.params[3].strides == (1, 4096)  # K-major
    assert f".entry {first.entry}(" in big.ptx and "wgmma.mma_async" in big.abi.instruction
    for spec, sm in ((GemmSpec(256, 4096, 4096, "s8", "s8", "s32", a_layout="col"), "90a"),
                     (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col", b_layout="col"), "90a"),
                     (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32"), "90a"),
                     (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col"), "90")):
        [k] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm=sm))
        assert not k.abi.prologue and "transposed_b" not in str(k.abi.params), (spec.name, sm)
    [never] = compile_text(str(gemm_module(GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col"))), "g",
                           CompileOptions(sm="90a", transpose_first=0))
    assert not never.abi.prologue


@pytest.mark.parametrize("spec, sm, why", [
    (GemmSpec(64, 48, 64, "s8", "s8", "s32", a_layout="col"), "90", "not sm_90a"),
    (GemmSpec(64, 48, 64, "s8", "s8", "s32", b_layout="col"), "90a", "B is K-major already"),
    (GemmSpec(64, 40, 64, "s8", "s8", "s32", a_layout="col"), "90a", "multiples of 16"),
    (GemmSpec(64, 48, 64, "f16", "f16", "f32"), "90a", "not an 8-bit type"),
    (GemmSpec(64, 48, 64, "s8", "s8", "s32", batch=2), "90a", "batched"),
    (GemmSpec(64, 48, 65535 * 128 + 16, "s8", "s8", "s32", a_layout="col"), "90a", "exceeds"),  # K / 128 CTAs
])
def test_forced_where_it_cannot_is_a_located_error(spec, sm, why):
    with pytest.raises(tilemma.CompileError, match=f"transpose-first: B cannot be transposed first: .*{why}"):
        tilemma.compile(str(gemm_module(spec)), sm=sm, transpose_first=1, cache=False)


@pytest.mark.parametrize("spec", [
    GemmSpec(100, 48, 80, "s8", "s8", "s32", a_layout="col"),  # mma.sync, odd M
    GemmSpec(512, 256, 128, "s8", "s8", "s32", a_layout="col", c=False),  # warpgroups
    GemmSpec(512, 256, 128, "u8", "u8", "s32", a_layout="col"),
    GemmSpec(64, 96, 160, "s8", "s8", "s32"),  # A K-major: the product as written
], ids=lambda s: s.name)
def test_whole_kernel_in_the_emulator(spec):
    k = _kernel(spec, transpose_first=1)
    assert k.abi.prologue
    result = run_compiled(k, seed=3, on="emulator")
    assert result.ok, result.line()


def test_kernel_emulate_runs_the_transpose_first():
    """`Kernel.emulate` on NumPy arrays (the workspace its own): D is the exact product; the GEMM
    alone, on a workspace the transpose has not written, is not."""
    spec = GemmSpec(128, 64, 96, "s8", "s8", "s32", a_layout="col", c=False)
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90a", transpose_first=1, cache=False)
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (128, 96), dtype=np.int8)
    b = rng.integers(-128, 128, (96, 64), dtype=np.int8)
    d = np.zeros((128, 64), np.int32)
    k.emulate(a, b, d)
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(d, want)
    # the main entry by itself reads the unwritten workspace: wrong
    workspace = np.full(96 * 64, 0x5A, np.uint8).view(np.int8)
    a_stored = np.asfortranarray(a).reshape(-1, order="F")  # M-major
    [_, _, alone, _] = emulate(k.ptx, k.name, k.grid, k.block, [a_stored, b.copy(), np.zeros_like(d), workspace],
                               shared_bytes=k.shared_bytes)
    assert not np.array_equal(alone.view(np.int32).reshape(128, 64), want)


def test_abi_records_round_trip_and_binary_launches_both():
    k = _kernel(GemmSpec(512, 256, 128, "s8", "s8", "s32", a_layout="col"), transpose_first=1)
    back = KernelABI.from_dict(k.abi.to_dict(), k.abi.tiling)  # (what the compile cache keeps)
    assert back.prologue == k.abi.prologue and back.to_dict() == k.abi.to_dict()
    assert k.abi.to_dict()["prologue"] == [{"entry": f"{k.name}_transpose_b", "grid": [2, 1, 1],
                                            "block": [256, 1, 1], "args": [1, 4]}]
    text = gpu_binary_module([k], "sm_90a")
    first, main = (text.index(f"@{k.name}_transpose_b blocks"), text.index(f"@{k.name} blocks"))
    assert first < main and "[%first0]" in text

