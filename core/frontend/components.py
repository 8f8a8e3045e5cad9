"""Component writes on elements of vector/matrix arrays: `v[i][k] = x`, `v[i].y += x`, `m[i][r, c] *= x`,
`m[i, j][r] = row` (Warp's spellings).

Each write touches only its components, so a thread writing `v[i].x` never rewrites `v[i].y`: `=` is a
single-component `store`, `+=` / `-=` an atomic add/sub of that component, other operators a load and a
store of it (IR `comp` = flat row-major component index; scalarize keeps such accesses as they are).
A run-time component index picks the component with one `if` per candidate.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

from .. import types as T
from ..ir import Region, Value
from ..ops import Op
from .context import ArrayView
from .exprs import SWIZZLE


def _items(slice_node) -> list:
    return list(slice_node.elts) if isinstance(slice_node, ast.Tuple) else [slice_node]


@dataclass
class ComponentRef:
    """Part of one array element: the array, the element's indices, and per matrix/vector axis the
    component index (an int, or an int32 Value known only at run time) with that axis' extent.
    `row` is True for `m[i][r]` (a whole row of a matrix element)."""

    arr: Value
    idx: list
    axes: list           # [(index: int | Value, extent)]
    row: bool
    node: ast.AST

    @property
    def dtype(self):
        return self.arr.type.dtype

    @property
    def value_type(self):
        return T.vector(self.dtype.cols, self.dtype.scalar) if self.row else self.dtype.scalar


class ComponentWrites:
    """Mixin: recognise component-write targets and lower writes to them."""

    def component_target(self, target) -> ComponentRef | None:
        """A ComponentRef when `target` names components of one element of a vector/matrix array
        (`a[i][k]`, `a[i].x`, `m[i][r, c]`, `m[i][r]`), else None (the caller lowers it as before)."""
        inner = target.value if isinstance(target, (ast.Subscript, ast.Attribute)) else None
        if not isinstance(inner, ast.Subscript):
            return None
        view = ArrayView.of(self.expr(inner.value))
        if view is None:
            return None
        items = _items(inner.slice)
        if len(items) != view.type.ndim:
            return None
        arr, dt = view.arr, view.type.dtype
        if not (dt.is_vector or dt.is_matrix):
            raise self.error(target, f"elements of array '{view.hint}' are {dt.name} scalars; they have no "
                                     f"components to assign")
        idx = view.indices([self.index(i) for i in items])
        if isinstance(target, ast.Attribute):
            if not (dt.is_vector and target.attr in SWIZZLE and SWIZZLE[target.attr] < dt.length):
                raise self.error(target, f"cannot assign to attribute '{target.attr}' of a {dt.name} element "
                                         f"of array '{arr.hint}'")
            return ComponentRef(arr, idx, [(SWIZZLE[target.attr], dt.length)], False, target)
        comp_items = _items(target.slice)
        extents = [dt.length] if dt.is_vector else [dt.rows, dt.cols]
        if len(comp_items) > len(extents):
            raise self.error(target, f"a {dt.name} element of array '{arr.hint}' takes at most {len(extents)} "
                                     f"component ind{'ices' if len(extents) > 1 else 'ex'}, got {len(comp_items)}")
        axes = [(self.component_index(n, ext, dt), ext) for n, ext in zip(comp_items, extents)]
        return ComponentRef(arr, idx, axes, dt.is_matrix and len(axes) == 1, target)

    def component_index(self, node, extent: int, dt):
        """A constant component index (checked against `extent`) or an int32 run-time Value."""
        v = self.index(node)
        k = v.const_value
        if k is None:
            return v if v.type is T.int32 else self.prim("cast", v, to=T.int32, node=node)
        if not 0 <= k < extent:
            raise self.error(node, f"component index {k} is out of range for {dt.name} (0..{extent - 1})")
        return int(k)

    def write_components(self, ref: ComponentRef, op: str | None, rhs, node) -> None:
        """`ref = rhs` (op None) or `ref op= rhs`, touching only the components `ref` names."""
        vt, s = ref.value_type, ref.dtype.scalar
        what = f"component of array '{ref.arr.hint}' ({ref.dtype.name})"
        parts = None
        if op is None or op in ("add", "sub"):
            verb = "assign to" if op is None else f"'{op}=' into"
            v = self.coerce(rhs, vt, node, f"{verb} {what}")
            parts = [v] if not ref.row else [self.prim("extract", v, self.b.const(c, T.int32))
                                             for c in range(ref.dtype.cols)]
        cols = ref.dtype.cols if ref.dtype.is_matrix else 1
        for combo, cond in self.component_choices(ref.axes):
            base = combo[0] * cols + (combo[1] if len(combo) > 1 else 0) if ref.dtype.is_matrix else combo[0]
            flats = [base + c for c in range(cols)] if ref.row else [base]

            def emit(flats=flats):
                if parts is None:
                    self.update_components(ref, flats, op, rhs, node)
                    return
                for f, v in zip(flats, parts):
                    if op is None:
                        self.b.store(ref.arr, ref.idx, v, comp=f)
                    else:
                        self.b.atomic(op, ref.arr, ref.idx, v, comp=f)
            if cond is None:
                emit()
            else:
                region, _ = self.in_region(emit)
                self.b.emit(Op.IF, [cond], [], regions=[region, Region()])

    def update_components(self, ref: ComponentRef, flats: list[int], op: str, rhs, node) -> None:
        """`ref op= rhs` for operators other than + and -: load the components, combine, store them back."""
        old = [self.b.load(ref.arr, ref.idx, comp=f) for f in flats]
        cur = old[0] if not ref.row else self.prim("construct", *old, type=ref.value_type, node=node)
        new = self.coerce(self.binop(op, cur, rhs, node), ref.value_type, node,
                          f"'{op}=' on a component of array '{ref.arr.hint}' ({ref.dtype.name})")
        vals = [new] if not ref.row else [self.prim("extract", new, self.b.const(c, T.int32)) for c in range(len(flats))]
        for f, v in zip(flats, vals):
            self.b.store(ref.arr, ref.idx, v, comp=f)

    def component_choices(self, axes):
        """(constant index per axis, condition Value or None) for every component a write may name."""
        options = []
        for k, ext in axes:
            if isinstance(k, int):
                options.append([(k, None)])
            else:
                options.append([(c, self.prim("eq", k, self.b.const(c, T.int32))) for c in range(ext)])
        for combo in itertools.product(*options):
            conds = [c for _, c in combo if c is not None]
            cond = conds[0] if conds else None
            for c in conds[1:]:
                cond = self.prim("and", cond, c)
            yield tuple(k for k, _ in combo), cond
