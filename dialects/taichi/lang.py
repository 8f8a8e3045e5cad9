"""Taichi's kernel-side names as gradkit language objects.

Math (`ti.sqrt`, `ti.exp`, ...) are gradkit's own builtins (the same objects), so they differentiate with
the builtins table. Taichi-only constructs are macros (`LangFunction(kind="macro")`, lowered by the
gradkit frontend right where they are called): `ti.Vector([...])`, `ti.Matrix([[...]])`, `ti.cast`,
`ti.max/min` of several arguments, `ti.select` (Taichi's argument order), `ti.random`, and the vector and
matrix methods (`v.norm()`, `a.dot(b)`, `m.transpose()`, ...), which the translator (translate.py)
rewrites from `x.norm(...)` into `__ti_m_norm(x, ...)` calls of the macros in METHODS. A macro meeting a
Python object instead of a kernel value calls the object's own method (compile-time code).
"""

from __future__ import annotations

import numpy as np

import gradkit as gk
from gradkit.core import types as T
from gradkit.core.ir import Value
from gradkit.core.lang import NAMES, LangFunction
from gradkit.core.library.picks import min_max

from . import runtime
from .fields import element_type, matrix_field, scalar_type, vector_field


def macro(name: str, host=None, doc: str = ""):
    """Decorator: a kernel-side macro `fn(E, *args)` named `name`, with `host` for calls from Python."""
    def wrap(fn):
        return LangFunction(name, "macro", macro=fn, host=host or _kernel_only(name), doc=doc or fn.__doc__ or "")
    return wrap


def _kernel_only(name):
    def host(*args, **kwargs):
        raise RuntimeError(f"ti.{name}() can only be called inside a @ti.kernel or @ti.func")
    return host


# ------------------------------------------------------------------ helpers over the emitter
def _val(E, x, like=None) -> Value:
    return E.lw.materialize(x, like, E.node)


def _cast(E, x, t) -> Value:
    """x as type t (scalar, vector or matrix): Taichi's ti.cast, explicit, never an error."""
    if not isinstance(x, Value):
        if isinstance(x, (bool, int, float)) and t.is_scalar:
            return E.lw.materialize(float(x) if t.is_float else int(x), t, E.node)
        x = _val(E, x, t if not isinstance(x, float) or t.scalar.is_float else None)
    if x.type is t:
        return x
    if t.is_scalar and not x.type.is_scalar:
        t = _with_scalar(x.type, t)
    if x.type is T.float32 and t is T.float64:
        return E.lw.widen_float(x, t, E.node)
    if x.type.is_scalar and t.is_scalar and x.type.is_int and t.is_float:
        return E.lw.int_to_float(x, E.node) if t is E.lw.default_fp else E.lw.prim("cast", x, to=t, node=E.node)
    return E.lw.prim("cast", x, to=t, node=E.node)


def _with_scalar(t, s):
    if t.is_vector:
        return T.vector(t.length, s)
    if t.is_matrix:
        return T.matrix(t.shape, s)
    return s


def _comps(E, v) -> list:
    """The scalar components of a kernel value (vector, matrix in row order) or a Python number."""
    if isinstance(v, Value) and not v.type.is_scalar:
        return [c.v for c in E.comps(v)]
    return [v]


def _common(E, items, dt=None):
    """Taichi's promotion of the elements of a literal: dt if given; else the widest float among the
    elements (a float literal counts as default_fp), else the widest integer (int literals: default_ip)."""
    if dt is not None:
        return scalar_type(dt)
    types = []
    for x in items:
        if isinstance(x, Value):
            types.append(x.type.scalar)
        elif isinstance(x, bool):
            types.append(T.int32)
        elif isinstance(x, float):
            types.append(E.lw.default_fp)
        elif isinstance(x, int):
            types.append(runtime.settings.default_ip)
        else:
            E.fail(f"{x!r} is not a number")
    floats = [t for t in types if t.is_float]
    if floats:
        return T.float64 if T.float64 in floats else floats[0]
    ints = [t for t in types if t.is_int]
    return T.int64 if T.int64 in ints else ints[0] if ints else T.int32


def _matrix_type(shape, s):
    """A matrix type of scalar s; gradkit's matrices are float, so an integer matrix (ti.Matrix.diag(2, 1),
    [[1, 0], [0, 1]]) is one of default_fp (it meets floats in every program that builds one)."""
    return T.matrix(shape, s if s.is_float else runtime.settings.default_fp)


def _build(E, t, items):
    vals = [_cast(E, x, t.scalar) for x in items]
    return E.lw.prim("construct", *vals, type=t, node=E.node)


def _flat_rows(E, rows):
    out = []
    for r in rows:
        if isinstance(r, tuple):
            out.append(list(r))
        elif isinstance(r, Value) and r.type.is_vector:
            out.append(_comps(E, r))
        else:
            out.append([r])
    return out


# ------------------------------------------------------------------ ti.Vector / ti.Matrix
def _vector_macro(E, data, dt=None):
    items = []
    for x in (data if isinstance(data, tuple) else (data,)):
        items += _comps(E, x)
    if len(items) == 1:
        E.fail("a 1-element ti.Vector is not supported (gradkit vectors have 2 to 4+ components); use a scalar")
    t = T.vector(len(items), _common(E, items, dt))
    return _build(E, t, items)


def _matrix_macro(E, data, dt=None):
    if not isinstance(data, tuple) or not data:
        E.fail("ti.Matrix takes a list of rows, e.g. ti.Matrix([[a, b], [c, d]])")
    if all(not isinstance(r, tuple) and not (isinstance(r, Value) and r.type.is_vector) for r in data):
        return _vector_macro(E, data, dt)            # ti.Matrix([a, b, c]) is a vector
    rows = _flat_rows(E, data)
    if len({len(r) for r in rows}) != 1:
        E.fail("rows of different lengths")
    flat = [x for r in rows for x in r]
    t = _matrix_type((len(rows), len(rows[0])), _common(E, flat, dt))
    return _build(E, t, flat)


class _MatrixLike(LangFunction):
    """`ti.Vector` / `ti.Matrix`: a literal in kernels, a NumPy array in Python scope, and the home of the
    class methods (`field`, `zero`, `diag`, ...)."""


Vector = _MatrixLike("Vector", "macro", macro=_vector_macro, host=lambda data, dt=None, **kw: np.array(data),
                     doc="ti.Vector([a, b, c], dt=None): a vector literal")
Matrix = _MatrixLike("Matrix", "macro", macro=_matrix_macro, host=lambda data, dt=None, **kw: np.array(data),
                     doc="ti.Matrix([[a, b], [c, d]], dt=None): a matrix literal (rows)")
Vector.field = vector_field
Matrix.field = matrix_field


def _vector_ndarray(n, dtype, shape, needs_grad=False, **kw):
    """`ti.Vector.ndarray(n, dtype, shape)`."""
    from .fields import Ndarray
    return Ndarray(element_type(dtype, n), shape, needs_grad)


def _matrix_ndarray(n, m, dtype, shape, needs_grad=False, **kw):
    """`ti.Matrix.ndarray(n, m, dtype, shape)`."""
    from .fields import Ndarray
    return Ndarray(element_type(dtype, n, m), shape, needs_grad)


Vector.ndarray = _vector_ndarray
Matrix.ndarray = _matrix_ndarray


@macro("Matrix.diag", host=lambda dim, val: np.eye(dim) * val)
def _diag(E, dim, val):
    """ti.Matrix.diag(dim, val): val on the diagonal."""
    if not isinstance(dim, int):
        E.fail("the size must be a compile-time integer")
    t = _matrix_type((dim, dim), _common(E, [val]))
    v, zero = _cast(E, val, t.scalar), _cast(E, 0, t.scalar)
    return _build(E, t, [v if r == c else zero for r in range(dim) for c in range(dim)])


def _host_identity(dt, n):
    return np.eye(n)


@macro("Matrix.identity", host=_host_identity)
def _identity(E, dt, n):
    """ti.Matrix.identity(dt, n)."""
    s = scalar_type(dt)
    return _build(E, _matrix_type((n, n), s), [1 if r == c else 0 for r in range(n) for c in range(n)])


@macro("Matrix.zero", host=lambda dt, n, m=None: np.zeros((n,) if m is None else (n, m)))
def _zero(E, dt, n, m=None):
    """ti.Matrix.zero(dt, n, m) / ti.Vector.zero(dt, n)."""
    s = scalar_type(dt)
    t = T.vector(n, s) if m is None else _matrix_type((n, m), s)
    return _build(E, t, [0] * t.ncomp)


@macro("Vector.one", host=lambda dt, n: np.ones(n))
def _one(E, dt, n):
    s = scalar_type(dt)
    return _build(E, T.vector(n, s), [1] * n)


@macro("Vector.unit", host=lambda n, i, dt=None: np.eye(n)[i])
def _unit(E, n, i, dt=None):
    s = scalar_type(dt if dt is not None else float)
    return _build(E, T.vector(n, s), [1 if k == i else 0 for k in range(n)])


@macro("Matrix.rows", host=lambda rows: np.array(rows))
def _rows(E, rows):
    return _matrix_macro(E, rows)


@macro("Matrix.cols", host=lambda cols: np.array(cols).T)
def _cols(E, cols):
    m = _matrix_macro(E, cols)
    return E.lw.call_prim("transpose", [m], E.node)


@macro("Matrix.rotation2d", host=lambda a: np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]))
def _rotation2d(E, alpha):
    c, s = E.cos(alpha), E.sin(alpha)
    return _matrix_macro(E, ((c.v, (-s).v), (s.v, c.v)))


Vector.zero = Matrix.zero = _zero
Vector.one = _one
Vector.unit = _unit
Matrix.diag = _diag
Matrix.identity = _identity
Matrix.rows = _rows
Matrix.cols = _cols
Matrix.rotation2d = _rotation2d


# ------------------------------------------------------------------ casts, math with Taichi's signatures
@macro("cast", host=lambda x, dt: np.asarray(x).astype(np.float64 if scalar_type(dt).is_float else np.int64))
def cast(E, x, dt):
    """ti.cast(x, dtype): x (scalar, vector or matrix) converted to dtype."""
    return _cast(E, x, scalar_type(dt))


def _pairwise(smaller: bool):
    """ti.min / ti.max of two or more values, left to right, with Taichi's rule: a tie gives the value and
    its gradient to the second operand, a NaN operand is missing (core/library/picks.py)."""
    pair = min_max(smaller)

    def fn(E, *args):
        if len(args) < 2:
            E.fail("takes at least 2 arguments")
        out = args[0]
        for a in args[1:]:
            out = pair(E, out, a)
        return out
    return fn


def _host_pairwise(np_fn):
    def host(*args):
        out = args[0]
        for a in args[1:]:
            out = np_fn(out, a)
        return out
    return host


max = macro("max", host=_host_pairwise(np.fmax))(_pairwise(False))  # noqa: A001
min = macro("min", host=_host_pairwise(np.fmin))(_pairwise(True))  # noqa: A001


@macro("select", host=lambda c, a, b: np.where(c, a, b))
def select(E, cond, a, b):
    """ti.select(cond, a, b): a where cond holds, else b (Taichi's order; gk.select is Warp's)."""
    return E.lw.call_prim("where", [cond, a, b], E.node)


@macro("floor", host=lambda x, dt=None: np.floor(x))
def floor(E, x, dt=None):
    """ti.floor(x, dt=None): floor, cast to dt when given (Taichi)."""
    r = E.lw.call_prim("floor", [x], E.node)
    return r if dt is None else _cast(E, r, scalar_type(dt))


@macro("ceil", host=lambda x, dt=None: np.ceil(x))
def ceil(E, x, dt=None):
    r = E.lw.call_prim("ceil", [x], E.node)
    return r if dt is None else _cast(E, r, scalar_type(dt))


@macro("round", host=lambda x, dt=None: np.round(x))
def round(E, x, dt=None):  # noqa: A001
    r = E.lw.call_prim("round", [x], E.node)
    return r if dt is None else _cast(E, r, scalar_type(dt))


@macro("atan2", host=np.arctan2)
def atan2(E, y, x):
    return E.lw.call_prim("atan2", [y, x], E.node)


@macro("pow", host=np.power)
def pow(E, x, y):  # noqa: A001
    return E.lw.binop("pow", x, y, E.node)


@macro("sqr", host=np.square)
def sqr(E, x):
    return E.lw.binop("mul", x, x, E.node)


@macro("rsqrt", host=lambda x: 1 / np.sqrt(x))
def rsqrt(E, x):
    return E.lw.binop("div", 1.0, E.lw.call_prim("sqrt", [x], E.node), E.node)


# ------------------------------------------------------------------ ti.random
def _host_random(dtype=float):
    return np.random.random()


@macro("random", host=_host_random)
def random(E, dtype=float):
    """ti.random(dtype=float): uniform in [0, 1) (an integer type: random bits). One stream per thread
    and kernel call (gk.rand_init / gk.randf); the numbers differ from Taichi's, their law does not."""
    lw = E.lw
    state = lw.env.get("__ti_rng")
    if state is None:
        E.fail("ti.random() is only available in @ti.kernel / @ti.func bodies translated by gradkit.taichi")
    s = scalar_type(dtype)
    if s.is_float:
        fn = NAMES["randf"].macro
    else:
        fn = NAMES["randi"].macro
    out = fn(E, state)
    lw.env["__ti_rng"] = out.state.v if hasattr(out.state, "v") else out.state
    value = out.value.v if hasattr(out.value, "v") else out.value
    return _cast(E, value, s)


# ------------------------------------------------------------------ methods of vectors and matrices
def _method(name, impl, host_name=None):
    def fn(E, obj, *args, **kwargs):
        if not isinstance(obj, Value):
            attr = getattr(obj, host_name or name, None)
            if attr is None:
                E.fail(f"{obj!r} has no method '{name}'")
            return attr(*args, **kwargs)
        return impl(E, obj, *args, **kwargs)
    return LangFunction(f"__ti_m_{name}", "macro", macro=fn, host=_kernel_only(name))


def _norm(E, v, eps=0):
    sq = E.lw.call_prim("length_sq", [v], E.node) if v.type.is_vector else _sum(E, E.lw.binop("mul", v, v, E.node))
    if not (isinstance(eps, (int, float)) and eps == 0):
        sq = E.lw.binop("add", sq, eps, E.node)
    return E.lw.call_prim("sqrt", [sq], E.node)


def _norm_sqr(E, v):
    if v.type.is_vector:
        return E.lw.call_prim("length_sq", [v], E.node)
    return _sum(E, E.lw.binop("mul", v, v, E.node))


def _norm_inv(E, v, eps=0):
    """Taichi's norm_inv(eps): 1 / sqrt(|v|^2 + eps)."""
    return E.lw.binop("div", 1.0, _norm(E, v, eps), E.node)


def _normalized(E, v, eps=0):
    """Taichi's normalized(eps): v / (|v| + eps) (eps added to the norm, not under the root as in norm)."""
    n = _norm(E, v)
    if not (isinstance(eps, (int, float)) and eps == 0):
        n = E.lw.binop("add", n, eps, E.node)
    inv = E.lw.binop("div", 1.0, n, E.node)
    return E.lw.binop("mul", inv, v, E.node)


def _sum(E, v):
    cs = _comps(E, v)
    out = cs[0]
    for c in cs[1:]:
        out = E.lw.binop("add", out, c, E.node)
    return out


def _mreduce(smaller: bool):
    """v.min() / v.max(): the components folded left to right with ti.min / ti.max's rule (a tie gives the
    value and its gradient to the later component, a NaN component is missing), as Taichi reduces them."""
    pair = min_max(smaller)

    def fn(E, v):
        cs = _comps(E, v)
        out = cs[0]
        for c in cs[1:]:
            out = pair(E, out, c)
        return out
    return fn


def _dot(E, a, b):
    return E.lw.call_prim("dot", [a, b], E.node)


def _cross(E, a, b):
    """Taichi's cross: a vector for 3-d vectors, the scalar a.x * b.y - a.y * b.x for 2-d ones."""
    if isinstance(a, Value) and a.type.is_vector and a.type.length == 2:
        ax, ay = _comps(E, a)
        bx, by = _comps(E, b)
        return E.lw.binop("sub", E.lw.binop("mul", ax, by, E.node), E.lw.binop("mul", ay, bx, E.node), E.node)
    return E.lw.call_prim("cross", [a, b], E.node)


def _prim1(prim):
    return lambda E, v: E.lw.call_prim(prim, [v], E.node)


def _any(E, v):
    out = None
    for c in _comps(E, v):
        t = E.lw.truth(c, E.node)
        out = t if out is None else E.lw.logical("or", out, t, E.node)
    return out


def _all(E, v):
    out = None
    for c in _comps(E, v):
        t = E.lw.truth(c, E.node)
        out = t if out is None else E.lw.logical("and", out, t, E.node)
    return out


METHODS = {name: _method(name, impl) for name, impl in {
    "norm": _norm, "norm_sqr": _norm_sqr, "norm_inv": _norm_inv, "normalized": _normalized, "sum": _sum,
    "dot": _dot, "cross": _cross,
    "outer_product": lambda E, a, b: E.lw.call_prim("outer", [a, b], E.node),
    "transpose": _prim1("transpose"), "determinant": _prim1("determinant"), "inverse": _prim1("inverse"),
    "trace": _prim1("trace"), "max": _mreduce(False), "min": _mreduce(True),
    "cast": lambda E, v, dt: _cast(E, v, scalar_type(dt)), "any": _any, "all": _all,
}.items()}


def dtype_of(E, x):
    return element_type(x)


# ti.atomic_add(x[i], v) and friends: the translator rewrites calls on field elements into gradkit atomics
# (macros.py); these objects only name them
# (macros.py); these objects only name them. Each returns the element's old value, as in Taichi.
ATOMIC_KINDS = ("add", "sub", "min", "max", "and", "or", "xor")
atomic_add, atomic_sub, atomic_min, atomic_max, atomic_and, atomic_or, atomic_xor = (
    LangFunction(f"atomic_{k}", "macro", macro=None, host=_kernel_only(f"atomic_{k}")) for k in ATOMIC_KINDS)
