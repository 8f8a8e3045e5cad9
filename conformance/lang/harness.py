"""The language tier's machinery: argument specs, the `Case` record (one construct: a kernel, its
arguments and a float64 NumPy reference) and the three checks every case runs on every device.

forward: kernel outputs vs the reference; reverse: `gk.Tape` + `backward(grads={out: w})` vs central
finite differences of the reference (float64); forward mode: `gk.ForwardMode(seeds={x: v})` → `out.dual`
vs the directional finite difference J·v of the same reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import gradkit as gk

MODES = ("forward", "reverse", "fwdmode")
MODE_TITLES = {"forward": "fwd", "reverse": "rev", "fwdmode": "jvp"}


def _scalar(dtype):
    return getattr(dtype, "scalar", dtype)


def is_float(dtype) -> bool:
    return _scalar(dtype) in (gk.float32, gk.float64)


def _np_dtype(dtype):
    s = _scalar(dtype)
    return {gk.float32: np.float32, gk.float64: np.float64, gk.int32: np.int32, gk.int64: np.int64,
            gk.uint32: np.uint32, gk.bool: np.bool_}[s]


# --------------------------------------------------------------------------- argument specs

@dataclass(frozen=True)
class In:
    """A differentiable float array input, uniform in [lo, hi) (lo/hi broadcast against `shape`).
    `shape` is the NumPy shape, vector/matrix components included: (n, 3) for n vec3d."""
    shape: tuple
    dtype: Any = gk.float64
    lo: Any = -1.0
    hi: Any = 1.0


@dataclass(frozen=True)
class Const:
    """A non-differentiated array input (ints, indices, a constant table): `make(rng)` gives its data."""
    make: Callable[[np.random.Generator], np.ndarray]
    dtype: Any = gk.int32


@dataclass(frozen=True)
class Scalar:
    """A Python scalar argument (loop bounds, constants)."""
    value: Any


@dataclass(frozen=True)
class Same:
    """Argument `index` (an earlier one) passed again: one array as two parameters. Its gradient is that
    array's, from both; the reference gets the same values in both places."""
    index: int


@dataclass(frozen=True)
class Out:
    """An output array of NumPy shape `shape`; `init(rng)` gives its initial data (zeros by default).
    Initial data is a constant: gradients are checked with respect to `In` arguments only."""
    shape: tuple
    dtype: Any = gk.float64
    init: Callable[[np.random.Generator], np.ndarray] | None = None


@dataclass(frozen=True)
class StructIn:
    """A @gk.struct argument built from `fields` (field path -> In, a differentiable array field, or
    Scalar, a plain field): a host instance (a struct kernel parameter) when `n` is None, else
    `gk.array(dtype=struct, shape=n)` whose fields (dotted paths for nested structs) are assigned. The
    reference gets a dict path -> float64 value; gradients and tangents are those of the In fields."""
    struct: Any
    fields: dict
    n: int | None = None


# --------------------------------------------------------------------------- cases

TOL64 = dict(rtol=1e-10, atol=1e-12)
GTOL64 = dict(rtol=1e-6, atol=1e-7)
TOL32 = dict(rtol=2e-5, atol=2e-6)
GTOL32 = dict(rtol=1e-3, atol=1e-4)


@dataclass
class Case:
    """One construct of the language: `kernel` launched over `dim` with `args` (in parameter order);
    `ref(*args)` gets NumPy float64 inputs / constants / scalars / initial outputs in the same order and
    returns the outputs' final values (one array per `Out`, in order). `diff=False` marks an int-only
    construct, checked forward only. `pick` maps an output's position among the `Out`s to the NumPy index
    of the part this construct is about (kernels shared by several constructs); unpicked outputs are
    neither compared nor seeded."""
    name: str
    doc: str
    kernel: Any
    dim: Any
    args: list
    ref: Callable
    diff: bool = True
    pick: dict | None = None
    tol: dict | None = None
    gtol: dict | None = None
    eps: float = 1e-6
    family: str = ""
    refuses: dict | None = None      # mode -> what a documented gk.CompileError for that mode says


    def modes(self) -> tuple:
        return MODES if self.diff else ("forward",)

    @property
    def is32(self) -> bool:
        specs = [*self.args, *(f for a in self.args if isinstance(a, StructIn) for f in a.fields.values())]
        return any(isinstance(a, (In, Out)) and _scalar(a.dtype) is gk.float32 for a in specs)

    def tolerances(self) -> tuple[dict, dict]:
        return (self.tol or (TOL32 if self.is32 else TOL64)), (self.gtol or (GTOL32 if self.is32 else GTOL64))


def collect(family: str, cases: list[Case]) -> list[Case]:
    for c in cases:
        c.family = family
    return cases


# --------------------------------------------------------------------------- running

def _outs(case: Case) -> list[int]:
    return [k for k, a in enumerate(case.args) if isinstance(a, Out)]


def _sample_in(a: In, rng) -> np.ndarray:
    lo, hi = np.broadcast_to(a.lo, a.shape), np.broadcast_to(a.hi, a.shape)
    return rng.uniform(lo, hi).astype(_np_dtype(a.dtype)).astype(np.float64)


def sample(case: Case, rng: np.random.Generator) -> list:
    """NumPy values of every argument: In arrays rounded to their dtype, then held as float64 (a StructIn's
    value is a dict field path -> value)."""
    vals = []
    for a in case.args:
        if isinstance(a, In):
            vals.append(_sample_in(a, rng))
        elif isinstance(a, StructIn):
            vals.append({path: _sample_in(f, rng) if isinstance(f, In) else f.value for path, f in a.fields.items()})
        elif isinstance(a, Const):
            vals.append(np.asarray(a.make(rng)).astype(_np_dtype(a.dtype)))
        elif isinstance(a, Scalar):
            vals.append(a.value)
        elif isinstance(a, Same):
            vals.append(vals[a.index])
        else:
            init = np.zeros(a.shape) if a.init is None else np.asarray(a.init(rng), dtype=np.float64)
            vals.append(init.astype(_np_dtype(a.dtype)))
    return vals


def leaves(case: Case) -> list[tuple[int, str | None, In]]:
    """Every differentiable input: (argument index, field path or None, its In spec)."""
    out = []
    for k, a in enumerate(case.args):
        if isinstance(a, In):
            out.append((k, None, a))
        elif isinstance(a, StructIn):
            out += [(k, path, f) for path, f in a.fields.items() if isinstance(f, In)]
    return out


def leaf_value(vals: list, k: int, path: str | None):
    return vals[k] if path is None else vals[k][path]


def with_leaf(vals: list, k: int, path: str | None, value) -> list:
    """A copy of `vals` with one leaf replaced."""
    out = list(vals)
    if path is None:
        out[k] = value
    else:
        out[k] = {**vals[k], path: value}
    return out


def leaf_array(arrs: list, k: int, path: str | None):
    """The device array of a leaf: the argument itself, or a (nested) field of the struct or struct array."""
    obj = arrs[k]
    for name in ([] if path is None else path.split(".")):
        obj = getattr(obj, name)
    return obj


def _copy(v):
    if isinstance(v, dict):
        return {p: _copy(x) for p, x in v.items()}
    if isinstance(v, np.ndarray):
        return v.astype(np.float64) if v.dtype.kind == "f" else v.copy()
    return v


def reference(case: Case, vals: list) -> list[np.ndarray]:
    """The reference outputs (float64 for float outputs), from fresh copies of the values."""
    vals = [vals[a.index] if isinstance(a, Same) else v for a, v in zip(case.args, vals)]   # after with_leaf
    res = case.ref(*[_copy(v) for v in vals])
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    assert len(res) == len(_outs(case)), f"{case.name}: the reference returns {len(res)} outputs"
    return [np.asarray(r, dtype=np.float64) for r in res]


def _device_array(data: np.ndarray, dtype, device: str, grad: bool = False):
    return gk.array(np.asarray(data).astype(_np_dtype(dtype)), dtype=dtype, device=device, requires_grad=grad)


def _device_struct(a: StructIn, value: dict, device: str, grad: bool):
    if a.n is None:
        return a.struct(**{p: _device_array(value[p], f.dtype, device, grad) if isinstance(f, In) else value[p]
                           for p, f in a.fields.items()})
    arr = gk.array(dtype=a.struct, shape=a.n, device=device, requires_grad=grad)
    for p, f in a.fields.items():
        field = leaf_array([arr], 0, p)
        field.assign(np.asarray(value[p]).astype(field.numpy().dtype))
    return arr


def to_device(case: Case, vals: list, device: str, grad: bool = False) -> list:
    arrs = []
    for a, v in zip(case.args, vals):
        if isinstance(a, Scalar):
            arrs.append(v)
            continue
        if isinstance(a, Same):
            arrs.append(arrs[a.index])
            continue
        if isinstance(a, StructIn):
            arrs.append(_device_struct(a, v, device, grad))
            continue
        rg = grad and isinstance(a, (In, Out)) and is_float(a.dtype)
        arrs.append(_device_array(v, a.dtype, device, rg))
    return arrs


def launch(case: Case, arrs: list, device: str) -> None:
    gk.launch(case.kernel, case.dim, inputs=arrs, device=device)


def _picked(case: Case, j: int):
    """The NumPy index of output j's checked part (everything when the case has no `pick`)."""
    if case.pick is None:
        return ...
    return case.pick.get(j)


def _compare(what: str, got: np.ndarray, want: np.ndarray, tol: dict) -> None:
    np.testing.assert_allclose(got, want, err_msg=what, **tol)


def check_forward(case: Case, device: str, rng: np.random.Generator) -> None:
    vals = sample(case, rng)
    want = reference(case, vals)
    arrs = to_device(case, vals, device)
    launch(case, arrs, device)
    tol, _ = case.tolerances()
    for j, k in enumerate(_outs(case)):
        idx = _picked(case, j)
        if idx is None:
            continue
        got = arrs[k].numpy()
        if is_float(case.args[k].dtype):
            _compare(f"output {j} ({case.name}, {device})", got[idx], want[j][idx], tol)
        else:
            np.testing.assert_array_equal(got[idx], want[j][idx],
                                          err_msg=f"output {j} ({case.name}, {device})")


def _weights(case: Case, rng) -> dict[int, np.ndarray]:
    """A random output seed w per checked float output (zero outside its picked part)."""
    ws = {}
    for j, k in enumerate(_outs(case)):
        a, idx = case.args[k], _picked(case, j)
        if idx is None or not is_float(a.dtype):
            continue
        w = np.zeros(a.shape)
        w[idx] = rng.normal(size=w[idx].shape)
        ws[j] = w
    return ws


def _loss(case: Case, vals: list, ws: dict) -> float:
    outs = reference(case, vals)
    return sum(float(np.sum(w * outs[j])) for j, w in ws.items())


def fd_gradient(case: Case, vals: list, k: int, path: str | None, ws: dict) -> np.ndarray:
    """d(Σ w·out)/d(leaf) by central differences of the float64 reference."""
    x = leaf_value(vals, k, path)
    g = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += case.eps
        lo[idx] -= case.eps
        g[idx] = (_loss(case, with_leaf(vals, k, path, hi), ws) - _loss(case, with_leaf(vals, k, path, lo), ws)) \
            / (2 * case.eps)
    return g


def _leaf_name(k: int, path: str | None) -> str:
    return f"argument {k}" if path is None else f"field {path} of argument {k}"


def check_reverse(case: Case, device: str, rng: np.random.Generator) -> None:
    vals = sample(case, rng)
    ws = _weights(case, rng)
    assert ws, f"{case.name}: differentiable case without a float output"
    arrs = to_device(case, vals, device, grad=True)
    tape = gk.Tape()
    with tape:
        launch(case, arrs, device)
    outs = _outs(case)
    tape.backward(grads={arrs[outs[j]]: _device_array(w, case.args[outs[j]].dtype, device)
                         for j, w in ws.items()})
    _, gtol = case.tolerances()
    for k, path, a in leaves(case):
        grad = leaf_array(arrs, k, path).grad
        assert grad is not None, f"{case.name}: {_leaf_name(k, path)} got no gradient"
        _compare(f"gradient of {_leaf_name(k, path)} ({case.name}, {device})", grad.numpy(),
                 fd_gradient(case, vals, k, path, ws), gtol)


def check_fwdmode(case: Case, device: str, rng: np.random.Generator) -> None:
    vals = sample(case, rng)
    specs = leaves(case)
    dirs = {(k, path): rng.normal(size=a.shape) for k, path, a in specs}
    arrs = to_device(case, vals, device)
    seeds = {leaf_array(arrs, k, path): _device_array(dirs[(k, path)], a.dtype, device) for k, path, a in specs}
    with gk.ForwardMode(seeds=seeds):
        launch(case, arrs, device)

    def shifted(sign):
        v2 = list(vals)
        for (k, path), d in dirs.items():
            v2 = with_leaf(v2, k, path, leaf_value(vals, k, path) + sign * case.eps * d)
        return reference(case, v2)
    plus, minus, want = shifted(1), shifted(-1), reference(case, vals)
    tol, gtol = case.tolerances()
    for j, k in enumerate(_outs(case)):
        idx = _picked(case, j)
        if idx is None or not is_float(case.args[k].dtype):
            continue
        _compare(f"output {j} under forward mode ({case.name}, {device})", arrs[k].numpy()[idx], want[j][idx],
                 tol)
        assert arrs[k].dual is not None, f"{case.name}: output {j} has no dual"
        jv = (plus[j] - minus[j]) / (2 * case.eps)
        _compare(f"tangent of output {j} ({case.name}, {device})", arrs[k].dual.numpy()[idx], jv[idx], gtol)


CHECKS = {"forward": check_forward, "reverse": check_reverse, "fwdmode": check_fwdmode}
