"""min / max as C's fmin / fmax with a tie going to the second operand, the rule Warp's and Taichi's kernels
share (their dialects' min and max): a NaN operand is missing (the other one wins), `a < b ? a : b` on
integers, and the gradient goes to the operand picked. gradkit's own gk.min gives ties to the first operand
and propagates NaN."""

from __future__ import annotations


def is_literal(x) -> bool:
    """A Python number written in the kernel (its type follows the other operand)."""
    return isinstance(x, (bool, int, float))


def pick(E, x, y, t, smaller: bool):
    """One component of Warp's min / max: C's fmin / fmax on floats (a NaN operand is missing: the other one
    wins), `a < b ? a : b` on integers, and a tie picks `b`. The gradient goes to the operand picked, as
    Warp's adjoint routes it (gradkit's own gk.min gives ties to `a` and propagates NaN)."""
    wins = E._prim("lt", x, y) if smaller else E.gt(x, y)
    r = E.where(wins, x, y)
    if t.is_float:
        r = E.where(E.lw.prim("ne", raw_of(y), raw_of(y), node=E.node), x, r)
        r = E.where(E.lw.prim("ne", raw_of(x), raw_of(x), node=E.node), y, r)
    return r


def raw_of(v):
    """The IR value behind a macro operand (E's symbolic wrapper keeps it in `.v`)."""
    return getattr(v, "v", v)


def min_max(smaller: bool):
    """The macro body of min (smaller) or max: of two scalars or vectors (componentwise), or of one vector's
    components."""
    def fn(E, a, b=None):
        if b is None:               # the smallest / largest component of a vector
            t = E.type_of(a)
            comps = E.comps(a)
            r = comps[0]
            for c in comps[1:]:
                r = pick(E, c, r, t.scalar, smaller)
            return r
        t = E.type_of(b) if is_literal(a) and not is_literal(b) else E.type_of(a)
        s = t.scalar
        xs = E.comps(a) if E.type_of(a).is_vector else None
        ys = E.comps(b) if E.type_of(b).is_vector else None
        n = len(xs or ys or [None])
        xs = [E.scalar(c, s) for c in xs] if xs else [E.scalar(a, s)] * n
        ys = [E.scalar(c, s) for c in ys] if ys else [E.scalar(b, s)] * n
        out = [pick(E, x, y, s, smaller) for x, y in zip(xs, ys)]
        return out[0] if n == 1 and not t.is_vector else E.make(t, out)
    return fn
