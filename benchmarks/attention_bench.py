"""Attention benchmark: tilemma's FlashAttention-2 schedule against PyTorch SDPA's flash backend
(FlashAttention-2 on mma.sync) and its cuDNN backend, in one run, on the GPU.

TFLOP/s = 4 b h s^2 d / time (halved when causal), the median of CUDA-event samples of back-to-back
launches captured in a CUDA graph (`gemm_bench.median_ms_interleaved`). Inputs are random normal
(b, h, s, d) tensors; tilemma's O is checked against SDPA's math backend in float32 once per shape
(a sanity check here; the exact check with its bound is `tilemma run` / the GPU tests). Which
kernel the flash backend ran is read from the profiler (FlashAttention-2 is `flash_fwd_kernel`).

    python -m benchmarks.attention_bench [--shapes b,h,s,d ...] [--causal both|yes|no] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.gemm_bench import median_ms_interleaved, write_dicts
from tilemma.compiler.driver import api
from tilemma.compiler.driver.attention_generator import AttentionSpec, attention_text

SHAPES = ["4,16,4096,128", "4,16,4096,64", "16,16,1024,128", "1,16,16384,128"]


def _flash_kernel_name(fn, torch) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return next((n for n in names if "flash" in n.lower() or "fmha" in n.lower()), names[0] if names else "?")[:60]


def _config_options(config: str) -> dict:
    """"ROWS/BLOCK_N/Q[/CTAS]" (e.g. "32/64/yes", "16/64/no/3") as `api.compile` options; "" the
    defaults."""
    if not config:
        return {}
    rows, block_n, q, *ctas = config.split("/")
    return {"attention_rows": int(rows), "attention_block_n": int(block_n), "attention_q_shared": q,
            "attention_ctas": int(ctas[0]) if ctas else 0}


def bench(spec: AttentionSpec, torch, configs: list[str]) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[spec.dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(spec.b, spec.h, spec.s, spec.d, device="cuda", dtype=dt, generator=g) for _ in range(3))
    outs = {c: torch.empty_like(q) for c in configs}
    text = attention_text(spec)
    kernels = {c: api.compile(text, **_config_options(c))[0] for c in configs}

    def launcher(c):
        flat = [x.view(spec.heads, spec.s, spec.d) for x in (q, k, v, outs[c])]
        args = (flat[0], flat[1].transpose(1, 2), flat[2], flat[3])

        def ours():  # on the current stream: what a CUDA graph captures
            kernels[c].launch(*args, stream=torch.cuda.current_stream())
        return ours

    def peer(backend):
        def run():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=spec.causal)
        return run

    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=spec.causal)
    scale = want.abs().max().item()
    errs = {}
    for c in configs:
        launcher(c)()
        errs[c] = (outs[c].float() - want).abs().max().item()
    runs = {**{f"tilemma {c}".strip(): launcher(c) for c in configs}, "sdpa-flash (FA2)": peer(SDPBackend.FLASH_ATTENTION),
            "sdpa-cudnn": peer(SDPBackend.CUDNN_ATTENTION)}
    names = {"sdpa-flash (FA2)": _flash_kernel_name(peer(SDPBackend.FLASH_ATTENTION), torch)}
    usable = {}
    for name, fn in runs.items():
        try:
            fn()
            torch.cuda.synchronize()
            usable[name] = fn
        except Exception as exc:  # a backend that does not take the shape: reported, not fatal
            print(f"  {name}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
    times = median_ms_interleaved(list(usable.values()), torch)
    flops = 4 * spec.b * spec.h * spec.s * spec.s * spec.d / (2 if spec.causal else 1)
    rows = []
    for (name, _), (ms, how) in zip(usable.items(), times):
        err = errs.get(name.removeprefix("tilemma").strip()) if name.startswith("tilemma") else None
        rows.append({"shape": f"b{spec.b} h{spec.h} s{spec.s} d{spec.d}", "causal": spec.causal, "dtype": spec.dtype,
                     "impl": name, "ms": round(ms, 4), "tflops": round(flops / ms / 1e9, 1), "timing": how,
                     "kernel": names.get(name, ""),
                     "max_abs_err_vs_math": "" if err is None else f"{err:.3g}",
                     "check": "" if err is None else "ok" if err <= 2e-2 * max(scale, 1.0) else "WRONG"})
    return rows


def main(argv=None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=SHAPES, metavar="b,h,s,d")
    p.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    p.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    p.add_argument("--configs", nargs="+", default=[""], metavar="ROWS/BLOCK_N/Q[/CTAS]",
                   help="tilemma configurations, e.g. 32/64/yes ('' the defaults)")
    p.add_argument("--csv")
    args = p.parse_args(argv)
    rows = []
    print(f"GPU: {torch.cuda.get_device_name()}")
    for shape in args.shapes:
        b, h, s, d = (int(x) for x in shape.split(","))
        for causal in {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]:
            spec = AttentionSpec(b, h, s, d, causal, args.dtype)
            try:
                got = bench(spec, torch, args.configs)
            except Exception as exc:
                print(f"{spec.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            rows += got
            base = next((r for r in got if r["impl"].startswith("sdpa-flash")), None)
            for r in got:
                ratio = f"{r['tflops'] / base['tflops']:.2f}x FA2" if base else ""
                print(f"{r['shape']:<24} {'causal' if causal else 'full':<7} {r['impl']:<18} {r['tflops']:>7.1f} TFLOP/s "
                      f"{ratio:>10} {r['check']} {r['kernel']}", flush=True)
    if args.csv and rows:
        write_dicts(rows, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
