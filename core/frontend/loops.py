"""Lowering of loops: `for` over range / gk.static (or reversed(...) of either), `while`, break and continue.

`reversed(range(a, b, s))` becomes the equivalent forward range (first element, step -s), so reverse mode
and the value stack see an ordinary `for`.

A loop carries every pre-existing local its body assigns (plus the break/return flags); a `for` with a
break or return becomes a `while` over an explicit induction variable. Literal initialisers are retyped
(and float32 widened to float64) when the body needs it.
"""

from __future__ import annotations

import ast
import builtins

from .. import types as T
from ..errors import CompileError
from ..ir import Instr, Region, Value
from ..lang import LangFunction
from .context import NUMBER, StructSlot
from .stmts import MISSING, _contains, assigned_arguments, assigned_names

def _is_array(v) -> bool:
    return isinstance(v, Value) and v.type.is_array


class LoopLowering:
    """Mixin: `for` and `while` statements."""

    def stmt_For(self, node) -> None:
        if node.orelse:
            raise self.error(node, "for-else is not supported")
        it = node.iter
        if not (isinstance(it, ast.Call)):
            return self.iterator_for(node)
        callee = self.expr(it.func)
        if isinstance(callee, LangFunction) and callee.kind == "static":
            return self.unrolled_for(node, self.static_eval(it))
        backwards = callee is builtins.reversed
        if backwards:
            it, callee = self.reversed_operand(it)
            if callee == "static":
                return self.unrolled_for(node, self.reversed_items(self.static_eval(it), it))
        if callee is not builtins.range:
            return self.iterator_for(node)
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        args = self.call_args(it, None, "range")
        if not 1 <= len(args) <= 3:
            raise self.error(it, f"range() takes 1 to 3 arguments, got {len(args)}")
        if len(args) == 1:
            args = [0, args[0], 1]
        args = (list(args) + [1])[:3]
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            if args[2] == 0:
                raise self.error(it, "range() step must not be zero")
            rng = range(*args)[::-1] if backwards else range(*args)
            if self.max_unroll is not None and len(rng) <= self.max_unroll and \
                    not _contains(node.body, (ast.Break, ast.Continue), True):
                return self.unrolled_for(node, rng)
            args, backwards = [rng.start, rng.stop, rng.step], False
        start, stop, step = (self.index_value(x, it) for x in args)
        if step.const_value == 0:
            raise self.error(it, "range() step must not be zero")
        if backwards:
            start, stop, step = self.reversed_bounds(start, stop, step)
        has_break = _contains(node.body, (ast.Break,), True)
        has_return = self.ret_flag is not None and _contains(node.body, (ast.Return,), False)
        if has_break or has_return:
            return self.for_as_while(node, start, stop, step)
        self.loop(node, "for", [start, stop, step], node.body, iv_name=node.target.id)

    def reversed_operand(self, call):
        """The range(...) / gk.static(...) call inside `reversed(...)`, and 'static' or its callee."""
        if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Call):
            raise self.error(call, "kernels can only loop over reversed(range(...)) or reversed(gk.static(...))")
        inner = call.args[0]
        callee = self.expr(inner.func)
        if isinstance(callee, LangFunction) and callee.kind == "static":
            return inner, "static"
        if callee is not builtins.range:
            raise self.error(inner, "kernels can only loop over reversed(range(...)) or reversed(gk.static(...))")
        return inner, callee

    def reversed_items(self, items, node):
        try:
            return list(items)[::-1]
        except TypeError:
            raise self.error(node, "gk.static(...) in a for loop must give an iterable") from None

    def reversed_bounds(self, start: Value, stop: Value, step: Value):
        """range(start, stop, step) backwards as a forward range: n = its length (floored, as Python's),
        first = start + (n - 1) * step, then step -step down to start (stop = start - step)."""
        b, sc = self.b, step.const_value
        if sc == 1 or sc == -1:       # range(b - 1, a - 1, -1) / range(b + 1, a + 1, 1): no division
            return b.sub(stop, step), b.sub(start, step), b.neg(step)
        one, zero = b.const(1, T.int32), b.const(0, T.int32)

        def up():
            return b.prim("floordiv", b.add(b.sub(stop, start), b.sub(step, one)), step)

        def down():
            return b.prim("floordiv", b.sub(b.sub(start, stop), b.add(step, one)), b.neg(step))
        n = (up() if sc > 0 else down()) if sc is not None else b.select(b.prim("gt", step, zero), up(), down())
        n = b.prim("max", n, zero)
        first = b.add(start, b.mul(b.sub(n, one), step))
        return first, b.sub(start, step), b.neg(step)

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
        returns = self.ret_flag is not None and _contains(node.body, (ast.Return,), False)

        def trips(k: int) -> None:
            while k < len(items):
                self.assign(node.target, items[k], node)
                self.block(node.body)
                k += 1
                if k == len(items) or not returns:
                    continue
                guard = self.keep_going()                  # a `return` ends the remaining trips too
                if guard is False:
                    return
                if guard is not True:
                    self.if_blocks(guard, lambda: trips(k), lambda: None, node)
                    return

        trips(0)

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
        assigned = self.test_assigns(node.test)
        if assigned:
            return self.assigning_while(node, lambda: self.truth(self.expr(node.test), node.test), assigned)
        self.loop(node, "while", [], node.body, cond=lambda env: self.truth(self.expr(node.test), node.test))

    def test_assigns(self, test) -> set:
        """The locals a loop test re-binds through calls that assign their arguments (a random draw's
        state, `hash_grid_query_next(query, index)`)."""
        out = set()
        for call in ast.walk(test):
            if isinstance(call, ast.Call):
                for arg in assigned_arguments(call):
                    name = self.local_name(arg)
                    if name is not None:
                        out.add(name.split(".")[0])
        return out

    def assigning_while(self, node, test, assigned: set) -> None:
        """`while f(query, index):` where f re-binds its arguments: the test runs once before the loop and
        again at the end of each trip (after `continue` too), so what it assigns reaches the body."""
        flag = self.new_flag("test")
        self.env[flag] = test()

        def advance():
            self.env[flag] = test()

        self.loop(node, "while", [], node.body, cond=lambda env: env[flag], iv_flag=flag, advance=advance,
                  carries=assigned)
        self.env.pop(flag, None)

    def iterator_for(self, node) -> None:
        """`for index in query:` over a struct with an iteration function (`_gk_iter_next`, e.g. a
        hash-grid query): `while next(query, index):` over a hidden copy of the query."""
        it = node.iter
        value = self.struct_of(self.expr(it))
        step = getattr(getattr(getattr(value, "type", None), "cls", None), "_gk_iter_next", None)
        if step is None:
            raise self.error(it, "kernels can only loop over range(...), gk.static(...) or a query "
                                 "(gk.hash_grid_query(...))")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        hidden = self.new_flag("query")
        self.bind_struct(hidden, value)
        call = ast.copy_location(ast.Call(func=ast.Name(id=step.name, ctx=ast.Load()),
                                          args=[ast.Name(id=hidden, ctx=ast.Load()), node.target], keywords=[]), it)
        target = node.target.id

        def test():
            index = self.env.get(target, 0)
            return self.truth(self.call_macro(step.name, call, [self.lookup(hidden, it), index], macro=step.macro), it)

        self.assigning_while(node, test, {hidden, target})
        for name in [k for k in self.env if k == hidden or k.startswith(hidden + ".")]:
            self.env.pop(name)

    def stmt_Break(self, node) -> None:
        if not self.loops:
            raise self.error(node, "'break' outside a loop")
        self.env[self.loops[-1]["brk"]] = True

    def stmt_Continue(self, node) -> None:
        if not self.loops:
            raise self.error(node, "'continue' outside a loop")
        self.env[self.loops[-1]["cont"]] = True

    def loop(self, node, kind, bounds, body_stmts, cond=None, iv_name=None, iv_flag=None, advance=None,
             carries=frozenset()) -> None:
        """Build a `for`/`while` whose carried values are the pre-existing locals the body assigns (and
        `carries`: the locals `advance` assigns)."""
        ctx = {"brk": self.new_flag("brk") if _contains(body_stmts, (ast.Break,), True) else None,
               "cont": self.new_flag("cont") if _contains(body_stmts, (ast.Continue,), True) else None}
        if ctx["brk"]:
            self.env[ctx["brk"]] = False
        names = assigned_names(body_stmts) | set(carries)
        for n in list(names):        # a struct local is carried field by field
            if isinstance(self.env.get(n), StructSlot):
                names |= {k for k in self.env if k.startswith(n + ".")}
        extra = {ctx["brk"], iv_flag} - {None}
        if self.ret_flag and _contains(body_stmts, (ast.Return,), False):
            extra |= {self.ret_flag, *self.retval_names}
        # Arrays are never carried: `a[i] = v` writes memory, it does not rebind `a`.
        carried = [n for n in self.env if (n in names or n in extra) and n != iv_name
                   and isinstance(self.env[n], (Value, *NUMBER)) and not _is_array(self.env[n])]
        types = {n: (self.env[n].type if isinstance(self.env[n], Value) else None) for n in carried}
        # float literal initialisers, and weak float32 values known exactly (precision.py), can start as float64
        weak_floats = [n for n in carried if isinstance(self.env[n], float)
                       or self.env[n] in self.weak and self.exact(self.env[n]) is not None]
        first_error = None
        forced: set = set()       # carried locals the body makes weak: their parameters are weak too
        for attempt in range(8):
            before, undef_before = dict(self.env), set(self.maybe_undefined)
            inits = [self.materialize(self.env[n], types[n], node) for n in carried]
            inits = [self.widen_float(v, T.float64, node) if v.type is T.float32 and types[n] is T.float64 else v
                     for n, v in zip(carried, inits)]
            for n, v in zip(carried, inits):
                types[n] = v.type
            try:
                result = self.build_loop(node, kind, bounds, body_stmts, carried, inits, ctx, cond, iv_name,
                                         iv_flag, advance, forced)
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
            for n in names:
                if _is_array(before.get(n)) and self.env.get(n) is not before[n]:
                    raise self.error(node, f"array variable '{n}' is re-bound inside a loop; arrays cannot be "
                                           f"loop-carried (index into it, or bind it before the loop)")
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
            weakened = {n for n, v, y in zip(carried, inits, body_yields)
                        if y in self.weak and v not in self.weak and y.type is T.float32} - forced
            if weakened:          # a weak value reaches the next trip: build the body again knowing it
                forced |= weakened
                retry = True
            self.env, self.maybe_undefined = before, undef_before
            if not retry and self.loop_locals == "last":
                retry = self.carry_body_locals(node, names, carried, types, iv_name)
            if retry:
                continue
            self.b.region.body.append(ins)
            params = [p for r in ins.regions for p in r.params]
            for n, r, v, y in zip(carried, ins.results, inits, body_yields):
                r.hint = n.lstrip("_")
                self.env[n] = r
                self.weak_carried(r, v, y, params, node)
            for n in names - set(carried) - {iv_name}:
                if n not in self.env:
                    self.maybe_undefined.add(n)
            if ctx["brk"]:
                self.env.pop(ctx["brk"], None)
            return
        raise self.error(node, "cannot settle the types of the locals this loop carries; give them their "
                               "types before the loop (e.g. gk.float64(0.0))")

    def carry_body_locals(self, node, names: set, carried: list, types: dict, iv_name) -> bool:
        """Warp's rule (`loop_locals="last"`): the locals first assigned in the loop body, and defined at its
        end, become carried values starting at zero, so after the loop they hold the last trip's values
        (zero when it never ran). True when some were added (the loop is built again with them)."""
        added = False
        for n in sorted(names - set(carried) - {iv_name}):
            cur = self.body_end_env.get(n, MISSING)
            if n in self.env or isinstance(cur, bool) or not isinstance(cur, (Value, *NUMBER)) or _is_array(cur):
                continue
            t = cur.type if isinstance(cur, Value) else self.materialize(cur, None, node).type
            self.env[n] = self.materialize(0, t, node)
            self.maybe_undefined.discard(n)
            carried.append(n)
            types[n] = t
            added = True
        return added

    def build_loop(self, node, kind, bounds, body_stmts, carried, inits, ctx, cond, iv_name, iv_flag, advance,
                   forced=frozenset()):
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
                for n, p, v in zip(carried, cregion.params, inits):
                    self.weak_param(p, v, node, n in forced)
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
            for n, p, v in zip(carried, params, inits):
                self.weak_param(p, v, node, n in forced)
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
            self.body_end_env = dict(self.env)     # what the body defines (carry_body_locals reads it)
            yields = []
            for n, v in zip(carried, inits):
                cur = self.env.get(n, MISSING)
                if cur is MISSING:
                    raise self.error(node, f"loop variable '{n}' may be undefined at the end of the loop body")
                yields.append(self.materialize(cur, v.type, node) if not isinstance(cur, Value) else cur)
            body.yields = yields
            regions.append(body)
            ins = Instr(kind, [*bounds, *inits], [Value(v.type) for v in inits], None, regions, self.src.loc(node))
            return ins, yields
        finally:
            self.loops.pop()
            self.b = saved_b
