"""Elementwise linalg bodies as `tile.map` bodies, and the chain of maps fused into one.

An elementwise `linalg.generic` (every iterator parallel) computes each output element from the
input elements at the same place: its body moves unchanged into a `tile.map` over the input
tiles (`linalg.yield` becomes `tile.yield`). What the body captures from the kernel must be a
constant (`--canonicalize` hoists them out of the bodies), which is copied in. `math.fpowi` /
`math.ipowi` by a constant exponent (torch-mlir's tanh-GELU writes `x^3` so) become the
multiplications MLIR's algebraic simplification makes of them, so no i64 exponent is left in
the body. Then every map that feeds another map is fused into it (`fuse_maps`): one `tile.map`
per chain, yielding what the kernel stores, as the epilogue's lowering wants it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.dialects.linalg import ops as linalg
from xdsl.ir import Block, Operation, Region, SSAValue

from tilemma.dialects import tile
from tilemma.dialects.tile_epilogue import MAP_ELEMENTS, scalar_type, tile_element
from tilemma.passes.errors import LoweringError

_POW_LIMIT = 8  # MLIR's strength reduction expands |exponent| <= 8 (math algebraic simplification)


def _constant(value: SSAValue) -> arith.ConstantOp | None:
    owner = value.owner
    return owner if isinstance(owner, arith.ConstantOp) else None


class _BodyBuilder:
    """Copies the ops of a linalg body into a `tile.map` block."""

    def __init__(self, at: Operation, block: Block, mapping: dict[SSAValue, SSAValue],
                 constants: dict[SSAValue, SSAValue]):
        self.at, self.block, self.mapping, self.constants = at, block, mapping, constants

    def value(self, v: SSAValue, user: Operation) -> SSAValue:
        if v in self.mapping:
            return self.mapping[v]
        const = _constant(self.constants.get(v, v))
        if const is None:
            producer = getattr(v.owner, "name", "a block argument")
            raise LoweringError(
                self.at,
                f"the body's {user.name} uses a value defined outside the body (by {producer}): a "
                "body may capture constants only; pass other values as inputs of the op")
        new = const.clone()
        self.block.add_op(new)
        self.mapping[v] = new.result
        return new.result

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def copy(self, op: Operation) -> None:
        if isinstance(op, linalg.IndexOp):
            raise LoweringError(
                self.at,
                "the body reads linalg.index (where it is): a tile.map body sees only element values; "
                "pass what depends on the position as an input")
        if isinstance(op, math.FPowIOp | math.IPowIOp):
            self.mapping[op.results[0]] = self.power(op)
            return
        dialect = op.name.split(".")[0]
        if dialect not in ("arith", "math") or op.regions:
            raise LoweringError(
                self.at, f"the body holds {op.name}: a tile.map body holds arith and math ops on scalars")
        if isinstance(op, arith.ConstantOp):
            return  # copied where it is used (an exponent is not)
        operands = {v: self.value(v, op) for v in op.operands}
        new = op.clone(value_mapper=dict(operands))
        self.block.add_op(new)
        for old, result in zip(op.results, new.results):
            self.mapping[old] = result

    def power(self, op: math.FPowIOp | math.IPowIOp) -> SSAValue:
        """x ** n for a constant n as MLIR's strength reduction writes it: x * x * ... (left to
        right), 1 / that for n < 0, 1 for n = 0."""
        const = _constant(self.constants.get(op.rhs, op.rhs))
        if const is None or not isinstance(const.value, IntegerAttr):
            raise LoweringError(self.at, f"{op.name} needs a constant exponent here (it becomes multiplications)")
        n = const.value.value.data
        if abs(n) > _POW_LIMIT:
            raise LoweringError(self.at, f"{op.name} by {n}: exponents up to {_POW_LIMIT} in magnitude are expanded; "
                                         "write larger powers with math.powf or as products")
        base = self.value(op.lhs, op)
        t = base.type
        is_float = isinstance(op, math.FPowIOp)
        one = self.add(arith.ConstantOp(FloatAttr(1.0, t) if is_float else IntegerAttr(1, t)))  # type: ignore[arg-type]
        if n == 0:
            return one
        result = base
        for _ in range(abs(n) - 1):
            result = self.add(arith.MulfOp(result, base) if is_float else arith.MuliOp(result, base))
        if n < 0:
            result = self.add(arith.DivfOp(one, result) if is_float else arith.DivSIOp(one, result))
        return result


# f8 results: arith.truncf rounds to nearest even and overflows (to NaN in E4M3FN, which has no
# infinity; to infinity in E5M2); PTX cvt.rn.satfinite (tile.cast) saturates. Where the body first clamps the value to the type's
# finite range (torch's fp8 recipes clamp so), the two agree on every input, NaN included.
F8_LIMITS = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
_MIN = (arith.MinimumfOp, arith.MinnumfOp)
_MAX = (arith.MaximumfOp, arith.MaxnumfOp)


def _clamped(v: SSAValue, limit: float, constants: dict[SSAValue, SSAValue]) -> bool:
    """Whether v is min(max(x, -limit), limit) or max(min(x, limit), -limit) (`constants`: the
    body arguments that are constant operands)."""
    def bound(op: Operation, kinds, value: float) -> SSAValue | None:
        if not isinstance(op, kinds):
            return None
        for mine, other in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
            c = _constant(constants.get(mine, mine))
            if c is not None and isinstance(c.value, FloatAttr) and c.value.value.data == value:
                return other
        return None

    outer = v.owner
    for first, second in ((_MIN, _MAX), (_MAX, _MIN)):
        hi, lo = (limit, -limit) if first is _MIN else (-limit, limit)
        inner = bound(outer, first, hi) if isinstance(outer, Operation) else None
        if inner is not None and isinstance(inner.owner, Operation) and bound(inner.owner, second, lo) is not None:
            return True
    return False


def build_map(at: Operation, body: Block, inputs: Sequence[tuple[SSAValue, SSAValue]],
              outputs: Sequence[tuple[int, tile.TileType]],
              constants: dict[SSAValue, SSAValue] | None = None) -> tuple[tile.MapOp, dict[int, tile.TileType]]:
    """The `tile.map` of linalg body `body`: `inputs` pairs each body argument that is read with
    its tile, `constants` each one that is a constant scalar operand with it; `outputs` pairs each
    `linalg.yield` operand position with its result tile type. Also, by output position, the f8
    type a result is to be converted to by `tile.cast` (the map yields it clamped, in f32)."""
    block = Block(arg_types=[scalar_type(t.type.element) for _, t in inputs])  # type: ignore[union-attr]
    mapping: dict[SSAValue, SSAValue] = {}
    for (arg, value), new in zip(inputs, block.args):
        element = value.type.element  # type: ignore[union-attr]
        if element not in MAP_ELEMENTS or new.type != arg.type:
            raise LoweringError(
                at,
                f"the body reads {arg.type} elements (from a {value.type}): tile.map bodies work on "
                f"{', '.join(map(str, map(scalar_type, MAP_ELEMENTS)))} (si32 tiles as i32)")
        mapping[arg] = new
        new.name_hint = arg.name_hint
    builder = _BodyBuilder(at, block, mapping, constants or {})
    term = body.last_op
    assert isinstance(term, linalg.YieldOp)
    for op in body.ops:
        if op is not term:
            builder.copy(op)
    yielded, types, casts = [], [], {}
    for i, t in outputs:
        old = term.operands[i]
        v = builder.value(old, term)
        if tile_element(v.type) is None:
            name = str(v.type)
            source = old.owner if isinstance(old.owner, arith.TruncFOp) else None
            if (name in F8_LIMITS and source is not None and str(source.input.type) == "f32"
                    and _clamped(source.input, F8_LIMITS[name], constants or {})):
                v = mapping[source.input]
                casts[i] = t
                t = tile.TileType(t.get_shape(), v.type)
            elif name in F8_LIMITS:
                raise LoweringError(
                    at,
                    f"the body yields {name} by arith.truncf: clamp the f32 value to the type's finite range "
                    f"first (arith.maximumf with -{F8_LIMITS[name]:g}, arith.minimumf with {F8_LIMITS[name]:g}, as "
                    "torch's fp8 recipes do): arith.truncf overflows where the hardware's conversion "
                    "(cvt.rn.satfinite, tile.cast) saturates, and they agree on clamped values")
            else:
                raise LoweringError(
                    at,
                    f"the body yields {v.type}: tile.map results are "
                    f"{', '.join(map(str, map(scalar_type, MAP_ELEMENTS)))} (and f8E4M3FN / f8E5M2 from a "
                    "clamped arith.truncf of f32)")
        yielded.append(v)
        types.append(t)
    block.add_op(tile.YieldOp(*yielded))
    _drop_dead_body(block)
    return tile.MapOp([v for _, v in inputs], types, Region(block)), casts


def fuse_maps(ops: list[Operation]) -> list[Operation]:
    """Fuse each `tile.map` into the first map that reads one of its results, until none does:
    the fused map takes both maps' other inputs, runs the producer's body then the consumer's,
    and yields the consumer's results plus whichever of the producer's are used elsewhere."""
    changed = True
    while changed:
        changed = False
        position = {op: i for i, op in enumerate(ops)}
        for producer in [op for op in ops if isinstance(op, tile.MapOp)]:
            users = {u.operation for r in producer.outputs for u in r.uses}
            consumers = sorted((u for u in users if isinstance(u, tile.MapOp)), key=position.__getitem__)
            if not consumers:
                continue
            consumer = consumers[0]
            if any(position.get(u, len(ops)) < position[consumer] for u in users):
                continue  # something between them reads the producer: it stays where it is
            fused = _fuse(producer, consumer)
            ops[ops.index(consumer)] = fused
            ops.remove(producer)
            consumer.drop_all_references()
            producer.drop_all_references()
            changed = True
            break
    return ops


def _fuse(producer: tile.MapOp, consumer: tile.MapOp) -> tile.MapOp:
    made = set(producer.outputs)
    inputs = list(producer.inputs)
    for v in consumer.inputs:
        if v not in made and v not in inputs:
            inputs.append(v)
    block = Block(arg_types=[scalar_type(v.type.element) for v in inputs])  # type: ignore[union-attr]
    arg_of = dict(zip(inputs, block.args))
    for owner in (producer, consumer):
        for a, v in zip(owner.body.block.args, owner.inputs):
            if v in arg_of and arg_of[v].name_hint is None:
                arg_of[v].name_hint = a.name_hint
    # The producer's body.
    mapping: dict[SSAValue, SSAValue] = {a: arg_of[v] for a, v in zip(producer.body.block.args, producer.inputs)}
    p_yield = producer.body.block.last_op
    for op in producer.body.block.ops:
        if op is not p_yield:
            block.add_op(op.clone(value_mapper=mapping))
    p_values = [mapping.get(v, v) for v in p_yield.operands]  # type: ignore[union-attr]
    by_result = dict(zip(producer.outputs, p_values))
    # The consumer's, its reads of the producer's results being the producer's yielded values.
    mapping = {a: (by_result[v] if v in made else arg_of[v]) for a, v in zip(consumer.body.block.args, consumer.inputs)}
    c_yield = consumer.body.block.last_op
    for op in consumer.body.block.ops:
        if op is not c_yield:
            block.add_op(op.clone(value_mapper=mapping))
    c_values = [mapping.get(v, v) for v in c_yield.operands]  # type: ignore[union-attr]
    kept = [r for r in producer.outputs if any(u.operation is not consumer for u in r.uses)]
    block.add_op(tile.YieldOp(*c_values, *(by_result[r] for r in kept)))
    fused = tile.MapOp(inputs, [r.type for r in consumer.outputs] + [r.type for r in kept], Region(block))  # type: ignore[misc]
    for old, new in zip([*consumer.outputs, *kept], fused.outputs):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    return fused


def drop_dead(ops: list[Operation]) -> list[Operation]:
    """Remove side-effect-free tile ops nobody reads, map results nobody reads, and body ops a
    map's yields do not need."""
    changed = True
    while changed:
        changed = False
        for op in reversed(ops):
            if isinstance(op, tile.MapOp) and any(not r.uses for r in op.outputs) and any(r.uses for r in op.outputs):
                ops[ops.index(op)] = _drop_results(op)
                changed = True
                break
            if not isinstance(op, tile.StoreOp) and op.results and not any(r.uses for r in op.results):
                ops.remove(op)
                op.drop_all_references()
                changed = True
                break
    for op in ops:
        if isinstance(op, tile.MapOp):
            _drop_dead_body(op.body.block)
    return ops


def _drop_results(op: tile.MapOp) -> tile.MapOp:
    used = [i for i, r in enumerate(op.outputs) if r.uses]
    block = op.body.block
    term = block.last_op
    assert isinstance(term, tile.YieldOp)
    values = [term.operands[i] for i in used]
    term.detach()
    term.erase()
    block.add_op(tile.YieldOp(*values))
    new = tile.MapOp(list(op.inputs), [op.outputs[i].type for i in used], op.body.clone())  # type: ignore[misc]
    for i, r in zip(used, new.outputs):
        r.name_hint = op.outputs[i].name_hint
        op.outputs[i].replace_all_uses_with(r)
    op.drop_all_references()
    return new


def _drop_dead_body(block: Block) -> None:
    for op in reversed(list(block.ops)):
        if op is not block.last_op and not any(r.uses for r in op.results):
            op.detach()
            op.erase()


def body_is_copy(body: Block) -> list[int] | None:
    """For a body that only yields some of its arguments (a copy, a broadcast), which argument
    each yielded value is; else None."""
    term = body.last_op
    if len(list(body.ops)) != 1 or not isinstance(term, linalg.YieldOp):
        return None
    picks = []
    for v in term.operands:
        if v not in body.args:
            return None
        picks.append(body.args.index(v))
    return picks

