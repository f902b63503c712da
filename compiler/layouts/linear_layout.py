"""Layouts as linear maps over GF(2): one algebra for fragment, ldmatrix and shared-memory layouts.

A `LinearLayout` maps named input dimensions (lane, value, register, row, col, ...; each of a
power-of-two size) to named output dimensions (row, col, ...) by XOR: every input bit has one
basis vector, the image of a point is the XOR of the basis vectors of its set bits, optionally
XORed with a constant (an affine layout). This is the model of Triton's LinearLayout: an additive
`row = sum of bit weights` form cannot express an XOR swizzle, a GF(2)-linear one can, and the
additive forms of the mma fragments are the special case where the basis vectors of an output
share no bit (then XOR is +; `additive_split`).

Composition (`compose`), inversion (`inverse`) and products (`*`) make layouts build on each
other: an ldmatrix result layout composed with a tile placement is an mma fragment; lane ->
row address, composed with a swizzle and the byte address, tells which bank each lane reads.
`fit` is the one fitter: it recovers a layout from a table of coordinates, or says which entry
breaks linearity.

Representation: each dimension's bits are packed, dimension after dimension, low bits first, into
one integer; a layout is the tuple of the (packed) images of the (packed) input bits. So renaming
or regrouping the bits of a dimension (`reshape_ins`, `reshape_outs`) changes no vector.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["AdditiveSplit", "LinearLayout"]

Dims = tuple[tuple[str, int], ...]


def _log2(size: int, what: str) -> int:
    if not isinstance(size, (int, np.integer)) or size < 1 or size & (size - 1):
        raise ValueError(f"{what}: size must be a power of two >= 1, got {size!r}")
    return int(size).bit_length() - 1


def _dims(dims: Mapping[str, int] | Iterable[tuple[str, int]], what: str) -> Dims:
    items = tuple(dims.items()) if isinstance(dims, Mapping) else tuple(dims)
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise ValueError(f"{what} dimensions repeat a name: {names}")
    for n, s in items:
        _log2(s, f"{what} dimension {n!r}")
    return tuple((str(n), int(s)) for n, s in items)


def _shifts(dims: Dims) -> dict[str, int]:
    out, at = {}, 0
    for n, s in dims:
        out[n] = at
        at += _log2(s, n)
    return out


def _nbits(dims: Dims) -> int:
    return sum(_log2(s, n) for n, s in dims)


def _pack(dims: Dims, values: Mapping[str, int]) -> int:
    sh = _shifts(dims)
    return sum(int(values.get(n, 0)) << sh[n] for n, _ in dims)


def _unpack(dims: Dims, x: int) -> dict[str, int]:
    sh = _shifts(dims)
    return {n: (x >> sh[n]) & (s - 1) for n, s in dims}


def _fmt(dims: Dims, x: int) -> str:
    return "(" + ", ".join(f"{n}={v}" for n, v in _unpack(dims, x).items()) + ")"


class _Basis:
    """Reduced row-echelon basis of packed input vectors with their images, kept fully reduced
    (each vector's pivot, its lowest set bit, is set in no other vector). `src` records which
    added entries XOR to each vector, so a contradiction can name them."""

    def __init__(self) -> None:
        self.rows: dict[int, list[int]] = {}  # pivot -> [vector, image, src]

    def reduce(self, x: int, y: int) -> tuple[int, int, int]:
        src = 0
        for p, (v, img, s) in self.rows.items():
            if x >> p & 1:
                x, y, src = x ^ v, y ^ img, src ^ s
        return x, y, src

    def add(self, x: int, y: int, tag: int) -> tuple[int, int] | None:
        """Adds entry `tag` (x -> y). Returns None, or (image mismatch, src) when x is a
        combination of earlier entries whose images XOR to y ^ mismatch."""
        x, y, src = self.reduce(x, y)
        src ^= 1 << tag
        if x == 0:
            return (y, src) if y else None
        p = (x & -x).bit_length() - 1
        for row in self.rows.values():
            if row[0] >> p & 1:
                row[0] ^= x
                row[1] ^= y
                row[2] ^= src
        self.rows[p] = [x, y, src]
        return None

    def images(self, nbits: int) -> list[int]:
        """Image of each unit vector; directions no entry constrains map to 0."""
        return [self.rows[b][1] if b in self.rows else 0 for b in range(nbits)]


@dataclass(frozen=True)
class AdditiveSplit:
    """The layout as integer sums: out = const[out] + sum over input bits b of dimension d of
    bit_b(d) * weights[out][d][b]. Exists when, per output, no two basis vectors (nor the
    constant) share a bit, so that XOR and + agree; code generation then needs only bfe/mad."""

    weights: dict[str, dict[str, tuple[int, ...]]]
    const: dict[str, int]

    def evaluate(self, **inputs) -> dict[str, np.ndarray]:
        out = {}
        shape = np.broadcast_shapes(*(np.shape(x) for x in inputs.values()))
        for o, per_dim in self.weights.items():
            acc = np.full(shape, self.const[o], np.int64)
            for d, ws in per_dim.items():
                x = np.asarray(inputs[d])
                for b, w in enumerate(ws):
                    acc = acc + w * ((x >> b) & 1)
            out[o] = acc
        return out


@dataclass(frozen=True, eq=False)
class LinearLayout:
    """An affine map over GF(2) from named input dimensions to named output dimensions.

    `columns[i]` is the packed image of packed input bit i (input dimensions in order, low bits
    first); `offset` the packed constant XORed into every image (0 for a linear layout).
    Build with `from_bases`, `identity`, `fit`; equality ignores the order of dimensions."""

    in_dims: Dims
    out_dims: Dims
    columns: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_dims", _dims(self.in_dims, "input"))
        object.__setattr__(self, "out_dims", _dims(self.out_dims, "output"))
        object.__setattr__(self, "columns", tuple(int(c) for c in self.columns))
        n_in, n_out = _nbits(self.in_dims), _nbits(self.out_dims)
        if len(self.columns) != n_in:
            raise ValueError(f"{n_in} input bits need {n_in} basis vectors, got {len(self.columns)}")
        for c in (*self.columns, self.offset):
            if c < 0 or c >> n_out:
                raise ValueError(f"vector {_fmt(self.out_dims, c)} lies outside the output dimensions {self.out_dims}")

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def from_bases(
        bases: Mapping[str, Sequence[Sequence[int]]],
        out_dims: Mapping[str, int],
        offset: Sequence[int] | None = None,
        in_sizes: Mapping[str, int] | None = None,
    ) -> LinearLayout:
        """Input dimension d of size 2**len(bases[d]); bases[d][b] is the image of bit b, one
        integer per output dimension (in `out_dims` order). `in_sizes` may enlarge a dimension
        beyond its listed bases (the extra bits map to zero)."""
        outs = _dims(out_dims, "output")
        ins, cols = [], []
        for d, vecs in bases.items():
            vecs = [tuple(v) for v in vecs]
            size = (in_sizes or {}).get(d, 1 << len(vecs))
            nb = _log2(size, f"input dimension {d!r}")
            if len(vecs) > nb:
                raise ValueError(f"input dimension {d!r} of size {size} has {len(vecs)} > {nb} basis vectors")
            ins.append((d, size))
            for v in vecs + [(0,) * len(outs)] * (nb - len(vecs)):
                if len(v) != len(outs):
                    raise ValueError(f"basis vector {v} of {d!r} needs one entry per output {[n for n, _ in outs]}")
                cols.append(LinearLayout._pack_checked(outs, v, f"basis vector of {d!r}"))
        off = LinearLayout._pack_checked(outs, offset or (0,) * len(outs), "offset")
        return LinearLayout(tuple(ins), outs, tuple(cols), off)

    @staticmethod
    def _pack_checked(outs: Dims, v: Sequence[int], what: str) -> int:
        for (n, s), x in zip(outs, v):
            if not 0 <= x < s:
                raise ValueError(f"{what}: {n}={x} outside [0, {s})")
        return _pack(outs, dict(zip((n for n, _ in outs), v)))

    @staticmethod
    def identity(dims: Mapping[str, int] | Iterable[tuple[str, int]], offset: Mapping[str, int] | None = None) -> LinearLayout:
        """Each dimension to itself, XORed with `offset` (a translation by an offset aligned to
        the coordinates it moves, where XOR is +)."""
        d = _dims(dims, "identity")
        off = LinearLayout._pack_checked(d, [(offset or {}).get(n, 0) for n, _ in d], "offset")
        return LinearLayout(d, d, tuple(1 << i for i in range(_nbits(d))), off)

    @staticmethod
    def fit(
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        *,
        in_sizes: Mapping[str, int] | None = None,
        out_sizes: Mapping[str, int] | None = None,
        ignore: np.ndarray | None = None,
        affine: bool = False,
        what: str = "layout",
    ) -> LinearLayout:
        """The layout taking inputs[d][i] to outputs[o][i] for every entry i (arrays broadcast
        together), or ValueError naming the first entry no (affine, if `affine`) GF(2)-linear
        map reproduces and the earlier entries that contradict it.

        Entries with a negative output (the tables' "ignored", e.g. lanes a selector does not
        read), or where `ignore` is true, are excluded; input bits only they would determine map
        to 0, so every input gets an in-range image. Sizes default to the next power of two."""
        if not inputs or not outputs:
            raise ValueError(f"{what}: need at least one input and one output dimension")
        arrays = np.broadcast_arrays(*inputs.values(), *outputs.values())
        if any(a.dtype.kind not in "iu" for a in arrays):
            raise ValueError(f"{what}: coordinates must be integer arrays")
        flat = [a.reshape(-1).astype(np.int64) for a in arrays]
        ins_a, outs_a = flat[: len(inputs)], flat[len(inputs) :]
        live = np.ones(flat[0].shape, bool) if ignore is None else ~np.broadcast_to(ignore, arrays[0].shape).reshape(-1)
        for a in outs_a:
            live &= a >= 0
        for n, a in zip(inputs, ins_a):
            if a.size and a.min() < 0:
                raise ValueError(f"{what}: input {n!r} has a negative coordinate {a.min()}")

        def size(name: str, a: np.ndarray, given: Mapping[str, int] | None) -> int:
            if given and name in given:
                return given[name]
            top = int(a.max()) if a.size else 0
            return 1 << max(top, 0).bit_length()

        ins = _dims({n: size(n, a, in_sizes) for n, a in zip(inputs, ins_a)}, "input")
        outs = _dims({n: size(n, a[live], out_sizes) for n, a in zip(outputs, outs_a)}, "output")
        for dims, names, arrs in ((ins, inputs, ins_a), (outs, outputs, outs_a)):
            for (n, s), a in zip(dims, arrs):
                sel = a if dims is ins else a[live]
                if sel.size and sel.max() >= s:
                    raise ValueError(f"{what}: {n}={sel.max()} does not fit its size {s}")
        xs = sum((a << _shifts(ins)[n]) for (n, _), a in zip(ins, ins_a))
        ys = sum((a << _shifts(outs)[n]) for (n, _), a in zip(outs, outs_a))
        n_in = _nbits(ins)
        one = 1 << n_in if affine else 0  # the constant rides on an extra, highest input bit
        basis = _Basis()
        entries = np.flatnonzero(live)
        for k, i in enumerate(entries):
            bad = basis.add(int(xs[i]) | one, int(ys[i]), k)
            if bad is None:
                continue
            got, src = bad
            x, y = int(xs[i]), int(ys[i])
            others = [int(entries[j]) for j in range(k) if src >> j & 1]
            if not others:
                raise ValueError(
                    f"{what} is not linear over GF(2): entry {_fmt(ins, x)} maps the zero input to "
                    f"{_fmt(outs, y)} (a linear layout maps it to zero; fit with affine=True for an offset)"
                )
            shown = ", ".join(_fmt(ins, int(xs[j])) for j in others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
            raise ValueError(
                f"{what} is not linear over GF(2): entry {_fmt(ins, x)} is at {_fmt(outs, y)}, but "
                f"the entries {shown} (whose inputs XOR to it{' with the constant' if affine else ''}) "
                f"say {_fmt(outs, y ^ got)}"
            )
        images = basis.images(n_in + (1 if affine else 0))
        return LinearLayout(ins, outs, tuple(images[:n_in]), images[n_in] if affine else 0)

    @staticmethod
    def fit_table(table: Mapping[str, np.ndarray], in_dims: Sequence[str], **kw) -> LinearLayout:
        """`fit` where the inputs are the indices of the arrays: table[o][i0, i1, ...] is output o
        of in_dims[0] = i0, in_dims[1] = i1, ...; input sizes are the array's (powers of two)."""
        shape = np.broadcast_shapes(*(np.shape(a) for a in table.values()))
        if len(shape) != len(in_dims):
            raise ValueError(f"{kw.get('what', 'layout')}: {len(in_dims)} input dimensions {tuple(in_dims)} for arrays of shape {shape}")
        grids = np.indices(shape)
        sizes = {d: int(s) for d, s in zip(in_dims, shape)} | dict(kw.pop("in_sizes", None) or {})
        return LinearLayout.fit(dict(zip(in_dims, grids)), table, in_sizes=sizes, **kw)

    # -- views ------------------------------------------------------------------------------

    @property
    def in_sizes(self) -> dict[str, int]:
        return dict(self.in_dims)

    @property
    def out_sizes(self) -> dict[str, int]:
        return dict(self.out_dims)

    def bases(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """Per input dimension, the image of each bit as one integer per output dimension."""
        out, at = {}, 0
        for n, s in self.in_dims:
            nb = _log2(s, n)
            out[n] = tuple(tuple(_unpack(self.out_dims, c).values()) for c in self.columns[at : at + nb])
            at += nb
        return out

    def offsets(self) -> dict[str, int]:
        return _unpack(self.out_dims, self.offset)

    @property
    def rank(self) -> int:
        b = _Basis()
        for i, c in enumerate(self.columns):
            b.add(c, 0, i)
        return len(b.rows)

    def is_injective(self) -> bool:
        return self.rank == len(self.columns)

    def is_surjective(self) -> bool:
        return self.rank == _nbits(self.out_dims)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearLayout) and self._canon() == other._canon()

    def __hash__(self) -> int:
        return hash(self._canon())

    def _canon(self):
        outs = sorted(self.out_dims)
        bases = self.bases()
        names = [n for n, _ in self.out_dims]
        order = [names.index(n) for n, _ in outs]
        vecs = tuple((n, tuple(tuple(v[i] for i in order) for v in bases[n])) for n, _ in sorted(self.in_dims))
        offs = self.offsets()
        return tuple(sorted(self.in_dims)), tuple(outs), vecs, tuple(offs[n] for n, _ in outs)

    def __repr__(self) -> str:
        ins = " x ".join(f"{n}:{s}" for n, s in self.in_dims)
        outs = " x ".join(f"{n}:{s}" for n, s in self.out_dims)
        bases = "; ".join(f"{n}: {list(v)}" for n, v in self.bases().items() if v)
        off = f"; offset {tuple(self.offsets().values())}" if self.offset else ""
        return f"LinearLayout({ins} -> {outs}; {bases}{off})"

    # -- evaluation ---------------------------------------------------------------------------

    def _linear(self, x: int) -> int:
        y, i = 0, 0
        while x:
            if x & 1:
                y ^= self.columns[i]
            x >>= 1
            i += 1
        return y

    def apply(self, **inputs) -> dict[str, np.ndarray]:
        """The output coordinates of input coordinates (integers or arrays, broadcast together);
        every input dimension must be given, within its size."""
        names = [n for n, _ in self.in_dims]
        if set(inputs) != set(names):
            raise ValueError(f"apply needs exactly the inputs {names}, got {sorted(inputs)}")
        acc = np.full(np.broadcast_shapes(*(np.shape(x) for x in inputs.values())), self.offset, np.int64)
        sh = _shifts(self.in_dims)
        for n, s in self.in_dims:
            x = np.asarray(inputs[n])
            if x.dtype.kind not in "iu":
                raise ValueError(f"input {n!r} must be integer, got {x.dtype}")
            if x.size and (x.min() < 0 or x.max() >= s):
                raise ValueError(f"input {n}={x.max() if x.max() >= s else x.min()} outside [0, {s})")
            x = x.astype(np.int64)
            for b in range(_log2(s, n)):
                acc = acc ^ np.where((x >> b) & 1, np.int64(self.columns[sh[n] + b]), np.int64(0))
        osh = _shifts(self.out_dims)
        return {n: (acc >> osh[n]) & (s - 1) for n, s in self.out_dims}

    def __call__(self, **inputs) -> tuple[int, ...]:
        """Scalar convenience: the output coordinates as a tuple of ints (out_dims order)."""
        return tuple(int(v) for v in self.apply(**inputs).values())

    # -- algebra ------------------------------------------------------------------------------

    def compose(self, other: LinearLayout) -> LinearLayout:
        """x -> other(self(x)). Every output of self must be an input of other, no larger; other's
        inputs that self does not produce are held at 0."""
        ins = dict(other.in_dims)
        for n, s in self.out_dims:
            if n not in ins or s > ins[n]:
                raise ValueError(
                    f"cannot compose: output {n}:{s} of {self} is not an input of {other}"
                    + (f" (size {ins[n]})" if n in ins else "")
                )

        def through(y: int) -> int:
            return other._linear(_pack(other.in_dims, _unpack(self.out_dims, y)))

        cols = tuple(through(c) for c in self.columns)
        return LinearLayout(self.in_dims, other.out_dims, cols, through(self.offset) ^ other.offset)

    def inverse(self) -> LinearLayout:
        """The inverse map (outputs become inputs), or ValueError when not bijective."""
        n_in, n_out = len(self.columns), _nbits(self.out_dims)
        basis = _Basis()
        for i, c in enumerate(self.columns):
            bad = basis.add(c, 1 << i, i)
            if bad is not None:
                kernel = bad[1]  # input bits whose images XOR to zero
                x = sum(1 << b for b in range(n_in) if kernel >> b & 1)
                raise ValueError(f"{self} is not invertible: not injective, {_fmt(self.in_dims, x)} maps to {_fmt(self.out_dims, self.offset)} like the zero input")
        if n_in != n_out:
            raise ValueError(f"{self} is not invertible: not surjective, its image has 2**{n_in} of the 2**{n_out} outputs")
        linear = LinearLayout(self.out_dims, self.in_dims, tuple(basis.images(n_out)))
        # y = M x ^ c  <=>  x = M^-1 y ^ M^-1 c
        return LinearLayout(linear.in_dims, linear.out_dims, linear.columns, linear._linear(self.offset))

    def __mul__(self, other: LinearLayout) -> LinearLayout:
        """Product: self on the low bits, other on the high bits of every dimension they share
        (sizes multiply); dimensions only one of them has pass through. So a 16x8 tile layout
        times a 2-element `col` layout repeats the tile along col."""
        def merged(a: Dims, b: Dims) -> Dims:
            sizes = dict(a)
            for n, s in b:
                sizes[n] = sizes.get(n, 1) * s
            return tuple(sizes.items())

        ins, outs = merged(self.in_dims, other.in_dims), merged(self.out_dims, other.out_dims)
        osh, ish = _shifts(outs), _shifts(ins)
        low = dict(self.out_dims)

        def lift(y: int, mine: Dims, high: bool) -> int:
            return sum(v * (low.get(n, 1) if high else 1) << osh[n] for n, v in _unpack(mine, y).items())

        cols = [0] * _nbits(ins)
        for lay, high in ((self, False), (other, True)):
            at = 0
            for n, s in lay.in_dims:
                base = ish[n] + (_log2(self.in_sizes.get(n, 1), n) if high else 0)
                for b in range(_log2(s, n)):
                    cols[base + b] = lift(lay.columns[at + b], lay.out_dims, high)
                at += _log2(s, n)
        off = lift(self.offset, self.out_dims, False) ^ lift(other.offset, other.out_dims, True)
        return LinearLayout(ins, outs, tuple(cols), off)

    def reshape_ins(self, dims: Mapping[str, int] | Iterable[tuple[str, int]]) -> LinearLayout:
        """The same map with its input bits regrouped into new dimensions (in order, low bits
        first): (lane:32, value:8) -> (lane:32, half:2, reg:4) splits value into two."""
        d = _dims(dims, "input")
        if _nbits(d) != _nbits(self.in_dims):
            raise ValueError(f"reshape_ins: {d} has {_nbits(d)} bits, the layout {_nbits(self.in_dims)}")
        return LinearLayout(d, self.out_dims, self.columns, self.offset)

    def reshape_outs(self, dims: Mapping[str, int] | Iterable[tuple[str, int]]) -> LinearLayout:
        """The same map with its output bits regrouped (byte:4096 -> in16:16, bank:8, line:32)."""
        d = _dims(dims, "output")
        if _nbits(d) != _nbits(self.out_dims):
            raise ValueError(f"reshape_outs: {d} has {_nbits(d)} bits, the layout {_nbits(self.out_dims)}")
        return LinearLayout(self.in_dims, d, self.columns, self.offset)

    def transpose(self, ins: Sequence[str] | None = None, outs: Sequence[str] | None = None) -> LinearLayout:
        """The same map with its dimensions listed in a new order (the packing follows)."""
        def order(dims: Dims, names: Sequence[str] | None) -> Dims:
            if names is None:
                return dims
            if sorted(names) != sorted(n for n, _ in dims):
                raise ValueError(f"transpose: {list(names)} is not an order of {[n for n, _ in dims]}")
            return tuple((n, dict(dims)[n]) for n in names)

        new_in, new_out = order(self.in_dims, ins), order(self.out_dims, outs)
        old_sh, new_sh = _shifts(self.in_dims), _shifts(new_in)
        cols = [0] * len(self.columns)
        for n, s in self.in_dims:
            for b in range(_log2(s, n)):
                c = self.columns[old_sh[n] + b]
                cols[new_sh[n] + b] = _pack(new_out, _unpack(self.out_dims, c))
        return LinearLayout(new_in, new_out, tuple(cols), _pack(new_out, _unpack(self.out_dims, self.offset)))

    # -- code generation ------------------------------------------------------------------

    def additive_split(self) -> AdditiveSplit | None:
        """Integer weights per input bit and output, plus a constant, when for every output the
        basis vectors and the constant use disjoint bits (XOR = +); else None (emit xor)."""
        bases, offs = self.bases(), self.offsets()
        weights: dict[str, dict[str, tuple[int, ...]]] = {}
        for k, (o, _) in enumerate(self.out_dims):
            seen = offs[o]
            weights[o] = {}
            for d, vecs in bases.items():
                for v in vecs:
                    if seen & v[k]:
                        return None
                    seen |= v[k]
                weights[o][d] = tuple(v[k] for v in vecs)
        return AdditiveSplit(weights, offs)
