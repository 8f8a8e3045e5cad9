"""Source text of a Python function and locations of its AST nodes."""

from __future__ import annotations

import ast
import inspect
import io
import linecache
import textwrap

from ..errors import CompileError, SourceLoc, compile_error
from .ast_copy import copy_tree


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


def capture_source(pyfunc) -> None:
    """Keep the text of the file that defines `pyfunc` as it is now, when @gk.kernel / @gk.func decorates it:
    the function compiles from that text, not from the file as it is at its first launch (which may have
    been edited since). One linecache lookup: the file is read once per process, and parsed at the first
    lowering as before."""
    code = getattr(pyfunc, "__code__", None)
    if code is None or hasattr(pyfunc, "__gk_lines__"):
        return
    linecache.checkcache(code.co_filename)          # an entry left from an earlier text of the same path
    lines = linecache.getlines(code.co_filename, getattr(pyfunc, "__globals__", None))
    try:
        pyfunc.__gk_lines__ = (code.co_filename, lines)
    except (AttributeError, TypeError):             # callables that take no attributes
        pass


def definition_lines(pyfunc, file: str, lines: list[str] | None = None) -> tuple[list[str], int] | None:
    """The lines of `pyfunc`'s definition, decorators included, and the number of the first: what
    inspect.getsourcelines gives, found with one `ast.parse` per source file (remembered while linecache
    holds the same text) instead of inspect's tokenizer, whose regular expressions alone take ~4 ms to
    compile in each process (a warm start's first kernel). `lines`: the file's text captured at decoration
    (`capture_source`); the definition must be in it (else None: the function has no source of its own),
    and the file as it is now is not read."""
    code = getattr(pyfunc, "__code__", None)
    captured = lines is not None
    if not captured:
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
    if found is None or found[2] != code.co_name:         # the def's name (__name__ may be reassigned)
        if captured:
            return None
        return inspect.getsourcelines(pyfunc)             # not in the file as it is now: ask inspect
    start, end, _ = found
    return lines[start - 1:end], start


def _is_definition_of(tree, pyfunc) -> bool:
    """Whether `tree` (the parsed text found for `pyfunc`) is a `def` of its name and positional parameters
    (the code's: `__name__` may have been reassigned since)."""
    code = getattr(pyfunc, "__code__", None)
    name = pyfunc.__name__ if code is None else code.co_name
    if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree.name != name:
        return False
    if code is None:
        return True
    names = [a.arg for a in (*tree.args.posonlyargs, *tree.args.args)]
    return names == list(code.co_varnames[:code.co_argcount])


class SourceInfo:
    """The parsed source of one function, mapping AST positions back to the real file."""

    def __init__(self, pyfunc):
        stored = getattr(pyfunc, "__gk_source__", None)     # a stand-in for stored source text (from_text)
        if isinstance(stored, SourceInfo):
            self.__dict__.update(stored.__dict__)
            self.tree = copy_tree(stored.tree)          # each lowering gets its own tree
            return
        self.name = pyfunc.__name__
        captured = getattr(pyfunc, "__gk_lines__", None)        # capture_source, at decoration
        try:
            if captured is not None:
                self.file = captured[0]
                if not captured[1]:
                    raise OSError("its file could not be read when it was decorated")
                found = definition_lines(pyfunc, self.file, captured[1])
            else:
                self.file = inspect.getsourcefile(pyfunc) or "<unknown>"
                found = definition_lines(pyfunc, self.file)
        except (OSError, TypeError) as exc:
            raise CompileError(f"in kernel '{self.name}': cannot read its source ({exc}); "
                               "kernels must be defined in a file, not typed at an interactive prompt") from None
        if found is None:
            raise self._no_source(pyfunc)
        lines, first = found
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
        except SyntaxError:                       # inspect's guess for a lambda inside an expression
            raise self._no_source(pyfunc) from None
        if not tree.body or not _is_definition_of(tree.body[0], pyfunc):
            raise self._no_source(pyfunc)
        self.tree: ast.FunctionDef = tree.body[0]

    def _no_source(self, pyfunc) -> CompileError:
        code = getattr(pyfunc, "__code__", None)
        line, name = (code.co_firstlineno, code.co_name) if code is not None else ("?", self.name)
        return CompileError(f"in kernel '{self.name}': it has no source of its own: its code names "
                            f"{self.file}:{line}, where there is no `def {name}` with its parameters (a "
                            "lambda, or a function made by exec/compile under another file's name); define "
                            "kernels and @gk.func functions with `def` in a file")

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
