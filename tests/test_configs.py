"""The configuration table and the tuning cache: what `tilemma tune` writes, the compiler reads."""

import re

import pytest

from tilemma.compiler.core import configs, targets
from tilemma.compiler.core.version import tilemma_key
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text


def _compile(spec, **options):
    [k] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", **options))
    return k


def test_size_classes_and_keys():
    assert configs.size_class(1024, 1024, 1024) == "small"
    assert configs.size_class(4096, 4096, 4096) == "medium"
    assert configs.size_class(8192, 8192, 8192) == "large"
    assert configs.cache_key("sm_90", "f16", "f16", "f32", "small") == "sm_90/f16xf16->f32/small"
    assert configs.family("bf16", "bf16") == "16bit" and configs.family("si8", "si8") is None


def test_every_candidate_compiles_to_what_it_says():
    spec = GemmSpec(256, 256, 256, "f16", "f16", "f32")
    for cand in configs.CANDIDATES["16bit"]:
        k = _compile(spec, warps=cand.warps, warp_tile=cand.warp_tile, stages=cand.stages,
                     stage_k=cand.stage_k, tune_cache="")
        assert k.abi.config == str(cand)


def test_cache_round_trip_and_use(tmp_path):
    path = str(tmp_path / "tune.json")
    chosen = configs.Config("2x4", "2x4", 3)
    configs.save(path, {"sm_90/f16xf16->f32/small": chosen}, {"sm_90/f16xf16->f32/small": {str(chosen): 1.0}})
    assert configs.load(path) == {"sm_90/f16xf16->f32/small": chosen}
    spec = GemmSpec(512, 512, 512, "f16", "f16", "f32")
    assert _compile(spec, tune_cache=path).abi.config == str(chosen)
    # another class, another type, or a forced option: the cache does not apply
    assert _compile(GemmSpec(512, 512, 512, "bf16", "bf16", "f32"), tune_cache=path).abi.config != str(chosen)
    assert _compile(spec, tune_cache=path, stages=2).abi.config.endswith("stages=2 stage-k=64")


def test_malformed_cache_is_an_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(f'{{"tilemma": "{tilemma_key()}", "configs": {{"k": {{"warps": "2x2"}}}}}}')
    with pytest.raises(ValueError, match="not a tilemma tuning cache"):
        configs.load(str(bad))


@pytest.mark.parametrize("entry,message", [
    ({"warps": "2x2", "warp_tile": "4x8", "stages": 1, "stage_k": 64}, "stages must be 0 (no shared memory) or 2..5, got 1"),
    ({"warps": "2x2", "warp_tile": "4x8", "stages": "3", "stage_k": 64}, "stages must be 0 (no shared memory) or 2..5, got '3'"),
    ({"warps": 2, "warp_tile": "4x8", "stages": 3, "stage_k": 64}, "warps must look like 2x4, got 2"),
    ({"warps": "2x2", "warp_tile": "0x8", "stages": 3, "stage_k": 64}, "warp-tile must be positive, got '0x8'"),
    ({"warps": "2x2", "warp_tile": "4x8", "stages": 3, "stage_k": 48}, "stage-k must be one of 16, 32, 64"),
    ({"warps": "2x2", "warp_tile": "4x8", "stages": True, "stage_k": 64}, "stages must be"),
])
def test_cache_entries_take_the_options_checks(tmp_path, entry, message):
    """A cache entry is checked as the options are: a one-stage ring would compile to
    `cp.async.wait_group -1` (a race on the GPU), a wrong type to an internal error."""
    import json

    bad = tmp_path / "tune.json"
    bad.write_text(json.dumps({"tilemma": tilemma_key(), "configs": {"sm_90/f16xf16->f32/small": entry}}))
    with pytest.raises(ValueError, match=re.escape(f"{bad}: tuning cache entry 'sm_90/f16xf16->f32/small': {message}")):
        configs.load(str(bad))


def test_cache_of_another_tilemma_is_ignored_with_a_note(tmp_path, capfd, monkeypatch):
    """Tuned configurations are measurements of the kernels one tilemma made: a cache written by
    another version (or an older, unmarked one) is ignored, with one note naming it."""
    import json

    path = tmp_path / "tune.json"
    chosen = configs.Config("2x4", "2x4", 3)
    configs.save(str(path), {"sm_90/f16xf16->f32/small": chosen}, {})
    assert json.loads(path.read_text())["tilemma"] == tilemma_key()
    spec = GemmSpec(512, 512, 512, "f16", "f16", "f32")
    assert _compile(spec, tune_cache=str(path)).abi.config == str(chosen)
    monkeypatch.setattr(configs, "_noted", set())
    for tuned_by in ("0.0.1+another", None):
        data = json.loads(path.read_text())
        data.pop("tilemma")
        if tuned_by:
            data["tilemma"] = tuned_by
        path.write_text(json.dumps(data))
        assert configs.load(str(path)) == {} and configs.load(str(path)) == {}
        err = capfd.readouterr().err
        assert err.count("tilemma: note:") == 1 and "its configurations are ignored" in err
        assert (f"tuned by tilemma {tuned_by}" if tuned_by else "tuned by an older tilemma") in err
        assert _compile(spec, tune_cache=str(path)).abi.config != str(chosen)
        monkeypatch.setattr(configs, "_noted", set())
    # the target is in each entry's key: an sm_80 compile does not take the sm_90 entry
    configs.save(str(path), {"sm_90/f16xf16->f32/small": chosen}, {})
    [k80] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="80", tune_cache=str(path)))
    assert k80.abi.config != str(chosen)


def test_deeply_nested_cache_is_an_error(tmp_path):
    bad = tmp_path / "deep.json"
    bad.write_text('{"configs": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(ValueError, match="not a tilemma tuning cache"):
        configs.load(str(bad))


def test_cache_entry_that_does_not_apply_falls_back(tmp_path, capfd):
    """An entry measured on other kernels of a class, met by one it cannot serve (K = 53 f16
    elements: rows not 4-byte aligned, gathered element by element, which one warp cannot do for a
    16 x 128 stage): the defaults, with a note, not an error."""
    path = str(tmp_path / "tune.json")
    chosen = configs.Config("1x1", "1x1", 3, 128)
    configs.save(path, {"sm_90/f16xf16->f32/small": chosen}, {})
    kernel = _compile(GemmSpec(37, 91, 53, "f16", "f16", "f32"), tune_cache=path)
    assert "warps=1x1" not in kernel.abi.config and "stages=0" not in kernel.abi.config  # the defaults
    assert "does not apply to @gemm_37x91x53_f16_f16_f32" in capfd.readouterr().err


@pytest.mark.parametrize("schedule,spec", [
    ("16bit", GemmSpec(4096, 4096, 4096, "f16", "f16", "f32")),
    ("8bit", GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", b_layout="col")),
    ("fp8", GemmSpec(4096, 4096, 4096, "e4m3", "e4m3", "f32", b_layout="col")),
    ("32bit", GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32", b_layout="col")),
    ("32bit-row-b", GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32")),
    # medium; 2x4-warp CTAs would leave more of the last wave idle (MEDIUM_WIDE does not apply), and
    # the grid is not resident at once with a fourth stage (MORE_STAGES does not)
    ("32bit-trunc", GemmSpec(512, 11008, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="trunc")),
    ("32bit-row-b-trunc", GemmSpec(512, 11008, 4096, "tf32", "tf32", "f32", a_layout="col", rounding="trunc")),
    ("64bit", GemmSpec(4096, 4096, 4096, "f64", "f64", "f64")),
    ("sparse-16bit", GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True)),
    ("4bit", GemmSpec(4096, 4096, 4096, "s4", "s4", "s32", b_layout="col", shape="m16n8k64")),
    ("4bit-widened", GemmSpec(4096, 4096, 4096, "s4", "s4", "s32", b_layout="col")),
    ("1bit", GemmSpec(4096, 4096, 4096, "b1", "b1", "s32", b_layout="col", popc="and")),
], ids=lambda x: x if isinstance(x, str) else "")
def test_defaults_come_from_the_table(schedule, spec):
    """With nothing forced and no cache, a medium problem compiles to its schedule's sm_90 default."""
    assert _compile(spec, tune_cache="").abi.config == str(configs.default("sm_90", schedule))


def test_size_class_adjustments_come_from_the_table():
    f16 = _compile(GemmSpec(8192, 8192, 8192, "f16", "f16", "f32"), tune_cache="").abi.config
    assert f16.startswith(f"warps={configs.LARGE_WARPS['16bit']} ")
    medium = _compile(GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32", b_layout="col"), tune_cache="").abi.config
    assert f"stages={configs.default('sm_90', '32bit').stages} " in medium
    # tf32 fed as it is (trunc): medium problems whose 2x4-warp CTAs fill a wave take them, unless
    # their last wave leaves more SMs idle than the default's (512 x 11008: 172 such CTAs on 132 SMs)
    wide, narrow = configs.LARGE_WARPS["32bit-trunc"], configs.default("sm_90", "32bit-trunc").warps
    for (m, n), warps in (((4096, 4096), wide), ((512, 4096), narrow), ((1024, 11008), wide), ((512, 11008), narrow)):
        spec = GemmSpec(m, n, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="trunc")
        assert _compile(spec, tune_cache="").abi.config.startswith(f"warps={warps} "), (m, n)
    # a default CTA larger than the problem is not taken: 4x2 warps of 2x4 f64 tiles are 128x64
    assert _compile(GemmSpec(40, 40, 64, "f64", "f64", "f64"), tune_cache="").abi.config.startswith("warps=2x2 ")


@pytest.mark.parametrize("m, n, k, expected", [
    (128, 11008, 4096, f"warps={configs.WAVE_WARPS['64bit']} "),  # 172 CTAs -> 344: a fuller last wave
    (4096, 4096, 4096, "warps=4x2 "),  # as full either way
    (128, 4096, 4096, "warps=4x2 "),  # 64 tiles: split-K fills the wave instead
])
def test_wave_warps(m, n, k, expected):
    """`configs.WAVE_WARPS`: f64 takes 2x2-warp CTAs where the default's fill a wave but leave its
    last one emptier by a tenth of the SMs or more, and only there."""
    assert _compile(GemmSpec(m, n, k, "f64", "f64", "f64"), tune_cache="").abi.config.startswith(expected)


FOURTH = f"stages={configs.MORE_STAGES_COUNT} "


@pytest.mark.parametrize("spec, sm, options, expected", [
    # the whole grid resident with a fourth stage, a long K loop: taken
    (GemmSpec(512, 4096, 4096, "f16", "f16", "f32"), "90", {}, "warps=2x2 warp-tile=4x8 stages=4 stage-k=64"),
    (GemmSpec(1024, 1024, 1024, "tf32", "tf32", "f32", b_layout="col"), "90", {}, FOURTH),
    # tf32 keeps its split (UNSPLIT_MORE_STAGES; three: EVEN_WAVES), with the fourth stage
    (GemmSpec(64, 11008, 4096, "tf32", "tf32", "f32", b_layout="col"), "90", {}, FOURTH + "stage-k=32 split-k=3"),
    # s8 and f16 whose two splits would only even the wave: unsplit, with the fourth stage
    (GemmSpec(64, 11008, 4096, "s8", "s8", "s32", b_layout="col"), "90", {}, "warps=2x2 warp-tile=2x8 stages=4 stage-k=128"),
    (GemmSpec(64, 11008, 4096, "f16", "f16", "f32"), "90", {}, "warps=2x2 warp-tile=2x8 stages=4 stage-k=64"),
    # ... but not against a forced split
    (GemmSpec(64, 11008, 4096, "f16", "f16", "f32"), "90", {"split_k": 2}, FOURTH + "stage-k=64 split-k=2"),
    # a short K loop (8 stages of K 128; 8 of K 32): not taken
    (GemmSpec(1000, 1000, 1000, "s8", "s8", "s32", b_layout="col"), "90", {}, "stages=3 "),
    (GemmSpec(2048, 2048, 256, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), "90", {}, "stages=3 "),
    # the grid not resident at once with it (1024 CTAs; 344), a large problem, forced stages: not taken
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), "90", {}, "stages=3 "),
    (GemmSpec(512, 11008, 4096, "tf32", "tf32", "f32", rounding="trunc"), "90", {}, "stages=3 "),
    (GemmSpec(8192, 8192, 8192, "s8", "s8", "s32", b_layout="col"), "90", {}, "stages=3 "),
    (GemmSpec(512, 4096, 4096, "f16", "f16", "f32"), "90", {"stages": 3}, "stages=3 "),
    # a 99 KiB target: the 4-stage ring of a 128x128 f16 CTA (128 KiB) does not fit
    (GemmSpec(512, 4096, 4096, "f16", "f16", "f32"), "86", {}, "stages=3 "),
], ids=lambda x: x.name if isinstance(x, GemmSpec) else None)
def test_more_stages_where_the_grid_stays_resident(spec, sm, options, expected):
    """`configs.MORE_STAGES`: small and medium problems take a fourth stage where every CTA stays
    resident with it and the K loop is long, and no other time (measured both ways, see configs)."""
    config = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm=sm, tune_cache="", **options))[0].abi.config
    assert expected in config + " ", config


@pytest.mark.parametrize("m, n, k, a_layout, kept", [
    (512, 4096, 11008, "row", True), (256, 11008, 4096, "col", True),  # 45 MB of operands: past half the L2
    (512, 4096, 4096, "row", False), (256, 4096, 4096, "col", False),  # 19 MB: the rows halved
])
def test_filled_operands_past_half_the_l2_keep_their_rows(m, n, k, a_layout, kept):
    """KEEP_ROWS_PAST_L2: where the operands outgrow half the target's L2, the fill's 4x8 warp tiles
    keep their rows and split-K fills the wave; otherwise the rows are halved."""
    spec = GemmSpec(m, n, k, "s8", "s8", "s32", a_layout=a_layout, c=False)
    config = _compile(spec, tune_cache="", pair_bytes=False).abi.config
    assert ("warp-tile=4x8" in config and "split-k=" in config) == kept, config
    assert 2 * k * (m + n) > targets.limits("90").l2 if kept else 2 * k * (m + n) <= targets.limits("90").l2


def test_a_filled_b_keeps_its_rows_where_the_default_leaves_sms_idle():
    """SMALL_TILES: an N-major 8-bit B (transposed once a CTA) narrows the CTA's columns, not its
    rows, where the default's CTAs leave SMs idle; where they fill the GPU, or for a filled A as
    well, the other rules stand. (B filled: the byte-pair reads, the default, take the K-major
    B's rules.)"""
    warps, tile = configs.SMALL_TILES["8bit-fill-b"]
    b_row = _compile(GemmSpec(128, 11008, 4096, "s8", "s8", "s32"), tune_cache="", pair_bytes=False).abi.config
    assert b_row.startswith(f"warps={warps} warp-tile={tile} ")
    big = _compile(GemmSpec(4096, 4096, 4096, "s8", "s8", "s32"), tune_cache="", pair_bytes=False).abi.config
    assert big.startswith(str(configs.default("sm_90", "8bit-fill-b")).split(" stages")[0])
    both = _compile(GemmSpec(128, 11008, 4096, "s8", "s8", "s32", a_layout="col"), tune_cache="", pair_bytes=False).abi.config
    assert f"warp-tile={tile} " not in both
    # too few rows for the narrow CTA's (128): the rows are halved as before
    assert not _compile(GemmSpec(64, 11008, 4096, "s8", "s8", "s32"), tune_cache="", pair_bytes=False).abi.config.startswith(f"warps={warps} warp-tile={tile}")


def test_tf32_keeps_its_rows_where_split_k_fills_the_wave():
    """KEEP_ROWS: a small tf32 problem with a long K keeps the 4x8 warp tile (split-K fills the
    SMs); with a K too short to split (1000^3) or a CTA taller than M the rows are halved."""
    assert "32bit-row-b-trunc" in configs.KEEP_ROWS
    rows = configs.default("sm_90", "32bit-row-b-trunc").warp_tile.split("x")[0]

    def config(m, n, k):
        return _compile(GemmSpec(m, n, k, "tf32", "tf32", "f32", rounding="trunc"), tune_cache="").abi.config

    kept = config(256, 4096, 4096)
    assert f"warp-tile={rows}x" in kept and "split-k=" in kept
    assert "warp-tile=2x" in config(1000, 1000, 1000)
    assert "warp-tile=2x" in config(64, 11008, 4096)


@pytest.mark.parametrize("spec, sm, expected", [
    # 86 tiles (64 x 128 CTAs): three splits fill the two CTAs an SM holds, where two left a third idle
    (GemmSpec(64, 11008, 4096, "tf32", "tf32", "f32"), "90", "warp-tile=2x8 stages=4 stage-k=32 split-k=3"),
    (GemmSpec(128, 11008, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), "90", "split-k=3"),
    # 172 warpgroup tiles (two waves, the second 30% full): three splits, which also take the fill's
    # orders onto warpgroups (`WGMMA_WAVE`'s 3/4 of the slots)
    (GemmSpec(512, 11008, 4096, "tf32", "tf32", "f32", b_layout="col"), "90a", "warps=8x1 warp-tile=1x32 stages=4 stage-k=32 split-k=3"),
    (GemmSpec(512, 11008, 4096, "tf32", "tf32", "f32", a_layout="col"), "90a", "warps=8x1 warp-tile=1x32 stages=4 stage-k=32 split-k=3"),
    # past two waves: none (1376 tiles); not a tf32 schedule: the rule for grids short of a wave
    (GemmSpec(4096, 11008, 4096, "tf32", "tf32", "f32", b_layout="col"), "90a", "stage-k=32 "),
    (GemmSpec(64, 11008, 4096, "f16", "f16", "f32"), "90", "warps=2x2 warp-tile=2x8 stages=4 stage-k=64 "),
    (GemmSpec(16, 11008, 4096, "f16", "f16", "f32"), "90", "warps=1x2 warp-tile=1x8 stages=4 stage-k=64 "),
], ids=lambda x: x.name if isinstance(x, GemmSpec) else None)
def test_even_waves(spec, sm, expected):
    """`configs.EVEN_WAVES`: tf32 kernels of fewer tiles than two waves split K as many times (up to
    three) as keep the most of the SMs' CTA slots busy, and no others change."""
    config = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm=sm, tune_cache=""))[0].abi.config
    assert expected in config + " ", config
