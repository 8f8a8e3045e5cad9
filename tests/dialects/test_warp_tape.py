"""wp.Tape's gradient bookkeeping against Warp 1.19's, run in the same test: each tape pattern is written once
and run by Warp (cpu) and by gradkit.warp (every device) on the same random inputs; every gradient is
compared after every step (backward once and twice, zero, reset, pre-filled gradients, grads dicts,
retain_grad, intermediates without gradients, arrays overwritten on the tape). Where Warp's result is
silently wrong, the test shows it (against the analytic gradient) and checks that gradkit.warp raises
WarpGradientError instead."""

from __future__ import annotations

import numpy as np
import pytest

import gradkit.warp as gwp
from gradkit.core.errors import GradientRuleError

warp = pytest.importorskip("warp")
warp.config.quiet = True

N = 5
_KERNELS: dict = {}


def _kernels(wp):
    """The pattern kernels, defined once per module."""
    if wp.__name__ in _KERNELS:
        return _KERNELS[wp.__name__]

    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    @wp.kernel
    def square_add(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] += x[i] * x[i]

    @wp.kernel
    def square_atomic(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(y, i, x[i] * x[i])

    @wp.kernel
    def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, 3.0 * y[i] + 0.5 * float(i) * y[i])

    @wp.kernel
    def double_in_place(y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 2.0 * y[i]

    @wp.kernel
    def square_in_place(y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = y[i] * y[i]

    @wp.kernel
    def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 5.0 * x[i]

    ks = dict(square=square, square_add=square_add, square_atomic=square_atomic, total=total,
              double_in_place=double_in_place, square_in_place=square_in_place, scale=scale)
    _KERNELS[wp.__name__] = ks
    return ks


def _weights():
    return 3.0 + 0.5 * np.arange(N)          # d loss / d y in `total`


class _Run:
    """Arrays x (input), y (intermediate), l (loss) on one module and device; `snap(label)` records every
    gradient (and the loss) after a step."""

    def __init__(self, wp, device, x0, retain_y=False, y_grad=True):
        self.wp, self.device, self.k = wp, device, _kernels(wp)
        self.x = wp.array(x0, dtype=float, device=device, requires_grad=True)
        kw = {"retain_grad": True} if retain_y else {}
        self.y = wp.zeros(N, dtype=float, device=device, requires_grad=y_grad, **kw)
        self.l = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.tape = wp.Tape()
        self.out: list = []

    def launch(self, name, inputs, outputs=()):
        self.wp.launch(self.k[name], dim=N, inputs=inputs, outputs=list(outputs), device=self.device)

    def snap(self, label):
        grads = {n: (a.grad.numpy().copy() if a.grad is not None else None)
                 for n, a in (("x", self.x), ("y", self.y), ("l", self.l))}
        self.out.append((label, grads, self.l.numpy().copy()))


def _chain(r: _Run, first: str):
    with r.tape:
        r.launch(first, [r.x], [r.y])
        r.launch("total", [r.y], [r.l])


def _store_pattern(r: _Run):
    _chain(r, "square")
    r.tape.backward(loss=r.l)
    r.snap("once")
    r.tape.backward(loss=r.l)
    r.snap("twice (inputs accumulate, the intermediate is consumed)")
    r.tape.zero()
    r.snap("zero")
    r.y.grad.fill_(10.0)
    r.tape.backward(loss=r.l)
    r.snap("pre-filled intermediate gradient: one more seed")
    r.tape.zero()
    r.x.grad.fill_(100.0)
    r.tape.backward(loss=r.l)
    r.snap("pre-filled input gradient: accumulated into")
    r.tape.zero()
    r.l.grad.fill_(7.0)
    r.tape.backward()
    r.snap("backward() from a loss gradient set by hand")
    r.tape.backward()
    r.snap("again: the loss gradient is still the seed")
    r.tape.reset()
    r.snap("reset")


def _accumulate_pattern(first):
    def run(r: _Run):
        _chain(r, first)
        r.tape.backward(loss=r.l)
        r.snap("once (the intermediate keeps its gradient)")
        r.tape.zero()
        r.snap("zero")
        r.y.grad.fill_(10.0)
        r.tape.backward(loss=r.l)
        r.snap("pre-filled intermediate gradient")
        r.tape.zero()
        r.tape.backward(loss=r.l)
        r.snap("after zero")
    return run


def _grads_dict_pattern(r: _Run):
    with r.tape:
        r.launch("square", [r.x], [r.y])
    seed = np.linspace(0.5, 2.0, N).astype(np.float32)
    r.tape.backward(grads={r.y: r.wp.array(seed, dtype=float, device=r.device)})
    r.snap("grads={y: seed}")
    r.tape.backward(grads={r.y: r.wp.array(seed, dtype=float, device=r.device)})
    r.snap("twice")


def _no_grad_intermediate(r: _Run):
    _chain(r, "square")
    r.tape.backward(loss=r.l)
    r.snap("an intermediate without requires_grad cuts the gradient")


def _in_place_linear(r: _Run):
    with r.tape:
        r.launch("square", [r.x], [r.y])
        r.launch("double_in_place", [r.y])
        r.launch("total", [r.y], [r.l])
    r.tape.backward(loss=r.l)
    r.snap("y = x*x; y = 2*y in place")


def _overwritten(r: _Run):
    with r.tape:
        r.launch("square", [r.x], [r.y])
        r.launch("total", [r.y], [r.l])
        r.launch("scale", [r.x], [r.y])          # y overwritten after total read it
        r.launch("total", [r.y], [r.l])
    r.tape.backward(loss=r.l)
    r.snap("y written, read, overwritten, read")
    r.tape.zero()
    r.tape.backward(loss=r.l)
    r.snap("again after zero")


def _retained_once(r: _Run):
    _chain(r, "square")
    r.tape.backward(loss=r.l)
    r.snap("retain_grad keeps the intermediate's gradient")
    r.tape.zero()
    r.tape.backward(loss=r.l)
    r.snap("after zero")


AGREE = {
    "store": (_store_pattern, {}),
    "add": (_accumulate_pattern("square_add"), {}),
    "atomic": (_accumulate_pattern("square_atomic"), {}),
    "grads_dict": (_grads_dict_pattern, {}),
    "no_grad_intermediate": (_no_grad_intermediate, {"y_grad": False}),
    "in_place_linear": (_in_place_linear, {}),
    "overwritten": (_overwritten, {}),
    "retained": (_retained_once, {"retain_y": True}),
}


def _x0(seed):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, N).astype(np.float32)


_WARP_RUNS: dict = {}


def _warp_run(name):
    if name not in _WARP_RUNS:
        fn, kw = AGREE[name]
        r = _Run(warp, "cpu", _x0(len(name)), **kw)
        fn(r)
        _WARP_RUNS[name] = r.out
    return _WARP_RUNS[name]


@pytest.mark.parametrize("name", list(AGREE))
def test_tape_pattern_matches_warp(device, name):
    fn, kw = AGREE[name]
    r = _Run(gwp, device, _x0(len(name)), **kw)
    fn(r)
    want = _warp_run(name)
    assert [s[0] for s in r.out] == [s[0] for s in want]
    for (label, got, loss), (_, ref, ref_loss) in zip(r.out, want):
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-6, err_msg=f"{name}: {label}: loss")
        for k in ("x", "y", "l"):
            assert (got[k] is None) == (ref[k] is None), f"{name}: {label}: {k}.grad"
            if ref[k] is not None:
                np.testing.assert_allclose(got[k], ref[k], rtol=1e-6, atol=1e-6,
                                           err_msg=f"{name}: {label}: {k}.grad")


def test_store_pattern_gradients_are_analytic():
    """The agreement above is with the right numbers: d loss / dx = 2 x w on the first pass."""
    out = _warp_run("store")
    x = _x0(len("store")).astype(np.float64)
    np.testing.assert_allclose(out[0][1]["x"], 2 * x * _weights(), rtol=1e-6)
    np.testing.assert_allclose(out[1][1]["x"], 4 * x * _weights(), rtol=1e-6)


# ------------------------------------------------------------------ where Warp is silently wrong

def _twice_without_zero(first):
    def run(r: _Run):
        _chain(r, first)
        r.tape.backward(loss=r.l)
        r.snap("once")
        r.tape.backward(loss=r.l)
        r.snap("twice")
    return run


def _retained_twice(r: _Run):
    with r.tape:
        r.launch("square", [r.x], [r.y])
        r.launch("total", [r.y], [r.l])
        r.launch("scale", [r.x], [r.y])
        r.launch("total", [r.y], [r.l])
    r.tape.backward(loss=r.l)
    r.snap("retained y written twice")


def _in_place_nonlinear(r: _Run):
    with r.tape:
        r.launch("square", [r.x], [r.y])
        r.launch("square_in_place", [r.y])
        r.launch("total", [r.y], [r.l])
    r.tape.backward(loss=r.l)
    r.snap("y = x*x; y = y*y in place")


def _analytic(name, x):
    w = _weights()
    return {"add_twice": 2 * (2 * x * w), "atomic_twice": 2 * (2 * x * w),
            "retained_second_pass": 2 * (2 * x * w),
            "retained_written_twice": 2 * x * w + 5 * w,
            "in_place_nonlinear": 4 * x ** 3 * w}[name]


WRONG = {
    "add_twice": (_twice_without_zero("square_add"), {}),
    "atomic_twice": (_twice_without_zero("square_atomic"), {}),
    "retained_second_pass": (_twice_without_zero("square"), {"retain_y": True}),
    "retained_written_twice": (_retained_twice, {"retain_y": True}),
    "in_place_nonlinear": (_in_place_nonlinear, {}),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_where_warp_is_wrong_gradkit_raises(device, name):
    fn, kw = WRONG[name]
    x0 = _x0(7)
    ref = _Run(warp, "cpu", x0, **kw)
    fn(ref)
    truth = _analytic(name, x0.astype(np.float64))
    assert not np.allclose(ref.out[-1][1]["x"], truth, rtol=1e-3), "Warp is right here after all"
    r = _Run(gwp, device, x0, **kw)
    with pytest.raises(gwp.WarpGradientError, match="Warp 1.19"):
        fn(r)
    assert issubclass(gwp.WarpGradientError, GradientRuleError)
    if len(ref.out) == 2:          # the first pass agreed, and the refused second one wrote nothing
        np.testing.assert_allclose(r.out[0][1]["x"], ref.out[0][1]["x"], rtol=1e-6)
        np.testing.assert_allclose(r.x.grad.numpy(), ref.out[0][1]["x"], rtol=1e-6)
        r.tape.zero()
        r.tape.backward(loss=r.l)
        np.testing.assert_allclose(r.x.grad.numpy(), 2 * x0 * _weights(), rtol=1e-5)


def test_array_needed_by_an_earlier_adjoint_overwritten_raises(device):
    """z = y*y reads y, then y is overwritten: Warp's backward of z reads the new y (wrong); gradkit's version
    check refuses it."""
    def fn(r):
        z = r.wp.zeros(N, dtype=float, device=r.device, requires_grad=True)
        with r.tape:
            r.launch("square", [r.x], [r.y])
            r.launch("square", [r.y], [z])
            r.launch("scale", [r.x], [r.y])
            r.launch("total", [z], [r.l])
            r.launch("total", [r.y], [r.l])
        r.tape.backward(loss=r.l)
        r.snap("done")
    x0 = _x0(11)
    ref = _Run(warp, "cpu", x0)
    fn(ref)
    w, x = _weights(), x0.astype(np.float64)
    assert not np.allclose(ref.out[-1][1]["x"], 4 * x ** 3 * w + 5 * w, rtol=1e-3)
    with pytest.raises(GradientRuleError):
        fn(_Run(gwp, device, x0))


def test_retain_grad_needs_requires_grad():
    for wp in (warp, gwp):
        with pytest.raises(ValueError, match="retain_grad=True requires requires_grad=True"):
            wp.zeros(3, dtype=float, retain_grad=True)


def test_a_captured_tape_replays_forward_and_backward(device, rng):
    """A taped forward pass and its backward captured in `wp.ScopedCapture` (example_diffray's pattern on a
    CUDA device) run nothing while captured and run both at each `wp.capture_launch`: the loss and the
    analytic gradient d/dx sum(3 x^2 + i x^2 / 2) after each replay, Warp's accumulation when two replays
    have no zero() between them, zero() captured too; the same values as the tape run without capture."""
    k = _kernels(gwp)
    x0 = rng.uniform(-1.0, 1.0, N).astype(np.float32)
    coef = 3.0 + 0.5 * np.arange(N)
    want_loss, want_grad = float(np.sum(coef * x0.astype(np.float64) ** 2)), 2.0 * coef * x0
    x = gwp.array(x0, dtype=float, device=device, requires_grad=True)
    y = gwp.zeros(N, dtype=float, device=device, requires_grad=True)
    loss = gwp.zeros(1, dtype=float, device=device, requires_grad=True)
    with gwp.ScopedCapture() as capture:
        tape = gwp.Tape()
        with tape:
            gwp.launch(k["square"], N, inputs=[x], outputs=[y], device=device)
            gwp.launch(k["total"], N, inputs=[y], outputs=[loss], device=device)
        tape.backward(loss)
    assert loss.numpy()[0] == 0.0 and not x.grad.numpy().any() and not tape.records
    for replay in range(2):
        gwp.capture_launch(capture.graph)
        np.testing.assert_allclose(loss.numpy()[0], want_loss, rtol=1e-5)
        np.testing.assert_allclose(tape.gradients[x].numpy(), want_grad, rtol=1e-5, atol=1e-6)
        tape.zero()
        loss.zero_()
    gwp.capture_launch(capture.graph)
    gwp.capture_launch(capture.graph)                         # no zero() between: Warp's replays add up
    np.testing.assert_allclose(x.grad.numpy(), 2 * want_grad, rtol=1e-5, atol=1e-6)
    with gwp.ScopedCapture() as clear:
        tape.zero()
    assert x.grad.numpy().any()
    gwp.capture_launch(clear.graph)
    assert not x.grad.numpy().any()
    plain = gwp.Tape()
    loss.zero_()
    with plain:
        gwp.launch(k["square"], N, inputs=[x], outputs=[y], device=device)
        gwp.launch(k["total"], N, inputs=[y], outputs=[loss], device=device)
    plain.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=1e-5, atol=1e-6)
