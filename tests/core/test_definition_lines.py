"""core/frontend/source.definition_lines finds a kernel's source with one `ast.parse` per file; it must give
what inspect.getsourcelines gives for every function a user can write (decorated, nested, in classes,
multi-line signatures, trailing comments), and fall back to inspect where the file no longer matches."""

from __future__ import annotations

import inspect
import linecache
import pathlib
import types

import pytest

from gradkit.core.frontend.source import definition_lines

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _functions(code):
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if not c.co_name.startswith("<"):
                yield c
            yield from _functions(c)


def _function(code) -> types.FunctionType:
    cells = tuple(types.CellType() for _ in code.co_freevars)
    return types.FunctionType(code, {}, code.co_name, None, cells)


@pytest.mark.parametrize("folder", ["tests", "examples", "benchmarks"])
def test_same_lines_as_inspect_for_every_function_in_the_repository(folder):
    checked = 0
    for path in sorted((ROOT / folder).rglob("*.py")):
        src = path.read_text()
        try:
            code = compile(src, str(path), "exec")
        except SyntaxError:
            continue
        linecache.checkcache(str(path))
        for co in _functions(code):
            fn = _function(co)
            try:
                want_lines, want_first = inspect.getsourcelines(fn)
            except (OSError, TypeError):
                continue
            got_lines, got_first = definition_lines(fn, str(path))
            assert got_first == want_first, f"{path}:{co.co_firstlineno} {co.co_name}"
            assert "".join(got_lines).rstrip() == "".join(want_lines).rstrip(), f"{path} {co.co_name}"
            checked += 1
    assert checked > 50


SAMPLE = '''
class Holder:
    @staticmethod
    @property
    def method(a,
               b):
        return a + b  # trailing comment


def outer():
    if True:
        def inner(x):
            return (x +
                    1)
    return inner


def plain(x): return x
'''


def test_decorated_nested_and_one_line_definitions(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    code = compile(SAMPLE, str(path), "exec")
    seen = {}
    for co in _functions(code):
        lines, first = definition_lines(_function(co), str(path))
        seen[co.co_name] = (first, "".join(lines))
    assert seen["method"] == (3, "    @staticmethod\n    @property\n    def method(a,\n               b):\n"
                                 "        return a + b  # trailing comment\n")
    assert seen["inner"] == (12, "        def inner(x):\n            return (x +\n                    1)\n")
    assert seen["plain"] == (18, "def plain(x): return x\n")


def test_a_file_changed_since_the_function_was_defined_falls_back_to_inspect(tmp_path):
    path = tmp_path / "moved.py"
    path.write_text("def f(x):\n    return x\n")
    code = compile(path.read_text(), str(path), "exec")
    fn = _function(next(_functions(code)))
    path.write_text("# a line added above\ndef g(x):\n    return x\n")   # no `f` where the code says it is
    linecache.checkcache(str(path))
    assert definition_lines(fn, str(path)) == inspect.getsourcelines(fn)
