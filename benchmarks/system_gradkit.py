"""gradkit on one device ("cpu", "opencl", "opencl:1", ...): the W1-W5 cases and the W6 cold start."""

from __future__ import annotations

import numpy as np
from harness import Case, w5_cases
from reference import check, ref_w1, ref_w2, ref_w3, ref_w4

NAME = "gradkit"
DIALECT = "gradkit"      # compile_time.py's source dialect (W7)


def setup(device: str) -> dict:
    import gradkit as gk
    dev = gk.get_device(device)
    return {"version": getattr(gk, "__version__", "?"), "device": f"{dev.name}: {dev.description}"}


def workloads(device: str, size: dict, data: dict) -> dict:
    import gradkit as gk
    import workloads as W

    sync = lambda: gk.synchronize(device)

    def w1():
        n = size["w1"]
        x_np = data["w1_x"]
        x = gk.array(x_np, device=device, requires_grad=True)
        y = gk.zeros(n, device=device, requires_grad=True)
        y_ref, g_ref = ref_w1(x_np)

        def fwd():
            gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device)
            sync()

        def bwd():   # the adjoint launch seeded with dL/dy = 1 for every element, folded into the kernel
            gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device, adjoint=True, adj_outputs=[1.0])
            sync()
        fwd()
        e_f = check("W1 forward", y.numpy(), y_ref)
        x.grad.zero_()
        bwd()
        e_b = check("W1 backward", x.grad.numpy(), g_ref)

        # Forward mode (gradkit only): value and tangent in one kernel, seed dx = 1 so dy = dy/dx.
        x.dual = gk.ones(n, device=device)
        y.dual = gk.zeros(n, device=device)

        def tangent():
            gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device, tangent=True)
            sync()
        tangent()
        e_t = check("W1 tangent", y.dual.numpy(), g_ref)
        return [Case("W1 forward", fwd, errors={"W1 forward": e_f}),
                Case("W1 backward", bwd, errors={"W1 backward": e_b}), w1_user_seed(x, y, g_ref),
                Case("W1 tangent", tangent, errors={"W1 tangent": e_t}), *w1_floors(x, x_np)]

    def w1_user_seed(x, y, g_ref):
        """W1 backward as users write it (issue 43): a tape's backward seeded with a ones array made once,
        tape.backward(grads={y: gk.ones_like(y)}); the tape folds the constant as adj_outputs=[1.0] does."""
        n = x.shape[0]
        tape = gk.Tape()
        with tape:
            gk.launch(W.w1_stream, n, inputs=[x], outputs=[y], device=device)
        ones = gk.ones_like(y)

        def bwd():
            tape.backward(grads={y: ones})
            sync()
        x.grad.zero_()
        bwd()
        name = "W1 backward: grads=ones_like"
        return Case(name, bwd, errors={name: check("W1 backward", x.grad.numpy(), g_ref)})

    def w1_floors(x, x_np):
        """W1's bytes alone: a copy (read x, write y: the forward's, and Dr.Jit's backward writing a fresh
        dx) and an accumulation (read x and g, write g: a backward adding into .grad, as gradkit and Warp)."""
        n = len(x_np)
        y, g = gk.zeros(n, device=device), gk.zeros(n, device=device)

        def copy():
            gk.launch(W.floor_copy, n, inputs=[x], outputs=[y], device=device)
            sync()

        def accumulate():
            gk.launch(W.floor_accumulate, n, inputs=[x], outputs=[g], device=device)
            sync()
        copy()
        accumulate()
        e_c = check("W1 floor: copy", y.numpy(), x_np)
        e_a = check("W1 floor: accumulate", g.numpy(), x_np)
        return [Case("W1 floor: copy", copy, errors={"W1 floor: copy": e_c}),
                Case("W1 floor: accumulate", accumulate, errors={"W1 floor: accumulate": e_a})]

    def w2():
        n = size["w1"]
        x_np = data["w1_x"]
        x = gk.array(x_np, device=device, requires_grad=True)
        loss = gk.zeros(1, device=device, requires_grad=True)
        l_ref, g_ref = ref_w2(x_np)

        def fwd():
            loss.zero_()
            gk.launch(W.w2_reduce, n, inputs=[x], outputs=[loss], device=device)
            sync()

        def bwd():
            loss.grad.fill_(1.0)
            gk.launch(W.w2_reduce, n, inputs=[x], outputs=[loss], device=device, adjoint=True)
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
        p = gk.array(p_np, dtype=gk.vec2, device=device, requires_grad=True)
        U = gk.zeros(1, device=device, requires_grad=True)
        u_ref, g_ref = ref_w3(p_np)

        def fwd():
            U.zero_()
            gk.launch(W.w3_nbody, m, inputs=[p], outputs=[U], device=device)
            sync()

        def bwd():
            U.grad.fill_(1.0)
            gk.launch(W.w3_nbody, m, inputs=[p], outputs=[U], device=device, adjoint=True)
            sync()
        fwd()
        e_f = check("W3 forward", U.numpy()[0], u_ref)
        p.grad.zero_()
        bwd()
        e_b = check("W3 backward", p.grad.numpy(), g_ref)

        def fast(on: bool):                  # gk.config.fast_math, Taichi's default, around each run
            def set_():
                gk.config.fast_math = on
            return set_
        fast(True)()
        fwd()
        e_fast = check("W3 forward", U.numpy()[0], u_ref)
        fast(False)()
        return [Case("W3 forward", fwd, errors={"W3 forward": e_f}),
                Case("W3 backward", bwd, errors={"W3 backward": e_b}),
                Case("W3 forward fast_math", fwd, before=fast(True), after=fast(False),
                     errors={"W3 forward fast_math": e_fast})]

    def w4():
        k, steps = size["w4"], size["w4_steps"]
        u0_np = data["w4_u0"]
        states = [gk.array(u0_np, device=device, requires_grad=True)] + \
            [gk.zeros((k, k), device=device, requires_grad=True) for _ in range(steps)]
        loss = gk.zeros(1, device=device, requires_grad=True)
        tape = gk.Tape()

        def fwd():
            tape.reset()
            loss.zero_()
            with tape:
                for s in range(steps):
                    gk.launch(W.w4_heat, (k, k), inputs=[states[s]], outputs=[states[s + 1]], device=device)
                gk.launch(W.w4_loss, (k, k), inputs=[states[-1]], outputs=[loss], device=device)
            sync()

        def bwd():   # zeroing the gradients is part of the backward, as with the peers
            tape.zero()
            tape.backward(loss=loss)
            sync()
        l_ref, g_ref = ref_w4(u0_np, steps)
        fwd()
        e_f = check("W4 forward", loss.numpy()[0], l_ref)
        bwd()
        e_b = check("W4 backward", states[0].grad.numpy(), g_ref)
        return [Case("W4 forward", fwd, errors={"W4 forward": e_f}),
                Case("W4 backward", bwd, errors={"W4 backward": e_b}), w4_dropped(k, steps, u0_np, g_ref),
                *w4_floors(k, steps)]

    def w4_dropped(k, steps, u0_np, g_ref):
        """W4 backward as a time loop is usually written (issue 43): each step's state made while recording
        and dropped, so only the tape refers to it. The backward pass then carries the intermediates'
        gradients in two pooled buffers, as JAX's loop carry does (runtime/tape/grad_pool.py), and its
        stencil adjoints store into them (ad/fresh_store.py); u0's gradient is kept. It is checked through a
        copy: a NumPy view of u0.grad left out would make every tape.zero() zero it at once."""
        u0 = gk.array(u0_np, device=device, requires_grad=True)
        loss = gk.zeros(1, device=device, requires_grad=True)
        tape = gk.Tape()
        u = u0
        with tape:
            for _ in range(steps):
                v = gk.zeros((k, k), device=device, requires_grad=True)
                gk.launch(W.w4_heat, (k, k), inputs=[u], outputs=[v], device=device)
                u = v
            gk.launch(W.w4_loss, (k, k), inputs=[u], outputs=[loss], device=device)
        del u, v

        def bwd():
            tape.zero()
            tape.backward(loss=loss)
            sync()
        bwd()
        name = "W4 backward: intermediates dropped"
        return Case(name, bwd, errors={name: check("W4 backward", u0.grad.copy().numpy(), g_ref)})

    def w4_floors(k, steps):
        """W4 backward's bytes alone: zero 17 gradients and add each into the one before (every gradient
        kept, as on a tape), and JAX's pattern: one step's array copied into the next over two buffers
        (a loop carry, only the first state's gradient kept: both fit in the cache)."""
        grads = [gk.zeros((k, k), device=device) for _ in range(steps + 1)]
        pair = [gk.zeros((k, k), device=device), gk.zeros((k, k), device=device)]
        seed = gk.full((k, k), 1.0, device=device)

        def gradients():
            for g in grads:
                g.zero_()
            gk.copy(grads[-1], seed)
            for s in range(steps - 1, -1, -1):
                gk.launch(W.floor_accumulate_2d, (k, k), inputs=[grads[s + 1]], outputs=[grads[s]], device=device)
            sync()

        def two_buffers():
            gk.copy(pair[0], seed)
            for s in range(steps):
                gk.launch(W.floor_copy_2d, (k, k), inputs=[pair[s % 2]], outputs=[pair[1 - s % 2]], device=device)
            sync()
        gradients()
        two_buffers()
        ones = np.ones((k, k))
        e_g = check("W4 floor: 17 gradients", grads[0].numpy(), ones)
        e_t = check("W4 floor: 2 buffers", pair[steps % 2].numpy(), ones)
        return [Case("W4 floor: 17 gradients", gradients, errors={"W4 floor: 17 gradients": e_g}),
                Case("W4 floor: 2 buffers", two_buffers, errors={"W4 floor: 2 buffers": e_t})]

    def w5():
        launches = size["w5"]
        xs = gk.array(np.ones(1, np.float32), device=device, requires_grad=True)
        ys = gk.zeros(1, device=device, requires_grad=True)
        seed = gk.ones(1, device=device)

        def plain():
            for _ in range(launches):
                gk.launch(W.w5_tiny, 1, inputs=[xs], outputs=[ys], device=device)
            sync()

        def taped():
            with gk.Tape():
                for _ in range(launches):
                    gk.launch(W.w5_tiny, 1, inputs=[xs], outputs=[ys], device=device)
            sync()

        recorded = gk.Tape()
        with recorded:
            for _ in range(launches):
                gk.launch(W.w5_tiny, 1, inputs=[xs], outputs=[ys], device=device)

        def backward():
            recorded.backward(grads={ys: seed})
            sync()
        return w5_cases(plain, taped, backward, xs, ys, launches)

    return {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5}


def cold_start(device: str, cache_dir: str, p_np) -> dict:
    """Import gradkit with its kernel cache at `cache_dir` and take the first W3 gradient dU/dx."""
    import os
    import time
    os.environ["GRADKIT_CACHE_DIR"] = cache_dir
    t0 = time.perf_counter()
    import gradkit as gk
    import workloads as W
    t_import = time.perf_counter() - t0
    m = len(p_np)
    p = gk.array(p_np, dtype=gk.vec2, device=device, requires_grad=True)
    U = gk.zeros(1, device=device, requires_grad=True)
    tape = gk.Tape()
    with tape:
        gk.launch(W.w3_nbody, m, inputs=[p], outputs=[U], device=device)
    tape.backward(loss=U)
    return {"import_s": t_import, "grad": p.grad.numpy()}


def compile_case(device: str, cache_dir: str, kind: str, n: int, path: str, x_np) -> dict:
    """W7: import the generated kernels at `path` and take each one's first forward launch and gradient on a
    tape, with the kernel cache at `cache_dir` (empty: every kernel compiles)."""
    import os
    import time
    os.environ["GRADKIT_CACHE_DIR"] = cache_dir
    import gradkit as gk
    from compile_time import STATEMENT_C, import_path, rss_mb
    m = len(x_np)
    x = gk.array(x_np, device=device, requires_grad=True)
    y = gk.zeros(m, device=device, requires_grad=True)
    ones = gk.ones(m, device=device)
    rss0 = rss_mb()
    t0 = time.perf_counter()
    mod = import_path(path)
    if kind == "tiny":
        for j in range(n):
            tape = gk.Tape()
            with tape:
                gk.launch(getattr(mod, f"k{j}"), m, inputs=[x], outputs=[y], device=device)
            tape.backward(grads={y: ones})
    else:
        tape = gk.Tape()
        with tape:
            gk.launch(getattr(mod, kind), m, inputs=[x, STATEMENT_C], outputs=[y], device=device)
        tape.backward(grads={y: ones})
    gk.synchronize(device)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rss_mb": rss_mb() - rss0, "y": y.numpy().copy(), "grad": x.grad.numpy().copy()}
