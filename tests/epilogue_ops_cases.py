"""Kernels whose epilogue uses every scalar op the lowering has, one per element family, shared by
the emulator test (`test_epilogue_ops.py`) and the GPU test (`gpu/test_epilogue_ops_gpu.py`).

The map takes the accumulator, a per-column bias, a per-row scale and a residual tile, and yields
several outputs so that each op's result reaches memory (a NaN-free, overflow-free composition:
the inputs of log/div/sqrt are kept positive by construction)."""

from __future__ import annotations

# (name, A/B element, acc, out element, body); the body sees %x (acc as f32 or f64), %b, %s, %r.
F32_BODY = """
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %t1 = arith.addf %x, %b : f32
    %t2 = arith.subf %t1, %r : f32
    %t3 = arith.mulf %t2, %s : f32
    %ax = math.absf %t3 : f32
    %den = arith.addf %ax, %one : f32
    %t4 = arith.divf %t3, %den : f32
    %t5 = math.fma %t4, %half, %b : f32
    %mx = arith.maximumf %t5, %r : f32
    %mn = arith.minimumf %t5, %r : f32
    %mxn = arith.maxnumf %mx, %mn : f32
    %mnn = arith.minnumf %mx, %mn : f32
    %ng = arith.negf %mnn : f32
    %c = arith.cmpf olt, %t3, %b : f32
    %sel = arith.select %c, %mxn, %ng : f32
    %e = math.exp %t4 : f32
    %e2 = math.exp2 %t4 : f32
    %lg = math.log %den : f32
    %lg2 = math.log2 %den : f32
    %th = math.tanh %t3 : f32
    %er = math.erf %t3 : f32
    %sq = math.sqrt %den : f32
    %rs = math.rsqrt %den : f32
    %u1 = arith.addf %sel, %e : f32
    %u2 = arith.addf %u1, %e2 : f32
    %u3 = arith.addf %lg, %lg2 : f32
    %u4 = arith.addf %th, %er : f32
    %u5 = arith.addf %sq, %rs : f32
"""
F32_YIELDS = ("%u2", "%u3", "%u4", "%u5")

# The same arithmetic without the approximate functions (exp, log, tanh, erf, rsqrt): every
# instruction exact, so the GPU's words must equal the emulator's bit for bit.
F32_EXACT_BODY = F32_BODY.split("    %e = math.exp")[0] + """    %sq = math.sqrt %den : f32
    %u1 = arith.addf %sel, %t4 : f32
    %u2 = arith.subf %sq, %t5 : f32
    %u3 = arith.mulf %mx, %den : f32
    %u4 = arith.divf %mnn, %sq : f32
"""
F32_EXACT_YIELDS = ("%u1", "%u2", "%u3", "%u4")

F64_BODY = """
    %one = arith.constant 1.0 : f64
    %half = arith.constant 0.5 : f64
    %t1 = arith.addf %x, %b : f64
    %t2 = arith.subf %t1, %r : f64
    %t3 = arith.mulf %t2, %s : f64
    %ax = math.absf %t3 : f64
    %den = arith.addf %ax, %one : f64
    %t4 = arith.divf %t3, %den : f64
    %t5 = math.fma %t4, %half, %b : f64
    %mx = arith.maximumf %t5, %r : f64
    %mn = arith.minimumf %t5, %r : f64
    %mxn = arith.maxnumf %mx, %mn : f64
    %mnn = arith.minnumf %mx, %mn : f64
    %ng = arith.negf %mnn : f64
    %c = arith.cmpf ugt, %t3, %b : f64
    %sel = arith.select %c, %mxn, %ng : f64
    %u2 = arith.addf %sel, %t4 : f64
    %u3 = arith.truncf %u2 : f64 to f32
"""


def kernel(family: str, m: int, n: int, k: int, exact: bool = False) -> str:
    """The every-op kernel for `family` (f16, bf16, tf32, s8, f64) at M x N x K; `exact` leaves out
    the approximate functions (the f64 body has none)."""
    a, acc, scalar = {"f16": ("f16", "f32", "f32"), "bf16": ("bf16", "f32", "f32"), "tf32": ("f32", "f32", "f32"),
                      "s8": ("si8", "si32", "f32"), "f64": ("f64", "f64", "f64")}[family]
    mem_a = a
    bcol = "" if family not in ("s8",) else f", strided<[1, {k}]>"
    b_ty = f"memref<{k}x{n}x{mem_a}{bcol}>"
    tile_a = "tf32" if family == "tf32" else a
    cast = ""
    if family == "tf32":
        cast = (f"  %ca = tile.cast %ta : !tile.tile<{m}x{k}xf32> -> !tile.tile<{m}x{k}xtf32>\n"
                f"  %cb = tile.cast %tb : !tile.tile<{k}x{n}xf32> -> !tile.tile<{k}x{n}xtf32>\n")
    lhs, rhs = ("%ca", "%cb") if family == "tf32" else ("%ta", "%tb")
    if family == "f64":
        body, outs, yields = F64_BODY, ["f64", "f32"], ("%u2", "%u3")
    else:
        body, outs, yields = (F32_EXACT_BODY, ["f32", "f16", "bf16", "f32"], F32_EXACT_YIELDS) if exact else (
            F32_BODY, ["f32", "f16", "bf16", "f32"], F32_YIELDS)
        if family == "s8":
            outs = ["f32", "f16", "bf16", "f32"]
    conv = ""
    xin = "%acc_s"
    if family == "s8":
        conv = f"    %x = arith.sitofp %acc_s : i32 to f32\n"
    elif family == "f64":
        xin = "%x"
    else:
        xin = "%x"
    # outputs: cast the yielded f32 values to the out elements inside the body
    final, tys = [], []
    for i, (y, o) in enumerate(zip(yields, outs)):
        if o in ("f16", "bf16"):
            body_line = f"    %o{i} = arith.truncf {y} : {scalar} to {o}\n"
            final.append((f"%o{i}", o, body_line))
        else:
            final.append((y, o, ""))
    body_tail = "".join(line for _, _, line in final)
    yield_vals = ", ".join(v for v, _, _ in final)
    yield_tys = ", ".join(o for _, o, _ in final)
    acc_scalar = "i32" if family == "s8" else scalar
    first_arg = "%acc_s" if family == "s8" else "%x"
    res_ty = lambda e: f"!tile.tile<{m}x{n}x{e}>"  # noqa: E731
    out_args = ", ".join(f"%d{i}: memref<{m}x{n}x{o}>" for i, (_, o, _) in enumerate(final))
    stores = "".join(f"  tile.store %y#{i}, %d{i}[0, 0] : {res_ty(o)}, memref<{m}x{n}x{o}>\n"
                     for i, (_, o, _) in enumerate(final))
    acc_el = "si32" if family == "s8" else acc
    del xin
    return f"""func.func @every_op_{family}{'_exact' if exact else ''}(%ma: memref<{m}x{k}x{mem_a}>, %mb: {b_ty}, %bias: memref<{n}x{scalar}>, %scale: memref<{m}x{scalar}>, %res: memref<{m}x{n}x{scalar}>, {out_args}) {{
  %ta = tile.load %ma[0, 0] : memref<{m}x{k}x{mem_a}> -> !tile.tile<{m}x{k}x{a}>
  %tb = tile.load %mb[0, 0] : {b_ty} -> !tile.tile<{k}x{n}x{a}>
{cast}  %z = tile.constant 0{'.0' if acc_el != 'si32' else ''} : {res_ty(acc_el)}
  %acc = tile.mma {lhs}, {rhs}, %z : !tile.tile<{m}x{k}x{tile_a}>, !tile.tile<{k}x{n}x{tile_a}>, {res_ty(acc_el)} -> {res_ty(acc_el)}
  %tbias = tile.broadcast %bias[0] dims [1] : memref<{n}x{scalar}> -> {res_ty(scalar)}
  %tscale = tile.broadcast %scale[0] dims [0] : memref<{m}x{scalar}> -> {res_ty(scalar)}
  %tres = tile.load %res[0, 0] : memref<{m}x{n}x{scalar}> -> {res_ty(scalar)}
  %y:{len(final)} = tile.map %acc, %tbias, %tscale, %tres : {res_ty(acc_el)}, {res_ty(scalar)}, {res_ty(scalar)}, {res_ty(scalar)} -> {", ".join(res_ty(o) for _, o, _ in final)} {{
  ^bb0({first_arg}: {acc_scalar}, %b: {scalar}, %s: {scalar}, %r: {scalar}):
{conv}{body}{body_tail}    tile.yield {yield_vals} : {yield_tys}
  }}
{stores}  func.return
}}
"""


FAMILIES = ("f16", "bf16", "tf32", "s8", "f64")
