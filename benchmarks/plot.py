"""Plot `gemm_bench` results: TFLOP/s against size, one panel per family, one line per
implementation. Needs matplotlib (not a tilemma dependency: install it where you plot).

    python -m benchmarks.plot results.csv results.png
"""

from __future__ import annotations

import argparse
import math

from benchmarks.gemm_bench import FAMILIES, IMPLS, Row, read_csv


def plot(rows: list[Row], path: str) -> None:
    """Write the PNG; rows without a figure (errors, skips) leave gaps. Raises ImportError
    without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = [f for f in FAMILIES if any(r.family == f for r in rows)]
    families += sorted({r.family for r in rows} - set(families))
    if not families:
        raise ValueError("no rows to plot")
    cols = min(3, len(families))
    fig, axes = plt.subplots(math.ceil(len(families) / cols), cols, squeeze=False,
                             figsize=(4.2 * cols, 3.4 * math.ceil(len(families) / cols)))
    for ax, fam in zip(axes.flat, families):
        sizes = sorted({r.size for r in rows if r.family == fam})
        for color, impl in enumerate(IMPLS):  # one colour per implementation in every panel
            points = sorted((r.size, r.tflops) for r in rows
                            if r.family == fam and r.impl == impl and r.ok)
            if points:
                ax.plot(*zip(*points), marker="o", label=impl, color=f"C{color}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.set_title(fam)
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("TOP/s" if fam == "s8" else "TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no results", ha="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    devices = sorted({r.device for r in rows if r.device})
    fig.suptitle("GEMM throughput" + (f" on {', '.join(devices)}" if devices else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__.split("\n")[0])
    p.add_argument("csv", help="a CSV written by `gemm_bench --csv`")
    p.add_argument("png", help="the PNG to write")
    args = p.parse_args()
    try:
        plot(read_csv(args.csv), args.png)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        p.error(f"{args.csv}: {exc}")


if __name__ == "__main__":
    main()
