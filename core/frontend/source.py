"""Source text of a Python function and locations of its AST nodes."""

from __future__ import annotations

import ast
import copy
import inspect
import io
import linecache
import textwrap

from ..errors import CompileError, SourceLoc, compile_error


_extents: dict[str, tuple[list[str], dict[int, tuple[int, int, str]]]] = {}


def _definitions(body: list):
    """The function definitions among statements `body`, at any depth (in classes, functions, blocks);
    statements only, not expressions: a kernel is made by a `def`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _definitions(inner)


def definition_lines(pyfunc, file: str) -> tuple[list[str], int]:
    """The lines of `pyfunc`'s definition, decorators included, and the number of the first: what
    inspect.getsourcelines gives, found with one `ast.parse` per source file (remembered while linecache
    holds the same text) instead of inspect's tokenizer, whose regular expressions alone take ~4 ms to
    compile in each process (a warm start's first kernel)."""
    code = getattr(pyfunc, "__code__", None)
    lines = linecache.getlines(file, getattr(pyfunc, "__globals__", None))
    held = _extents.get(file)
    if held is None or held[0] is not lines:
        extents: dict[int, tuple[int, int, str]] = {}
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        for node in _definitions(tree.body if tree is not None else []):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            extents[start] = (start, node.end_lineno, node.name)
        held = _extents[file] = (lines, extents)
    found = held[1].get(code.co_firstlineno) if code is not None else None
    if found is None or found[2] != pyfunc.__name__:      # not in the file as it is now: ask inspect
        return inspect.getsourcelines(pyfunc)
    start, end, _ = found
    return lines[start - 1:end], start


class SourceInfo:
    """The parsed source of one function, mapping AST positions back to the real file."""

    def __init__(self, pyfunc):
        stored = getattr(pyfunc, "__gk_source__", None)     # a stand-in for stored source text (from_text)
        if isinstance(stored, SourceInfo):
            self.__dict__.update(stored.__dict__)
            self.tree = copy.deepcopy(stored.tree)          # each lowering gets its own tree
            return
        self.name = pyfunc.__name__
        try:
            self.file = inspect.getsourcefile(pyfunc) or "<unknown>"
            lines, first = definition_lines(pyfunc, self.file)
        except (OSError, TypeError) as exc:
            raise CompileError(f"in kernel '{self.name}': cannot read its source ({exc}); "
                               "kernels must be defined in a file, not typed at an interactive prompt") from None
        raw = "".join(lines)
        dedented = textwrap.dedent(raw)
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if len(raw) != len(dedented) else 0
        self.first_line = first
        self.lines = lines
        try:
            tree = ast.parse(dedented)
        except (RecursionError, MemoryError):     # Python's own parser gives up on nesting this deep
            raise CompileError(f"{self.file}:{first}: in kernel '{self.name}': expression too deeply nested "
                               "for Python's parser; split it using locals") from None
        self.tree: ast.FunctionDef = tree.body[0]

    @classmethod
    def from_text(cls, text: str, file: str, first_line: int, name: str) -> "SourceInfo":
        """The source of function `name` given as text (e.g. stored in a debug bundle), parsed with `ast`
        and never executed; locations point at `file` from `first_line` on. The text must be exactly one
        function definition (decorators included)."""
        self = cls.__new__(cls)
        self.name, self.file, self.first_line = name, file, first_line
        self.lines = io.StringIO(text).readlines()      # \n-split, as inspect reads files
        if not self.lines:
            raise CompileError(f"{file}:{first_line}: in kernel '{name}': the stored source is empty")
        dedented = textwrap.dedent(text)
        self.indent = len(self.lines[0]) - len(self.lines[0].lstrip()) if len(text) != len(dedented) else 0
        try:
            module = ast.parse(dedented)
        except SyntaxError as exc:
            raise CompileError(f"{file}:{first_line + (exc.lineno or 1) - 1}: in kernel '{name}': the stored "
                               f"source does not parse ({exc.msg})") from None
        except (RecursionError, MemoryError):
            raise CompileError(f"{file}:{first_line}: in kernel '{name}': expression too deeply nested "
                               "for Python's parser") from None
        if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef) \
                or module.body[0].name != name:
            raise CompileError(f"{file}:{first_line}: in kernel '{name}': the stored source must be exactly "
                               f"the definition of '{name}'")
        self.tree = module.body[0]
        return self

    def loc(self, node: ast.AST | None) -> SourceLoc | None:
        if node is None or not hasattr(node, "lineno"):
            return None
        k = node.lineno - 1
        text = self.lines[k] if 0 <= k < len(self.lines) else ""
        return SourceLoc(self.file, self.first_line + k, node.col_offset + self.indent, text, self.name)

    def error(self, node: ast.AST | None, message: str) -> CompileError:
        return compile_error(self.name, self.loc(node), message)
