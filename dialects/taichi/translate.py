"""Taichi kernel → gradkit kernels: how a `@ti.kernel` runs on gradkit.

The kernel's Python source is parsed with `ast` (gradkit's SourceInfo: file, lines, first line) and split
at its top level: each top-level `for` (over `range`, `ti.ndrange`, `ti.grouped`, or a field: struct-for)
becomes one parallel gk.kernel launched over the loop's extent, and each run of other statements one
serial gk.kernel launched with one thread (a top-level `for ... in ti.static(...)` is serial code).
The statements are rewritten into gradkit's kernel language:

- every global field the code names (`x`, `self.x`, `x.grad`, a field passed as a `ti.template()`
  argument) becomes an array parameter `__ti_f<k>` of the generated kernel; the launch passes the field's
  gk.array, so tapes, hazards and the debugger see ordinary launches;
- the kernel's scalar arguments become scalar parameters of the same names;
- the loop variable is rebuilt from `gk.tid()` plus the range's start (a parameter, evaluated on the host
  with the arguments at each call, as are the extents);
- `@ti.func` calls become `__ti_call<k>` macros that inline the function's (rewritten) body into the
  caller, as Taichi inlines; vector/matrix methods (`v.norm()`) become `__ti_m_<name>` macros (lang.py);
  field stores cast to the field's type, vector indices (`grid[base + offset]`), `ti.atomic_*` on field
  elements and Taichi's "a local keeps its first type" become the `__ti_*` macros of macros.py;
- list literals become tuples (for `ti.Vector([...])`); `assert` and `print` are dropped (with a note).

Top-level locals assigned in serial code are recomputed in the later launches that use them.
Every generated node keeps the line and column of the Taichi source it came from, and the generated
gk.kernel compiles from a SourceInfo holding the user's file and lines (`__gk_source__`), so compile errors
point at the user's Taichi source line.
"""

from __future__ import annotations

import ast
import builtins as py_builtins
import copy

import gradkit as gk
from gradkit.core.errors import CompileError
from gradkit.core.frontend.source import SourceInfo
from gradkit.core.lang import LangFunction

from . import runtime
from .errors import unsupported
from .fields import Field
import numpy as np

from .lang import METHODS, Matrix, Vector
from .macros import MACROS

_STATIC = object()          # marker: "not statically known"
_noted: set = set()


def _note_once(msg: str) -> None:
    if msg not in _noted:
        _noted.add(msg)
        runtime._note(msg)


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
        self.inlines: dict[tuple, "Inline"] = {}            # (id(func), id(self)) -> Inline
        self.helpers: dict[str, object] = {**MACROS, **{f"__ti_m_{k}": v for k, v in METHODS.items()},
                                           "__ti_gk": gk, "__ti_Vector": Vector, "__ti_Matrix": Matrix}
        self.building: list = []

    def field_param(self, f: Field) -> str:
        got = self.fields.get(id(f))
        if got is None:
            got = self.fields[id(f)] = (f"__ti_f{len(self.fields)}", f)
        return got[0]


class Rewriter(ast.NodeTransformer):
    """Taichi statements → gradkit kernel-language statements (see the module docstring)."""

    def __init__(self, shared: Shared, ns: dict, locals_: set, src: SourceInfo, what: str):
        self.shared, self.ns, self.locals, self.src, self.what = shared, ns, locals_, src, what
        self.grouped: set = set()       # names holding a ti.grouped index vector
        self.uses: set = set()          # field params and inlines used by the statements rewritten
        self.random = False
        self.defined: set = set()

    def error(self, node, msg) -> CompileError:
        return self.src.error(node, msg)

    # -------------------------------------------------------------- static resolution
    def static(self, node):
        """The compile-time object `node` names (a global, closure value, template argument, or an
        attribute of one), or _STATIC when it is not known before the kernel runs."""
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return _STATIC
            if node.id in self.ns:
                return self.ns[node.id]
            return getattr(py_builtins, node.id, _STATIC)
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is _STATIC or isinstance(base, (int, float)):
                return _STATIC
            try:
                return getattr(base, node.attr)
            except Exception:
                return _STATIC
        return _STATIC

    def field_of(self, node):
        v = self.static(node)
        return v if isinstance(v, Field) else None

    def is_static_call(self, node) -> bool:
        return isinstance(node, ast.Call) and self.static(node.func) is gk.static

    # -------------------------------------------------------------- expressions
    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            v = self.static(node)
            if isinstance(v, Field):
                return self.field_name(v, node)
            if isinstance(v, np.ndarray):
                return self.constant_array(v, node)
            if isinstance(v, list) and _numbers(v):
                return _literal(v, node)        # a Python list of numbers (goal = [0.9, 0.75]): a constant
        return node

    def constant_array(self, v: np.ndarray, node):
        """A Python-scope ti.Vector / ti.Matrix (a NumPy array) used in a kernel: a literal of its values."""
        if v.ndim not in (1, 2) or v.size > 64 or v.dtype.kind not in "fiub":
            raise self.error(node, f"a NumPy array of shape {v.shape} cannot be used inside a kernel; put it "
                                   "in a field")
        conv = float if v.dtype.kind == "f" else int

        def lit(row):
            return _loc(ast.Tuple(elts=[_loc(ast.Constant(value=conv(x)), node) for x in row], ctx=ast.Load()),
                        node)
        data = lit(v) if v.ndim == 1 else _loc(ast.Tuple(elts=[lit(r) for r in v], ctx=ast.Load()), node)
        return _call("__ti_Vector" if v.ndim == 1 else "__ti_Matrix", [data], node)

    def field_name(self, f: Field, node):
        if f._primal is None and not f.name:
            # the field's name in the program (`x`, `self.x`) names its array in errors and the debugger
            f.name = ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""
            if f._arr is not None and f._arr.label is None:
                f._arr.label = f.name or None
        p = self.shared.field_param(f)
        self.uses.add(p)
        return _name(p, node)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            f = self.field_of(node)
            if f is not None:
                return self.field_name(f, node)
        self.generic_visit(node)
        return node

    def visit_List(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            return _loc(ast.Tuple(elts=node.elts, ctx=ast.Load()), node)
        return node

    def vector_index(self, f: Field, sl) -> bool:
        """A field subscript whose index is one expression for a multi-dimensional field, or a ti.grouped
        vector: an index vector (Taichi's `grid[base + offset]`, `x[I]`)."""
        if isinstance(sl, ast.Tuple) or (isinstance(sl, ast.Constant) and sl.value is None):
            return False
        return len(f.shape) > 1 or isinstance(sl, ast.Name) and sl.id in self.grouped

    def visit_Subscript(self, node):
        f = self.field_of(node.value)
        if f is not None and isinstance(node.ctx, ast.Load) and self.vector_index(f, node.slice):
            return _call("__ti_load", [self.field_name(f, node.value), self.visit(node.slice)], node)
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        callee = self.static(node.func)
        if callee is gk.static:
            return node                     # compile-time: evaluated with the kernel's namespace
        from .kernels import TiFunc, BoundFunc
        if isinstance(callee, (TiFunc, BoundFunc)):
            inline = self.inline(callee, node)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            node.func = _name(inline.name, node.func)
            self.uses.add(inline.name)
            self.uses |= inline.uses
            self.random |= inline.random
            return node
        from . import lang as ti_lang
        atomics = {getattr(ti_lang, "atomic_" + k, None): k for k in ("add", "sub", "min", "max")}
        if callee is not _STATIC and callee in atomics:
            return self.atomic(atomics[callee], node)
        if callee is ti_lang.random:
            self.random = True
        if callee is py_builtins.print:
            _note_once("print() inside kernels is ignored")
            return _loc(ast.Constant(value=None), node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS and \
                self.static(node.func.value) in (Vector, Matrix) and node.args:
            # ti.Vector.normalized(v, eps): a method called through the class, v its first argument
            new = _call(f"__ti_m_{node.func.attr}", [self.visit(a) for a in node.args], node)
            new.keywords = [self.visit(k) for k in node.keywords]
            return new
        if callee is _STATIC and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            base = self.visit(node.func.value)
            args = [self.visit(a) for a in node.args]
            new = _call(f"__ti_m_{node.func.attr}", [base, *args], node)
            new.keywords = [self.visit(k) for k in node.keywords]
            return new
        self.generic_visit(node)
        return node

    def atomic(self, kind, node):
        if len(node.args) != 2 or node.keywords:
            raise self.error(node, f"ti.atomic_{kind}(x[i], v) takes a field element and a value")
        target, value = node.args
        f = self.field_of(target.value) if isinstance(target, ast.Subscript) else None
        if f is None:
            raise unsupported(f"ti.atomic_{kind} on a local variable ({self.src.loc(node).file}:"
                              f"{self.src.loc(node).line})", "write `x += v` (the old value is not returned)")
        idx = self.index_expr(target.slice)
        return _call(f"__ti_atomic_{kind}", [self.field_name(f, target.value), idx, self.visit(value)], node)

    def index_expr(self, sl):
        if isinstance(sl, ast.Constant) and sl.value is None:
            return sl
        if isinstance(sl, ast.Tuple):
            return _loc(ast.Tuple(elts=[self.visit(e) for e in sl.elts], ctx=ast.Load()), sl)
        return self.visit(sl)

    def inline(self, callee, node) -> "Inline":
        from .kernels import BoundFunc
        func, obj = (callee.func, callee.obj) if isinstance(callee, BoundFunc) else (callee, None)
        key = (id(func), id(obj))
        got = self.shared.inlines.get(key)
        if got is None:
            if key in self.shared.building:
                raise self.error(node, f"recursive @ti.func '{func.__name__}' is not supported")
            self.shared.building.append(key)
            try:
                got = Inline(func, obj, self.shared, len(self.shared.inlines))
            finally:
                self.shared.building.pop()
            self.shared.inlines[key] = got
        return got

    # -------------------------------------------------------------- statements
    def body(self, stmts: list, defined: set) -> list:
        saved = self.defined
        self.defined = set(defined)
        out = []
        try:
            for st in stmts:
                r = self.visit(st)
                if r is None:
                    continue
                out += r if isinstance(r, list) else [r]
            return out or [_loc(ast.Pass(), stmts[0])] if stmts else out
        finally:
            self.after = self.defined
            self.defined = saved

    def visit_Assert(self, node):
        return None

    def visit_Expr(self, node):
        v = self.visit(node.value)
        if isinstance(v, ast.Constant) and v.value is None:
            return None
        node.value = v
        return node

    def component_store(self, node, t, value):
        """`x[i][c] = v` / `x[i][c] += v` on a vector or matrix field element: the element through a local,
        its component set, the element stored back."""
        tmp = f"__ti_e{id(node)}"
        load = _loc(ast.Assign(targets=[_loc(ast.Name(id=tmp, ctx=ast.Store()), node)], value=copy.deepcopy(t.value)),
                    node)
        comp = _loc(ast.Subscript(value=_name(tmp, node), slice=t.slice, ctx=ast.Store()), node)
        if isinstance(node, ast.AugAssign):
            mid = _loc(ast.AugAssign(target=comp, op=node.op, value=value), node)
        else:
            mid = _loc(ast.Assign(targets=[comp], value=value), node)
        back = _loc(ast.Assign(targets=[copy.deepcopy(t.value)], value=_name(tmp, node)), node)
        back.targets[0].ctx = ast.Store()
        self.locals.add(tmp)
        out = []
        for st in (load, mid, back):
            r = self.visit(st)
            out += r if isinstance(r, list) else [r]
        return out

    def is_component_target(self, t) -> bool:
        return isinstance(t, ast.Subscript) and isinstance(t.value, ast.Subscript) and \
            self.field_of(t.value.value) is not None and not self.field_of(t.value.value).elem.is_scalar

    def visit_Assign(self, node):
        if len(node.targets) == 1 and self.is_component_target(node.targets[0]):
            return self.component_store(node, node.targets[0], node.value)
        if len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Subscript):
                f = self.field_of(t.value)
                if f is not None:
                    value = self.visit(node.value)
                    p = self.field_name(f, t.value)
                    if self.vector_index(f, t.slice):
                        return _loc(ast.Expr(_call("__ti_store", [p, self.visit(t.slice), value], node)), node)
                    t.value = p
                    t.slice = self.index_expr(t.slice)
                    node.value = _call("__ti_as", [_name(p.id, p), value], node)
                    return node
            if isinstance(t, ast.Name):
                node.value = self.visit(node.value)
                if t.id in self.defined:
                    node.value = _call("__ti_keep", [_name(t.id, t), node.value], node)
                self.defined.add(t.id)
                return node
        self.generic_visit(node)
        for t in node.targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    self.defined.add(n.id)
        return node

    def visit_AugAssign(self, node):
        t = node.target
        if self.is_component_target(t):
            return self.component_store(node, t, node.value)
        if isinstance(t, ast.Subscript):
            f = self.field_of(t.value)
            if f is not None:
                value = self.visit(node.value)
                p = self.field_name(f, t.value)
                op = type(node.op)
                if self.vector_index(f, t.slice):
                    sl = self.visit(t.slice)
                    if op in (ast.Add, ast.Sub):
                        kind = "add" if op is ast.Add else "sub"
                        return _loc(ast.Expr(_call(f"__ti_atomic_{kind}", [p, sl, value], node)), node)
                    name = {ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv", ast.Mod: "mod",
                            ast.Pow: "pow"}.get(op)
                    if name is None:
                        raise self.error(node, "this augmented assignment to a field element is not supported")
                    return _loc(ast.Expr(_call(f"__ti_rmw_{name}", [p, sl, value], node)), node)
                t.value = p
                t.slice = self.index_expr(t.slice)
                node.value = _call("__ti_as", [_name(p.id, p), value], node) \
                    if op in (ast.Add, ast.Sub) else value
                return node
        if isinstance(t, ast.Name) and t.id in self.defined:
            value = self.visit(node.value)
            new = _loc(ast.BinOp(left=_name(t.id, t), op=node.op, right=value), node)
            return _loc(ast.Assign(targets=[_loc(ast.Name(id=t.id, ctx=ast.Store()), t)],
                                   value=_call("__ti_keep", [_name(t.id, t), new], node)), node)
        self.generic_visit(node)
        return node

    def visit_If(self, node):
        node.test = self.visit(node.test)
        node.body = self.body(node.body, self.defined)
        then_def = self.after
        node.orelse = self.body(node.orelse, self.defined) if node.orelse else []
        if node.orelse:
            self.defined |= then_def & self.after
        return node

    def visit_While(self, node):
        node.test = self.visit(node.test)
        node.body = self.body(node.body, self.defined)
        return node

    def visit_Return(self, node):
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_For(self, node):
        """A loop inside the kernel body: range and ti.static loops stay; ti.ndrange, struct-for over a
        field and ti.grouped become nested range loops."""
        if node.orelse:
            raise self.error(node, "for-else is not supported")
        if self.is_static_call(node.iter):
            node.body = self.body(node.body, self.defined)
            return node
        dims = self.loop_dims(node.iter)
        if dims is None:
            node.iter = self.visit(node.iter)
            node.body = self.body(node.body, self.defined | {n.id for n in ast.walk(node.target)
                                                              if isinstance(n, ast.Name)})
            return node
        bounds, grouped = dims
        names = [f"__ti_i{id(node)}_{k}" for k in range(len(bounds))]
        targets = self.target_names(node, len(bounds), grouped)
        body_prefix = []
        if grouped:
            self.grouped.add(targets[0])
            body_prefix.append(_loc(ast.Assign(targets=[_loc(ast.Name(id=targets[0], ctx=ast.Store()), node)],
                                               value=_call("__ti_ivec", [_name(n, node) for n in names], node)),
                                    node))
            loop_vars = names
        else:
            loop_vars = targets
        inner = self.body(node.body, self.defined | set(targets))
        body = body_prefix + inner
        for var, (lo, hi) in reversed(list(zip(loop_vars, bounds))):
            rng = _loc(ast.Call(func=_name("range", node), args=[self.visit(lo), self.visit(hi)], keywords=[]),
                       node)
            body = [_loc(ast.For(target=_loc(ast.Name(id=var, ctx=ast.Store()), node), iter=rng, body=body,
                                 orelse=[]), node)]
        return body

    def target_names(self, node, n: int, grouped: bool) -> list:
        t = node.target
        if grouped:
            if not isinstance(t, ast.Name):
                raise self.error(t, "a ti.grouped loop takes one index variable")
            return [t.id]
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if len(elts) != n or not all(isinstance(e, ast.Name) for e in elts):
            raise self.error(t, f"this loop has {n} dimension{'s' * (n != 1)}: give {n} index "
                                "variable names, or loop over ti.grouped(...) for one index vector")
        return [e.id for e in elts]

    def loop_dims(self, it):
        """(bounds [(lo, hi) AST], grouped) of a ti.ndrange / ti.grouped / struct-for iterable, or None for
        a plain range."""
        from .kernels import grouped, ndrange
        f = self.field_of(it)
        if f is not None:
            return [(ast.Constant(value=0), ast.Constant(value=s)) for s in f.shape], False
        if not isinstance(it, ast.Call):
            raise self.error(it, "kernels loop over range(...), ti.ndrange(...), ti.grouped(...), "
                                 "ti.static(...) or a field")
        callee = self.static(it.func)
        if callee is ndrange:
            return self.ndrange_bounds(it), False
        if callee is grouped:
            if len(it.args) != 1:
                raise self.error(it, "ti.grouped() takes one field or ti.ndrange")
            inner = self.loop_dims(it.args[0])
            if inner is None:
                raise self.error(it, "ti.grouped() takes a field or a ti.ndrange(...)")
            return inner[0], True
        if callee is py_builtins.range:
            return None
        if callee is py_builtins.reversed:
            return None
        raise self.error(it, "kernels loop over range(...), ti.ndrange(...), ti.grouped(...), "
                             "ti.static(...) or a field")

    def ndrange_bounds(self, it) -> list:
        out = []
        for a in it.args:
            if isinstance(a, (ast.Tuple, ast.List)):
                if len(a.elts) != 2:
                    raise self.error(a, "a ti.ndrange bound is n or (start, stop)")
                out.append((a.elts[0], a.elts[1]))
            else:
                out.append((ast.Constant(value=0), a))
        return out


class Inline:
    """A @ti.func as a macro: its body, rewritten once per kernel translation, lowered in place of the call
    with the caller's lowering (arguments by value, as Taichi passes them; fields and the random state of
    the caller visible)."""

    def __init__(self, func, obj, shared: Shared, k: int):
        self.func, self.obj = func, obj
        py = func.pyfunc
        self.name = f"__ti_call{k}_{py.__name__}"
        src = SourceInfo(py)
        fdef = src.tree
        params = [a.arg for a in fdef.args.args]
        static = {}
        if obj is not None:
            static[params[0]] = obj
            params = params[1:]
        self.params = params
        self.defaults = dict(zip(reversed(params), reversed(fdef.args.defaults)))
        self.ns = {**namespace_of(py), **static, **shared.helpers}
        rw = Rewriter(shared, self.ns, local_names(fdef, set(static)), src, f"@ti.func '{py.__name__}'")
        body = rw.body(fdef.body, set(params))
        for n in ast.walk(ast.Module(body=body[:-1] if body and isinstance(body[-1], ast.Return) else body,
                                     type_ignores=[])):
            if isinstance(n, ast.Return):
                raise src.error(n, f"@ti.func '{py.__name__}': gradkit.taichi inlines functions and supports "
                                   "`return` only as the last statement; assign a result local and return it "
                                   "at the end")
        self.body = body
        self.ns.update(shared.helpers)          # the functions this one calls, made while rewriting it
        self.uses, self.random = rw.uses, rw.random
        self.src = src
        self.lang = LangFunction(self.name, "macro", macro=self.expand)
        shared.helpers[self.name] = self.lang
        self.ns[self.name] = self.lang

    def expand(self, E, *args, **kwargs):
        lw = E.lw
        if len(args) > len(self.params):
            E.fail(f"takes {len(self.params)} arguments, got {len(args)}")
        bound = dict(zip(self.params, args))
        bound.update(kwargs)
        for p in self.params:
            if p not in bound:
                if p not in self.defaults:
                    E.fail(f"missing argument '{p}'")
                bound[p] = lw.expr(copy.deepcopy(self.defaults[p]))
        env = {k: v for k, v in lw.env.items() if k.startswith("__ti_")}
        env.update(bound)
        saved = (lw.env, lw.src, lw.static_ns, lw.maybe_undefined)
        lw.env, lw.src, lw.static_ns, lw.maybe_undefined = env, self.src, self.ns, set()
        ret = None
        try:
            body = copy.deepcopy(self.body)
            if body and isinstance(body[-1], ast.Return):
                lw.block(body[:-1])
                ret = lw.expr(body[-1].value) if body[-1].value is not None else None
            else:
                lw.block(body)
            rng = lw.env.get("__ti_rng")
        finally:
            lw.env, lw.src, lw.static_ns, lw.maybe_undefined = saved
        if rng is not None:
            lw.env["__ti_rng"] = rng
        return ret


# ------------------------------------------------------------------ kernels
class Launch:
    """One generated gk.kernel and how to launch it: its field parameters, the Taichi kernel's scalar
    arguments it takes, and (for a parallel loop) the host code giving its extent and starts."""

    def __init__(self, kernel, fields, args, bounds, random, ret, line):
        self.kernel, self.fields, self.args, self.bounds = kernel, fields, args, bounds
        self.random, self.ret, self.line = random, ret, line

    def extents(self, hostns: dict):
        if self.bounds is None:
            return (1,), []
        los, dims = [], []
        for lo, hi in self.bounds:
            a, b = eval(lo, hostns), eval(hi, hostns)  # noqa: S307 - the user's own loop bounds
            los.append(int(a))
            dims.append(max(0, int(b) - int(a)))
        return tuple(dims), los


class Translation:
    """A Taichi kernel translated for one set of compile-time arguments (templates, self)."""

    def __init__(self, launches, host_assigns, ret_field):
        self.launches, self.host_assigns, self.ret_field = launches, host_assigns, ret_field


def _uses_names(stmts) -> set:
    return {n.id for st in stmts for n in ast.walk(st) if isinstance(n, ast.Name)}


def translate(tikernel, static: dict, arg_types: dict, ret_type) -> Translation:
    """Split and rewrite `tikernel` (a TiKernel) into launches; `static`: parameter -> compile-time object
    (self, template arguments); `arg_types`: scalar parameter -> gk type, in order."""
    py = tikernel.pyfunc
    src = SourceInfo(py)
    fdef = src.tree
    shared = Shared()
    ns = {**namespace_of(py), **static}
    locals_ = local_names(fdef, set(static))
    ret_field = None
    if ret_type is not None:
        from .fields import Field as F
        ret_field = F(ret_type, ())
    body = [st for st in fdef.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    for n in ast.walk(ast.Module(body=body[:-1], type_ignores=[])):
        if isinstance(n, ast.Return):
            raise src.error(n, "gradkit.taichi supports `return` in a kernel only as its last statement")
    segments, serial = [], []
    for st in body:
        if isinstance(st, ast.For) and not Rewriter(shared, ns, locals_, src, "").is_static_call(st.iter):
            if serial:
                segments.append(("serial", serial))
                serial = []
            segments.append(("loop", st))
        else:
            serial.append(st)
    if serial:
        segments.append(("serial", serial))
    launches, host_assigns, carried = [], [], []     # carried: top-level local assignments so far
    for k, (kind, part) in enumerate(segments):
        rw = Rewriter(shared, {**ns, **shared.helpers}, locals_, src, f"kernel '{py.__name__}'")
        defined = set(arg_types)
        if kind == "serial":
            # top-level locals a loop bound may use, as the user wrote them: rw.body rewrites statements in
            # place (field names become kernel parameters), and the host evaluates these in its namespace
            host_assigns += [copy.deepcopy(st) for st in part
                             if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets)]
            stmts = rw.body(part, defined)
            if stmts and isinstance(stmts[-1], ast.Return):
                if ret_field is None:
                    raise src.error(stmts[-1], "this kernel returns a value: annotate its return type "
                                               "(def k() -> ti.f32)")
                r = stmts[-1]
                p = rw.field_name(ret_field, r)
                stmts[-1] = _loc(ast.Assign(targets=[_loc(ast.Subscript(value=_name(p.id, r), slice=ast.Constant(
                    value=None), ctx=ast.Store()), r)], value=_call("__ti_as", [_name(p.id, r), r.value], r)), r)
            bounds, prologue, node = None, [], part[0]
        else:
            node = part
            stmts, bounds, prologue = loop_kernel(rw, part, defined)
        # top-level locals of earlier serial code that this launch reads: recomputed here
        need = _uses_names(stmts)
        pre = []
        for st in reversed(carried):
            tnames = {t.id for t in st.targets}
            if tnames & need:
                pre.insert(0, st)
                need |= _uses_names([st])
        pre_rw = [rw.visit(copy.deepcopy(st)) for st in pre]
        if rw.random:
            seed = [_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_rng", ctx=ast.Store()), node)],
                                    value=_call("__ti_rand_init", [_name("__ti_seed", node),
                                                                   _name("__ti_lin", node)], node)), node)]
        else:
            seed = []
        stmts = prologue + pre_rw + seed + stmts if kind == "loop" else pre_rw + seed + stmts
        if kind == "serial":
            stmts = ([_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_lin", ctx=ast.Store()), node)],
                                      value=ast.Constant(value=0)), node)] if rw.random else []) + stmts
            carried += [st for st in part if isinstance(st, ast.Assign)
                        and all(isinstance(t, ast.Name) for t in st.targets)]
        used = rw.uses | {u for i in shared.inlines.values() if i.name in rw.uses for u in i.uses}
        fparams = [(name, f) for name, f in shared.fields.values() if name in used]
        names_used = _uses_names(stmts)
        sparams = [a for a in arg_types if a in names_used]
        launches.append(build_kernel(tikernel, py, src, fdef, k, kind, stmts, fparams, sparams, arg_types,
                                     bounds, rw.random, ns, shared, node))
    return Translation(launches, host_assigns, ret_field)


def loop_kernel(rw: Rewriter, node: ast.For, defined: set):
    """A top-level loop: (statements, host bounds, prologue) of its parallel kernel."""
    if node.orelse:
        raise rw.error(node, "for-else is not supported")
    dims = rw.loop_dims(node.iter)
    if dims is None:
        it = node.iter
        if rw.static(it.func) is py_builtins.reversed:
            raise rw.error(it, "a top-level (parallel) loop cannot be reversed(...)")
        if len(it.args) == 1:
            bounds, grouped = [(ast.Constant(value=0), it.args[0])], False
        elif len(it.args) == 2:
            bounds, grouped = [(it.args[0], it.args[1])], False
        else:
            raise rw.error(it, "a top-level (parallel) range loop takes range(stop) or range(start, stop)")
    else:
        bounds, grouped = dims
    n = len(bounds)
    if n > 4:
        raise rw.error(node.iter, "gradkit launches have at most 4 dimensions")
    targets = rw.target_names(node, n, grouped)
    tids = [f"__ti_t{k}" for k in range(n)]
    pro = []
    tid_call = _loc(ast.Call(func=_loc(ast.Attribute(value=_name("__ti_gk", node), attr="tid", ctx=ast.Load()),
                                       node), args=[], keywords=[]), node)
    tgt = _loc(ast.Name(id=tids[0], ctx=ast.Store()), node) if n == 1 else \
        _loc(ast.Tuple(elts=[_loc(ast.Name(id=t, ctx=ast.Store()), node) for t in tids], ctx=ast.Store()), node)
    pro.append(_loc(ast.Assign(targets=[tgt], value=tid_call), node))
    idx = []
    for k, (lo, _) in enumerate(bounds):
        if isinstance(lo, ast.Constant) and lo.value == 0:
            idx.append(_name(tids[k], node))
        else:
            idx.append(_loc(ast.BinOp(left=_name(tids[k], node), op=ast.Add(), right=_name(f"__ti_lo{k}", node)),
                            node))
    lin = idx[0]
    for e in idx[1:]:
        lin = _loc(ast.BinOp(left=_loc(ast.BinOp(left=lin, op=ast.Mult(), right=ast.Constant(value=7919)), node),
                             op=ast.Add(), right=e), node)
    if grouped:
        rw.grouped.add(targets[0])
        pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id=targets[0], ctx=ast.Store()), node)],
                                   value=_call("__ti_ivec", idx, node)), node))
    else:
        for t, e in zip(targets, idx):
            pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id=t, ctx=ast.Store()), node)], value=e), node))
    body = node.body
    stmts = rw.body(body, defined | set(targets))
    if _continues(body):       # `continue` in the parallel loop: one pass of a loop it can leave
        stmts = [_loc(ast.For(target=_loc(ast.Name(id="__ti_once", ctx=ast.Store()), node),
                              iter=_call("range", [ast.Constant(value=1)], node), body=stmts, orelse=[]), node)]
    if rw.random:
        pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_lin", ctx=ast.Store()), node)], value=lin),
                        node))
    host = [(_host_code(lo, rw.src), _host_code(hi, rw.src)) for lo, hi in bounds]
    return stmts, host, pro


def _host_code(expr, src):
    e = ast.Expression(body=copy.deepcopy(expr))
    ast.fix_missing_locations(e)
    return compile(e, src.file, "eval")


def _continues(stmts) -> bool:
    for st in stmts:
        if isinstance(st, ast.Continue):
            return True
        if isinstance(st, (ast.For, ast.While)):
            continue
        for field in ("body", "orelse"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and _continues(inner):
                return True
    return False


def build_kernel(tikernel, py, src, fdef, k, kind, stmts, fparams, sparams, arg_types, bounds, random, ns,
                 shared, node) -> Launch:
    """The gk.kernel of one launch, compiled from the rewritten statements with the user's locations."""
    name = f"{py.__name__}_{k}_{'loop' if kind == 'loop' else 'serial'}_L{src.first_line + node.lineno - 1}"
    params = [p for p, _ in fparams] + list(sparams)
    if bounds is not None:
        params += [f"__ti_lo{j}" for j, (lo, _) in enumerate(bounds)]
    if random:
        params.append("__ti_seed")
    anns = {}
    for p, f in fparams:
        anns[p] = gk.array(dtype=f.elem, ndim=max(1, len(f.shape)))
    for a in sparams:
        anns[a] = arg_types[a]
    for p in params:
        if p.startswith("__ti_lo") or p == "__ti_seed":
            anns[p] = gk.int32
    new = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                                        vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                        defaults=[]),
                          body=stmts or [ast.Pass()], decorator_list=[], returns=None, type_params=[])
    _loc(new, fdef)
    for a in new.args.args:
        _loc(a, fdef)
    info = copy.copy(src)
    info.tree = new
    info.name = name
    code = compile(f"def {name}({', '.join(params)}):\n    pass\n", src.file, "exec")
    glb = py.__globals__
    scope: dict = {}
    exec(code, glb, scope)  # noqa: S102 - a stub with the generated signature; its body is never run
    stub = scope[name]
    stub.__annotations__ = anns
    stub.__gk_source__ = info
    stub.__gk_promote_ints__ = True         # Taichi's int op float → float
    ker = gk.Kernel(stub, default_fp=runtime.settings.default_fp)
    helpers = {k2: v for k2, v in ns.items() if k2 not in glb or glb[k2] is not v}
    helpers.update(shared.helpers)
    helpers["__ti_rand_init"] = gk.rand_init
    stub.__gk_enclosing__ = helpers
    if "__gk_lines__" not in stub.__dict__:
        stub.__gk_lines__ = (src.file, src.lines)
    return Launch(ker, [f for _, f in fparams], list(sparams), bounds, random, None, node.lineno)


def debug_source(translation) -> str:
    """The generated kernels as Python text (for error reports and the porting page's examples)."""
    out = []
    for launch in translation.launches:
        out.append(ast.unparse(launch.kernel.pyfunc.__gk_source__.tree))
    return "\n\n".join(out)



