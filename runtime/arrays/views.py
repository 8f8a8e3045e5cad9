"""Zero-copy views of a gk.array (Warp's `reshape`, `flatten`, `view`): a new array object sharing the
buffer (and host memory) of its base, with another shape or element type of the same size.

Views and their base form one family: a write through any member (a launch output, assign, fill_, an
element write) moves the version of every member, so a tape that recorded one sees writes through the
others. A view of a base with `.grad` gets the same view of that gradient, so gradients computed
through a view land in the base's."""

from __future__ import annotations

import weakref

from ...core.types import Type
from .array_input import _as_dtype


def _shape(base, shape, arg: str = "shape") -> tuple[int, ...]:
    """`shape` (ints, one of them may be -1) resolved against base.size; ValueError naming `arg`."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise TypeError(f"{arg} must be an int or a tuple of ints, got {shape!r}")
    if len(dims) > 4:
        raise ValueError(f"{arg} {dims} has {len(dims)} dimensions; arrays have 1 to 4")
    free = [k for k, d in enumerate(dims) if d == -1]
    if len(free) > 1 or any(d < -1 for d in dims):
        raise ValueError(f"{arg} {dims}: at most one dimension may be -1 and none other negative")
    known = 1
    for d in dims:
        known *= d if d != -1 else 1
    if free:
        if known == 0 or base.size % known:
            raise ValueError(f"cannot reshape an array of {base.size} elements to {dims}")
        dims = dims[:free[0]] + (base.size // known,) + dims[free[0] + 1:]
    elif known != base.size:
        raise ValueError(f"cannot reshape an array of shape {base.shape} ({base.size} elements) to {dims}")
    return dims


def alias(base, dims: tuple[int, ...], dt: Type):
    """A new array object over base's memory with shape `dims` and element type `dt` (same total bytes)."""
    from .array import array
    a = object.__new__(array)
    a.shape, a.ndim, a.dtype, a.device, a.buffer, a.nbytes = dims, len(dims), dt, base.device, base.buffer, base.nbytes
    a.size = base.size * base.dtype.ncomp * base.dtype.scalar.np_dtype.itemsize // (dt.ncomp * dt.scalar.np_dtype.itemsize)
    a.version, a.label, a._grad, a._dual = base.version, None, None, None
    a._held = a._exposed = False
    a._crc, a._gstate, a._retain = None, None, False
    a._host = None if base._host is None else base._host.reshape(-1).view(dt.scalar.np_dtype).reshape(dims + dt.shape)
    family = base._family
    if family is None:
        family = base._family = weakref.WeakSet([base])
    family.add(a)
    a._family = family
    return a


def family_part(a, slot: str):
    """`a`'s gradient (slot "_grad") or dual ("_dual") as a view of one a member of its family has
    (None if none has one, or the element types differ: ints have no gradient)."""
    for m in list(a._family):
        if slot == "_grad" and m is not a and m._gstate is not None:
            part = m.grad       # a gradient not kept raises here; a known zero is made now, to view
            return alias(part, a.shape, a.dtype) if m.dtype.scalar is a.dtype.scalar else None
        part = getattr(m, slot) if m is not a else None
        if part is not None and m.dtype.scalar is a.dtype.scalar:
            return alias(part, a.shape, a.dtype)
    return None


def spread_part(a, slot: str) -> None:
    """Give every other member of a's family that has none a's gradient (slot "_grad") or dual ("_dual"),
    viewed in its own shape: one was just made for `a`, and a view that dies must not take it with it."""
    part = getattr(a, slot)
    if a._family is None or part is None:
        return
    for m in list(a._family):
        if m is not a and getattr(m, slot) is None and m.dtype.scalar is a.dtype.scalar:
            setattr(m, slot, alias(part, m.shape, m.dtype))


def family(a) -> list:
    """The arrays sharing a's memory (a itself included)."""
    return [a] if a._family is None else list(a._family)


def reshape(base, shape):
    """`a.reshape(shape)`: the same memory with another shape (one dimension may be -1)."""
    return alias(base, _shape(base, shape), base.dtype)


def view(base, dtype):
    """`a.view(dtype)`: the same memory read as elements of `dtype`, which must have the element size of
    the array's dtype (Warp's rule), e.g. float32 <-> int32/uint32, vec2d <-> vec4 ..."""
    dt = _as_dtype(dtype)
    if dt.is_struct or dt.is_array:
        raise TypeError(f"view(dtype): {dt.name} cannot view an array's memory")
    mine = base.dtype.ncomp * base.dtype.scalar.np_dtype.itemsize
    theirs = dt.ncomp * dt.scalar.np_dtype.itemsize
    if mine != theirs:
        raise ValueError(f"view(dtype): {dt.name} elements take {theirs} bytes but this array's {base.dtype.name} "
                         f"elements take {mine}; a view keeps the element size (use reshape for the shape)")
    return alias(base, base.shape, dt)
