"""Warp's rigid transforms: `wp.transform(p, q)` is 7 components, the translation p (3) then the rotation
quaternion q (4, x y z w), as in Warp's memory layout; gradkit's type is the 7-vector of the precision.
Each builtin is a macro over gradkit's quaternion code (core/library/quat.py): in kernels it is plain IR that
every backend runs and both AD modes differentiate; from Python it runs on NumPy, and `wp.transform(p, q)`
returns a host value with Warp's `.p` / `.q`. `wp.transform` itself is a type (TransformType), whose call in a
kernel builds the value from p's and q's components as any vector type's does."""

from __future__ import annotations

import numpy as np

from ..core import types as T
from ..core.lang import LangFunction
from ..core.library.macros import NumpyEmit
from ..core.library.quat import hamilton

class TransformType(T.VectorType):
    """Warp's transform type: 7 components like a vec7 (so passes and backends treat it as one), a type of
    its own so that annotations (`xf: wp.transform`), arrays (`dtype=wp.transform`) and constructors
    (`wp.transform(p, q)`, in kernels and from Python) read as in Warp, and so that `a * b` of two transforms,
    Warp's transform_multiply, is refused instead of multiplying componentwise (runtime.py)."""

    is_transform = True

    def __init__(self, scalar):
        super().__init__(7, scalar)
        self.name = "transform" + {"float32": "", "float64": "d"}[scalar.name]

    def __call__(self, p=None, q=None, *more):
        """From Python: `wp.transform(p, q)`, `wp.transform()` (the identity), or 7 numbers."""
        if p is None:
            values = [0.0] * 6 + [1.0]
        elif q is None:
            values = list(np.asarray(p).reshape(-1))
        elif more:
            values = [p, q, *more]
        else:
            values = list(np.asarray(p).reshape(-1)) + list(np.asarray(q).reshape(-1))
        if len(values) != 7:
            raise ValueError(f"wp.{self.name}(p, q): p has 3 components and q 4; got {len(values)} in all")
        return np.array(values, dtype=self.scalar.np_dtype).view(HostTransform)


TRANSFORM = {T.float32: TransformType(T.float32), T.float64: TransformType(T.float64)}


class HostTransform(np.ndarray):
    """A transform on the host: 7 numbers with Warp's `.p` (translation) and `.q` (rotation) views."""

    @property
    def p(self):
        return np.asarray(self)[:3]

    @property
    def q(self):
        return np.asarray(self)[3:]


def _parts(E, t, what="t"):
    ty = E.type_of(t)
    if not (ty.is_vector and ty.length == 7 and ty.scalar.is_float):    # a transform (or a vec7)
        E.fail(f"{what} must be a transform (wp.transform: 7 float components), got {ty.name}")
    c = E.comps(t)
    return ty.scalar, c[:3], c[3:]


def _rotate(q, v, sign=1.0):
    """Components of v rotated by unit quaternion q (its inverse with sign -1): Warp's quat_rotate formula."""
    x, y, z, w = q
    c = w * w * 2.0 - 1.0
    d = (x * v[0] + y * v[1] + z * v[2]) * 2.0
    cr = [y * v[2] - z * v[1], z * v[0] - x * v[2], x * v[1] - y * v[0]]
    qv = [x, y, z]
    return [v[k] * c + qv[k] * d + cr[k] * w * (2.0 * sign) for k in range(3)]


def _vec3(E, v, s, what):
    ty = E.type_of(v)
    if not (ty.is_vector and ty.length == 3):
        E.fail(f"{what} must be a 3-vector, got {ty.name}")
    return [E.scalar(c, s) for c in E.comps(v)]


def transform_identity(E, dtype=T.float32):
    s = T.as_type(dtype)
    zero, one = E.const(0.0, s), E.const(1.0, s)
    return E.make(TRANSFORM[s], [zero] * 6 + [one])


def transform_get_translation(E, t):
    s, p, _ = _parts(E, t)
    return E.make(T.vector(3, s), p)


def transform_get_rotation(E, t):
    s, _, q = _parts(E, t)
    return E.make(T.quaternion(s), q)


def transform_point(E, t, v):
    """q v q⁻¹ + p."""
    s, p, q = _parts(E, t)
    r = _rotate(q, _vec3(E, v, s, "point"))
    return E.make(T.vector(3, s), [r[k] + p[k] for k in range(3)])


def transform_vector(E, t, v):
    """q v q⁻¹ (no translation)."""
    s, _, q = _parts(E, t)
    return E.make(T.vector(3, s), _rotate(q, _vec3(E, v, s, "vector")))


def transform_inverse(E, t):
    """(-(q⁻¹ p), q⁻¹)."""
    s, p, q = _parts(E, t)
    qi = [-q[0], -q[1], -q[2], q[3]]
    pi = _rotate(qi, p)
    return E.make(TRANSFORM[s], [-c for c in pi] + qi)


def transform_multiply(E, a, b):
    """a ∘ b: (p_a + q_a p_b q_a⁻¹, q_a q_b)."""
    s, pa, qa = _parts(E, a, "a")
    _, pb, qb = _parts(E, b, "b")
    r = _rotate(qa, pb)
    return E.make(TRANSFORM[s], [r[k] + pa[k] for k in range(3)] + hamilton(qa, qb))


def _host(name, fn):
    def host(*args, **kwargs):
        out = fn(NumpyEmit(name), *args, **kwargs)
        return out.view(HostTransform) if isinstance(out, np.ndarray) and out.shape == (7,) else out
    host.__name__ = name
    return host


_FUNCTIONS = {f.__name__: f for f in (transform_identity, transform_get_translation, transform_get_rotation,
                                      transform_point, transform_vector, transform_inverse, transform_multiply)}
WARP_TRANSFORMS = {name: LangFunction(name, "macro", macro=fn, host=_host(name, fn), doc=f"Warp's wp.{name}")
                   for name, fn in _FUNCTIONS.items()}
WARP_TRANSFORMS.update(transform=TRANSFORM[T.float32], transformf=TRANSFORM[T.float32],
                       transformd=TRANSFORM[T.float64])


def multiplies_transforms(fn) -> bool:
    """Whether typed IR `fn` (or a function it calls) multiplies two transforms with `*`."""
    from ..core.ir import Function
    seen = set()

    def walk(f) -> bool:
        if id(f) in seen:
            return False
        seen.add(id(f))
        for ins in f.walk():
            if ins.attrs.get("name") == "mul" and len(ins.args) == 2 and \
                    all(getattr(getattr(a, "type", None), "is_transform", False) for a in ins.args):
                return True
            for v in ins.attrs.values():
                if isinstance(v, Function) and walk(v):
                    return True
        return False
    return walk(fn)
