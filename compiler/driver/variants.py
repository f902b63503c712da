"""Which variant of a kernel with `?` sizes serves given buffers (`Kernel.bind`): the size class
their strides and sizes fall in, as the compile options of a variant specialised on it. Apart from
the API so that the dispatch policy is in one place, decided without compiling (the caller
compiles what it names)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tilemma.compiler.driver.pipeline import CompiledKernel
    from tilemma.compiler.runtime.abi import KernelABI

#: What a kernel with `?` sizes may be specialised on (`stride_multiple`): its `?` strides and
#: contiguous `?` sizes a multiple of so many elements.
STRIDE_MULTIPLES = (1, 2, 4, 8, 16, 32, 64)
#: ... and on each `?` size M, N, K being a multiple of a power of two up to this (the largest
#: that divides it): no ragged edge for the tiles that divide it.
SIZE_MULTIPLE_CAP = 128


class Variant(NamedTuple):
    """A specialised variant, as the compile options that make it."""

    stride_multiple: int
    size_multiple: str  # 'MxNxK'
    plan_sizes: str  # 'MxNxK'


def variant_for(abi: KernelABI, shapes, strides) -> Variant | None:
    """The variant for buffers of these shapes and strides: the widest multiple of
    `STRIDE_MULTIPLES` up to 16 bytes of the operands' narrowest element that they all keep, and
    the size multiples and plan sizes of their `?` sizes. None where the kernel with `abi` serves
    them as it is (what it assumes already, or more; or they do not bind, which `abi.bind` says
    why of)."""
    have, have_size = abi.stride_multiple, abi.size_multiple
    widest = 16 * 8 // max(8, min((p.bits for p in abi.params if {"a", "b"} & set(p.roles)), default=8))
    try:
        _, values = abi.bind(shapes, strides)
    except ValueError:
        return None
    by_symbol = dict(zip(abi.symbols, values))
    sizes = tuple(_power_of_two_dividing(by_symbol.get(s, 0)) for s in "MNK")
    if any(s % h for s, h in zip(sizes, have_size)):  # what this kernel assumes is more
        return None
    for m in (x for x in STRIDE_MULTIPLES[::-1] if have <= x <= widest):
        try:
            dataclasses.replace(abi, stride_multiple=m, size_multiple=sizes).bind(shapes, strides)
        except ValueError:
            continue
        return Variant(m, "x".join(map(str, sizes)), _bucket(by_symbol))
    return None


def _power_of_two_dividing(v: int) -> int:
    """The largest power of two up to SIZE_MULTIPLE_CAP that divides v (the cap for 0)."""
    return min(SIZE_MULTIPLE_CAP, v & -v) if v else SIZE_MULTIPLE_CAP


def _bucket(values: dict[str, int]) -> str:
    """The sizes a variant is configured for (`plan_sizes`): each of M, N, K rounded up to a power
    of two between 16 and 4096, so that one variant serves a bucket of sizes (4096 and more: the
    large problem's configuration)."""
    def up(v: int) -> int:
        return min(4096, max(16, 1 << max(0, v - 1).bit_length()))

    return "x".join(str(up(values.get(s, 4096))) for s in ("M", "N", "K"))


class Bound:
    """A kernel with `?` sizes bound to one launch's: the variant's PTX with a static ABI."""

    def __init__(self, compiled: CompiledKernel, abi: KernelABI):
        self._compiled, self.abi = compiled, abi
        self.name, self.ptx = compiled.name, compiled.ptx

    @property
    def gemm(self):
        return self._compiled.gemm
