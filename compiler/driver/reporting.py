"""Running a command so that a failure is one diagnostic, never a traceback (`run_reporting`).

Kept apart from `diagnostics` (which formats the messages and needs xDSL) so that a command that
succeeds, such as `tilemma compile` served from the compile cache, never imports xDSL: the
formatting is imported only when there is an error to report.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def run_reporting(tool: str, action: Callable[[], int | None]) -> int:
    """Run a command's body; any failure becomes one diagnostic on stderr and exit status 1.

    A closed stdout (`tilemma isa list | head -1`) ends the command quietly with the status a
    process killed by SIGPIPE has (141), as C tools do."""
    try:
        status = action() or 0
        sys.stdout.flush()
        return status
    except (SystemExit, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        _silence_stdout()
        return 128 + 13
    except BaseException as e:  # ArgSpecParseError derives from BaseException
        from tilemma.compiler.driver.diagnostics import report_error

        report_error(tool, e)
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
