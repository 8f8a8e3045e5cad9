"""Source text of a Python function and locations of its AST nodes."""

from __future__ import annotations

import ast
import inspect
import textwrap

from ..errors import CompileError, SourceLoc, compile_error


class SourceInfo:
    """The parsed source of one function, mapping AST positions back to the real file."""

    def __init__(self, pyfunc):
        self.name = pyfunc.__name__
        try:
            self.file = inspect.getsourcefile(pyfunc) or "<unknown>"
            lines, first = inspect.getsourcelines(pyfunc)
        except (OSError, TypeError) as exc:
            raise CompileError(f"in kernel '{self.name}': cannot read its source ({exc}); "
                               "kernels must be defined in a file, not typed at an interactive prompt") from None
        raw = "".join(lines)
        dedented = textwrap.dedent(raw)
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if len(raw) != len(dedented) else 0
        self.first_line = first
        self.lines = lines
        tree = ast.parse(dedented)
        self.tree: ast.FunctionDef = tree.body[0]

    def loc(self, node: ast.AST | None) -> SourceLoc | None:
        if node is None or not hasattr(node, "lineno"):
            return None
        k = node.lineno - 1
        text = self.lines[k] if 0 <= k < len(self.lines) else ""
        return SourceLoc(self.file, self.first_line + k, node.col_offset + self.indent, text, self.name)

    def error(self, node: ast.AST | None, message: str) -> CompileError:
        return compile_error(self.name, self.loc(node), message)
