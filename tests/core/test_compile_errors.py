"""Every CompileError class names the kernel and points at file:line:col with a caret."""

import inspect
import re

import pytest

import gradkit as gk


def _check(kernel_fn, snippet: str, message: str):
    """Compile `kernel_fn`; the error must name it, quote the line holding `snippet` and put the caret under it."""
    k = gk.kernel(kernel_fn)
    with pytest.raises(gk.CompileError) as info:
        k.ir()
    text = str(info.value)
    assert f"'{kernel_fn.__name__}'" in text
    assert re.search(message, text), text
    lines, first = inspect.getsourcelines(kernel_fn)
    row = next(k for k, line in enumerate(lines) if snippet in line)
    col = lines[row].index(snippet)
    assert f"{inspect.getsourcefile(kernel_fn)}:{first + row}:{col + 1}:" in text, text
    src_line, caret_line = text.splitlines()[1:3]
    assert src_line.strip() == lines[row].strip()
    assert caret_line.index("^") - caret_line.index(" " * 4) - 4 == col - (len(lines[row]) - len(lines[row].lstrip()))


def test_lambda():
    def k(x: gk.array(dtype=float)):
        f = lambda v: v  # noqa: E731
        x[0] = 1.0
    _check(k, "lambda v", "lambda")


def test_try():
    def k(x: gk.array(dtype=float)):
        try:
            x[0] = 1.0
        except Exception:
            pass
    _check(k, "try:", "'try' is not supported")


def test_with():
    def k(x: gk.array(dtype=float)):
        with open("f"):
            pass
    _check(k, "with open", "'with' is not supported")


def test_class():
    def k(x: gk.array(dtype=float)):
        class A:
            pass
    _check(k, "class A", "class definitions")


def test_list_comprehension():
    def k(x: gk.array(dtype=float)):
        y = [i for i in range(3)]
    _check(k, "[i for", "list comprehensions")


def test_generator():
    def k(x: gk.array(dtype=float)):
        y = sum(i for i in range(3))
    _check(k, "(i for i", "generator expressions")


def test_global():
    def k(x: gk.array(dtype=float)):
        global FOO
    _check(k, "global FOO", "'global' is not supported")


def test_star_args():
    def k(x: gk.array(dtype=float)):
        v = gk.max(*x)
    _check(k, "*x)", "star-arguments")


def test_unknown_name():
    def k(x: gk.array(dtype=float)):
        i = gk.tid()
        x[i] = undefined_thing + 1.0  # noqa: F821
    _check(k, "undefined_thing", "unknown name 'undefined_thing'")


def test_type_mismatch():
    def k(x: gk.array(dtype=float), y: gk.array(dtype=gk.int32)):
        i = gk.tid()
        x[i] = x[i] + y[i]
    _check(k, "x[i] + y[i]", "types differ")


def test_store_type_mismatch():
    def k(x: gk.array(dtype=float), v: gk.vec3):
        i = gk.tid()
        x[i] = v
    _check(k, "x[i] = v", "expected float32, got vec3")


def test_builtin_argument_count():
    def k(x: gk.array(dtype=float)):
        i = gk.tid()
        x[i] = gk.sin(x[i], 2.0)
    _check(k, "gk.sin(x[i], 2.0)", r"sin\(\) takes 1 arguments?, got 2")


@gk.func
def _two(a: float, b: float) -> float:
    return a + b


def test_function_argument_count():
    def k(x: gk.array(dtype=float)):
        i = gk.tid()
        x[i] = _two(x[i])
    _check(k, "_two(x[i])", r"_two\(\) takes 2 arguments, got 1")


def test_assign_scalar_parameter():
    def k(x: gk.array(dtype=float), a: float):
        a = 2.0
        x[0] = a
    _check(k, "a = 2.0", "cannot assign to parameter 'a'")


def test_non_constant_static():
    def k(x: gk.array(dtype=float), n: int):
        i = gk.tid()
        m = gk.static(n * 2)
    _check(k, "gk.static(n * 2)", "compile-time expression")


@gk.func
def _rec(a: float) -> float:
    return _rec(a)


def test_recursion():
    """Reported at the recursive call inside the function, naming the kernel that called it."""
    def k(x: gk.array(dtype=float)):
        x[0] = _rec(x[0])
    with pytest.raises(gk.CompileError) as info:
        gk.kernel(k).ir()
    text = str(info.value)
    lines, first = inspect.getsourcelines(_rec.pyfunc)
    assert f":{first + 2}:12: in kernel '_rec': recursion is not supported (_rec -> _rec)" in text
    assert "return _rec(a)" in text and "called from 'k'" in text


def test_missing_annotation():
    def k(x):
        pass
    with pytest.raises(gk.CompileError, match="needs a type annotation"):
        gk.kernel(k).ir()


def test_return_value_from_kernel():
    def k(x: gk.array(dtype=float)):
        return 1.0
    _check(k, "return 1.0", "cannot return a value")


def test_loop_carried_type_change():
    def k(x: gk.array(dtype=gk.float64), n: int):
        acc = gk.int32(0)
        for j in range(n):
            acc = acc + x[j]
        x[0] = acc
    with pytest.raises(gk.CompileError):
        gk.kernel(k).ir()


def test_weak_literal_loop_adopts_type():
    """`acc = 0.0` then accumulating float64 values retypes the literal instead of failing."""
    def k(x: gk.array(dtype=gk.float64), n: int):
        acc = 0.0
        for j in range(n):
            acc += x[j]
        x[0] = acc
    text = gk.kernel(k).ir()
    assert "float64 = for" in text


def test_float32_widens_to_float64():
    """float32 meeting float64 widens (lossless), in expressions, branches and loop-carried locals."""
    def k(x: gk.array(dtype=gk.float64), n: int):
        acc = gk.float32(0.0)
        for j in range(n):
            acc = acc + x[j]
        x[0] = acc + (0.5 if acc > 0.0 else gk.float32(1.0))
    text = gk.kernel(k).ir()
    assert "float64 = for" in text and "cast[to=float64]" in text


def test_break_in_unrolled_loop():
    def k(x: gk.array(dtype=float)):
        for j in gk.static(range(3)):
            if x[j] > 1.5:
                break
            x[0] += 1.0
    _check(k, "for j in gk.static", "break/continue are not supported in unrolled")
