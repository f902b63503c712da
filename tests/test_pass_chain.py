"""Each step of the tile -> warp chain gives a correct kernel on its own.

The staged loop of `warp-stage-shared` (each stage copied, waited for, then read), the same
after `warp-pipeline` (copies S - 1 stages ahead) and after `warp-prefetch-fragments` (reads
ahead, carried in registers) are run in the emulator, which checks shared-memory races (a
missing barrier or wait is an error) and bounds; every output element is compared with the
reference and, bit for bit, across the three forms: each accumulator sees the same mmas in the
same K order, so the words must agree.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.passes.warp.pipeline import WarpPipeline
from tilemma.passes.warp.prefetch import WarpPrefetchFragments

# (spec, sm, forced configuration): each family the staged schedule takes, each operand order
# (an M-major A: ldmatrix .trans or warp.load_shared transposed), sizes with a ragged edge,
# one-stage and many-stage K
CASES = {
    "f16-interleaved": (GemmSpec(130, 70, 200, "f16", "f16", "f32"), "90", dict(warps="2x2", warp_tile="2x4", stages=3, stage_k=32)),
    "bf16-kmajor-b": (GemmSpec(96, 48, 160, "bf16", "bf16", "f32", b_layout="col"), "90", dict(warps="2x1", warp_tile="1x3", stages=4, stage_k=32)),
    "f16-one-stage": (GemmSpec(40, 24, 48, "f16", "f16", "f32"), "80", dict(warps="1x1", warp_tile="2x2", stages=3, stage_k=64)),
    "s8-kmajor-b": (GemmSpec(70, 40, 320, "s8", "s8", "s32", b_layout="col"), "90", dict(warps="2x2", warp_tile="2x2", stages=2, stage_k=64)),
    "tf32-row-b": (GemmSpec(50, 40, 72, "tf32", "tf32", "f32"), "90", dict(warps="1x2", warp_tile="2x2", stages=3, stage_k=16)),
    "f64": (GemmSpec(40, 24, 96, "f64", "f64", "f64"), "90", dict(warps="1x1", warp_tile="2x2", stages=3, stage_k=16)),
    "s4-widened": (GemmSpec(64, 40, 384, "s4", "s4", "s32", b_layout="col"), "90", dict(warps="1x1", warp_tile="2x2", stages=3, stage_k=128)),
    "b1": (GemmSpec(32, 24, 768, "b1", "b1", "s32", b_layout="col", popc="xor"), "80", dict(warps="1x1", warp_tile="2x3", stages=2, stage_k=256)),
    "f16-acol": (GemmSpec(130, 70, 200, "f16", "f16", "f32", a_layout="col"), "90", dict(warps="2x2", warp_tile="2x2", stages=3, stage_k=32)),
    "bf16-acol-bcol": (GemmSpec(96, 48, 160, "bf16", "bf16", "f32", a_layout="col", b_layout="col"), "80", dict(warps="2x1", warp_tile="1x3", stages=2, stage_k=64)),
    "tf32-acol-bcol": (GemmSpec(50, 40, 72, "tf32", "tf32", "f32", a_layout="col", b_layout="col"), "90", dict(warps="1x2", warp_tile="2x2", stages=3, stage_k=16)),
    "f64-acol": (GemmSpec(40, 24, 96, "f64", "f64", "f64", a_layout="col"), "90", dict(warps="1x1", warp_tile="2x2", stages=3, stage_k=16)),
    "pre-compressed": (GemmSpec(70, 40, 200, "f16", "f16", "f32", pre_compressed=True), "90", dict(warps="1x1", warp_tile="2x2", stages=3, stage_k=64)),
}


@dataclasses.dataclass(frozen=True)
class _Without(CompileOptions):
    """The driver's pipeline without some of its passes."""

    skip: tuple[type, ...] = ()

    def passes(self):
        return [p for p in super().passes() if not isinstance(p, self.skip)]


def chain_words(name: str, on: str) -> list[np.ndarray]:
    """D's bytes from the staged, the pipelined and the prefetched form of a case, run `on` the
    emulator or the GPU, each checked against the reference."""
    spec, sm, config = CASES[name]
    text = str(gemm_module(spec))
    words = []
    for skip in ((WarpPipeline, WarpPrefetchFragments), (WarpPrefetchFragments,), ()):
        [kernel] = compile_text(text, spec.name, _Without(sm=sm, skip=skip, **config))
        assert "cp.async" in kernel.ptx, (name, skip)
        result = run_compiled(kernel, seed=3, on=on)
        assert result.ok, (name, skip, result.detail)
        [out] = list(result.outputs.values())
        words.append(np.ascontiguousarray(out).view(np.uint8))
    return words


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_of_the_chain_runs(name):
    words = chain_words(name, "emulator")
    assert all(np.array_equal(words[0], w) for w in words[1:]), name


def test_steps_keep_their_own_form():
    """The unpipelined loop waits for the stage it just copied; the pipelined one waits S - 2
    groups behind and refills the ring after its barrier; prefetching moves the wait, the
    barrier and the next stage's first reads to the end of the loop body."""
    spec, sm, config = CASES["f16-interleaved"]
    text = str(gemm_module(spec))
    loops = {}
    for label, skip in (("staged", (WarpPipeline, WarpPrefetchFragments)), ("pipelined", (WarpPrefetchFragments,)),
                        ("prefetched", ())):
        [kernel] = compile_text(text, spec.name, _Without(sm=sm, skip=skip, **config))
        loops[label] = kernel.ptx.split("$k_loop")[1]  # from the K loop's label on

    def first(body: str, *what: str) -> list[int]:
        return [body.index(w) for w in what]

    staged, pipelined, prefetched = loops["staged"], loops["pipelined"], loops["prefetched"]
    assert "cp.async.wait_group 0;" in staged and "cp.async.wait_group 1;" not in staged.split("bra")[0]
    wait, bar, copy, read = first(pipelined, "cp.async.wait_group 1;", "bar.sync", "cp.async.cg", "ldmatrix")
    assert wait < bar < copy < read
    copy, mma, wait, bar = first(prefetched, "cp.async.cg", "mma.sync", "cp.async.wait_group 1;", "bar.sync")
    assert copy < mma < wait < bar
