"""What a Taichi kernel's translation works with before any statement is rewritten: the names its source
sees (`namespace_of`, `local_names`), the state one kernel's launches share (`Shared`: fields as
parameters, inlined functions, helpers), and builders of AST nodes that keep the user's source location."""

from __future__ import annotations

import ast

import numpy as np

import gradkit as gk

from .fields import Field
from .lang import METHODS, Matrix, Vector
from .printing import TI_PRINT
from .macros import MACROS


def namespace_of(pyfunc) -> dict:
    """The names a Taichi kernel or function sees: its module's globals, then its enclosing function's
    locals (captured at decoration) and its closure cells."""
    ns = dict(pyfunc.__globals__)
    ns.update(getattr(pyfunc, "__ti_enclosing__", {}))
    if pyfunc.__closure__:
        for var, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
            try:
                ns[var] = cell.cell_contents
            except ValueError:
                pass
    return ns


def local_names(fdef: ast.FunctionDef, static_params: set) -> set:
    out = {a.arg for a in fdef.args.args} - static_params
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _loc(new, old):
    return ast.fix_missing_locations(ast.copy_location(new, old))


def _name(id_, node):
    return _loc(ast.Name(id=id_, ctx=ast.Load()), node)


def _call(fname, args, node):
    return _loc(ast.Call(func=_name(fname, node), args=list(args), keywords=[]), node)


def _numbers(v) -> bool:
    """A (nested) list or tuple of numbers."""
    return all(_numbers(x) if isinstance(x, (list, tuple)) else
               isinstance(x, (int, float, bool, np.integer, np.floating)) for x in v)


def _literal(v, node):
    """A (nested) list of numbers as a tuple literal (gradkit kernels index tuples at compile time)."""
    elts = [_literal(x, node) if isinstance(x, (list, tuple)) else
            _loc(ast.Constant(value=x.item() if hasattr(x, "item") else x), node) for x in v]
    return _loc(ast.Tuple(elts=elts, ctx=ast.Load()), node)


class Shared:
    """What one kernel translation shares across its launches and inlined functions: the field ↔ parameter
    names, the inlined functions, and the namespace entries the generated code needs."""

    def __init__(self):
        self.fields: dict[int, tuple[str, Field]] = {}      # id(field) -> (param name, field)
        self.inlines: dict[tuple, object] = {}              # (id(func), id(self)) -> rewrite.Inline
        self.helpers: dict[str, object] = {**MACROS, **{f"__ti_m_{k}": v for k, v in METHODS.items()},
                                           "__ti_gk": gk, "__ti_Vector": Vector, "__ti_Matrix": Matrix,
                                           "__ti_print": TI_PRINT}
        self.building: list = []

    def field_param(self, f: Field) -> str:
        got = self.fields.get(id(f))
        if got is None:
            got = self.fields[id(f)] = (f"__ti_f{len(self.fields)}", f)
        return got[0]
