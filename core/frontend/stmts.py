"""Lowering of Python statements: assignments, structured control flow and the
flag-based desugaring of break / continue / early return into structured IR.

Mutable locals become SSA values: an `if` yields every local its branches
change; a loop carries every pre-existing local its body assigns. Flags for
break/continue/return are ordinary locals, so they flow through the same merge.
"""

from __future__ import annotations

import ast

from .. import types as T
from ..errors import CompileError
from ..ir import Region, Value
from .context import NUMBER, TidCall

MISSING = object()
UNSUPPORTED_STMT = {ast.With: "with", ast.AsyncWith: "async with", ast.Try: "try", ast.ClassDef: "class definitions",
                    ast.FunctionDef: "nested functions", ast.AsyncFunctionDef: "nested functions",
                    ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.Raise: "raise",
                    ast.Import: "import", ast.ImportFrom: "import", ast.AsyncFor: "async for",
                    ast.Assert: "assert"}
if hasattr(ast, "TryStar"):
    UNSUPPORTED_STMT[ast.TryStar] = "try"
if hasattr(ast, "Match"):
    UNSUPPORTED_STMT[ast.Match] = "match"


def assigned_names(stmts) -> set[str]:
    """Names a statement list (re)binds, syntactically, including nested blocks."""
    out: set[str] = set()

    def targets(t):
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name):
            out.add(t.value.id)   # v[0] = x / v.x = x rebinds a local vector

    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, ast.For):
                targets(node.target)
    return out


def _contains(stmts, kinds, stop_at_loops: bool) -> bool:
    stack = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, kinds):
            return True
        if stop_at_loops and isinstance(node, (ast.For, ast.While)):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


class StmtLowering:
    """Mixin: `block(stmts)` lowers a statement list into the current region."""

    # ------------------------------------------------------------------ blocks
    def block(self, stmts) -> None:
        for k, st in enumerate(stmts):
            self.stmt(st)
            if isinstance(st, (ast.Break, ast.Continue, ast.Return)):
                return
            rest = stmts[k + 1:]
            if rest and self.may_exit(st):
                guard = self.keep_going()
                if guard is False:
                    return
                if guard is not True:
                    self.if_blocks(guard, lambda: self.block(rest), lambda: None, st)
                    return

    def may_exit(self, st) -> bool:
        return _contains([st], (ast.Break, ast.Continue), True) or _contains([st], (ast.Return,), False)

    def keep_going(self):
        """False/True when statically known, else a bool Value: no break/continue/return has fired."""
        flags = []
        if self.loops:
            flags += [self.loops[-1]["brk"], self.loops[-1]["cont"]]
        flags.append(self.ret_flag)
        fired = []
        for f in flags:
            v = self.env.get(f, False) if f else False
            if v is True:
                return False
            if isinstance(v, Value):
                fired.append(v)
        if not fired:
            return True
        any_fired = fired[0]
        for v in fired[1:]:
            any_fired = self.prim("or", any_fired, v)
        return self.prim("not", any_fired)

    def stmt(self, node) -> None:
        self.set_node(node)
        kind = type(node)
        if kind in UNSUPPORTED_STMT:
            raise self.error(node, f"'{UNSUPPORTED_STMT[kind]}' is not supported in kernels")
        method = getattr(self, "stmt_" + kind.__name__, None)
        if method is None:
            raise self.error(node, f"unsupported statement '{kind.__name__}' in a kernel")
        method(node)

    def stmt_Pass(self, node) -> None:
        pass

    def stmt_Expr(self, node) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return   # docstring
        self.expr(node.value)

    # ------------------------------------------------------------------ assignment
    def stmt_Assign(self, node) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def stmt_AnnAssign(self, node) -> None:
        if node.value is None:
            raise self.error(node, "a bare annotation without a value is not supported")
        t = T.as_type(self.static_annotation(node.annotation))
        value = self.expr(node.value)
        if isinstance(value, Value) and value.type is not t and value.type.is_scalar and t.is_scalar:
            value = self.prim("cast", value, to=t, node=node)
        self.assign(node.target, self.materialize(value, t, node), node)

    def assign(self, target, value, node) -> None:
        if isinstance(target, ast.Name):
            self.check_rebind(target.id, target)
            if isinstance(value, TidCall):
                value = self.tid_values(1, node)[0]
            if isinstance(value, Value) and not value.hint:
                value.hint = target.id
            self.env[target.id] = value
            self.maybe_undefined.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, TidCall):
                value = tuple(self.tid_values(len(target.elts), node))
            if not isinstance(value, tuple):
                raise self.error(node, f"cannot unpack {self.describe(value)} into {len(target.elts)} names")
            if len(value) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(value)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            self.assign_subscript(target, value, node)
        elif isinstance(target, ast.Attribute):
            self.assign_attribute(target, value, node)
        else:
            raise self.error(target, "unsupported assignment target")

    def check_rebind(self, name: str, node) -> None:
        p = self.params.get(name)
        if p is not None and (self.kind == "kernel" or p.type.is_array):
            what = "an array" if p.type.is_array else "a scalar"
            raise self.error(node, f"cannot assign to parameter '{name}' ({what} parameter); "
                                   f"copy it into a local first, e.g. '{name}_ = {name}'")

    def assign_subscript(self, target, value, node) -> None:
        base = self.expr(target.value)
        from ..lang import LangFunction
        if isinstance(base, LangFunction) and base.kind == "adjoint":
            self.env[self.adjoint_key(target.slice)] = value
            return
        items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if isinstance(base, Value) and base.type.is_array:
            if len(items) != base.type.ndim:
                raise self.error(target, f"array '{base.hint}' has {base.type.ndim} dimensions but is indexed "
                                         f"with {len(items)}")
            idx = [self.index(i) for i in items]
            v = self.coerce(value, base.type.dtype, node, f"store into array '{base.hint}'")
            self.b.store(base, idx, v)
            return
        if isinstance(base, Value) and isinstance(target.value, ast.Name) and (base.type.is_vector or base.type.is_matrix):
            idx = [self.index(i) for i in items]
            want = _element_type(base.type, len(idx))
            v = self.coerce(value, want, node, f"component of {base.type.name}")
            self.rebind(target.value.id, self.prim("insert", base, v, *idx, node=node))
            return
        raise self.error(target, "only arrays and local vectors/matrices can be assigned by index")

    def assign_attribute(self, target, value, node) -> None:
        from .exprs import SWIZZLE
        base = self.expr(target.value)
        if isinstance(base, Value) and base.type.is_vector and isinstance(target.value, ast.Name) \
                and target.attr in SWIZZLE and SWIZZLE[target.attr] < base.type.length:
            v = self.coerce(value, base.type.scalar, node, f"component of {base.type.name}")
            k = self.b.const(SWIZZLE[target.attr], T.int32)
            self.rebind(target.value.id, self.prim("insert", base, v, k, node=node))
            return
        raise self.error(target, f"cannot assign to attribute '{target.attr}'")

    def rebind(self, name: str, value: Value) -> None:
        self.check_rebind(name, self.node)
        self.env[name] = value

    def stmt_AugAssign(self, node) -> None:
        from .exprs import BINOPS
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"operator '{type(node.op).__name__}=' is not supported")
        target = node.target
        if isinstance(target, ast.Subscript):
            base = self.expr(target.value)
            if isinstance(base, Value) and base.type.is_array:
                items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
                if len(items) != base.type.ndim:
                    raise self.error(target, f"array '{base.hint}' has {base.type.ndim} dimensions but is "
                                             f"indexed with {len(items)}")
                idx = [self.index(i) for i in items]
                rhs = self.expr(node.value)
                if op in ("add", "sub"):
                    v = self.coerce(rhs, base.type.dtype, node, f"'{op}=' into array '{base.hint}'")
                    self.atomic(op, base, idx, v, node)
                else:
                    old = self.b.load(base, idx)
                    new = self.binop(op, old, rhs, node)
                    self.b.store(base, idx, self.coerce(new, base.type.dtype, node, f"store into '{base.hint}'"))
                return
        current = self.expr(target)
        self.assign(target, self.binop(op, current, self.expr(node.value), node), node)

    def atomic(self, kind: str, arr: Value, idx: list[Value], val: Value, node) -> Value:
        if kind in ("min", "max") and not arr.type.dtype.is_scalar:
            raise self.error(node, f"atomic_{kind} needs a scalar array, got {arr.type.dtype.name}")
        return self.b.atomic(kind, arr, idx, val)

    # ------------------------------------------------------------------ if
    def stmt_If(self, node) -> None:
        test = self.expr(node.test)
        if not isinstance(test, Value):
            self.block(node.body if test else node.orelse)
            return
        cond = self.truth(test, node)
        self.if_blocks(cond, lambda: self.block(node.body), lambda: self.block(node.orelse), node)

    def if_blocks(self, cond: Value, then_fn, else_fn, node) -> None:
        before, undef_before = dict(self.env), set(self.maybe_undefined)
        regions, envs = [], []
        for fn in (then_fn, else_fn):
            self.env, self.maybe_undefined = dict(before), set(undef_before)
            region, _ = self.in_region(fn)
            regions.append(region)
            envs.append((self.env, self.maybe_undefined))
        (env_t, und_t), (env_e, und_e) = envs
        self.env, self.maybe_undefined = dict(before), und_t | und_e
        merged, yields_t, yields_e = [], [], []
        for name in list(dict.fromkeys([*env_t, *env_e])):
            a, b = env_t.get(name, MISSING), env_e.get(name, MISSING)
            if a is b:
                self.env[name] = a
                continue
            if a is MISSING or b is MISSING:
                self.env.pop(name, None)
                self.maybe_undefined.add(name)
                continue
            va, vb = self.merge_pair(name, a, b, regions, node)
            merged.append(name)
            yields_t.append(va)
            yields_e.append(vb)
        regions[0].yields, regions[1].yields = yields_t, yields_e
        ins = self.b.emit("if", [cond], [v.type for v in yields_t], regions=regions)
        for name, r in zip(merged, ins.results):
            r.hint = name.lstrip("_")
            self.env[name] = r

    def merge_pair(self, name, a, b, regions, node):
        for x in (a, b):
            if not isinstance(x, (Value, *NUMBER)):
                raise self.error(node, f"local '{name}' holds {self.describe(x)} on one path; only values can "
                                       "be re-assigned under a run-time condition")
        like = a.type if isinstance(a, Value) else b.type if isinstance(b, Value) else None
        if like is None and (isinstance(a, float) or isinstance(b, float)) and not isinstance(a, bool):
            like = T.float32
        va = self.in_region_value(regions[0], a, like, node)
        vb = self.in_region_value(regions[1], b, like, node)
        if va.type is T.float32 and vb.type is T.float64:
            va = self._widen_in(regions[0], va, T.float64)
        elif vb.type is T.float32 and va.type is T.float64:
            vb = self._widen_in(regions[1], vb, T.float64)
        if va.type is not vb.type:
            raise self.error(node, f"local '{name}' is {va.type.name} on one path and {vb.type.name} on the other; "
                                   "cast one of them")
        return va, vb

    # ------------------------------------------------------------------ loops
    def stmt_For(self, node) -> None:
        if node.orelse:
            raise self.error(node, "for-else is not supported")
        it = node.iter
        if not (isinstance(it, ast.Call)):
            raise self.error(it, "kernels can only loop over range(...) or gk.static(...)")
        callee = self.expr(it.func)
        from ..lang import LangFunction
        if isinstance(callee, LangFunction) and callee.kind == "static":
            return self.unrolled_for(node, self.static_eval(it))
        import builtins
        if callee is not builtins.range:
            raise self.error(it, "kernels can only loop over range(...) or gk.static(...)")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        args = self.call_args(it, None, "range")
        if not 1 <= len(args) <= 3:
            raise self.error(it, f"range() takes 1 to 3 arguments, got {len(args)}")
        if all(not isinstance(a, Value) for a in args) and self.max_unroll is not None and \
                len(range(*args)) <= self.max_unroll and not _contains(node.body, (ast.Break, ast.Continue), True):
            return self.unrolled_for(node, range(*args))
        if len(args) == 1:
            start, stop, step = 0, args[0], 1
        else:
            start, stop, step = (list(args) + [1])[:3]
        start, stop, step = (self.index_value(x, it) for x in (start, stop, step))
        if step.const_value == 0:
            raise self.error(it, "range() step must not be zero")
        has_break = _contains(node.body, (ast.Break,), True)
        has_return = self.ret_flag is not None and _contains(node.body, (ast.Return,), False)
        if has_break or has_return:
            return self.for_as_while(node, start, stop, step)
        self.loop(node, "for", [start, stop, step], node.body, iv_name=node.target.id)

    def index_value(self, x, node) -> Value:
        v = self.materialize(x, T.int32, node)
        if not (v.type.is_scalar and v.type.is_int):
            raise self.error(node, f"range() arguments must be integers, got {v.type.name}")
        return v if v.type is T.int32 else self.prim("cast", v, to=T.int32)

    def unrolled_for(self, node, items) -> None:
        if _contains(node.body, (ast.Break, ast.Continue), True):
            raise self.error(node, "break/continue are not supported in unrolled (gk.static) loops")
        try:
            items = list(items)
        except TypeError:
            raise self.error(node.iter, "gk.static(...) in a for loop must give an iterable") from None
        for item in items:
            self.assign(node.target, item, node)
            self.block(node.body)

    def for_as_while(self, node, start, stop, step) -> None:
        iv = self.new_flag("iv")
        self.env[iv] = start
        sc = step.const_value

        def cond(env):
            i = env[iv]
            if sc is not None:
                return self.prim("lt" if sc > 0 else "gt", i, stop)
            pos = self.prim("gt", step, self.b.const(0, T.int32))
            return self.prim("where", pos, self.prim("lt", i, stop), self.prim("gt", i, stop))

        def advance():
            self.env[iv] = self.prim("add", self.env[iv], step)

        self.loop(node, "while", [], node.body, cond=cond, iv_name=node.target.id, iv_flag=iv, advance=advance)
        self.env.pop(iv, None)

    def stmt_While(self, node) -> None:
        if node.orelse:
            raise self.error(node, "while-else is not supported")
        self.loop(node, "while", [], node.body, cond=lambda env: self.truth(self.expr(node.test), node.test))

    def stmt_Break(self, node) -> None:
        if not self.loops:
            raise self.error(node, "'break' outside a loop")
        self.env[self.loops[-1]["brk"]] = True

    def stmt_Continue(self, node) -> None:
        if not self.loops:
            raise self.error(node, "'continue' outside a loop")
        self.env[self.loops[-1]["cont"]] = True

    def loop(self, node, kind, bounds, body_stmts, cond=None, iv_name=None, iv_flag=None, advance=None) -> None:
        """Build a `for`/`while` whose carried values are the pre-existing locals the body assigns."""
        ctx = {"brk": self.new_flag("brk") if _contains(body_stmts, (ast.Break,), True) else None,
               "cont": self.new_flag("cont") if _contains(body_stmts, (ast.Continue,), True) else None}
        if ctx["brk"]:
            self.env[ctx["brk"]] = False
        names = assigned_names(body_stmts)
        extra = {ctx["brk"], iv_flag} - {None}
        if self.ret_flag and _contains(body_stmts, (ast.Return,), False):
            extra |= {self.ret_flag, *self.retval_names}
        carried = [n for n in self.env if (n in names or n in extra)
                   and n != iv_name and isinstance(self.env[n], (Value, *NUMBER))]
        types = {n: (self.env[n].type if isinstance(self.env[n], Value) else None) for n in carried}
        weak_floats = [n for n in carried if isinstance(self.env[n], float)]
        first_error = None
        for attempt in range(4):
            before, undef_before = dict(self.env), set(self.maybe_undefined)
            inits = [self.materialize(self.env[n], types[n], node) for n in carried]
            inits = [self.b.prim("cast", v, to=T.float64) if v.type is T.float32 and types[n] is T.float64 else v
                     for n, v in zip(carried, inits)]
            for n, v in zip(carried, inits):
                types[n] = v.type
            try:
                result = self.build_loop(node, kind, bounds, body_stmts, carried, inits, ctx, cond, iv_name,
                                         iv_flag, advance)
            except CompileError as exc:
                # A float literal initialiser may need to be float64 for the body to type-check: retry once so.
                self.env, self.maybe_undefined = before, undef_before
                if first_error is not None or not weak_floats:
                    raise first_error or exc
                first_error = exc
                for n in weak_floats:
                    types[n] = T.float64
                continue
            ins, body_yields = result
            retry = False
            for n, v, y in zip(carried, inits, body_yields):
                if y.type is not v.type:
                    widen = v.type is T.float32 and y.type is T.float64
                    if (widen or not isinstance(before[n], Value)) and attempt < 2:
                        types[n] = y.type
                        retry = True
                    else:
                        raise self.error(node, f"loop variable '{n.lstrip('_')}' is {v.type.name} before the loop "
                                               f"and {y.type.name} inside it; initialise it with the loop's type "
                                               f"(e.g. 0.0 or gk.{y.type.name}(...))")
            self.env, self.maybe_undefined = before, undef_before
            if retry:
                continue
            self.b.region.body.append(ins)
            for n, r in zip(carried, ins.results):
                r.hint = n.lstrip("_")
                self.env[n] = r
            for n in names - set(carried) - {iv_name}:
                if n not in self.env:
                    self.maybe_undefined.add(n)
            if ctx["brk"]:
                self.env.pop(ctx["brk"], None)
            return

    def build_loop(self, node, kind, bounds, body_stmts, carried, inits, ctx, cond, iv_name, iv_flag, advance):
        """Regions of one loop attempt; returns (the instruction, not yet inserted; the body's yields)."""
        body = Region(params=[Value(v.type, n.lstrip("_")) for n, v in zip(carried, inits)])
        if kind == "for":
            body.params.insert(0, Value(T.int32, iv_name))
        saved_b = self.b
        self.loops.append(ctx)
        try:
            regions = []
            if kind == "while":
                cregion = Region(params=[Value(v.type, n.lstrip("_")) for n, v in zip(carried, inits)])
                self.b = saved_b.at(cregion)
                self.env.update(dict(zip(carried, cregion.params)))
                c = cond(self.env)
                for f in (ctx["brk"], self.ret_flag):
                    if f and f in carried:
                        c = self.prim("and", c, self.prim("not", self.env[f]))
                cregion.yields = [c]
                regions.append(cregion)
            self.b = saved_b.at(body)
            params = body.params[1:] if kind == "for" else body.params
            self.env.update(dict(zip(carried, params)))
            if kind == "for":
                self.env[iv_name] = body.params[0]
            elif iv_name is not None:
                self.env[iv_name] = self.env[iv_flag]
            if ctx["cont"]:
                self.env[ctx["cont"]] = False
            self.block(body_stmts)
            if advance is not None:
                advance()
            yields = []
            for n, v in zip(carried, inits):
                cur = self.env.get(n, MISSING)
                if cur is MISSING:
                    raise self.error(node, f"loop variable '{n}' may be undefined at the end of the loop body")
                yields.append(self.materialize(cur, v.type, node) if not isinstance(cur, Value) else cur)
            body.yields = yields
            regions.append(body)
            from ..ir import Instr
            ins = Instr(kind, [*bounds, *inits], [Value(v.type) for v in inits], None, regions, self.src.loc(node))
            return ins, yields
        finally:
            self.loops.pop()
            self.b = saved_b

    # ------------------------------------------------------------------ return
    def stmt_Return(self, node) -> None:
        value = self.expr(node.value) if node.value is not None else None
        if self.kind == "kernel":
            if value is not None:
                raise self.error(node, "kernels cannot return a value; write results into an output array")
        else:
            values = list(value) if isinstance(value, tuple) else [] if value is None else [value]
            if self.ret_types is None:
                self.ret_types = [self.materialize(v, None, node).type for v in values]
            if len(values) != len(self.ret_types):
                raise self.error(node, f"function returns {len(values)} values here but {len(self.ret_types)} "
                                       "are declared")
            vals = [self.coerce(v, t, node, "return value") for v, t in zip(values, self.ret_types)]
            if self.ret_flag is None:
                self.final_returns = vals
            else:
                for rv, v in zip(self.retval_names, vals):
                    self.env[rv] = v
        if self.ret_flag is not None:
            self.env[self.ret_flag] = True

    def describe(self, x) -> str:
        if isinstance(x, Value):
            return f"a {x.type.name} value"
        return f"a {type(x).__name__}"


def _element_type(t, nidx: int):
    if t.is_vector:
        return t.scalar
    return T.vector(t.cols, t.scalar) if nidx == 1 else t.scalar
