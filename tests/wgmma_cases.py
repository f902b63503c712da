"""What the warpgroup tests share (tests/test_wgmma*.py, tests/gpu/test_wgmma_gpu.py): a GemmSpec
compiled for sm_90a with no tuning cache, the schedule `tile-plan` writes for it, a located
refusal, ptxas's verdict on its PTX, and the check that a warpgroup kernel's D is the sm_90 kernel's of the same problem."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, lower, parse
from tilemma.compiler.driver.runner import RunResult, run_compiled
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.dialects.schedule import Schedule, ScheduleAttr

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found ($PTXAS, PATH, nvidia-cuda-nvcc)")


def is_sm90() -> bool:
    """Whether this machine has an sm_90 GPU (the warpgroup kernels' GPU tests run on it)."""
    return cuda_runtime.gpu_available() and cuda_runtime.device_arch() in ("sm_90", "sm_90a")


def options(sm: str = "90a", **kw) -> CompileOptions:
    return CompileOptions(**{"sm": sm, "tune_cache": "", **kw})


def compiled(spec: GemmSpec, sm: str = "90a", **kw):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, options(sm, **kw))
    return kernel


def warp_module(spec: GemmSpec, sm: str = "90a", **kw):
    """`spec`'s kernel lowered to the warp level under these options (the module)."""
    module, locations = parse(str(gemm_module(spec)), spec.name)
    lower(module, locations, options(sm, **kw), warp_level=True)
    return module


def schedule(spec: GemmSpec, sm: str = "90a", **kw) -> Schedule:
    """The `#warp.schedule` tile-plan chooses for `spec` under these options."""
    module = warp_module(spec, sm, **kw)
    [attr] = [o.attributes["warp.schedule"] for o in module.walk() if "warp.schedule" in o.attributes]
    assert isinstance(attr, ScheduleAttr)
    return attr.schedule


def assert_refused_at_the_mma(spec: GemmSpec, message: str, sm: str = "90a", **kw) -> None:
    """`--wgmma` on `spec` is a located error (at the tile.mma that asked for it) saying `message`."""
    with pytest.raises(LocatedVerifyError) as e:
        compiled(spec, sm, wgmma=True, **kw)
    assert message in str(e.value)
    assert e.value.span is not None


def assert_assembles_without_spills(ptx: str) -> None:
    result = run_ptxas(ptx, "sm_90a", ("-v",))
    assert result.ok, result.log
    assert re.search(r"(?<![0-9])0 bytes spill stores", result.log), result.log  # (not 10, 20, ... bytes)


def like_the_sm90_kernel(spec: GemmSpec, options_: dict, on: str, seed: int, instruction: str,
                         sm90_instruction: str, ahead: str = "leaders") -> RunResult:
    """`spec` multiplied by warpgroups (`wgmma`, `options_`) on `on` ("emulator" or "gpu"; the
    emulator running `ahead` ahead, `Program.run`): its instruction starts with `instruction`, D
    is within the reference's bound, and every output word is the sm_90 kernel's
    (`sm90_instruction`: mma.sync, or mma.sp) of the same problem, which takes the warpgroup
    kernel's split of K so that both add the same sums in the same order. Returns the warpgroup
    kernel's run."""
    kernel = compiled(spec, wgmma=True, **options_)
    assert kernel.variant.startswith(instruction), kernel.variant
    result = run_compiled(kernel, seed, on, ahead=ahead)
    assert result.ok, result.line()
    splits = kernel.abi.tiling[6] if len(kernel.abi.tiling) > 6 else 1
    want = run_compiled(compiled(spec, "90", split_k=splits), seed, on)
    assert want.variant.startswith(sm90_instruction), want.variant
    for name, out in result.outputs.items():
        assert np.array_equal(out.view(np.uint8), want.outputs[name].view(np.uint8)), name
    return result


def exactly_a_times_b(spec: GemmSpec, kernel, on: str, seed: int) -> None:
    """An 8-bit integer `kernel` of `spec` run on `on` with random operands (extremes in some rows
    and columns, so that sums run far) and a C near the int32 limits where it has one: D equals
    numpy's A @ B (+ C), wrapped to int32, from the arguments as given, every word, and the sm_90
    mma.sync kernel's words for the same arguments."""
    rng = np.random.default_rng(seed)
    dt, (lo, hi) = (np.int8, (-128, 128)) if spec.a == "s8" else (np.uint8, (0, 256))
    lead = (spec.batch,) if spec.batch else ()
    a = rng.integers(lo, hi, (*lead, spec.m, spec.k)).astype(dt)
    b = rng.integers(lo, hi, (*lead, spec.k, spec.n)).astype(dt)
    a[..., ::7, :] = lo
    b[..., :, ::5] = hi - 1 if spec.a == "u8" else lo
    inputs = {"a": a, "b": b}
    want = a.astype(np.int64) @ b.astype(np.int64)
    if spec.c:
        inputs["c"] = rng.integers(-2**31, 2**31, (*lead, spec.m, spec.n)).astype(np.int32)
        want = want + inputs["c"]
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    result = run_compiled(kernel, seed, on, inputs=inputs)
    assert result.ok, result.line()
    [d] = result.outputs.values()
    assert np.array_equal(d, want), f"{int((d != want).sum())} of {want.size} words differ"
    mma_sync = run_compiled(compiled(spec, "90"), seed, on, inputs=inputs)
    assert mma_sync.variant.startswith("mma.sync"), mma_sync.variant
    assert np.array_equal(list(mma_sync.outputs.values())[0], d)


def same_words_as_mma_sync(spec: GemmSpec, kernel, on: str, seed: int) -> None:
    """`kernel` of an 8-bit `spec` with an epilogue, run on `on` with every input given (A and B
    random over their type, the epilogue's vectors and C wide values of both signs): within the
    reference's bound, and every output word the sm_90 mma.sync kernel's for the same arguments."""
    rng = np.random.default_rng(seed)
    dt, (lo, hi) = (np.int8, (-128, 128)) if spec.a == "s8" else (np.uint8, (0, 256))
    inputs = {"a": rng.integers(lo, hi, (spec.m, spec.k)).astype(dt), "b": rng.integers(lo, hi, (spec.k, spec.n)).astype(dt)}
    for p in kernel.abi.params:
        name = p.name.removeprefix("p_")
        if name not in ("a", "b", "d") and "split" not in name:
            inputs[name] = (rng.standard_normal(p.shape) * 2.0 ** rng.integers(-8, 8, p.shape)).astype(np.dtype(p.dtype))
    result = run_compiled(kernel, seed, on, inputs=inputs)
    assert result.ok, result.line()
    want = run_compiled(compiled(spec, "90"), seed, on, inputs=inputs)
    assert want.variant.startswith("mma.sync"), want.variant
    for name, out in result.outputs.items():
        assert np.array_equal(out.view(np.uint8), want.outputs[name].view(np.uint8)), name
