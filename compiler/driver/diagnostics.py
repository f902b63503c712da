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
import sys
import traceback
from dataclasses import dataclass, replace

from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    MultipleSpansParseError,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Span

from tilemma.compiler.driver.reporting import run_reporting  # noqa: F401 - its home before the split
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
        except VerifyException as e:  # operand type constraints are checked while parsing
            raise LocatedParseError(token, str(e).strip()) from None
        self.locations[op] = token
        return op


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


def verify_located(module: Operation, locations: dict[Operation, Span]) -> None:
    """Verify `module` innermost-first; raise LocatedVerifyError at the first bad operation."""
    for op in module.walk(reverse=False):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            raise LocatedVerifyError(locations.get(op), str(e).strip()) from None
        except ValueError as e:  # xDSL reports some structural errors this way
            raise LocatedVerifyError(locations.get(op), str(e).strip()) from None
