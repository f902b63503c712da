"""The benchmark matrix of issue 23 (item 7): family x operand layout x shape, tilemma against
Triton's mma.sync path (`DISABLE_MMA_V3=1`), Triton's default (wgmma on sm_90) and cuBLAS
(cuSPARSELt, through torch's semi-structured tensors, for 2:4 sparse), in one run, one CSV and one
plot. Target: tilemma >= 1.0x Triton's mma.sync path on every dense cell, >= 1.1x on the median
cell (sparse cells: against cuSPARSELt).

    python -m benchmarks.matrix --list                                  # the cells, the parts' estimated time
    python -m benchmarks.matrix --dry-run [--part 1/4]                  # CPU only: see below
    python -m benchmarks.matrix --part 1/4 --csv m1.csv --budget 450    # one device call per part
    python -m benchmarks.matrix --merge m1.csv m2.csv m3.csv m4.csv --csv matrix.csv --plot matrix.png
    python -m benchmarks.matrix --redo matrix.csv --csv m5.csv          # cells a part left unmeasured
    bash benchmarks/gpu_session.sh matrix                               # PART=1/4 (default) ... 4/4

It is `gemm_bench` on a list of cells (gemm_bench's families, `family_variant` for the layouts;
`--shapes`' MxNxK): the same kernels, inputs, checks and timing, with fewer samples per
measurement (`--samples 10 --warmup-ms 25`: about 50 ms each) so that the whole matrix fits a few
device calls. The parts are contiguous runs of cells (a family and layout stays together: Triton's
in-process cache), balanced by an estimate of their time; `--part` runs one, `--merge` joins the
CSVs into one table, summary and plot (later files win, except that an error never replaces a
figure). `--dry-run` compiles every cell's kernel (tilemma's default configuration: its
instruction, tiling and whether it is staged) and runs a small analogue of each (family, layout,
shape class) in the CPU emulator against float64 NumPy (`runner.run_compiled`, as `tilemma run --on
emulator`; 8-bit with A M-major and B N-major on sm_90a a second time with B transposed first, as
their kernels from 512 rows are); no torch, no GPU.

Shapes (`SHAPES`): issue 23's table (4096^3, 257x129x4096, 16x4096x4096, 512x4096x4096,
2048x2048x256, 1000^3; 8192^3 for sparse) and the LLM decode/prefill set of
`benchmarks.dynamic_shapes` (M = 1 ... 4096 tokens x (4096, 4096), (11008, 4096), (4096, 11008)).
Layouts: A row/col x B row/col ("A col": M-major, "B col": K-major); the sparse family's A arrives
pre-compressed (values and metadata: `sparse-f16-pre`), so it has B row/col only.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from typing import Any, Sequence

from benchmarks import gemm_bench as gb
from benchmarks.dynamic_shapes import SHAPES as LLM_SHAPES
from benchmarks.gemm_bench import FAMILIES, Family, Row, Shape

# tf32 twice: rounded as tilemma rounds by default (rna, a cvt a fragment register) and fed as it
# is (`--rounding trunc`: what Triton's tf32 and cuBLAS do, so the like-for-like comparison)
# sparse twice: D as the accumulator (f32) and as f16, what cuSPARSELt writes for f16 operands (torch's
# `sa @ b`), so the like-for-like comparison
BASES = ("f16", "bf16", "s8", "tf32", "tf32-trunc", "f64", "sparse-f16-pre", "sparse-f16-pre-d16")
LAYOUTS = {"rr": (False, False), "rc": (False, True), "cr": (True, False), "cc": (True, True)}  # A, B col-major
ISSUE_SHAPES: tuple[Shape, ...] = ((4096, 4096, 4096), (257, 129, 4096), (16, 4096, 4096), (512, 4096, 4096),
                                   (2048, 2048, 256), (1000, 1000, 1000))
SPARSE_SHAPES: tuple[Shape, ...] = ((8192, 8192, 8192),)  # the issue's sparse anchor, sparse only
SHAPES: tuple[Shape, ...] = tuple(dict.fromkeys([*ISSUE_SHAPES, *LLM_SHAPES]))
SAMPLES, WARMUP_MS = 10, 25.0  # per measurement (gemm_bench's defaults: 15, 50)
TARGET_EVERY, TARGET_MEDIAN = 1.0, 1.1  # tilemma / Triton mma.sync
MAIN_SHARE = 0.4  # of the budget, for cuBLAS and tilemma; the two Triton workers share the rest
# tilemma's throughput (TFLOP/s) assumed by the time estimate, per element type
RATE = {"f16": 300, "bf16": 300, "si8": 500, "tf32": 120, "f64": 45}


def reference_impl(fam: Family) -> str:
    """The peer a cell's target is measured against: Triton's mma.sync path, cuSPARSELt for sparse."""
    return "torch-sparse" if fam.sparse else "triton-mma.sync"


def expected_impls(fam: Family) -> tuple[str, ...]:
    return ("cublas", "torch-sparse", "tilemma") if fam.sparse else ("cublas", "tilemma", "triton", "triton-mma.sync")


def cells(bases: Sequence[str] = BASES, layouts: Sequence[str] = tuple(LAYOUTS),
          shapes: Sequence[Shape] | None = None) -> list[gb.Cell]:
    """(family, shape) for every base family x layout x shape, in that order (sparse: B row/col
    and the sparse shapes too)."""
    out = []
    for base in bases:
        for layout in layouts:
            a_col, b_col = LAYOUTS[layout]
            if FAMILIES[base].pre_compressed and a_col:
                continue  # a pre-compressed A has no stored order
            fam = gb.family_variant(FAMILIES[base], a_col, b_col)
            if fam is None:
                raise KeyError(f"no gemm_bench family for {base} with {layout}")
            its = shapes if shapes is not None else (SHAPES + SPARSE_SHAPES if fam.sparse else SHAPES)
            out += [(fam, tuple(s)) for s in its]
    return out


def estimate_s(fam: Family, shape: Shape) -> float:
    """Rough seconds a cell takes on an H100 (its measurements, inputs and references in three
    processes, Triton's compiles shared by the shapes of a family and layout): what the parts are
    balanced by and `--list` prints."""
    t = max(gb.flops(shape) / (RATE[fam.a] * 1e12 * (2 if fam.sparse else 1)), 1e-5)  # one launch
    measure = WARMUP_MS / 1e3 + SAMPLES * max(gb.SAMPLE_MS / 1e3, t) + 5 * t
    if fam.sparse:
        return 1.0 + 3 * measure
    return 2.2 + 10 * measure


def split(selected: Sequence[gb.Cell], parts: int) -> list[list[gb.Cell]]:
    """`selected` cut into `parts` contiguous runs of about equal estimated time."""
    costs = [estimate_s(f, s) for f, s in selected]
    total = sum(costs) or 1.0
    out: list[list[gb.Cell]] = [[] for _ in range(parts)]
    done = 0.0
    for cell, cost in zip(selected, costs):
        # the part whose share of the total holds this cell's midpoint
        out[min(parts - 1, int((done + cost / 2) / total * parts))].append(cell)
        done += cost
    return out


def parse_part(text: str) -> tuple[int, int]:
    """`2/4` -> (2, 4): the second of four parts."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"part {text!r}: I/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise ValueError(f"part {text!r}: I/N with 1 <= I <= N")
    return i, n


# ---------------------------------------------------------------------------------------------
# Results: merging, the summary
# ---------------------------------------------------------------------------------------------


def row_key(row: Row) -> tuple:
    return row.family, gb.row_shape(row), row.impl


def merge(*row_lists: Sequence[Row]) -> list[Row]:
    """One row per (family, shape, implementation): a later list's row replaces an earlier one,
    except that a row without a figure never replaces one with."""
    merged: dict[tuple, Row] = {}
    for rows in row_lists:
        for row in rows:
            old = merged.get(row_key(row))
            if old is None or row.ok or not old.ok:
                merged[row_key(row)] = row
    return list(merged.values())


def unfinished(selected: Sequence[gb.Cell], rows: Sequence[Row]) -> list[gb.Cell]:
    """The cells of `selected` with an implementation that has no row, or one that was skipped or
    lost with its worker (not measured: to run again; a wrong result or a compile error is a result)."""
    by = {row_key(r): r for r in rows}
    lost = ("skipped", "worker exited", "worker killed")

    def done(fam: Family, shape: Shape, impl: str) -> bool:
        row = by.get((fam.name, shape, impl))
        return row is not None and not row.error.startswith(lost)

    return [(f, s) for f, s in selected if not all(done(f, s, impl) for impl in expected_impls(f))]


def ratios(rows: Sequence[Row]) -> dict[tuple[str, Shape], tuple[str, float | None]]:
    """Per cell (family name, shape): (the reference peer, tilemma / it), None where either has
    no figure."""
    by = {row_key(r): r for r in rows}
    out = {}
    for fam_name, shape in dict.fromkeys((r.family, gb.row_shape(r)) for r in rows):
        fam = FAMILIES.get(fam_name)
        peer = reference_impl(fam) if fam else "triton-mma.sync"
        ours, theirs = by.get((fam_name, shape, "tilemma")), by.get((fam_name, shape, peer))
        ok = ours is not None and theirs is not None and ours.ok and theirs.ok
        out[(fam_name, shape)] = (peer, ours.tflops / theirs.tflops if ok else None)  # type: ignore[union-attr,operator]
    return out


def summary(rows: Sequence[Row]) -> list[str]:
    """The target lines: cells below 1.0x, the median cell, per reference peer; the median last."""
    lines = []
    devices = sorted({r.device for r in rows if r.device})
    lines.append(f"device: {', '.join(devices) or 'unknown'}"
                 + (" (MORE THAN ONE: the figures do not compare)" if len(devices) > 1 else ""))
    by = {row_key(r): r for r in rows}
    for impl, name in (("triton", "Triton default"), ("cublas", "cuBLAS")):
        got = [by[(f, s, "tilemma")].tflops / r.tflops for (f, s, i), r in by.items()  # type: ignore[operator]
               if i == impl and r.ok and (f, s, "tilemma") in by and by[(f, s, "tilemma")].ok]
        if got:
            lines.append(f"tilemma / {name}: median {statistics.median(got):.3f} over {len(got)} cells, "
                         f"{sum(1 for x in got if x >= 1)} at or above 1.0x")
    all_ratios = ratios(rows)
    groups = (("torch-sparse", "cuSPARSELt (sparse cells, f16 D as cuSPARSELt's)", lambda f: f.out == "f16"),
              ("torch-sparse", "cuSPARSELt (sparse cells, f32 D: twice its bytes)", lambda f: f.out != "f16"),
              ("triton-mma.sync", "Triton mma.sync", lambda f: True))
    for peer, name, member in groups:
        cells_ = {c: r for c, (p, r) in all_ratios.items() if p == peer and member(FAMILIES[c[0]])}
        if not cells_:
            continue
        got = {c: r for c, r in cells_.items() if r is not None}
        below = sorted((r, f, gb.shape_label(s)) for (f, s), r in got.items() if r < TARGET_EVERY)
        lines.append(f"tilemma / {name}: {len(got)} of {len(cells_)} cells measured; "
                     f"{len(below)} below {TARGET_EVERY:.1f}x"
                     + (f" (worst: {', '.join(f'{f} {s} {r:.2f}' for r, f, s in below[:5])})" if below else ""))
        if got:
            median = statistics.median(got.values())
            every = "met" if not below and len(got) == len(cells_) else "missed"
            on_median = ("" if peer == "torch-sparse" else  # issue 23 asks >= 1.0x of cuSPARSELt only
                         f"; >= {TARGET_MEDIAN:.1f}x on the median cell: {'met' if median >= TARGET_MEDIAN else 'missed'}")
            lines.append(f"target: tilemma / {name} >= {TARGET_EVERY:.1f}x on every cell: {every}{on_median} "
                         f"(median {median:.3f}, geometric mean "
                         f"{math.exp(statistics.fmean(math.log(r) for r in got.values() if r > 0)):.3f})")
    return lines


def table(rows: Sequence[Row]) -> str:
    cols = (("tilemma/Triton-ms", lambda by: gb._ratio(by.get("tilemma"), by.get("triton-mma.sync"))),
            ("tilemma/Triton", lambda by: gb._ratio(by.get("tilemma"), by.get("triton"))),
            ("tilemma/cuBLAS", lambda by: gb._ratio(by.get("tilemma"), by.get("cublas"))),
            ("tilemma/cuSPARSELt", lambda by: gb._ratio(by.get("tilemma"), by.get("torch-sparse"))))
    legend = (gb.LEGEND + " Layouts: A/B row- or column-major as the family names (gemm_bench); "
              "sparse: A pre-compressed, cuSPARSELt as torch-sparse.")
    return gb.table(list(rows), keys=("family", "shape"), ratios=cols, legend=legend,
                    config_impls=("tilemma",))


def report(rows: Sequence[Row], args: argparse.Namespace) -> None:
    if args.csv:
        gb.write_csv(list(rows), args.csv)
    if args.plot:
        from benchmarks import plot

        try:
            plot.matrix_plot(list(rows), args.plot)
        except ImportError:
            print(f"no matplotlib here: write the plot elsewhere with "
                  f"`python -m benchmarks.plot --matrix {args.csv or 'ROWS.csv'} {args.plot}`", file=sys.stderr)
    print(table(rows))
    print("\n".join(summary(rows)))  # the median ratio last


# ---------------------------------------------------------------------------------------------
# The dry run: no GPU
# ---------------------------------------------------------------------------------------------


def small_shape(shape: Shape) -> Shape:
    """A shape the emulator runs in seconds with what makes `shape` a class kept: its size mod 64
    beyond 64 (odd rows stay odd), M <= 16 with a K long enough for split-K, K over several stages."""
    m, n, k = shape
    m2, n2 = (d if d <= 64 else 64 + d % 64 for d in (m, n))
    k2 = min(k, 2048) if m <= 16 else (k if k <= 256 else 192 + k % 64)
    return m2, n2, k2


def dry_job(job: tuple) -> dict:
    """One dry-run job: ("compile", family, shape, sm): the kernel at that shape compiled for
    target sm; ("emulate", family, shape, sm): compiled and run in the emulator against the
    reference."""
    kind, fam_name, shape, sm = job
    began = time.perf_counter()
    out: dict[str, Any] = {"job": job}
    try:
        if kind == "compile":
            build = gb.precompile_one((fam_name, shape, "", sm, "9.0"))
            if isinstance(build, str):
                out["error"] = build
            else:
                out["config"] = build.config
                out["staged"] = " stages=0" not in build.config
                out["split_k"] = max(build.grid[2], 1) > 1 and bool(build.scratch)
        else:
            from tilemma.compiler.driver import runner
            from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

            fam = FAMILIES[fam_name]
            text, name = gb.tilemma_ir(fam, shape)
            options = [CompileOptions(sm=sm, ptx="9.0")]
            _, n, k = shape
            if fam.a in ("si8", "ui8") and fam.a_col and not fam.b_col and sm == "90a" and not n % 16 and not k % 16:
                # the analogue of a kernel whose B is transposed first (512 rows and up) as that one
                options.append(CompileOptions(sm=sm, ptx="9.0", transpose_first=1))
            for option in options:
                [kernel] = compile_text(text, name, option)
                result = runner.run_compiled(kernel, 0, "emulator")
                out["config"] = kernel.abi.config
                out["ok"] = result.ok
                if not result.ok:
                    out["error"] = result.detail or "FAIL"
                    break
    except Exception as exc:
        out["error"] = gb._error(exc)
    out["seconds"] = time.perf_counter() - began
    return out


def dry_run(selected: Sequence[gb.Cell], processes: int, sm: str = "90") -> int:
    """Every cell's kernel compiled for `sm`, a small analogue of each emulated; 0 if all went right."""
    import concurrent.futures
    import multiprocessing

    jobs = [("compile", f.name, s, sm) for f, s in selected]
    jobs += list(dict.fromkeys(("emulate", f.name, small_shape(s), sm) for f, s in selected))
    began = time.perf_counter()
    print(f"dry run: {len(selected)} cells to compile, {len(jobs) - len(selected)} small analogues to emulate, "
          f"{processes} processes", file=sys.stderr, flush=True)
    if processes <= 1:
        results = [dry_job(j) for j in jobs]
    else:
        # the emulations (slower) first, so that the pool ends evenly
        order = sorted(range(len(jobs)), key=lambda i: jobs[i][0] != "emulate")
        with concurrent.futures.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            done = dict(zip(order, pool.map(dry_job, [jobs[i] for i in order])))
        results = [done[i] for i in range(len(jobs))]
    by = {r["job"]: r for r in results}
    failures = [r for r in results if "error" in r]
    print(f"{'family':>20} {'layout':>12} {'shape':>16}  {'compiled at the shape (instruction tiling)':<52} "
          f"{'emulated at':>13}")
    for fam, shape in selected:
        c = by[("compile", fam.name, shape, sm)]
        small = small_shape(shape)
        e = by[("emulate", fam.name, small, sm)]
        compiled = f"ERROR {c['error'][:60]}" if "error" in c else \
            c["config"].split(" ", 1)[1] + ("" if c["staged"] else "  (simple: not staged)")
        emulated = "FAIL " + e["error"][:60] if "error" in e else "PASS"
        print(f"{fam.name:>20} {gb.layout_label(fam):>12} {gb.shape_label(shape):>16}  {compiled:<52} "
              f"{gb.shape_label(small):>13} {emulated}")
    compiles = [r for r in results if r["job"][0] == "compile" and "error" not in r]
    simple = [r for r in compiles if not r["staged"]]
    split_k = [r for r in compiles if r["split_k"]]
    emulated = [r for r in results if r["job"][0] == "emulate"]
    print(f"dry run: {len(compiles)} of {len(selected)} cells compiled ({len(simple)} to the simple, unstaged path"
          + (": " + ", ".join(f"{j[1]} {gb.shape_label(j[2])}" for j in (r['job'] for r in simple[:8]))
             + (" ..." if len(simple) > 8 else "") if simple else "")
          + f"; {len(split_k)} split-K); {sum(1 for r in emulated if r.get('ok'))} of {len(emulated)} small analogues "
          f"right in the emulator; {time.perf_counter() - began:.0f} s")
    for r in failures:
        print(f"  FAILED {r['job'][0]} {r['job'][1]} {gb.shape_label(r['job'][2])}: {r['error']}")
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.matrix", description=__doc__.split("\n")[0])
    p.add_argument("--part", default="1/1", metavar="I/N", help="run the I-th of N parts of the cells (default 1/1)")
    p.add_argument("--bases", nargs="+", default=list(BASES), choices=BASES, metavar="F",
                   help=f"element families (default all: {' '.join(BASES)})")
    p.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS),
                   help="operand orders, A then B, r(ow) or c(olumn)-major (default all: rr rc cr cc)")
    p.add_argument("--shapes", nargs="+", metavar="MxNxK", help="these shapes instead of SHAPES (every family)")
    p.add_argument("--sm", default="90", help="the target tilemma compiles for (default 90; 90a: sm_90a's "
                   "warpgroup kernels where they apply)")
    p.add_argument("--csv", help="write the rows here")
    p.add_argument("--plot", help="write the heat map here (PNG; needs matplotlib)")
    p.add_argument("--budget", type=float, default=450.0,
                   help="seconds for the run, compiles included; what is not started by then becomes "
                   "'skipped' rows, which --redo runs again (default 450: one device call of < 9 minutes)")
    p.add_argument("--samples", type=int, default=SAMPLES, help=f"timed samples per measurement (default {SAMPLES})")
    p.add_argument("--warmup-ms", type=float, default=WARMUP_MS, help=f"warm-up per measurement (default {WARMUP_MS:g})")
    p.add_argument("--processes", type=int, default=min(16, os.cpu_count() or 1),
                   help="processes compiling tilemma's kernels ahead (default: the cores, at most 16)")
    p.add_argument("--skip", nargs="+", default=[], metavar="IMPL", choices=list(gb.TRITON_MODES),
                   help="leave out a Triton mode: triton, triton-mma.sync")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="print the cells of each part and the estimated times")
    what.add_argument("--dry-run", action="store_true",
                      help="no GPU: compile every selected cell's kernel, emulate a small analogue of each")
    what.add_argument("--merge", nargs="+", metavar="CSV", help="join the parts' CSVs (no GPU): table, summary, plot")
    what.add_argument("--redo", nargs="+", metavar="CSV",
                      help="run the selected cells these CSVs lack a measurement of (skipped, lost)")
    args = p.parse_args(argv)
    try:
        args.part = parse_part(args.part)
        shapes = [gb.parse_shape(s) for s in args.shapes] if args.shapes else None
    except ValueError as exc:
        p.error(str(exc))
    if args.samples < 1 or args.warmup_ms < 0:
        p.error("--samples must be at least 1 and --warmup-ms not negative")
    args.all_cells = cells(args.bases, args.layouts, shapes)
    i, n = args.part
    args.cells = split(args.all_cells, n)[i - 1]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    gb.set_timing(args.samples, args.warmup_ms)
    i, n = args.part
    if args.list:
        for j, part in enumerate(split(args.all_cells, n), 1):
            groups = dict.fromkeys(f.name for f, _ in part)
            print(f"part {j}/{n}: {len(part)} cells, about {sum(estimate_s(f, s) for f, s in part):.0f} s: "
                  f"{' '.join(groups)}")
        total = sum(estimate_s(f, s) for f, s in args.all_cells)
        print(f"{len(args.all_cells)} cells, about {total:.0f} s in all (an estimate for an H100; one part per "
              f"device call, --budget {args.budget:g})")
        return 0
    if args.dry_run:
        return dry_run(args.cells, args.processes, args.sm)
    if args.merge:
        rows = merge(*(gb.read_csv(path) for path in args.merge))
        report(rows, args)
        left = unfinished([c for c in args.all_cells if any(r.family == c[0].name for r in rows)], rows)
        if left:
            print(f"{len(left)} cells lack a measurement: run them with --redo {' '.join(args.merge)}", file=sys.stderr)
        return 0
    selected = args.cells
    if args.redo:
        done = merge(*(gb.read_csv(path) for path in args.redo))
        selected = unfinished(args.all_cells, done)
        print(f"redo: {len(selected)} cells lack a measurement", file=sys.stderr)
        if not selected:
            return 0
    print(f"matrix part {i}/{n}: {len(selected)} cells, about {sum(estimate_s(f, s) for f, s in selected):.0f} s "
          f"estimated, budget {args.budget:.0f} s", file=sys.stderr, flush=True)
    try:
        ptx = gb.default_ptx()
        compiled = gb.precompile([(f.name, s, "") for f, s in selected], args.sm, ptx, args.processes)
        print(f"compiled {len(compiled)} kernels in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        rows = gb.run_cells(selected, budget=max(args.budget - (time.monotonic() - started), 10), skip=args.skip,
                            main_share=MAIN_SHARE, precompiled=compiled, warm_processes=args.processes)
    except ModuleNotFoundError as exc:
        print(f"benchmarks.matrix needs torch and a GPU (--dry-run does not): {exc}", file=sys.stderr)
        return 1
    report(rows, args)
    print(f"matrix part {i}/{n}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
