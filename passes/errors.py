"""The error a pass raises when the input cannot be lowered: it names the operation at fault.

`tilemma-opt` and `tilemma compile` turn it into a `file:line:col` diagnostic (they remember
where each operation was parsed); as a library it is a DiagnosticException like xDSL's own.
"""

import weakref

from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException


class LoweringError(DiagnosticException):
    def __init__(self, op: Operation, message: str):
        self.op = op
        self.message = f"{op.name}: {message}"
        super().__init__(self.message)


# xDSL operations carry no source location (tilemma's parser keeps a map from each parsed op to
# its position). A pass that replaces an op records it here, so that an error at the new op
# still points at the source line of the one it came from (as MLIR ops inherit locations).
_ORIGIN: "weakref.WeakKeyDictionary[Operation, Operation]" = weakref.WeakKeyDictionary()


def replaced(old: Operation, new: Operation) -> None:
    """Note that `new` took the place of `old` (for diagnostics only)."""
    _ORIGIN[new] = _ORIGIN.get(old, old)


def origin(op: Operation) -> Operation:
    """The parsed op that `op` descends from (itself if it was parsed)."""
    return _ORIGIN.get(op, op)
