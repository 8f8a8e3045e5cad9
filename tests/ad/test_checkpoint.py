"""grad_replaced / grad_for (Taichi semantics) and checkpointing, with the memory it saves measured."""

import numpy as np

import gradkit as gk


@gk.kernel
def step(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] + 0.01 * gk.sin(x[i])


@gk.kernel
def total(x: gk.array(dtype=gk.float64), loss: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(loss, 0, x[i] * x[i])


def _ref_grad(x0, steps):
    x, jac = x0.copy(), np.ones_like(x0)
    for _ in range(steps):
        jac = jac * (1 + 0.01 * np.cos(x))
        x = x + 0.01 * np.sin(x)
    return 2 * x * jac


@gk.kernel
def double(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = 2.0 * x[i]


@gk.grad_replaced
def forward_double(x, y):
    gk.launch(double, x.shape[0], inputs=[x], outputs=[y], device=x.device)


@gk.grad_for(forward_double)
def backward_double(x, y):
    # A hand-written backward (deliberately 3x instead of 2x, so the test sees it was used).
    x.grad.assign(x.grad.numpy() + 3.0 * y.grad.numpy())


def test_grad_replaced_uses_grad_for(device):
    x = gk.array([1.0, 2.0], dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(2, dtype=gk.float64, device=device, requires_grad=True)
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    with gk.Tape(loss=loss) as tape:
        forward_double(x, y)
        gk.launch(total, 2, inputs=[y], outputs=[loss], device=device)
    assert [r.kernel for r in tape.launches] == ["total"]
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * 2 * np.array([2.0, 4.0]))


def _simulate(x0, steps, device, block=None):
    """Time-step `steps` times; with `block`, each block of steps is one checkpoint."""
    loss = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    n = x0.shape[0]

    def run_block(x_in, x_out, k):
        cur = x_in
        for _ in range(k - 1):
            nxt = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
            gk.launch(step, n, inputs=[cur], outputs=[nxt], device=device)
            cur = nxt
        gk.launch(step, n, inputs=[cur], outputs=[x_out], device=device)

    tape = gk.Tape()
    with tape:
        cur = x0
        done = 0
        while done < steps:
            k = block or 1
            nxt = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
            if block:
                gk.checkpoint(run_block, cur, nxt, k)
            else:
                gk.launch(step, n, inputs=[cur], outputs=[nxt], device=device)
            cur, done = nxt, done + k
        gk.launch(total, n, inputs=[cur], outputs=[loss], device=device)
    tape.backward(loss=loss)
    return tape


def test_checkpointing_gradient_and_memory(device, rng):
    from gradkit.runtime.arrays.array import memory
    n, steps = 2_000, 100
    x0_np = rng.uniform(-1, 1, n)
    peaks = {}
    for block in (None, 10):
        x0 = gk.array(x0_np, dtype=gk.float64, device=device, requires_grad=True)
        base = memory.live
        memory.reset_peak()
        tape = _simulate(x0, steps, device, block)
        peaks[block] = memory.peak - base
        np.testing.assert_allclose(x0.grad.numpy(), _ref_grad(x0_np, steps), rtol=1e-10)
        del tape
    state_bytes = n * 8 * 2          # one state and its gradient
    # Without checkpoints every state is kept (~100); with blocks of 10, ~10 boundaries + one block.
    assert peaks[None] > 80 * state_bytes
    assert peaks[10] < 30 * state_bytes, (peaks, state_bytes)
