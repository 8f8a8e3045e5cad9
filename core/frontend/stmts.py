"""Lowering of Python statements: blocks, `if`, returns (assignments live in assign.py), and the
flag-based desugaring of break / continue / early return into structured IR.

Mutable locals become SSA values: an `if` yields every local its branches
change; a loop carries every pre-existing local its body assigns. Flags for
break/continue/return are ordinary locals, so they flow through the same merge.
"""

from __future__ import annotations

import ast

from .. import types as T
from ..ir import Value
from ..lang import NAMES
from ..ops import Op
from .assign import AssignLowering
from .context import NUMBER, ArrayView, StructValue
from .precision import defined_in


class FirstReturn(Exception):
    """Raised by a probing Lowerer at the first `return` it lowers: the types that return gives."""

    def __init__(self, ret_types, ret_struct):
        super().__init__("first return")
        self.ret_types, self.ret_struct = ret_types, ret_struct

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


class StmtLowering(AssignLowering):
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
            if self.probing:
                self.first_return_line = self.src.loc(node).line     # the first return: all a probe wants
                raise FirstReturn(self.ret_types, self.ret_struct)
            if self.first_return_line is not None:
                self.check_like_first_return(values, node)
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

    def check_like_first_return(self, values: list, node) -> None:
        """A @gk.func typed by its first return (no annotation, Warp's rule): every other return gives
        the same number of values of the same types (literals adopt them), or a CompileError."""
        first = f"its first return (line {self.first_return_line})"
        hint = "; give the function a return annotation, or return the same types everywhere"
        if len(values) != len(self.ret_types):
            raise self.error(node, f"function '{self.name}' returns {len(values)} value"
                                   f"{'s' * (len(values) != 1)} here but {len(self.ret_types)} at {first}{hint}")
        for v, t in zip(values, self.ret_types):
            if isinstance(v, Value) and v.type is not t and not (v.const_value is not None and v in self.weak):
                raise self.error(node, f"function '{self.name}' returns {v.type.name} here but {t.name} at "
                                       f"{first}{hint}")

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
