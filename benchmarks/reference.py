"""The benchmark specification shared by every system: sizes, seeded float32 inputs, and float64 NumPy
references that each system's results (values and gradients) must match before it is timed.

Nothing here imports a kernel framework, so the peer workers (Warp, Taichi, Dr.Jit, JAX) can use it without loading
gradkit's LLVM next to their own.
"""

from __future__ import annotations

import numpy as np

SIZES = {
    "full": {"w1": 1 << 24, "w3": 2048, "w4": 1024, "w4_steps": 16, "w5": 20000},
    "smoke": {"w1": 1 << 14, "w3": 64, "w4": 32, "w4_steps": 4, "w5": 200},
}

HEAT_ALPHA = 0.2
NBODY_EPS = 1.0e-3

# Tolerances per check: (rtol, atol relative to the reference's largest magnitude). W2's forward value is
# one float32 sum of 2^24 terms: a serial float32 accumulation (Warp's CPU device runs threads in order)
# legitimately drifts by ~1e-3 relative, so that check only guards against lost or doubled updates.
TOLERANCES = {
    "W1 forward": (1e-5, 1e-6), "W1 backward": (1e-4, 1e-6), "W1 tangent": (1e-4, 1e-6),
    "W2 forward": (2e-2, 0.0), "W2 backward": (1e-6, 0.0),
    "W3 forward": (1e-3, 0.0), "W3 backward": (2e-2, 2e-2),
    "W4 forward": (1e-3, 0.0), "W4 backward": (1e-3, 1e-4),
    # the floors move values unchanged: exact
    "W1 floor: copy": (0.0, 0.0), "W1 floor: accumulate": (0.0, 0.0),
    "W4 floor: 17 gradients": (0.0, 0.0), "W4 floor: 2 buffers": (0.0, 0.0),
}


class CheckError(AssertionError):
    """A system's result differs from the float64 reference."""


def check(name: str, got, ref) -> float:
    """Compare `got` with the float64 reference under TOLERANCES[name]; returns the largest error relative
    to the reference's magnitude (recorded in the results), raises CheckError when out of tolerance."""
    rtol, atol_rel = TOLERANCES[name]
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape:
        got = got.reshape(ref.shape)
    scale = float(np.max(np.abs(ref))) or 1.0
    if not np.all(np.isfinite(got)) or not np.allclose(got, ref, rtol=rtol, atol=atol_rel * scale):
        err = float(np.max(np.abs(got - ref)))
        raise CheckError(f"{name}: result differs from the float64 reference "
                         f"(max abs err {err:.3g}, reference magnitude {scale:.3g})")
    return float(np.max(np.abs(got - ref))) / scale


def inputs(size: dict) -> dict:
    """The float32 inputs every system starts from (same seed, same order of draws)."""
    rng = np.random.default_rng(0)
    k = size["w4"]
    return {
        "w1_x": rng.uniform(-2, 2, size["w1"]).astype(np.float32),
        "w3_p": rng.uniform(0, 1, (size["w3"], 2)).astype(np.float32),
        "w4_u0": rng.uniform(0, 1, (k, k)).astype(np.float32),
    }


def ref_w1(x):
    """y = sin(x) x + x^2 / 2 and dy/dx."""
    x = x.astype(np.float64)
    return np.sin(x) * x + 0.5 * x * x, np.cos(x) * x + np.sin(x) + x


def ref_w2(x):
    """loss = sum(x^2) and d loss / dx."""
    x = x.astype(np.float64)
    return np.sum(x * x), 2 * x


def ref_w3(x):
    """U = sum_i sum_j -1/sqrt(|x_i - x_j|^2 + eps) and dU/dx."""
    x = x.astype(np.float64)
    d = x[:, None, :] - x[None, :, :]
    r2 = np.sum(d * d, 2) + NBODY_EPS
    return -np.sum(r2 ** -0.5), 2 * np.sum(d * r2[:, :, None] ** -1.5, axis=1)


def ref_w4(u0, steps):
    """Final loss sum(u^2) after `steps` heat steps, and its gradient w.r.t. the initial field (float64)."""
    a = HEAT_ALPHA
    u = u0.astype(np.float64)
    for _ in range(steps):
        v = u.copy()
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + a * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                             - 4 * u[1:-1, 1:-1])
        u = v
    g = 2 * u
    for _ in range(steps):
        inner = g[1:-1, 1:-1]
        grad = g.copy()
        grad[1:-1, 1:-1] = inner * (1 - 4 * a)
        grad[:-2, 1:-1] += a * inner
        grad[2:, 1:-1] += a * inner
        grad[1:-1, :-2] += a * inner
        grad[1:-1, 2:] += a * inner
        g = grad
    return np.sum(u * u), g


def traffic(size: dict) -> dict:
    """The bytes each memory-bound case must move at least (float32; one read of every input element and one
    write of every output element, per step for W4): the effective bandwidth of a run is these bytes over its
    time. W3 (n-body) is compute-bound and W5-W7 are not about memory, so they have none."""
    n, k2, steps = size["w1"], size["w4"] ** 2, size["w4_steps"]
    return {"W1 forward": 8 * n, "W1 backward": 8 * n,      # x -> y; x -> dx (the seed folded)
            "W1 tangent": 16 * n,                            # x, dx -> y, dy
            "W2 forward": 4 * n, "W2 backward": 8 * n,      # x -> loss; x -> dx
            "W4 forward": 8 * k2 * steps, "W4 backward": 8 * k2 * steps,   # u -> u' per step; du' -> du
            # the floors (system_gradkit.py): what they move
            "W1 floor: copy": 8 * n, "W1 floor: accumulate": 12 * n,
            "W4 floor: 17 gradients": 4 * k2 * (steps + 1) + 4 * k2 + 12 * k2 * steps,   # zero, seed, adds
            "W4 floor: 2 buffers": 4 * k2 + 8 * k2 * steps}


def copy_bandwidth(nbytes: int = 1 << 26, repeat: int = 7) -> float:
    """This machine's copy bandwidth in GB/s (bytes read + written per second): the best of `repeat` NumPy
    copies of `nbytes`, split over one thread per core (NumPy copies without the GIL; one core alone does
    not saturate memory). The ceiling the effective bandwidths are compared with."""
    import concurrent.futures
    import os
    import time
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    parts = os.cpu_count() or 1
    bounds = [len(src) * k // parts for k in range(parts + 1)]
    with concurrent.futures.ThreadPoolExecutor(parts) as pool:
        def copy():
            list(pool.map(lambda k: np.copyto(dst[bounds[k]:bounds[k + 1]], src[bounds[k]:bounds[k + 1]]),
                          range(parts)))
        copy()
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            copy()
            best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best / 1e9
