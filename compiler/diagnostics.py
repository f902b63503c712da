"""One way to report a failure to a user: a located message on stderr, never a traceback.

Parse errors already carry `file:line:col` and a caret from xDSL's lexer; verifier errors carry
the offending operation printed in context. Anything unexpected is reported as an internal error
(set TILEMMA_TRACEBACK=1 to see the Python traceback when debugging tilemma itself).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace

from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Span

#: Exceptions that mean "the input or the options are wrong", as opposed to a tilemma bug.
USER_ERRORS = (ParseError, DiagnosticException, ArgSpecParseError, ValueError, OSError)


def run_reporting(tool: str, action: Callable[[], int | None]) -> int:
    """Run a command's body; any failure becomes one diagnostic on stderr and exit status 1."""
    try:
        return action() or 0
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:  # ArgSpecParseError derives from BaseException
        report_error(tool, e)
        return 1


def report_error(tool: str, error: BaseException) -> None:
    if os.environ.get("TILEMMA_TRACEBACK"):
        traceback.print_exception(error)
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

    def parse_operation(self) -> Operation:
        token = replace(self._current_token.span, line_offset=self.line_offset)
        try:
            op = super().parse_operation()
        except VerifyException as e:  # operand type constraints are checked while parsing
            raise ParseError(token, str(e).strip()) from None
        self.locations[op] = token
        return op


class LocatedVerifyError(VerifyException):
    """A verifier error printed with its source line and a caret, like a ParseError."""

    def __init__(self, span: Span | None, message: str):
        self.span = span
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        if self.span is None:
            return self.message
        return self.span.print_with_context(self.message)


def verify_located(module: Operation, locations: dict[Operation, Span]) -> None:
    """Verify `module` innermost-first; raise LocatedVerifyError at the first bad operation."""
    for op in module.walk(reverse=False):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            raise LocatedVerifyError(locations.get(op), str(e).strip()) from None
        except ValueError as e:  # xDSL reports some structural errors this way
            raise LocatedVerifyError(locations.get(op), str(e).strip()) from None
