"""Benchmark: two checkouts' kernels for the same cells, samples interleaved on one GPU, so that a
compiler change is measured against the code before it rather than against another run's figures
(which drift about 4% between calls). One checkout writes its builds (no GPU); the other, on the
GPU, builds the same cells and times both, with the peers, in 3 rounds (`config_ab.interleaved`).
Each cell's two kernels must launch alike (grid, block, shared memory, scratch, tensor maps): a
change that alters those is a different kernel, not a rewrite of its body, and is refused, unless
`--any-launch` says the change retiles kernels on purpose (each build's D is checked either way).

    python -m benchmarks.ptx_ab write DIR tf32-brow:512x4096x4096 tf32:4096 ...   # in the base checkout
    python -m benchmarks.ptx_ab run DIR out.csv [--any-launch]                    # in this one, on the GPU

A cell is FAMILY:SIZE (`gemm_bench` families; N or MxNxK), compiled for sm_90a with its default
configuration or FAMILY:SIZE:CONFIG (`gemm_bench.parse_config`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from benchmarks import gemm_bench as gb
from benchmarks.ptx_sims import build
from tilemma.compiler.runtime.abi import Prologue
from tilemma.compiler.runtime.tensor_map import TensorMap


def _cell(text: str) -> tuple[str, str, str]:
    fam, size, *config = text.split(":", 2)
    if fam not in gb.FAMILIES:
        raise SystemExit(f"ptx_ab: unknown family {fam!r} in {text!r}")
    return fam, size, config[0] if config else ""


def write(out_dir: str, cells: list[str]) -> int:
    """Each cell's build by this checkout, as DIR/NNN.json (the cell and `gemm_bench.TilemmaBuild`)."""
    os.makedirs(out_dir, exist_ok=True)
    for i, text in enumerate(cells):
        fam, size, config = _cell(text)
        b = build(fam, gb.parse_shape(size), config)
        with open(os.path.join(out_dir, f"{i:03d}.json"), "w") as f:
            json.dump({"cell": text, "build": dataclasses.asdict(b)}, f)
        print(f"{text}: {b.config}")
    return 0


def _launch(b: gb.TilemmaBuild) -> tuple:
    return (tuple(b.grid), tuple(b.block), b.shared, tuple(map(tuple, b.scratch)), tuple(b.tensor_maps))


def saved(path: str) -> tuple[str, gb.TilemmaBuild]:
    """A cell `write` saved, and its build."""
    with open(path) as f:
        data = json.load(f)
    fields = data["build"]
    maps = tuple(TensorMap(**{k: tuple(v) if isinstance(v, list) else v for k, v in m.items()})
                 for m in fields["tensor_maps"])
    first = tuple(Prologue(p["entry"], tuple(p["grid"]), tuple(p["block"]), tuple(p["args"]))
                  for p in fields.get("prologue", ()))  # (builds saved before B was transposed first: none)
    return data["cell"], gb.TilemmaBuild(**{**fields, "grid": tuple(fields["grid"]), "block": tuple(fields["block"]),
                                            "scratch": tuple(tuple(s) for s in fields["scratch"]),
                                            "tensor_maps": maps, "prologue": first})


def pairs(in_dir: str, any_launch: bool = False) -> list[tuple[str, gb.Shape, gb.TilemmaBuild, gb.TilemmaBuild]]:
    """Each saved cell's family and shape, this checkout's build of it and the saved one (its
    config marked `+base`); a SystemExit where the two would launch differently, unless
    `any_launch` (a change that retiles the kernel: both still compute the cell's D, checked)."""
    out = []
    for name in sorted(n for n in os.listdir(in_dir) if n.endswith(".json")):
        text, base = saved(os.path.join(in_dir, name))
        fam, size, config = _cell(text)
        shape = gb.as_shape(gb.parse_shape(size))
        ours = build(fam, shape, config)
        if _launch(base) != _launch(ours) and not any_launch:
            raise SystemExit(f"ptx_ab: {text}: the two builds launch differently "
                             f"({_launch(base)} against {_launch(ours)})")
        out.append((fam, shape, ours, dataclasses.replace(base, config=base.config + " +base")))
    return out


def run(in_dir: str, out: str, any_launch: bool = False) -> int:
    """Every saved cell: this checkout's kernel and the saved one, interleaved, with the peers."""
    cells = pairs(in_dir, any_launch)
    import torch

    from benchmarks.config_ab import interleaved

    gb.set_timing(6, 20)
    rows = []
    for fam, shape, ours, base in cells:
        torch.cuda.empty_cache()
        inp = gb.make_inputs(gb.FAMILIES[fam], shape, torch)
        rows += interleaved(gb.FAMILIES[fam], shape, [gb.kernel_from(ours), gb.kernel_from(base)], inp, 3, torch)
    gb.write_csv(rows, out)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "write":
        return write(argv[1], argv[2:])
    if len(argv) in (3, 4) and argv[0] == "run" and argv[3:] in ([], ["--any-launch"]):
        return run(argv[1], argv[2], argv[3:] == ["--any-launch"])
    print("\n".join(line.strip() for line in __doc__.strip().splitlines()[-6:-4]), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
