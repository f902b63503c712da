"""Targets own their limits: every compiled kernel fits its target's record (compiler/core/targets.py),
the defaults are cut to fit, and a forced configuration past a limit is a located error that names
the need, the limit and the target."""

import re

import pytest

import tilemma
from tilemma.compiler.core import configs, isa, targets
from tilemma.compiler.driver import pipeline
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.dialects import warp
from tilemma.passes.warp.stage_shared import WarpStageShared
from tilemma.passes.warp_to_ptx.shared import place_shared
from xdsl.dialects import memref

TARGETS = ("80", "86", "89", "90", "120a")
# The staged families (spec fields) and the targets where their instruction exists.
FAMILIES = {
    "f16": (dict(a="f16", b="f16", acc="f32"), TARGETS),
    "bf16-col": (dict(a="bf16", b="bf16", acc="f32", b_layout="col"), TARGETS),
    "tf32-col": (dict(a="tf32", b="tf32", acc="f32", b_layout="col"), TARGETS),
    "tf32-row": (dict(a="tf32", b="tf32", acc="f32"), TARGETS),
    "s8-col": (dict(a="s8", b="s8", acc="s32", b_layout="col"), TARGETS),
    "e4m3-col": (dict(a="e4m3", b="e4m3", acc="f32", b_layout="col"), ("89", "90", "120a")),
    "f64": (dict(a="f64", b="f64", acc="f64"), TARGETS),  # staged from sm_90 on (m16n8k16)
    "s4-col": (dict(a="s4", b="s4", acc="s32", b_layout="col"), TARGETS),  # widened to s8 from sm_90 on
    "b1-col": (dict(a="b1", b="b1", acc="s32", b_layout="col", popc="xor"), TARGETS),
    "f16-pre-compressed": (dict(a="f16", b="f16", acc="f32", pre_compressed=True), TARGETS),
}
ODD_SIZES = ((37, 91, 53), (130, 72, 256), (1000, 1000, 1000))


def _staged_shared_bytes(spec: GemmSpec, sm: str) -> int:
    """The kernel's dynamic shared memory, read from its warp-level IR (its shared `memref.alloc`s
    placed as warp-to-ptx places them): the pipeline up to `warp-stage-shared`, which allocates
    the stages (the passes after it pipeline, prefetch and lower the reads, which is most of a
    compile's time). `test_warp_level_shared_bytes_are_the_compiled_kernels` checks the two agree."""
    module, locations = pipeline.parse(str(gemm_module(spec)), "g.mlir")
    passes = pipeline.CompileOptions(sm=sm, tune_cache="").passes()
    staged = next(i for i, p in enumerate(passes) if isinstance(p, WarpStageShared))
    pipeline._apply(passes[:staged + 1], module, locations)
    used = 0
    for op in module.walk():
        if isinstance(op, memref.AllocOp) and warp.is_shared(op.memref.type):
            used = place_shared(used, op.memref.type)[1]  # type: ignore[arg-type]
    return used


def _kernel(spec: GemmSpec, sm: str, **options):
    [k] = tilemma.compile(str(gemm_module(spec)), sm, filename="g.mlir", tune_cache="", **options)
    return k


def _spec(fields: dict, m: int, n: int, k: int) -> GemmSpec:
    if fields["a"] == "s4":
        k += k % 2  # 4-bit K rows end on a byte
    if fields["a"] == "b1":
        k = max(256, k)
    return GemmSpec(m=m, n=n, k=k, **fields)


# -- the record ----------------------------------------------------------------------------


def test_every_target_has_a_record_that_max_shared_per_cta_reads():
    for t in targets.ALL_TARGETS:
        rec = t.limits
        assert targets.max_shared_per_cta(t) == rec.shared_per_cta <= rec.shared_per_sm
        assert rec.threads_per_cta == 1024 and rec.registers_per_thread == 255
    assert targets.max_shared_per_cta("sm_90") == 227 * 1024  # the constant the checks used before
    assert targets.limits("sm_80").shared_per_cta == 163 * 1024
    assert {targets.limits(sm).shared_per_cta for sm in ("86", "89", "120a")} == {99 * 1024}


def test_the_wave_follows_the_sm_count():
    assert targets.limits("90").one_wave == 120  # the H100's, as measured for the defaults
    assert targets.limits("80").one_wave == 108 * 10 // 11
    assert targets.limits("88").sm_count is None and targets.limits("88").one_wave == 120


def test_a_ctas_threads_share_the_register_file():
    rec = targets.limits("86")
    assert rec.thread_registers(256) == 255
    assert rec.thread_registers(512) == 128 and rec.thread_registers(1024) == 64


def _has_dense(sm: str, atype: str) -> bool:
    return any(v.atype == atype and v.kind is None and v.sparse is None for v in isa.legal_variants(sm))


@pytest.mark.parametrize("sm", [t.name for t in targets.ALL_TARGETS if t.suffix != "f"])
def test_fp8_and_int4_are_recorded_exactly_where_the_isa_has_them(sm):
    rec = targets.limits(sm)
    assert (rec.fp8_mma is not None) == _has_dense(sm, "e4m3")
    assert rec.int4_mma in (targets.NATIVE, targets.EMULATED) and _has_dense(sm, "s4")


@pytest.mark.parametrize("sm", ("80", "86", "89", "90", "100a", "120a"))
def test_int4_is_widened_exactly_where_the_record_says_emulated(sm):
    k = _kernel(GemmSpec(64, 40, 64, "s4", "s4", "s32", b_layout="col"), sm)
    emulated = targets.limits(sm).int4_mma == targets.EMULATED
    assert ("m16n8k32.row.col.s32.s8.s8.s32" in k.ptx) == emulated
    assert ("m16n8k64.row.col.s32.s4.s4.s32" in k.ptx) == (not emulated)


# -- the defaults --------------------------------------------------------------------------


def test_fit_shared_cuts_stages_to_three_then_stage_k_then_stages():
    f16_wide = 128 * 16 + 256 * 16  # bits a stage holds per element of K: a 128x256 f16 CTA tile
    fit = dict(cut_stages=True, cut_k=True, read_k=16)
    assert configs.fit_shared(3, 64, f16_wide, 227 * 1024, "16bit", **fit) == (3, 64)  # fits
    assert configs.fit_shared(5, 64, f16_wide, 99 * 1024, "16bit", **fit) == (3, 32)
    assert configs.fit_shared(3, 64, f16_wide, 99 * 1024, "16bit", **{**fit, "cut_k": False}) == (2, 64)
    assert configs.fit_shared(3, 64, f16_wide, 99 * 1024, "16bit", **{**fit, "cut_stages": False}) == (3, 32)
    # tf32's stage K stops at 32, its candidates' shortest: then a stage fewer
    tf32_wide = 128 * 32 + 256 * 32
    assert configs.fit_shared(3, 32, tf32_wide, 99 * 1024, "32bit-row-b", **{**fit, "read_k": 8}) == (2, 32)
    # nothing to cut: returned as it is, over the limit (the caller refuses it)
    assert configs.fit_shared(3, 64, f16_wide, 99 * 1024, "16bit", **{**fit, "cut_stages": False,
                                                                        "cut_k": False}) == (3, 64)


def test_every_targets_defaults_are_the_h100s_or_smaller():
    h100 = configs.DEFAULTS[90]
    for number, row in configs.DEFAULTS.items():
        assert number in targets.LIMITS and row.keys() == h100.keys()
        for schedule, c in row.items():
            assert (c.warps, c.warp_tile) == (h100[schedule].warps, h100[schedule].warp_tile)
            assert c.stages <= h100[schedule].stages and c.stage_k <= h100[schedule].stage_k
    assert configs.default("120a", "64bit") == configs.Config("4x2", "2x4", 3, 16)


@pytest.mark.parametrize("family,sm", [(f, sm) for f, (_, sms) in FAMILIES.items() for sm in sms])
def test_default_kernels_fit_their_target(family, sm):
    """At 8192^3 and at odd sizes the default kernel's shared memory is within the target's
    limit; at 8192^3 every family staged on the target stays staged (cut, not dropped)."""
    fields, _ = FAMILIES[family]
    limit = targets.max_shared_per_cta(sm)
    for m, n, k in ((8192, 8192, 8192), *ODD_SIZES):
        shared = _staged_shared_bytes(_spec(fields, m, n, k), sm)
        assert shared <= limit, f"{family} {m}x{n}x{k} on sm_{sm}: {shared} bytes"
        if (m, n, k) == (8192, 8192, 8192):
            staged = not (family == "f64" and targets.parse_sm(sm).number < 90)  # m8n8k4 is not staged
            assert (shared > 0) == staged, shared


@pytest.mark.parametrize("family,sm,size", [("f16", "86", (8192, 8192, 8192)), ("tf32-row", "120a", (130, 72, 256)),
                                            ("s4-col", "90", (1000, 1000, 1000)), ("f16-pre-compressed", "80", (130, 72, 256)),
                                            ("b1-col", "89", (8192, 8192, 8192))])
def test_warp_level_shared_bytes_are_the_compiled_kernels(family, sm, size):
    spec = _spec(FAMILIES[family][0], *size)
    assert _staged_shared_bytes(spec, sm) == _kernel(spec, sm).shared_bytes > 0


def test_99_kib_targets_cut_the_large_and_small_size_class_adjustments():
    for sm in ("86", "89", "120a"):
        tf32_large = _kernel(GemmSpec(8192, 8192, 8192, "tf32", "tf32", "f32", b_layout="col"), sm)
        assert tf32_large.abi.config == "warps=2x4 warp-tile=4x8 stages=2 stage-k=32"  # 3 of K 32: 144 KiB
        tf32_small = _kernel(GemmSpec(2048, 2048, 128, "tf32", "tf32", "f32", b_layout="col"), sm)
        assert tf32_small.abi.config == "warps=2x2 warp-tile=4x8 stages=3 stage-k=32"  # 4: 128 KiB
        f64 = _kernel(GemmSpec(4096, 4096, 4096, "f64", "f64", "f64"), sm)
        assert f64.shared_bytes == (73728 if sm == "120a" else 0)
    for sm in ("80", "90"):  # 163 and 227 KiB: the H100's
        assert _kernel(GemmSpec(8192, 8192, 8192, "tf32", "tf32", "f32", b_layout="col"), sm
                       ).abi.config == "warps=2x4 warp-tile=4x8 stages=3 stage-k=32"


# -- forced configurations -----------------------------------------------------------------

F16_8K = GemmSpec(8192, 8192, 8192, "f16", "f16", "f32")
WIDE = dict(warps="2x4", warp_tile="4x8")  # a 128x256 f16 CTA tile: 768 bytes a stage per element of K
# (stages of K 64 that exceed the target's shared memory per CTA; one stage fewer fits)
OVER = {"80": 4, "86": 3, "89": 3, "90": 5, "120a": 3}


@pytest.mark.parametrize("sm", TARGETS)
def test_a_forced_configuration_past_the_shared_limit_is_a_located_error(sm):
    stages, limit = OVER[sm], targets.max_shared_per_cta(sm)
    with pytest.raises(tilemma.CompileError) as err:
        _kernel(F16_8K, sm, stages=stages, stage_k=64, **WIDE)
    need = stages * 64 * 768
    assert need > limit
    assert re.match(rf"g\.mlir:\d+:\d+: error: tile\.mma: {stages} stages of K 64 with a 128x256 CTA tile "
                    rf"need {need} bytes of shared memory; a CTA has at most {limit} on "
                    rf"{targets.parse_sm(sm).name} \({limit // 1024} KiB\)", str(err.value))
    fits = _kernel(F16_8K, sm, stages=stages - 1, stage_k=64, **WIDE)
    assert fits.shared_bytes == (stages - 1) * 64 * 768 <= limit


@pytest.mark.parametrize("sm", TARGETS)
def test_forced_threads_and_registers_past_the_target_are_located_errors(sm):
    name = targets.parse_sm(sm).name
    with pytest.raises(tilemma.CompileError, match=rf"g\.mlir:\d+:\d+: error: tile\.mma: warps 8x8 make a CTA of "
                       rf"2048 threads; a CTA holds at most 1024 \(32 warps\) on {name}"):
        _kernel(F16_8K, sm, warps="8x8", warp_tile="1x1", stages=0)
    # 4x4 warps: 512 threads of at most 128 registers; a 4x8 tile holds 160
    with pytest.raises(tilemma.CompileError, match=rf"g\.mlir:\d+:\d+: error: tile\.mma: warp tile 4x8 holds 160 "
                       rf"fragment registers per thread; .* exceeds the 128 registers a thread of a "
                       rf"512-thread CTA can have on {name}"):
        _kernel(F16_8K, sm, warps="4x4", warp_tile="4x8", stages=2, stage_k=32)
    with pytest.raises(tilemma.CompileError, match=rf"warp tile 8x8 holds 304 fragment registers .* exceeds "
                       rf"the 255 registers a thread of a 128-thread CTA can have on {name}"):
        _kernel(F16_8K, sm, warps="2x2", warp_tile="8x8", stages=0)


def test_what_is_not_forced_is_cut_to_fit():
    """On sm_86 (99 KiB) the options the user left to the defaults are cut, the forced ones kept."""
    def config(**options):
        return _kernel(F16_8K, "86", **WIDE, **options).abi.config

    assert config() == "warps=2x4 warp-tile=4x8 stages=3 stage-k=32"
    assert config(stages=4) == "warps=2x4 warp-tile=4x8 stages=4 stage-k=32"
    assert config(stage_k=64) == "warps=2x4 warp-tile=4x8 stages=2 stage-k=64"
    with pytest.raises(tilemma.CompileError, match="a CTA has at most 101376 on sm_86"):
        config(stages=4, stage_k=64)
