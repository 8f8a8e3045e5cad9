"""`gk.array`: a typed n-d array (1-4 dims) in a backend's memory, with optional `.grad` and `.dual`.

The same name is the array *type* in kernel annotations: `gk.array(dtype=float, ndim=2)` and
`gk.array(dtype=gk.vec3)` return `core.types.array_type(...)`, not an array (a call with neither
`data` nor `shape`, or with `ndim`, is an annotation).

Memory is one buffer from the device's backend (`impl.alloc`, zero-filled), C-contiguous and
row-major; a vector/matrix element is `ncomp` consecutive scalars. When the backend keeps
buffers in host memory (`host_view` is not None, e.g. "cpu"), `.numpy()` is a zero-copy view;
elsewhere it is a copy. Every write made through this class or by a launch bumps `.version`,
which lets `Tape.backward` detect arrays overwritten after they were recorded.
"""

from __future__ import annotations

import numpy as np

from ...core.errors import DeviceMemoryError, allocation_error
from ...core.types import Type, array_type, float32
from . import array_copy, grad_state, host_ops, views
from ..call_site import user_site
from ..state import current as state, process
from ..launch.device import get_device
from .host_access import HostAccess, _checksum  # noqa: F401  (_checksum re-exported)
from .array_input import _as_dtype, _as_shape, _check_fits, _check_grad_dtype, _prepare, _split_dtype

_I32 = np.iinfo(np.int32)


from .memory_stats import memory  # noqa: E402  (bytes held by live arrays; re-exported)


class array(HostAccess):
    """A gradkit array. `gk.array(data, dtype=None, shape=None, device=None, requires_grad=False,
    requires_dual=False, label=None)` copies `data`; in annotations `gk.array(dtype=T, ndim=N)` is a type.

    Args:
        data: what to copy: a NumPy array, nested list, scalar or another `gk.array`. None with `shape`: a
            zero-filled array; None without `shape`: the array *type* `gk.array(dtype=T, ndim=N)` for kernel
            annotations.
        dtype: the element type (gk.float32, gk.vec3, a `@gk.struct` class, Python float/int/bool ...); None:
            inferred from `data` (NumPy's dtype is kept: float64 stays float64) or float32. A vector/matrix
            dtype reads `data`'s trailing dimensions as components: shape (n, 3) data makes n gk.vec3.
        shape: the shape (an int or a tuple of up to 4 ints) of a zero-filled array, or the shape `data` (of as
            many elements) is read into.
        device: a device name ("cpu", "opencl:0", ...) or `gk.Device`; None: `data`'s device for a `gk.array`,
            else the current device.
        requires_grad: allocate `.grad` (same shape, zeros) for a tape's backward pass to accumulate into
            (float dtypes only).
        requires_dual: allocate `.dual`, the tangent array forward mode writes.
        ndim: in an annotation, the number of dimensions of the array type (default 1); with data, checked.
        label: a name shown by the debugger, `tape.visualize` and error messages."""

    __slots__ = ("shape", "ndim", "size", "dtype", "device", "buffer", "nbytes", "version", "label",
                 "_host", "_grad", "_dual", "_held", "_exposed", "_crc", "_family", "_origin", "_gstate", "_retain",
                 "__weakref__")

    def __new__(cls, data=None, dtype=None, shape=None, device=None, requires_grad=False, requires_dual=False,
                ndim=None, label=None):
        data, dtype = _split_dtype(data, dtype)
        if data is None and shape is None:
            return array_type(_as_dtype(float32 if dtype is None else dtype), 1 if ndim is None else ndim)
        if dtype is not None and _as_dtype(dtype).is_struct:      # stored field by field
            from .struct_array import StructArray
            return StructArray.create(_as_dtype(dtype), (len(data),) if shape is None else shape, device,
                                      requires_grad, data)
        return object.__new__(cls)

    def __init__(self, data=None, dtype=None, shape=None, device=None, requires_grad=False,
                 requires_dual=False, ndim=None, label=None):
        data, dtype = _split_dtype(data, dtype)
        if data is None:
            dev = get_device(device)
            dims = _as_shape(shape)
            self._setup(dims, _as_dtype(float32 if dtype is None else dtype), dev)
        else:
            host, dt, dims = _prepare(data, dtype, shape)
            dev = get_device(data.device if device is None and isinstance(data, array) else device)
            self._setup(dims, dt, dev)
            self._write_host(host)
        if ndim is not None and ndim != self.ndim:
            raise ValueError(f"ndim={ndim} does not match the data's {self.ndim} dimensions")
        self.label = label
        if requires_grad:
            self.requires_grad = True
        if requires_dual:
            self.requires_dual = True

    # Construction -------------------------------------------------------------
    def _setup(self, dims: tuple[int, ...], dt: Type, dev, buffer=None) -> None:
        size = 1
        for d in dims:
            size *= d
        npdt = dt.scalar.np_dtype
        self.shape, self.ndim, self.size, self.dtype, self.device = dims, len(dims), size, dt, dev
        self.nbytes = size * dt.ncomp * npdt.itemsize
        self.version, self.label, self._grad, self._dual = 0, None, None, None
        # `.grad` without a buffer of its own (runtime/arrays/grad_state.py) / kept out of the gradient pool
        # (retain_grad(), or memory adopted from another owner: runtime/tape/grad_pool.py)
        self._gstate, self._retain = None, False
        # Recorded on a tape / a writable host view handed out / checksum of the data at a version: together
        # they let Tape.backward see writes made through NumPy or DLPack views (`modified_since`).
        self._held = self._exposed = False
        self._crc = None
        self._family = None       # a WeakSet of this array and its views (runtime/arrays/views.py), once it has one
        # under `gradkit debug` (a Capture): [file, line, user variable or None] where the user's code made it,
        # for the debugger's names (the variable is found at its first recorded launch: runtime/tape/tape.py)
        self._origin = None if process.capture is None else [*(user_site(2) or (None, None)), None]
        # OpenCL cannot allocate 0 bytes; an empty array keeps a tiny buffer nothing reads.
        try:
            self.buffer = buffer if buffer is not None else dev.impl.alloc(dev.info, self.nbytes or 8)
        except DeviceMemoryError:
            raise
        except (MemoryError, ValueError, OverflowError) as exc:     # a plugin passing on NumPy's error
            raise allocation_error(self.nbytes, dev.name, f"the '{dev.backend}' backend said: {exc}") \
                from None
        memory.allocated(self)
        raw = dev.impl.host_view(dev.info, self.buffer)
        self._host = None if raw is None else raw[:self.nbytes].view(npdt).reshape(dims + dt.shape)

    @classmethod
    def _adopt(cls, host: np.ndarray, dt: Type, dev) -> "array | None":
        """An array over `host`'s memory (shape (*dims, *dt.shape), element type dt) without a copy, when
        the device can share it (`Backend.adopt_host`); else None."""
        buffer = dev.impl.adopt_host(dev.info, host)
        if buffer is None:
            return None
        a = object.__new__(cls)
        a._setup(host.shape[:host.ndim - len(dt.shape)], dt, dev, buffer)
        a._retain = True            # its memory has another owner: never a pooled or lazily zeroed gradient
        return a

    @classmethod
    def _alloc(cls, dims: tuple[int, ...], dt: Type, dev) -> "array":
        """A zero-filled array without argument parsing (internal fast path)."""
        a = object.__new__(cls)
        a._setup(dims, dt, dev)
        return a

    @property
    def _host_shape(self) -> tuple[int, ...]:
        return self.shape + self.dtype.shape

    def _write_host(self, host: np.ndarray) -> None:
        """Copy host data of shape (*shape, *dtype.shape) into the buffer (casting to the element type)."""
        if self.nbytes == 0:
            return
        if self._host is not None:
            self._host[...] = host
        else:
            src = np.ascontiguousarray(host, dtype=self.dtype.scalar.np_dtype)
            self.device.impl.copy_from_host(self.device.info, self.buffer, src)

    def _check_value(self, value, arg: str) -> None:
        """Refuse (ValueError naming `arg`) a value that would overflow this array's element type."""
        try:
            host = np.asarray(value)
        except (ValueError, TypeError):
            return                    # not numbers: the write itself reports it
        _check_fits(host, self.dtype.scalar, arg)

    def _bump(self) -> None:
        """Record a write (launch output, assign, fill_, zero_, element write); with views, to all of them."""
        if self._family is None:
            self.version += 1
        else:
            for a in self._family:
                a.version += 1

    # Views ------------------------------------------------------------------------
    def reshape(self, shape) -> "array":
        """The same memory with another shape (one dimension may be -1); no copy (Warp's reshape).

        Args:
            shape: the new shape, an int or a tuple of up to 4 ints with the same number of elements."""
        return views.reshape(self, shape)

    def flatten(self) -> "array":
        """The same memory as a 1-D array; no copy."""
        return views.reshape(self, (self.size,))

    def view(self, dtype) -> "array":
        """The same memory read as `dtype` elements of the same size (float32 <-> int32 ...); no copy.

        Args:
            dtype: an element type of the same byte size as this array's."""
        return views.view(self, dtype)

    # Gradients and duals --------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._gstate is not None or self.grad is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value:
            _check_grad_dtype(self.dtype, "requires_grad")
            if self._gstate is not None:    # a gradient a backward pass did not keep starts again from zero
                self._gstate = grad_state.ZERO
            elif self.grad is None:         # a view's family may have one already
                self._grad = array._alloc(self.shape, self.dtype, self.device)
                self._grad.label = f"{self.label}.grad" if self.label else None
                views.spread_part(self, "_grad")
        else:
            self._grad, self._gstate = None, None

    @property
    def grad(self) -> "array | None":
        """The gradient array (same shape/dtype/device) when `requires_grad`, else None; a view's is the
        same view of its family's gradient. `gk.GradientNotKeptError` when the last backward pass did not
        keep this intermediate's gradient (see `retain_grad`)."""
        if self._gstate is not None:
            return grad_state.settle(self)
        if self._grad is None and self._family is not None:
            self._grad = views.family_part(self, "_grad")
        return self._grad

    @grad.setter
    def grad(self, value: "array | None") -> None:
        if value is not None:
            _check_grad_dtype(self.dtype, "requires_grad")
            self._check_like(value, "grad")
        self._grad, self._gstate = value, None

    def retain_grad(self) -> "array":
        """Keep this array's own gradient through every backward pass (PyTorch's `retain_grad`): without it, an
        intermediate that no variable holds while `tape.backward()` runs has its gradient computed in a
        reused buffer and not kept. Returns the array."""
        if self._gstate is None and self.grad is None:
            raise ValueError("retain_grad() needs requires_grad=True (the array has no gradient to keep)")
        self._retain = True
        return self

    @property
    def requires_dual(self) -> bool:
        return self.dual is not None

    @requires_dual.setter
    def requires_dual(self, value: bool) -> None:
        if value:
            _check_grad_dtype(self.dtype, "requires_dual")
            if self._dual is None:
                self._dual = array._alloc(self.shape, self.dtype, self.device)
        else:
            self._dual = None

    @property
    def dual(self) -> "array | None":
        """The forward-mode tangent array when `requires_dual`, else None (a view: its family's, viewed)."""
        if self._dual is None and self._family is not None:
            self._dual = views.family_part(self, "_dual")
        return self._dual

    @dual.setter
    def dual(self, value: "array | None") -> None:
        self._set_dual(value)

    def _set_dual(self, value: "array | None") -> None:
        if value is not None:
            self._check_like(value, "dual")
        self._dual = value

    def _check_like(self, other, arg: str) -> None:
        if not isinstance(other, array) or other.shape != self.shape or other.dtype is not self.dtype \
                or other.device is not self.device:
            got = (f"{other.dtype.name}{list(other.shape)} on {other.device.name}" if isinstance(other, array)
                   else type(other).__name__)
            raise ValueError(f"{arg} must be a gk.array of dtype {self.dtype.name}, shape {self.shape} on "
                             f"{self.device.name}; got {got}")

    # Writes ------------------------------------------------------------------------
    def assign(self, values) -> "array":
        """Copy `values` (gk.array, NumPy array, nested list, or a scalar) into this array; same shape.

        Args:
            values: the new contents, of this array's shape (a scalar fills every element). Recorded on an active
                tape and differentiated."""
        if isinstance(values, array):
            if values.shape != self.shape or values.dtype.shape != self.dtype.shape:
                raise ValueError(f"values: shape {values.shape} ({values.dtype.name}) does not match this "
                                 f"array's {self.shape} ({self.dtype.name})")
            if state.tape is not None or state.forward_mode is not None:
                return host_ops.copy(self, values)
            if values.dtype is self.dtype and values.device is self.device:
                if values is not self and self.nbytes:
                    self.device.impl.copy(self.device.info, self.buffer, values.buffer, self.nbytes)
                self._bump()
                return self
            values = values.numpy()
        try:
            host = np.asarray(values)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"values: cannot convert to an array ({exc})") from None
        npdt = self.dtype.scalar.np_dtype
        if host.dtype.kind == "O" and any(isinstance(v, int) and not -2**63 <= v < 2**64 for v in host.flat):
            raise ValueError(f"values: integers past 64 bits do not fit a {self.dtype.name} array")
        if host.dtype.kind not in "biuf" or not np.can_cast(host.dtype, npdt, "same_kind"):
            raise TypeError(f"values: cannot assign {host.dtype} data to a {self.dtype.name} array without "
                            "losing information (convert it first)")
        _check_fits(host, self.dtype.scalar, "values")
        if host.ndim == 0:
            self._fill(host[()])
            host_ops.record("assign", self)
            return self
        if host.shape != self._host_shape:
            raise ValueError(f"values: shape {host.shape} does not match this array's "
                             f"{self._host_shape} (shape {self.shape}, dtype {self.dtype.name})")
        self._write_host(host)
        self._bump()
        host_ops.record("assign", self)
        return self

    def fill_(self, value) -> "array":
        """Set every element to `value` (a scalar, or one vector/matrix value for vec/mat dtypes).

        Args:
            value: the fill value. Recorded on an active tape (an overwrite: it consumes the gradient of what it
                overwrote)."""
        self._fill(value)
        host_ops.record("fill_", self)
        return self

    def _fill(self, value) -> None:
        self._check_value(value, "value")
        try:
            if self._host is not None:
                self._host[...] = value
            elif np.all(np.asarray(value) == 0) and self.nbytes:
                self.device.impl.fill_zero(self.device.info, self.buffer, self.nbytes)
            else:
                host = np.empty(self._host_shape, dtype=self.dtype.scalar.np_dtype)
                host[...] = value
                self._write_host(host)
        except (ValueError, TypeError, OverflowError) as exc:      # an int too big even for NumPy: ValueError too
            kind = TypeError if isinstance(exc, TypeError) else ValueError
            raise kind(f"value: cannot fill a {self.dtype.name} array with {value!r} ({exc})") from None
        self._bump()

    def zero_(self) -> "array":
        """Set every element to zero."""
        if self.nbytes:
            self.device.impl.fill_zero(self.device.info, self.buffer, self.nbytes)
        self._bump()
        host_ops.record("zero_", self)
        return self

    # Copies --------------------------------------------------------------------------
    def _copy_to(self, dev) -> "array":
        out = array._alloc(self.shape, self.dtype, dev)
        if self.nbytes:
            if dev is self.device:
                dev.impl.copy(dev.info, out.buffer, self.buffer, self.nbytes)
            else:
                out._write_host(self._read())
        if self.requires_grad:              # a view's gradient is its family's (views.family_part)
            out.requires_grad = True
        host_ops.record("copy", out, self)
        return out

    def _saved_copy(self) -> "array":
        """A private copy of the data (no gradient, nothing recorded): what a tape keeps for a backward pass."""
        out = array._alloc(self.shape, self.dtype, self.device)
        if self.nbytes:
            self.device.impl.copy(self.device.info, out.buffer, self.buffer, self.nbytes)
        out.label = self.label
        return out

    def copy(self) -> "array":
        """A new array with the same data on the same device (fresh zero `.grad` if `requires_grad`)."""
        return self._copy_to(self.device)

    def __copy__(self) -> "array":
        """`copy.copy(a)`: `a.copy()` (see runtime/arrays/array_copy.py for deepcopy and pickle)."""
        return self.copy()

    def __deepcopy__(self, memo) -> "array":
        """`copy.deepcopy(a)`: a copy of the data, `.grad` and `.dual`, nothing recorded."""
        return array_copy.deepcopy(self, memo)

    def __reduce__(self):
        """`pickle`: the data as NumPy, dtype, device name, requires_grad and label (not `.grad`)."""
        return array_copy.reduce(self)

    def to(self, device) -> "array":
        """This array on `device`: itself if already there, else a copy.

        Args:
            device: a device name ("cpu", "opencl:0", ...) or `gk.Device`."""
        dev = get_device(device)
        return self if dev is self.device else self._copy_to(dev)

    def __repr__(self) -> str:
        body = np.array2string(self._read(), separator=", ", threshold=64, edgeitems=3, prefix="gk.array(")
        extra = ", requires_grad=True" if self._grad is not None or self._gstate is not None else ""
        extra += f", label={self.label!r}" if self.label else ""
        return f"gk.array({body}, dtype={self.dtype.name}, device={self.device.name!r}{extra})"


# the annotation helpers gk.array1d ... gk.array4d (annotations.py), importable from here as before
from .annotations import array1d, array2d, array3d, array4d  # noqa: E402,F401
