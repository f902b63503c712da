"""benchmarks/ptx_sims.py: the restage simulation's PTX adds, inside the K loop after the stage's
barrier, the pass's shared reads, transposes and writes and a second barrier, asks for the ring's
shared memory, and still assembles (the GPU run checks its D: tests/gpu is not needed for that)."""

import re

import pytest

from benchmarks import ptx_sims
from tilemma.compiler.runtime.ptxas import run_ptxas

from tests.wgmma_cases import needs_ptxas


@pytest.fixture(scope="module")
def kernel():
    return ptx_sims.build("s8", (512, 4096, 4096), "wgmma=1,stages=3", "8.7")


def _loop(ptx: str) -> str:
    start = ptx.index("$k_loop_")
    return ptx[start:ptx.index("bra.uni $k_loop_", start)]


def test_restage_adds_the_pass_inside_the_loop(kernel):
    sim = ptx_sims.restage(kernel)
    loop = _loop(sim.ptx)
    assert loop.count("bar.sync 0;") == _loop(kernel.ptx).count("bar.sync 0;") + 1
    blocks = (128 * 128) // 256 // 16  # B's stage (128 x 128 bytes) over 256 threads, 16 bytes each
    assert len(re.findall(r"ld\.shared\.b32 %xa", loop)) == 4 * blocks
    assert len(re.findall(r"prmt\.b32 %xa", loop)) == 8 * blocks
    assert len(re.findall(r"st\.shared\.b32 \[%xs6", loop)) == 4 * blocks
    assert sim.shared == -(-kernel.shared // 1024) * 1024 + 2 * 128 * 128


def test_barrier_only(kernel):
    sim = ptx_sims.restage(kernel, barrier_only=True)
    assert "ld.shared.b32 %xa" not in sim.ptx and sim.shared == kernel.shared
    assert _loop(sim.ptx).count("bar.sync 0;") == _loop(kernel.ptx).count("bar.sync 0;") + 1


@needs_ptxas
@pytest.mark.parametrize("kind", ["s8", "tf32"])
def test_it_assembles(kind):
    base = ptx_sims.build(kind, (512, 4096, 4096), "wgmma=1,stages=3", "8.7")
    result = run_ptxas(ptx_sims.restage(base, kind).ptx, "sm_90a")
    assert result.ok, result.log[-300:]
