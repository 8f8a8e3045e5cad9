"""JAX (`pip install "jax[cpu]"`) on XLA's CPU backend ("cpu"): the W1-W5 cases and the W6 cold start, written
from JAX's public documentation (`jax.jit`, `jax.grad`, `jax.vjp`, `lax.fori_loop`), float32 (JAX's
default). Every timed call ends in `block_until_ready()` (JAX dispatches asynchronously).

The idiomatic form is a whole-array function compiled by `jax.jit`, XLA fusing it into loops:

    W1-W3 forward    jit(f)(x)
    W1-W3 backward   jit of the reverse-mode derivative: W1 `vjp(f, x)` applied to a cotangent of ones made
                     inside the jitted function (dL/dy = 1, folded by XLA as Dr.Jit folds its seed), W2/W3
                     `grad`. XLA recomputes from x what the adjoint needs, as the peers' adjoint launches
                     replay the forward: the same work as Warp's adjoint kernel, one fused program
    W3               all pairs by broadcasting (p[:, None] - p[None, :]); XLA fuses the m x m terms into
                     the reduction (a vmap over i or a fori_loop over j measured 15-25 % slower)
    W4               16 steps in `lax.fori_loop`, each writing the interior with `lax.dynamic_update_slice`.
                     The forward is jit(vjp(loss)), which keeps what the backward needs as Warp's tape keeps
                     its 16 states (the steps are linear: only the last state), and returns the vjp function
                     (a pytree); the backward is jit of that function applied to 1, the transposed stencil
                     as gathers. `u.at[1:-1, 1:-1].add(...)` is as fast forward, but its split backward
                     took 75-100 ms here against 7-10 ms
    W5               a jitted y = 2x on one element called `launches` times. JAX has no tape: "taped" is
                     `jax.vjp` of the jitted function per call (the forward, keeping its vjp function) and
                     "backward" calls the vjp functions in reverse, adding into dx. jax.vjp re-traces each
                     call (~250 µs), so those two cases make 1/10 of the launches (the figure is per launch)

W6 points JAX's persistent compilation cache (off by default) at the empty cache folder, with its minimum
compile time lowered to 0 so the n-body gradient (well under the default 1 s) is cached for W6 warm.
"""

from __future__ import annotations

import numpy as np
from harness import Case
from reference import HEAT_ALPHA, NBODY_EPS, check, ref_w1, ref_w2, ref_w3, ref_w4

NAME = "JAX"
TAPED_SHARE = 10        # W5 taped/backward make launches // TAPED_SHARE calls (see the docstring)


PLATFORMS = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}       # run.py's --jax-device -> XLA's platform
_platform = ["cpu"]                                             # the platform setup() chose for this worker


def _init(cache_dir: str | None = None):
    import jax
    jax.config.update("jax_platforms", _platform[0])
    if cache_dir is not None:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return jax


def setup(device: str) -> dict:
    """JAX on XLA's CPU backend ("cpu", what make bench runs) or, on a GPU machine whose JAX has CUDA's
    plugin, its first GPU ("cuda" or "gpu": the GPU check's peer where Warp's wheel is too large to carry)."""
    if device not in PLATFORMS:
        raise ValueError(f"JAX's device is 'cpu' or 'cuda', not {device!r}")
    _platform[0] = PLATFORMS[device]
    jax = _init()
    import jaxlib
    dev = jax.devices(_platform[0])
    name = "XLA CPU" if _platform[0] == "cpu" else dev[0].device_kind
    return {"version": jax.__version__,
            "device": f"{_platform[0]}: {name} (jaxlib {jaxlib.__version__}), {len(dev)} device"}


def nbody(p):
    """U = sum over i, j of -1/sqrt(|p_i - p_j|^2 + eps), all pairs by broadcasting."""
    import jax.numpy as jnp
    d = p[:, None, :] - p[None, :, :]
    return -jnp.sum(1.0 / jnp.sqrt(jnp.sum(d * d, axis=-1) + NBODY_EPS))


def workloads(device: str, size: dict, data: dict) -> dict:
    jax = _init()
    import jax.numpy as jnp
    from jax import lax

    def ready(f, *args):
        return lambda: jax.block_until_ready(f(*args))

    def pair(name: str, fwd, bwd, arg, refs) -> list[Case]:
        """The forward and backward cases of `name` (each a jitted function of `arg`), checked against
        refs = (value, gradient) first."""
        errors = [check(f"{name} {kind}", np.asarray(f(arg)), ref)
                  for kind, f, ref in (("forward", fwd, refs[0]), ("backward", bwd, refs[1]))]
        return [Case(f"{name} forward", ready(fwd, arg), errors={f"{name} forward": errors[0]}),
                Case(f"{name} backward", ready(bwd, arg), errors={f"{name} backward": errors[1]})]

    def w1():
        x_np = data["w1_x"]
        f = lambda x: jnp.sin(x) * x + 0.5 * x * x
        bwd = jax.jit(lambda x: jax.vjp(f, x)[1](jnp.ones_like(x))[0])
        return pair("W1", jax.jit(f), bwd, jnp.asarray(x_np), ref_w1(x_np))

    def w2():
        x_np = data["w1_x"]
        f = lambda x: jnp.sum(x * x)
        return pair("W2", jax.jit(f), jax.jit(jax.grad(f)), jnp.asarray(x_np), ref_w2(x_np))

    def w3():
        p_np = data["w3_p"]
        return pair("W3", jax.jit(nbody), jax.jit(jax.grad(nbody)), jnp.asarray(p_np), ref_w3(p_np))

    def w4():
        steps = size["w4_steps"]
        u0_np = data["w4_u0"]
        u0 = jnp.asarray(u0_np)

        def step(_, u):
            lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
            return lax.dynamic_update_slice(u, u[1:-1, 1:-1] + HEAT_ALPHA * lap, (1, 1))

        def loss(u):
            u = lax.fori_loop(0, steps, step, u)
            return jnp.sum(u * u)
        fwd = jax.jit(lambda u: jax.vjp(loss, u))          # (loss, vjp function holding what it needs)
        bwd = jax.jit(lambda vjp_fn: vjp_fn(jnp.ones((), jnp.float32))[0])
        l_ref, g_ref = ref_w4(u0_np, steps)
        value, vjp_fn = fwd(u0)
        e_f = check("W4 forward", np.asarray(value), l_ref)
        e_b = check("W4 backward", np.asarray(bwd(vjp_fn)), g_ref)
        return [Case("W4 forward", ready(fwd, u0), errors={"W4 forward": e_f}),
                Case("W4 backward", ready(bwd, vjp_fn), errors={"W4 backward": e_b})]

    def w5():
        launches = size["w5"]
        taped_launches = max(launches // TAPED_SHARE, 1)
        x = jnp.ones(1, jnp.float32)
        seed = jnp.ones(1, jnp.float32)
        tiny = jax.jit(lambda x: 2.0 * x)
        tape: list = []

        def plain():
            for _ in range(launches):
                y = tiny(x)
            y.block_until_ready()

        def taped():
            tape.clear()
            for _ in range(taped_launches):
                y, vjp_fn = jax.vjp(tiny, x)
                tape.append(vjp_fn)
            y.block_until_ready()

        def backward():
            dx = jnp.zeros(1, jnp.float32)
            for vjp_fn in reversed(tape):
                dx = dx + vjp_fn(seed)[0]
            tape.clear()
            return dx.block_until_ready()
        y = tiny(x)
        if float(y[0]) != 2.0:
            raise AssertionError(f"W5: y = {y[0]}, expected 2")
        taped()
        dx = backward()
        if float(dx[0]) != 2.0 * taped_launches:
            raise AssertionError(f"W5: the backward gave dx = {dx[0]}, expected {2 * taped_launches}")
        fewer = f"{taped_launches} calls per run (jax.vjp re-traces each)"
        return [Case("W5 plain", plain, per=launches, unit="us"),
                Case("W5 taped", taped, after=tape.clear, per=taped_launches, unit="us", note=fewer),
                Case("W5 backward", backward, before=taped, per=taped_launches, unit="us", note=fewer)]

    return {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5}


def cold_start(device: str, cache_dir: str, p_np) -> dict:
    """Import JAX with its persistent compilation cache at `cache_dir` and take the first W3 gradient."""
    import time
    t0 = time.perf_counter()
    jax = _init(cache_dir)
    import jax.numpy as jnp
    t_import = time.perf_counter() - t0
    grad = jax.jit(jax.grad(nbody))(jnp.asarray(p_np, jnp.float32))
    return {"import_s": t_import, "grad": np.asarray(grad)}
