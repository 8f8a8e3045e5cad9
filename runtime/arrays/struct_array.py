"""Arrays of `@gk.struct` elements, stored field by field (one gk.array per field, each of the array's
shape): `gk.array(dtype=Body, shape=n)` or `gk.array([Body(...), ...], dtype=Body)`. Kernels take them
as one array parameter per field (`bodies.pos`, `bodies.mass`), so every backend and both AD modes
handle them unchanged; `bodies.grad` is the same struct-of-arrays of the fields' gradients."""

from __future__ import annotations

import numpy as np


class StructArray:
    """A struct-of-arrays: `.pos` is the gk.array of every element's `pos` (nested structs nest)."""

    def __init__(self, stype, fields: dict):
        self.dtype, self._fields = stype, fields
        first = next(iter(self._leaves()))
        self.shape, self.ndim, self.size, self.device = first.shape, first.ndim, first.size, first.device

    @classmethod
    def create(cls, stype, shape, device=None, requires_grad=False, data=None):
        from ...core.types import array_type
        from .array_input import _as_shape
        from .creation import zeros
        shape = _as_shape(shape)
        array_type(stype, len(shape))          # refuses structs that cannot be array elements
        fields = {}
        for name, t in stype.fields.items():
            if t.is_struct:
                fields[name] = cls.create(t, shape, device, requires_grad)
            else:
                fields[name] = zeros(shape, dtype=t, device=device, requires_grad=requires_grad and t.scalar.is_float)
        out = cls(stype, fields)
        if data is not None:
            out.assign(data)
        return out

    def _leaves(self):
        for v in self._fields.values():
            yield from (v._leaves() if isinstance(v, StructArray) else (v,))

    def flat_arrays(self) -> list:
        """The field arrays in StructType.flat order (a kernel's flattened parameters)."""
        return list(self._leaves())

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(f"array of {self.dtype.name} has no field '{name}' (fields: {', '.join(fields)})")

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index):
        """One element as a host struct instance (a copy)."""
        out = self.dtype.cls()
        for name, v in self._fields.items():
            setattr(out, name, v[index] if isinstance(v, StructArray) else v.numpy()[index])
        return out

    def assign(self, values) -> "StructArray":
        """Write a sequence of struct instances (one per element, the array's length)."""
        values = list(values)
        if len(values) != self.shape[0] or self.ndim != 1:
            raise ValueError(f"assign needs {self.shape[0]} {self.dtype.name} instances for a 1-D array, "
                             f"got {len(values)}")
        for k, v in enumerate(values):
            if not isinstance(v, self.dtype.cls):
                raise TypeError(f"element {k} must be a {self.dtype.name} instance, got {type(v).__name__}")
        for name, arr in self._fields.items():
            items = [getattr(v, name) for v in values]
            if isinstance(arr, StructArray):
                arr.assign(items)
            else:
                arr.assign(np.stack([np.asarray(x) for x in items]))
        return self

    @property
    def grad(self) -> "StructArray | None":
        grads = {}
        for name, v in self._fields.items():
            grads[name] = v.grad if isinstance(v, StructArray) else (v.grad if v.grad is not None else v)
        return StructArray(self.dtype, grads) if self.requires_grad else None

    @property
    def requires_grad(self) -> bool:
        return any(a.requires_grad for a in self._leaves())

    def numpy(self) -> np.ndarray:
        """A NumPy structured array (a copy) with one field per struct field."""
        def np_dtype(stype):
            return np.dtype([(n, np_dtype(t)) if t.is_struct else (n, t.scalar.np_dtype, t.shape)
                             for n, t in stype.fields.items()])
        out = np.zeros(self.shape, dtype=np_dtype(self.dtype))

        def fill(dst, sarr):
            for name, v in sarr._fields.items():
                if isinstance(v, StructArray):
                    fill(dst[name], v)
                else:
                    dst[name] = v.numpy()
        fill(out, self)
        return out

    def __repr__(self) -> str:
        return f"gk.array(dtype={self.dtype.name}, shape={self.shape}, device={self.device.name!r})"
