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
class Out:
    """An output array of NumPy shape `shape`; `init(rng)` gives its initial data (zeros by default).
    Initial data is a constant: gradients are checked with respect to `In` arguments only."""
    shape: tuple
    dtype: Any = gk.float64
    init: Callable[[np.random.Generator], np.ndarray] | None = None


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
        return any(isinstance(a, (In, Out)) and _scalar(a.dtype) is gk.float32 for a in self.args)

    def tolerances(self) -> tuple[dict, dict]:
        return (self.tol or (TOL32 if self.is32 else TOL64)), (self.gtol or (GTOL32 if self.is32 else GTOL64))


def collect(family: str, cases: list[Case]) -> list[Case]:
    for c in cases:
        c.family = family
    return cases


# --------------------------------------------------------------------------- running

def _outs(case: Case) -> list[int]:
    return [k for k, a in enumerate(case.args) if isinstance(a, Out)]


def sample(case: Case, rng: np.random.Generator) -> list:
    """NumPy values of every argument: In arrays rounded to their dtype, then held as float64."""
    vals = []
    for a in case.args:
        if isinstance(a, In):
            lo, hi = np.broadcast_to(a.lo, a.shape), np.broadcast_to(a.hi, a.shape)
            vals.append(rng.uniform(lo, hi).astype(_np_dtype(a.dtype)).astype(np.float64))
        elif isinstance(a, Const):
            vals.append(np.asarray(a.make(rng)).astype(_np_dtype(a.dtype)))
        elif isinstance(a, Scalar):
            vals.append(a.value)
        else:
            init = np.zeros(a.shape) if a.init is None else np.asarray(a.init(rng), dtype=np.float64)
            vals.append(init.astype(_np_dtype(a.dtype)))
    return vals


def reference(case: Case, vals: list) -> list[np.ndarray]:
    """The reference outputs (float64 for float outputs), from fresh copies of the values."""
    args = [v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else
            (v.copy() if isinstance(v, np.ndarray) else v) for v in vals]
    res = case.ref(*args)
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    assert len(res) == len(_outs(case)), f"{case.name}: the reference returns {len(res)} outputs"
    return [np.asarray(r, dtype=np.float64) for r in res]


def _device_array(data: np.ndarray, dtype, device: str, grad: bool = False):
    return gk.array(np.asarray(data).astype(_np_dtype(dtype)), dtype=dtype, device=device, requires_grad=grad)


def to_device(case: Case, vals: list, device: str, grad: bool = False) -> list:
    arrs = []
    for a, v in zip(case.args, vals):
        if isinstance(a, Scalar):
            arrs.append(v)
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


def fd_gradient(case: Case, vals: list, k: int, ws: dict) -> np.ndarray:
    """d(Σ w·out)/d(args[k]) by central differences of the float64 reference."""
    x = vals[k]
    g = np.zeros_like(x, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        hi, lo = list(vals), list(vals)
        hi[k], lo[k] = x.copy(), x.copy()
        hi[k][idx] += case.eps
        lo[k][idx] -= case.eps
        g[idx] = (_loss(case, hi, ws) - _loss(case, lo, ws)) / (2 * case.eps)
    return g


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
    for k, a in enumerate(case.args):
        if isinstance(a, In):
            assert arrs[k].grad is not None, f"{case.name}: argument {k} got no gradient"
            _compare(f"gradient of argument {k} ({case.name}, {device})", arrs[k].grad.numpy(),
                     fd_gradient(case, vals, k, ws), gtol)


def check_fwdmode(case: Case, device: str, rng: np.random.Generator) -> None:
    vals = sample(case, rng)
    dirs = {k: rng.normal(size=a.shape) for k, a in enumerate(case.args) if isinstance(a, In)}
    arrs = to_device(case, vals, device)
    seeds = {arrs[k]: _device_array(v, case.args[k].dtype, device) for k, v in dirs.items()}
    with gk.ForwardMode(seeds=seeds):
        launch(case, arrs, device)

    def shifted(sign):
        v2 = list(vals)
        for k, d in dirs.items():
            v2[k] = vals[k] + sign * case.eps * d
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
