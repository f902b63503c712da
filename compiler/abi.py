"""What a compiled kernel expects from its caller, read from the lowered IR (`ptx.entry`'s
launch shape and per-parameter records): the one description the runner, the benchmarks and the
CLI use instead of the lowering's internals."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, MemRefType

from tilemma.dialects import ptx, tile
from tilemma.dialects.tile import element_name
from tilemma.compiler.memref_layout import strided_layout


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a pointer to a buffer of `span` elements of `element` laid out with
    `strides`/`offset` (elements), used as `roles` (a, b, c, d, scale_a, scale_b,
    sparsity_error); `init` is the value a word must hold before the launch (the sparsity error
    word: 0xFFFFFFFF = no error)."""

    name: str
    roles: tuple[str, ...]
    shape: tuple[int, ...]
    element: str
    strides: tuple[int, ...]
    offset: int
    init: int | None = None

    @property
    def span(self) -> int:
        """Elements the buffer must hold."""
        return self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1

    @property
    def packing(self) -> str:
        """How elements sit in memory: `bits` (4- and 1-bit types packed densely, element i at bit
        i*bits, least significant first), `byte` (fp6 and scale factors: one byte each) or
        `native`."""
        if self.element in tile.BYTE_PER_ELEMENT:
            return "byte"
        return "bits" if tile.element_bits(self.element) < 8 else "native"

    @property
    def nbytes(self) -> int:
        if self.packing == "bits":
            return -(-self.span * tile.element_bits(self.element) // 8)
        if self.packing == "byte":
            return self.span
        return self.span * tile.element_bits(self.element) // 8


@dataclass(frozen=True)
class KernelABI:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[Param, ...]
    shared_bytes: int = 0  # dynamic shared memory per CTA
    tiling: tuple[int, ...] = ()  # warps (2), warp tile in instructions (2), stages, stage K

    @property
    def config(self) -> str:
        """The configuration the kernel was built with, in the options' spelling."""
        if len(self.tiling) != 6:
            return ""
        wm, wn, rm, rn, stages, stage_k = self.tiling
        return f"warps={wm}x{wn} warp-tile={rm}x{rn} stages={stages}" + (f" stage-k={stage_k}" if stages else "")

    @staticmethod
    def from_entry(entry: ptx.EntryOp) -> KernelABI:
        if entry.grid is None or entry.block is None or entry.abi is None:
            raise ValueError(f"kernel {entry.sym_name.data} was not lowered from the warp level: no ABI")
        params = []
        for record in entry.abi.data:
            d = record.data
            ref = d["type"]
            assert isinstance(ref, MemRefType)
            layout = strided_layout(ref)
            strides, offset = layout.strides, layout.offset
            init = d.get("init")
            params.append(Param(
                d["name"].data,  # type: ignore[union-attr]
                tuple(r.data for r in d["role"].data),  # type: ignore[union-attr]
                tuple(ref.get_shape()),
                element_name(ref.element_type),
                strides,
                offset,
                init.value.data if isinstance(init, IntegerAttr) else None,
            ))
        return KernelABI(
            entry.sym_name.data,
            tuple(entry.grid.get_values()),  # type: ignore[arg-type]
            tuple(entry.block.get_values()),  # type: ignore[arg-type]
            tuple(params),
            entry.shared_bytes.value.data if entry.shared_bytes is not None else 0,
            tuple(entry.tiling.get_values()) if entry.tiling is not None else (),  # type: ignore[arg-type]
        )

    def index(self, role: str) -> int | None:
        """Position of the parameter playing `role` (None if none does)."""
        return next((i for i, p in enumerate(self.params) if role in p.roles), None)
