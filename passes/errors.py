"""The error a pass raises when the input cannot be lowered: it names the operation at fault.

`tilemma-opt` and `tilemma compile` turn it into a `file:line:col` diagnostic (they remember
where each operation was parsed); as a library it is a DiagnosticException like xDSL's own.
"""

from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException


class LoweringError(DiagnosticException):
    def __init__(self, op: Operation, message: str):
        self.op = op
        self.message = f"{op.name}: {message}"
        super().__init__(self.message)
