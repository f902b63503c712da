"""The pre-compressed sparse A format (`compiler/sparse_format.py`): round trips, the layout
against the metadata table of `sparse_fragments`, and the refusals."""

import ml_dtypes
import numpy as np
import pytest

from tilemma.compiler.layouts import sparse_format as fmt
from tilemma.compiler.layouts import sparse_fragments as sf

DTYPES = [np.float16, ml_dtypes.bfloat16]


def sparse(rng, shape, dtype):
    """A random 2:4 sparse [..., M, K] (K ragged: the last group is cut)."""
    *lead, m, k = shape
    kp = -(-k // 4) * 4
    dense = rng.standard_normal((*lead, m, kp)).astype(dtype)
    out = np.stack([sf.prune(x, "2:4") for x in dense.reshape(-1, m, kp)]).reshape(*lead, m, kp)
    return np.ascontiguousarray(out[..., :k])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(16, 32), (37, 150), (3, 130, 200), (2, 1, 5, 9)])
def test_round_trip(dtype, shape):
    a = sparse(np.random.default_rng(1), shape, dtype)
    values, meta = fmt.compress_a(a)
    *lead, m, k = shape
    assert values.shape == (*lead, *fmt.values_shape(m, k)) and values.dtype == a.dtype
    assert meta.shape == (*lead, *fmt.meta_shape(m, k)) and meta.dtype == np.uint32
    back = fmt.decompress_a(values, meta, k=k)
    assert back.shape == a.shape
    np.testing.assert_array_equal(back.view(np.uint16), a.view(np.uint16))
    full = fmt.decompress_a(values, meta)
    assert full.shape[-1] == fmt.padded_k(k) and not full[..., k:].any()


@pytest.mark.parametrize("dtype,ptx", [(np.float16, "f16"), (ml_dtypes.bfloat16, "bf16")])
def test_layout_is_the_metadata_table(dtype, ptx):
    """Every stored word is `metadata_words` of its 16 x 32 tile for its lane (selector 0)."""
    m, k = 40, 300
    a = sparse(np.random.default_rng(2), (m, k), dtype)
    values, meta = fmt.compress_a(a)
    tiles, width = fmt.meta_shape(m, k)
    padded = np.zeros((tiles * 16, fmt.padded_k(k)), dtype)
    padded[:m, :k] = a
    vals, idx = sf.compress(padded)
    np.testing.assert_array_equal(vals[:m].view(np.uint16), values.view(np.uint16))
    seen = set()
    for t in range(tiles):
        for s in range(fmt.padded_k(k) // 32):
            words = sf.metadata_words(idx[16 * t:16 * t + 16, 16 * s:16 * s + 16], "m16n8k32", ptx, 0)
            for lane in range(32):
                if lane & 3 < 2:
                    at = fmt.meta_word(s, lane)
                    assert meta[t, at] == words[lane]
                    seen.add(at)
    # a lane's four steps are one aligned 16-byte vector; the rest of a group is filler
    assert fmt.meta_word(4, 5) - fmt.meta_word(7, 5) == -3 and fmt.meta_word(4, 5) % 4 == 0
    rest = [w for w in range(width) if w not in seen]
    assert rest and (meta[:, rest] == fmt.FILLER).all()


def test_not_sparse_names_the_group():
    a = np.zeros((2, 3, 8, 16), np.float16)
    a[1, 2, 5, 9:12] = 1
    with pytest.raises(ValueError, match=r"batch \(1, 2\), A is not 2:4 sparse: row 5, group 2 \(columns 8..11\)"):
        fmt.compress_a(a)


def test_prune_keeps_the_largest():
    a = np.array([[1, -4, 3, 2, 0, 0, 5, 0]], np.float16)
    values, meta = fmt.compress_a(a, prune=True)
    np.testing.assert_array_equal(fmt.decompress_a(values, meta, k=8), [[0, -4, 3, 0, 0, 0, 5, 0]])


def test_refusals():
    with pytest.raises(ValueError, match="16-bit floats"):
        fmt.compress_a(np.zeros((4, 8), np.float32))
    with pytest.raises(ValueError, match="2:4"):
        fmt.compress_a(np.zeros((4, 8), np.float16), pattern="1:2")
    values, meta = fmt.compress_a(np.zeros((4, 8), np.float16))
    with pytest.raises(ValueError, match="meta for a 4 x 32 A"):
        fmt.decompress_a(values, meta[:, :32])
    bad = meta.copy()
    bad[0, 0] = 0  # indices (0, 0): repeated
    with pytest.raises(ValueError, match="repeated"):
        fmt.decompress_a(values, bad)
    bad = meta.copy()
    bad[0, 1] = 0
    with pytest.raises(ValueError, match="filler"):
        fmt.decompress_a(values, bad)
    with pytest.raises(ValueError, match="K = 40 pads to 64"):
        fmt.decompress_a(values, meta, k=40)
