"""Taichi fields over gradkit arrays: `ti.field`, `ti.Vector.field`, `ti.Matrix.field`, `ti.root.dense(...)
.place(...)` (nested dense included) and `ti.root.lazy_grad()`.

A field is a gk.array made lazily, at its first use, on the device of `ti.init` (Taichi also materialises
fields at the first kernel launch or access, so `place(x, x.grad)` may name the gradient after the field).
A 0-d field (`shape=()`) is a one-element array addressed as `x[None]`. Vector and matrix fields hold
gk.vector / gk.matrix elements. `x.grad` and `x.dual` are fields over the array's `.grad` / `.dual`.
`to_numpy()` is a copy, as in Taichi (gk.array.numpy() of a cpu array is a view).
"""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.core import types as T

from . import runtime
from .errors import unsupported

# Taichi's axis names for ti.root.dense(ti.ij, ...)
i, j, k, l = "i", "j", "k", "l"  # noqa: E741
ij, ik, il, jk, jl, kl = "ij", "ik", "il", "jk", "jl", "kl"
ijk, ijl, ikl, jkl, ijkl = "ijk", "ijl", "ikl", "jkl", "ijkl"


def scalar_type(dtype, what: str = "dtype") -> T.ScalarType:
    """A Taichi dtype as a gradkit scalar type: `float` follows default_fp, `int` default_ip."""
    if dtype is float:
        return runtime.settings.default_fp
    if dtype is int:
        return runtime.settings.default_ip
    if getattr(dtype, "_ti_unsupported_type", None):
        raise unsupported(f"the type ti.{dtype._ti_unsupported_type}",
                          "gradkit has f32, f64, i32, i64, u32 and u1 (bool)")
    try:
        t = T.as_type(dtype)
    except TypeError:
        raise TypeError(f"{what}: {dtype!r} is not a Taichi scalar type (ti.f32, ti.f64, ti.i32, ...)") from None
    return t


def element_type(dtype, n: int | None = None, m: int | None = None):
    """The gradkit element type of a field: a scalar, or a vector (n) or matrix (n, m) of it. A vector or
    matrix type given as dtype (ti.math.vec3, ti.types.matrix(2, 2, ti.f32)) is its own element type."""
    if isinstance(dtype, T.Type) and (dtype.is_vector or dtype.is_matrix):
        return dtype
    s = scalar_type(dtype)
    if n is None:
        return s
    if m is None:
        return T.vector(n, s)
    return T.matrix((n, m), s)


class Field:
    """A Taichi field: shape, element type, and a gk.array made at first use."""

    _ti_field = True

    def __init__(self, elem, shape=None, needs_grad: bool = False, needs_dual: bool = False, name: str = "",
                 primal: "Field | None" = None, kind: str = ""):
        self.elem = elem                     # gk element type
        self.dtype = elem.scalar if not elem.is_scalar else elem
        self._shape = None if shape is None else _shape_tuple(shape)
        self.name = name
        self._primal = primal                # for x.grad / x.dual: the field it is the gradient of
        self._kind = kind                    # "grad" / "dual" for those
        self._arr = None
        self.needs_grad = bool(needs_grad)
        self.needs_dual = bool(needs_dual)
        self.grad = self.dual = None
        if primal is None and self.dtype.is_float:
            self.grad = Field(elem, shape, name=f"{name}.grad" if name else "", primal=self, kind="grad")
            self.dual = Field(elem, shape, name=f"{name}.dual" if name else "", primal=self, kind="dual")
        if primal is None:
            runtime.register_field(self)
        self._placed = self._shape is not None

    # -------------------------------------------------------------- layout
    @property
    def shape(self) -> tuple:
        if self._primal is not None:
            return self._primal.shape
        if self._shape is None:
            raise RuntimeError(f"field {self._describe()} has no shape yet: give shape= or place it with "
                               "ti.root.dense(...).place(...)")
        return self._shape

    @property
    def n(self) -> int:
        return self.elem.length if self.elem.is_vector else self.elem.rows if self.elem.is_matrix else 1

    @property
    def m(self) -> int:
        return self.elem.cols if self.elem.is_matrix else 1

    def _describe(self) -> str:
        return f"'{self.name}'" if self.name else f"of {self.elem.name}"

    def _place(self, shape: tuple) -> None:
        if self._primal is not None:            # placing x.grad: x gets a gradient
            self._primal._want(self._kind)
            return
        if self._shape is not None and self._placed:
            raise RuntimeError(f"field {self._describe()} is placed twice (shape {self._shape}, then {shape})")
        self._shape, self._placed = tuple(shape), True

    def _want(self, kind: str) -> None:
        if kind == "grad":
            self.needs_grad = True
            if self._arr is not None and not self._arr.requires_grad:
                self._arr.requires_grad = True
        else:
            self.needs_dual = True
            if self._arr is not None and not self._arr.requires_dual:
                self._arr.requires_dual = True

    @property
    def arr(self) -> gk.array:
        """The gk.array holding this field (made at first use)."""
        if self._primal is not None:
            base = self._primal.arr
            a = base.grad if self._kind == "grad" else base.dual
            if a is None:
                raise RuntimeError(f"{self._primal._describe()}.{self._kind} is not allocated: make the field with "
                                   f"needs_{self._kind}=True, place x.{self._kind}, or call ti.root.lazy_grad()")
            return a
        if self._arr is None:
            shape = self.shape
            self._arr = gk.zeros(shape if shape else (1,), dtype=self.elem, device=runtime.device(),
                                 requires_grad=self.needs_grad and self.dtype.is_float,
                                 requires_dual=self.needs_dual and self.dtype.is_float)
            if self.name:
                self._arr.label = self.name
        return self._arr

    @property
    def snode(self):
        return _SNodeOf(self)

    # -------------------------------------------------------------- Python scope
    def _index(self, key):
        if key is None or key == ():
            if self.shape != ():
                raise IndexError(f"field {self._describe()} has shape {self.shape}: index it with "
                                 f"{len(self.shape)} indices, x[None] is for 0-d fields")
            return 0
        key = tuple(int(v) for v in np.ravel(key)) if not isinstance(key, int) else (key,)
        if len(key) != len(self.shape):
            raise IndexError(f"field {self._describe()} has {len(self.shape)} dimensions, indexed with {len(key)}")
        return key if len(key) > 1 else key[0]

    def __getitem__(self, key):
        idx = self._index(key)
        v = self.arr[idx]
        if isinstance(v, np.ndarray):
            return HostElement.of(v, self, idx)
        return v.item() if hasattr(v, "item") else v

    def __setitem__(self, key, value):
        self.arr[self._index(key)] = value

    def fill(self, value) -> None:
        self.arr.fill_(value)

    def to_numpy(self, dtype=None) -> np.ndarray:
        """A copy of the data (Taichi's to_numpy is a copy; gk.array.numpy() of a cpu array is a view). Read
        without handing out a view (`_read`), so the array is not marked as exposed: a tape then need not
        checksum it at every launch that reads it (no view of it can change it behind the tape's back)."""
        out = np.array(self.arr._read(), copy=True)
        out = out.reshape(self.shape + out.shape[1:]) if self.shape == () else out
        return out.astype(dtype) if dtype is not None else out

    def from_numpy(self, data) -> None:
        data = np.asarray(data)
        want = self.shape + tuple(self.elem.shape if not self.elem.is_scalar else ())
        if data.shape != want:
            raise ValueError(f"from_numpy: field {self._describe()} needs an array of shape {want}, got {data.shape}")
        self.arr.assign(data.reshape((1,) + data.shape) if self.shape == () else data)

    def copy_from(self, other: "Field") -> None:
        self.from_numpy(other.to_numpy())

    def to_torch(self, device=None):
        import torch
        return torch.from_numpy(self.to_numpy())

    def from_torch(self, t) -> None:
        self.from_numpy(t.detach().cpu().numpy())

    def get_field_members(self):
        return [self]

    def get_scalar_field(self, *indices) -> "_Component":
        """Component `indices` of a vector or matrix field, to place on its own (Taichi's SOA layouts:
        `block.dense(...).place(v.get_scalar_field(0))`). gradkit keeps the elements together; placing
        every component with one shape places the field."""
        if self.elem.is_scalar:
            raise TypeError("get_scalar_field() is for vector and matrix fields")
        return _Component(self, indices)

    def __repr__(self) -> str:
        shape = self._shape if self._primal is None else "(of primal)"
        return f"<ti field {self.name or ''} {self.elem.name} shape={shape}>"

    def __len__(self) -> int:
        return self.shape[0]


class HostElement(np.ndarray):
    """A vector or matrix element read in Python scope (`x[i]`): its values (a NumPy array) that, like
    Taichi's host accessors, write an assigned component back into the field (`x[None][0] -= lr * g`).
    Arrays computed from it are plain values, not tied to the field."""

    @classmethod
    def of(cls, values: np.ndarray, f: "Field", idx) -> "HostElement":
        out = np.array(values, copy=True).view(cls)
        out._ti_field, out._ti_index = f, idx
        return out

    def __array_finalize__(self, obj) -> None:
        self._ti_field, self._ti_index = None, None

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        if self._ti_field is not None:
            self._ti_field.arr[self._ti_index] = np.asarray(self)


class _Component:
    """One component of a vector or matrix field, as placed by SOA layouts."""

    def __init__(self, parent: Field, indices: tuple):
        self.parent, self.indices = parent, indices

    def _place(self, shape: tuple) -> None:
        p = self.parent
        if p._placed and p._shape == tuple(shape):
            return                                  # another component, placed alike
        p._place(shape)


class _FieldKind(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, (Field, _Component)) and cls._test(obj)


class ScalarField(metaclass=_FieldKind):
    """`isinstance(x, ti.ScalarField)`: a field of scalars."""
    _test = staticmethod(lambda f: isinstance(f, _Component) or f.elem.is_scalar)


class MatrixField(metaclass=_FieldKind):
    """`isinstance(x, ti.MatrixField)`: a field of vectors or matrices."""
    _test = staticmethod(lambda f: isinstance(f, Field) and not f.elem.is_scalar)


class _SNodeOf:
    """`x.snode` (what Taichi programs read of it: shape, parent)."""

    def __init__(self, f: Field):
        self.f = f

    @property
    def shape(self):
        return self.f.shape

    def parent(self, n: int = 1):
        return root


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def field(dtype, shape=None, name: str = "", offset=None, needs_grad: bool = False, needs_dual: bool = False,
          order=None, layout=None) -> Field:
    """`ti.field(dtype, shape=None, needs_grad=False, needs_dual=False)`."""
    if offset is not None:
        raise unsupported("field offsets (ti.field(..., offset=))", "index from 0 and add the offset yourself")
    return Field(element_type(dtype), shape, needs_grad, needs_dual, name)


class SNode:
    """A dense SNode: `ti.root.dense(ti.i, n)`; nesting multiplies shapes (`dense(ti.i, 4).dense(ti.j, 8)`
    places fields of shape (4, 8)). As in Taichi, a field's indices follow the axis letters (i, j, k, l),
    not the nesting order: `dense(ti.l, T).dense(ti.i, n)` places fields indexed `[i, t]`, of shape (n, T);
    nesting on an axis already used multiplies its size."""

    def __init__(self, axes: tuple = ()):
        self._axes = axes                       # ((axis letter, size), ...) in nesting order

    @property
    def shape(self) -> tuple:
        sizes: dict = {}
        for a, n in self._axes:
            sizes[a] = sizes.get(a, 1) * n
        return tuple(sizes[a] for a in sorted(sizes))

    def dense(self, axes, dimensions) -> "SNode":
        dims = _shape_tuple(dimensions)
        axes = "".join(axes) if isinstance(axes, (list, tuple)) else axes
        if len(dims) == 1 and len(axes) > 1:
            dims = dims * len(axes)
        if len(dims) != len(axes) or any(a not in "ijkl" for a in axes):
            raise ValueError(f"dense({axes!r}, {dimensions!r}): {len(axes)} axes but {len(dims)} sizes")
        return SNode(self._axes + tuple(zip(axes, dims)))

    def place(self, *fields, offset=None) -> "SNode":
        for f in fields:
            if isinstance(f, (list, tuple)):
                self.place(*f)
                continue
            if not isinstance(f, (Field, _Component)) and not getattr(f, "_ti_struct_field", False):
                raise TypeError(f"place(): {f!r} is not a field")
            f._place(self.shape)
        return self

    def lazy_grad(self) -> None:
        """Every float field placed so far gets a gradient (Taichi's ti.root.lazy_grad())."""
        for f in runtime.live_fields():
            if f.dtype.is_float:
                f._want("grad")

    def lazy_dual(self) -> None:
        for f in runtime.live_fields():
            if f.dtype.is_float:
                f._want("dual")

    def pointer(self, *a, **kw):
        raise unsupported("sparse SNodes (ti.root.pointer)", "use dense fields")

    def bitmasked(self, *a, **kw):
        raise unsupported("sparse SNodes (ti.root.bitmasked)", "use dense fields")

    def dynamic(self, *a, **kw):
        raise unsupported("dynamic SNodes (ti.root.dynamic)", "use a dense field and a count")

    def hash(self, *a, **kw):
        raise unsupported("hash SNodes", "use dense fields")

    def bit_struct(self, *a, **kw):
        raise unsupported("bit_struct SNodes", "use dense fields")

    def quant_array(self, *a, **kw):
        raise unsupported("quantized SNodes", "use dense fields")

    def deactivate_all(self) -> None:
        raise unsupported("sparse SNodes (deactivate_all)", "use dense fields")


root = SNode()


def vector_field(n: int, dtype, shape=None, name: str = "", offset=None, needs_grad: bool = False,
                 needs_dual: bool = False, layout=None) -> Field:
    """`ti.Vector.field(n, dtype, shape=None, needs_grad=False)`."""
    if offset is not None:
        raise unsupported("field offsets", "index from 0")
    return Field(element_type(dtype, n), shape, needs_grad, needs_dual, name)


def matrix_field(n: int, m: int, dtype, shape=None, name: str = "", offset=None, needs_grad: bool = False,
                 needs_dual: bool = False, layout=None) -> Field:
    """`ti.Matrix.field(n, m, dtype, shape=None, needs_grad=False)`."""
    if offset is not None:
        raise unsupported("field offsets", "index from 0")
    return Field(element_type(dtype, n, m), shape, needs_grad, needs_dual, name)


# ------------------------------------------------------------------ ndarrays
class Ndarray(Field):
    """`ti.ndarray(dtype, shape, needs_grad=False)`: an array passed to kernels as an argument (a
    `ti.types.ndarray()` parameter) instead of named as a global; the same storage as a field."""

    def __init__(self, dtype, shape, needs_grad: bool = False):
        super().__init__(element_type(dtype), shape, needs_grad)


def ndarray(dtype, shape, needs_grad: bool = False) -> Ndarray:
    return Ndarray(dtype, shape, needs_grad)


class NdarrayType:
    """`ti.types.ndarray(dtype=None, ndim=None)`: a kernel parameter taking a NumPy array or a ti.ndarray.
    The kernel is translated per element type and number of dimensions of what is passed."""

    def __init__(self, dtype=None, ndim=None, element_dim=None, element_shape=None, field_dim=None,
                 needs_grad=None, boundary=None):
        self.dtype, self.ndim = dtype, ndim if ndim is not None else field_dim

    def spec(self, value, what: str) -> tuple:
        """(element type, number of dimensions) of the array passed."""
        if isinstance(value, Field):
            return value.elem, len(value.shape)
        data = np.asarray(value)
        kinds = {"f": {4: T.float32, 8: T.float64}, "i": {4: T.int32, 8: T.int64}, "u": {4: T.uint32},
                 "b": {1: T.bool_}}
        s = kinds.get(data.dtype.kind, {}).get(data.dtype.itemsize)
        if s is None:
            raise unsupported(f"NumPy arrays of {data.dtype} as {what}", "pass float32/64 or int32/64 data")
        elem = s
        want = self.dtype
        if isinstance(want, T.Type) and (want.is_vector or want.is_matrix):
            elem = T.vector(want.length, s) if want.is_vector else T.matrix(want.shape, s)
        ndim = data.ndim - len(elem.shape if not elem.is_scalar else ())
        if self.ndim is not None and ndim != self.ndim:
            raise ValueError(f"{what}: expected a {self.ndim}-d array, got shape {data.shape}")
        return elem, ndim


class NdarrayArg(Field):
    """A `ti.types.ndarray()` parameter inside a translated kernel: a field whose gk.array is the one
    passed at each call (`bind`)."""

    def __init__(self, elem, ndim: int, name: str):
        super().__init__(elem, (0,) * ndim, name=name)
        self.bound = None

    @property
    def arr(self):
        if self.bound is None:
            raise RuntimeError(f"ndarray argument '{self.name}' is not bound")
        return self.bound
