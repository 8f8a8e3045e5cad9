"""Shared cases for the gradient-pool tests (test_grad_buffers*.py): the float64 kernels, random time-stepped
programs with their NumPy reference, and the dropped-intermediate chain, so both test modules build the same tapes."""

import numpy as np

import gradkit as gk
from heat_kernels import heat

F64 = gk.float64


@gk.kernel
def squash(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    v = u[i, j]
    out[i, j] = 0.5 * gk.sin(v) * v + 0.5 * v


@gk.kernel
def mix(a: gk.array(dtype=gk.float64, ndim=2), b: gk.array(dtype=gk.float64, ndim=2),
        out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    out[i, j] = 0.7 * a[i, j] * gk.cos(b[i, j]) + 0.2 * b[i, j]


@gk.kernel
def accumulate(u: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64, ndim=2)):
    i, j = gk.tid()
    out[i, j] += 0.3 * u[i, j]


@gk.kernel
def sum_squares(u: gk.array(dtype=gk.float64, ndim=2), loss: gk.array(dtype=gk.float64)):
    i, j = gk.tid()
    gk.atomic_add(loss, 0, u[i, j] * u[i, j])


def np_heat(u):
    out = u.copy()
    out[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                             - 4.0 * u[1:-1, 1:-1])
    return out


def random_program(rng, steps: int) -> list:
    """Each step: (op, index of an earlier state it also reads); `mix` reaches back, so live ranges overlap."""
    ops = []
    for s in range(steps):
        op = ["heat", "squash", "mix", "mix_acc"][rng.integers(4)]
        ops.append((op, int(rng.integers(0, s + 1))))
    return ops


def np_loss(program, u0, w):
    """The program in float64 NumPy: loss = sum(last^2) + sum(mix(s1, w)^2), s1 the first state (a second
    path from the loss into an early intermediate)."""
    states = [u0]
    for op, back in program:
        u = states[-1]
        if op == "heat":
            v = np_heat(u)
        elif op == "squash":
            v = 0.5 * np.sin(u) * u + 0.5 * u
        else:
            v = 0.7 * u * np.cos(states[back]) + 0.2 * states[back]
            if op == "mix_acc":
                v = v + 0.3 * states[back]
        states.append(v)
    return np.sum(states[-1] ** 2) + np.sum((0.7 * states[1] * np.cos(w) + 0.2 * w) ** 2)


def run_program(program, u0_np, w_np, device, hold: bool, retain: int | None = None):
    """Record the program on a tape and run backward with the intermediates held in a list (`hold`) or
    dropped; `retain`: an intermediate step to retain_grad(). Returns (tape, u0, held states or [])."""
    shape = u0_np.shape
    u0 = gk.array(u0_np, dtype=F64, device=device, requires_grad=True)
    w = gk.array(w_np, dtype=F64, device=device)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    states = [u0]
    with tape:
        for k, (op, back) in enumerate(program):
            v = gk.zeros(shape, dtype=F64, device=device, requires_grad=True)
            if retain == k + 1:
                v.retain_grad()
            if op == "heat":
                gk.launch(heat, shape, inputs=[states[-1]], outputs=[v], device=device)
            elif op == "squash":
                gk.launch(squash, shape, inputs=[states[-1]], outputs=[v], device=device)
            else:
                gk.launch(mix, shape, inputs=[states[-1], states[back]], outputs=[v], device=device)
                if op == "mix_acc":
                    gk.launch(accumulate, shape, inputs=[states[back]], outputs=[v], device=device)
            states.append(v)
        gk.launch(sum_squares, shape, inputs=[states[-1]], outputs=[loss], device=device)
        ws = gk.zeros(shape, dtype=F64, device=device, requires_grad=True)
        gk.launch(mix, shape, inputs=[states[1], w], outputs=[ws], device=device)
        gk.launch(sum_squares, shape, inputs=[ws], outputs=[loss], device=device)
    del v, ws
    kept = states[1:] if hold else []
    del states
    tape.backward(loss=loss)
    return tape, u0, kept


def central_difference(program, u0, w, d, eps=1e-6):
    return (np_loss(program, u0 + eps * d, w) - np_loss(program, u0 - eps * d, w)) / (2 * eps)


def _state(tape, k):
    """State k (1-based) of run_program's tape, found again through the records (the user dropped it)."""
    written = []
    for rec in tape.launches:
        out = rec.outputs[-1]
        if rec.kernel != "sum_squares" and all(out is not w for w in written):
            written.append(out)
    return written[k - 1]


def _dropped_chain(device, keep=None, other=None):
    """u0 -> squash -> s0 -> squash -> s1 -> squash -> s2 -> loss, intermediates dropped unless `keep(k, s)`
    returns something that holds one; `other`: a second tape that also records a launch reading s1.
    Returns (tape, u0, what keep returned, ids of s0, s1, s2)."""
    u0 = gk.array(np.linspace(-1, 1, 48).reshape(6, 8), dtype=F64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=F64, device=device, requires_grad=True)
    tape = gk.Tape()
    holders, ids, states = [], [], []
    with tape:
        u = u0
        for k in range(3):
            s = gk.zeros((6, 8), dtype=F64, device=device, requires_grad=True)
            gk.launch(squash, (6, 8), inputs=[u], outputs=[s], device=device)
            ids.append(id(s))
            states.append(s)
            if keep is not None:
                holders.append(keep(k, s))
            u = s
        gk.launch(sum_squares, (6, 8), inputs=[u], outputs=[loss], device=device)
    if other is not None:
        with other:
            gk.launch(squash, (6, 8), inputs=[states[1]], outputs=[gk.zeros((6, 8), dtype=F64, device=device)],
                      device=device)
    del u, s, states
    tape.backward(loss=loss)
    return tape, u0, holders, ids


def _released_ids(tape):
    return {id(a) for a in tape._released}


class Box:
    pass


def _in_box(s):
    b = Box()
    b.s = s
    return b


def _closure(s):
    return lambda: s
