"""Lowering of printing calls in kernels (the op itself: core/builtins/printing.py): Python's
`print(*values, sep=, end=)` and a C format with its values (Warp's `wp.printf`), each one print instruction. Values print as
their scalar components; float operands pass through `stop_gradient`, so forward mode sees no tangent
there and the reverse pass none to propagate."""

from __future__ import annotations

import ast

from .. import types as T
from ..ir import Value
from ..ops import Op
from ..builtins.printing import Conv, FormatError, PrintSpec, merge, parse_c_format, value_pieces

NUMBER = (bool, int, float)


def scalars_of(lw, x, node) -> list[Value]:
    """The scalar components of a kernel value (row-major for matrices)."""
    x = lw.materialize(x, None, node)
    t = x.type
    if t.is_array or t.is_struct:
        raise lw.error(node, f"cannot print {t.name} values; print their elements or fields")
    if t.is_scalar:
        return [x]
    c = lw.b.const
    if t.is_vector:
        return [lw.prim("extract", x, c(k, T.int32), node=node) for k in range(t.length)]
    rows, cols = t.shape
    return [lw.prim("extract", x, c(r, T.int32), c(k, T.int32), node=node) for r in range(rows) for k in range(cols)]


def emit_print(lw, pieces: list, values: list[Value], what: str, node) -> None:
    """One print instruction: `pieces` (literals and Conv over `values`) at the current position."""
    args = [lw.prim("stop_gradient", v, node=node) if v.type.is_float else v for v in values]
    spec = PrintSpec(merge(pieces), tuple(v.type for v in values), what)
    lw.b.emit(Op.NATIVE, args, [], {"native": spec, "variant": "forward"})


def print_parts(lw, x, node, pieces: list, values: list[Value]) -> None:
    """Append the pieces printing `x` the way Python's print shows it: literals (strings, Python numbers)
    as text, kernel values by their type (core/builtins/printing.py value_pieces)."""
    if isinstance(x, str):
        pieces.append(x)
        return
    if isinstance(x, NUMBER):
        pieces.append(str(x))
        return
    x = lw.materialize(x, None, node)
    comps = scalars_of(lw, x, node)
    part, _ = value_pieces(x.type, len(values))
    pieces.extend(part)
    values.extend(comps)


def _keyword(lw, node, name: str, default: str) -> str:
    for k in node.keywords:
        if k.arg == name:
            v = lw.expr(k.value)
            if v is not None and not isinstance(v, str):
                raise lw.error(k.value, f"print(): {name}= must be a string literal")
            return default if v is None else v
    return default


def lower_print(lw, node: ast.Call) -> None:
    """Python's `print(*values, sep=' ', end='\\n')` in a kernel: one line, written by one printf."""
    for k in node.keywords:
        if k.arg not in ("sep", "end"):
            raise lw.error(k, f"print(): the keyword '{k.arg}' is not supported in kernels (only sep= and end=)")
    sep, end = _keyword(lw, node, "sep", " "), _keyword(lw, node, "end", "\n")
    args = lw.call_args(node, None, "print")
    pieces: list = []
    values: list[Value] = []
    for i, x in enumerate(args):
        if i:
            pieces.append(sep)
        print_parts(lw, x, node.args[i], pieces, values)
    pieces.append(end)
    emit_print(lw, pieces, values, "print", node)


def lower_printf(lw, node, fmt, args: list, what: str = "printf") -> None:
    """A C format and its arguments (Warp's wp.printf): Python numbers become constants of their type,
    string arguments are `%s` text; CompileError at the call for a format the arguments do not match."""
    if not isinstance(fmt, str):
        raise lw.error(node, f"{what}(): the format must be a string literal")
    values, kinds = [], []
    for x in args:
        if isinstance(x, str):
            kinds.append(x)
            continue
        v = lw.materialize(x, None, node)
        if not v.type.is_scalar:
            raise lw.error(node, f"{what}(): a {v.type.name} cannot be a printf argument; pass its components")
        values.append(v)
        kinds.append(v.type)
    try:
        pieces = parse_c_format(fmt, kinds)
    except FormatError as exc:
        raise lw.error(node, f"{what}(): {exc}") from None
    # operand numbers count only the values (string arguments became text)
    index, k = {}, 0
    for i, kind in enumerate(kinds):
        if not isinstance(kind, str):
            index[i] = k
            k += 1
    pieces = [Conv(p.flags, p.conv, index[p.arg]) if isinstance(p, Conv) else p for p in pieces]
    emit_print(lw, pieces, values, what, node)
