"""The GF(2) layout algebra: apply, compose, inverse, product, fit and its messages, additive
split, checked against brute-force models on random layouts; every fragment, metadata and scale
layout of the tables fitted and checked element by element."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilemma.compiler.layouts import fragments as F
from tilemma.compiler.layouts import scale_fragments as SF
from tilemma.compiler.layouts import sparse_fragments as SP
from tilemma.compiler.layouts.linear_layout import LinearLayout as L

RNG_SEEDS = range(40)


def rand_layout(rng, ins: dict[str, int], outs: dict[str, int], affine=False) -> L:
    bases = {d: [[int(rng.integers(0, s)) for s in outs.values()] for _ in range(s.bit_length() - 1)] for d, s in ins.items()}
    off = [int(rng.integers(0, s)) for s in outs.values()] if affine else None
    return L.from_bases(bases, outs, off, in_sizes=ins)


def rand_dims(rng, names, max_bits=3) -> dict[str, int]:
    return {n: 1 << int(rng.integers(0, max_bits + 1)) for n in names}


def brute(lay: L, point: dict[str, int]) -> dict[str, int]:
    """Reference apply: XOR the basis vectors of the set bits, one bit at a time."""
    out = dict(lay.offsets())
    for d, vecs in lay.bases().items():
        for b, v in enumerate(vecs):
            if point[d] >> b & 1:
                for (o, _), x in zip(lay.out_dims, v):
                    out[o] ^= x
    return out


def all_points(dims: dict[str, int]):
    names = list(dims)
    for combo in itertools.product(*(range(s) for s in dims.values())):
        yield dict(zip(names, combo))


def apply_all(lay: L, dims: dict[str, int] | None = None):
    dims = dims or lay.in_sizes
    grids = np.indices(tuple(dims.values()))
    return lay.apply(**dict(zip(dims, grids)))


# -- apply / compose / inverse / product -----------------------------------------------------


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_apply_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    lay = rand_layout(rng, rand_dims(rng, "xy"), rand_dims(rng, "uvw"), affine=seed % 2 == 1)
    got = apply_all(lay)
    for p in all_points(lay.in_sizes):
        want = brute(lay, p)
        idx = tuple(p.values())
        assert {o: int(got[o][idx]) for o in want} == want


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_compose_is_function_composition_and_associative(seed):
    rng = np.random.default_rng(seed)
    a = rand_layout(rng, rand_dims(rng, "xy"), rand_dims(rng, "pq"), affine=seed % 2 == 1)
    b = rand_layout(rng, {n: s * int(rng.choice([1, 2])) for n, s in a.out_sizes.items()}, rand_dims(rng, "rs"), affine=seed % 3 == 0)
    c = rand_layout(rng, b.out_sizes, rand_dims(rng, "tu"), affine=True)
    ab = a.compose(b)
    for p in all_points(a.in_sizes):
        assert brute(ab, p) == brute(b, brute(a, p))
    assert ab.compose(c) == a.compose(b.compose(c))


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_inverse_of_random_bijections(seed):
    rng = np.random.default_rng(seed)
    ins = rand_dims(rng, "xy")
    bits = sum(s.bit_length() - 1 for s in ins.values())
    outs = {"u": 1 << (bits // 2), "v": 1 << (bits - bits // 2)}
    while True:  # rejection sampling: a random square GF(2) matrix is invertible ~29% of the time
        lay = rand_layout(rng, ins, outs, affine=seed % 2 == 1)
        if lay.is_injective():
            break
    inv = lay.inverse()
    assert lay.compose(inv) == L.identity(ins)
    assert inv.compose(lay) == L.identity(outs)
    assert inv.inverse() == lay


def test_inverse_errors_name_the_reason():
    many_to_one = L.from_bases({"lane": [(1,), (1,)]}, {"row": 2})
    with pytest.raises(ValueError, match=r"not injective, \(lane=3\) maps to \(row=0\) like the zero input"):
        many_to_one.inverse()
    into = L.from_bases({"lane": [(1, 0)]}, {"row": 2, "col": 2})
    with pytest.raises(ValueError, match=r"not surjective, its image has 2\*\*1 of the 2\*\*2 outputs"):
        into.inverse()


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_product_puts_the_second_layout_on_the_high_bits(seed):
    rng = np.random.default_rng(seed)
    a = rand_layout(rng, rand_dims(rng, "xy", 2), rand_dims(rng, "uv", 2), affine=True)
    b = rand_layout(rng, rand_dims(rng, "yz", 2), rand_dims(rng, "vw", 2), affine=True)
    ab = a * b
    assert ab.in_sizes == {"x": a.in_sizes["x"], "y": a.in_sizes["y"] * b.in_sizes["y"], "z": b.in_sizes["z"]}
    for p in all_points(ab.in_sizes):
        pa = {"x": p["x"], "y": p["y"] % a.in_sizes["y"]}
        pb = {"y": p["y"] // a.in_sizes["y"], "z": p["z"]}
        ya, yb = brute(a, pa), brute(b, pb)
        want = {"u": ya["u"], "v": ya["v"] + a.out_sizes["v"] * yb["v"], "w": yb["w"]}
        assert brute(ab, p) == want


@pytest.mark.parametrize("seed", RNG_SEEDS[:10])
def test_reshape_and_transpose_keep_the_map(seed):
    rng = np.random.default_rng(seed)
    lay = rand_layout(rng, {"lane": 32, "value": 8}, {"row": 16, "col": 8}, affine=True)
    split = lay.reshape_ins([("lane", 32), ("half", 2), ("reg", 4)])
    t = lay.transpose(ins=["value", "lane"], outs=["col", "row"])
    assert t == lay  # equality ignores the order of dimensions
    for p in all_points(lay.in_sizes):
        q = {"lane": p["lane"], "half": p["value"] & 1, "reg": p["value"] >> 1}
        assert brute(split, q) == brute(lay, p) == brute(t, p)
    assert hash(t) == hash(lay)
    assert lay.reshape_outs([("x", 128)]).apply(lane=3, value=5)["x"] == lay.apply(lane=3, value=5)["row"] + 16 * lay.apply(lane=3, value=5)["col"]


def test_constructor_and_apply_errors():
    with pytest.raises(ValueError, match="'lane': size must be a power of two"):
        L.identity({"lane": 24})
    with pytest.raises(ValueError, match=r"row=9 outside \[0, 8\)"):
        L.from_bases({"lane": [(9,)]}, {"row": 8})
    lay = L.identity({"lane": 32})
    with pytest.raises(ValueError, match="apply needs exactly the inputs"):
        lay.apply(value=1)
    with pytest.raises(ValueError, match=r"lane=32 outside \[0, 32\)"):
        lay.apply(lane=np.arange(33))
    with pytest.raises(ValueError, match="output lane:32 .* is not an input"):
        lay.compose(L.identity({"row": 32}))


# -- fit -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_fit_recovers_random_layouts(seed):
    rng = np.random.default_rng(seed)
    affine = seed % 2 == 1
    lay = rand_layout(rng, rand_dims(rng, "xy"), rand_dims(rng, "uv"), affine=affine)
    table = apply_all(lay)
    got = L.fit_table(table, ("x", "y"), out_sizes=lay.out_sizes, affine=affine)
    assert got == lay


@pytest.mark.parametrize("seed", RNG_SEEDS[:20])
def test_fit_ignores_marked_entries(seed):
    """Entries marked -1 (or by `ignore`) do not constrain the fit, which agrees on the rest."""
    rng = np.random.default_rng(seed)
    lay = rand_layout(rng, {"lane": 32, "value": 4}, {"row": 16, "col": 16})
    table = apply_all(lay)
    drop = rng.random((32, 4)) < 0.3
    drop[0, 0] = False
    noisy = {o: np.where(drop, -1, a) for o, a in table.items()}
    got = L.fit_table(noisy, ("lane", "value"))
    out = apply_all(got)
    for o in table:
        assert np.array_equal(out[o][~drop], table[o][~drop])
    junk = {o: np.where(drop, 99, a) for o, a in table.items()}  # garbage where ignored
    got2 = apply_all(L.fit_table(junk, ("lane", "value"), ignore=drop, out_sizes=lay.out_sizes))
    for o in table:
        assert np.array_equal(got2[o][~drop], table[o][~drop])


def test_fit_names_the_entry_that_breaks_linearity():
    lane = np.arange(32)[:, None] + np.zeros((1, 2), int)
    rows = (lane >> 2) * (lane & 3)  # g * t: not linear
    with pytest.raises(ValueError) as e:
        L.fit_table({"row": rows, "col": 0 * rows}, ("lane", "value"), what="g*t")
    msg = str(e.value)
    assert msg.startswith("g*t is not linear over GF(2): entry (lane=5, value=0) is at (row=1, col=0)")
    assert "the entries (lane=1, value=0), (lane=4, value=0)" in msg and "say (row=0, col=0)" in msg
    # additive but not XOR-linear: 3 = 1 + 2 but 1 ^ 1 = 0 (lane 3 at 2 if additive with weights 1, 1)
    with pytest.raises(ValueError, match=r"entry \(lane=3\) is at \(row=2\).*say \(row=0\)"):
        L.fit({"lane": np.arange(4)}, {"row": np.array([0, 1, 1, 2])})


def test_fit_affine_and_zero_input():
    with pytest.raises(ValueError, match=r"maps the zero input to \(row=5\).*affine=True"):
        L.fit({"lane": np.arange(8)}, {"row": np.arange(8) ^ 5})
    lay = L.fit({"lane": np.arange(8)}, {"row": np.arange(8) ^ 5}, affine=True)
    assert lay.offsets() == {"row": 5} and lay.bases() == {"lane": ((1,), (2,), (4,))}
    # a coset of live lanes (selector 1) fits linearly: the unread bit gets weight 0
    row = np.where(np.arange(8) & 2, np.arange(8) & 5, -1)
    lay = L.fit({"lane": np.arange(8)}, {"row": row})
    assert lay.bases() == {"lane": ((1,), (0,), (4,))} and lay.offsets() == {"row": 0}


def test_fit_input_errors():
    with pytest.raises(ValueError, match="integer arrays"):
        L.fit({"lane": np.arange(4.0)}, {"row": np.arange(4)})
    with pytest.raises(ValueError, match="row=15 does not fit its size 8"):
        L.fit({"lane": np.arange(16)}, {"row": np.arange(16)}, out_sizes={"row": 8})
    with pytest.raises(ValueError, match="3 input dimensions"):
        L.fit_table({"row": np.zeros((4, 4), int)}, ("a", "b", "c"))


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_additive_split(seed):
    """None exactly when two basis vectors (or the constant) of one output share a bit; where
    it exists it computes what apply does, with + instead of XOR."""
    rng = np.random.default_rng(seed)
    lay = rand_layout(rng, {"lane": 8, "value": 4}, {"row": 16, "col": 8}, affine=True)
    split = lay.additive_split()
    overlap = False
    for k, (o, _) in enumerate(lay.out_dims):
        vs = [v[k] for vecs in lay.bases().values() for v in vecs] + [lay.offsets()[o]]
        overlap |= any(a & b for a, b in itertools.combinations(vs, 2))
    assert (split is None) == overlap
    disjoint = L.from_bases({"lane": [(1, 0), (2, 0), (0, 1)], "value": [(4, 0), (0, 2)]}, {"row": 8, "col": 4}, (0, 0))
    s = disjoint.additive_split()
    lane, v = np.arange(8)[:, None], np.arange(4)[None, :]
    ev, ap = s.evaluate(lane=lane, value=v), disjoint.apply(lane=lane, value=v)
    assert all(np.array_equal(ev[o], ap[o]) for o in ap)
    assert s.weights == {"row": {"lane": (1, 2, 0), "value": (4, 0)}, "col": {"lane": (0, 0, 1), "value": (0, 2)}}


# -- the tables as LinearLayouts ---------------------------------------------------------------

LAYOUTS = F.all_layouts()


@pytest.mark.parametrize("lay", LAYOUTS, ids=[str(x) for x in LAYOUTS])
def test_every_mma_fragment_is_linear(lay):
    """Fitted from the table, the layout reproduces every (lane, value) and is additive."""
    ll = F.linear_layout(lay)
    rows, cols = F.coords(lay)
    out = ll.apply(lane=np.arange(32)[:, None], value=np.arange(lay.nvals)[None, :])
    assert np.array_equal(out["row"], rows) and np.array_equal(out["col"], cols)
    assert ll.out_sizes == {"row": lay.rows, "col": lay.cols} and ll.in_sizes == {"lane": 32, "value": lay.nvals}
    assert ll.additive_split() is not None
    # a warp-level layout (one copy of every element) is a bijection
    assert ll.is_injective() == (lay.copies == 1)


def _isa_model(shape: str, op: str, elem_type: str, lane: int, i: int) -> tuple[int, int]:
    """Element of a_i / b_i / c_i of lane `lane`, transcribed from the PTX ISA's "Matrix
    Fragments for mma.m16n8k*" formulas (groupID = lane >> 2, threadID_in_group = lane % 4)."""
    g, t = lane >> 2, lane % 4
    key = (shape, op, elem_type)
    if key in (("m16n8k16", "a", "f16"), ("m16n8k16", "a", "bf16")):
        return (g if i in (0, 1, 4, 5) else g + 8), (t * 2 + (i & 1) if i < 4 else t * 2 + (i & 1) + 8)
    if key in (("m16n8k16", "b", "f16"), ("m16n8k16", "b", "bf16")):
        return (t * 2 + (i & 1) if i < 2 else t * 2 + (i & 1) + 8), g
    if key == ("m16n8k16", "c", "f32"):
        return (g if i < 2 else g + 8), t * 2 + (i & 1)
    if key == ("m16n8k8", "a", "tf32"):
        return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
    if key == ("m16n8k8", "b", "tf32"):
        return (t if i == 0 else t + 4), g
    if key == ("m16n8k32", "a", "s8"):
        return (g if i < 4 or 8 <= i < 12 else g + 8), (t * 4 + (i & 3) if i < 8 else t * 4 + (i & 3) + 16)
    if key == ("m16n8k32", "b", "s8"):
        return (t * 4 + (i & 3) if i < 4 else t * 4 + (i & 3) + 16), g
    if key == ("m8n8k4", "a", "f64"):
        return g, t
    if key == ("m8n8k4", "c", "f64"):
        return g, 2 * t + i
    if key == ("m16n8k64", "a", "e2m1"):
        return (g if i < 8 or 16 <= i < 24 else g + 8), (t * 8 + (i & 7) if i < 16 else t * 8 + (i & 7) + 32)
    raise KeyError(key)


@pytest.mark.parametrize("shape,op,elem_type,nvals", [
    ("m16n8k16", "a", "f16", 8), ("m16n8k16", "a", "bf16", 8), ("m16n8k16", "b", "f16", 4),
    ("m16n8k16", "c", "f32", 4), ("m16n8k8", "a", "tf32", 4), ("m16n8k8", "b", "tf32", 2),
    ("m16n8k32", "a", "s8", 16), ("m16n8k32", "b", "s8", 8), ("m8n8k4", "a", "f64", 1),
    ("m8n8k4", "c", "f64", 2), ("m16n8k64", "a", "e2m1", 32),
])  # fmt: skip
def test_fragment_layouts_match_the_isa_formulas(shape, op, elem_type, nvals):
    ll = F.linear_layout(F.layout(shape, op, elem_type))
    assert ll.in_sizes["value"] == nvals
    for lane in range(32):
        for i in range(nvals):
            assert ll(lane=lane, value=i) == _isa_model(shape, op, elem_type, lane, i), (lane, i)


SPECS = SP.all_specs()


@pytest.mark.parametrize("spec", SPECS, ids=[str(s) for s in SPECS])
def test_metadata_layouts_are_linear_on_the_lanes_read(spec):
    elem_type = {16: "f16", 32: "tf32", 8: "s8", 4: "s4"}[spec.elem_bits]
    for sel in spec.selectors:
        meta = SP.metadata_layout(spec.shape, elem_type, sel)
        ll = F.fit_layout(meta.row, meta.field, f"{spec} selector {sel}")
        out = ll.apply(lane=np.arange(32)[:, None], value=np.arange(meta.row.shape[1])[None, :])
        live = meta.row >= 0
        assert np.array_equal(out["row"][live], meta.row[live]) and np.array_equal(out["col"][live], meta.field[live])
        assert ll.additive_split() is not None


@pytest.mark.parametrize("operand", "ab")
@pytest.mark.parametrize("scale_vec", SF.SCALE_VECS)
def test_scale_layouts_are_linear_for_every_selector(operand, scale_vec):
    for bid, tid in SF.valid_selectors(scale_vec, operand):
        index, chunk = SF.scale_layout(operand, scale_vec, bid, tid)
        ll = L.fit_table({"index": index, "chunk": chunk}, ("lane", "byte"))
        out = ll.apply(lane=np.arange(32)[:, None], byte=np.arange(4)[None, :])
        live = index >= 0
        assert np.array_equal(out["index"][live], index[live]) and np.array_equal(out["chunk"][live], chunk[live])


def test_fit_linear_keeps_its_contract():
    """The additive form the lowering emits: lane-bit weights plus per-value offsets."""
    lane = np.arange(32)[:, None]
    form = F.fit_linear(lane + np.zeros((1, 3), int), np.arange(3)[None, :] * 4 + 0 * lane)
    assert form.row_w == (1, 2, 4, 8, 16) and form.col_w == (0,) * 5
    assert form.row_off == (0, 0, 0) and form.col_off == (0, 4, 8)
    with pytest.raises(ValueError, match="not linear"):
        F.fit_linear((lane >> 2) * (lane & 3) + np.zeros((1, 2), int), np.zeros((32, 2), int))
