"""Taichi (`pip install taichi`) on arch "cpu" (or "cuda"/"vulkan"/"gpu"): the W1-W5 cases and the W6
cold start, written from Taichi's public documentation (fields with `needs_grad`, `kernel.grad()`,
`ti.ad.Tape`).

Each workload starts a fresh Taichi runtime (`ti.init`) with its own fields and kernels: `ti.ad.Tape`
clears every gradient field of the runtime on entry, so W1's 2^24-element fields must not be alive
while W4/W5 run. Kernels capture their fields from the enclosing function, as in Taichi's examples.

W4's backward does what `with ti.ad.Tape(loss=loss):` does on entry and exit (clear the gradients,
seed the loss, run every kernel's `.grad()` in reverse), spelled out so the forward and the backward can
be timed apart. W5 times the Tape itself: `__enter__` plus the recorded launches, then `__exit__`.
"""

import numpy as np
from harness import Case
from reference import HEAT_ALPHA, NBODY_EPS, check, ref_w1, ref_w2, ref_w3, ref_w4

NAME = "Taichi"
DIALECT = "taichi"


def _init(device: str, **kwargs):
    import taichi as ti
    arch = {"cpu": ti.cpu, "cuda": ti.cuda, "vulkan": ti.vulkan, "gpu": ti.gpu}[device.split(":")[0]]
    # No silent fallback to the CPU: a missing GPU arch is reported as n/a.
    ti.init(arch=arch, default_fp=ti.f32, log_level=ti.WARN, enable_fallback=False, **kwargs)
    return ti


def _stack_size(m: int) -> int:
    """Taichi's reverse pass keeps the j loop's values on an autodiff stack. Its default (adaptive) size
    crashes the n-body gradient (SIGSEGV in Taichi 1.7.4), so give it room for every iteration, rounded
    up to a power of two (4096 at m = 2048: gradkit's default value-stack size)."""
    return 1 << max(m, 64).bit_length()


def _w3_kernel(ti, p, U):
    """U += sum over i, j of -1/sqrt(|p_i - p_j|^2 + eps): one parallel i loop, a serial j loop.

    p[i] is read inside the j loop: hoisting it into a local before the loop (as the gradkit and Warp
    kernels do) makes Taichi 1.7.4 lose that local's adjoint, giving exactly half the gradient."""
    m = p.shape[0]

    @ti.kernel
    def nbody():
        for i in p:
            acc = 0.0
            for j in range(m):
                d = p[i] - p[j]
                acc += -1.0 / ti.sqrt(d.dot(d) + NBODY_EPS)
            U[None] += acc

    return nbody


def setup(device: str) -> dict:
    ti = _init(device)
    return {"version": ".".join(map(str, ti.__version__)), "device": f"{device}: arch {ti.cfg.arch.name}"}


def workloads(device: str, size: dict, data: dict) -> dict:

    def w1():
        ti = _init(device)
        n = size["w1"]
        x_np = data["w1_x"]
        x = ti.field(ti.f32, shape=n, needs_grad=True)
        y = ti.field(ti.f32, shape=n, needs_grad=True)
        x.from_numpy(x_np)
        y_ref, g_ref = ref_w1(x_np)

        @ti.kernel
        def stream():
            for i in x:
                v = x[i]
                y[i] = ti.sin(v) * v + 0.5 * v * v

        def fwd():
            stream()
            ti.sync()

        def bwd():
            stream.grad()
            ti.sync()
        fwd()
        e_f = check("W1 forward", y.to_numpy(), y_ref)
        x.grad.fill(0.0)
        y.grad.fill(1.0)
        bwd()
        e_b = check("W1 backward", x.grad.to_numpy(), g_ref)
        return [Case("W1 forward", fwd, errors={"W1 forward": e_f}),
                Case("W1 backward", bwd, errors={"W1 backward": e_b})]

    def w2():
        ti = _init(device)
        n = size["w1"]
        x_np = data["w1_x"]
        x = ti.field(ti.f32, shape=n, needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)
        x.from_numpy(x_np)
        l_ref, g_ref = ref_w2(x_np)

        @ti.kernel
        def reduce():
            for i in x:
                loss[None] += x[i] * x[i]

        def fwd():
            loss.fill(0.0)
            reduce()
            ti.sync()

        def bwd():
            loss.grad.fill(1.0)
            reduce.grad()
            ti.sync()
        fwd()
        e_f = check("W2 forward", loss.to_numpy(), l_ref)
        x.grad.fill(0.0)
        bwd()
        e_b = check("W2 backward", x.grad.to_numpy(), g_ref)
        return [Case("W2 forward", fwd, errors={"W2 forward": e_f}),
                Case("W2 backward", bwd, errors={"W2 backward": e_b})]

    def w3():
        p_np = data["w3_p"]
        ti = _init(device, ad_stack_size=_stack_size(len(p_np)))
        p = ti.Vector.field(2, ti.f32, shape=len(p_np), needs_grad=True)
        U = ti.field(ti.f32, shape=(), needs_grad=True)
        p.from_numpy(p_np)
        u_ref, g_ref = ref_w3(p_np)
        nbody = _w3_kernel(ti, p, U)

        def fwd():
            U.fill(0.0)
            nbody()
            ti.sync()

        def bwd():
            U.grad.fill(1.0)
            nbody.grad()
            ti.sync()
        fwd()
        e_f = check("W3 forward", U.to_numpy(), u_ref)
        p.grad.fill(0.0)
        bwd()
        e_b = check("W3 backward", p.grad.to_numpy(), g_ref)
        return [Case("W3 forward", fwd, errors={"W3 forward": e_f}),
                Case("W3 backward", bwd, errors={"W3 backward": e_b})]

    def w4():
        ti = _init(device)
        k, steps = size["w4"], size["w4_steps"]
        u0_np = data["w4_u0"]
        states = [ti.field(ti.f32, shape=(k, k), needs_grad=True) for _ in range(steps + 1)]
        loss = ti.field(ti.f32, shape=(), needs_grad=True)
        states[0].from_numpy(u0_np)

        @ti.kernel
        def heat(u: ti.template(), out: ti.template()):
            for i, j in u:
                if i == 0 or j == 0 or i == k - 1 or j == k - 1:
                    out[i, j] = u[i, j]
                else:
                    lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
                    out[i, j] = u[i, j] + HEAT_ALPHA * lap

        @ti.kernel
        def sum_sq(u: ti.template()):
            for i, j in u:
                loss[None] += u[i, j] * u[i, j]

        def fwd():
            loss.fill(0.0)
            for s in range(steps):
                heat(states[s], states[s + 1])
            sum_sq(states[-1])
            ti.sync()

        def bwd():
            # What `with ti.ad.Tape(loss=loss):` does on entry (clear gradients) and on exit (seed the
            # loss, run each kernel's .grad() in reverse). A Tape held open between the two timed halves
            # would also record clear_all_gradients' own kernels, and one evaluates only once.
            ti.ad.clear_all_gradients()
            loss.grad.fill(1.0)
            sum_sq.grad(states[-1])
            for s in reversed(range(steps)):
                heat.grad(states[s], states[s + 1])
            ti.sync()

        l_ref, g_ref = ref_w4(u0_np, steps)
        fwd()
        e_f = check("W4 forward", loss.to_numpy(), l_ref)
        bwd()
        e_b = check("W4 backward", states[0].grad.to_numpy(), g_ref)
        return [Case("W4 forward", fwd, errors={"W4 forward": e_f}),
                Case("W4 backward", bwd, errors={"W4 backward": e_b})]

    def w5():
        ti = _init(device)
        launches = size["w5"]
        x = ti.field(ti.f32, shape=1, needs_grad=True)
        y = ti.field(ti.f32, shape=1, needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)
        x.fill(1.0)

        @ti.kernel
        def tiny():
            for i in x:
                y[i] = 2.0 * x[i]

        tapes = []

        def plain():
            for _ in range(launches):
                tiny()
            ti.sync()

        def taped():
            tape = ti.ad.Tape(loss=loss, clear_gradients=False)
            tape.__enter__()
            for _ in range(launches):
                tiny()
            ti.sync()
            tapes.append(tape)

        def backward():
            tapes.pop().__exit__(None, None, None)
            ti.sync()

        def close():
            tape = tapes.pop()
            tape.eval_on_exit = False
            tape.__exit__(None, None, None)
        plain()
        if float(y.to_numpy()[0]) != 2.0:
            raise AssertionError(f"W5: y = {y.to_numpy()[0]}, expected 2")
        x.grad.fill(0.0)
        y.grad.fill(1.0)
        taped()
        backward()
        if float(x.grad.to_numpy()[0]) <= 0.0:
            raise AssertionError(f"W5: the tape's backward gave dx = {x.grad.to_numpy()[0]}")
        return [Case("W5 plain", plain, per=launches, unit="us"),
                Case("W5 taped", taped, after=close, per=launches, unit="us"),
                Case("W5 backward", backward, before=taped, per=launches, unit="us")]

    return {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5}


def cold_start(device: str, cache_dir: str, p_np) -> dict:
    """Import Taichi with its offline cache at `cache_dir` and take the first W3 gradient dU/dx."""
    import time
    t0 = time.perf_counter()
    ti = _init(device, offline_cache=True, offline_cache_file_path=cache_dir,
               ad_stack_size=_stack_size(len(p_np)))
    t_import = time.perf_counter() - t0
    p = ti.Vector.field(2, ti.f32, shape=len(p_np), needs_grad=True)
    U = ti.field(ti.f32, shape=(), needs_grad=True)
    p.from_numpy(np.asarray(p_np, np.float32))
    nbody = _w3_kernel(ti, p, U)
    with ti.ad.Tape(loss=U):
        nbody()
    return {"import_s": t_import, "grad": p.grad.to_numpy()}


def compile_case(device: str, cache_dir: str, kind: str, n: int, path: str, x_np) -> dict:
    """W7: import the generated kernels (over global fields x, y) and take each one's first call and its
    `.grad()`, with Taichi's offline cache at `cache_dir` (empty: everything compiles)."""
    import time
    ti = _init(device, offline_cache=True, offline_cache_file_path=cache_dir)
    from compile_time import STATEMENT_C, import_path, rss_mb
    m = len(x_np)
    x = ti.field(ti.f32, shape=m, needs_grad=True)
    y = ti.field(ti.f32, shape=m, needs_grad=True)
    x.from_numpy(np.asarray(x_np, np.float32))
    ti.sync()
    rss0 = rss_mb()
    t0 = time.perf_counter()
    mod = import_path(path)
    mod.x, mod.y = x, y
    if kind == "tiny":
        for j in range(n):
            k = getattr(mod, f"k{j}")
            k()
            y.grad.fill(1.0)
            k.grad()
    else:
        k = getattr(mod, kind)
        k(STATEMENT_C)
        y.grad.fill(1.0)
        k.grad(STATEMENT_C)
    ti.sync()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "rss_mb": rss_mb() - rss0, "y": y.to_numpy(), "grad": x.grad.to_numpy()}
