"""Plot `gemm_bench` results: TFLOP/s against size (or shape), one panel per family, one line per
implementation; or (`--matrix`) `benchmarks.matrix`'s heat map of tilemma's ratio to Triton's
mma.sync path (cuSPARSELt for sparse) and to cuBLAS, per family and layout x shape. Needs
matplotlib (not a tilemma dependency: install it where you plot).

    python -m benchmarks.plot results.csv results.png
    python -m benchmarks.plot --matrix matrix.csv matrix.png
"""

from __future__ import annotations

import argparse
import math

from benchmarks.gemm_bench import FAMILIES, IMPLS, Row, flops, read_csv, row_shape, shape_label


def _families(rows: list[Row]) -> list[str]:
    families = [f for f in FAMILIES if any(r.family == f for r in rows)]
    return families + sorted({r.family for r in rows} - set(families))


def _devices(rows: list[Row]) -> str:
    devices = sorted({r.device for r in rows if r.device})
    return f" on {', '.join(devices)}" if devices else ""


def plot(rows: list[Row], path: str) -> None:
    """Write the PNG; rows without a figure (errors, skips) leave gaps. Raises ImportError
    without matplotlib. Square sizes on a log axis; other shapes one tick each, by FLOPs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = _families(rows)
    if not families:
        raise ValueError("no rows to plot")
    square = all(m == n == k for m, n, k in map(row_shape, rows))
    shapes = sorted({row_shape(r) for r in rows}, key=lambda s: (flops(s), s))
    x = (lambda s: s[0]) if square else shapes.index  # noqa: E731
    cols = min(3, len(families))
    fig, axes = plt.subplots(math.ceil(len(families) / cols), cols, squeeze=False,
                             figsize=(4.2 * cols if square else max(4.2, 0.45 * len(shapes)) * cols,
                                      3.4 * math.ceil(len(families) / cols)))
    for ax, fam in zip(axes.flat, families):
        here = sorted({row_shape(r) for r in rows if r.family == fam}, key=x)
        for color, impl in enumerate(IMPLS):  # one colour per implementation in every panel
            points = sorted((x(row_shape(r)), r.tflops) for r in rows
                            if r.family == fam and r.impl == impl and r.ok)
            if points:
                ax.plot(*zip(*points), marker="o", label=impl, color=f"C{color}")
        if square:
            ax.set_xscale("log", base=2)
            ax.set_xticks([s[0] for s in here], [str(s[0]) for s in here])
            ax.set_xlabel("M = N = K")
        else:
            ax.set_xticks([x(s) for s in here], [shape_label(s) for s in here], rotation=60, ha="right", fontsize=6)
            ax.set_xlabel("M x N x K")
        ax.set_title(fam)
        ax.set_ylabel("TOP/s" if FAMILIES.get(fam) and FAMILIES[fam].exact else "TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no results", ha="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    fig.suptitle("GEMM throughput" + _devices(rows))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def matrix_plot(rows: list[Row], path: str) -> None:
    """`benchmarks.matrix`'s heat maps: one line per family (gemm_bench's name: element type and
    layout), one column per shape; tilemma's ratio to Triton's mma.sync path (sparse: to
    cuSPARSELt) and to cuBLAS, on a log colour scale centred on 1. Cells without both figures
    are grey, marked with what is missing. Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    from benchmarks.gemm_bench import layout_label

    from benchmarks.matrix import cells

    order = list(dict.fromkeys(f.name for f, _ in cells()))  # element type, then layout
    present = {r.family for r in rows}
    families = [f for f in order if f in present] + [f for f in _families(rows) if f not in order]
    if not families:
        raise ValueError("no rows to plot")
    shapes = sorted({row_shape(r) for r in rows}, key=lambda s: (flops(s), s))
    by = {(r.family, row_shape(r), r.impl): r for r in rows}
    panels = (("tilemma / Triton mma.sync (sparse: / cuSPARSELt)", "reference"), ("tilemma / cuBLAS", "cublas"))
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(max(8.0, 0.62 * len(shapes) + 3), len(panels) * (0.32 * len(families) + 2.2)))
    for ax, (title, which) in zip(axes.flat, panels):
        grid = np.full((len(families), len(shapes)), np.nan)
        for i, fam in enumerate(families):
            sparse = FAMILIES[fam].sparse if fam in FAMILIES else False
            peer = ("torch-sparse" if sparse else "triton-mma.sync") if which == "reference" else which
            for j, shape in enumerate(shapes):
                ours, theirs = by.get((fam, shape, "tilemma")), by.get((fam, shape, peer))
                if ours is None and theirs is None:
                    continue
                if ours is not None and theirs is not None and ours.ok and theirs.ok:
                    grid[i, j] = ours.tflops / theirs.tflops  # type: ignore[operator]
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=5.5)
                else:
                    missing = "t" if ours is None or not ours.ok else "p"  # tilemma / the peer failed
                    ax.text(j, i, missing, ha="center", va="center", fontsize=5.5, color="0.3")
        logs = np.log2(grid)
        cmap = plt.get_cmap("RdYlGn").copy()
        cmap.set_bad("0.85")
        image = ax.imshow(np.ma.masked_invalid(logs), cmap=cmap, aspect="auto",
                          norm=TwoSlopeNorm(vmin=-2.0, vcenter=0.0, vmax=1.0))
        bar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
        ticks = [0.25, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0]
        bar.set_ticks([math.log2(t) for t in ticks], labels=[f"{t:g}x" for t in ticks])
        ax.set_xticks(range(len(shapes)), [shape_label(s) for s in shapes], rotation=60, ha="right", fontsize=6.5)
        ax.set_yticks(range(len(families)),
                      [f"{f} ({layout_label(FAMILIES[f])})" if f in FAMILIES else f for f in families], fontsize=6.5)
        got = grid[~np.isnan(grid)]
        median = f", median {np.median(got):.3f}, {int((got < 1).sum())} of {got.size} below 1" if got.size else ""
        ax.set_title(f"{title}{median}; t/p: tilemma/the peer has no figure", fontsize=9)
    fig.suptitle("GEMM matrix (issue 23): family x layout x shape" + _devices(rows), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=140)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__.split("\n")[0])
    p.add_argument("csv", help="a CSV written by `gemm_bench --csv` (or `benchmarks.matrix --csv`)")
    p.add_argument("png", help="the PNG to write")
    p.add_argument("--matrix", action="store_true", help="the matrix heat maps (benchmarks.matrix)")
    args = p.parse_args()
    try:
        (matrix_plot if args.matrix else plot)(read_csv(args.csv), args.png)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        p.error(f"{args.csv}: {exc}")


if __name__ == "__main__":
    main()
