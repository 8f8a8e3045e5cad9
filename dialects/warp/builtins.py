"""Warp's kernel builtins: gradkit's own where it has them (the same objects, so kernels lower them as
gradkit does), a few of Warp's written here as macros over gradkit's primitives, and the list of those
gradkit lacks (`MISSING`), each a named error when a kernel or Python calls it."""

from __future__ import annotations

import math

import numpy as np

from .. import core as _core  # noqa: F401
from ..core import lang as _lang
from ..core import types as _T
from ..core.frontend.macros import Advance, Sym
from ..core.library import random as _random
from ..core.library.picks import is_literal as _is_literal, min_max as _min_max, raw_of as _raw_of  # noqa: F401
from ..core.lang import LangFunction
from .errors import WarpFeatureMissing
from .printing import MACROS as _PRINT_MACROS

# gradkit's language names that are Warp's too, with Warp's meaning (select's argument order included)
SHARED = {name: fn for name, fn in _lang.NAMES.items() if name != "adjoint"}


def _lift(E, x, t):
    return E.scalar(x, t)


def _float_type(E, x):
    t = E.type_of(x)
    if not t.scalar.is_float:
        E.fail(f"needs a float scalar or vector, got {t.name}")
    return t


def _lerp(E, a, b, t):
    ta = _float_type(E, a)
    A, B = _lift(E, a, ta), _lift(E, b, ta)
    return A + (B - A) * E.scalar(t, ta.scalar)


def _smoothstep(E, edge0, edge1, x):
    """Warp's smoothstep: t = clamp((x - e0) / (e1 - e0), 0, 1), t² (3 - 2t); with e0 == e1 (a step at e0:
    1 past it, else 0) its gradients are 0, not the NaN of 0 * inf a plain chain rule gives."""
    t = _float_type(E, x)
    e0, e1, X = E.scalar(edge0, t), E.scalar(edge1, t), E.scalar(x, t)
    d = e1 - e0
    zero, one = E.const(0.0, t), E.const(1.0, t)
    flat = E.lw.prim("eq", _raw_of(d), _raw_of(zero), node=E.node)
    s = (X - e0) / E.where(flat, one, d)
    s = _clamp(E, s, zero, one)
    s = E.where(flat, E.where(E.gt(X, e0), one, zero), s)
    return s * s * (E.const(3.0, t) - s * 2.0)


def _mod(E, a, b):
    """wp.mod(a, b): C's % (fmod on floats), as `%` in Warp's kernels."""
    t = E.type_of(a)
    return Sym(E.lw.prim("rem", E.scalar(a, t).v, E.scalar(b, t).v, node=E.node), E)


def _floordiv(E, a, b):
    t = E.type_of(a)
    return Sym(E.lw.prim("floordiv", E.scalar(a, t).v, E.scalar(b, t).v, node=E.node), E)


def _unary(prim):
    def fn(E, x):
        return E._prim(prim, x)
    return fn


def _trunc(E, x):
    t = _float_type(E, x)
    X = E.scalar(x, t)
    return E.where(E.gt(E.const(0.0, t), X), E._prim("ceil", X), E._prim("floor", X))


def _frac(E, x):
    t = _float_type(E, x)
    X = E.scalar(x, t)
    return X - _trunc(E, X)


def _degrees(E, x):
    return E.scalar(x, _float_type(E, x)) * (180.0 / math.pi)


def _radians(E, x):
    return E.scalar(x, _float_type(E, x)) * (math.pi / 180.0)


def _step(E, x):
    t = _float_type(E, x)
    X = E.scalar(x, t)
    return E.where(E.gt(E.const(0.0, t), X), E.const(1.0, t), E.const(0.0, t))


def _nonzero(E, x):
    t = E.type_of(x)
    X = E.scalar(x, t)
    return E.where(E.lw.prim("ne", X.v, E.const(0, t).v, node=E.node), E.const(1, t), E.const(0, t))


def _same_type(E, a, b, name):
    """Both operands of Warp's wp.add / wp.sub, typed alike (a literal takes the other's type)."""
    ta = E.type_of(a) if not isinstance(a, (int, float)) else E.type_of(b)
    return E.scalar(a, ta), E.scalar(b, ta)


def _add(E, a, b):
    A, B = _same_type(E, a, b, "add")
    return A + B


def _sub(E, a, b):
    A, B = _same_type(E, a, b, "sub")
    return A - B


def _neg(E, x):
    return -E.scalar(x, E.type_of(x))


def _pos(E, x):
    return E.scalar(x, E.type_of(x))


def _randn(E, state):
    """Warp's randn: sqrt(-2 log(u1 + 5.96e-8)) cos(2 pi u2) from the next two uniform draws (gradkit's
    gk.randn uses 1 - u1), so the same seed gives Warp's numbers."""
    s1 = _random._next(E, state)
    s2 = _random._hash(E, s1)
    u1 = _random._uniform(E, s1) + E.const(5.96e-8, _T.float32)
    u2 = _random._uniform(E, s2)
    return Advance(E.sqrt(E.log(u1) * -2.0) * E.cos(u2 * (2.0 * math.pi)), s2)


def _host_randn(state):
    raise RuntimeError("wp.randn() can only be called inside a @wp.kernel or @wp.func")


def _host_lerp(a, b, t):
    return np.asarray(a) + (np.asarray(b) - np.asarray(a)) * t


def _host_smoothstep(e0, e1, x):
    s = np.clip((np.asarray(x) - e0) / (e1 - e0), 0.0, 1.0)
    return s * s * (3.0 - 2.0 * s)


def _host_mod(a, b):
    return np.fmod(a, b)


def _clamp(E, x, a, b):
    """Warp's clamp: fmin(fmax(a, x), b), each step picking (and passing the gradient) as wp.min / wp.max."""
    return _min_max(True)(E, _min_max(False)(E, a, x), b)


def _componentwise(fn):
    """A scalar macro `fn(E, x, s)` (s: x's scalar type) applied to each component of a vector."""
    def macro(E, x):
        t = E.type_of(x)
        if t.is_scalar:
            return fn(E, E.scalar(x, t), t)
        return E.make(t, [fn(E, c, t.scalar) for c in E.comps(x)])
    return macro


def _sign_of(E, x, s):
    """Warp's sign: x < 0 ? -1 : 1 (1 at zero and NaN; gk.sign gives 0 at zero); no gradient."""
    return E.where(E._prim("lt", x, E.const(0, s)), E.const(-1, s), E.const(1, s))


def _abs(E, x, s):
    """Warp's abs, whose gradient is x < 0 ? -1 : 1 (1 at zero, where gk.abs's is 0)."""
    if not s.is_float:
        return E._prim("abs", x)
    return x * _sign_of(E, x, s)


def _rint(E, x, s):
    """Round half to even (C's rint, Warp's), where gk.round rounds halves away from zero; gradient 0."""
    if not s.is_float:
        return x
    r = E._prim("floor", x + 0.5)
    odd = E.lw.prim("ne", _raw_of(E._prim("floor", r * 0.5) * 2.0), _raw_of(r), node=E.node)
    tie = E.lw.prim("eq", _raw_of(r - x), _raw_of(E.const(0.5, s)), node=E.node)
    r = E.where(tie, E.where(odd, r - 1.0, r), r)
    big = E.lw.prim("ge", _raw_of(E._prim("abs", x)), _raw_of(E.const(2.0 ** 23, s)), node=E.node)
    return E.where(big, x, r)           # past 2**23 every float is an integer (and x + 0.5 may round)


def _arc(prim):
    def fn(E, x, s):
        """Warp's asin / acos: of x clamped to [-1, 1] (a NaN clamps to -1), with gradient 0 where
        |x| >= 1 (gk's is infinite at +-1 and NaN past them)."""
        inside = E._prim("lt", E._prim("abs", x), E.const(1.0, s))
        bound = E.where(E.gt(x, E.const(0.0, s)), E.const(1.0, s), E.const(-1.0, s))
        return E._prim(prim, E.where(inside, x, bound))
    return fn


def _host_min_max(np_fn, reduce_fn):
    def host(a, b=None):
        return reduce_fn(np.asarray(a)) if b is None else np_fn(a, b)
    return host


MACROS = {
    "add": (_add, np.add), "sub": (_sub, np.subtract), "neg": (_neg, np.negative), "pos": (_pos, np.positive),
    "min": (_min_max(True), _host_min_max(np.fmin, np.nanmin)),
    "max": (_min_max(False), _host_min_max(np.fmax, np.nanmax)),
    "clamp": (_clamp, lambda x, a, b: np.fmin(np.fmax(a, x), b)),
    "sign": (_componentwise(_sign_of), lambda x: np.where(np.asarray(x) < 0, -1, 1).astype(np.asarray(x).dtype)),
    "abs": (_componentwise(_abs), np.abs),
    "asin": (_componentwise(_arc("asin")), lambda x: np.arcsin(np.fmin(np.fmax(x, -1.0), 1.0))),
    "acos": (_componentwise(_arc("acos")), lambda x: np.arccos(np.fmin(np.fmax(x, -1.0), 1.0))),
    "lerp": (_lerp, _host_lerp), "smoothstep": (_smoothstep, _host_smoothstep), "mod": (_mod, _host_mod),
    "floordiv": (_floordiv, lambda a, b: np.floor_divide(a, b)), "trunc": (_trunc, np.trunc),
    "frac": (_frac, lambda x: x - np.trunc(x)), "degrees": (_degrees, np.degrees),
    "radians": (_radians, np.radians), "step": (_step, lambda x: np.where(x < 0, 1.0, 0.0)),
    "nonzero": (_nonzero, lambda x: np.where(np.asarray(x) != 0, 1, 0)),
    "rint": (_componentwise(_rint), np.rint), "randn": (_randn, _host_randn),
}
MACROS.update(_PRINT_MACROS)      # wp.printf, wp.print, wp.expect_eq / expect_neq / expect_near (printing.py)
WARP_MACROS = {name: LangFunction(name, "macro", macro=fn, host=host, doc=f"Warp's wp.{name}")
               for name, (fn, host) in MACROS.items()}
for _name, _f in WARP_MACROS.items():
    _f.macro.__name__ = _name

# Warp builtins gradkit does not have yet (kernel code): each raises WarpFeatureMissing when used
MISSING = (
    "div", "unot", "invert", "bit_and", "bit_or", "bit_xor", "lshift", "rshift",
    "cbrt", "copysign", "erfc", "erfinv", "erfcinv", "isfinite", "isinf", "isnan", "cw_mul", "cw_div",
    "ddot", "diag", "get_diag", "skew", "matrix_from_cols", "matrix_from_rows", "norm_l1", "norm_l2",
    "norm_huber", "norm_pseudo_huber", "smooth_normalize", "argmin", "argmax", "quat_between_vectors",
    "quat_from_matrix", "quat_slerp", "quat_to_rpy", "quat_from_euler", "quat_to_euler", "quat_twist",
    "quat_twist_angle", "spatial_vector", "spatial_matrix", "spatial_dot", "spatial_cross",
    "spatial_top", "spatial_bottom", "velocity_at_point", "atomic_cas", "atomic_exch", "atomic_and",
    "atomic_or", "atomic_xor", "randu", "noise", "pnoise", "curlnoise", "poisson", "sample_cdf",
    "sample_triangle", "sample_unit_ring", "sample_unit_disk", "sample_unit_sphere_surface",
    "sample_unit_sphere", "sample_unit_hemisphere_surface", "sample_unit_hemisphere", "sample_unit_square",
    "sample_unit_cube", "lower_bound", "bit_count", "block_dim",
    "tile", "tile_load", "tile_store", "tile_sum", "tile_atomic_add", "tile_fft", "tile_ifft",
    "tile_transpose", "tile_stack", "launch_tiled", "dense_gemm", "dense_chol", "dense_solve", "dense_subs",
    "float16", "int8", "int16", "uint8", "uint16", "bfloat16", "address", "view", "array_store",
    "indexedarray", "fabricarray", "fixedarray", "Texture", "Texture1D", "Texture2D", "Texture3D",
    "volume_sample_f", "volume_lookup_f", "volume_sample_v", "volume_sample_grad_f",
    # geometry queries: grouped BVHs, tiled queries
    "bvh_get_group_root", "bvh_query_aabb_tiled", "bvh_query_ray_tiled", "bvh_query_next_tiled",
    "mesh_get_group_root", "mesh_query_aabb_tiled", "mesh_query_aabb_next_tiled",
)


MISSING_SET = frozenset(MISSING)


def missing_builtin(name: str):
    def raise_missing(E, *args, **kwargs):
        raise WarpFeatureMissing(name, "gradkit has no such builtin yet")

    def host(*args, **kwargs):
        raise WarpFeatureMissing(name, "gradkit has no such builtin yet")
    raise_missing.__name__ = name
    return LangFunction(name, "macro", macro=raise_missing, host=host, doc=f"Warp's wp.{name} (missing)")
