"""`tilemma tune`: times the candidate configurations (`compiler/configs.py`) of each family and
size class on the GPU and writes the fastest to the tuning cache the compiler reads. Each
candidate is first run at an odd size and checked element by element against the reference; a
candidate that fails is reported and never chosen."""

from __future__ import annotations

import sys

import numpy as np

from tilemma.compiler.core import configs
from tilemma.compiler.core.elements import BY_PTX


def _options(sm: str, c: configs.Config):
    from tilemma.compiler.driver.pipeline import CompileOptions

    return CompileOptions(sm=sm, warps=c.warps, warp_tile=c.warp_tile, stages=c.stages,
                          stage_k=c.stage_k, tune_cache="")


def tune(types: list[str], classes: list[str], sm: str, cache: str, iters: int = 10, out=sys.stdout) -> int:
    from tilemma.compiler.runtime import cuda_runtime
    from tilemma.compiler.verify import reference
    from tilemma.compiler.driver.diagnostics import LocatedVerifyError
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
    from tilemma.compiler.driver.pipeline import compile_text
    from tilemma.compiler.driver.runner import pack_memory, run_compiled

    chosen = configs.load(cache)
    measured: dict[str, dict[str, float]] = {}
    for t in types:
        fam = configs.family(t, t)
        if fam is None:
            raise ValueError(f"{t}: no tunable configurations (tunable: {', '.join(configs.STAGED_TYPES)})")
        good = []
        acc = "f64" if t == "f64" else "f32" if BY_PTX[t].is_float else "s32"
        layout = "row" if fam in ("16bit", "64bit") else "col"  # 8-, 4-, 1- and 32-bit B are staged K-major
        extra = {"popc": "xor"} if t == "b1" else {}  # b1 multiplies by xor
        k_check = {"4bit": 328, "1bit": 1056}.get(fam, 200)  # sub-byte K rows end on 4 bytes
        check = GemmSpec(130, 72, k_check, t, t, acc, b_layout=layout, **extra)
        for cand in configs.CANDIDATES[fam]:
            try:
                [k] = compile_text(str(gemm_module(check)), check.name, _options(sm, cand))
            except LocatedVerifyError as e:  # past the target's limits (shared memory on 99 KiB GPUs)
                print(f"skip {t} {cand}: {e.message}", file=out, flush=True)
                continue
            result = run_compiled(k, seed=1, on="gpu")
            print(f"check {t} {cand}: {'PASS' if result.ok else 'FAIL ' + result.detail}", file=out, flush=True)
            if result.ok:
                good.append(cand)
        for cls in classes:
            n = configs.SIZE_CLASSES[cls]
            spec = GemmSpec(n, n, n, t, t, acc, b_layout=layout, **extra)
            text = str(gemm_module(spec))
            rng = np.random.default_rng(0)
            key = configs.cache_key(f"sm_{sm.removeprefix('sm_')}", t, t, acc, cls)
            times: dict[str, float] = {}
            for cand in good:
                [k] = compile_text(text, spec.name, _options(sm, cand))
                args = [pack_memory(reference.random_matrix(p.element, (p.span,), rng), p.element)
                        for p in k.abi.params]
                ms = cuda_runtime.time_kernel(k.ptx, k.name, k.grid, k.block, k.abi.arguments(args), iters, 2,
                                              k.abi.shared_bytes)
                times[str(cand)] = 2 * n**3 / ms / 1e9
                print(f"{key}  {cand}  {times[str(cand)]:.1f} TFLOP/s", file=out, flush=True)
            if times:
                best = max(good, key=lambda c: times[str(c)])
                chosen[key] = best
                measured[key] = times
                print(f"{key}: {best}", file=out, flush=True)
    configs.save(cache, chosen, measured)
    print(f"wrote {cache}", file=out)
    return 0
