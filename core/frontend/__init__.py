"""Python source → typed core IR.

`lower_function(pyfunc, kind)` parses a kernel or device function and builds its
IR in one typed walk (context.py: environment and coercions; exprs.py:
expressions; stmts.py: statements and control flow).
"""

from __future__ import annotations

import ast
import inspect
import typing

from .. import types as T
from ..errors import CompileError
from ..ir import Function, Param, Value
from ..ops import Op
from ..verify import verify
from .calls import CallLowering
from .components import ComponentWrites
from .context import ArrayView, LoweringContext, StructArrayRef, StructElement, StructValue
from .exprs import ExprLowering, _name
from .loops import LoopLowering
from .source import SourceInfo
from .stmts import FirstReturn, StmtLowering, _contains


REMAINDERS = ("floored", "truncated")


def is_generic(ann) -> bool:
    """Whether a parameter annotation is generic: typing.Any, or an object whose `_gk_generic(type)` says which
    types it admits (gradkit.warp's `wp.array[Any]`); its type comes from each launch's or call's arguments."""
    return ann is typing.Any or callable(getattr(ann, "_gk_generic", None))


def generic_matches(ann, t: T.Type) -> bool:
    """Whether a generic annotation admits the concrete type `t`."""
    return ann is typing.Any or bool(ann._gk_generic(t))


def _generic_name(ann) -> str:
    return "typing.Any" if ann is typing.Any else str(ann)
LOOP_LOCALS = ("scoped", "last")


class Lowerer(LoweringContext, ExprLowering, CallLowering, StmtLowering, LoopLowering, ComponentWrites):
    """Lowers one kernel or @gk.func to IR."""

    def __init__(self, pyfunc, kind: str, building: tuple = (), max_unroll: int | None = None, grad_of=None,
                 views: tuple = (), default_fp: T.ScalarType = T.float32, remainder: str = "floored",
                 loop_locals: str = "scoped", probing: bool = False, param_types: tuple = ()):
        super().__init__(pyfunc, SourceInfo(pyfunc), kind, building, default_fp)
        if remainder not in REMAINDERS:
            raise ValueError(f"remainder={remainder!r}: expected one of {', '.join(map(repr, REMAINDERS))}")
        if loop_locals not in LOOP_LOCALS:
            raise ValueError(f"loop_locals={loop_locals!r}: expected one of {', '.join(map(repr, LOOP_LOCALS))}")
        self.options = dict(max_unroll=max_unroll, grad_of=grad_of, views=views, default_fp=default_fp,
                            remainder=remainder, loop_locals=loop_locals, param_types=param_types)
        # ((name, type), ...): the types of generic parameters (typing.Any) for this specialisation
        self.param_overrides = dict(param_types)
        # a local first assigned inside a loop body and read after the loop: "scoped" (gradkit's, Taichi's:
        # an error) or "last" (Warp's: it holds the last trip's value, zero when the loop never ran)
        self.loop_locals = loop_locals
        self.probing = probing          # lowering only to find the types of the first `return` (probe_returns)
        # what `%` written in this function's source means: "floored" (Python's, gradkit's default) or
        # "truncated" (C's, the `rem` builtin: Warp's dialect, where `/` on integers truncates too and
        # `*` with a matrix is the matrix product);
        # library macros keep their own `%`
        self.remainder = remainder
        self.building = building
        self.views = views                      # (param index, base array type): see Func.ir_function
        self.grad_of = grad_of                  # the Func this function is the custom gradient of
        self.grad_params: list[str] = []
        self.max_unroll = max_unroll
        self.ret_flag: str | None = None
        self.retval_names: list[str] = []
        self.final_returns: list[Value] | None = None
        self.ret_struct = None                  # the StructType a @gk.func returns (its fields flattened)
        self.ret_array_params: list | None = None   # per array field of it: the parameter it passes back
        self.param_values: list[Value] = []
        self.inferred_returns = False           # a @gk.func without a return annotation: typed by its returns
        self.first_return_line: int | None = None   # set when those types come from its first return

    def probe_returns(self, tree) -> None:
        """Type an unannotated @gk.func that returns from inside a branch or loop as Warp does: by the
        first `return` in the source (later returns must give the same types). A second Lowerer lowers the
        body up to that return; its IR is thrown away."""
        probe = Lowerer(self.pyfunc, self.kind, self.building, probing=True, **self.options)
        try:
            fn = probe.run()
        except FirstReturn as first:
            self.ret_types, self.ret_struct = list(first.ret_types), first.ret_struct
        else:        # no return with a value is lowered (compile-time branches dropped them): returns nothing
            self.ret_types, self.ret_struct = list(fn.ret_types), fn.attrs.get("ret_struct")
        self.first_return_line = probe.first_return_line

    def call_func(self, func, node, args: list | None = None):
        """A @gk.func call: its arguments from `node`, or `args` already lowered (a library macro's)."""
        if func in self.building:
            chain = " -> ".join(f.__name__ for f in (*self.building[self.building.index(func):], func))
            raise self.error(node, f"recursion is not supported ({chain})")
        if args is None:
            args = self.call_args(node, None, func.__name__)
        generic = func.generic_params() if getattr(func, "_gk_func", False) else ()
        param_types = self.generic_arg_types(func, generic, args, node) if generic else ()
        views = tuple((k, a.arr.type, len(a.prefix)) for k, a in enumerate(args) if isinstance(a, ArrayView) and a.prefix)
        if views and (not getattr(func, "_gk_func", False) or func.custom_grad or func.custom_replay or func.native):
            raise self.error(node, f"{func.__name__}() cannot take a sub-array view (it has a custom gradient, "
                                   "replay or native code); pass the whole array and its indices")
        try:
            callee = (func.ir_function(self.building, views, param_types) if views or param_types
                      else func.ir_function(self.building))
        except CompileError as exc:
            loc = self.src.loc(node)
            raise CompileError(f"{exc}\n  (called from '{self.name}' at {loc.file}:{loc.line})") from None
        extra = [i if i.type is T.int32 else self.prim("cast", i, to=T.int32)
                 for a in args if isinstance(a, ArrayView) for i in a.prefix]
        n_params = callee.attrs.get("n_user_params", len(callee.params) - len(extra))
        if len(args) != n_params:
            raise self.error(node, f"{func.__name__}() takes {n_params} argument"
                                   f"{'s' * (n_params != 1)}, got {len(args)}")
        structs = {k: (name, t) for k, name, t in callee.attrs.get("param_structs", ())}
        flat = []
        args = [self.struct_of(a) for a in args]
        for k, a in enumerate(args):
            name, st = structs.get(k, (None, None))
            if st is not None or isinstance(a, StructValue):
                if not (isinstance(a, StructValue) and a.type is st):
                    want = f"parameter '{name}' is a {st.name} struct" if st else f"argument {k + 1} is not a struct"
                    raise self.error(node.args[k], f"{func.__name__}(): {want}, got {_name(a)}")
                flat += a.flat()
            else:
                flat.append(a.arr if isinstance(a, ArrayView) and a.prefix else a)
        vals = [self.coerce(a, p.type, node, f"argument '{p.name}' of {func.__name__}()")
                for a, p in zip(flat, callee.params)] + extra
        ins = self.b.emit(Op.CALL, vals, callee.ret_types, {"func": callee, "callee": func})
        for k, consts in callee.attrs.get("weak_results", ()):    # unannotated returns of weak values
            self.weak_computed(ins.results[k], node, consts)
        if "ret_struct" in callee.attrs:      # array fields are arguments passed back: the caller's arrays
            results, passed = iter(ins.results), iter(callee.attrs["ret_array_params"])
            return self.struct_from_flat(callee.attrs["ret_struct"],
                                         [vals[next(passed)] if t.is_array else next(results)
                                          for _, t in callee.attrs["ret_struct"].flat("")])
        if not ins.results:
            return None
        return ins.results[0] if len(ins.results) == 1 else tuple(ins.results)

    def generic_arg_types(self, func, generic: tuple, args: list, node) -> tuple:
        """((name, type), ...) of a @gk.func's generic parameters at this call, from the arguments' types
        (a Python float literal float32, an int int32, as Warp infers them); the call's specialisation."""
        n_params = len(inspect.signature(func.pyfunc).parameters)
        if len(args) != n_params:
            raise self.error(node, f"{func.__name__}() takes {n_params} argument"
                                   f"{'s' * (n_params != 1)}, got {len(args)}")
        out = []
        for k, name, ann in generic:
            a = args[k]
            t = (a.arr.stype if isinstance(a, StructElement) else T.bool_ if isinstance(a, bool) else T.int32 if isinstance(a, int) else
                 T.float32 if isinstance(a, float) else getattr(a, "type", None))
            if not isinstance(t, T.Type) or not generic_matches(ann, t):
                raise self.error(node.args[k] if k < len(node.args) else node,
                                 f"{func.__name__}(): parameter '{name}' ({_generic_name(ann)}) cannot take "
                                 f"{_name(a)}")
            out.append((name, t))
        return tuple(out)

    def start_grad_function(self, params, tree) -> None:
        """A @gk.func_grad body: inputs of the primal function, then adjoints of its outputs."""
        primal = self.grad_of.ir_function(self.building)
        n_in, n_out = len(primal.params), len(primal.ret_types)
        if len(params) != n_in + n_out:
            raise self.error(tree, f"custom gradient '{self.name}' must take the {n_in} inputs of "
                                   f"'{primal.name}' followed by {n_out} output adjoint(s); it takes {len(params)}")
        for p, q in zip(params, primal.params):
            if p.type is not q.type:
                raise self.error(tree, f"custom gradient '{self.name}': parameter '{p.name}' is {p.type.name} but "
                                       f"'{primal.name}' takes {q.type.name}")
        if _contains(tree.body, (ast.Return,), False):
            raise self.error(tree, f"custom gradient '{self.name}' updates gk.adjoint[x] instead of returning")
        floats = [p for p in params[:n_in] if not p.type.is_array and p.type.scalar.is_float]
        self.grad_params = [p.name for p in floats]
        self.grad_types = {p.name: p.type for p in floats}
        for p in floats:     # scalars start as a weak 0.0; vectors and matrices as typed zeros
            self.env[f"__adj_{p.name}"] = 0.0 if p.type.is_scalar else self.materialize(0.0, p.type, tree)

    def static_annotation(self, ann_node):
        code = compile(ast.Expression(ann_node), self.src.file, "eval")
        try:
            return eval(code, self.static_ns)  # noqa: S307 - the user's own annotation
        except Exception as exc:
            raise self.error(ann_node, f"cannot evaluate annotation: {exc}") from None

    def param_type(self, name: str, ann, node) -> T.Type:
        given = self.param_overrides.get(name)
        if given is not None:           # a generic parameter's type in this specialisation
            return given
        if ann is inspect.Parameter.empty:
            raise self.error(node, f"parameter '{name}' needs a type annotation")
        if isinstance(ann, str):
            ann = self.static_annotation(ast.parse(ann, mode="eval").body)
        if is_generic(ann):
            raise self.error(node, f"parameter '{name}' is generic ({_generic_name(ann)}): only gradkit.warp's "
                                   "kernels and functions take their types from each launch's or call's arguments")
        try:
            return T.as_type(ann)
        except TypeError as exc:
            raise self.error(node, f"parameter '{name}': {exc}") from None

    def return_types(self, ann, node) -> list[T.Type] | None:
        if ann is inspect.Signature.empty or ann is None:
            return None
        if isinstance(ann, str):
            ann = self.static_annotation(ast.parse(ann, mode="eval").body)
        if is_generic(ann):             # `-> Any`: typed by the returns, as without an annotation
            return None
        if typing.get_origin(ann) is tuple:
            return [T.as_type(a) for a in typing.get_args(ann)]
        if isinstance(ann, tuple):
            return [T.as_type(a) for a in ann]
        return [T.as_type(ann)]

    def run(self) -> Function:
        tree = self.src.tree
        sig = inspect.signature(self.pyfunc)
        params, view_params, param_structs = [], [], []
        views = {k: (base, n) for k, base, n in self.views}
        for k, (arg_node, (name, p)) in enumerate(zip(tree.args.args, sig.parameters.items())):
            t = self.param_type(name, p.annotation, arg_node)
            if t.is_array and t.dtype.is_struct:      # an array per field, named `name.field`
                flat = [Param(path, T.array_type(ft, t.ndim)) for path, ft in t.dtype.flat(name)]
                params += flat
                param_structs.append((k, name, t))
                leaves = iter(q.value for q in flat)

                def build(st, path):
                    return StructArrayRef(st, {f: build(ft, f"{path}.{f}") if ft.is_struct else next(leaves)
                                               for f, ft in st.fields.items()}, path)
                self.env[name] = build(t.dtype, name)
                continue
            if t.is_struct:      # one parameter per field, named `name.field`
                flat = [Param(path, ft) for path, ft in t.flat(name)]
                params += flat
                param_structs.append((k, name, t))
                self.bind_struct(name, self.struct_from_flat(t, [q.value for q in flat]))
                continue
            base, n_at = views.get(k, (t, 0))
            param = Param(name, base)
            params.append(param)
            self.params[name] = param
            self.env[name] = param.value
            if n_at:       # a sub-array view: the base array and its leading indices
                if not (t.is_array and t.dtype is base.dtype and t.ndim == base.ndim - n_at):
                    raise self.error(arg_node, f"parameter '{name}' is {t.name} but is given a "
                                               f"{base.ndim - n_at}-D sub-array view of a {base.name}")
                at = [Param(f"{name}_at{m}", T.int32) for m in range(n_at)]
                view_params += at
                self.env[name] = ArrayView(param.value, [q.value for q in at], name)
        params += view_params
        self.param_values = [q.value for q in params]
        if tree.args.vararg or tree.args.kwarg or tree.args.kwonlyargs:
            raise self.error(tree, "star-arguments and keyword-only parameters are not supported in kernels")
        if self.kind == "func":
            self.ret_types = self.return_types(sig.return_annotation, tree)
            self.inferred_returns = self.ret_types is None
            if self.ret_types and len(self.ret_types) == 1 and self.ret_types[0].is_struct:
                self.ret_struct = self.ret_types[0]
                self.ret_types = [ft for _, ft in self.ret_struct.flat("") if not ft.is_array]
        if self.grad_of is not None:
            self.start_grad_function(params, tree)
        body = tree.body
        last_return = body and isinstance(body[-1], ast.Return)
        nested = _contains(body[:-1] if last_return else body, (ast.Return,), False)
        if nested:
            self.ret_flag = "__ret"
            self.env[self.ret_flag] = False
            if self.kind == "func" and self.ret_types is None and not self.probing:
                self.probe_returns(tree)
            if self.kind == "func" and not self.probing:
                self.retval_names = [f"__retval{k}" for k in range(len(self.ret_types))]
                for rv, t in zip(self.retval_names, self.ret_types):
                    self.env[rv] = self.materialize(0, t, tree)
        self.block(body)
        fn = Function(self.name, params, self.body, [], self.kind, self.src.loc(tree))
        if self.grad_of is not None:
            fn.body.yields = [self.materialize(self.env[f"__adj_{n}"], self.grad_types[n], tree)
                              for n in self.grad_params]
            fn.ret_types = [y.type for y in fn.body.yields]
        elif self.kind == "func":
            if self.ret_flag is not None:
                fn.body.yields = [self.materialize(self.env[rv], t, tree)
                                  for rv, t in zip(self.retval_names, self.ret_types)]
            else:
                fn.body.yields = self.final_returns or []
                if self.ret_types and not self.final_returns:
                    raise self.error(tree, f"function '{self.name}' is declared to return a value but does not")
            fn.ret_types = list(self.ret_types or [])
        if self.inferred_returns:       # a weak value returned without an annotation stays weak for callers
            fn.attrs["weak_results"] = tuple((k, self.weak[y].consts if not self.weak[y].deps else None)
                                             for k, y in enumerate(fn.body.yields) if y in self.weak)
        fn.attrs["n_user_params"] = len(tree.args.args)
        if param_structs:
            fn.attrs["param_structs"] = tuple(param_structs)
        if self.ret_struct is not None:
            fn.attrs["ret_struct"] = self.ret_struct
            fn.attrs["ret_array_params"] = tuple(self.ret_array_params)
        fn.attrs["tid_ndim"] = self.tid_ndim or 1
        fn.attrs["source_name"] = self.name
        verify(fn)
        return fn


def lower_function(pyfunc, kind: str = "kernel", building: tuple = (), **options) -> Function:
    """Parse `pyfunc` and build its typed IR (kind 'kernel' or 'func').

    Options: max_unroll, grad_of, views, default_fp (the type of float literals), remainder: "floored"
    (default: `%` in the source is Python's) or "truncated" (Warp's kernels: C's `%` and fmod, `/` on two
    integers an integer quotient truncated toward zero, and `*` with a matrix operand a matrix product), and
    loop_locals: "scoped" (default: a local first assigned in a loop body cannot be read after the loop) or
    "last" (Warp's kernels: it holds the value of the last trip, zero if the loop never ran); param_types:
    ((name, type), ...), the types of generic parameters (annotated typing.Any) in this specialisation."""
    lowerer = Lowerer(pyfunc, kind, building, max_unroll=options.get("max_unroll"),
                      grad_of=options.get("grad_of"), views=options.get("views", ()),
                      default_fp=options.get("default_fp") or T.float32,
                      remainder=options.get("remainder") or "floored",
                      loop_locals=options.get("loop_locals") or "scoped",
                      param_types=options.get("param_types", ()))
    if building:
        return lowerer.run()
    try:
        return lowerer.run()
    except RecursionError:
        # MAX_EXPR_DEPTH bounds one function; this catches what adds up past it (long chains of @gk.func
        # calls, each nesting its own expressions) and names it instead of showing Python's own error
        raise lowerer.error(lowerer.src.tree, "too deeply nested: the expressions, blocks and @gk.func calls "
                                              "it contains need more Python recursion than is available; "
                                              "split nested expressions using locals") from None
