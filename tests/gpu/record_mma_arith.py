"""Record the GPU's mma arithmetic on adversarial data, for the bit-exact emulator (issue 11).

Two steps, so that the GPU machine needs nothing but the CUDA driver and NumPy:

    python -m tests.gpu.record_mma_arith plan DIR      # here: inputs and PTX -> DIR/*.npz
    python -m tests.gpu.record_mma_arith run DIR OUT   # on the GPU: adds the outputs -> OUT/*.npz

A plan holds (a) raw-register probes: every sm_90 `mma` / `mma.sp` variant (every selector), W
warps of register words in the `emulator.mma_warps` layout [W, 32, regs], run by a kernel whose
thread ctaid.x * 32 + laneid reads row i of each buffer; and (b) whole GEMMs that tilemma compiled
(the PTX is stored, so a replay does not depend on today's lowering), with their packed arguments.
Every warp and every GEMM draws its elements in one `STYLES` (wide exponent spread, heavy
cancellation, subnormal products, carry boundaries, signed zeros, Inf/NaN...). The replay is
tests/test_mma_arith_replay.py.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path

import numpy as np

from tilemma.compiler.core import isa
from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.layouts import sparse_fragments as sf

STYLES = ("narrow", "wide", "cancel", "tiny", "carry", "zeros", "special", "raw")
# (exponent bits, mantissa bits) of each float element type by its register encoding.
_FIELDS = {"f16": (5, 10), "bf16": (8, 7), "tf32": (8, 23), "f32": (8, 23), "f64": (11, 52),
           "e4m3": (4, 3), "e5m2": (5, 2)}  # fmt: skip


def element_bits(t: str, shape: tuple[int, ...], style: str, rng: np.random.Generator) -> np.ndarray:
    """Raw bit patterns (uint64) of elements of type `t` in `style`; integers are uniform."""
    if t not in _FIELDS:
        return rng.integers(0, 1 << BY_PTX[t].bits, shape, dtype=np.uint64)
    e_bits, m_bits = _FIELDS[t]
    top = (1 << e_bits) - 1  # all-ones exponent: Inf/NaN (e4m3: NaN only with mantissa 111)
    bias = top >> 1
    if style == "raw":
        return rng.integers(0, 1 << (1 + e_bits + m_bits), shape, dtype=np.uint64)
    if style == "wide":
        exp = rng.integers(0, top, shape)
    elif style == "tiny":
        exp = rng.integers(0, 3, shape)
    else:
        exp = np.clip(bias + rng.integers(-3, 4, shape), 1, top - 1)
    man = rng.integers(0, 1 << m_bits, shape, dtype=np.uint64)
    if style == "carry":  # mantissas of all ones, or nearly
        man = np.uint64((1 << m_bits) - 1) - rng.integers(0, 3, shape, dtype=np.uint64)
    sign = rng.integers(0, 2, shape, dtype=np.uint64)
    bits = (sign << np.uint64(e_bits + m_bits)) | (exp.astype(np.uint64) << np.uint64(m_bits)) | man
    if style == "zeros":
        zero = rng.random(shape) < 0.6
        bits = np.where(zero, sign << np.uint64(e_bits + m_bits), bits)
    if style == "special":
        r = rng.random(shape)
        inf = np.uint64(top << m_bits) if t != "e4m3" else np.uint64((top << m_bits) - 1)  # e4m3: max
        nan = np.uint64(top << m_bits) | rng.integers(1, 1 << m_bits, shape, dtype=np.uint64)
        if t == "e4m3":
            nan = np.uint64((1 << (e_bits + m_bits)) - 1) + np.zeros(shape, np.uint64)
        bits = np.where(r < 0.03, (sign << np.uint64(e_bits + m_bits)) | inf, bits)
        bits = np.where(r > 0.98, (sign << np.uint64(e_bits + m_bits)) | nan, bits)
    return bits


def cancel(a: np.ndarray, b: np.ndarray, t: str, rng: np.random.Generator) -> None:
    """In place: pair up columns k, k' of A (rows of B) so that their products cancel exactly or
    up to a last-bit change, leaving C and a few unpaired products to survive."""
    if t not in _FIELDS:
        return
    k = a.shape[-1]
    perm = rng.permutation(k)
    half = k // 2
    src, dst = perm[:half], perm[half : 2 * half]
    sign = np.uint64(1) << np.uint64(sum(_FIELDS[t]))
    a[..., dst] = a[..., src] ^ sign
    nudge = rng.random(a[..., dst].shape) < 0.5
    a[..., dst] ^= nudge.astype(np.uint64)
    b[..., dst, :] = b[..., src, :]


def carry_c(c: np.ndarray, t: str, rng: np.random.Generator) -> np.ndarray:
    """C one unit below a power of two (either sign): the smallest positive sum carries out."""
    if t not in _FIELDS:
        return c
    e_bits, m_bits = _FIELDS[t]
    bias = (1 << (e_bits - 1)) - 1
    exp = np.uint64(bias) + rng.integers(-2, 3, c.shape, dtype=np.int64).astype(np.uint64)
    sign = rng.integers(0, 2, c.shape, dtype=np.uint64) << np.uint64(e_bits + m_bits)
    return sign | (exp << np.uint64(m_bits)) | np.uint64((1 << m_bits) - 1)


# ------------------------------------------------------------------------------------------------
# Raw-register probes
# ------------------------------------------------------------------------------------------------
def sm90_probe_variants() -> list[tuple[str, int]]:
    """(opcode, selector) of every dense and sparse sm_90 mma (selector -1 for dense)."""
    out = []
    for v in isa.legal_variants("sm_90", "8.7"):
        if v.block_scale:
            continue
        if not v.sparse:
            out.append((v.opcode, -1))
            continue
        spec = sf.sparse_spec(v.shape, v.atype)
        for sel in range(4):
            try:
                sf.check_selector(spec, sel)
            except ValueError:
                continue
            out.append((v.opcode, sel))
    return out


def dense_probe_ptx(opcode: str) -> str:
    """`mma_probe.probe_ptx`, with thread i = ctaid.x * 32 + laneid reading row i of each buffer."""
    from tools import mma_probe

    counts, types = mma_probe.probe_registers(opcode, view="warp16")
    text = mma_probe.probe_ptx(opcode, counts, types, "sm_90", "8.7")
    text = text.replace("\t.reg .u32 %lane;", "\t.reg .u32 %lane;\n\t.reg .u32 %blk;")
    return text.replace("\tmov.u32 %lane, %laneid;",
                        "\tmov.u32 %lane, %laneid;\n\tmov.u32 %blk, %ctaid.x;\n\tmad.lo.u32 %lane, %blk, 32, %lane;")


def probe_inputs(opcode: str, selector: int, warps: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Register words a, b, c (and e) for `warps` warps, warp w in style STYLES[w % len]."""
    from tilemma.compiler.verify import emulator

    sem = emulator.mma_semantics(opcode)
    v = sem.variant
    out = {k: [] for k in "abce"}
    for w in range(warps):
        style = STYLES[w % len(STYLES)]
        a = element_bits(v.atype, sem.a.shape, style, rng)
        b = element_bits(v.btype, sem.b.shape, style, rng)
        c = element_bits(v.ctype, sem.c.shape, "narrow" if style == "cancel" else style, rng)
        if style == "cancel" and not v.sparse:
            cancel(a, b, v.atype, rng)
        if style == "carry":
            c = carry_c(c, v.ctype, rng)
        for name, bits, frag in (("a", a, sem.a), ("b", b, sem.b), ("c", c, sem.c)):
            out[name].append(frag.scatter(bits[None])[0].T)  # [32, regs]
        if v.sparse:
            spec = sf.sparse_spec(v.shape, v.atype)
            from tools.sparse_probe import random_kept_positions

            e = sf.metadata_words(random_kept_positions(spec, rng), v.shape, v.atype, selector)
            used = np.zeros(32, bool)
            used[list(spec.metadata_lanes(selector))] = True
            noise = rng.integers(0, 1 << 32, 32, dtype=np.uint64).astype(np.uint32)
            out["e"].append(np.where(used, e, noise))
    words = {k: np.stack(x) for k, x in out.items() if x}
    return words


def probe_kernel(opcode: str, selector: int) -> str:
    if selector < 0:
        return dense_probe_ptx(opcode)
    from tools import sparse_probe

    return sparse_probe.opcode_ptx(opcode, selector)


# ------------------------------------------------------------------------------------------------
# Whole GEMMs
# ------------------------------------------------------------------------------------------------
# (M, N, K, style) per GEMM of each family; K up to 4096.
GEMM_SIZES = [(37, 29, 301, "wide"), (13, 11, 4096, "cancel"), (17, 23, 517, "tiny"),
              (13, 11, 1031, "special"), (19, 9, 250, "carry"), (11, 27, 200, "zeros")]  # fmt: skip


def gemm_cases() -> list[tuple[str, object]]:
    """(family id, GemmSpec) of every dense and sparse sm_90 family at each of GEMM_SIZES."""
    from tests import dense_cases, sparse_cases

    out = []
    for mod in (dense_cases, sparse_cases):
        for case in mod.DENSE_SM90 if mod is dense_cases else mod.SPARSE_SM90:
            sizes = GEMM_SIZES if case[2] in ("f32", "f16", "f64") else GEMM_SIZES[:2]
            for m, n, k, style in sizes:
                out.append((f"{mod.case_id(case)}/{style}", mod.spec_for(case, m, n, k)))
    return out


def gemm_args(kernel, style: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Packed kernel arguments: floats drawn bit by bit in `style`, sub-byte types uniform;
    a checked sparse A gets the pattern (zeros outside random kept atoms)."""
    from tilemma.compiler.verify import reference
    from tilemma.compiler.driver import runner

    g = kernel.gemm
    mems = {g.a.param: g.a, g.b.param: g.b, g.d.param: g.d}
    if not isinstance(g.c, (int, float)):
        mems[g.c.param] = g.c
    shapes = {g.a.param: (g.m, g.k), g.b.param: (g.k, g.n), g.d.param: (g.m, g.n)}
    if g.c.__class__ is not int and g.c.__class__ is not float:
        shapes[g.c.param] = (g.m, g.n)
    t_of = {p: reference.element_type(m.stored).ptx for p, m in mems.items()}
    t_of = {p: ("f32" if t == "tf32" else t) for p, t in t_of.items()}
    for p, m in mems.items():  # tf32 lives in f32 memory; keep its low bits random
        if m.stored == "tf32":
            t_of[p] = "f32"
    bits = {}
    for p, size in enumerate(kernel.arg_sizes):
        t = t_of[p]
        if t in _FIELDS:
            cstyle = "narrow" if style == "cancel" and p not in (g.a.param, g.b.param) else style
            bits[p] = element_bits(t, (size,), cstyle, rng)
        else:
            bits[p] = None
    if style == "cancel" and bits[g.a.param] is not None and bits[g.b.param] is not None:
        ia = runner._view(np.arange(kernel.arg_sizes[g.a.param]), g.a, g, g.m, g.k)[0]
        ib = runner._view(np.arange(kernel.arg_sizes[g.b.param]), g.b, g, g.k, g.n)[0]
        a, b = bits[g.a.param][ia], bits[g.b.param][ib]
        cancel(a, b, t_of[g.a.param], rng)
        bits[g.a.param][ia], bits[g.b.param][ib] = a, b
    if style == "carry" and not isinstance(g.c, (int, float)) and bits[g.c.param] is not None:
        bits[g.c.param] = carry_c(bits[g.c.param], t_of[g.c.param], rng)
    args = []
    for p, size in enumerate(kernel.arg_sizes):
        stored = mems[p].stored
        if bits[p] is None:  # integers: the runner's random values, packed
            vals = reference.random_matrix(stored, (size,), rng)
            if p == g.a.param and g.a.sparse == "check":
                vals = runner._prune_tiles(vals, g, g.a.sparse_pattern)
            args.append(runner.pack_memory(vals, stored))
            continue
        word = bits[p].astype(BY_PTX[t_of[p]].code_dtype)
        if p == g.a.param and g.a.sparse == "check":
            word = _keep_pattern(word, kernel, rng)
        args.append(word)
    if g.a.sparse == "check":
        from tilemma.passes.warp_to_ptx.sparse_a import NO_ERROR

        args.append(np.full(1, NO_ERROR, np.uint32))
    return args


def _keep_pattern(word: np.ndarray, kernel, rng: np.random.Generator) -> np.ndarray:
    """A's memory with +0 outside random kept atoms of every chunk (the tile's columns from 0)."""
    from tilemma.compiler.driver import runner

    g = kernel.gemm
    pat = sf.pattern_for(g.a.sparse_pattern)
    idx = runner._view(np.arange(word.size), g.a, g, g.m, g.k)[0]  # [M, K]
    chunks = -(-g.k // pat.chunk)
    keys = rng.random((g.m, chunks, pat.atoms_per_chunk))
    kept = np.argsort(keys, -1)[..., : pat.kept_atoms]
    mask = np.zeros((g.m, chunks, pat.atoms_per_chunk), bool)
    np.put_along_axis(mask, kept, True, -1)
    mask = np.repeat(mask, pat.atom, -1).reshape(g.m, -1)[:, : g.k]
    out = word.copy()
    out[idx[~mask]] = 0
    return out


# ------------------------------------------------------------------------------------------------
# plan / run
# ------------------------------------------------------------------------------------------------
# Issue 11's table: (family of tests.dense_cases, size) run at 128 x 128 x 1024 by `plan --big`.
ISSUE_TABLE = ["f16xf16-f32-m16n8k16", "bf16xbf16-f32-m16n8k16", "tf32xtf32-f32-m16n8k8", "f64xf64-f64-m16n8k16",
               "f16xf16-f16-m16n8k16", "f8E4M3FNxf8E4M3FN-f32-m16n8k32", "f8E4M3FNxf8E5M2-f16-m16n8k32",
               "si8xsi8-si32-m16n8k32"]  # fmt: skip


def _gemm_record(kernel, family: str, args: list[np.ndarray]) -> dict:
    rec = {"family": np.array(family), "ptx": np.array(kernel.ptx), "entry": np.array(kernel.name),
           "grid": np.array(kernel.grid), "block": np.array(kernel.block),
           "dparam": np.array(kernel.gemm.d.param), "nargs": np.array(len(args))}
    return rec | {f"arg{n}": x for n, x in enumerate(args)}


def plan(out: Path, warps: int = 16, salt: str = "", big: bool = False) -> None:
    """Write the plan; `salt` draws fresh data, `big` adds ISSUE_TABLE's 128 x 128 x 1024 GEMMs."""
    from tilemma.compiler.driver.gemm_generator import gemm_module
    from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

    out.mkdir(parents=True, exist_ok=True)
    probes = {}
    for i, (opcode, sel) in enumerate(sm90_probe_variants()):
        rng = np.random.default_rng(zlib.crc32(f"{salt}{opcode}/{sel}".encode()))
        v = isa.parse_opcode(opcode)
        w = warps if v.dtype != "s32" else 4
        probes[f"p{i}.opcode"] = np.array(opcode)
        probes[f"p{i}.selector"] = np.array(sel)
        probes[f"p{i}.ptx"] = np.array(probe_kernel(opcode, sel))
        for k, x in probe_inputs(opcode, sel, w, rng).items():
            probes[f"p{i}.{k}"] = x
    np.savez_compressed(out / "probes.npz", **probes)
    for part, pick in (("dense", lambda s: not s.sparse_a), ("sparse", lambda s: s.sparse_a)):
        gemms = {}
        for j, (family, spec) in enumerate(c for c in gemm_cases() if pick(c[1])):
            [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="8.7"))
            rng = np.random.default_rng(zlib.crc32(f"{salt}{family}".encode()))
            args = gemm_args(kernel, family.rsplit("/", 1)[1], rng)
            gemms |= {f"g{j}.{k}": v for k, v in _gemm_record(kernel, family, args).items()}
        np.savez_compressed(out / f"gemm_{part}.npz", **gemms)
    if big:
        from tests import dense_cases

        gemms = {}
        rows = {dense_cases.case_id(c): c for c in dense_cases.DENSE_SM90}
        for j, (family, style) in enumerate((f, s) for f in ISSUE_TABLE for s in ("narrow", "wide")):
            spec = dense_cases.spec_for(rows[family], 128, 128, 1024)
            [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="8.7"))
            args = gemm_args(kernel, style, np.random.default_rng(zlib.crc32(f"{salt}{family}/{style}".encode())))
            gemms |= {f"g{j}.{k}": v for k, v in _gemm_record(kernel, f"{family}/{style}", args).items()}
        np.savez_compressed(out / "gemm_big.npz", **gemms)


def cases(data: dict, prefix: str) -> list[int]:
    return sorted({int(k[1:].split(".")[0]) for k in data if k.startswith(prefix)})


_INPUTS = ("a", "b", "c", "e", "ptx")


def run(plan_dir: Path, out: Path, outputs_only: bool = False) -> None:
    """On the GPU: run every probe and GEMM of the plan; write the plan plus the outputs (or,
    `outputs_only`, the outputs alone: merge them with the plan afterwards)."""
    from tilemma.compiler.runtime import cuda_runtime

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    data = dict(np.load(plan_dir / "probes.npz"))
    for i in cases(data, "p"):
        opcode, sel = str(data[f"p{i}.opcode"]), int(data[f"p{i}.selector"])
        a, b, c = (data[f"p{i}.{k}"] for k in "abc")
        w = a.shape[0]
        from tilemma.compiler.verify import emulator

        sem = emulator.mma_semantics(opcode)
        d = np.zeros((w, 32, sem.d.regs), sem.d.lay.word_dtype)
        args = [a, b, c] + ([data[f"p{i}.e"]] if sel >= 0 else []) + [d]
        entry = "mma_probe" if sel < 0 else "mma_sp_probe"
        outs = cuda_runtime.run_kernel(str(data[f"p{i}.ptx"]), entry, (w, 1, 1), (32, 1, 1), args)
        data[f"p{i}.d"] = outs[-1].reshape(d.shape)
    if outputs_only:
        data = {k: v for k, v in data.items() if k.split(".", 1)[1] not in _INPUTS}
    np.savez_compressed(out / "probes.npz", **data)
    print(f"probes: {len(cases(data, 'p'))} in {time.time() - t0:.1f}s", flush=True)
    for part in ("dense", "sparse", "big"):
        if not (plan_dir / f"gemm_{part}.npz").exists():
            continue
        data = dict(np.load(plan_dir / f"gemm_{part}.npz"))
        for j in cases(data, "g"):
            args = [data[f"g{j}.arg{n}"] for n in range(int(data[f"g{j}.nargs"]))]
            outs = cuda_runtime.run_kernel(str(data[f"g{j}.ptx"]), str(data[f"g{j}.entry"]),
                                           tuple(data[f"g{j}.grid"]), tuple(data[f"g{j}.block"]), args)
            data[f"g{j}.out"] = outs[int(data[f"g{j}.dparam"])]
            data[f"g{j}.last"] = outs[-1]  # a checked sparse A's error word
        if outputs_only:
            data = {k: v for k, v in data.items() if k.split(".", 1)[1] in ("out", "last")}
        np.savez_compressed(out / f"gemm_{part}.npz", **data)
        print(f"gemm_{part}: {len(cases(data, 'g'))} in {time.time() - t0:.1f}s", flush=True)


# What the repository keeps (tests/data/mma_arith): every probe variant with one warp per style
# (two for f64, whose NaN rules need them; two warps in all for the exact integer variants), and
# of the GEMMs these styles per family (f64: two shapes), K = 4096 ("cancel") for three families.
KEEP_STYLES = {"float": ("special", "tiny", "carry"), "int": ("wide",)}
KEEP_K4096 = ("f16xf16-f32-m16n8k16", "bf16xbf16-f32-m16n8k16", "tf32xtf32-f32-m16n8k8")


def kept_family(family: str) -> bool:
    """Whether the repository keeps GEMMs of this family (f64: one fma chain, two shapes suffice)."""
    return not family.startswith("f64") or family.endswith(("m16n8k16", "m8n8k4"))


def subset(rec: Path, out: Path) -> None:
    """Copy a recording, keeping the part the repository holds (see KEEP_STYLES)."""
    out.mkdir(parents=True, exist_ok=True)
    data = dict(np.load(rec / "probes.npz"))
    for i in cases(data, "p"):
        op = str(data[f"p{i}.opcode"])
        w = 2 if ".s32." in op else len(STYLES) * (2 if ".f64." in op else 1)
        for k in "abced":
            if f"p{i}.{k}" in data:
                data[f"p{i}.{k}"] = data[f"p{i}.{k}"][:w]
    np.savez_compressed(out / "probes.npz", **data)
    for part in ("dense", "sparse"):
        data = dict(np.load(rec / f"gemm_{part}.npz"))
        keep = {}
        for j in cases(data, "g"):
            family, style = str(data[f"g{j}.family"]).rsplit("/", 1)
            kind = "int" if "si32" in family else "float"
            if not kept_family(family):
                continue
            if style in KEEP_STYLES[kind] or (style == "cancel" and family in KEEP_K4096):
                n = len({kk.split(".")[0] for kk in keep})
                keep.update({f"g{n}." + k.split(".", 1)[1]: v for k, v in data.items() if k.split(".")[0] == f"g{j}"})
                if keep[f"g{n}.last"].size > 1:  # the last argument is D itself, not an error word
                    del keep[f"g{n}.last"]
        np.savez_compressed(out / f"gemm_{part}.npz", **keep)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "plan" and len(sys.argv) in (3, 4, 5):  # plan DIR [SALT [big]]
        plan(Path(sys.argv[2]), salt=sys.argv[3] if len(sys.argv) > 3 else "", big=sys.argv[-1] == "big")
    elif cmd == "run" and len(sys.argv) in (4, 5):  # run DIR OUT [outputs-only]
        run(Path(sys.argv[2]), Path(sys.argv[3]), outputs_only=sys.argv[-1] == "outputs-only")
    elif cmd == "subset" and len(sys.argv) == 4:
        subset(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: python -m tests.gpu.record_mma_arith plan DIR [SALT [big]] | run DIR OUT [outputs-only] | subset REC OUT")
