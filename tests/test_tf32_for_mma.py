"""rna rounding of f32 operands for the tensor cores as `fragment_io.tf32_for_mma` emits it: half
a tf32 ulp added to a finite word's bits, the low 13 bits left for the mma to drop (ptxas's
cvt.rna.tf32.f32 is that add and a mask). The identity on every kind of f32 word, the form at each
place that rounds, and, in the emulator, every word of D the same kernels give with cvt.rna
(tests/gpu/test_tf32_for_mma_gpu.py: the same on the GPU)."""

import dataclasses
import re

import numpy as np
import pytest

from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.verify.mma_arith import round_tf32

from tests.tf32_for_mma_cases import KERNELS, adds, d_words, operands, with_cvt
from tests.wgmma_cases import compiled


def _words() -> np.ndarray:
    """Every low-13-bit pattern that matters (0, ties, either side of them, all ones) under signs,
    exponents from subnormal to the largest, and mantissas with the top 10 bits all zeros or ones."""
    low = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF], dtype=np.uint32)
    high = np.array([0, 0x155, 0x3FF], dtype=np.uint32) << 13
    exps = np.array([0, 1, 100, 127, 200, 253, 254], dtype=np.uint32) << 23
    signs = np.array([0, 0x80000000], dtype=np.uint32)
    grid = signs[:, None, None, None] | exps[None, :, None, None] | high[None, None, :, None] | low[None, None, None, :]
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001, 0xFF801FFF],
                        dtype=np.uint32)
    return np.concatenate([grid.ravel(), specials])


def _added(bits: np.ndarray) -> np.ndarray:
    """The emitted form: `abs.f32`, `setp.lt.f32 p, |x|, inf` (false for NaN), `@p add.s32 x, x, 4096`."""
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        finite = np.abs(x) < np.float32(np.inf)
    return np.where(finite, bits + np.uint32(0x1000), bits).astype(np.uint32)


def test_the_add_is_rna_as_the_tensor_cores_read_it():
    """What the mma reads of the added word (its top 19 bits: `round_tf32` trunc, the emulator's
    model of the tensor cores, proven on the GPU) is, bit for bit, cvt.rna's tf32 of every word
    (`round_tf32` rna, as ptxas assembles it for sm_90): the largest finite ones round up to
    infinity, a NaN stays one, except that one whose payload lies in the low 13 bits alone is read,
    and converted, as an infinity."""
    bits = _words()
    read = round_tf32(_added(bits).view(np.float32), "trunc").view(np.uint32)
    want = round_tf32(bits.view(np.float32), "rna").view(np.uint32)
    assert np.array_equal(read, want)
    sass = np.where(np.isnan(bits.view(np.float32)), bits, bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    assert np.array_equal(want, sass)  # FSETP.GEU |x|, +INF; @!P IADD x, 0x1000; LOP3 x & 0xffffe000
    assert {0x7F800000, 0xFF800000} <= set(read[np.isfinite(bits.view(np.float32))].tolist())  # rounded up
    assert list(read[-2:]) == [0x7F800000, 0xFF800000]  # the NaNs with a low payload alone
    assert np.isnan(read[-5:-2].view(np.float32)).all()


@pytest.mark.parametrize("spec, sm, options", [k[1:] for k in KERNELS], ids=[k[0] for k in KERNELS])
def test_each_place_rounds_by_the_add(spec, sm, options):
    k = compiled(spec, sm, **options)
    assert adds(k.ptx) >= 16
    # what is left of cvt.rna: the guarded last chunk of a stage rounded where it lies (lanes held back)
    assert all(line.lstrip().startswith("@%p") for line in k.ptx.splitlines() if "cvt.rna" in line)


@pytest.mark.parametrize("spec, sm, options", [k[1:] for k in KERNELS], ids=[k[0] for k in KERNELS])
def test_the_add_gives_the_cvt_kernel_s_words(spec, sm, options):
    """Every word of D (emulated) the kernel gives with cvt.rna in place of each add, on operands
    that make every case of the add (ties, carries into the exponent, subnormals, values rounding up
    to infinity, NaNs of a low payload); on the same operands without the ones that overflow, within
    the reference's bound."""
    k = compiled(spec, sm, **options)
    inputs = operands(spec, 11, nan_payloads=True)
    got, want = (run_compiled(x, 11, "emulator", inputs=inputs) for x in (k, with_cvt(k)))
    d, w = d_words(got), d_words(want)
    assert np.array_equal(d, w)
    assert np.isinf(d.view(np.float32)).any() or np.isnan(d.view(np.float32)).any()  # the overflowing rows
    finite = operands(spec, 12)
    finite["a"][[3, spec.m - 2]] = 1.5
    assert run_compiled(k, 12, "emulator", inputs=finite).ok


def test_a_wrong_add_changes_the_words():
    """The comparison can fail: an add of a quarter ulp (2048) rounds ties and above-tie words the
    other way, and D differs."""
    _, spec, sm, options = KERNELS[0]
    k = compiled(spec, sm, **options)
    wrong = dataclasses.replace(k, ptx=re.sub(r"(add\.s32 (%r\d+), \2, )4096;", r"\g<1>2048;", k.ptx))
    assert adds(wrong.ptx) == 0
    inputs = operands(spec, 11)
    got, want = (run_compiled(x, 11, "emulator", inputs=inputs) for x in (wrong, k))
    assert not np.array_equal(d_words(got), d_words(want))
