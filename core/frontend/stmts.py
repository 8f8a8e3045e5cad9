"""Lowering of Python statements: assignments, structured control flow and the
flag-based desugaring of break / continue / early return into structured IR.

Mutable locals become SSA values: an `if` yields every local its branches
change; a loop carries every pre-existing local its body assigns. Flags for
break/continue/return are ordinary locals, so they flow through the same merge.
"""

from __future__ import annotations

import ast

from .. import types as T
from ..ir import Value
from ..lang import NAMES, LangFunction
from ..ops import Op
from .context import NUMBER, ArrayView, StructArrayRef, StructElement, StructSlot, StructValue, TidCall
from .exprs import BINOPS, SWIZZLE
from .precision import defined_in

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
        elif isinstance(t, (ast.Subscript, ast.Attribute)):
            root = t.value         # v[0] = x / v.x = x / s.pos.x = x rebinds a local vector or struct field
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            if isinstance(root, ast.Name):
                out.add(root.id)

    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, ast.Call):
                for t in assigned_arguments(node):      # gk.randf(state), gk.svd3(A, U, s, V)
                    targets(t)
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, ast.For):
                targets(node.target)
    return out


def assigned_arguments(call: ast.Call) -> list:
    """The argument nodes whose local variables a call assigns, known by the callee's name: the state a
    random draw advances (gk.randf(state)), the out-arguments of a decomposition (gk.svd3(A, U, s, V))."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    lang = NAMES.get(name)
    assigns = getattr(getattr(lang, "macro", None), "assigns", ())     # hash_grid_query_next(query, index)
    if assigns:
        return [call.args[k] for k in assigns if k < len(call.args)]
    if getattr(getattr(lang, "macro", None), "advances_state", False):
        return call.args[:1]
    if getattr(lang, "outputs", ()) and len(call.args) > 1:
        return call.args[1:]
    return []


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


_LOOPS = (ast.For, ast.While)


def _exits(node, memo: dict) -> tuple[bool, bool]:
    """(has a break / continue outside nested loops, has a return) of `node`'s subtree, as
    `_contains([node], (Break, Continue), True)` and `_contains([node], (Return,), False)` say; filled in
    `memo` (node -> flags; the nodes themselves as keys, kept alive) for every node walked, bottom-up and
    without recursion."""
    stack = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if n in memo:
            continue
        children = list(ast.iter_child_nodes(n))
        if not ready:
            stack.append((n, True))
            stack.extend((c, False) for c in children if c not in memo)
            continue
        brk = isinstance(n, (ast.Break, ast.Continue))
        ret = isinstance(n, ast.Return)
        orelse = {id(c) for c in n.orelse} if isinstance(n, _LOOPS) else None
        for c in children:
            b, r = memo[c]
            ret = ret or r
            if b and (orelse is None or id(c) in orelse):
                brk = True
        memo[n] = (brk, ret)
    return memo[node]


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
        """Whether `st` holds a break / continue of the enclosing loop or a return: what `_contains` says,
        from one walk of each node per lowering (`_exits`) instead of one per enclosing block."""
        memo = self.__dict__.get("_exit_memo")
        if memo is None:
            memo = self._exit_memo = {}
        got = memo.get(st)
        if got is None:
            got = _exits(st, memo)
        return got[0] or got[1]

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
        ann = self.static_annotation(node.annotation)
        t = self.default_fp if ann is float else T.as_type(ann)     # `c: float = ...` is the default float type
        value = self.expr(node.value)
        if isinstance(value, Value) and value.type is T.float32 and t is T.float64:
            value = self.widen_float(value, t, node)
        elif isinstance(value, Value) and value.type is not t and value.type.is_scalar and t.is_scalar:
            value = self.prim("cast", value, to=t, node=node)
        value = self.materialize(value, t, node)
        if t is T.float32 and ann is not float:        # `c: gk.float32 = ...`: float32 by the user's choice
            self.weak.pop(value, None)
        self.assign(node.target, value, node)

    def assign(self, target, value, node) -> None:
        if isinstance(target, ast.Name):
            self.check_rebind(target.id, target)
            value = self.struct_of(value)
            if isinstance(value, StructValue):
                self.bind_struct(target.id, value)
                self.maybe_undefined.discard(target.id)
                return
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
        ref = self.component_target(target)
        if ref is not None:
            self.write_components(ref, None, value, node)
            return
        base = self.expr(target.value)
        if isinstance(base, LangFunction) and base.kind == "adjoint":
            self.env[self.adjoint_key(target.slice)] = value
            return
        items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if isinstance(base, StructArrayRef):
            el = self.expr(target)
            self.store_element(base, el.idx, value, node, f"element of {base.describe()}")
            return
        view = ArrayView.of(base)
        if view is not None:
            self.check_rank(view, len(items), target, exact=True)
            idx = view.indices([self.index(i) for i in items])
            v = self.coerce(value, view.type.dtype, node, f"store into array '{view.hint}'")
            self.b.store(view.arr, idx, v)
            return
        local = self.local_name(target.value)
        if isinstance(base, Value) and local and (base.type.is_vector or base.type.is_matrix):
            idx = [self.index(i) for i in items]
            want = _element_type(base.type, len(idx))
            v = self.coerce(value, want, node, f"component of {base.type.name}")
            self.rebind(local, self.prim("insert", base, v, *idx, node=node))
            return
        raise self.error(target, "only arrays and local vectors/matrices can be assigned by index")

    def assign_attribute(self, target, value, node) -> None:
        ref = self.component_target(target)
        if ref is not None:
            self.write_components(ref, None, value, node)
            return
        path = self.local_name(target)
        if path is not None and "." in path:
            self.assign_field(path, target, value, node)
            return
        base = self.expr(target.value)
        if isinstance(base, StructElement):        # a[i].field = v: one field of one element
            field = base.arr.fields.get(target.attr)
            if field is None:
                raise self.error(target, f"{base.arr.stype.name} has no field '{target.attr}'")
            self.store_element(field, base.idx, value, node, f"field '{target.attr}' of {base.describe()}")
            return
        owner = self.expr(target.value.value) if isinstance(target.value, ast.Attribute) else None
        if isinstance(owner, StructElement) and isinstance(base, Value) and base.type.is_vector \
                and target.attr in SWIZZLE and SWIZZLE[target.attr] < base.type.length:
            v = self.coerce(value, base.type.scalar, node, f"component of {base.type.name}")   # a[i].pos.x = v
            k = self.b.const(SWIZZLE[target.attr], T.int32)
            self.store_element(owner.arr.fields[target.value.attr], owner.idx,
                               self.prim("insert", base, v, k, node=node), node, "field")
            return
        if isinstance(base, StructValue):
            raise self.error(target, f"{base.describe()} has no field '{target.attr}' "
                                     f"(fields: {', '.join(base.type.fields)})")
        local = self.local_name(target.value)
        if isinstance(base, Value) and base.type.is_vector and local \
                and target.attr in SWIZZLE and SWIZZLE[target.attr] < base.type.length:
            v = self.coerce(value, base.type.scalar, node, f"component of {base.type.name}")
            k = self.b.const(SWIZZLE[target.attr], T.int32)
            self.rebind(local, self.prim("insert", base, v, k, node=node))
            return
        raise self.error(target, f"cannot assign to attribute '{target.attr}'")

    def local_name(self, node) -> str | None:
        """The environment name `node` writes: a local's name, or `s.field[.sub]` for a field of a struct
        local; None for anything else."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            parent = self.local_name(node.value)
            slot = self.env.get(parent) if parent is not None else None
            if isinstance(slot, StructSlot) and node.attr in slot.type.fields:
                return f"{parent}.{node.attr}"
        return None

    def assign_field(self, path: str, target, value, node) -> None:
        """`s.field = value` on a struct local: the field is re-bound like a local of its own."""
        parent, field = path.rsplit(".", 1)
        t = self.env[parent].type.fields[field]
        value = self.struct_of(value)
        if t.is_struct:
            if not (isinstance(value, StructValue) and value.type is t):
                raise self.error(node, f"field '{path}' is a {t.name} struct, got {self.describe(value)}")
            self.bind_struct(path, value)
        elif t.is_array:
            raise self.error(target, f"cannot re-bind array field '{path}' inside a kernel; write its elements")
        else:
            self.env[path] = self.coerce(value, t, node, f"field '{path}' ({t.name})")

    def rebind(self, name: str, value: Value) -> None:
        self.check_rebind(name, self.node)
        self.env[name] = value

    def stmt_AugAssign(self, node) -> None:
        op = self.source_op(node.op)
        if op is None:
            raise self.error(node, f"operator '{type(node.op).__name__}=' is not supported")
        target = node.target
        ref = self.component_target(target)
        if ref is not None:
            self.write_components(ref, op, self.expr(node.value), node)
            return
        if isinstance(target, ast.Subscript):
            view = ArrayView.of(self.expr(target.value))
            if view is not None:
                items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
                self.check_rank(view, len(items), target, exact=True)
                idx = view.indices([self.index(i) for i in items])
                rhs = self.expr(node.value)
                arr, dtype = view.arr, view.type.dtype
                if op in ("add", "sub"):
                    v = self.coerce(rhs, dtype, node, f"'{op}=' into array '{view.hint}'")
                    self.atomic(op, arr, idx, v, node)
                else:
                    old = self.b.load(arr, idx)
                    new = self.binop(op, old, rhs, node)
                    self.b.store(arr, idx, self.coerce(new, dtype, node, f"store into '{view.hint}'"))
                return
        if isinstance(target, ast.Attribute) and op in ("add", "sub"):
            el = self.expr(target.value)
            field = el.arr.fields.get(target.attr) if isinstance(el, StructElement) else None
            if field is not None and not isinstance(field, StructArrayRef):     # a[i].f += v: atomic, as a[i] += v
                v = self.coerce(self.expr(node.value), field.type.dtype, node, f"'{op}=' into field '{target.attr}'")
                self.atomic(op, field, el.idx, v, node)
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
        ins = self.b.emit(Op.IF, [cond], [v.type for v in yields_t], regions=regions)
        inside = None
        for name, r, va, vb in zip(merged, ins.results, yields_t, yields_e):
            r.hint = name.lstrip("_")
            self.env[name] = r
            if va in self.weak or vb in self.weak:       # a weak value on either path stays weak
                inside = defined_in(regions) if inside is None else inside
                self.choice(r, cond, va, vb, node, inside)

    def merge_pair(self, name, a, b, regions, node):
        for x in (a, b):
            if not isinstance(x, (Value, *NUMBER)):
                raise self.error(node, f"local '{name}' holds {self.describe(x)} on one path; only values can "
                                       "be re-assigned under a run-time condition")
        like = a.type if isinstance(a, Value) else b.type if isinstance(b, Value) else None
        if like is None and (isinstance(a, float) or isinstance(b, float)) and not isinstance(a, bool):
            like = self.default_fp
        va = self.in_region_value(regions[0], a, like, node)
        vb = self.in_region_value(regions[1], b, like, node)
        if va.type is T.float32 and vb.type is T.float64:
            va = self.widen_in(regions[0], va, T.float64, node)
        elif vb.type is T.float32 and va.type is T.float64:
            vb = self.widen_in(regions[1], vb, T.float64, node)
        if va.type is not vb.type:
            raise self.error(node, f"local '{name}' is {va.type.name} on one path and {vb.type.name} on the other; "
                                   "cast one of them")
        return va, vb

    # ------------------------------------------------------------------ loops
    # ------------------------------------------------------------------ return
    def stmt_Return(self, node) -> None:
        value = self.expr(node.value) if node.value is not None else None
        if self.kind == "kernel":
            if value is not None:
                raise self.error(node, "kernels cannot return a value; write results into an output array")
        else:
            values = list(value) if isinstance(value, tuple) else [] if value is None else [value]
            if isinstance(value, StructValue) or self.ret_struct is not None:
                values = self.struct_return(value, node)
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

    def struct_return(self, value, node) -> list:
        """A returned struct travels as its fields (flattened into the function's results)."""
        value = self.struct_of(value)
        if self.ret_struct is None and self.ret_types is None and isinstance(value, StructValue):
            self.ret_struct = value.type
            self.ret_types = [t for _, t in value.type.flat("") if not t.is_array]
        if self.ret_struct is None or not (isinstance(value, StructValue) and value.type is self.ret_struct):
            want = f"a {self.ret_struct.name} struct" if self.ret_struct else "values, not a struct"
            raise self.error(node, f"function '{self.name}' returns {want}, not {self.describe(value)}")
        passed, values = [], []
        for (path, t), v in zip(value.type.flat(""), value.flat()):
            if not t.is_array:
                values.append(v)
                continue
            k = next((k for k, q in enumerate(self.param_values) if q is v), None)
            if k is None:
                raise self.error(node, f"array field '{path[1:]}' of the returned {value.type.name} must be an "
                                       "array the function was given (arrays cannot be created in kernels)")
            passed.append(k)
        if self.ret_array_params is not None and passed != self.ret_array_params:
            raise self.error(node, f"every return of '{self.name}' must pass back the same arrays in the "
                                   f"{value.type.name}'s array fields")
        self.ret_array_params = passed
        return values

    def describe(self, x) -> str:
        if isinstance(x, StructValue):
            return x.describe()
        if isinstance(x, Value):
            return f"a {x.type.name} value"
        if isinstance(x, ArrayView):
            return f"a sub-array view ({x.describe()})"
        return f"a {type(x).__name__}"


def _element_type(t, nidx: int):
    if t.is_vector:
        return t.scalar
    return T.vector(t.cols, t.scalar) if nidx == 1 else t.scalar
