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


@pytest.mark.parametrize("guard", [None, "!%p1"])
def test_the_instruction_constructor_builds_what_the_generic_one_does(guard):
    """`InstOp.__init__` sets only what `Operation.__init__` would set for an op with no
    operands, results, successors or regions; the two ops agree in every field, behave alike
    in a block, and print alike."""
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Operation

    from tilemma.dialects import ptx

    fast = ptx.InstOp("add.s32", ["%r1", "%r2", "1"], guard)
    generic = ptx.InstOp.__new__(ptx.InstOp)
    Operation.__init__(generic, properties=dict(fast.properties))
    fields = ("_operands", "_operand_uses", "results", "_successors", "_successor_uses", "properties",
              "attributes", "location", "regions", "parent", "_next_op", "_prev_op")
    assert {f: getattr(fast, f) for f in fields} == {f: getattr(generic, f) for f in fields}
    block = Block([fast, generic])
    assert fast.next_op is generic and generic.prev_op is fast and fast.parent is block
    module = ModuleOp([])
    module.body.block.add_op(fast.clone())
    module.verify()
    assert str(fast) == str(generic) and fast.text() == generic.text()
