"""Vector and matrix primitives. Each has a type rule, NumPy semantics and a
`decompose` rule into scalar primitives (run by the scalarize pass), so their
derivatives follow from those of the scalar primitives they expand into.

Matrices are row-major: component k of an r×c matrix is element (k // c, k % c).
"""

from __future__ import annotations

import numpy as np

from ..types import int32, int64, uint32, matrix, vector
from .table import Builtin, BuiltinTypeError, register


def _name(t) -> str:
    return getattr(t, "name", repr(t))


def _need_vec(name, t):
    if not t.is_vector:
        raise BuiltinTypeError(f"{name}() needs a vector, got {_name(t)}")


def _need_float(name, t):
    if not t.scalar.is_float:
        raise BuiltinTypeError(f"{name}() needs float components, got {_name(t)}")


def _sum(b, terms):
    total = terms[0]
    for t in terms[1:]:
        total = b.add(total, t)
    return total


# --------------------------------------------------------------------------- construct / extract / insert

def _construct_rule(types, attrs):
    t = attrs["type"]
    if len(types) != t.ncomp:
        raise BuiltinTypeError(f"{t.name} takes {t.ncomp} components, got {len(types)}")
    for x in types:
        if x is not t.scalar:
            raise BuiltinTypeError(f"{t.name} components must be {t.scalar.name}, got {_name(x)}")
    return t


register(Builtin("construct", _construct_rule, differentiable=False,
                 eval=lambda *xs, type: np.stack(np.broadcast_arrays(*xs), -1).reshape(
                     np.broadcast(*xs).shape + type.shape),
                 decompose=lambda b, a, comps, ot, at: [c[0] for c in comps],
                 doc="vector/matrix from scalar components (row-major)"))

_INDEX_TYPES = (int32, int64, uint32)


def _extract_rule(types, attrs):
    v, *idx = types
    if any(i not in _INDEX_TYPES for i in idx):
        raise BuiltinTypeError(f"index must be an integer, got {', '.join(map(_name, idx))}")
    if v.is_vector and len(idx) == 1:
        return v.scalar
    if v.is_matrix and len(idx) == 1:
        return vector(v.cols, v.scalar)
    if v.is_matrix and len(idx) == 2:
        return v.scalar
    raise BuiltinTypeError(f"cannot index {_name(v)} with {len(idx)} indices")


def _static(v):
    """The constant int behind an index Value, or None if it is computed at run time."""
    return getattr(v, "const_value", None)


def _pick(b, comps, index, stride=1, width=1):
    """Components [index*stride : index*stride+width]; a where-chain for a run-time index."""
    k = _static(index)
    n = len(comps) // stride
    if k is not None:
        if not 0 <= k < n:
            raise BuiltinTypeError(f"index {k} out of range for {n} components")
        return comps[k * stride:k * stride + width]
    out = list(comps[(n - 1) * stride:(n - 1) * stride + width])
    for j in range(n - 2, -1, -1):
        hit = b.prim("eq", index, b.const(j, index.type))
        out = [b.select(hit, comps[j * stride + w], out[w]) for w in range(width)]
    return out


def _extract_decompose(b, args, comps, ot, at):
    v = args[0]
    if v.type.is_vector:
        return _pick(b, comps[0], args[1])
    cols = v.type.cols
    row = _pick(b, comps[0], args[1], stride=cols, width=cols)
    if len(args) == 2:
        return row
    return _pick(b, row, args[2])


register(Builtin("extract", _extract_rule, differentiable=False,
                 eval=lambda v, *idx: v[tuple(idx)],
                 decompose=_extract_decompose, doc="v[i], m[i] (a row), m[i, j]"))


def _insert_rule(types, attrs):
    v, x, *idx = types
    expect = _extract_rule([v, *idx], attrs)
    if x is not expect:
        raise BuiltinTypeError(f"cannot assign {_name(x)} into an element of {_name(v)} (needs {_name(expect)})")
    return v


def _insert_decompose(b, args, comps, ot, at):
    v, _x, *idx = args
    old, new = comps[0], comps[1]
    cols = v.type.cols if v.type.is_matrix else 1
    flat = list(old)
    if v.type.is_vector or (v.type.is_matrix and len(idx) == 2):
        # A single component: k = i (vector) or i*cols + j (matrix).
        n = len(old)
        for k in range(n):
            conds = []
            want = (k,) if v.type.is_vector else (k // cols, k % cols)
            static = [_static(i) for i in idx]
            if all(s is not None for s in static):
                if tuple(static) == want:
                    flat[k] = new[0]
                continue
            for i, w in zip(idx, want):
                conds.append(b.prim("eq", i, b.const(w, i.type)))
            hit = conds[0] if len(conds) == 1 else b.prim("and", *conds)
            flat[k] = b.select(hit, new[0], old[k])
        return flat
    # A whole row of a matrix.
    for k in range(len(old)):
        r, c = divmod(k, cols)
        s = _static(idx[0])
        if s is not None:
            if s == r:
                flat[k] = new[c]
            continue
        flat[k] = b.select(b.prim("eq", idx[0], b.const(r, idx[0].type)), new[c], old[k])
    return flat


register(Builtin("insert", _insert_rule, differentiable=False, decompose=_insert_decompose,
                 doc="copy of v with v[i] (or m[i], m[i, j]) replaced"))


# --------------------------------------------------------------------------- vector algebra

def _dot_rule(types, attrs):
    a, c = types
    _need_vec("dot", a)
    if a is not c:
        raise BuiltinTypeError(f"dot() of different types {_name(a)} and {_name(c)}")
    return a.scalar


def _vec_float_rule(name, result):
    def rule(types, attrs):
        (v,) = types
        _need_vec(name, v)
        _need_float(name, v)
        return v.scalar if result == "scalar" else v
    return rule


def _cross_rule(types, attrs):
    a, c = types
    if a is not c or not a.is_vector or a.length != 3:
        raise BuiltinTypeError(f"cross() needs two vec3 of one type, got {_name(a)}, {_name(c)}")
    return a


def _dot(b, x, y):
    return _sum(b, [b.mul(p, q) for p, q in zip(x, y)])


def _cross(b, a, c):
    return [b.sub(b.mul(a[1], c[2]), b.mul(a[2], c[1])),
            b.sub(b.mul(a[2], c[0]), b.mul(a[0], c[2])),
            b.sub(b.mul(a[0], c[1]), b.mul(a[1], c[0]))]


register(Builtin("dot", _dot_rule, arity=2, eval=lambda a, c: np.sum(a * c, -1),
                 decompose=lambda b, a, comps, ot, at: [_dot(b, comps[0], comps[1])], public=True))
register(Builtin("cross", _cross_rule, arity=2, eval=np.cross,
                 decompose=lambda b, a, comps, ot, at: _cross(b, comps[0], comps[1]), public=True))
register(Builtin("length_sq", _vec_float_rule("length_sq", "scalar"), arity=1,
                 eval=lambda v: np.sum(v * v, -1),
                 decompose=lambda b, a, comps, ot, at: [_dot(b, comps[0], comps[0])], public=True))
register(Builtin("length", _vec_float_rule("length", "scalar"), arity=1,
                 eval=lambda v: np.sqrt(np.sum(v * v, -1)),
                 decompose=lambda b, a, comps, ot, at: [b.prim("sqrt", _dot(b, comps[0], comps[0]), subgrad=True)],
                 doc="|v| (gradient 0 at v = 0, as in Warp)", public=True))


def _normalize(b, a, comps, ot, at):
    v = comps[0]
    n = b.prim("sqrt", _dot(b, v, v), subgrad=True)
    zero = b.const(0.0, ot.scalar)
    safe = b.prim("gt", n, zero)
    inv = b.select(safe, b.div(b.const(1.0, ot.scalar), b.select(safe, n, b.const(1.0, ot.scalar))), zero)
    return [b.mul(x, inv) for x in v]


def _np_normalize(v):
    n = np.sqrt(np.sum(v * v, -1, keepdims=True))
    return np.where(n > 0, v / np.where(n > 0, n, 1), 0).astype(v.dtype)


register(Builtin("normalize", _vec_float_rule("normalize", "vector"), arity=1, eval=_np_normalize,
                 decompose=_normalize, doc="v / |v| (zero vector stays zero)", public=True))


# --------------------------------------------------------------------------- matrices

def _outer_rule(types, attrs):
    a, c = types
    _need_vec("outer", a)
    _need_vec("outer", c)
    if a.scalar is not c.scalar:
        raise BuiltinTypeError(f"outer() of different types {_name(a)} and {_name(c)}")
    _need_float("outer", a)
    return matrix((a.length, c.length), a.scalar)


def _need_mat(name, t, square=False):
    if not t.is_matrix:
        raise BuiltinTypeError(f"{name}() needs a matrix, got {_name(t)}")
    if square and t.rows != t.cols:
        raise BuiltinTypeError(f"{name}() needs a square matrix, got {_name(t)}")


def _transpose_rule(types, attrs):
    (m,) = types
    _need_mat("transpose", m)
    return matrix((m.cols, m.rows), m.scalar)


def _square_rule(name, result):
    def rule(types, attrs):
        (m,) = types
        _need_mat(name, m, square=True)
        if name in ("inverse", "determinant") and m.rows > 4:
            raise BuiltinTypeError(f"{name}() supports up to 4x4 matrices")
        return m.scalar if result == "scalar" else m
    return rule


def _det(b, comps, n):
    """Determinant by cofactor expansion along the first row (n ≤ 4)."""
    if n == 1:
        return comps[0]
    if n == 2:
        return b.sub(b.mul(comps[0], comps[3]), b.mul(comps[1], comps[2]))
    terms = []
    for j in range(n):
        minor = [comps[r * n + c] for r in range(1, n) for c in range(n) if c != j]
        term = b.mul(comps[j], _det(b, minor, n - 1))
        terms.append(term if j % 2 == 0 else b.neg(term))
    return _sum(b, terms)


def _inverse(b, a, comps, ot, at):
    n, m = ot.rows, comps[0]
    det = _det(b, m, n)
    inv_det = b.div(b.const(1.0, ot.scalar), det)
    out = [None] * (n * n)
    for r in range(n):
        for c in range(n):
            minor = [m[i * n + j] for i in range(n) for j in range(n) if i != r and j != c]
            cof = _det(b, minor, n - 1) if n > 1 else b.const(1.0, ot.scalar)
            if (r + c) % 2:
                cof = b.neg(cof)
            out[c * n + r] = b.mul(cof, inv_det)  # adjugate = transposed cofactors
    return out


def _matmul_rule(types, attrs):
    a, c = types
    if a.is_matrix and c.is_vector and a.cols == c.length and a.scalar is c.scalar:
        return vector(a.rows, a.scalar)
    if a.is_vector and c.is_matrix and a.length == c.rows and a.scalar is c.scalar:
        return vector(c.cols, a.scalar)
    if a.is_matrix and c.is_matrix and a.cols == c.rows and a.scalar is c.scalar:
        return matrix((a.rows, c.cols), a.scalar)
    raise BuiltinTypeError(f"cannot multiply {_name(a)} @ {_name(c)}")


def _matmul(b, args, comps, ot, at):
    ta, tc = args[0].type, args[1].type
    x, y = comps
    rows_a, inner = (ta.rows, ta.cols) if ta.is_matrix else (1, ta.length)
    cols_c = tc.cols if tc.is_matrix else 1
    out = []
    for r in range(rows_a):
        for c in range(cols_c):
            out.append(_sum(b, [b.mul(x[r * inner + k], y[k * cols_c + c]) for k in range(inner)]))
    return out


def _np_matmul(a, c):
    a, c = np.asarray(a), np.asarray(c)
    if c.ndim == a.ndim - 1:  # matrix @ vector (batched)
        return np.einsum("...ij,...j->...i", a, c)
    if a.ndim == c.ndim - 1:  # vector @ matrix
        return np.einsum("...i,...ij->...j", a, c)
    return a @ c


def _identity_rule(types, attrs):
    if types:
        raise BuiltinTypeError("identity() takes keyword arguments n= and dtype= only")
    return matrix((attrs["n"], attrs["n"]), attrs["dtype"])


register(Builtin("outer", _outer_rule, arity=2, eval=lambda a, c: np.einsum("...i,...j->...ij", a, c),
                 decompose=lambda b, a, comps, ot, at: [b.mul(x, y) for x in comps[0] for y in comps[1]], public=True))
register(Builtin("transpose", _transpose_rule, arity=1, eval=lambda m: np.swapaxes(m, -1, -2),
                 decompose=lambda b, a, comps, ot, at: [comps[0][(k % ot.cols) * ot.rows + k // ot.cols]
                                                        for k in range(ot.ncomp)], public=True))
register(Builtin("determinant", _square_rule("determinant", "scalar"), arity=1, eval=np.linalg.det,
                 decompose=lambda b, a, comps, ot, at: [_det(b, comps[0], a[0].type.rows)], public=True))
register(Builtin("inverse", _square_rule("inverse", "matrix"), arity=1, eval=np.linalg.inv, decompose=_inverse, public=True))
register(Builtin("trace", _square_rule("trace", "scalar"), arity=1, eval=lambda m: np.trace(m, axis1=-2, axis2=-1),
                 decompose=lambda b, a, comps, ot, at: [_sum(b, [comps[0][i * a[0].type.rows + i]
                                                                 for i in range(a[0].type.rows)])], public=True))
register(Builtin("matmul", _matmul_rule, arity=2, eval=_np_matmul, decompose=_matmul))
register(Builtin("identity", _identity_rule, differentiable=False,
                 eval=lambda n, dtype: np.eye(n, dtype=dtype.np_dtype),
                 decompose=lambda b, a, comps, ot, at: [b.const(1.0 if k // ot.cols == k % ot.cols else 0.0, ot.scalar)
                                                        for k in range(ot.ncomp)], public=True))
