"""What a compiled kernel expects from its caller, read from the lowered IR (`ptx.entry`'s
launch shape, per-parameter records and tensor-map records): the one description the runner, the
benchmarks and the CLI use instead of the lowering's internals.

A kernel's PTX parameters are, in order: one `.u64` pointer per `params` entry, one `.u32` per
size symbol (`symbols`; a bound kernel's values travel beside its ABI), then one 128-byte
`.param .align 64 .b8` tensor map per `tensor_maps` entry, which every launch path encodes from
the address of the argument it maps (`KernelABI.arguments` for host arrays)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from tilemma.compiler.runtime.tensor_map import TensorMap

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import DictionaryAttr

    from tilemma.dialects import ptx


# Roles of uint32 word buffers (outside the tile element types): the sparsity error word and the
# metadata words of a pre-compressed A (`tile.sparse_from`, whose values have the role a_values).
WORD_ROLES = ("sparsity_error", "a_meta", "split_counters")
# Roles of the scratch a kernel needs: a split-K kernel's (`warp.split_k_publish`,
# `warp.split_k_sum`) partial sums' workspace and a counter word per output tile, which must hold 0
# before a launch (and does after one); B's K-major copy, which a kernel whose B is transposed
# first writes before the GEMM reads it (`tile-transpose-first`, `KernelABI.prologue`).
# `Kernel.launch` and the runner provide them when the caller does not.
SCRATCH_ROLES = ("split_workspace", "split_counters", "transposed_b")
# Roles of the parameters a kernel writes (every output of its epilogue is a `d`); the others it
# only reads.
OUTPUT_ROLES = ("d", "sparsity_error")


def symbol_order(sizes: list[tuple[str, ...]], strides: list[tuple[str, ...]]) -> list[str]:
    """The kernel's size parameters in the order they follow the pointers: each `?` size's symbol
    (M, N, K) and each `?` stride's, by first appearance over the arguments' sizes, then their
    strides."""
    order: list[str] = []
    for row in (*sizes, *strides):
        order.extend(s for s in row if s and s not in order)
    return order


def size_param(symbol: str) -> str:
    """The PTX parameter (.u32) that holds a size symbol."""
    return f"s_{symbol}"


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a pointer to a buffer of `span` elements of `element` laid out with
    `strides`/`offset` (elements), used as `roles` (a, b, c, d, scale_a, scale_b,
    sparsity_error); `init` is the value a word must hold before the launch (the sparsity error
    word: 0xFFFFFFFF = no error)."""

    name: str
    roles: tuple[str, ...]
    shape: tuple[int, ...]  # -1 where the size is known at launch
    element: str
    strides: tuple[int, ...]  # -1 where the stride is known at launch
    offset: int
    init: int | None = None
    sizes: tuple[str, ...] = ()  # per dimension: the symbol of a `?` size (M, N, K), else ""
    stride_symbols: tuple[str, ...] = ()  # per dimension: the symbol of a `?` stride, else ""
    identity: bool = True  # the memref has the identity layout: row-major and contiguous

    @property
    def dynamic(self) -> bool:
        """Whether a size or stride is known only at launch (`KernelABI.bind` makes it static)."""
        return any(self.sizes) or any(self.stride_symbols)

    def packed_strides(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Strides of a buffer of `shape` in this parameter's layout, where ours are `?`: row-major
        for the identity layout, else the static strides with each `?` one (innermost first) just
        past what the others span."""
        from tilemma.compiler.core.memref_layout import row_major

        if self.identity:
            return row_major(tuple(shape))
        strides = list(self.strides)
        for d in sorted((d for d, s in enumerate(strides) if s == -1), reverse=True):
            strides[d] = max([1] + [s * n for s, n in zip(strides, shape) if s > 0])
        return tuple(strides)

    @property
    def span(self) -> int:
        """Elements the buffer must hold."""
        if self.dynamic:
            raise ValueError(f"{self.name} has sizes known only at launch: bind the ABI to buffers first")
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
             "strides": list(self.strides), "offset": self.offset}
        if self.dynamic:
            d |= {"sizes": list(self.sizes), "stride_symbols": list(self.stride_symbols), "identity": self.identity}
        else:
            d["nbytes"] = self.nbytes
        return d if self.init is None else {**d, "init": self.init}


@dataclass(frozen=True)
class Prologue:
    """A kernel of the same module that every launch runs first, on the same stream: its entry
    name, launch shape and parameters, each the main kernel's parameter `args[i]`."""

    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"entry": self.entry, "grid": list(self.grid), "block": list(self.block), "args": list(self.args)}


@dataclass(frozen=True)
class KernelABI:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: tuple[Param, ...]
    shared_bytes: int = 0  # dynamic shared memory per CTA
    tiling: tuple[int, ...] = ()  # warps (2), warp tile in instructions (2), stages, stage K[, split-K CTAs]
    sm: str = ""  # the PTX module's .target, e.g. sm_90
    ptx_version: str = ""  # its .version, e.g. 9.0
    instruction: str = ""  # the mma opcode the kernel runs
    # Sizes known at launch: the .u32 parameters after the pointers (M, N, K, `<arg>_stride<d>`),
    # each grid axis as (count, ((symbol, tile), ...)) = count * prod(ceil(size / tile)), and the
    # multiple the kernel assumes of its `?` strides and contiguous `?` sizes
    symbols: tuple[str, ...] = ()
    grid_sizes: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
    stride_multiple: int = 1
    size_multiple: tuple[int, int, int] = (1, 1, 1)  # ... and of its `?` sizes M, N, K
    # the tensor maps the kernel's TMA copies read: its last parameters, after the sizes
    tensor_maps: tuple[TensorMap, ...] = ()
    # CTAs a cluster holds along the grid's x (`.reqnctapercluster`, fixed at compile time: a
    # launch needs nothing more than a grid of whole clusters, which the kernel's grid is)
    cluster: int = 1
    # a persistent kernel's CTAs (its grid), which loop over its tiles; 0: one CTA a tile
    persistent: int = 0
    # kernels every launch runs first (`ptx.entry` prologue): B's transpose (`tile-transpose-first`)
    prologue: tuple[Prologue, ...] = ()

    @property
    def dynamic(self) -> bool:
        return bool(self.symbols)

    def arguments(self, buffers: Sequence[Any], scalars: Sequence[int] = ()) -> list:
        """The whole argument list of a launch on host arrays (`cuda_runtime.run_kernel`, the
        emulator): `buffers` (one per parameter), the size parameters' values `scalars` (a bound
        kernel's) as .u32, then the tensor maps, in the PTX's parameter order."""
        import numpy as np

        return [*buffers, *(np.uint32(v) for v in scalars), *self.tensor_maps]

    def bind(self, shapes: list[tuple[int, ...]], strides: list[tuple[int, ...]]) -> tuple[KernelABI, tuple[int, ...]]:
        """The static ABI of a launch on buffers of these shapes and (element) strides, one per
        parameter, and the values of `symbols` in order; a ValueError naming the parameter where
        they disagree with the kernel (a static size, an identity layout that is not contiguous,
        two values of one size, a promised multiple that does not hold, a size past 32 bits)."""
        from tilemma.compiler.core.memref_layout import DYNAMIC, StridedLayout, row_major

        if not self.dynamic:
            return self, ()
        if self.tensor_maps:  # a map's dimensions and strides would be launch-time values too
            raise ValueError(f"{self.name}: tensor maps of launch-time sizes are not supported yet (the kernel has "
                             f"{len(self.tensor_maps)} and sizes known only at launch)")
        values: dict[str, tuple[int, str]] = {}
        params = []
        for p, shape, st in zip(self.params, shapes, strides, strict=True):
            where = f"parameter {p.name} ({', '.join(p.roles)})"
            shape, st = tuple(int(x) for x in shape), tuple(int(x) for x in st)
            if len(shape) != len(p.shape):
                raise ValueError(f"{where}: rank {len(shape)}, expected {len(p.shape)}")
            for d, (sym, size) in enumerate(zip(p.sizes or ("",) * len(shape), shape)):
                if not sym:
                    continue
                if sym in values and values[sym][0] != size:
                    raise ValueError(f"{where}: dimension {d} is {sym} = {size}, but {values[sym][1]} has {sym} = "
                                     f"{values[sym][0]}")
                values.setdefault(sym, (size, f"{p.name} dimension {d}"))
                if sym == "K" and size == 0:
                    raise ValueError("K = 0: the kernel runs at least one K step (D = C needs no GEMM)")
            if p.dynamic and p.identity:
                want = row_major(shape)  # the identity layout: contiguous, whatever the sizes
                if any(w != g for w, g, n in zip(want, st, shape) if n > 1):
                    raise ValueError(f"{where}: strides {list(st)}, expected the contiguous {list(want)} "
                                     f"(its memref has the identity layout)")
                st = want
            for d, sym in enumerate(p.stride_symbols or ("",) * len(st)):
                if sym:
                    values[sym] = (st[d], f"{p.name} stride {d}")
            symbolic = StridedLayout(tuple(DYNAMIC if x == -1 else x for x in p.shape),
                                     tuple(DYNAMIC if x == -1 else x for x in p.strides), p.offset)
            try:
                bound = symbolic.bind(shape, st)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if self.stride_multiple > 1:
                for d, (sym, stride) in enumerate(zip(p.stride_symbols or ("",) * len(st), p.strides)):
                    contiguous = p.sizes and p.sizes[d] and stride == 1
                    value = st[d] if sym else shape[d] if contiguous else None
                    if value is not None and value % self.stride_multiple:
                        raise ValueError(f"{where}: {'stride' if sym else 'size'} {d} is {value}, not a multiple "
                                         f"of {self.stride_multiple}, which this kernel assumes")
            params.append(Param(p.name, p.roles, bound.shape, p.element, bound.strides, p.offset, p.init,
                                identity=p.identity))
        for sym, (v, at) in values.items():
            if not 0 <= v < 2**31:
                raise ValueError(f"{sym} = {v} ({at}): sizes and strides known at launch are below 2^31")
            need = dict(zip("MNK", self.size_multiple)).get(sym, 1)
            if v % need:
                raise ValueError(f"{sym} = {v} ({at}) is not a multiple of {need}, which this kernel assumes")
        grid = tuple(count * _prod(-(-values[sym][0] // tile_size) for sym, tile_size in factors) if factors else g
                     for g, (count, factors) in zip(self.grid, self.grid_sizes or [(g, ()) for g in self.grid]))
        bound_abi = KernelABI(self.name, grid, self.block, tuple(params), self.shared_bytes,  # type: ignore[arg-type]
                              self.tiling, self.sm, self.ptx_version, self.instruction, cluster=self.cluster,
                              persistent=self.persistent, prologue=self.prologue)
        return bound_abi, tuple(values[s][0] for s in self.symbols)

    def scratch_buffers(self) -> list:
        """(parameter index, host buffer) for each scratch parameter (`SCRATCH_ROLES`), in order,
        for a run that provides them: the workspace full of NaN (0x7FFFFFFF words for integers),
        so that a partial read before it is written shows, the counters at their `init` (0), and a
        transposed B's copy full of 0x5A bytes."""
        import numpy as np

        out = []
        for i, p in enumerate(self.params):
            if "split_workspace" in p.roles:
                out.append((i, np.full(p.span, np.nan if p.element in ("f32", "f64") else 0x7FFFFFFF, p.dtype)))
            elif "split_counters" in p.roles:
                out.append((i, np.full(p.span, p.init or 0, np.uint32)))
            elif "transposed_b" in p.roles:  # (0x5A bytes: what a GEMM reading it before the transpose would see)
                out.append((i, np.full(p.span, 0x5A, np.uint8).view(p.dtype)))
        return out

    @property
    def config(self) -> str:
        """The configuration the kernel was built with, in the options' spelling."""
        if len(self.tiling) not in (6, 7):
            return ""
        wm, wn, rm, rn, stages, stage_k = self.tiling[:6]
        producers = self.block[0] * self.block[1] * self.block[2] // 32 - wm * wn  # warps past the computing ones
        return (f"warps={wm}x{wn} warp-tile={rm}x{rn} stages={stages}" + (f" stage-k={stage_k}" if stages else "")
                + (f" split-k={self.tiling[6]}" if len(self.tiling) == 7 else "")
                + (f" producers={producers}" if producers > 0 else "") + (" tma=1" if self.tensor_maps else "")
                + (f" cluster={self.cluster}" if self.cluster > 1 else "")
                + (f" persistent={self.persistent}" if self.persistent else ""))

    def to_dict(self) -> dict:
        """The ABI as plain data (what `tilemma compile --emit json` writes per kernel)."""
        d = {"name": self.name, "sm": self.sm, "ptx_version": self.ptx_version,
             "grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
             "instruction": self.instruction, "config": self.config,
             "params": [p.to_dict() for p in self.params]}
        if self.dynamic:
            d |= {"size_params": [{"name": s, "ptx": size_param(s), "type": "u32"} for s in self.symbols],
                  "grid_sizes": [[count, [[sym, t] for sym, t in factors]] for count, factors in self.grid_sizes],
                  "stride_multiple": self.stride_multiple, "size_multiple": list(self.size_multiple)}
        if self.tensor_maps:
            d["tensor_maps"] = [{"of": m.of, "element_bytes": m.element_bytes, "dims": list(m.dims),
                                 "strides": list(m.strides), "box": list(m.box), "swizzle": m.swizzle,
                                 "offset": m.offset} for m in self.tensor_maps]
        if self.cluster > 1:
            d["cluster"] = self.cluster
        if self.persistent:
            d["persistent"] = self.persistent
        if self.prologue:
            d["prologue"] = [p.to_dict() for p in self.prologue]
        return d

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
            sizes = tuple(text(x) for x in p.get("sizes", []))
            stride_symbols = tuple(text(x) for x in p.get("stride_symbols", []))
            param = Param(text(p["name"]), tuple(roles), ints(p["shape"]), text(p["element"]), ints(p["strides"]),
                          offset, init, sizes, stride_symbols, bool(p.get("identity", True)))
            if len(param.strides) != len(param.shape):
                raise ValueError(f"{param.name}: {len(param.strides)} strides for {len(param.shape)} dimensions")
            params.append(param)
        shared = d["shared_bytes"]
        if type(shared) is not int:
            raise TypeError(f"shared_bytes: expected an integer, got {shared!r}")
        symbols = tuple(text(x["name"]) for x in d.get("size_params", []))
        grid_sizes = tuple((int(count), tuple((text(sym), int(t)) for sym, t in factors))
                           for count, factors in d.get("grid_sizes", []))
        multiple = d.get("stride_multiple", 1)
        if type(multiple) is not int:
            raise TypeError(f"stride_multiple: expected an integer, got {multiple!r}")
        sizes_multiple = ints(d.get("size_multiple", [1, 1, 1]), 3)
        maps = d.get("tensor_maps", [])
        if not isinstance(maps, list):
            raise TypeError(f"tensor_maps: expected a list, got {maps!r}")
        tensor_maps = []
        for m in maps:
            if not isinstance(m, dict):
                raise TypeError(f"tensor_maps: expected records, got {m!r}")
            scalar = {}
            for key in ("of", "element_bytes", "swizzle", "offset"):
                if type(m[key]) is not int:
                    raise TypeError(f"tensor_maps {key}: expected an integer, got {m[key]!r}")
                scalar[key] = m[key]
            tensor_maps.append(_checked_map(TensorMap(scalar["of"], scalar["element_bytes"], ints(m["dims"]),
                                                      ints(m["strides"]), ints(m["box"]), scalar["swizzle"],
                                                      scalar["offset"]), params))
        cluster = d.get("cluster", 1)
        if type(cluster) is not int or cluster < 1:
            raise TypeError(f"cluster: expected a positive integer, got {cluster!r}")
        persistent = d.get("persistent", 0)
        if type(persistent) is not int or persistent < 0:
            raise TypeError(f"persistent: expected a count of CTAs, got {persistent!r}")
        records = d.get("prologue", [])
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise TypeError(f"prologue: expected a list of records, got {records!r}")
        prologue = tuple(_checked_prologue(Prologue(text(r["entry"]), ints(r["grid"], 3), ints(r["block"], 3),  # type: ignore[arg-type]
                                                    ints(r["args"])), params) for r in records)
        return KernelABI(text(d["name"]), ints(d["grid"], 3), ints(d["block"], 3),  # type: ignore[arg-type]
                         tuple(params), shared, ints(list(tiling)), text(d["sm"]), text(d["ptx_version"]),
                         text(d["instruction"]), symbols, grid_sizes, multiple, sizes_multiple, tuple(tensor_maps),
                         cluster, persistent, prologue)

    @staticmethod
    def from_entry(entry: ptx.EntryOp) -> KernelABI:
        from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, NoneAttr

        from tilemma.compiler.core.memref_layout import DYNAMIC, symbolic_layout
        from tilemma.dialects import ptx
        from tilemma.dialects.tile import element_name

        if entry.grid is None or entry.block is None or entry.abi is None:
            raise ValueError(f"kernel {entry.sym_name.data} was not lowered from the warp level: no ABI")
        module = entry.parent_op()
        opcode = instruction_of(entry)
        params = []
        for record in entry.abi.data:
            d = record.data
            ref = d["type"]
            assert isinstance(ref, MemRefType)
            layout = symbolic_layout(ref)
            init = d.get("init")

            def symbols(key: str) -> tuple[str, ...]:
                value = d.get(key)
                return tuple(x.data for x in value.data) if isinstance(value, ArrayAttr) else ()  # type: ignore[attr-defined]

            params.append(Param(
                d["name"].data,  # type: ignore[union-attr]
                tuple(r.data for r in d["role"].data),  # type: ignore[union-attr]
                tuple(-1 if x == DYNAMIC else x for x in layout.shape),
                element_name(ref.element_type),
                tuple(-1 if x == DYNAMIC else x for x in layout.strides),
                layout.offset,
                init.value.data if isinstance(init, IntegerAttr) else None,
                symbols("sizes"),
                symbols("strides"),
                isinstance(ref.layout, NoneAttr) or not hasattr(ref.layout, "get_strides"),
            ))
        sizes = [p.sizes or ("",) * len(p.shape) for p in params]
        strides = [p.stride_symbols or ("",) * len(p.shape) for p in params]
        tensor_maps: tuple[TensorMap, ...] = ()
        if entry.tensor_maps is not None:
            try:
                tensor_maps = tuple(_checked_map(tensor_map_from_record(r), params) for r in entry.tensor_maps.data)
            except ValueError as e:
                raise ValueError(f"kernel {entry.sym_name.data}: {e}") from None
        declared = sum(1 for p in entry.params.data if _MAP_DECLARATION.search(p.data))
        if declared != len(tensor_maps):
            raise ValueError(f"kernel {entry.sym_name.data}: {declared} tensor-map parameters, but "
                             f"{len(tensor_maps)} tensor_maps records")
        grid_sizes: tuple = ()
        if entry.grid_sizes is not None:
            grid_sizes = tuple((axis.data[0].value.data, tuple((f.data[0].data, f.data[1].value.data)  # type: ignore[attr-defined]
                                                             for f in axis.data[1:]))  # type: ignore[attr-defined]
                               for axis in entry.grid_sizes.data)
        return KernelABI(
            entry.sym_name.data,
            tuple(entry.grid.get_values()),  # type: ignore[arg-type]
            tuple(entry.block.get_values()),  # type: ignore[arg-type]
            tuple(params),
            entry.shared_bytes.value.data if entry.shared_bytes is not None else 0,
            tuple(entry.tiling.get_values()) if entry.tiling is not None else (),  # type: ignore[arg-type]
            module.target.data if isinstance(module, ptx.ModuleOp_) else "",
            module.version.data if isinstance(module, ptx.ModuleOp_) else "",
            opcode,
            tuple(symbol_order(sizes, strides)),
            grid_sizes,
            entry.stride_multiple.value.data if entry.stride_multiple is not None else 1,
            tuple(entry.size_multiple.get_values()) if entry.size_multiple is not None else (1, 1, 1),
            tensor_maps,
            entry.cluster.value.data if entry.cluster is not None else 1,
            entry.persistent.value.data if entry.persistent is not None else 0,
            tuple(_checked_prologue(Prologue(r.data["entry"].data, tuple(r.data["grid"].get_values()),  # type: ignore[arg-type,union-attr]
                                             tuple(r.data["block"].get_values()),  # type: ignore[union-attr]
                                             tuple(r.data["args"].get_values())), params)  # type: ignore[union-attr]
                  for r in (entry.prologue.data if entry.prologue is not None else ())),
        )

    def after_prologue(self, args: Sequence[Any], run: Any) -> list:
        """`args` (host arrays, in parameter order) with what the kernels this one runs first
        (`prologue`) leave in them: `run(entry, grid, block, values)` runs one on its values and
        returns them after it (the GPU's `run_kernel`, the emulator's), each reshaped as given."""
        args = list(args)
        for first in self.prologue:
            for i, out in zip(first.args, run(first.entry, first.grid, first.block, [args[i] for i in first.args])):
                args[i] = out.view(args[i].dtype).reshape(args[i].shape)
        return args

    def index(self, role: str) -> int | None:
        """Position of the parameter playing `role` (None if none does)."""
        return next((i for i, p in enumerate(self.params) if role in p.roles), None)


# A tensor-map parameter's declaration in `ptx.entry`'s params (`.align 64 .b8 NAME[128]`).
_MAP_DECLARATION = re.compile(r"\.align\s+64\s+\.b8\s+[A-Za-z_$][\w$]*\[128\]")
_MAP_INTS = ("of", "element_bytes", "swizzle", "offset")
_MAP_ARRAYS = ("dims", "strides", "box")


def tensor_map_record(m: TensorMap) -> DictionaryAttr:
    """The record of map `m` in `ptx.entry`'s `tensor_maps` (what the lowering writes and
    `KernelABI.from_entry` reads, `tensor_map_from_record`): `of`, `element_bytes`, `swizzle`,
    `offset` as i64 integers, `dims`, `strides`, `box` as i64 dense arrays."""
    from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, IntegerAttr, i64

    fields: dict = {k: IntegerAttr(getattr(m, k), i64) for k in _MAP_INTS}
    fields |= {k: DenseArrayBase.from_list(i64, list(getattr(m, k))) for k in _MAP_ARRAYS}
    return DictionaryAttr(fields)


def tensor_map_from_record(record: DictionaryAttr) -> TensorMap:
    """The map a `tensor_map_record` describes; ValueError naming the field it lacks or mistypes."""
    from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr

    d = record.data
    values: dict[str, Any] = {}
    for key in (*_MAP_INTS, *_MAP_ARRAYS):
        value = d.get(key)
        if key in _MAP_INTS and isinstance(value, IntegerAttr):
            values[key] = value.value.data
        elif key in _MAP_ARRAYS and isinstance(value, DenseArrayBase):
            values[key] = tuple(int(x) for x in value.get_values())
        else:
            kind = "an integer" if key in _MAP_INTS else "a dense array of integers"
            raise ValueError(f"tensor map record: {key} should be {kind}, got {value}")
    return TensorMap(values["of"], values["element_bytes"], values["dims"], values["strides"], values["box"],
                     values["swizzle"], values["offset"])


def _checked_map(m: TensorMap, params: list[Param]) -> TensorMap:
    """`m`, where the TMA would take it (`TensorMap.check`) and it maps one of `params`; else ValueError."""
    m.check()
    if not 0 <= m.of < len(params):
        raise ValueError(f"tensor map of argument {m.of}: the kernel has {len(params)} array arguments")
    return m


def _checked_prologue(p: Prologue, params: list[Param]) -> Prologue:
    """`p`, where its arguments are parameters of the kernel; else ValueError."""
    if not all(0 <= i < len(params) for i in p.args):
        raise ValueError(f"prologue {p.entry}: arguments {list(p.args)}, but the kernel has {len(params)}")
    return p


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def instruction_of(entry) -> str:
    """The instruction a lowered kernel (`ptx.EntryOp`) multiplies with: its first mma's opcode, or
    its warpgroups' `wgmma.mma_async` ('' if it has neither)."""
    from tilemma.dialects import ptx

    return next((o.opcode.data for o in entry.body.ops if isinstance(o, ptx.MmaOp) or (
        isinstance(o, ptx.InstOp) and o.opcode.data.startswith("wgmma.mma_async"))), "")
