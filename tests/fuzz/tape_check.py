"""Running and checking a random taped program (tests/fuzz/tape_programs.py): its source compiled with the
kernel library, random inputs from its seed, gradients (reverse and forward-over-reverse) against central
differences of the same program in float64."""

from __future__ import annotations

import collections
import re
import warnings
import zlib

import numpy as np

import gradkit as gk
from tests.fuzz.tape_kernels import KERNELS
from tests.fuzz.tape_programs import Program


EPS = 1e-6                      # central differences (inputs are O(1), float64)
EPS2 = 1e-4                     # the 4-point mixed differences of forward-over-reverse
HUGE = 1e6
STATS: collections.Counter = collections.Counter()


# a wrong gradient's kind names the rarest construct its program has (the reduced program tells for sure)
PRIORITY = ["same-memory-copy", "same-memory-assign", "copy-of-view", "checkpoint", "view-alias-in-launch",
            "atomic-shared", "inplace", "overwrite", "host-overwrite", "views"]


class TapeMismatch(AssertionError):
    """gradkit's gradient (or value) disagrees with finite differences of the same program."""


def kind_of(e: BaseException) -> str:
    """A failure's kind: a wrong gradient by mode and the constructs the program has, or an exception's
    type and first message line without numbers and quoted names."""
    if isinstance(e, TapeMismatch):
        return str(e).splitlines()[0].split("   (")[0]
    first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
    first = re.sub(r"'[^']*'|\"[^\"]*\"|-?\d[\d.e+-]*", "_", first)
    return f"{type(e).__name__}: {first[:120]}"


def compile_program(prog: Program):
    """The `program` function of the program's source, with the kernel library in scope."""
    ns = {"gk": gk, "np": np, **KERNELS}
    exec(compile(prog.source(), f"<tape program {prog.seed}>", "exec"), ns)
    return ns["program"]


def initial_values(prog: Program) -> dict[str, np.ndarray]:
    """Random inputs, from the program's seed and each array's name (so a reduced program keeps them)."""
    vals = {}
    for name, spec in prog.arrays.items():
        rng = np.random.default_rng(zlib.crc32(f"values/{prog.seed}/{name}".encode()))
        if spec.init == "zeros":
            vals[name] = np.zeros(spec.shape)
        elif spec.init == "weight":
            vals[name] = rng.uniform(0.5, 1.5, spec.shape) * rng.choice([-1.0, 1.0], spec.shape)
        else:
            vals[name] = rng.uniform(-1.0, 1.0, spec.shape)
    return vals


def alloc(arrays: dict, vals: dict, grad: bool) -> dict:
    """gk.arrays (on the current device) with the given values; gradients where `grad`, except weights."""
    return {name: gk.array(vals[name], dtype=gk.float64, requires_grad=grad and spec.init != "weight")
            for name, spec in arrays.items()}


def run_forward(fn, arrays: dict, vals: dict) -> float:
    """The loss of one run of `fn` without a tape (no gradients allocated)."""
    arrs = alloc(arrays, vals, grad=False)
    fn(**arrs)
    return float(arrs["l"].numpy()[0])


def taped_gradients(fn, arrays: dict, vals: dict, params: list[str]):
    """(loss, {param: flat gradient}) from one taped run and `tape.backward(loss=l)`."""
    arrs = alloc(arrays, vals, grad=True)
    tape = gk.Tape()
    with tape:
        fn(**arrs)
    loss = float(arrs["l"].numpy()[0])
    tape.backward(loss=arrs["l"])
    return loss, {p: arrs[p].grad.numpy().reshape(-1).copy() for p in params}


def fd_gradients(fn, arrays: dict, vals: dict, params: list[str], eps: float = EPS) -> dict:
    """Central differences of the loss for every element of every parameter."""
    fd = {}
    for p in params:
        flat = vals[p].reshape(-1)
        d = np.empty(flat.size)
        for j in range(flat.size):
            up, dn = dict(vals), dict(vals)
            up[p], dn[p] = flat.copy(), flat.copy()
            up[p][j] += eps
            dn[p][j] -= eps
            up[p], dn[p] = up[p].reshape(vals[p].shape), dn[p].reshape(vals[p].shape)
            d[j] = (run_forward(fn, arrays, up) - run_forward(fn, arrays, dn)) / (2 * eps)
        fd[p] = d
    return fd


def hvp_dual(fn, arrays: dict, vals: dict, v: dict) -> dict:
    """Forward-over-reverse: the taped run and its backward inside gk.ForwardMode(seeds={p: v[p]});
    returns {p: flat p.grad.dual} (zeros where gradkit left no dual)."""
    arrs = alloc(arrays, vals, grad=True)
    seeds = {arrs[p]: gk.array(v[p], dtype=gk.float64) for p in v}
    with gk.ForwardMode(seeds=seeds):
        tape = gk.Tape()
        with tape:
            fn(**arrs)
        tape.backward(loss=arrs["l"])
    out = {}
    for p in v:
        dual = arrs[p].grad.dual
        out[p] = np.zeros(vals[p].size) if dual is None else dual.numpy().reshape(-1).copy()
    return out


def fd_hvp(fn, arrays: dict, vals: dict, v: dict, eps: float = EPS2) -> dict:
    """H v by mixed central differences of the loss: d/dp_j (grad L . v), 4 runs per element."""
    def shifted(p, j, a, b):
        out = {q: vals[q] + (b * eps * v[q] if q in v else 0.0) for q in vals}
        flat = out[p].reshape(-1).copy()
        flat[j] += a * eps
        out[p] = flat.reshape(vals[p].shape)
        return run_forward(fn, arrays, out)
    want = {}
    for p in v:
        w = np.empty(vals[p].size)
        for j in range(w.size):
            w[j] = (shifted(p, j, 1, 1) - shifted(p, j, 1, -1) - shifted(p, j, -1, 1)
                    + shifted(p, j, -1, -1)) / (4 * eps * eps)
        want[p] = w
    return want


def compare(what: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when |got - want| <= rtol |want| + atol everywhere, else a readable report."""
    bad = np.abs(got - want) > rtol * np.abs(want) + atol
    if not bad.any():
        return None
    return (f"{what}: {int(bad.sum())} of {bad.size} elements differ\n"
            f"    got      {np.array2string(got, precision=6, max_line_width=200)}\n"
            f"    expected {np.array2string(want, precision=6, max_line_width=200)}")


def reverse_problems(fn, arrays: dict, vals: dict, params: list[str]):
    """(problems, plain loss): every parameter's gradient against central differences, and the taped
    run's loss against the untaped one. gk.GradientRuleError propagates."""
    loss, grads = taped_gradients(fn, arrays, vals, params)
    plain = run_forward(fn, arrays, vals)
    if not np.isfinite(plain) or abs(plain) > HUGE:
        return None, plain
    problems = []
    if abs(loss - plain) > 1e-12 * max(1.0, abs(plain)):
        problems.append(f"loss on the tape {loss!r} != loss without a tape {plain!r}")
    fd = fd_gradients(fn, arrays, vals, params)
    scale = max([1.0, abs(plain)] + [float(np.max(np.abs(d))) for d in fd.values()])
    for p in params:
        bad = compare(f"{p}.grad", grads[p], fd[p], 1e-6, 1e-8 * scale)
        if bad:
            problems.append(bad)
    return problems, plain


def hvp_problems(fn, arrays: dict, vals: dict, params: list[str], seed: str) -> list[str]:
    """Every parameter's p.grad.dual (forward-over-reverse, random seeds v) against mixed central
    differences. gk.GradientRuleError propagates."""
    rng = np.random.default_rng(zlib.crc32(("hvp/" + seed).encode()))
    v = {p: rng.uniform(-1, 1, vals[p].shape) for p in params}
    got = hvp_dual(fn, arrays, vals, v)
    want = fd_hvp(fn, arrays, vals, v)
    scale = max([1.0] + [float(np.max(np.abs(w))) for w in want.values()])
    return [bad for p in params if (bad := compare(f"{p}.grad.dual", got[p], want[p], 1e-4, 1e-5 * scale))]


def check_program(prog: Program, device: str, hvp: bool | None = None) -> str:
    """Run `prog` taped on `device`, backward from the loss, and compare every input parameter's gradient
    with central differences; forward-over-reverse too when `prog.hvp` (or `hvp`). Returns "passed",
    "refused" (gk.GradientRuleError) or "discarded" (huge values); raises TapeMismatch, or whatever
    gradkit raised."""
    STATS["programs"] += 1
    fn = compile_program(prog)
    vals = initial_values(prog)
    params = prog.params()
    feats = prog.features()
    top = next((f for f in PRIORITY if f in feats), "plain")
    tags = f"{top}   (program has: {', '.join(feats) or 'nothing special'})"
    with warnings.catch_warnings(), gk.ScopedDevice(device):
        warnings.simplefilter("ignore")
        try:
            problems, _ = reverse_problems(fn, prog.arrays, vals, params)
        except gk.GradientRuleError:
            STATS["refused"] += 1
            STATS["refused_unpredicted" if prog.hazard() is None else "refused_predicted"] += 1
            return "refused"
        if problems is None:
            STATS["discarded"] += 1
            return "discarded"
        STATS["reverse"] += 1
        if problems:
            raise TapeMismatch(f"reverse: {tags}\n" + "\n".join(problems))
        if hvp if hvp is not None else prog.hvp:
            try:
                problems = hvp_problems(fn, prog.arrays, vals, params, prog.seed)
            except gk.GradientRuleError:
                STATS["hvp_refused"] += 1
                return "passed"
            STATS["hvp"] += 1
            if problems:
                raise TapeMismatch(f"forward-over-reverse: {tags}\n" + "\n".join(problems))
    return "passed"
