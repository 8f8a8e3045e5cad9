"""NVIDIA Warp (`pip install warp-lang`) on "cpu" (or "cuda" with --warp-device cuda): the W1-W5 cases
and the W6 cold start, written from Warp's public documentation (kernels, `wp.launch(adjoint=True)`,
`wp.Tape`).

Each kernel gets its own Warp module (`module="unique"`): Warp compiles a whole module at its first
launch, so the cold start (W6) builds the n-body kernel alone, as a user's script with one kernel would.
Kernels are made by `_kernels()` on first use, after `wp.config` is set.
"""

from __future__ import annotations

import functools

import numpy as np
from harness import Case, w5_cases
from reference import HEAT_ALPHA, NBODY_EPS, check, ref_w1, ref_w2, ref_w3, ref_w4

NAME = "Warp"
DIALECT = "warp"


def _init(cache_dir: str | None = None):
    import warp as wp
    if cache_dir is not None:
        wp.config.kernel_cache_dir = cache_dir
    wp.init()
    return wp


@functools.cache
def _kernels():
    import warp as wp

    @wp.kernel(module="unique")
    def w1_stream(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        v = x[i]
        y[i] = wp.sin(v) * v + 0.5 * v * v

    @wp.kernel(module="unique")
    def w2_reduce(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, x[i] * x[i])

    @wp.kernel(module="unique")
    def w4_heat(u: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
        i, j = wp.tid()
        n = u.shape[0]
        m = u.shape[1]
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            out[i, j] = u[i, j]
        else:
            lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            out[i, j] = u[i, j] + wp.float32(HEAT_ALPHA) * lap

    @wp.kernel(module="unique")
    def w4_loss(u: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
        i, j = wp.tid()
        wp.atomic_add(loss, 0, u[i, j] * u[i, j])

    @wp.kernel(module="unique")
    def w5_tiny(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 2.0 * x[i]

    return {"w1_stream": w1_stream, "w2_reduce": w2_reduce, "w3_nbody": _w3_kernel(),
            "w4_heat": w4_heat, "w4_loss": w4_loss, "w5_tiny": w5_tiny}


@functools.cache
def _w3_kernel():
    import warp as wp

    @wp.kernel(module="unique")
    def w3_nbody(x: wp.array(dtype=wp.vec2), U: wp.array(dtype=float)):
        i = wp.tid()
        xi = x[i]
        acc = float(0.0)  # noqa: UP018  (a typed variable: Warp loops may mutate it)
        for j in range(x.shape[0]):
            d = xi - x[j]
            acc += -1.0 / wp.sqrt(wp.dot(d, d) + wp.float32(NBODY_EPS))
        wp.atomic_add(U, 0, acc)

    return w3_nbody


def setup(device: str) -> dict:
    wp = _init()
    dev = wp.get_device(device)
    return {"version": wp.__version__, "device": f"{dev.alias}: {dev.name}"}


def workloads(device: str, size: dict, data: dict) -> dict:
    import warp as wp
    K = _kernels()
    sync = lambda: wp.synchronize_device(device)

    def w1():
        n = size["w1"]
        x_np = data["w1_x"]
        x = wp.array(x_np, dtype=wp.float32, device=device, requires_grad=True)
        y = wp.zeros(n, dtype=wp.float32, device=device, requires_grad=True)
        y_ref, g_ref = ref_w1(x_np)

        def fwd():
            wp.launch(K["w1_stream"], dim=n, inputs=[x], outputs=[y], device=device)
            sync()

        def bwd():
            wp.launch(K["w1_stream"], dim=n, inputs=[x], outputs=[y], adj_inputs=[x.grad],
                      adj_outputs=[y.grad], adjoint=True, device=device)
            sync()
        fwd()
        e_f = check("W1 forward", y.numpy(), y_ref)
        x.grad.zero_()
        y.grad.fill_(1.0)
        bwd()
        e_b = check("W1 backward", x.grad.numpy(), g_ref)
        return [Case("W1 forward", fwd, errors={"W1 forward": e_f}),
                Case("W1 backward", bwd, errors={"W1 backward": e_b})]

    def w2():
        n = size["w1"]
        x_np = data["w1_x"]
        x = wp.array(x_np, dtype=wp.float32, device=device, requires_grad=True)
        loss = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        l_ref, g_ref = ref_w2(x_np)

        def fwd():
            loss.zero_()
            wp.launch(K["w2_reduce"], dim=n, inputs=[x], outputs=[loss], device=device)
            sync()

        def bwd():
            loss.grad.fill_(1.0)
            wp.launch(K["w2_reduce"], dim=n, inputs=[x], outputs=[loss], adj_inputs=[x.grad],
                      adj_outputs=[loss.grad], adjoint=True, device=device)
            sync()
        fwd()
        e_f = check("W2 forward", loss.numpy()[0], l_ref)
        x.grad.zero_()
        bwd()
        e_b = check("W2 backward", x.grad.numpy(), g_ref)
        return [Case("W2 forward", fwd, errors={"W2 forward": e_f}),
                Case("W2 backward", bwd, errors={"W2 backward": e_b})]

    def w3():
        m = size["w3"]
        p_np = data["w3_p"]
        p = wp.array(p_np, dtype=wp.vec2, device=device, requires_grad=True)
        U = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        u_ref, g_ref = ref_w3(p_np)

        def fwd():
            U.zero_()
            wp.launch(K["w3_nbody"], dim=m, inputs=[p], outputs=[U], device=device)
            sync()

        def bwd():
            U.grad.fill_(1.0)
            wp.launch(K["w3_nbody"], dim=m, inputs=[p], outputs=[U], adj_inputs=[p.grad],
                      adj_outputs=[U.grad], adjoint=True, device=device)
            sync()
        fwd()
        e_f = check("W3 forward", U.numpy()[0], u_ref)
        p.grad.zero_()
        bwd()
        e_b = check("W3 backward", p.grad.numpy(), g_ref)
        return [Case("W3 forward", fwd, errors={"W3 forward": e_f}),
                Case("W3 backward", bwd, errors={"W3 backward": e_b})]

    def w4():
        k, steps = size["w4"], size["w4_steps"]
        u0_np = data["w4_u0"]
        states = [wp.array(u0_np, dtype=wp.float32, device=device, requires_grad=True)] + \
            [wp.zeros((k, k), dtype=wp.float32, device=device, requires_grad=True) for _ in range(steps)]
        loss = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        tape = wp.Tape()

        def fwd():
            tape.reset()
            loss.zero_()
            with tape:
                for s in range(steps):
                    wp.launch(K["w4_heat"], dim=(k, k), inputs=[states[s]], outputs=[states[s + 1]],
                              device=device)
                wp.launch(K["w4_loss"], dim=(k, k), inputs=[states[-1]], outputs=[loss], device=device)
            sync()

        def bwd():
            tape.zero()
            tape.backward(loss=loss)
            sync()
        l_ref, g_ref = ref_w4(u0_np, steps)
        fwd()
        e_f = check("W4 forward", loss.numpy()[0], l_ref)
        bwd()
        e_b = check("W4 backward", states[0].grad.numpy(), g_ref)
        return [Case("W4 forward", fwd, errors={"W4 forward": e_f}),
                Case("W4 backward", bwd, errors={"W4 backward": e_b})]

    def w5():
        launches = size["w5"]
        kernel = K["w5_tiny"]
        xs = wp.array(np.ones(1, np.float32), dtype=wp.float32, device=device, requires_grad=True)
        ys = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
        seed = wp.ones(1, dtype=wp.float32, device=device)

        def plain():
            for _ in range(launches):
                wp.launch(kernel, dim=1, inputs=[xs], outputs=[ys], device=device)
            sync()

        def taped():
            with wp.Tape():
                for _ in range(launches):
                    wp.launch(kernel, dim=1, inputs=[xs], outputs=[ys], device=device)
            sync()

        recorded = wp.Tape()
        with recorded:
            for _ in range(launches):
                wp.launch(kernel, dim=1, inputs=[xs], outputs=[ys], device=device)

        def backward():
            recorded.backward(grads={ys: seed})
            sync()
        return w5_cases(plain, taped, backward, xs, ys, launches)

    return {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5}


def cold_start(device: str, cache_dir: str, p_np) -> dict:
    """Import Warp with its kernel cache at `cache_dir` and take the first W3 gradient dU/dx."""
    import time
    t0 = time.perf_counter()
    wp = _init(cache_dir)
    t_import = time.perf_counter() - t0
    kernel = _w3_kernel()
    p = wp.array(p_np, dtype=wp.vec2, device=device, requires_grad=True)
    U = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(p_np), inputs=[p], outputs=[U], device=device)
    tape.backward(loss=U)
    return {"import_s": t_import, "grad": p.grad.numpy()}


def compile_case(device: str, cache_dir: str, kind: str, n: int, path: str, x_np) -> dict:
    """W7: import the generated kernels (one Warp module: Warp builds a Python module's kernels together, at
    the first launch) and take each one's first forward launch and gradient on a tape, with the kernel
    cache at `cache_dir` (empty: everything compiles)."""
    import time
    wp = _init(cache_dir)
    from compile_time import STATEMENT_C, import_path, rss_mb
    m = len(x_np)
    x = wp.array(x_np, dtype=wp.float32, device=device, requires_grad=True)
    y = wp.zeros(m, dtype=wp.float32, device=device, requires_grad=True)
    ones = wp.ones(m, dtype=wp.float32, device=device)
    wp.synchronize_device(device)
    rss0 = rss_mb()
    t0 = time.perf_counter()
    mod = import_path(path)
    if kind == "tiny":
        for j in range(n):
            tape = wp.Tape()
            with tape:
                wp.launch(getattr(mod, f"k{j}"), dim=m, inputs=[x], outputs=[y], device=device)
            tape.backward(grads={y: ones})
    else:
        tape = wp.Tape()
        with tape:
            wp.launch(getattr(mod, kind), dim=m, inputs=[x, STATEMENT_C], outputs=[y], device=device)
        tape.backward(grads={y: ones})
    wp.synchronize_device(device)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rss_mb": rss_mb() - rss0, "y": y.numpy().copy(), "grad": x.grad.numpy().copy()}
