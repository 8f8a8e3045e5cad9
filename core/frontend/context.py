"""State shared by the expression and statement lowerings: the builder, the
environment of locals, name resolution and value coercions (weak literals)."""

from __future__ import annotations

import ast
import builtins as py_builtins
import os
import pathlib
import sys

from .. import types as T
from ..builtins import BuiltinTypeError
from ..ir import Builder, Param, Region, Value
from ..ops import Op
from .precision import PrecisionTracking
from .source import SourceInfo

NUMBER = (bool, int, float)


class ShapeOf:
    """`arr.shape` inside a kernel: indexing it gives the extent (`axis0` skips a view's leading axes)."""

    def __init__(self, arr: Value, axis0: int = 0):
        self.arr, self.axis0 = arr, axis0

    @property
    def ndim(self) -> int:
        return self.arr.type.ndim - self.axis0


class ArrayView:
    """`x[i]` of an n-D array inside a kernel: the (n-k)-D sub-array at the leading indices `prefix`.

    A compile-time object, as Warp's array views are at run time: indexing, writing and atomics on it
    index `arr` at `prefix` + the new indices, so a view costs nothing and differentiates like `arr`."""

    def __init__(self, arr: Value, prefix: list, hint: str):
        self.arr, self.prefix, self.hint = arr, list(prefix), hint
        self.type = T.array_type(arr.type.dtype, arr.type.ndim - len(self.prefix))

    @staticmethod
    def of(x) -> "ArrayView | None":
        """x as a view (a whole array is the view with no leading indices), or None if x is no array."""
        if isinstance(x, ArrayView):
            return x
        if isinstance(x, Value) and x.type.is_array:
            return ArrayView(x, [], x.hint)
        return None

    def indices(self, idx: list) -> list:
        return self.prefix + list(idx)

    def describe(self) -> str:
        return f"'{self.hint}', a {self.type.ndim}-D sub-array of the {self.arr.type.ndim}-D array '{self.arr.hint}'"


class StructValue:
    """A struct inside a kernel: a compile-time aggregate of its field values (Values, arrays, views,
    nested StructValues). A struct held by a local lives in the environment field by field (`s.pos`,
    `s.inner.x`) under the local's StructSlot, so branches and loops merge and carry its fields as locals."""

    def __init__(self, stype: T.StructType, fields: dict):
        self.type, self.fields = stype, fields

    def flat(self) -> list:
        out = []
        for name in self.type.fields:
            v = self.fields[name]
            out += v.flat() if isinstance(v, StructValue) else [v]
        return out

    def describe(self) -> str:
        return f"a {self.type.name} struct"


class StructArrayRef:
    """An array of structs inside a kernel: one array Value per field (nested structs nest), as the
    runtime stores it; `a.pos` is the field's array and `a[i]` one element (a StructElement)."""

    def __init__(self, stype: T.StructType, fields: dict, hint: str):
        self.stype, self.fields, self.hint = stype, fields, hint

    def leaves(self) -> list:
        out = []
        for v in self.fields.values():
            out += v.leaves() if isinstance(v, StructArrayRef) else [v]
        return out

    def describe(self) -> str:
        return f"'{self.hint}', an array of {self.stype.name}"


class StructElement:
    """`a[i]` of an array of structs: its fields are loaded when read (`a[i].pos`), all of them when the
    element is used whole (`p = a[i]`, a @gk.func argument); `a[i].pos = v` stores one field."""

    def __init__(self, arr: StructArrayRef, idx: list):
        self.arr, self.idx = arr, idx

    def describe(self) -> str:
        return f"an element of {self.arr.describe()}"


class StructSlot:
    """The environment entry of a local (or parameter) holding a struct; one per struct type, so the same
    struct type on both paths of a branch merges field by field."""

    _slots: dict = {}

    def __new__(cls, stype: T.StructType):
        slot = cls._slots.get(stype)
        if slot is None:
            slot = cls._slots[stype] = super().__new__(cls)
            slot.type = stype
        return slot


class TidCall:
    """The result of `gk.tid()` before it is unpacked into coordinates."""


# gradkit's own folders, as imported (a path through a symlink) and resolved: frames show the former
_ROOTS = tuple(dict.fromkeys((pathlib.Path(__file__).parents[2], pathlib.Path(__file__).resolve().parents[2])))
_LIBRARY = tuple(str(root / d) + os.sep for root in _ROOTS
                 for d in ("core", "runtime", "ad", "backends", "viz", "app", "dialects"))
_INITS = tuple(str(root / "__init__.py") for root in _ROOTS)


def _in_library(filename: str) -> bool:
    return filename.startswith(_LIBRARY) or filename in _INITS


def remember_enclosing_scope(pyfunc) -> None:
    """Keep the locals of the function that defines a kernel or @gk.func (the first frame outside gradkit),
    so names used only in annotations resolve there as Python's own scoping would (with
    `from __future__ import annotations` they are strings, not closure cells)."""
    frame = sys._getframe(1)
    while frame is not None and _in_library(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is not None and frame.f_locals is not frame.f_globals:
        try:
            pyfunc.__gk_enclosing__ = dict(frame.f_locals)
        except (AttributeError, TypeError):       # builtins and callables that take no attributes
            pass


class LoweringContext(PrecisionTracking):
    """Environment, builder and coercion helpers for one function being lowered."""

    def __init__(self, pyfunc, src: SourceInfo, kind: str, building: tuple,
                 default_fp: T.ScalarType = T.float32):
        self.pyfunc, self.src, self.kind, self.building = pyfunc, src, kind, building
        self.default_fp = default_fp         # the type of float literals and float() (see precision.py)
        # int op float converts the int (Taichi's rule, exprs.promote_int_float); set by a dialect on the
        # function it generates; gradkit's own kernels raise instead
        self.promote_ints = bool(getattr(pyfunc, "__gk_promote_ints__", False))
        # Python builtins (min, max, abs, ...) a dialect gives its own meaning, as the peer's kernels do
        self.builtin_names: dict = getattr(pyfunc, "__gk_builtins__", None) or {}
        self.weak: dict = {}                 # weak float32 Value -> precision.Weak
        self.name = pyfunc.__name__
        self.static_ns: dict = dict(pyfunc.__globals__)
        self.static_ns.update(getattr(pyfunc, "__gk_enclosing__", {}))   # see remember_enclosing_scope
        if pyfunc.__closure__:
            for var, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
                try:
                    self.static_ns[var] = cell.cell_contents
                except ValueError:
                    pass
        self.env: dict[str, object] = {}
        self.maybe_undefined: set[str] = set()
        self.params: dict[str, Param] = {}
        self.body = Region()
        self.b = Builder(self.body)
        self.tid_ndim: int | None = None
        self.ret_types: list[T.Type] | None = None
        self.node: ast.AST | None = None
        self.expr_depth = 0                  # nesting of expr() calls, checked against MAX_EXPR_DEPTH
        self.expr_root: ast.AST | None = None
        self.flag_count = 0
        self.loops: list[dict] = []     # innermost last: {"brk": name, "cont": name}
        self.returns_nested = False

    # ------------------------------------------------------------------ errors and locations
    def error(self, node, message: str):
        return self.src.error(node if node is not None else self.node, message)

    def set_node(self, node: ast.AST) -> None:
        self.node = node
        self.b.loc = self.src.loc(node)

    # ------------------------------------------------------------------ names
    def lookup(self, name: str, node: ast.AST):
        if name in self.env:
            v = self.env[name]
            return self.struct_at(name, v.type) if isinstance(v, StructSlot) else v
        if name in self.maybe_undefined:
            raise self.error(node, f"local '{name}' may be undefined here (assigned only on some paths, "
                                   "or only inside a loop body); assign it before the branch or loop")
        if name in self.static_ns:
            return self.static_ns[name]
        if name in self.builtin_names:
            return self.builtin_names[name]
        if hasattr(py_builtins, name):
            return getattr(py_builtins, name)
        raise self.error(node, f"unknown name '{name}'")

    # ------------------------------------------------------------------ structs
    def struct_at(self, path: str, stype: T.StructType) -> StructValue:
        """The struct a local holds, read field by field from the environment."""
        return StructValue(stype, {f: self.struct_at(f"{path}.{f}", t) if t.is_struct else self.env[f"{path}.{f}"]
                                   for f, t in stype.fields.items()})

    def bind_struct(self, path: str, value: StructValue) -> None:
        """Make local `path` hold `value`: its slot, then every field as a local of its own."""
        self.env[path] = StructSlot(value.type)
        for f, v in value.fields.items():
            if isinstance(v, StructValue):
                self.bind_struct(f"{path}.{f}", v)
            else:
                self.env[f"{path}.{f}"] = v
                if isinstance(v, Value) and not v.hint:
                    v.hint = f"{path}.{f}"

    def struct_of(self, x):
        """x, with an element of an array of structs read whole (a StructValue)."""
        if not isinstance(x, StructElement):
            return x
        it = iter(x.arr.leaves())
        return self.struct_from_flat(x.arr.stype, [self.b.load(next(it), x.idx) for _ in x.arr.leaves()])

    def element_field(self, el: StructElement, name: str, node):
        """`a[i].name`: the loaded field, or the element of a nested struct field."""
        f = el.arr.fields.get(name)
        if f is None:
            raise self.error(node, f"{el.arr.stype.name} has no field '{name}' "
                                   f"(fields: {', '.join(el.arr.fields)})")
        return StructElement(f, el.idx) if isinstance(f, StructArrayRef) else self.b.load(f, el.idx)

    def store_element(self, arr, idx: list, value, node, what: str) -> None:
        """Store `value` into element `idx` of a field array, or every field of a nested struct element."""
        if isinstance(arr, StructArrayRef):
            value = self.struct_of(value)
            if not (isinstance(value, StructValue) and value.type is arr.stype):
                got = value.describe() if hasattr(value, "describe") else "a value"
                raise self.error(node, f"{what} is a {arr.stype.name}, got {got}")
            for leaf, v in zip(arr.leaves(), value.flat()):
                self.b.store(leaf, idx, self.coerce(v, leaf.type.dtype, node, f"{what} field"))
            return
        self.b.store(arr, idx, self.coerce(value, arr.type.dtype, node, what))

    def struct_from_flat(self, stype: T.StructType, values: list) -> StructValue:
        """A StructValue from values in StructType.flat order (a call's results, flattened parameters)."""
        it = iter(values)

        def build(t):
            return StructValue(t, {f: build(ft) if ft.is_struct else next(it) for f, ft in t.fields.items()})
        return build(stype)

    def new_flag(self, what: str) -> str:
        self.flag_count += 1
        return f"__{what}{self.flag_count}"

    # ------------------------------------------------------------------ values
    def materialize(self, x, like: T.Type | None = None, node=None) -> Value:
        """A Value for x: Values pass through; Python numbers become constants of `like` (or default)."""
        if isinstance(x, Value):
            return x
        if isinstance(x, NUMBER) or hasattr(x, "dtype") and getattr(x, "shape", None) == ():
            if hasattr(x, "item"):
                x = x.item()
            t = like.scalar if like is not None and not like.is_array else None
            if t is None:
                t = T.bool_ if isinstance(x, bool) else T.int32 if isinstance(x, int) else self.default_fp
            if isinstance(x, float) and not t.is_float:
                if like is not None and like.scalar.is_int and float(x).is_integer():
                    x = int(x)
                else:
                    raise self.error(node, f"cannot use the float constant {x!r} as {t.name}")
            if t.out_of_range(x):
                raise self.range_error(x, t, node)
            value = bool(x) if t.is_bool else float(x) if t.is_float else int(x)
            c = self.b.const(value, t)
            if t.is_float:
                self.weak_const(c, value)
            if like is not None and (like.is_vector or like.is_matrix):
                return self.b.prim("construct", *([c] * like.ncomp), type=like)
            return c
        if isinstance(x, TidCall):
            return self.tid_values(1, node)[0]
        if getattr(x, "ndim", 0) in (1, 2) and getattr(getattr(x, "dtype", None), "kind", "") in "fiu" \
                and 2 <= x.shape[-1] and x.size <= 64:
            # a NumPy vector or matrix the kernel names (a global, a gk.static value): a constant of its values,
            # as Taichi's Python-scope ti.Vector / ti.Matrix are in kernels; floats follow default_fp
            s = like.scalar if like is not None and not like.is_array else \
                self.default_fp if x.dtype.kind == "f" else T.int32
            t = T.vector(x.shape[0], s) if x.ndim == 1 else T.matrix(tuple(x.shape), s)
            return self.b.prim("construct", *[self.materialize(v.item(), s, node) for v in x.reshape(-1)], type=t)
        if isinstance(x, tuple):
            raise self.error(node, "a tuple cannot be used as a value here")
        if isinstance(x, (StructArrayRef, StructElement)):
            raise self.error(node, f"{x.describe()} is not a value here; use one of its fields")
        if isinstance(x, StructValue):
            raise self.error(node, f"{x.describe()} is not a value here; use one of its fields "
                                   f"({', '.join(x.type.fields)})")
        if isinstance(x, ArrayView):
            raise self.error(node, f"{x.describe()} is not a value; index all {x.arr.type.ndim} dimensions "
                                   f"of '{x.arr.hint}' (e.g. {x.hint}[j]) to read an element")
        raise self.error(node, f"{_describe(x)} is not a value usable in a kernel")

    def range_error(self, x, t: T.ScalarType, node):
        """A constant that would silently wrap or become inf as `t`: named, at its literal when it has one."""
        lit = next((n for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is type(x)
                    and n.value in (x, -x)), None) if node is not None else None
        kind = "integer" if isinstance(x, int) else "float"
        what = f"{kind} {'literal' if lit is not None else 'constant'}"
        shown = repr(x) if len(repr(x)) <= 40 else f"{repr(x)[:12]}... ({len(repr(x))} digits)"
        if t.is_int and not T.int64.out_of_range(x) and isinstance(x, int):
            hint = f"for a 64-bit integer write gk.int64({x}) and compute in int64"
        elif t is T.float32 and not T.float64.out_of_range(x):
            hint = f"write gk.float64({x!r}) to compute in float64"
        else:
            hint = "no gradkit type holds it"
        return self.error(lit if lit is not None else node,
                          f"{what} {shown} does not fit {t.name} ({t.range_text()}); {hint}")

    def tid_values(self, n: int, node) -> list[Value]:
        if self.kind != "kernel":
            raise self.error(node, "gk.tid() can only be used in a kernel, not in a @gk.func")
        if self.tid_ndim is not None and self.tid_ndim != n:
            raise self.error(node, f"gk.tid() unpacked into {n} values here but {self.tid_ndim} elsewhere")
        self.tid_ndim = n
        return [self.b.emit(Op.TID, [], [T.int32], {"axis": k, "ndim": n}, hint="tid").result for k in range(n)]

    def prim(self, name: str, *args: Value, node=None, **attrs) -> Value:
        try:
            r = self.b.prim(name, *args, **attrs)
        except BuiltinTypeError as exc:
            raise self.error(node, str(exc)) from None
        self.note_prim(name, args, r, node)
        return r

    def coerce(self, x, to: T.Type, node, what: str) -> Value:
        """x converted to type `to` where that is lossless (literals; float32 the user typed, widened; weak
        float32 known exactly, rebuilt: precision.py)."""
        if not isinstance(x, Value):
            return self.materialize(x, to, node)
        if x.type is to:
            return x
        if x.type.is_scalar and to.is_scalar and x.type.is_int and to.is_float and x.const_value is not None:
            return self.weak_const(self.b.const(float(x.const_value), to), x.const_value)
        if x.type is T.float32 and to is T.float64:
            return self.widen_float(x, to, node)
        raise self.error(node, f"{what}: expected {to.name}, got {x.type.name}")

    def unify(self, a, b, node):
        """Bring two operands to a common type: Python literals adopt the other side's type."""
        if not isinstance(a, Value) and not isinstance(b, Value):
            return self.materialize(a, None, node), self.materialize(b, None, node)
        if not isinstance(a, Value):
            return self._weak(a, b, node), b
        if not isinstance(b, Value):
            return a, self._weak(b, a, node)
        return a, b

    def _weak(self, lit, other: Value, node) -> Value:
        t = other.type
        if isinstance(lit, float) and not isinstance(lit, bool) and t.scalar.is_int and not float(lit).is_integer():
            # int value op float literal: Python semantics give a float; promote the int side later.
            return self.materialize(lit, self.default_fp, node)
        if t.is_vector or t.is_matrix:
            return self.materialize(lit, t.scalar, node)
        return self.materialize(lit, t, node)


def _describe(x) -> str:
    name = getattr(x, "__name__", None)
    return f"'{name}' ({type(x).__name__})" if name else f"a {type(x).__name__} object"
