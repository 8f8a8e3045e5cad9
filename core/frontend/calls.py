"""Lowering of calls inside kernels: gradkit builtins, types (casts and constructors), atomics,
gk.tid / gk.static, Python builtins with kernel meanings (print included), @gk.func calls and compile-time
transforms."""

from __future__ import annotations

import ast
import builtins as py_builtins
import inspect

from .. import types as T
from ..builtins import BUILTINS
from ..ir import Value
from ..lang import LangFunction, NAMES
from .macros import Advance, IREmit, unwrap
from .printing import lower_print
from ..ops import Op
from .context import NUMBER, ArrayView, StructArrayRef, StructValue, TidCall
from .exprs import PY_ALIASES, UNSUPPORTED_EXPR, _callee_name, _name, _with_scalar

class CallLowering:
    """Mixin: call expressions."""

    def expr_Call(self, node):
        for a in [*node.args, *(k.value for k in node.keywords)]:
            if type(a) in UNSUPPORTED_EXPR:
                raise self.error(a, f"{UNSUPPORTED_EXPR[type(a)]} are not supported in kernels")
        callee = self.expr(node.func)
        if isinstance(getattr(callee, "_gk_struct", None), T.StructType):
            return self.construct_struct(callee._gk_struct, node)
        if isinstance(callee, LangFunction):
            return self.call_lang(callee, node)
        if isinstance(callee, T.Type):
            return self.call_type(callee, node)
        if callee in PY_ALIASES:
            return self.call_lang(NAMES[PY_ALIASES[callee]], node)
        if callee is py_builtins.float:
            return self.call_float(node)
        if callee is py_builtins.print:         # one print instruction (core/frontend/printing.py)
            return lower_print(self, node)
        if callee is py_builtins.int or callee is py_builtins.bool:
            return self.call_type(T.as_type(callee), node)
        if callee is py_builtins.len:
            (arg,) = self.call_args(node, 1, "len")
            if isinstance(arg, StructArrayRef):
                arg = arg.leaves()[0]
            view = ArrayView.of(arg)
            if view is None:
                raise self.error(node, "len() needs an array")
            return self.b.emit(Op.SHAPE, [view.arr], [T.int32], {"axis": len(view.prefix)}).result
        if callee is py_builtins.range or callee is py_builtins.reversed:
            raise self.error(node, f"{callee.__name__}() can only be used as the iterable of a for loop")
        if getattr(callee, "_gk_func", False):
            return self.call_func(callee, node)
        if getattr(callee, "_gk_static", False):     # compile-time transforms such as gk.grad(f)
            args = self.call_args(node, None, getattr(callee, "__name__", "function"))
            kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
            if any(isinstance(v, Value) for v in [*args, *kwargs.values()]):
                raise self.error(node, f"{callee.__name__}() needs compile-time arguments")
            return callee(*args, **kwargs)
        if getattr(callee, "_gk_kernel", False):
            raise self.error(node, f"cannot call kernel '{callee.key}' from a kernel; make it a @gk.func")
        raise self.error(node, f"cannot call {_name(callee)} inside a kernel; "
                               "only gradkit builtins, types and @gk.func functions can be called")

    def construct_struct(self, stype: T.StructType, node) -> StructValue:
        """`Body(pos, vel=v)` in a kernel: fields given by position or keyword; the rest are zero."""
        args = self.call_args(node, None, stype.name)
        names = list(stype.fields)
        if len(args) > len(names):
            raise self.error(node, f"{stype.name}() takes at most {len(names)} field values, got {len(args)}")
        given = dict(zip(names, args))
        for k in node.keywords:
            if k.arg not in stype.fields or k.arg in given:
                why = "has no field" if k.arg not in stype.fields else "got twice the field"
                raise self.error(k, f"{stype.name}() {why} '{k.arg}'")
            given[k.arg] = self.expr(k.value)
        return self.struct_value(stype, given, node)

    def struct_value(self, stype: T.StructType, given: dict, node) -> StructValue:
        fields = {}
        for name, t in stype.fields.items():
            v = self.struct_of(given.get(name))
            if t.is_struct:
                if v is not None and not (isinstance(v, StructValue) and v.type is t):
                    raise self.error(node, f"{stype.name}() field '{name}' is a {t.name} struct, got {_name(v)}")
                fields[name] = v if v is not None else self.struct_value(t, {}, node)
            elif t.is_array:
                if v is None or ArrayView.of(v) is None:
                    raise self.error(node, f"{stype.name}() needs its array field '{name}' ({t.name}): arrays "
                                           "cannot be created inside kernels")
                fields[name] = v
            else:
                fields[name] = self.coerce(0 if v is None else v, t, node, f"{stype.name} field '{name}'")
        return StructValue(stype, fields)

    def call_args(self, node, arity: int | None, name: str) -> list:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(node, "star-arguments are not supported in kernels")
        if arity is not None and len(node.args) != arity:
            raise self.error(node, f"{name}() takes {arity} argument{'s' * (arity != 1)}, got {len(node.args)}")
        return [self.expr(a) for a in node.args]

    def call_lang(self, fn: LangFunction, node):
        if fn.kind == "static":
            return self.static_eval(node)
        if fn.kind == "tid":
            self.call_args(node, 0, "tid")
            return TidCall()
        if fn.kind == "macro":
            return self.call_macro(fn.name, node, macro=fn.macro)
        if fn.kind == "library":
            return self.call_library(fn, node)
        if fn.kind == "atomic":
            args = self.call_args(node, None, fn.name)
            view = ArrayView.of(args[0]) if args else None
            if len(args) < 3 or view is None:
                raise self.error(node, f"{fn.name}(array, index..., value) needs an array, its indices and a value")
            idx_nodes = node.args[1:-1]
            if len(idx_nodes) != view.type.ndim:
                raise self.error(node, f"{fn.name}: array '{view.hint}' has {view.type.ndim} dimensions but "
                                       f"{len(idx_nodes)} indices were given")
            idx = view.indices([self.index(n) for n in idx_nodes])
            val = self.coerce(args[-1], view.type.dtype, node.args[-1], f"{fn.name} value for array '{view.hint}'")
            return self.atomic(fn.prim, view.arr, idx, val, node)
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        args = self.call_args(node, None, fn.name)
        if fn.prim == "identity":
            if args or set(kwargs) - {"n", "dtype"} or "n" not in kwargs:
                raise self.error(node, "identity(n=N, dtype=gk.float32) takes keyword arguments")
            return self.prim("identity", n=kwargs["n"], dtype=T.as_type(kwargs.get("dtype", T.float32)), node=node)
        if kwargs:
            raise self.error(node, f"{fn.name}() takes no keyword arguments")
        if fn.name == "mul" and len(args) == 2 and all(getattr(getattr(a, "type", None), "is_quat", False)
                                                        for a in args):
            return self.call_macro("quat_mul", node, args)
        if fn.name == "select":
            if len(args) != 3:
                raise self.error(node, f"select() takes 3 arguments, got {len(args)}")
            args = [args[0], args[2], args[1]]
        return self.call_prim(fn.prim, args, node)

    def call_macro(self, name: str, node, args=None, macro=None):
        """A core/library macro: its result built from primitives right here. `macro`: the LangFunction's
        own (a dialect's macros are LangFunctions that are not names of gk, so not in NAMES)."""
        if args is None:
            args = self.call_args(node, None, name)
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords} if isinstance(node, ast.Call) else {}
        fn = macro or NAMES[name].macro
        try:
            inspect.signature(fn).bind(None, *args, **kwargs)
        except TypeError:
            params = list(inspect.signature(fn).parameters)[1:]
            raise self.error(node, f"{name}({', '.join(params)}) takes {len(params)} argument"
                                   f"{'s' * (len(params) != 1)}, got {len(args) + len(kwargs)}") from None
        out = fn(IREmit(self, node, name), *args, **kwargs)
        if isinstance(out, Advance):            # gk.randf(state): `state` now holds the advanced state
            if out.state is not None:           # (None: only out-arguments, Warp's mesh_query_point(..., u, v))
                if not node.args or self.local_name(node.args[0]) is None:
                    raise self.error(node, f"{name}(state, ...) needs a local variable holding the random state "
                                           "(state = gk.rand_init(seed, offset)), which it advances")
                self.assign_out_argument(node.args[0], unwrap(out.state), name, "state", node)
            for k, value in out.outs.items():   # out-arguments: hash_grid_query_next(query, index)
                if k >= len(node.args):
                    raise self.error(node, f"{name}() needs a local variable as argument {k + 1}, which it assigns")
                self.assign_out_argument(node.args[k], unwrap(value), name, f"argument {k + 1}", node)
            out = out.value
        return unwrap(out)

    def call_library(self, fn: LangFunction, node):
        """A decomposition written in the kernel language (core/library/decompositions.py): `U, s, V =
        gk.svd3(A)`, or Warp's out-argument form `gk.svd3(A, U, s, V)`, which assigns the locals U, s, V."""
        outs = fn.outputs
        if node.keywords or len(node.args) not in (1, 1 + len(outs)) or isinstance(node.args[0], ast.Starred):
            raise self.error(node, f"{fn.name}() takes a matrix A, or A and the local variables "
                                   f"{', '.join(outs)} it assigns; got {len(node.args)} arguments")
        arg = self.expr(node.args[0])
        func, why = fn.resolve(arg.type if isinstance(arg, Value) else None)
        if func is None:
            raise self.error(node.args[0], f"{fn.name}(): {why}")
        callee = func.ir_function(self.building)
        ins = self.b.emit(Op.CALL, [arg], callee.ret_types, {"func": callee, "callee": func})
        if len(node.args) == 1:
            return tuple(ins.results)
        for target, what, value in zip(node.args[1:], outs, ins.results):
            self.assign_out_argument(target, value, fn.name, f"out-argument {what}", node)
        return None

    def assign_out_argument(self, target, value: Value, fn_name: str, what: str, node) -> None:
        """A call that assigns the local variable its argument names (Warp's out-arguments, a random
        state): a local name or a struct field of a local, holding nothing yet or a value of the same type."""
        name = self.local_name(target)
        old = self.env.get(name) if name is not None else None
        if isinstance(value, StructValue):      # a struct local (a query): re-bound field by field
            if name is None or (old is not None and getattr(old, "type", None) is not value.type):
                raise self.error(target, f"{fn_name}(): {what} must be a local variable holding a {value.type.name}")
            self.check_rebind(name, target)
            self.bind_struct(name, value)
            self.maybe_undefined.discard(name)
            return
        if name is None or (isinstance(old, Value) and old.type is not value.type):
            raise self.error(target, f"{fn_name}(): {what} must be a local variable of type {value.type.name}"
                                     + (f", not {old.type.name}" if isinstance(old, Value) else ""))
        self.rebind(name, value)
        self.maybe_undefined.discard(name)

    def call_prim(self, name: str, args: list, node):
        entry = BUILTINS[name]
        if entry.arity is not None and len(args) != entry.arity:
            shown = "select" if name == "where" and isinstance(node, ast.Call) and _callee_name(node) == "select" \
                else _callee_name(node) or name
            raise self.error(node, f"{shown}() takes {entry.arity} arguments, got {len(args)}")
        if all(not isinstance(a, Value) for a in args) and entry.eval is not None and \
                all(isinstance(a, NUMBER) for a in args) and name not in ("where",):
            return entry.eval(*args).item() if hasattr(entry.eval(*args), "item") else entry.eval(*args)
        if name == "where":
            cond = self.truth(args[0], node)
            a, b = self.widen(*self.unify(args[1], args[2], node), node)
            return self.prim("where", cond, a, b, node=node)
        like = next((a.type for a in args if isinstance(a, Value)), None)
        vals = []
        for a in args:
            if isinstance(a, Value):
                vals.append(a)
            else:
                tgt = like.scalar if like is not None and (like.is_vector or like.is_matrix) else like
                vals.append(self.materialize(a, tgt, node))
        if any(v.type.scalar is T.float64 for v in vals) and any(v.type.scalar is T.float32 for v in vals):
            vals = [self.widen_float(v, _with_scalar(v.type, T.float64), node) if v.type.scalar is T.float32
                    else v for v in vals]
        if vals and all(v.type.is_scalar and v.type.is_int for v in vals) and BUILTINS[name].float_only:
            vals = [self.int_to_float(v, node) for v in vals]
        return self.prim(name, *vals, node=node)

    def call_type(self, t: T.Type, node):
        args = self.call_args(node, None, t.name)
        if t.is_scalar:
            if len(args) != 1:
                raise self.error(node, f"{t.name}() takes 1 argument, got {len(args)}")
            (x,) = args
            if not isinstance(x, Value):   # an explicit cast of a literal gives a strongly typed constant
                if isinstance(x, (int, float)) and t.out_of_range(x):   # NumPy would raise or give inf
                    raise self.range_error(x, t, node)
                c = self.materialize(t(x).item() if not t.is_bool else bool(x), t, node)
                self.weak.pop(c, None)
                return c
            if t is T.bool_ and not x.type.is_bool:
                return self.truth(x, node)
            if t is T.float64 and x.type is T.float32:
                return self.widen_float(x, t, node)
            return self.prim("cast", x, to=t, node=node)
        if t.is_array:
            raise self.error(node, "arrays cannot be created inside kernels")
        comps: list[Value] = []
        if not args:
            return self.materialize(0, t, node)
        if len(args) == 1 and not isinstance(args[0], Value):
            return self.materialize(args[0], t, node)
        if len(args) == 1 and isinstance(args[0], Value) and not args[0].type.is_scalar:
            src = args[0]
            if src.type.shape != t.shape:
                raise self.error(node, f"cannot convert {src.type.name} to {t.name}")
            return self.prim("cast", src, to=t, node=node)
        for a in args:
            if isinstance(a, Value) and a.type.is_vector:
                comps.extend(self.prim("extract", a, self.b.const(k, T.int32)) for k in range(a.type.length))
            else:
                comps.append(self.coerce(a, t.scalar, node, f"{t.name} component"))
        if len(comps) == 1 and t.ncomp > 1:
            comps = comps * t.ncomp
        if len(comps) != t.ncomp:
            raise self.error(node, f"{t.name} takes {t.ncomp} components, got {len(comps)}")
        return self.prim("construct", *comps, type=t, node=node)

    def call_float(self, node):
        """Python's `float(x)`: a Python number stays one (folded as Python would); a value becomes the
        default float type (precision.py), weak, as Taichi's `float(x)` is `ti.cast(x, default_fp)`."""
        (x,) = self.call_args(node, 1, "float")
        if isinstance(x, TidCall):
            x = self.tid_values(1, node)[0]
        if isinstance(x, NUMBER):
            if isinstance(x, int) and T.float64.out_of_range(x):
                raise self.range_error(x, T.float64, node)
            return float(x)
        if not (isinstance(x, Value) and x.type.is_scalar):
            raise self.error(node, f"float() takes a number, got {_name(x)}")
        t = self.default_fp
        if x.type is t:
            return x
        if x.type.is_int or x.type.is_bool:
            return self.int_to_float(x, node)
        if x.type is T.float32:           # float(v) under default_fp=float64
            return self.widen_float(x, t, node)
        r = self.prim("cast", x, to=t, node=node)       # float64 -> float32: rounded
        self.weak_computed(r, node)
        return r

    def static_eval(self, node):
        if len(node.args) != 1 or node.keywords:
            raise self.error(node, "gk.static() takes exactly one expression")
        code = compile(ast.Expression(node.args[0]), self.src.file, "eval")
        ns = dict(self.static_ns)
        for name, v in self.env.items():
            if isinstance(v, Value):
                ns.pop(name, None)
            else:
                ns[name] = v
        for name in code.co_names:
            if isinstance(self.env.get(name), Value):
                raise self.error(node, f"gk.static() needs a compile-time expression, but '{name}' is a run-time "
                                       "value (a kernel local or parameter)")
        try:
            return eval(code, ns)  # noqa: S307 - evaluating the user's own kernel source at compile time
        except Exception as exc:   # the user's expression failed: report it at its location
            raise self.error(node, f"gk.static() expression failed: {type(exc).__name__}: {exc}") from None
