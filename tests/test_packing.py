"""Sub-byte packing (`runner.pack_memory` / `pack_bits`, np.packbits) against a bit-by-bit packer:
the same bytes for every sub-byte element type, on random codes, odd lengths and stray high bits."""

import numpy as np
import pytest

from tilemma.compiler.verify import reference
from tilemma.compiler.driver.runner import pack_bits, pack_memory


def pack_reference(codes, bits: int) -> bytes:
    """Code i's bit j at buffer bit i*bits + j, least significant bit of each byte first."""
    out = bytearray(-(-len(codes) * bits // 8))
    for i, code in enumerate(int(c) for c in codes):
        for j in range(bits):
            if code >> j & 1:
                out[(i * bits + j) // 8] |= 1 << ((i * bits + j) % 8)
    return bytes(out)


@pytest.mark.parametrize("type_name", ["si4", "ui4", "f4E2M1FN", "i1"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 1001, 4096])
def test_pack_memory_matches_bit_by_bit(type_name, n):
    rng = np.random.default_rng(n)
    values = reference.random_matrix(type_name, (n,), rng)
    bits = reference.element_type(type_name).bits
    got = pack_memory(values, type_name)
    assert got.dtype == np.uint8 and got.size == -(-n * bits // 8)
    assert got.tobytes() == pack_reference(reference.to_bits(values, type_name), bits)


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_pack_bits_ignores_high_bits(bits):
    codes = np.random.default_rng(bits).integers(0, 256, 999).astype(np.uint8)
    assert pack_bits(codes, bits).tobytes() == pack_reference(codes & ((1 << bits) - 1), bits)


def test_pack_memory_of_a_matrix_is_row_major():
    values = reference.random_matrix("si4", (5, 7), np.random.default_rng(0))
    assert pack_memory(values, "si4").tobytes() == pack_memory(values.reshape(-1), "si4").tobytes()
