"""benchmarks/ptx_sims.py: the restage simulation's PTX adds, inside the K loop after the stage's
barrier, the pass's shared reads, transposes and writes and a second barrier, asks for the ring's
shared memory, and still assembles (the GPU run checks its D: tests/gpu is not needed for that); the
mn-order and release simulations' kernels give, in the emulator, every word of D the kernel as built
gives."""

import dataclasses
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


def _sparse_tma(**kw):
    """A pre-compressed sparse kernel with an N-major B of 128 x 256 CTAs whose producers copy by
    the TMA (B's stage one 3-d copy), as a TilemmaBuild and its CompiledKernel."""
    from benchmarks import gemm_bench as gb
    from tilemma.compiler.driver.gemm_generator import GemmSpec
    from tests.wgmma_cases import compiled

    k = compiled(GemmSpec(256, 512, 512, "f16", "f16", "f32", pre_compressed=True), wgmma=True, producers=4, tma=1,
                 warps="8x1", warp_tile="1x32", **kw)
    return gb.TilemmaBuild(k.ptx, k.name, tuple(k.grid), tuple(k.block), k.abi.shared_bytes, k.variant, (),
                           k.abi.tensor_maps), k


def _same_words(want, got) -> bool:
    """Whether two runs' outputs are the same, word for word."""
    import numpy as np

    return all(np.array_equal(o.view(np.uint8), got.outputs[n].view(np.uint8)) for n, o in want.outputs.items())


def _run(k, build, ahead: str = "leaders"):
    import dataclasses

    from tilemma.compiler.driver.runner import run_compiled

    swapped = dataclasses.replace(k, ptx=build.ptx, abi=dataclasses.replace(k.abi, tensor_maps=build.tensor_maps,
                                                                            shared_bytes=build.shared))
    return run_compiled(swapped, 3, "emulator", ahead=ahead)


@pytest.mark.parametrize("kw", [{}, {"persistent": 3}], ids=["a-cta-a-tile", "persistent"])
def test_mn_order_computes_the_kernel_s_words(kw):
    """The stage in CUTLASS's order (4-d map, LBO 1 KiB, SBO 4 KiB, K steps of 16 KiB) gives every
    word of D the kernel as built gives, in the emulator (which models the TMA's boxes and the
    descriptors' strides); with the K steps left at 4 KiB it does not."""
    build, k = _sparse_tma(**kw)
    sim = ptx_sims.mn_order(build)
    assert "cp.async.bulk.tensor.4d" in sim.ptx and "cp.async.bulk.tensor.3d" not in sim.ptx
    assert sim.tensor_maps[-1].box == (64, 8, 4, 8) and sim.tensor_maps[-1].strides == (1024, 128, 8192)
    want, got = _run(k, build), _run(k, sim)
    assert want.ok and got.ok
    assert _same_words(want, got)
    if not kw:
        short = re.sub(r"(add\.s64 %rd\d+, %rd\d+, )1024;", r"\g<1>256;", sim.ptx)
        wrong = _run(k, type(sim)(**{**sim.__dict__, "ptx": short}))
        assert not _same_words(want, wrong)


@needs_ptxas
def test_mn_order_assembles():
    sim = ptx_sims.mn_order(_sparse_tma()[0])
    result = run_ptxas(sim.ptx, "sm_90a")
    assert result.ok, result.log


@pytest.mark.parametrize("kw", [{}, {"persistent": 3}], ids=["a-cta-a-tile", "persistent"])
def test_release_computes_the_kernel_s_words(kw):
    """One release a consumer warpgroup (`empty` counting 2, the arrivals guarded by the
    warpgroup's first thread) gives every word of D the kernel as built gives, in the emulator,
    whose consumer warpgroups drift apart (`warpgroups_apart`). Counted as one, the leading
    warpgroup's arrival frees the stage alone: the producers refill it before the lagging one has
    read it, which the emulator refuses (the lagging warpgroup waits for a phase the barrier has
    gone past); so does a release by the first warpgroup for both (counting 1), which a lockstep
    run cannot tell from the right one."""
    from tilemma.compiler.verify.emulator.machine import EmulationError

    build, k = _sparse_tma(**kw)
    sim = ptx_sims.release(build)
    assert sim.ptx.count("@%xr0 mbarrier.arrive.shared::cta.b64") >= 2
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\], 2;", sim.ptx)) == 4
    want, got = _run(k, build), _run(k, sim)
    assert want.ok and got.ok
    assert _same_words(want, got)
    with pytest.raises(EmulationError, match="deadlock|arrive at the mbarrier"):
        _run(k, ptx_sims.release(build, counted=1))
    one = ptx_sims.release(build, counted=1)
    first_only = one.ptx.replace("and.b32 %xt0, %xt0, 127;", "and.b32 %xt0, %xt0, 1023;")
    assert first_only != one.ptx
    with pytest.raises(EmulationError, match="deadlock"):
        _run(k, dataclasses.replace(one, ptx=first_only))


@pytest.mark.parametrize("kw", [{}, {"persistent": 3}], ids=["a-cta-a-tile", "persistent"])
def test_a_release_by_one_warpgroup_for_both_fails_with_either_ahead(kw):
    """The release by one consumer warpgroup for both (`empty` counting 1) is wrong whichever it
    is, but the emulator finds it only where the other one lags: by the first warpgroup, with the
    leaders ahead; by the second, with the laggards ahead (`Program.run` ahead). With the other
    order each gives the kernel's words, as a lockstep run did; the kernel as built gives them in
    both."""
    from tilemma.compiler.verify.emulator.machine import EmulationError

    build, k = _sparse_tma(**kw)
    want = _run(k, build)
    assert want.ok and _same_words(want, _run(k, build, "laggards"))
    one = ptx_sims.release(build, counted=1).ptx.replace("and.b32 %xt0, %xt0, 127;", "and.b32 %xt0, %xt0, 1023;")
    second = one.replace("setp.eq.u32 %xr0, %xt0, 0;", "setp.eq.u32 %xr0, %xt0, 128;")
    assert second != one
    for ptx, caught, missed in ((one, "leaders", "laggards"), (second, "laggards", "leaders")):
        broken = dataclasses.replace(build, ptx=ptx)
        with pytest.raises(EmulationError, match="deadlock"):
            _run(k, broken, caught)
        got = _run(k, broken, missed)
        assert got.ok and _same_words(want, got)


@needs_ptxas
def test_release_assembles():
    result = run_ptxas(ptx_sims.release(_sparse_tma()[0]).ptx, "sm_90a")
    assert result.ok, result.log


@pytest.mark.parametrize("ahead", ["leaders", "laggards"])
def test_stagger_computes_the_kernel_s_words(ahead):
    """The second consumer warpgroup starting after a counting loop gives every word of D the
    kernel as built gives, with either warpgroup ahead in the emulator."""
    build, k = _sparse_tma(persistent=3)
    sim = ptx_sims.stagger(build, 50)
    assert sim.ptx.count("$xz_loop:") == 1 and "setp.lt.u32 %xzp1, %xz1, 50;" in sim.ptx
    want, got = _run(k, build), _run(k, sim, ahead)
    assert want.ok and got.ok
    assert _same_words(want, got)


def test_ptx_ab_saves_builds_and_refuses_one_that_launches_otherwise(tmp_path):
    """`ptx_ab write` saves each cell's build as this checkout makes it (a TMA kernel's tensor maps
    included), `pairs` reads it back equal and pairs it with a fresh build; a saved build whose
    launch differs (here its grid) is refused, unless the run says the change retiles on purpose
    (`--any-launch`)."""
    import json

    from benchmarks import ptx_ab

    cells = ["sparse-f16-pre:256x512x1024", "tf32-brow:256x256x512"]
    assert ptx_ab.write(str(tmp_path), cells) == 0
    for (text, base), (fam, shape, ours, marked) in zip(
            (ptx_ab.saved(str(p)) for p in sorted(tmp_path.iterdir())), ptx_ab.pairs(str(tmp_path))):
        assert base == ours and marked.config == ours.config + " +base" and marked.ptx == ours.ptx
    assert ptx_ab.saved(str(tmp_path / "000.json"))[1].tensor_maps  # the TMA kernel's maps came back
    path = tmp_path / "001.json"
    data = json.loads(path.read_text())
    data["build"]["grid"][0] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="launch differently"):
        ptx_ab.pairs(str(tmp_path))
    [_, (_, _, ours, base)] = ptx_ab.pairs(str(tmp_path), any_launch=True)
    assert base.grid[0] == ours.grid[0] + 1
    assert ptx_ab.main(["run", str(tmp_path), "out.csv", "--other"]) == 2  # (the usage, no run)


# The epilogue simulations, each on the kernel built with its stores as they were (`staged_stores=False`):
# (simulation, the mutation that must change D's words, the simulation's shared bytes from the kernel's)
EPILOGUE_SIMS = {
    # 16 bytes a lane, a pair of rows' stores exchanged with the neighbouring lane; the wrong partner lane
    "quad-stores": (ptx_sims.quad_stores, ("%xqs0, 1, 31, -1;", "%xqs0, 2, 31, -1;"), lambda shared: shared),
    # through each warp's shared slot as whole rows; the reads' swizzle left out
    "staged-stores": (ptx_sims.staged_stores, ("xor.b32 %xg1, %xg4, %xg5;", "mov.b32 %xg1, %xg4;"),
                      lambda shared: -(-shared // 128) * 128 + 8 * 2048),
}


@pytest.mark.parametrize("name", list(EPILOGUE_SIMS))
@pytest.mark.parametrize("kw", [{}, {"persistent": 3}], ids=["a-cta-a-tile", "persistent"])
def test_epilogue_sims_compute_the_kernel_s_words(name, kw):
    """The accumulators stored 16 bytes a lane, half the stores, give every word of D the kernel
    as built gives, in the emulator; with the simulation's mutation they do not."""
    sim_of, (before, after), shared = EPILOGUE_SIMS[name]
    build, k = _sparse_tma(staged_stores=False, **kw)
    sim = sim_of(build)
    assert "st.global.v2.f32" not in sim.ptx
    assert sim.ptx.count("st.global.v4.f32") * 2 == build.ptx.count("st.global.v2.f32")
    assert sim.shared == shared(build.shared)
    want, got = _run(k, build), _run(k, sim)
    assert want.ok and got.ok
    assert _same_words(want, got)
    if not kw:
        wrong = dataclasses.replace(sim, ptx=sim.ptx.replace(before, after))
        assert wrong.ptx != sim.ptx
        assert not _same_words(want, _run(k, wrong))


@needs_ptxas
@pytest.mark.parametrize("name", list(EPILOGUE_SIMS))
def test_epilogue_sims_assemble(name):
    result = run_ptxas(EPILOGUE_SIMS[name][0](_sparse_tma(staged_stores=False)[0]).ptx, "sm_90a")
    assert result.ok, result.log
