"""One way to report a failure to a user: a located message on stderr, never a traceback.

The shape is the one mlir-opt and clang print, which editors and CI problem matchers parse:

    g.mlir:6:5: error: tile.mma: no mma.sync variant for ...
        %td = tile.mma %ta, %tb, %tc : ...
        ^^^^^^^^^^^^^^

and `tilemma: error: message` where there is no source position. Parse errors come with a span
from xDSL's lexer; verifier and lowering errors get one from `LocatedParser`'s map of where each
operation was written. Anything unexpected is an internal error (TILEMMA_TRACEBACK=1 shows the
Python traceback when debugging tilemma itself).
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from dataclasses import dataclass, replace

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FloatAttr, Float80Type, Float128Type
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    MultipleSpansParseError,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Input, Span

from tilemma.compiler.driver.reporting import run_reporting  # noqa: F401 - its home before the split
from tilemma.compiler.driver.files import MAX_INPUT_BYTES, too_large
from tilemma.compiler.runtime.ptxas import PtxasError

#: Exceptions that mean "the input or the options are wrong", as opposed to a tilemma bug.
#: A refused PTX module is the input's (or the chosen --ptx's) fault: ptxas' messages quote it.
USER_ERRORS = (ParseError, DiagnosticException, ArgSpecParseError, ValueError, OSError, PtxasError)


def located(span: Span, message: str, severity: str = "error") -> str:
    """`file:line:col: severity: message`, then the source line and a caret under the span.

    The message's first line stays on the header line; further lines (rare) follow the caret.
    """
    first, _, rest = message.strip().partition("\n")
    content = span.input.content
    if isinstance(content, bytes):
        content = content.decode("utf-8", "replace")
    line_start = span.input.get_start_of_line(span.start)
    line = content[line_start:span.input.get_end_of_line(span.start)].removesuffix("\r")
    column = min(span.start - line_start, len(line))
    width = max(1, min(span.end, line_start + len(line)) - span.start)
    out = [f"{span.get_location()}: {severity}: {first}", line, " " * column + "^" * width]
    if rest:
        out.append(rest)
    return "\n".join(out) + "\n"


@dataclass
class LocatedParseError(ParseError):
    """A parse error printed in the `file:line:col: error:` shape (see `located`); `notes`
    carries the other positions of xDSL's MultipleSpansParseError."""

    notes: str = ""

    def __str__(self) -> str:
        return located(self.span, self.msg) + self.notes

    @classmethod
    def of(cls, e: ParseError) -> LocatedParseError:
        if isinstance(e, LocatedParseError):
            return e
        notes = ""
        if isinstance(e, MultipleSpansParseError):
            notes = (e.ref_text.rstrip("\n") + "\n") if e.ref_text else ""
            notes += "".join(located(span, msg or "here", "note") for span, msg in e.refs)
        return cls(e.span, e.msg, notes)


#: How deep brackets - ( [ { < : regions, attributes, types - may nest. xDSL's parser, verifier
#: and printer recurse several Python frames per level (Python allows about 1000), and a kernel
#: nests a dozen levels; deeper input is refused before it is parsed.
MAX_NESTING = 64
#: Dimensions one shape may have: tiles are rank 2 or 3. (xDSL's lexer takes time quadratic in a
#: shape's length: 150,000 dimensions took 34 s.)
MAX_RANK = 64

# What the scan reads: string literals (skipped whole; xDSL's escapes), a quote that starts none,
# comments (skipped whole), arrows and comparisons (not brackets), and the brackets themselves.
_TOKENS = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"|"|//[^\n]*|->|>=|<=|[\[\]{}()<>]')
_LONG_SHAPE = re.compile(r"(?<![\w$.%#@])(?:\d+|\?)(?:x(?:\d+|\?)){" + str(MAX_RANK) + ",}")


def check_input(text: str, name: str, line_offset: int = 0) -> None:
    """Refuse, before parsing, input past the limits the parser can take promptly: its size, its
    nesting depth, the rank of a shape (LocatedParseError where there is a place to point at)."""
    if len(text) > MAX_INPUT_BYTES:
        raise too_large(name)

    def refuse(start: int, end: int, message: str) -> None:
        raise LocatedParseError(Span(start, end, Input(text, name), line_offset), message)

    # Brackets are counted unless there are too few to nest that deep; strings are checked
    # wherever there is one: xDSL's lexer takes time exponential in the length of a string
    # literal that is not closed on its line (its regular expression backtracks).
    if sum(map(text.count, "([{<")) > MAX_NESTING or '"' in text:
        depth = 0
        for m in _TOKENS.finditer(text):
            token = m.group()
            if token == '"':
                refuse(m.start(), m.end(), "a string literal not closed on its line (or with an escape other "
                       "than \\n, \\t, \\\\, \\\" or two hex digits)")
            if len(token) > 1:  # a string, a comment, ->, >=, <=
                continue
            if token in "([{<":
                depth += 1
                if depth > MAX_NESTING:
                    refuse(m.start(), m.end(), f"nested more than {MAX_NESTING} levels deep (regions, attributes, "
                           "types: brackets ( [ { <); tilemma takes at most that")
            elif depth:
                depth -= 1
    m = _LONG_SHAPE.search(text)
    if m:
        rank = m.group().count("x") + 1
        refuse(m.start(), m.end(), f"a shape of {rank} dimensions; tilemma takes at most {MAX_RANK} "
               "(tiles are rank 2, or 3 with a batch)")


def report_error(tool: str, error: BaseException) -> None:
    if os.environ.get("TILEMMA_TRACEBACK"):
        traceback.print_exception(error)
    if isinstance(error, ParseError):
        sys.stderr.write(str(LocatedParseError.of(error)))
        return
    if isinstance(error, LocatedVerifyError) and error.span is not None:
        sys.stderr.write(str(error))
        return
    if isinstance(error, FileNotFoundError) and error.filename:
        message = f"cannot open '{error.filename}': {error.strerror}"
    elif isinstance(error, USER_ERRORS):
        message = str(error).strip() or type(error).__name__
    elif isinstance(error, RecursionError):  # a limit the input checks missed: still the input's
        message = "the input nests too deeply for tilemma (Python's recursion limit)"
    elif isinstance(error, MemoryError):
        message = f"out of memory{': ' + str(error) if str(error) else ''}; the input or the problem is too large"
    else:
        message = f"internal error: {type(error).__name__}: {error}"
    print(f"{tool}: error: {message}", file=sys.stderr)


class LocatedParser(Parser):
    """An xDSL parser that remembers where each operation was written.

    xDSL's verifiers know the failing operation but not its source position; with this map a
    verifier error points at `file:line:col` like a parse error does.
    """

    def __init__(self, *args, line_offset: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.line_offset = line_offset
        self.locations: dict[Operation, Span] = {}

    def parse_module(self, *args, **kwargs):
        try:
            return super().parse_module(*args, **kwargs)
        except ParseError as e:
            raise LocatedParseError.of(e) from None

    def parse_operation(self) -> Operation:
        token = replace(self._current_token.span, line_offset=self.line_offset)
        try:
            op = super().parse_operation()
        except (VerifyException, ValueError) as e:  # operand types, attribute values (an integer out of
            raise LocatedParseError(token, str(e).strip()) from None  # range) are checked while parsing
        except NotImplementedError:  # xDSL packs dense f80/f128 data with a format it lacks
            read = token.input.content[token.start:self._current_token.span.end]
            wide = next((w for w in ("f80", "f128") if w in read), None)
            raise LocatedParseError(token, f"an {wide} value: tilemma (and xDSL, which reads it) has no {wide} "
                                    "arithmetic; use f64 or a narrower float" if wide else
                                    "xDSL, which reads tilemma's input, does not implement what this operation "
                                    "holds") from None
        self.locations[op] = token
        for attribute in (*op.attributes.values(), *op.properties.values()):
            wide = _unsupported_float(attribute)
            if wide is not None:
                raise LocatedParseError(token, f"{op.name}: an {wide} value: tilemma (and xDSL, which prints "
                                        f"it) has no {wide} arithmetic; use f64 or a narrower float")
        return op


def _unsupported_float(attribute: Attribute) -> str | None:
    """'f80' or 'f128' where `attribute` holds a float value of that type (xDSL cannot print one)."""
    if isinstance(attribute, FloatAttr):
        kind = attribute.type
        return kind.name if isinstance(kind, Float80Type | Float128Type) else None
    if isinstance(attribute, ArrayAttr):
        items = attribute.data
    elif isinstance(attribute, DictionaryAttr):
        items = tuple(attribute.data.values())
    else:
        return None
    return next((w for w in map(_unsupported_float, items) if w is not None), None)


class LocatedVerifyError(VerifyException):
    """A verifier (or lowering) error at an operation's source position (see `located`)."""

    def __init__(self, span: Span | None, message: str):
        self.span = span
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        if self.span is None:
            return self.message
        return located(self.span, self.message)


#: Dialects whose verifiers are tilemma's own: an unexpected exception there is a tilemma bug.
_OWN_DIALECTS = ("tile", "warp", "ptx")


def verify_one(op: Operation) -> None:
    """`op.verify(verify_nested_ops=False)`, where what is wrong with an upstream op's operands or
    attributes is a VerifyException even where xDSL's verifier itself fails on it (an IndexError
    for a linalg op without operands)."""
    # xDSL's linalg verifiers read operand 0. The dialect is read from sys.modules: the context
    # imports it when a module holds a linalg op, and importing it here would cost every tool
    # run on tile or warp IR a tenth of a second.
    linalg = sys.modules.get("xdsl.dialects.linalg.abstract_ops")
    if linalg is not None and isinstance(op, linalg.LinalgStructuredOperation) and not op.outputs:
        raise VerifyException(f"{op.name}: no outs(...) operand: a linalg op writes its result into an output buffer")
    try:
        op.verify(verify_nested_ops=False)
    except (VerifyException, ValueError):
        raise
    except Exception as e:
        if op.dialect_name() in _OWN_DIALECTS:
            raise
        raise VerifyException(f"{op.name}: xDSL's verifier fails on this operation ({type(e).__name__}: {e}); "
                              "are operands or attributes missing?") from None


def _where(op: Operation, message: str, locations: dict[Operation, Span]) -> Span | None:
    """Where a verifier error at `op` is: the op's place, or for a symbol table's "Redefinition
    of symbol" (an error of the table's op, often the implicit module) the second definition's."""
    found = re.match(r'Redefinition of symbol "(.*)"', message.strip())
    if found:
        named = [o for region in op.regions for block in region.blocks for o in block.ops
                 if getattr(o.properties.get("sym_name", o.attributes.get("sym_name")), "data", None) == found.group(1)]
        if len(named) > 1 and named[1] in locations:
            return locations[named[1]]
    return locations.get(op)


def verify_located(module: Operation, locations: dict[Operation, Span]) -> None:
    """Verify `module` innermost-first; raise LocatedVerifyError at the first bad operation."""
    for op in module.walk(reverse=False):
        try:
            verify_one(op)
        except VerifyException as e:
            raise LocatedVerifyError(_where(op, str(e), locations), str(e).strip()) from None
        except ValueError as e:  # xDSL reports some structural errors this way
            raise LocatedVerifyError(locations.get(op), str(e).strip()) from None
