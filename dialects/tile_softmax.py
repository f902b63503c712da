"""`tile.softmax`: the row-wise softmax of a tile, with whole-matrix semantics like the other
`tile` ops, so that attention reads as three ops:

    %s = tile.mma %q, %kt, %zero        // S = Q.K^T (B x L x S, f32)
    %p = tile.softmax %s {scale = 0.125 : f32, causal}
    %ph = tile.cast %p                  // to the second mma's A type
    %o = tile.mma %ph, %v, %zero2       // O = P.V

Element (b, i, j) of the result is exp(x_ij - m_i) / sum_j' exp(x_ij' - m_i) with x = scale * S
and m_i the row's max; with `causal`, elements with j > i are left out of the row (their result
is 0): PyTorch's `is_causal` (the upper-left aligned mask). How close the lowering comes to
this (an f32 exp2 approximation, P rounded to the next mma's type) is `tile-attention`'s to say.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import FloatAttr, UnitAttr, f32
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.tile_types import TileType


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """Row-wise softmax of `scale` times the input (f32, rank 2 or 3), `causal` masking the
    elements above the diagonal."""

    name = "tile.softmax"
    input = operand_def(TileType)
    scale = prop_def(FloatAttr)
    causal = opt_prop_def(UnitAttr)
    result = result_def(TileType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, scale: float, causal: bool = False):
        props = {"scale": FloatAttr(scale, f32)}
        if causal:
            props["causal"] = UnitAttr()
        super().__init__(operands=[input], result_types=[input.type], properties=props)

    def scale_value(self) -> float:
        return float(self.scale.value.data)

    def verify_(self) -> None:
        t = self.input.type
        assert isinstance(t, TileType)
        if t.element != "f32":
            raise VerifyException(f"tile.softmax: the input is an f32 tile (an mma's accumulator), not {t.element}")
        if self.result.type != t:
            raise VerifyException(f"tile.softmax: the result type is the input's ({t}), got {self.result.type}")
        s = self.scale_value()
        if not (math.isfinite(s) and s > 0):
            raise VerifyException(f"tile.softmax: scale must be a positive finite number, got {s}")
