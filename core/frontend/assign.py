"""Lowering of assignments: `=`, annotated `=`, augmented `op=` (atomic on arrays) and the targets they
write (locals, struct fields, array elements, vector/matrix components). Split out of stmts.py.
"""

from __future__ import annotations

import ast

from .. import types as T
from ..ir import Value
from ..lang import LangFunction
from .context import ArrayView, StructArrayRef, StructElement, StructSlot, StructValue, TidCall
from .exprs import SWIZZLE


class AssignLowering:
    """Mixin: assignment statements and their targets (mixed into StmtLowering)."""

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


def _element_type(t, nidx: int):
    if t.is_vector:
        return t.scalar
    return T.vector(t.cols, t.scalar) if nidx == 1 else t.scalar
