"""Compiles a fixed corpus of GEMM kernels (every staged family, the simple schedule, sparse,
block-scaled, forced configurations, several targets) and writes each one's PTX, or its error,
to a folder: run before and after a refactor and `diff -r` the two folders to prove the PTX
byte-identical (or to see exactly which kernels a change meant to alter).

    python tools/ptx_corpus.py OUT_DIR [-j N]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import pathlib
import sys

# (spec fields, sm, options): spec fields are GemmSpec's
F16 = dict(a="f16", b="f16", acc="f32")
CASES: list[tuple[dict, str, dict]] = []


def _add(spec: dict, sms=("90",), **options) -> None:
    for sm in sms:
        CASES.append((spec, sm, options))


SIZES = ((37, 91, 53), (130, 72, 256), (256, 128, 512), (2048, 2048, 2048), (8192, 8192, 8192))
for m, n, k in SIZES:
    for a, acc in (("f16", "f32"), ("bf16", "f32"), ("f16", "f16")):
        for layout in ("row", "col"):
            _add(dict(m=m, n=n, k=k, a=a, b=a, acc=acc, b_layout=layout), sms=("80", "86", "89", "90", "120a"))
    for layout in ("row", "col"):
        _add(dict(m=m, n=n, k=k, a="f32", b="f32", acc="f32", b_layout=layout, shape=None), sms=("80", "90"),
             f32_precision="tf32")
        _add(dict(m=m, n=n, k=k, a="tf32", b="tf32", acc="f32", b_layout=layout), sms=("80", "90"))
        _add(dict(m=m, n=n, k=k, a="f64", b="f64", acc="f64", b_layout=layout), sms=("80", "90"))
    for a in ("s8", "u8"):
        _add(dict(m=m, n=n, k=k, a=a, b=a, acc="s32", b_layout="col"), sms=("80", "90", "120a"))
    _add(dict(m=m, n=n, k=k, a="s8", b="s8", acc="s32", b_layout="row"), sms=("90",))
    _add(dict(m=m, n=n, k=k, a="e4m3", b="e5m2", acc="f32", b_layout="col"), sms=("89", "90"))
    _add(dict(m=m, n=n, k=k + (k % 2), a="s4", b="s4", acc="s32", b_layout="col"), sms=("80", "90"))
    _add(dict(m=m, n=n, k=max(256, k), a="b1", b="b1", acc="s32", b_layout="col", popc="xor"), sms=("80", "90"))
    for layout in ("row", "col"):
        _add(dict(m=m, n=n, k=k, a="f16", b="f16", acc="f32", b_layout=layout, pre_compressed=True), sms=("80", "90"))
    _add(dict(m=m, n=n, k=k, a="f16", b="f16", acc="f32", sparse_a=True), sms=("90",))
    _add(dict(m=m, n=n, k=k, a="bf16", b="bf16", acc="f32", sparse_a=True, prune=True), sms=("90",))

# batches, broadcasts, forms
_add(dict(m=130, n=70, k=200, a="f16", b="f16", acc="f32", batch=3, bcast="b"))
_add(dict(m=130, n=70, k=200, a="bf16", b="bf16", acc="f32", batch=2, bcast="a", b_layout="col"))
_add(dict(m=130, n=70, k=256, a="s8", b="s8", acc="s32", batch=2, b_layout="col", satfinite=True))
_add(dict(m=130, n=70, k=200, a="f16", b="f16", acc="f32", c=False))
_add(dict(m=130, n=70, k=200, a="tf32", b="tf32", acc="f32", rounding="rn"))
_add(dict(m=37, n=91, k=150, a="e2m1", b="e2m1", acc="f32", scale="ue4m3", scale_block=16), sms=("120a",))
_add(dict(m=64, n=64, k=128, a="e4m3", b="e4m3", acc="f32", scale="ue8m0", scale_block=32), sms=("120a",))
_add(dict(m=64, n=40, k=48, a="f64", b="f64", acc="f64", shape="m8n8k4"), sms=("80", "90"))
_add(dict(m=64, n=40, k=64, a="s4", b="s4", acc="s32", b_layout="col", shape="m16n8k64"), sms=("90",))
_add(dict(m=130, n=70, k=200, a="f32", b="f32", acc="f32"), sms=("90",), f32_precision="3xtf32")
# forced configurations
for opts in (dict(warps="2x4", warp_tile="4x8", stages=4, stage_k=32),
             dict(warps="2x2", warp_tile="2x4", stages=2, stage_k=64),
             dict(warps="4x2", warp_tile="2x2", stages=5, stage_k=16),
             dict(warps="1x1", warp_tile="1x1", stages=0),
             dict(warps="2x4", warp_tile="1x4", stages=0),
             dict(stages=0),
             dict(stages=3, stage_k=128)):
    _add(dict(m=130, n=72, k=256, **F16), **opts)
    _add(dict(m=130, n=72, k=256, a="s8", b="s8", acc="s32", b_layout="col"), **opts)
    _add(dict(m=256, n=128, k=512, a="bf16", b="bf16", acc="f32", b_layout="col"), **opts)
    _add(dict(m=256, n=128, k=512, a="f16", b="f16", acc="f32", pre_compressed=True), **opts)
_add(dict(m=130, n=70, k=544, a="b1", b="b1", acc="s32", b_layout="col", popc="xor"),
     warps="2x4", warp_tile="2x4", stages=4, stage_k=256)
_add(dict(m=130, n=70, k=320, a="u4", b="u4", acc="s32", b_layout="col", batch=2),
     warps="2x2", warp_tile="2x4", stages=5, stage_k=64)
_add(dict(m=256, n=256, k=256, a="f64", b="f64", acc="f64"), warps="2x2", warp_tile="2x2", stages=3, stage_k=16)

# sm_90a: the warpgroup kernels (wgmma) each family and operand order takes by itself, and the
# warp-specialized ones (producers, the TMA, clusters, persistent CTAs) where they can be asked for
for m, n, k in ((130, 200, 300), (256, 256, 1024), (512, 4096, 4096), (4096, 4096, 4096)):
    for a_layout in ("row", "col"):
        for b_layout in ("row", "col"):
            _add(dict(m=m, n=n, k=k, a="f16", b="f16", acc="f32", a_layout=a_layout, b_layout=b_layout), sms=("90a",))
            _add(dict(m=m, n=n, k=k, a="s8", b="s8", acc="s32", a_layout=a_layout, b_layout=b_layout), sms=("90a",))
            _add(dict(m=m, n=n, k=k, a="tf32", b="tf32", acc="f32", a_layout=a_layout, b_layout=b_layout),
                 sms=("90a",))
    _add(dict(m=m, n=n, k=k, a="bf16", b="bf16", acc="f32", b_layout="col"), sms=("90a",))
    _add(dict(m=m, n=n, k=k, a="u8", b="u8", acc="s32", b_layout="col"), sms=("90a",))
    _add(dict(m=m, n=n, k=k, a="tf32", b="tf32", acc="f32", b_layout="col", rounding="trunc"), sms=("90a",))
    for b_layout in ("row", "col"):
        _add(dict(m=m, n=n, k=k, a="f16", b="f16", acc="f32", b_layout=b_layout, pre_compressed=True), sms=("90a",))
for opts in (dict(wgmma=True), dict(wgmma=True, producers=4), dict(wgmma=True, producers=4, tma=1),
             dict(wgmma=True, producers=4, tma=1, cluster=2), dict(wgmma=True, producers=4, tma=1, persistent=132)):
    _add(dict(m=1024, n=1024, k=1024, a="f16", b="f16", acc="f32"), sms=("90a",), **opts)
    _add(dict(m=1024, n=1024, k=1024, a="s8", b="s8", acc="s32", b_layout="col"), sms=("90a",), **opts)
    _add(dict(m=1024, n=1024, k=1024, a="f16", b="f16", acc="f32", pre_compressed=True), sms=("90a",), **opts)
for a_layout, b_layout in (("row", "row"), ("col", "col"), ("col", "row")):
    _add(dict(m=256, n=256, k=512, a="s8", b="s8", acc="s32", a_layout=a_layout, b_layout=b_layout), sms=("90a",),
         wgmma=True)
    _add(dict(m=256, n=256, k=512, a="s8", b="s8", acc="s32", a_layout=a_layout, b_layout=b_layout), sms=("90a",),
         wgmma=True, producers=4)


def _imports():
    import tilemma

    from tilemma.compiler.driver import gemm_generator

    return tilemma, gemm_generator


def name_of(i: int) -> str:
    spec, sm, options = CASES[i]
    opts = "_".join(f"{k}-{v}" for k, v in sorted(options.items()))
    tag = "_".join(f"{k}-{v}" for k, v in sorted(spec.items()))
    return f"{i:04d}_sm{sm}_{tag}{'_' + opts if opts else ''}"


def one(i: int) -> tuple[str, str, str]:
    tilemma, gen = _imports()
    spec, sm, options = CASES[i]
    options = dict(options)
    fields = dict(spec)
    if fields.get("shape", "") is None:
        del fields["shape"]
    try:
        module = gen.gemm_module(gen.GemmSpec(**fields))
        kernels = tilemma.compile(module, sm=sm, **options)
        return name_of(i), "ptx", "\n".join(k.ptx for k in kernels)
    except Exception as e:  # noqa: BLE001 - recorded, compared as text
        return name_of(i), "err", f"{type(e).__name__}: {e}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("-j", type=int, default=2)
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with cf.ProcessPoolExecutor(args.j) as pool:
        for name, kind, text in pool.map(one, range(len(CASES)), chunksize=4):
            (out / f"{name}.{kind}").write_text(text)
    print(f"{len(CASES)} kernels -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
