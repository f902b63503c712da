"""`ptx.inst` keeps the checks of IRDL's generic verifier under its own faster one: what the
generic form of the op can spell wrongly is refused, with the message IRDL would give."""

import pytest
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.universe import make_context
from xdsl.parser import Parser

GOOD = '"ptx.inst"() <{opcode = "add.s32", args = ["%r1", "%r2", "1"]}> : () -> ()'


def _verify(text: str) -> None:
    module = Parser(make_context(), f"builtin.module {{\n{text}\n}}").parse_module()
    module.verify()


def test_a_well_formed_instruction_verifies():
    _verify(GOOD)
    _verify('"ptx.inst"() <{opcode = "bra.uni", args = ["L1"], guard = "!%p1"}> : () -> ()')


@pytest.mark.parametrize("text, message", [
    ('"ptx.inst"() <{opcode = 3 : i32, args = []}> : () -> ()', "opcode must be a string"),
    ('"ptx.inst"() <{opcode = "mov.b32", args = ["%r1", 2 : i32]}> : () -> ()', "args must be an array of strings"),
    ('"ptx.inst"() <{opcode = "mov.b32", args = "%r1"}> : () -> ()', "args must be an array of strings"),
    ('"ptx.inst"() <{opcode = "ret", args = [], guard = 1 : i1}> : () -> ()', "guard must be a string"),
    ('"ptx.inst"() <{args = []}> : () -> ()', "property 'opcode' expected"),
    ('"ptx.inst"() <{opcode = "ret"}> : () -> ()', "property 'args' expected"),
    ('"ptx.inst"() <{opcode = "ret", args = [], pred = "x"}> : () -> ()', "property 'pred' is not defined"),
    ('%x = "ptx.inst"() <{opcode = "ret", args = []}> : () -> i32', "no operands, results"),
    ('"ptx.inst"() <{opcode = "ret", args = []}> ({}) : () -> ()', "no operands, results"),
])
def test_a_malformed_instruction_is_refused(text, message):
    with pytest.raises(VerifyException, match=message):
        _verify(text)
