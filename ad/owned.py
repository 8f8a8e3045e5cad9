"""Thread-owned array elements: which index tuples of a kernel name an element no other thread of the launch
touches, so that reverse mode's adjoint add into it may be a plain load-add-store (no atomic, no per-worker
copy of the gradient array on the CPU pool).

An index tuple is owned when, for every thread axis d, one of its components is `a * tid_d + u`: `a` an
integer constant with at most one factor of two (odd or twice odd: injective on 32- and 64-bit wrapping
integers for the 0..2^31 thread ids a launch has) and `u` launch-invariant — built from constants, scalar
arguments and array extents only, so the same for every thread and every iteration of a loop (a serial loop's
variable, a loaded value or another thread coordinate is not). Two threads then differ in that component, so
they never meet on an element (the other components may be anything: `x[t, i]` with `t` a time-step argument
is the Warp / DiffTaichi idiom). The owner's `signature` names those components: accesses to one array with
different signatures (`x[i, 0]` and `x[1, i]`) may meet, and `consistent_arrays` refuses them. Like the
`[tid]` rule this generalises, it assumes each index is in bounds (an out-of-bounds index is an error the
bounds checks report, not an element of another row).
"""

from __future__ import annotations

from ..core.ir import Function, Value
from ..core.ops import MEMORY, OPAQUE, Op

# integer operations whose result depends on their operands alone: invariant operands, invariant result
_PURE = frozenset({"add", "sub", "mul", "neg", "floordiv", "mod", "div", "min", "max", "abs",
                   "bit_and", "bit_or", "bit_xor", "bit_not", "shl", "shr", "cast"})


class Owners:
    """The owned-index analysis of one function (forward or adjoint IR): `signature(idx)` for an index tuple."""

    def __init__(self, fn: Function):
        ndim = fn.attrs.get("tid_ndim", 1)
        self.ndim = ndim
        self.defs = {r.id: ins for ins in fn.walk() for r in ins.results}
        self.tids = {ins.result.id: ins.attrs["axis"] for ins in fn.walk()
                     if ins.op == Op.TID and ins.attrs.get("ndim", ndim) == ndim}
        self.params = {p.value.id for p in fn.params}
        self._inv: dict[int, tuple | None] = {}
        self._aff: dict[int, tuple | None] = {}

    # ------------------------------------------------------------------ launch-invariant values
    def invariant(self, v: Value) -> tuple | None:
        """A key for `v` when it is the same for every thread and iteration (equal keys: equal values)."""
        if v.id in self._inv:
            return self._inv[v.id]
        self._inv[v.id] = None                      # (no cycles in SSA; guards a malformed input)
        key = self._invariant(v)
        self._inv[v.id] = key
        return key

    def _invariant(self, v: Value) -> tuple | None:
        if v.const_value is not None:
            return _const_key(v.type, v.const_value)
        if v.id in self.params:
            return None if v.type.is_array else ("arg", v.id)
        ins = self.defs.get(v.id)
        if ins is None:                             # a region parameter: a loop's variable or carried value
            return None
        if ins.op == Op.CONST:
            return _const_key(v.type, ins.attrs["value"])
        if ins.op == Op.SHAPE and ins.args[0].id in self.params:
            return ("shape", ins.args[0].id, ins.attrs["axis"])
        if ins.op != Op.PRIM or ins.attrs["name"] not in _PURE or not v.type.is_scalar:
            return None
        keys = [self.invariant(a) for a in ins.args]
        if any(k is None for k in keys):
            return None
        return (ins.attrs["name"], v.type.name, *keys)

    # ------------------------------------------------------------------ a * tid + u
    def affine(self, v: Value) -> tuple | None:
        """(axis, a, key of u) when `v` is a * tid_axis + u with a invertible (see the module docstring)."""
        if v.id in self._aff:
            return self._aff[v.id]
        self._aff[v.id] = None
        form = self._affine(v)
        if form is not None and not _invertible(form[1]):
            form = None
        self._aff[v.id] = form
        return form

    def _affine(self, v: Value) -> tuple | None:
        if v.id in self.tids:
            return (self.tids[v.id], 1, ("c", "int", 0))
        ins = self.defs.get(v.id)
        if ins is None or ins.op != Op.PRIM or not v.type.is_int:
            return None
        name, args = ins.attrs["name"], ins.args
        if name == "cast":
            src = args[0].type
            if src.is_int and v.type.bits >= src.bits:
                return self.affine(args[0])         # no narrower: distinct values stay distinct
            return None
        if name == "neg":
            f = self.affine(args[0])
            return None if f is None else (f[0], -f[1], ("neg", f[2]))
        if len(args) != 2 or name not in ("add", "sub", "mul"):
            return None
        x, y = args
        fx, fy = self.affine(x), self.affine(y)
        if name == "add":
            f, u = (fx, y) if fx is not None else (fy, x)
            k = self.invariant(u) if f is not None else None
            return None if k is None else (f[0], f[1], ("add", f[2], k))
        if name == "sub":
            if fx is not None and (k := self.invariant(y)) is not None:
                return (fx[0], fx[1], ("sub", fx[2], k))
            if fy is not None and (k := self.invariant(x)) is not None:
                return (fy[0], -fy[1], ("rsub", fy[2], k))
            return None
        f, c = (fx, y) if fx is not None else (fy, x)            # mul: by an integer constant only
        if f is None or not isinstance(c.const_value, int) or isinstance(c.const_value, bool):
            return None
        return (f[0], f[1] * c.const_value, ("mul", f[2], c.const_value))

    # ------------------------------------------------------------------ index tuples
    def signature(self, idx) -> frozenset | None:
        """The owning components of an index tuple, {(position, axis, a, key of u)}, covering every thread
        axis; None when the tuple is not proven thread-owned."""
        found = set()
        for pos, v in enumerate(idx):
            f = self.affine(v)
            if f is not None:
                found.add((pos, *f))
        if {f[1] for f in found} != set(range(self.ndim)):
            return None
        return frozenset(found)


def _const_key(t, value) -> tuple:
    """A constant's key: floats by their text, so -0.0 and 0.0 (equal, yet 1 / x differs) get two keys."""
    return ("c", t.name, value if isinstance(value, int) else repr(value))


def _invertible(a: int) -> bool:
    """a * t is injective on 32-bit wrapping integers for 0 <= t < 2^31 (and on 64-bit ones): a has at
    most one factor of two."""
    return a != 0 and (a & 3) != 0


def consistent_arrays(fn: Function, arrays: set[int], owners: Owners | None = None) -> set[int]:
    """Those of `arrays` (value ids) that every access of `fn` indexes thread-owned with one signature, and
    no opaque code receives: their elements each belong to one thread for the whole launch."""
    owners = owners or Owners(fn)
    sigs: dict[int, set] = {}
    bad: set[int] = set()
    for ins in fn.walk():
        if ins.op in OPAQUE:                        # code that may index the array its own way
            bad.update(a.id for a in ins.args)
        elif ins.op in MEMORY and ins.args[0].id in arrays:
            arr = ins.args[0]
            idx = ins.args[1:1 + arr.type.ndim]
            s = owners.signature(idx)
            if s is None:
                bad.add(arr.id)
            else:
                sigs.setdefault(arr.id, set()).add(s)
    return {a for a, s in sigs.items() if len(s) == 1 and a not in bad}
