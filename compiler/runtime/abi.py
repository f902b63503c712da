"""What a compiled kernel expects from its caller, read from the lowered IR (`ptx.entry`'s
launch shape and per-parameter records): the one description the runner, the benchmarks and the
CLI use instead of the lowering's internals."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from tilemma.dialects import ptx


# Roles of uint32 word buffers (outside the tile element types): the sparsity error word and the
# metadata words of a pre-compressed A (`tile.sparse_from`, whose values have the role a_values).
WORD_ROLES = ("sparsity_error", "a_meta")
# Roles of the parameters a kernel writes (every output of its epilogue is a `d`); the others it
# only reads.
OUTPUT_ROLES = ("d", "sparsity_error")


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
        from tilemma.compiler.core.elements import BYTE_PER_ELEMENT  # NumPy and ml_dtypes: when needed

        if self.element in BYTE_PER_ELEMENT:
            return "byte"
        return "bits" if self.bits < 8 else "native"

    @property
    def bits(self) -> int:
        """Storage bits of one element (the error word is a ui32, outside the tile types)."""
        from tilemma.compiler.core.elements import ELEMENTS

        return 32 if self.is_words else ELEMENTS[self.element].bits

    @property
    def is_words(self) -> bool:
        return any(r in WORD_ROLES for r in self.roles)

    @property
    def is_output(self) -> bool:
        """Whether the kernel writes this buffer (D, an epilogue's outputs, the error word)."""
        return any(r in OUTPUT_ROLES for r in self.roles)

    @property
    def nbytes(self) -> int:
        if self.packing == "bits":
            return -(-self.span * self.bits // 8)
        if self.packing == "byte":
            return self.span
        return self.span * self.bits // 8

    @property
    def dtype(self) -> np.dtype:
        """The NumPy (ml_dtypes) dtype of a buffer passed for this parameter: packed sub-byte
        elements and fp6 / ue4m3 codes travel as uint8 bytes, tf32 as float32, the error word
        as uint32."""
        import numpy as np

        from tilemma.compiler.core.elements import ELEMENTS

        return np.dtype(np.uint32) if self.is_words else ELEMENTS[self.element].storage_dtype

    def to_dict(self) -> dict:
        d = {"name": self.name, "roles": list(self.roles), "shape": list(self.shape),
             "element": self.element, "dtype": self.dtype.name, "packing": self.packing,
             "strides": list(self.strides), "offset": self.offset, "nbytes": self.nbytes}
        return d if self.init is None else {**d, "init": self.init}


@dataclass(frozen=True)
class KernelABI:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[Param, ...]
    shared_bytes: int = 0  # dynamic shared memory per CTA
    tiling: tuple[int, ...] = ()  # warps (2), warp tile in instructions (2), stages, stage K
    sm: str = ""  # the PTX module's .target, e.g. sm_90
    ptx_version: str = ""  # its .version, e.g. 9.0
    instruction: str = ""  # the mma opcode the kernel runs

    @property
    def config(self) -> str:
        """The configuration the kernel was built with, in the options' spelling."""
        if len(self.tiling) != 6:
            return ""
        wm, wn, rm, rn, stages, stage_k = self.tiling
        return f"warps={wm}x{wn} warp-tile={rm}x{rn} stages={stages}" + (f" stage-k={stage_k}" if stages else "")

    def to_dict(self) -> dict:
        """The ABI as plain data (what `tilemma compile --emit json` writes per kernel)."""
        return {"name": self.name, "sm": self.sm, "ptx_version": self.ptx_version,
                "grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
                "instruction": self.instruction, "config": self.config,
                "params": [p.to_dict() for p in self.params]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @staticmethod
    def from_dict(d: dict, tiling: tuple[int, ...] = ()) -> KernelABI:
        """The ABI `to_dict` wrote (with `tiling`, which it spells as `config`); TypeError or
        ValueError when `d` is not one (the compile cache reads entries it does not trust)."""
        def ints(value, n: int | None = None) -> tuple[int, ...]:
            if not isinstance(value, list) or any(type(v) is not int for v in value) or (n and len(value) != n):
                raise TypeError(f"expected {n or 'some'} integers, got {value!r}")
            return tuple(value)

        def text(value) -> str:
            if not isinstance(value, str):
                raise TypeError(f"expected a string, got {value!r}")
            return value

        params = []
        for p in d["params"]:
            init = p.get("init")
            roles = p["roles"]
            if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
                raise TypeError(f"roles: expected strings, got {roles!r}")
            if init is not None and type(init) is not int:
                raise TypeError(f"init: expected an integer, got {init!r}")
            offset = p["offset"]
            if type(offset) is not int:
                raise TypeError(f"offset: expected an integer, got {offset!r}")
            param = Param(text(p["name"]), tuple(roles), ints(p["shape"]), text(p["element"]), ints(p["strides"]),
                          offset, init)
            if len(param.strides) != len(param.shape):
                raise ValueError(f"{param.name}: {len(param.strides)} strides for {len(param.shape)} dimensions")
            params.append(param)
        shared = d["shared_bytes"]
        if type(shared) is not int:
            raise TypeError(f"shared_bytes: expected an integer, got {shared!r}")
        return KernelABI(text(d["name"]), ints(d["grid"], 3), ints(d["block"], 3),  # type: ignore[arg-type]
                         tuple(params), shared, ints(list(tiling)), text(d["sm"]), text(d["ptx_version"]),
                         text(d["instruction"]))

    @staticmethod
    def from_entry(entry: ptx.EntryOp) -> KernelABI:
        from xdsl.dialects.builtin import IntegerAttr, MemRefType

        from tilemma.compiler.core.memref_layout import strided_layout
        from tilemma.dialects import ptx
        from tilemma.dialects.tile import element_name

        if entry.grid is None or entry.block is None or entry.abi is None:
            raise ValueError(f"kernel {entry.sym_name.data} was not lowered from the warp level: no ABI")
        module = entry.parent_op()
        mma = next((o for o in entry.body.ops if isinstance(o, ptx.MmaOp)), None)
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
            module.target.data if isinstance(module, ptx.ModuleOp_) else "",
            module.version.data if isinstance(module, ptx.ModuleOp_) else "",
            mma.opcode.data if mma is not None else "",
        )

    def index(self, role: str) -> int | None:
        """Position of the parameter playing `role` (None if none does)."""
        return next((i for i, p in enumerate(self.params) if role in p.roles), None)
