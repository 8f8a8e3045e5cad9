"""Taichi statements → gradkit's kernel language, one statement at a time (translate.py splits a kernel
into launches and calls this): global fields become array parameters `__ti_f<k>`, `@ti.func` calls inline
macros, vector methods and Taichi's typing rules the `__ti_*` macros (macros.py, lang.py), each generated
node keeping the line and column of the Taichi source it came from. Struct members and static loops over
fields are compile_time.py's part of the rewriter, inlined `@ti.func` bodies inline.py's; `Shared`
(scope.py) is what one kernel's launches share (fields, inlined functions, helpers)."""

from __future__ import annotations

import ast
import builtins as py_builtins
import copy

import gradkit as gk
from gradkit.core.errors import CompileError
from gradkit.core.frontend.source import SourceInfo

from . import runtime
from .compile_time import _STATIC, CompileTimeRewrites
from .errors import TaichiUnsupportedError, unsupported
from .fields import Field
import numpy as np

from .lang import METHODS, Matrix, Vector
from .scope import Shared, _call, _literal, _loc, _name, _numbers


_noted: set = set()


def _note_once(msg: str) -> None:
    if msg not in _noted:
        _noted.add(msg)
        runtime._note(msg)


class Rewriter(CompileTimeRewrites, ast.NodeTransformer):
    """Taichi statements → gradkit kernel-language statements (see the module docstring)."""

    def __init__(self, shared: Shared, ns: dict, locals_: set, src: SourceInfo, what: str):
        self.shared, self.ns, self.locals, self.src, self.what = shared, ns, locals_, src, what
        self.grouped: set = set()       # names holding a ti.grouped index vector
        self.uses: set = set()          # field params and inlines used by the statements rewritten
        self.random = False
        self.bitwise = None             # where the first ti.atomic_and/or/xor is (not atomic: serial code only)
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
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = self.static(node.value)      # fields["U"], fields[0]: a Python container of fields
            if isinstance(base, (dict, list, tuple)):
                try:
                    return base[node.slice.value]
                except (KeyError, IndexError, TypeError):
                    return _STATIC
            return _STATIC
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is _STATIC or isinstance(base, (int, float)):
                return _STATIC
            try:
                return getattr(base, node.attr)
            except TaichiUnsupportedError as exc:       # ti.eig, ti.GUI, ... named where the kernel uses it
                loc = self.src.loc(node)
                raise type(exc)(f"{loc.file}:{loc.line}: {exc}") from None
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
        new = self.unstruct(node)
        if new is not node:
            return self.visit(new)
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
        node = self.unstruct(node)
        self.no_struct_element(node)
        if isinstance(node.ctx, ast.Load):
            whole = self.field_of(node)
            if whole is not None:               # a field taken from a container: fields["U"]
                return self.field_name(whole, node)
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
            self.bitwise = self.bitwise or inline.bitwise
            return node
        from . import lang as ti_lang
        atomics = {getattr(ti_lang, "atomic_" + k): k for k in ti_lang.ATOMIC_KINDS}
        if callee is not _STATIC and callee in atomics:
            return self.atomic(atomics[callee], node)
        if callee is ti_lang.random:
            self.random = True
        if callee is py_builtins.print:       # Taichi's print format (printing.py)
            if any(isinstance(a, ast.JoinedStr) for a in node.args):
                _note_once("print() of an f-string inside kernels is ignored (print the values as arguments)")
                return _loc(ast.Constant(value=None), node)
            new = _call("__ti_print", [self.visit(a) for a in node.args], node)
            new.keywords = [self.visit(k) for k in node.keywords]
            return new
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
                              f"{self.src.loc(node).line})", "write `x += v`, or keep the value in a field")
        if kind in ("and", "or", "xor"):
            loc = self.src.loc(node)
            self.bitwise = self.bitwise or f"{loc.file}:{loc.line}"
        idx = self.index_expr(target.slice)
        return _call(f"__ti_atomic_{kind}", [self.field_name(f, target.value), idx, self.visit(value)], node)

    def index_expr(self, sl):
        if isinstance(sl, ast.Constant) and sl.value is None:
            return sl
        if isinstance(sl, ast.Tuple):
            return _loc(ast.Tuple(elts=[self.visit(e) for e in sl.elts], ctx=ast.Load()), sl)
        return self.visit(sl)

    def inline(self, callee, node):
        from .inline import Inline
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
        node.targets = [self.unstruct(t) for t in node.targets]
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
        t = node.target = self.unstruct(node.target)
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
        node.body = self.loop_body(node.body, self.defined, node)
        return node

    def loop_body(self, stmts: list, defined: set, node) -> list:
        """A run-time loop's body; one that draws ti.random() starts with `__ti_rng = __ti_rng`, so the
        frontend (which finds loop-carried locals syntactically) carries the advanced random state from
        one iteration to the next instead of drawing the same number in each."""
        before, self.random = self.random, False
        body = self.body(stmts, defined)
        if self.random:
            body.insert(0, _loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_rng", ctx=ast.Store()), node)],
                                           value=_name("__ti_rng", node)), node))
        self.random |= before
        return body

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
            fields = self.static_fields(node)
            if fields is not None:
                return self.unroll(node, fields)
            node.body = self.body(node.body, self.defined)
            return node
        dims = self.loop_dims(node.iter)
        if dims is None:
            node.iter = self.visit(node.iter)
            node.body = self.loop_body(node.body, self.defined | {n.id for n in ast.walk(node.target)
                                                                   if isinstance(n, ast.Name)}, node)
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
        inner = self.loop_body(node.body, self.defined | set(targets), node)
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
        if f is None and self.is_struct(it):
            f = self.static(it)
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
