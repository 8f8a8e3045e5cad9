"""Named tape patterns (issue 36): programs of several launches and host ops that write one array more than
once — reused buffers, overwrites, guarded overwrites, accumulation across steps, views, copies between
handles of one memory, checkpoint blocks — each in reverse mode and forward-over-reverse on every device,
against float64 central differences of the same program run without a tape (tests/fuzz/tape_programs.py)
and, where there is one, an analytic value.

These rows are the "tape patterns" family of the coverage table (docs/coverage.md, written by
tests/lang/coverage.py): pattern x {reverse, forward-over-reverse} x device. A pattern marked `refusal_ok`
may instead raise the documented gk.GradientRuleError (the cell then reads "refused"); any other exception
or a wrong gradient fails.
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib

import numpy as np
import pytest

import gradkit as gk
from tests.conftest import DEVICES
from tests.fuzz.tape_check import compare, hvp_problems, reverse_problems, taped_gradients
from tests.fuzz.tape_kernels import (accum_sin, accumulate, assign_scaled, atomic_half, atomic_shared,
                                     guarded_overwrite, inplace_axpy, inplace_scale, integrate, loss_term,
                                     overwrite_const, put, sin_of, square, sub_scaled, tanh_mix)
from tests.fuzz.tape_programs import ArraySpec

MODES = ("reverse", "forward-over-reverse")
DT = 0.1


@gk.kernel
def mul_constant(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * gk.float64(2.0)


@dataclasses.dataclass
class Pattern:
    """`fn(**arrays)` runs the program (launches and host ops; the loss lands in `l`); `arrays`: name ->
    shape, or (shape, init) with init "rand" / "zeros" / "weight"; `values`: fixed inputs (the rest random);
    `params`: the input parameters whose gradients are checked; `expect(vals)` -> {param: exact gradient}."""
    name: str
    doc: str
    fn: object
    arrays: dict
    params: list
    values: dict = dataclasses.field(default_factory=dict)
    expect: object = None
    refusal_ok: bool = False

    def specs(self) -> dict:
        out = {}
        for name, s in self.arrays.items():
            shape, init = (s, "rand") if isinstance(s[0], int) else s
            out[name] = ArraySpec(tuple(shape), init)
        out["l"] = ArraySpec((1,), "zeros")
        return out

    def inputs(self) -> dict:
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        vals = {}
        for name, spec in self.specs().items():
            if name in self.values:
                vals[name] = np.asarray(self.values[name], dtype=np.float64).reshape(spec.shape)
            elif spec.init == "zeros":
                vals[name] = np.zeros(spec.shape)
            elif spec.init == "weight":
                vals[name] = rng.uniform(0.5, 1.5, spec.shape)
            else:
                vals[name] = rng.uniform(-1.0, 1.0, spec.shape)
        return vals


def _loss(y, w, l):
    gk.launch(loss_term, y.size, inputs=[y, w], outputs=[l])


# --------------------------------------------------------------------------- the patterns

N = 4


def spring(k, x0, x1, x2, x3, x4, x5, f, w, l):
    """The issue's 5-step spring: one force buffer f assigned every step, x one array per step."""
    xs = [x0, x1, x2, x3, x4, x5]
    for t in range(5):
        gk.launch(assign_scaled, N, inputs=[xs[t], k], outputs=[f])
        gk.launch(integrate, N, inputs=[xs[t], f, DT], outputs=[xs[t + 1]])
    _loss(x5, w, l)


def put_then_const(a, y, w, l):
    gk.launch(put, N, inputs=[a], outputs=[y])
    gk.launch(overwrite_const, N, inputs=[2.0], outputs=[y])
    _loss(y, w, l)


def warp_copy_overwrite(x, w, l):
    """Port of a Warp tape test: out = q.copy(), then a launch overwrites out with 2 q; three times."""
    q = x
    for _ in range(3):
        out = q.copy()
        gk.launch(mul_constant, N, inputs=[q], outputs=[out])
        q = out
    _loss(q, w, l)


def guarded_partial_overwrite(a, b, y, w, l):
    gk.launch(sin_of, N, inputs=[a], outputs=[y])
    gk.launch(guarded_overwrite, N, inputs=[b], outputs=[y])     # even elements only
    _loss(y, w, l)


def accumulate_across_steps(k, s, x0, x1, x2, x3, f, w, l):
    """f zeroed, accumulated into (+=, -=), atomics into the shared s[0]; every step."""
    xs = [x0, x1, x2, x3]
    for t in range(3):
        f.zero_()
        gk.launch(accumulate, N, inputs=[xs[t], 0.5], outputs=[f])
        gk.launch(sub_scaled, N, inputs=[xs[t], k], outputs=[f])
        gk.launch(atomic_shared, N, inputs=[xs[t]], outputs=[s])
        gk.launch(integrate, N, inputs=[xs[t], f, DT], outputs=[xs[t + 1]])
    _loss(x3, w, l)
    _loss(s, w, l)


def view_written_while_base_read(x, f, w, l):
    """A launch reads x and writes x.reshape(-1) (the same memory), twice."""
    for _ in range(2):
        gk.launch(integrate, N, inputs=[x, f, DT], outputs=[x.reshape(-1)])
    gk.launch(tanh_mix, N, inputs=[x, f], outputs=[f])
    _loss(f, w, l)


def view_nonlinear_overwrite(x, y, w, l):
    """y = sin(x) read through a view of x that the same launch overwrites: refuse or differentiate."""
    gk.launch(sin_of, N, inputs=[x], outputs=[x.flatten()])
    gk.launch(square, N, inputs=[x.reshape(-1)], outputs=[y])
    _loss(y, w, l)


def copy_between_views(x, y, w, l):
    """gk.copy between two handles of one memory: the whole (identity) and disjoint halves."""
    gk.copy(x.reshape(-1), x)
    gk.copy(x.flatten(), x, dest_offset=0, src_offset=N // 2, count=N // 2)
    gk.launch(sin_of, N, inputs=[x], outputs=[y])
    _loss(y, w, l)


def block(x, k, out):
    t0 = gk.zeros(N, dtype=gk.float64, requires_grad=True)
    gk.launch(sin_of, N, inputs=[x], outputs=[t0])
    t1 = gk.zeros(N, dtype=gk.float64, requires_grad=True)
    gk.launch(assign_scaled, N, inputs=[t0, k], outputs=[t1])
    gk.launch(integrate, N, inputs=[x, t1, DT], outputs=[out])


def checkpoint_steps(k, x0, x1, x2, x3, w, l):
    xs = [x0, x1, x2, x3]
    for t in range(3):
        gk.checkpoint(block, xs[t], k, xs[t + 1])
    _loss(x3, w, l)


def block_view(x, k, out):
    """`block` reading its input through a view."""
    block(x.reshape(-1), k, out)


def checkpoint_reads_view(k, x0, x1, y, w, l):
    gk.checkpoint(block_view, x0, k, x1)
    gk.launch(square, N, inputs=[x1], outputs=[y])
    _loss(y, w, l)


def block_accumulating(x, out):
    """A block that accumulates (`+=`) into a temporary it allocates, then writes its output."""
    t0 = gk.zeros(N, dtype=gk.float64, requires_grad=True)
    gk.launch(accum_sin, N, inputs=[x], outputs=[t0])
    gk.launch(integrate, N, inputs=[x, t0, DT], outputs=[out])


def checkpoint_accumulating_temp(x0, x1, w, l):
    gk.checkpoint(block_accumulating, x0, x1)
    _loss(x1, w, l)


def checkpoint_output_overwritten(k, x0, y, w, l):
    """A later launch overwrites half the checkpoint's output: the backward keeps that write in place."""
    gk.checkpoint(block, x0, k, y)
    gk.launch(guarded_overwrite, N, inputs=[x0], outputs=[y])
    _loss(y, w, l)


def checkpoint_input_changed(k, x0, p, y, w, l):
    """A later launch changes the checkpoint's input: refuse (version check) or differentiate right."""
    gk.checkpoint(block, x0, k, y)
    gk.launch(accumulate, N, inputs=[p, 0.5], outputs=[x0])
    _loss(y, w, l)
    _loss(x0, w, l)


def host_copy_then_read(k, x, y, z, u, v, w, l):
    """Values moved by `gk.copy` and `assign` into existing arrays, then read nonlinearly."""
    gk.copy(y, x)
    gk.launch(assign_scaled, N, inputs=[y, k], outputs=[z])
    u.assign(z)
    gk.launch(square, N, inputs=[u], outputs=[v])
    _loss(v, w, l)


def checkpoint_view_input_changed(k, x0, p, y, w, l):
    """Like checkpoint_input_changed, the block reading its input through a view it makes itself."""
    gk.checkpoint(block_view, x0, k, y)
    gk.launch(accumulate, N, inputs=[p, 0.5], outputs=[x0])
    _loss(y, w, l)


def reshape_copy(x, y, w, l):
    """y.reshape(-1).copy() on a tape passes the gradient like y.copy()."""
    gk.launch(sin_of, N, inputs=[x.reshape(-1)], outputs=[y.reshape(-1)])
    c = y.reshape(-1).copy()
    _loss(c, w, l)


def plain_copy(x, y, w, l):
    gk.launch(sin_of, N, inputs=[x], outputs=[y])
    c = y.copy()
    _loss(c, w, l)


def host_writes_consume(x, p, q, y, z, w, l):
    """zero_, fill_, assign and a partial gk.copy overwrite what launches wrote: their gradient stops."""
    gk.launch(sin_of, N, inputs=[x], outputs=[y])                 # y = sin x ...
    y.zero_()                                                     # ... gone: x gets nothing from it
    gk.launch(accumulate, N, inputs=[q, 1.0], outputs=[y])        # y = q
    gk.launch(square, N, inputs=[p], outputs=[z])                 # z = p^2
    gk.copy(y, z, dest_offset=0, src_offset=1, count=2)           # y[0:2] = p[1:3]^2
    gk.launch(sin_of, N, inputs=[q], outputs=[z])                 # z = sin q ...
    z.fill_(0.25)                                                 # ... gone
    gk.launch(accumulate, N, inputs=[y, 1.0], outputs=[z])        # z = 0.25 + y
    y.assign(z)
    gk.launch(tanh_mix, N, inputs=[y, x], outputs=[z])            # z = tanh(y) + x / 2
    _loss(z, w, l)


def inplace_update(k, x, p, f, y, w, l):
    """x[i] = x[i] + dt f[i] in place, three times, f a reused buffer."""
    for _ in range(3):
        gk.launch(assign_scaled, N, inputs=[p, k], outputs=[f])
        gk.launch(inplace_axpy, N, inputs=[f, DT], outputs=[x])
    gk.launch(tanh_mix, N, inputs=[x, f], outputs=[y])
    _loss(y, w, l)


def inplace_nonlinear(k, f, y, w, l):
    """`f[i] = f[i] * k[0]`: the launch overwrites the values its own adjoint needs (dk = sum f_old adj)."""
    gk.launch(inplace_scale, N, inputs=[k], outputs=[f])
    gk.launch(tanh_mix, N, inputs=[f, f], outputs=[y])
    _loss(y, w, l)


def atomic_shared_elements(x, s, h, y, z, w, l):
    """Many threads add into s[0] and into h[i // 2]; s is then read by every thread."""
    gk.launch(atomic_shared, N, inputs=[x], outputs=[s])
    gk.launch(atomic_half, N, inputs=[x], outputs=[h])
    gk.launch(put, N, inputs=[s], outputs=[y])
    gk.launch(square, N, inputs=[h], outputs=[z])
    _loss(y, w, l)
    _loss(z, w, l)


V = (N,)
W = ((N,), "weight")
Z = ((N,), "zeros")
PATTERNS = [
    Pattern("spring_reused_force", "5-step spring, force buffer `f[i] = -k x[i]` reused each step; "
            "dL/dk = -1.2288", spring,
            {"k": (1,), **{f"x{t}": V if t == 0 else Z for t in range(6)}, "f": Z, "w": W}, ["k", "x0"],
            values={"k": [2.0], "x0": np.linspace(1.0, 2.0, N), "w": np.ones(N)},
            expect=lambda v: {"k": [-1.2288], "x0": np.full(N, 0.8 ** 5)}),
    Pattern("put_then_const", "`y[i] = a[0]`, then `y[i] = 2.0`, loss = sum(y): a.grad = 0", put_then_const,
            {"a": (1,), "y": Z, "w": W}, ["a"], values={"w": np.ones(N)}, expect=lambda v: {"a": [0.0]}),
    Pattern("warp_copy_overwrite", "Warp's tape test: `out = q.copy()`, then `out = 2 q` by a launch, "
            "three times: x.grad = 8", warp_copy_overwrite, {"x": V, "w": W}, ["x"],
            values={"w": np.ones(N)}, expect=lambda v: {"x": np.full(N, 8.0)}),
    Pattern("guarded_partial_overwrite", "`y = sin(a)`, then `if i % 2 == 0: y[i] = 2 b[i]`",
            guarded_partial_overwrite, {"a": V, "b": V, "y": Z, "w": W}, ["a", "b"],
            expect=lambda v: {"a": np.where(np.arange(N) % 2, v["w"] * np.cos(v["a"]), 0.0),
                              "b": np.where(np.arange(N) % 2, 0.0, 2 * v["w"])}),
    Pattern("accumulate_across_steps", "`f.zero_()`, `f += ...`, `f -= ...`, atomics into `s[0]`, "
            "every step of 3", accumulate_across_steps,
            {"k": (1,), "s": (1,), **{f"x{t}": V if t == 0 else Z for t in range(4)}, "f": V,
             "w": W}, ["k", "s", "x0"]),
    Pattern("view_written_while_base_read", "a launch reads x and writes `x.reshape(-1)` (in place), twice",
            view_written_while_base_read, {"x": V, "f": V, "w": W}, ["x", "f"]),
    Pattern("view_nonlinear_overwrite", "`x.flatten()[i] = sin(x[i])`, then read: refused or right",
            view_nonlinear_overwrite, {"x": V, "y": Z, "w": W}, ["x"], refusal_ok=True),
    Pattern("copy_between_views", "`gk.copy(x.reshape(-1), x)` (identity) and disjoint halves of one memory",
            copy_between_views, {"x": V, "y": Z, "w": W}, ["x"]),
    Pattern("checkpoint_steps", "three `gk.checkpoint` blocks (temporaries inside), one per step",
            checkpoint_steps, {"k": (1,), **{f"x{t}": V if t == 0 else Z for t in range(4)}, "w": W},
            ["k", "x0"]),
    Pattern("checkpoint_reads_view", "a `gk.checkpoint` block reading its input through `x.reshape(-1)`",
            checkpoint_reads_view, {"k": (1,), "x0": V, "x1": Z, "y": Z, "w": W}, ["k", "x0"]),
    Pattern("checkpoint_accumulating_temp", "a checkpoint block that `+=`s into a temporary it allocates",
            checkpoint_accumulating_temp, {"x0": V, "x1": Z, "w": W}, ["x0"]),
    Pattern("checkpoint_output_overwritten", "a later guarded launch overwrites half a checkpoint's output",
            checkpoint_output_overwritten, {"k": (1,), "x0": V, "y": Z, "w": W}, ["k", "x0"]),
    Pattern("checkpoint_input_changed", "a later launch changes a checkpoint's input: refused or right",
            checkpoint_input_changed, {"k": (1,), "x0": V, "p": V, "y": Z, "w": W}, ["k", "x0", "p"],
            refusal_ok=True),
    Pattern("checkpoint_view_input_changed", "a later launch changes an input the block read through "
            "`x.reshape(-1)`: refused or right", checkpoint_view_input_changed,
            {"k": (1,), "x0": V, "p": V, "y": Z, "w": W}, ["k", "x0", "p"], refusal_ok=True),
    Pattern("host_copy_then_read", "`gk.copy(y, x)` and `u.assign(z)` into existing arrays, then read "
            "nonlinearly",
            host_copy_then_read, {"k": (1,), "x": V, "y": Z, "z": Z, "u": Z, "v": Z, "w": W}, ["k", "x"]),
    Pattern("reshape_copy", "`c = y.reshape(-1).copy()` of a 2-D y on a tape passes the gradient",
            reshape_copy, {"x": (2, N // 2), "y": ((2, N // 2), "zeros"), "w": W}, ["x"],
            expect=lambda v: {"x": v["w"] * np.cos(v["x"].reshape(-1))}),
    Pattern("plain_copy", "`c = y.copy()` on a tape passes the gradient", plain_copy,
            {"x": V, "y": Z, "w": W}, ["x"], expect=lambda v: {"x": v["w"] * np.cos(v["x"])}),
    Pattern("host_writes_consume", "`zero_`, `fill_`, `assign`, a partial `gk.copy` overwrite launch results",
            host_writes_consume, {"x": V, "p": V, "q": V, "y": Z, "z": Z, "w": W}, ["x", "p", "q"]),
    Pattern("inplace_update", "`x[i] = x[i] + dt f[i]` in place, 3 times, f reused", inplace_update,
            {"k": (1,), "x": V, "p": V, "f": Z, "y": Z, "w": W}, ["k", "x", "p"]),
    Pattern("inplace_nonlinear", "`f[i] = f[i] * k[0]` in place (the adjoint needs the old f): right or "
            "refused",
            inplace_nonlinear, {"k": (1,), "f": V, "y": Z, "w": W}, ["k", "f"], refusal_ok=True),
    Pattern("atomic_shared_elements", "threads adding into `s[0]` and `h[i // 2]`, then reading them",
            atomic_shared_elements, {"x": V, "s": (1,), "h": V, "y": Z, "z": Z, "w": W}, ["x", "s", "h"]),
]
BY_NAME = {p.name: p for p in PATTERNS}
CELLS = [(p.name, m, d) for p in PATTERNS for m in MODES for d in DEVICES]


def check_pattern(pat: Pattern, mode: str, device: str) -> str:
    """"passed" or "refused"; raises AssertionError with every disagreement."""
    specs, vals = pat.specs(), pat.inputs()
    with warnings.catch_warnings(), gk.ScopedDevice(device):
        warnings.simplefilter("ignore")
        try:
            if mode == "reverse":
                problems, _ = reverse_problems(pat.fn, specs, vals, pat.params)
                assert problems is not None, "the program's loss overflowed"
                if pat.expect is not None:
                    _, grads = taped_gradients(pat.fn, specs, vals, pat.params)
                    for p, want in pat.expect(vals).items():
                        want = np.asarray(want, dtype=float).reshape(-1)
                        bad = compare(f"{p}.grad (analytic)", grads[p], want, 1e-10, 1e-12)
                        if bad:
                            problems.append(bad)
            else:
                problems = hvp_problems(pat.fn, specs, vals, pat.params, pat.name)
        except gk.GradientRuleError:
            if pat.refusal_ok:
                return "refused"
            raise
    assert not problems, f"{pat.name} ({mode}, {device}):\n" + "\n".join(problems)
    return "passed"


@pytest.mark.parametrize(("pattern", "mode", "device"), CELLS, ids=[f"{p}-{m}-{d}" for p, m, d in CELLS])
def test_tape_pattern(pattern, mode, device, record_property):
    outcome = check_pattern(BY_NAME[pattern], mode, device)
    record_property("tape_cell", f"{pattern}|{mode}|{device}|{outcome}")
