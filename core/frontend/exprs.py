"""Lowering of Python expressions to IR values (or compile-time Python objects)."""

from __future__ import annotations

import ast
import builtins as py_builtins
import math
import operator

from .. import types as T
from ..builtins import BUILTINS
from ..ir import Region, Value
from ..lang import LangFunction
from ..ops import VALUE, Op
from .context import NUMBER, ArrayView, ShapeOf, StructArrayRef, StructElement, StructValue, TidCall
from .precision import defined_in

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
          ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
          ast.BitXor: "bit_xor", ast.LShift: "shl", ast.RShift: "shr"}
PY_BINOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
             "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "bit_and": operator.and_,
             "bit_or": operator.or_, "bit_xor": operator.xor, "shl": operator.lshift,
             "shr": operator.rshift, "rem": lambda a, b: _c_rem(a, b)}   # `%` under remainder="truncated"


def _c_rem(a, b):
    """C's `%` of two compile-time numbers (fmod for floats): the sign of a."""
    if isinstance(a, float) or isinstance(b, float):
        if b == 0:
            raise ZeroDivisionError
        return math.fmod(a, b)
    r = abs(a) % abs(b)
    return r if a >= 0 else -r
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
PY_CMPOPS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
             "eq": operator.eq, "ne": operator.ne}
SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3}
# Python functions a kernel may call for a builtin: abs/min/max/round, and `math.<f>` for every public
# builtin computed by the C function of the same name (math.sin, math.erf, ...)
PY_ALIASES = {py_builtins.abs: "abs", py_builtins.min: "min", py_builtins.max: "max", py_builtins.round: "round",
              **{getattr(math, name): name for name, entry in BUILTINS.items()
                 if entry.public and entry.cmath == name and hasattr(math, name)}}
# Nesting that recurses (through the frontend here, through nested regions in the passes and code generators
# for conditionals); measured limits are in tests/reliability/test_named_errors.py.
MAX_EXPR_DEPTH = 100
UNSUPPORTED_EXPR = {ast.Lambda: "lambda", ast.ListComp: "list comprehensions", ast.SetComp: "set comprehensions",
                    ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generator expressions",
                    ast.Starred: "star-arguments", ast.Await: "await", ast.Yield: "yield",
                    ast.YieldFrom: "yield", ast.JoinedStr: "f-strings", ast.Dict: "dicts", ast.Set: "sets",
                    ast.List: "lists", ast.NamedExpr: "the walrus operator", ast.Slice: "slices"}


class ExprLowering:
    """Mixin: `expr(node)` returns a Value, a Python constant, or a compile-time object."""

    def expr(self, node: ast.expr):
        prev = self.node
        self.set_node(node)
        self.expr_depth += 1
        try:
            if self.expr_depth == 1:
                self.expr_root = node
            elif self.expr_depth > MAX_EXPR_DEPTH:
                raise self.error(self.expr_root, f"expression too deeply nested (limit {MAX_EXPR_DEPTH} levels "
                                                 "of calls, conditionals, unary operators or subscripts; chains "
                                                 "of binary operators do not count); split it using locals")
            kind = type(node)
            if kind in UNSUPPORTED_EXPR:
                raise self.error(node, f"{UNSUPPORTED_EXPR[kind]} are not supported in kernels")
            method = getattr(self, "expr_" + kind.__name__, None)
            if method is None:
                raise self.error(node, f"unsupported expression '{kind.__name__}' in a kernel")
            return method(node)
        finally:
            self.expr_depth -= 1
            self.node = prev
            if prev is not None:
                self.b.loc = self.src.loc(prev)

    def value(self, node: ast.expr, like: T.Type | None = None) -> Value:
        return self.materialize(self.expr(node), like, node)

    # ------------------------------------------------------------------ leaves
    def expr_Constant(self, node):
        if isinstance(node.value, NUMBER) or node.value is None or isinstance(node.value, str):
            return node.value
        raise self.error(node, f"unsupported constant {node.value!r}")

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.expr(e) for e in node.elts)

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        if isinstance(base, StructElement):
            return self.element_field(base, node.attr, node)
        if isinstance(base, StructArrayRef):
            if node.attr == "shape":
                return ShapeOf(base.leaves()[0])
            if node.attr not in base.fields:
                raise self.error(node, f"{base.describe()} has no field '{node.attr}'")
            return base.fields[node.attr]
        if isinstance(base, StructValue):
            if node.attr not in base.fields:
                raise self.error(node, f"{base.describe()} has no field '{node.attr}' "
                                       f"(fields: {', '.join(base.type.fields)})")
            return base.fields[node.attr]
        if isinstance(base, ArrayView):
            if node.attr == "shape":
                return ShapeOf(base.arr, len(base.prefix))
            raise self.error(node, f"{base.describe()} has no attribute '{node.attr}'")
        if isinstance(base, Value):
            t = base.type
            if t.is_array and node.attr == "shape":
                return ShapeOf(base)
            if t.is_vector and node.attr in SWIZZLE and SWIZZLE[node.attr] < t.length:
                return self.prim("extract", base, self.b.const(SWIZZLE[node.attr], T.int32), node=node)
            raise self.error(node, f"{t.name} has no attribute '{node.attr}'")
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise self.error(node, f"{_name(base)} has no attribute '{node.attr}'") from None

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        idx_node = node.slice
        items = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        if isinstance(base, LangFunction) and base.kind == "adjoint":
            return self.env[self.adjoint_key(idx_node)]
        if isinstance(base, ShapeOf):
            k = self.static_int(idx_node)
            if not 0 <= k < base.ndim:
                raise self.error(idx_node, f"shape index {k} out of range for a {base.ndim}-D array")
            return self.b.emit(Op.SHAPE, [base.arr], [T.int32], {"axis": base.axis0 + k}).result
        if isinstance(base, tuple):
            return base[self.static_int(idx_node)]
        if isinstance(base, StructArrayRef):
            idx = [self.index(e) for e in items]
            ndim = base.leaves()[0].type.ndim
            if len(idx) != ndim:
                raise self.error(node, f"{base.describe()} has {ndim} dimensions but is indexed with {len(idx)} "
                                       "(sub-array views of arrays of structs are not supported)")
            return StructElement(base, idx)
        view = ArrayView.of(base)
        if view is None and not isinstance(base, Value):
            raise self.error(node, f"cannot index {_name(base)}")
        idx = [self.index(e) for e in items]
        if view is not None:
            self.check_rank(view, len(idx), node)
            if len(idx) < view.type.ndim:      # x[i] of an n-D array: an (n-1)-D sub-array
                return ArrayView(view.arr, view.indices(idx), ast.unparse(node))
            return self.b.load(view.arr, view.indices(idx))
        return self.prim("extract", base, *idx, node=node)

    def check_rank(self, view: ArrayView, n: int, node, exact: bool = False) -> None:
        """Too many indices for an array or view (or, with `exact`, too few) is an error naming it."""
        ndim = view.type.ndim
        if n > ndim or exact and n != ndim:
            what = f"array '{view.hint}'" if not view.prefix else view.describe()
            raise self.error(node, f"{what} has {ndim} dimension{'s' * (ndim != 1)} but is indexed with {n}")

    def adjoint_key(self, node) -> str:
        """The local holding gk.adjoint[x] in a @gk.func_grad function."""
        name = self.local_name(node)        # x, or s.field of a struct input
        if not self.grad_params or name not in self.grad_params:
            raise self.error(node, "gk.adjoint[x] is only usable in a @gk.func_grad function, with x a float "
                                   "input of the function it differentiates (or a float field of a struct input)")
        return f"__adj_{name}"

    def index(self, node) -> Value:
        if isinstance(node, ast.Constant) and node.value is None:
            return self.b.const(0, T.int32)          # a[None]: the single element
        v = self.expr(node)
        if isinstance(v, TidCall):
            v = self.tid_values(1, node)[0]
        if isinstance(v, Value):
            if not (v.type.is_scalar and v.type.is_int):
                raise self.error(node, f"index must be an integer, got {v.type.name}")
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(node, f"index must be an integer, got {v!r}")
        return self.b.const(v, T.int32)

    def static_int(self, node) -> int:
        v = self.expr(node)
        if isinstance(v, Value) and v.const_value is not None:
            v = v.const_value
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(node, "expected a compile-time integer here")
        return v

    # ------------------------------------------------------------------ operators
    def expr_BinOp(self, node):
        # Generated code makes operator chains of hundreds of terms (`x + a + b + ...` parses as a tree as
        # deep as the chain is long): walk the whole operator tree with an explicit stack, post-order as
        # the recursive walk would; only its leaves recurse through expr().
        todo, done = [(node, False)], []
        while todo:
            n, operands_done = todo.pop()
            if not isinstance(n, ast.BinOp):
                done.append(self.expr(n))
            elif not operands_done:
                if type(n.op) not in BINOPS:
                    raise self.error(n, f"operator '{type(n.op).__name__}' is not supported")
                todo += [(n, True), (n.right, False), (n.left, False)]
            else:
                b = done.pop()
                a = done.pop()
                self.set_node(n)
                done.append(self.binop(self.source_op(n.op), a, b, n))
        return done[0]

    def source_op(self, op: ast.operator) -> str | None:
        """The primitive an operator written in this function's source means (None: unsupported); `%`
        follows the function's `remainder` option."""
        name = BINOPS.get(type(op))
        return "rem" if name == "mod" and self.remainder == "truncated" else name

    def truncated_quotient(self, a, b, node):
        """C's integer `a / b` (truncated toward zero), what `/` on integers means under
        `remainder="truncated"` (Warp): a - rem(a, b) is an exact multiple of b, so flooring it divides
        exactly; x / 0 is 0, as x % 0 is."""
        exact = self.prim("sub", a, self.prim("rem", a, b, node=node), node=node)
        return self.prim("floordiv", exact, b, node=node)

    def binop(self, op: str, a, b, node):
        if isinstance(a, TidCall):
            a = self.tid_values(1, node)[0]
        if isinstance(b, TidCall):
            b = self.tid_values(1, node)[0]
        if not isinstance(a, Value) and not isinstance(b, Value):
            if isinstance(a, NUMBER) and isinstance(b, NUMBER) and op in PY_BINOPS:
                try:
                    return PY_BINOPS[op](a, b)
                except ZeroDivisionError:
                    raise self.error(node, "division by zero in a constant expression") from None
            raise self.error(node, f"cannot apply '{op}' to {_name(a)} and {_name(b)}")
        if op == "pow" and not isinstance(b, Value) and isinstance(a, Value):
            special = self.small_pow(a, b, node)
            if special is not None:
                return special
        a, b = self.unify(a, b, node)
        a, b = self.widen(a, b, node)
        if op in ("shl", "shr") and a.type.is_scalar and b.type.is_scalar and a.type.is_int and b.type.is_int \
                and a.type is not b.type:         # a shift count of any integer type (taken modulo the width)
            b = self.prim("cast", b, to=a.type, node=node)
        ta, tb = a.type, b.type
        if op == "div" and ta.scalar.is_int and tb.scalar.is_int:
            if self.remainder == "truncated":
                return self.truncated_quotient(a, b, node)
            a, b = self.int_to_float(a, node), self.int_to_float(b, node)
        elif ta.is_scalar and tb.is_scalar and ta is not tb and {ta.is_int, tb.is_int} == {True, False}:
            # Python semantics: int op float → float, when the int side is a literal or the float is weak.
            if ta.is_int and a.const_value is not None:
                a = self.weak_const(self.b.const(float(a.const_value), tb), a.const_value)
            elif tb.is_int and b.const_value is not None:
                b = self.weak_const(self.b.const(float(b.const_value), ta), b.const_value)
        if self.promote_ints and op not in ("shl", "shr"):
            a, b = self.promote_int_float(a, b, node)
            ta, tb = a.type, b.type
        if op == "mul" and ta.is_quat and tb.is_quat:          # Warp: q * r is the Hamilton product
            return self.call_macro("quat_mul", node, [a, b])
        if ta.is_quat != tb.is_quat and not (ta.is_scalar or tb.is_scalar):
            raise self.error(node, f"'{op}' of {ta.name} and {tb.name}: rotate vectors with gk.quat_rotate(q, v)")
        if op == "mul" and (ta.is_matrix and not tb.is_scalar or tb.is_matrix and not ta.is_scalar):
            if self.remainder != "truncated":
                raise self.error(node, f"'*' of {ta.name} and {tb.name}: use '@' for matrix products")
            op = "matmul"                                # Warp's kernels: `*` with a matrix is its product
        if op == "pow" and a.type.scalar.is_int:
            raise self.error(node, "'**' on integers needs a constant non-negative integer exponent; "
                                   "cast to float for a general power")
        return self.prim(op, a, b, node=node)

    def promote_int_float(self, a: Value, b: Value, node):
        """Taichi's binary promotion, for functions lowered with `promote_ints` (the Taichi dialect): an
        integer operand meeting a float operand is converted to that float type (gradkit itself raises)."""
        sa, sb = a.type.scalar, b.type.scalar
        if sa.is_int and sb.is_float:
            a = self.prim("cast", a, to=_with_scalar(a.type, sb), node=node)
        elif sb.is_int and sa.is_float:
            b = self.prim("cast", b, to=_with_scalar(b.type, sa), node=node)
        return a, b

    def widen(self, a: Value, b: Value, node):
        """float32 meeting float64 is widened to float64 (lossless, as C and NumPy do), unless it is a weak
        float32 value not known exactly (precision.py)."""
        if a.type.scalar is T.float32 and b.type.scalar is T.float64:
            a = self.widen_float(a, _with_scalar(a.type, T.float64), node)
        elif b.type.scalar is T.float32 and a.type.scalar is T.float64:
            b = self.widen_float(b, _with_scalar(b.type, T.float64), node)
        return a, b

    def small_pow(self, a: Value, e, node):
        if not isinstance(e, NUMBER) or isinstance(e, bool) or a.type.is_array:
            return None
        if float(e).is_integer() and 0 <= e <= 8:
            e = int(e)
            if e == 0:
                return self.materialize(1, a.type, node)
            result = a
            for _ in range(e - 1):
                result = self.prim("mul", result, a, node=node)
            return result
        if a.type.scalar.is_float and e == 0.5:
            return self.prim("sqrt", a, node=node)
        if a.type.scalar.is_float and e == -1:
            return self.prim("div", self.materialize(1.0, a.type, node), a, node=node)
        return None

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Not):
            if not isinstance(v, Value):
                return not v
            return self.prim("not", self.truth(v, node), node=node)
        if isinstance(node.op, ast.USub):
            if not isinstance(v, Value):
                if isinstance(v, NUMBER):
                    return -v
                raise self.error(node, f"cannot negate {_name(v)}")
            return self.prim("neg", v, node=node)
        if isinstance(node.op, ast.Invert):
            if not isinstance(v, Value):
                if isinstance(v, int) and not isinstance(v, bool):
                    return ~v
                raise self.error(node, f"'~' needs an integer, got {_name(v)}")
            return self.prim("bit_not", v, node=node)
        raise self.error(node, f"unsupported unary operator '{type(node.op).__name__}'")

    def truth(self, v, node) -> Value:
        """A bool Value for v (`if x:` on numbers means x != 0)."""
        v = self.materialize(v, None, node)
        if v.type is T.bool_:
            return v
        if v.type.is_scalar:
            return self.prim("ne", v, self.b.zero(v.type), node=node)
        raise self.error(node, f"a {v.type.name} has no truth value")

    def expr_Compare(self, node):
        left, result = self.expr(node.left), None
        for op_node, right_node in zip(node.ops, node.comparators):
            op = CMPOPS.get(type(op_node))
            if op is None:
                raise self.error(node, f"comparison '{type(op_node).__name__}' is not supported")
            right = self.expr(right_node)
            if not isinstance(left, Value) and not isinstance(right, Value):
                r = PY_CMPOPS[op](left, right)
            else:
                a, b = self.unify(left, right, node)
                if a.type is not b.type and a.type.is_scalar and b.type.is_scalar and a.type.is_int != b.type.is_int:
                    # an int compared with a float: as that float's type (exact for int32 and float64)
                    a, b = self.prim("cast", a, to=b.type) if a.type.is_int else a, \
                        self.prim("cast", b, to=a.type) if b.type.is_int else b
                r = self.prim(op, a, b, node=node)
            result = r if result is None else self.logical("and", result, r, node)
            left = right
        return result

    def logical(self, op: str, a, b, node):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return (a and b) if op == "and" else (a or b)
        return self.prim(op, self.truth(a, node), self.truth(b, node), node=node)

    def expr_BoolOp(self, node):
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.expr(node.values[0])
        for rhs_node in node.values[1:]:
            if not isinstance(result, Value):   # compile-time short circuit
                if (op == "and" and not result) or (op == "or" and result):
                    return result
                result = self.expr(rhs_node)
                continue
            cond = self.truth(result, node)
            region, rhs = self.in_region(lambda: self.expr(rhs_node))
            if self.pure(region):
                self.b.region.body.extend(region.body)
                result = self.logical(op, cond, rhs, node)
            else:
                region.yields = [self.in_region_truth(region, rhs, node)]
                other = Region(yields=[self.b.const(op == "or", T.bool_)])
                regions = [other, region] if op == "or" else [region, other]
                result = self.b.emit(Op.IF, [cond], [T.bool_], regions=regions).result
        return result

    def expr_IfExp(self, node):
        test = self.expr(node.test)
        if not isinstance(test, Value):
            return self.expr(node.body if test else node.orelse)
        cond = self.truth(test, node)
        r1, a = self.in_region(lambda: self.expr(node.body))
        r2, b = self.in_region(lambda: self.expr(node.orelse))
        if isinstance(a, Value) or isinstance(b, Value):
            like = a.type if isinstance(a, Value) else b.type
            a = self.in_region_value(r1, a, like, node)
            b = self.in_region_value(r2, b, like, node)
            if a.type.scalar is T.float32 and b.type.scalar is T.float64:
                a = self.widen_in(r1, a, b.type, node)
            elif b.type.scalar is T.float32 and a.type.scalar is T.float64:
                b = self.widen_in(r2, b, a.type, node)
            if a.type is not b.type:
                raise self.error(node, f"conditional expression branches differ: {a.type.name} and {b.type.name}")
        else:
            a, b = self.in_region_value(r1, a, None, node), self.in_region_value(r2, b, None, node)
        if self.pure(r1) and self.pure(r2):
            self.b.region.body.extend(r1.body + r2.body)
            return self.prim("where", cond, a, b, node=node)
        r1.yields, r2.yields = [a], [b]
        r = self.b.emit(Op.IF, [cond], [a.type], regions=[r1, r2]).result
        if a in self.weak or b in self.weak:
            self.choice(r, cond, a, b, node, defined_in([r1, r2]))
        return r

    def in_region(self, fn):
        """Run fn with the builder pointed at a fresh region; returns (region, fn's result)."""
        region = Region()
        saved, self.b = self.b, self.b.at(region)
        try:
            return region, fn()
        finally:
            self.b = saved

    def in_region_truth(self, region: Region, x, node) -> Value:
        saved, self.b = self.b, self.b.at(region)
        try:
            return self.truth(x, node)
        finally:
            self.b = saved

    def in_region_value(self, region: Region, x, like, node) -> Value:
        saved, self.b = self.b, self.b.at(region)
        try:
            return self.materialize(x, like, node)
        finally:
            self.b = saved

    @staticmethod
    def pure(region: Region) -> bool:
        return all(ins.op in VALUE for ins in region.body)

    # ------------------------------------------------------------------ calls


def _with_scalar(t: T.Type, s: T.ScalarType) -> T.Type:
    if t.is_scalar:
        return s
    return T.vector(t.length, s) if t.is_vector else T.matrix((t.rows, t.cols), s)


def _callee_name(node) -> str | None:
    f = getattr(node, "func", None)
    return getattr(f, "attr", None) or getattr(f, "id", None)


def _name(x) -> str:
    if isinstance(x, (StructValue, StructArrayRef, StructElement)):
        return x.describe()
    if isinstance(x, ArrayView):
        return x.describe()
    if isinstance(x, Value):
        return f"a {x.type.name} value"
    n = getattr(x, "__name__", None)
    return f"'{n}'" if n else repr(x)
