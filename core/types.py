"""Interned value types: scalars, vectors, matrices and array types.

Every type is a singleton per its parameters, so identity comparison works
(`vector(3, float32) is vec3`). Vector and matrix types are also callable from
Python (returning a NumPy array) and from kernels (constructing a value).
"""

from __future__ import annotations

import math

import numpy as np


class Type:
    """Base of all gradkit types."""

    is_scalar = is_vector = is_matrix = is_array = is_struct = is_quat = False


class ScalarType(Type):
    """A scalar: float32/64, int32/64, uint32 or bool."""

    is_scalar = True

    def __init__(self, name: str, np_dtype, kind: str, bits: int):
        self.name, self.np_dtype, self.kind, self.bits = name, np.dtype(np_dtype), kind, bits
        self.scalar = self

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def ncomp(self) -> int:
        return 1

    @property
    def shape(self) -> tuple:
        return ()

    def __call__(self, value=0):
        """Host-side cast, e.g. `gk.float32(1.5)` → numpy scalar (in a kernel, `gk.float32(x)` is a cast too).

        Args:
            value: a Python or NumPy number (or bool) to convert; 0 by default."""
        return self.np_dtype.type(value)

    def range_text(self) -> str:
        """The representable range, for error messages."""
        if self.is_float:
            return f"largest finite {str(np.finfo(self.np_dtype).max)}"
        info = np.iinfo(self.np_dtype)
        return f"{info.min} to {info.max}"

    def out_of_range(self, value) -> bool:
        """True when the Python number `value` overflows this type (rounding is not overflow; NaN and
        ±inf fit a float type). The one range rule for literals, scalar arguments and array data."""
        if self.is_bool or isinstance(value, (bool, np.bool_)):
            return False
        if isinstance(value, np.generic):      # compare as Python numbers: exact against huge bounds
            value = value.item()
        if self.is_int:
            if isinstance(value, float) and not math.isfinite(value):
                return True
            info = np.iinfo(self.np_dtype)
            return not info.min <= value <= info.max       # exact for Python ints and floats alike
        if isinstance(value, float) and not math.isfinite(value):
            return False
        # the largest value that rounds to a finite number: max + half an ulp (exactly halfway rounds to
        # even, which is the infinity)
        info = np.finfo(self.np_dtype)
        limit = int(info.max) + 2 ** (info.maxexp - info.nmant - 2)
        return not -limit < value < limit

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return (scalar_from_name, (self.name,))


float32 = ScalarType("float32", np.float32, "float", 32)
float64 = ScalarType("float64", np.float64, "float", 64)
int32 = ScalarType("int32", np.int32, "int", 32)
int64 = ScalarType("int64", np.int64, "int", 64)
uint32 = ScalarType("uint32", np.uint32, "uint", 32)
bool_ = ScalarType("bool", np.bool_, "bool", 8)

SCALARS = {t.name: t for t in (float32, float64, int32, int64, uint32, bool_)}


def scalar_from_name(name: str) -> ScalarType:
    return SCALARS[name]


class HostVector(np.ndarray):
    """A vector made on the host (`gk.vec3(1, 2, 3)`): a NumPy array whose first four components also read
    as `.x`, `.y`, `.z`, `.w`, as Warp's host vectors do."""

    x = property(lambda self: self[0])
    y = property(lambda self: self[1])
    z = property(lambda self: self[2])
    w = property(lambda self: self[3])

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))


class VectorType(Type):
    """A fixed-length vector of a scalar type."""

    is_vector = True

    def __init__(self, length: int, scalar: ScalarType):
        self.length, self.scalar = length, scalar
        suffix = {"float32": "", "float64": "d", "int32": "i"}.get(scalar.name, "_" + scalar.name)
        self.name = f"vec{length}{suffix}"

    @property
    def ncomp(self) -> int:
        return self.length

    @property
    def shape(self) -> tuple:
        return (self.length,)

    def __call__(self, *values):
        """Host-side construction: `gk.vec3(1, 2, 3)` → numpy array of shape (3,) (in a kernel, a vector value).

        Args:
            values: one number per component, a single sequence of them, or one number for every component."""
        if len(values) == 1 and np.ndim(values[0]) == 1:
            values = tuple(values[0])
        if len(values) == 1:
            values = values * self.length
        if len(values) != self.length:
            raise ValueError(f"{self.name} takes {self.length} components, got {len(values)}")
        return np.array(values, dtype=self.scalar.np_dtype).view(HostVector)

    def __repr__(self) -> str:
        return self.name


class QuatType(VectorType):
    """A quaternion (x, y, z, w), Warp's `quat`: four components like a vec4 (so passes and backends treat
    it as one), a type of its own so that `q * r` is the Hamilton product and quat_* builtins accept it."""

    is_quat = True

    def __init__(self, scalar: ScalarType):
        super().__init__(4, scalar)
        self.name = "quat" + {"float32": "", "float64": "d"}[scalar.name]


class MatrixType(Type):
    """A row-major rows×cols matrix of a scalar type."""

    is_matrix = True

    def __init__(self, rows: int, cols: int, scalar: ScalarType):
        self.rows, self.cols, self.scalar = rows, cols, scalar
        suffix = {"float32": "", "float64": "d"}.get(scalar.name, "_" + scalar.name)
        self.name = f"mat{rows}{cols}{suffix}"

    @property
    def ncomp(self) -> int:
        return self.rows * self.cols

    @property
    def shape(self) -> tuple:
        return (self.rows, self.cols)

    def __call__(self, *values):
        """Host-side construction from rows×cols scalars or a nested sequence.

        Args:
            values: rows×cols numbers in row-major order, a nested sequence of rows, or one number for every entry."""
        arr = np.array(values[0] if len(values) == 1 else values, dtype=self.scalar.np_dtype)
        if arr.size == 1 and len(values) == 1 and np.ndim(values[0]) == 0:
            arr = np.full(self.shape, arr.item(), dtype=self.scalar.np_dtype)
        return arr.reshape(self.shape)

    def __repr__(self) -> str:
        return self.name


class ArrayType(Type):
    """The type of an array parameter: element dtype and number of dimensions."""

    is_array = True

    def __init__(self, dtype: Type, ndim: int):
        self.dtype, self.ndim = dtype, ndim
        self.name = f"array{ndim}d({dtype.name})"

    @property
    def scalar(self) -> ScalarType:
        return self.dtype.scalar

    def __repr__(self) -> str:
        return self.name


class StructType(Type):
    """The type of a `@gk.struct` class: named fields of scalar, vector, matrix, array or struct types.
    Kernels see a struct as its fields (kernel and @gk.func parameters are flattened into one parameter
    per field, named `s.field`), so the IR, the passes and the backends never meet a struct."""

    is_struct = True

    def __init__(self, cls, fields: dict):
        self.cls, self.fields = cls, dict(fields)
        self.name = cls.__qualname__

    def flat(self, prefix: str) -> list[tuple[str, Type]]:
        """(`prefix.field[.subfield]`, type) of every non-struct field, depth first in declaration order."""
        out = []
        for name, t in self.fields.items():
            path = f"{prefix}.{name}"
            out += t.flat(path) if t.is_struct else [(path, t)]
        return out

    def __repr__(self) -> str:
        return self.name


_vectors: dict = {}
_matrices: dict = {}
_arrays: dict = {}


def vector(length: int, dtype=None) -> VectorType:
    """The (cached) vector type of `length` components of `dtype` (default float32).

    Args:
        length: the number of components (`gk.vector(3, gk.float32) is gk.vec3`).
        dtype: the scalar type of the components; None: float32."""
    scalar = as_type(dtype if dtype is not None else float32)
    if not isinstance(scalar, ScalarType) or scalar.is_bool:
        raise TypeError(f"vector dtype must be a numeric scalar type, got {dtype!r}")
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"vector length must be a positive int, got {length!r}")
    key = (length, scalar)
    if key not in _vectors:
        _vectors[key] = VectorType(length, scalar)
    return _vectors[key]


def quaternion(dtype=None) -> QuatType:
    """The quaternion type of `dtype` (float32 or float64).

    Args:
        dtype: gk.float32 (`gk.quat`) or gk.float64 (`gk.quatd`); None: float32."""
    scalar = as_type(dtype if dtype is not None else float32)
    if scalar not in (float32, float64):
        raise TypeError(f"quaternion dtype must be float32 or float64, got {dtype!r}")
    return _quats[scalar]


def matrix(shape, dtype=None) -> MatrixType:
    """The (cached) matrix type of `shape` = (rows, cols) of `dtype` (default float32).

    Args:
        shape: (rows, cols).
        dtype: the scalar type of the entries; None: float32."""
    scalar = as_type(dtype if dtype is not None else float32)
    if not isinstance(scalar, ScalarType) or not scalar.is_float:
        raise TypeError(f"matrix dtype must be a float scalar type, got {dtype!r}")
    rows, cols = shape
    key = (int(rows), int(cols), scalar)
    if key not in _matrices:
        _matrices[key] = MatrixType(*key)
    return _matrices[key]


def array_type(dtype, ndim: int = 1) -> ArrayType:
    """The (cached) array type with element `dtype` and `ndim` dimensions (1..4)."""
    dt = as_type(dtype)
    if dt.is_array:
        raise TypeError("array dtype cannot itself be an array type")
    if dt.is_struct and any(t.is_array for _, t in dt.flat("")):
        raise TypeError(f"arrays of @gk.struct '{dt.name}': a struct with array fields cannot be an array's "
                        "element type")
    if not isinstance(ndim, int) or not 1 <= ndim <= 4:
        raise ValueError(f"ndim must be 1..4, got {ndim!r}")
    key = (dt, ndim)
    if key not in _arrays:
        _arrays[key] = ArrayType(dt, ndim)
    return _arrays[key]


_NUMPY_TO_SCALAR = {t.np_dtype: t for t in SCALARS.values()}


def as_type(obj) -> Type:
    """Turn a user-given dtype (gk type, Python float/int/bool, NumPy dtype) into a gradkit Type."""
    if isinstance(obj, Type):
        return obj
    struct = getattr(obj, "_gk_struct", None)
    if isinstance(struct, StructType):
        return struct
    if obj is float:
        return float32
    if obj is int:
        return int32
    if obj is bool:
        return bool_
    try:
        dt = np.dtype(obj)
    except TypeError:
        raise TypeError(f"unsupported dtype {obj!r}") from None
    if dt in _NUMPY_TO_SCALAR:
        return _NUMPY_TO_SCALAR[dt]
    raise TypeError(f"unsupported dtype {obj!r}; use one of {', '.join(SCALARS)} or a gradkit vec/mat type")


def from_numpy_dtype(dt) -> ScalarType | None:
    """The gradkit scalar for a NumPy dtype, or None if unsupported."""
    return _NUMPY_TO_SCALAR.get(np.dtype(dt))


def promote_for_numpy(dt) -> ScalarType:
    """NumPy dtype of data → gradkit scalar when inferring array dtypes (int64 stays int64)."""
    t = from_numpy_dtype(dt)
    if t is None:
        raise TypeError(f"unsupported NumPy dtype {np.dtype(dt)}")
    return t


vec2, vec3, vec4 = (vector(n, float32) for n in (2, 3, 4))
vec2d, vec3d, vec4d = (vector(n, float64) for n in (2, 3, 4))
vec2i, vec3i, vec4i = (vector(n, int32) for n in (2, 3, 4))
mat22, mat33, mat44 = (matrix((n, n), float32) for n in (2, 3, 4))
mat22d, mat33d, mat44d = (matrix((n, n), float64) for n in (2, 3, 4))
_quats = {f: QuatType(f) for f in (float32, float64)}
quat, quatd = _quats[float32], _quats[float64]
