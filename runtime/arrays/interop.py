"""PyTorch and JAX interop: gradkit arrays as torch tensors / JAX arrays and back (sharing memory where both
live in host memory and the other side allows it), and `gk.torch_function`, a Python function of gradkit
arrays that launches kernels, as a torch autograd op.

Vector and matrix dtypes are trailing tensor dimensions (n vec3 ↔ a tensor of shape (n, 3)). Sharing is
zero-copy when the gradkit device keeps arrays in host memory (`cpu`) and the tensor is a contiguous,
64-byte aligned CPU tensor; otherwise the data is copied (each function says so). Data coming in follows
`gk.array`'s rules (runtime/arrays/array_input.py): a value that does not fit the element type, an element type
gradkit cannot hold and more than 4 dimensions are errors naming the argument; a single value (0-d) is a
one-element array."""

from __future__ import annotations

import numpy as np

from ...core import types as T
from .array_input import _as_dtype, _check_data, _convert

_SCALARS = {"float32": T.float32, "float64": T.float64, "int32": T.int32, "int64": T.int64,
            "uint32": T.uint32, "bool": T.bool_}


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("gradkit's PyTorch interop needs torch: pip install 'gradkit[torch]' "
                          "(the CPU build: pip install torch --index-url <PyTorch's CPU wheel index>)") from None
    return torch


def to_torch(a, requires_grad: bool | None = None):
    """A torch tensor of `a`'s data: the same memory for a host-memory (cpu) array, else a CPU copy.
    `requires_grad` (default: `a.requires_grad`) is set on the tensor, and `a.grad` becomes its `.grad`
    (shared likewise). A uint32 array is the exception: it comes back as an int64 copy, because torch's
    own uint32 is a limited-support dtype (no `+`, comparisons or `max` on CPU in torch 2.13);
    `torch.from_numpy(a.numpy())` shares it as such a tensor.

    Args:
        a: the array (any device; vector/matrix dtypes become trailing tensor dimensions).
        requires_grad: set on the tensor; None: `a.requires_grad`."""
    torch = _torch()
    if not hasattr(a, "buffer"):
        raise TypeError(f"a: gk.to_torch takes a gk.array, got {type(a).__name__}")
    host = a.numpy() if a._host is not None else a.numpy().copy()
    t = torch.from_numpy(host) if host.dtype != np.uint32 else torch.from_numpy(host.astype(np.int64))
    want = a.requires_grad if requires_grad is None else bool(requires_grad)
    if want:
        if not a.dtype.scalar.is_float:
            raise TypeError(f"a: only float arrays can require gradients in torch, this one is {a.dtype.name}")
        t.requires_grad_(True)
        if a.grad is not None:
            t.grad = to_torch(a.grad, requires_grad=False)
    return t


def _dtype_of(source_dtype, dtype, arg: str = "t", lib: str = "torch"):
    """The gradkit element type for data of `source_dtype` (a torch or NumPy dtype): `dtype` when given,
    else the scalar type of the same name."""
    if dtype is not None:
        return _as_dtype(dtype)
    name = str(source_dtype).removeprefix("torch.")
    if name not in _SCALARS:
        raise TypeError(f"{arg}: {lib} dtype {source_dtype} has no gradkit element type (float32, float64, "
                        f"int32, int64, uint32, bool)")
    return _SCALARS[name]


def from_torch(t, dtype=None, requires_grad: bool | None = None, device=None):
    """A gradkit array of tensor `t`'s data: the same memory when `t` is a contiguous, aligned CPU tensor
    and `device` keeps arrays in host memory (the default device for a CPU tensor is "cpu"), else a copy.
    `dtype` (e.g. gk.vec3) reads trailing dimensions as vector/matrix components; `requires_grad`
    (default: `t.requires_grad`) gives the array a `.grad`, shared with `t.grad` when there is one. Values
    that do not fit `dtype`, and tensors of more than 4 dimensions (besides a vector/matrix dtype's), are a
    ValueError naming `t`; a 0-d tensor is a one-element array (as `gk.array` makes of a scalar).

    Args:
        t: a torch tensor (CPU tensors can be shared; others are copied).
        dtype: the gradkit element type; a vector/matrix type reads trailing dimensions as components; None:
            the tensor's scalar type.
        requires_grad: give the array a `.grad`; None: `t.requires_grad`.
        device: the gradkit device of the array; None: "cpu" for a CPU tensor."""
    from .array import array
    from ..launch.device import get_device
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"t: gk.from_torch takes a torch.Tensor, got {type(t).__name__}")
    dt = _dtype_of(t.dtype, dtype)
    dev = get_device("cpu" if device is None and t.device.type == "cpu" else device)
    host = t.detach()
    if host.device.type != "cpu":
        host = host.cpu()
    try:
        host = host.numpy()
    except TypeError:           # bfloat16, float8 ...: torch has no NumPy view of them
        raise TypeError(f"t: a torch {t.dtype} tensor has no NumPy equivalent to read; convert it first "
                        "(e.g. t.float())") from None
    host, _ = _convert(host, dt, "t")
    a = array._adopt(host, dt, dev)
    if a is None:                       # a device without host memory, or memory it cannot use as it is
        a = array(host, dtype=dt, device=dev)
    want = t.requires_grad if requires_grad is None else bool(requires_grad)
    if want:
        if t.grad is not None:
            a.grad = from_torch(t.grad, dtype=dt, requires_grad=False, device=dev)
        else:
            a.requires_grad = True
    return a


def torch_function(fn, dtypes=None, device=None):
    """`fn` (gk.arrays in, gk.array or a tuple of them out, launching kernels) as a function of torch
    tensors that torch autograd differentiates: the forward runs `fn` untaped; the backward records `fn` on
    a gk.Tape (recomputing it) and runs `tape.backward` with torch's output gradients. `dtypes` gives the
    gradkit element type of each tensor argument (None: its scalar type); `device` the gradkit device the
    tensors are put on (default: "cpu" for CPU tensors, shared without a copy). Non-tensor arguments pass
    through. Outputs come back as CPU tensors (sharing the output arrays' memory on the cpu device).

    Args:
        fn: a Python function taking gk.arrays (and other arguments) and returning a gk.array or a tuple
            of them, launching kernels.
        dtypes: the gradkit element type of each tensor argument, in order (e.g. `[gk.vec3d, None]`); None
            or a None entry: the tensor's scalar type.
        device: the gradkit device the tensors are put on; None: "cpu" for CPU tensors."""
    torch = _torch()
    from ..tape.checkpoint import no_grad
    from ..tape.tape import Tape

    def arrays_of(args, grad):
        out = []
        for k, x in enumerate(args):
            if isinstance(x, torch.Tensor):
                dt = dtypes[k] if dtypes is not None and k < len(dtypes) else None
                want = grad and x.dtype.is_floating_point
                a = from_torch(x.detach(), dtype=dt, requires_grad=False, device=device)
                out.append(_fresh_grad(a) if want else a)
            else:
                out.append(x)
        return out

    def as_tuple(result):
        outs = tuple(result) if isinstance(result, (list, tuple)) else (result,)
        for k, o in enumerate(outs):
            if not hasattr(o, "buffer"):
                raise TypeError(f"gk.torch_function: '{getattr(fn, '__name__', 'fn')}' must return gk.arrays; "
                                f"its output {k} is {type(o).__name__}")
        return outs

    class GradkitFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.args = args
            with no_grad():
                outs = as_tuple(fn(*arrays_of(args, grad=False)))
            return tuple(to_torch(o, requires_grad=False) for o in outs)     # the outputs' own memory

        @staticmethod
        def backward(ctx, *grads):
            arrays = arrays_of(ctx.args, grad=True)
            tape = Tape()
            with no_grad(), tape:
                outs = as_tuple(fn(*arrays))
            seeds = {o: from_torch(g.contiguous(), dtype=o.dtype, requires_grad=False, device=o.device)
                     for o, g in zip(outs, grads) if g is not None and o.dtype.scalar.is_float}
            for o in seeds:
                if o.grad is None:
                    o.requires_grad = True
            tape.backward(grads=seeds)
            result = []
            for x, a in zip(ctx.args, arrays):
                if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and getattr(a, "grad", None) is not None:
                    result.append(torch.from_numpy(a.grad.numpy().copy()).reshape(x.shape).to(x.dtype))
                else:
                    result.append(None)
            return tuple(result)

    def wrapped(*args):
        outs = GradkitFunction.apply(*args)
        return outs[0] if len(outs) == 1 else outs

    wrapped.__name__ = getattr(fn, "__name__", "torch_function")
    wrapped.__doc__ = fn.__doc__
    # torch.compile cannot trace gradkit's launches (Dynamo tripped over gradkit's internals): the call is a
    # graph break, run eagerly, with the compiled graphs on both sides of it
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(wrapped) if disable is not None else wrapped


def _jax():
    try:
        import jax
        import jax.dlpack  # noqa: F401
    except ImportError:
        raise ImportError("gradkit's JAX interop needs jax: pip install 'gradkit[jax]'") from None
    return jax


def to_jax(a):
    """A JAX array of `a`'s data: through DLPack (the same memory, where JAX takes it) for a host-memory
    (cpu) array, else from a host copy. JAX arrays are immutable: do not write `a` while JAX uses it. A
    64-bit array needs JAX's 64-bit mode (JAX would otherwise round it to 32 bits).

    Args:
        a: the array (vector/matrix dtypes become trailing dimensions)."""
    jax = _jax()
    if not hasattr(a, "buffer"):
        raise TypeError(f"a: gk.to_jax takes a gk.array, got {type(a).__name__}")
    if a.dtype.scalar.bits == 64 and not jax.config.jax_enable_x64:
        raise ValueError(f"a: a {a.dtype.name} array needs JAX's 64-bit mode, which is off (JAX would round it "
                         f"to 32 bits): jax.config.update('jax_enable_x64', True)")
    if a._host is not None:
        return jax.dlpack.from_dlpack(a)
    return jax.numpy.asarray(a.numpy())


def from_jax(x, dtype=None, device=None):
    """A gradkit array holding a copy of JAX array `x` (JAX arrays are immutable; gradkit arrays are written
    by kernels). `dtype` (e.g. gk.vec3) reads trailing dimensions as vector/matrix components; values that do
    not fit it are a ValueError naming `x`, as in `gk.array`.

    Args:
        x: a JAX array.
        dtype: the gradkit element type; a vector/matrix type reads trailing dimensions as components;
            None: the array's scalar type.
        device: the gradkit device of the copy; None: the current device."""
    from .array import array
    jax = _jax()
    if not isinstance(x, jax.Array):
        raise TypeError(f"x: gk.from_jax takes a jax.Array, got {type(x).__name__}")
    host = np.asarray(x)
    dt = _dtype_of(host.dtype, dtype, arg="x", lib="JAX")
    return array(_convert(host, dt, "x")[0], dtype=dt, device=device)


def jax_function(fn, dtypes=None, device=None):
    """`fn` (gk.arrays in, gk.array or a tuple of them out, launching kernels) as a function of JAX arrays
    usable under `jax.jit`, `jax.grad` and `jax.vmap`: a `jax.custom_vjp` whose forward and backward run
    on the host through `jax.pure_callback` (the backward records `fn` on a gk.Tape and runs
    `tape.backward` with JAX's output cotangents). Output shapes are learned by running `fn` once on zeros
    per input signature. Under `vmap`, `fn` runs once per batch element (`vmap_method="sequential"`).
    `dtypes` gives each argument's gradkit element type (None: its scalar type); `device` where it runs.
    Arguments are converted by `from_jax`'s rules (a value that does not fit is a ValueError naming the
    argument, raised when the callback runs).

    Args:
        fn: a Python function taking gk.arrays (and other arguments) and returning a gk.array or a tuple
            of them, launching kernels.
        dtypes: the gradkit element type of each argument, in order; None or a None entry: its scalar type.
        device: the gradkit device `fn` runs on; None: the current device."""
    jax = _jax()
    import numpy as np_
    from ..tape.checkpoint import no_grad
    from ..tape.tape import Tape
    shapes: dict = {}

    def dtype_of(k, h):
        return _dtype_of(h.dtype, dtypes[k] if dtypes is not None and k < len(dtypes) else None,
                         arg=f"argument {k}", lib="JAX")

    def arrays_of(host_args, grad):
        from .array import array
        out = []
        for k, h in enumerate(host_args):
            h = np_.asarray(h)
            dt = dtype_of(k, h)
            a = array(_convert(h, dt, f"argument {k}")[0], dtype=dt, device=device)
            if grad and dt.scalar.is_float:
                a.requires_grad = True
            out.append(a)
        return out

    def as_tuple(result):
        outs = tuple(result) if isinstance(result, (list, tuple)) else (result,)
        for k, o in enumerate(outs):
            if not hasattr(o, "buffer"):
                raise TypeError(f"gk.jax_function: '{getattr(fn, '__name__', 'fn')}' must return gk.arrays; "
                                f"its output {k} is {type(o).__name__}")
        return outs

    def run_forward(*host_args):
        with no_grad():
            return tuple(np_.array(o.numpy()) for o in as_tuple(fn(*arrays_of(host_args, grad=False))))

    def run_backward(n_args, *host):
        args, cots = host[:n_args], host[n_args:]
        arrays = arrays_of(args, grad=True)
        tape = Tape()
        with no_grad(), tape:
            outs = as_tuple(fn(*arrays))
        seeds = {}
        for o, g in zip(outs, cots):
            if o.dtype.scalar.is_float:
                if o.grad is None:
                    o.requires_grad = True
                seeds[o] = np_.ascontiguousarray(g, dtype=o.dtype.scalar.np_dtype)
        tape.backward(grads=seeds)
        return tuple(np_.array(a.grad.numpy()).reshape(np_.shape(h)).astype(np_.asarray(h).dtype)
                     if a.grad is not None else np_.zeros(np_.shape(h), np_.asarray(h).dtype)
                     for a, h in zip(arrays, args))

    def out_structs(args):
        key = tuple((tuple(x.shape), str(x.dtype)) for x in args)
        if key not in shapes:
            zeros = [np_.zeros(x.shape, x.dtype) for x in args]
            shapes[key] = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in run_forward(*zeros))
        return shapes[key]

    @jax.custom_vjp
    def f(*args):
        return jax.pure_callback(run_forward, out_structs(args), *args, vmap_method="sequential")

    def f_fwd(*args):
        return f(*args), args

    def f_bwd(args, cots):
        structs = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args)
        return jax.pure_callback(lambda *h: run_backward(len(args), *h), structs, *args, *cots,
                                 vmap_method="sequential")

    f.defvjp(f_fwd, f_bwd)

    def wrapped(*args):
        for k, x in enumerate(args):    # concrete arguments are checked here, traced ones in the callback
            if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
                h = np_.asarray(x)
                _check_data(h, dtype_of(k, h), f"argument {k}")
        outs = f(*args)
        return outs[0] if len(outs) == 1 else outs

    wrapped.__name__ = getattr(fn, "__name__", "jax_function")
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _fresh_grad(a):
    """`a` with a zero gradient of its own (the backward's gradients land there, not in torch's)."""
    a.requires_grad = True
    return a
