"""Dr.Jit (`pip install drjit`) on its LLVM backend ("cpu"): the W1-W5 cases and the W6 cold start, written
from Dr.Jit's public documentation (`drjit.llvm.ad` arrays, `dr.enable_grad`, `dr.backward_from`,
`dr.grad`, `dr.while_loop`, `dr.gather`).

Dr.Jit traces array expressions and compiles each `dr.eval` into one fused kernel (cached by the traced
program's hash), so its idiomatic form is whole-array code with an evaluation where a value must exist:

    forward    the expression with gradients enabled on the inputs (recording the AD graph, as a launch of
               arrays with requires_grad does for Warp), then dr.eval + dr.sync_thread
    backward   dr.backward_from(output) (a gradient of 1, folded into the kernel as a literal) and the
               evaluation of dr.grad(input); the forward that records the graph runs untimed before each
               call (the graph is consumed by the backward), as the peers' forward has run before theirs
    W3         a symbolic dr.while_loop over j per particle i (one kernel of m threads), differentiated in
               reverse with max_iterations = m: 2.2 / 4.6 ms here, against 2.3 / 31-82 ms for the
               all-pairs form (m^2 threads gathering p[i] and p[j]), whose adjoint scatters into p
    W4         a Python loop of 16 steps, dr.eval per step (a gather reads evaluated memory anyway); the
               four shifted reads are dr.gather with the interior as mask and ReduceMode.Auto, which on
               the LLVM backend expands the gradient array per core (ReduceMode.Expand) so the adjoint's
               scatter-adds need no atomics: 136 ms backward here, against 290 ms with Local and 345 ms
               with Direct atomics (NoConflicts races between shifts and fails the check)
    W5         a tiny kernel y = 2x of one element, dr.eval per launch; "taped" records the AD graph of each
               launch, "backward" propagates a gradient of 1 from every recorded output to x

The kernel cache on disk (W6) is set with the DRJIT_CACHE_DIR environment variable before the import.
"""

from __future__ import annotations

import numpy as np
from harness import Case
from reference import HEAT_ALPHA, NBODY_EPS, check, ref_w1, ref_w2, ref_w3, ref_w4

NAME = "Dr.Jit"


def setup(device: str) -> dict:
    import drjit as dr
    if device != "cpu":
        raise ValueError(f"Dr.Jit runs here on its LLVM backend only: device 'cpu', not {device!r}")
    if not dr.has_backend(dr.JitBackend.LLVM):
        raise RuntimeError("Dr.Jit's LLVM backend is unavailable (it needs libLLVM; DRJIT_LIBLLVM_PATH)")
    llvm = ".".join(map(str, dr.detail.llvm_version()))
    return {"version": dr.__version__, "device": f"cpu: LLVM {llvm} backend, {dr.thread_count()} threads"}


def _nbody(p):
    """U = sum over i, j of -1/sqrt(|p_i - p_j|^2 + eps): a symbolic loop over j in each thread i.

    p_i rides in the loop state: read from the enclosing scope instead, its gradient through the loop is
    lost (Dr.Jit 1.5 gives half of dU/dp)."""
    import drjit as dr
    from drjit.llvm.ad import Array2f, Float, UInt32
    m = dr.width(p)
    pi = dr.gather(Array2f, p, dr.arange(UInt32, m))

    def body(pi, j, acc):
        d = pi - dr.gather(Array2f, p, j)
        return pi, j + 1, acc - 1.0 / dr.sqrt(dr.squared_norm(d) + NBODY_EPS)
    _, _, acc = dr.while_loop((pi, UInt32(0), dr.zeros(Float, m)), lambda pi, j, acc: j < m, body,
                              max_iterations=m)   # a bound is what reverse mode needs to keep the loop state
    return dr.sum(acc)


def _points(p_np):
    from drjit.llvm.ad import Array2f, Float
    return Array2f(Float(np.ascontiguousarray(p_np[:, 0])), Float(np.ascontiguousarray(p_np[:, 1])))


def _grad2(g) -> np.ndarray:
    return np.stack([g[0].numpy(), g[1].numpy()], axis=1)


def workloads(device: str, size: dict, data: dict) -> dict:
    import drjit as dr
    from drjit.llvm.ad import Float, UInt32

    def forward_backward(name: str, inp, f, to_numpy, f_ref, g_ref) -> list[Case]:
        """The forward and backward cases of out = f(inp), checked against the references."""
        dr.enable_grad(inp)
        taped = {}

        def fwd():
            out = f(inp)
            dr.eval(out)
            dr.sync_thread()
            return out

        def record():
            dr.clear_grad(inp)
            taped["out"] = fwd()

        def bwd():   # backward_from seeds d out = 1 and propagates; the gradient is then computed
            dr.backward_from(taped.pop("out"))
            dr.eval(dr.grad(inp))
            dr.sync_thread()
        e_f = check(f"{name} forward", fwd().numpy(), f_ref)
        record()
        bwd()
        e_b = check(f"{name} backward", to_numpy(dr.grad(inp)), g_ref)
        return [Case(f"{name} forward", fwd, errors={f"{name} forward": e_f}),
                Case(f"{name} backward", bwd, before=record, errors={f"{name} backward": e_b})]

    def w1():
        x_np = data["w1_x"]
        y_ref, g_ref = ref_w1(x_np)
        return forward_backward("W1", Float(x_np), lambda x: dr.sin(x) * x + 0.5 * x * x,
                                lambda g: g.numpy(), y_ref, g_ref)

    def w2():
        x_np = data["w1_x"]
        l_ref, g_ref = ref_w2(x_np)
        return forward_backward("W2", Float(x_np), lambda x: dr.sum(x * x), lambda g: g.numpy(), l_ref, g_ref)

    def w3():
        p_np = data["w3_p"]
        u_ref, g_ref = ref_w3(p_np)
        return forward_backward("W3", _points(p_np), _nbody, _grad2, u_ref, g_ref)

    def w4():
        k, steps = size["w4"], size["w4_steps"]
        u0_np = data["w4_u0"]
        idx = dr.arange(UInt32, k * k)
        i, j = idx // k, idx % k
        interior = (i > 0) & (j > 0) & (i < k - 1) & (j < k - 1)
        dr.make_opaque(idx, interior)      # evaluated once, not re-traced into every step's kernel

        def heat_loss(u):
            for _ in range(steps):
                nb = lambda at: dr.gather(Float, u, at, interior)   # 0 outside the interior
                lap = nb(idx - k) + nb(idx + k) + nb(idx - 1) + nb(idx + 1) - 4.0 * u
                u = dr.select(interior, u + HEAT_ALPHA * lap, u)
                dr.eval(u)
            return dr.sum(u * u)
        l_ref, g_ref = ref_w4(u0_np, steps)
        return forward_backward("W4", Float(u0_np.ravel()), heat_loss, lambda g: g.numpy().reshape(k, k),
                                l_ref, g_ref)

    def w5():
        launches = size["w5"]
        x, xg = Float([1.0]), Float([1.0])
        dr.make_opaque(x, xg)     # arrays in memory: a literal 1.0 would fold 2x into a constant
        dr.enable_grad(xg)
        tape: list = []

        def plain():
            for _ in range(launches):
                y = 2.0 * x
                dr.eval(y)
            dr.sync_thread()

        def taped():
            tape.clear()
            for _ in range(launches):
                y = 2.0 * xg
                dr.eval(y)
                tape.append(y)
            dr.sync_thread()

        def backward():   # dr.backward_from for many outputs: seed each with 1, then one traversal
            dr.clear_grad(xg)
            for y in tape:
                dr.set_grad(y, 1.0)
                dr.enqueue(dr.ADMode.Backward, y)
            dr.traverse(dr.ADMode.Backward)
            dr.eval(dr.grad(xg))
            dr.sync_thread()
            tape.clear()
        plain()
        taped()
        backward()
        if float(dr.grad(xg)[0]) != 2.0 * launches:
            raise AssertionError(f"W5: the backward gave dx = {dr.grad(xg)[0]}, expected {2 * launches}")
        return [Case("W5 plain", plain, per=launches, unit="us"),
                Case("W5 taped", taped, after=tape.clear, per=launches, unit="us"),
                Case("W5 backward", backward, before=taped, per=launches, unit="us")]

    return {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5}


def cold_start(device: str, cache_dir: str, p_np) -> dict:
    """Import Dr.Jit with its kernel cache at `cache_dir` and take the first W3 gradient dU/dx."""
    import os
    import time
    os.environ["DRJIT_CACHE_DIR"] = cache_dir      # read once, when the LLVM backend initialises
    t0 = time.perf_counter()
    import drjit as dr
    import drjit.llvm.ad  # noqa: F401
    t_import = time.perf_counter() - t0
    p = _points(np.asarray(p_np, np.float32))
    dr.enable_grad(p)
    dr.backward_from(_nbody(p))
    return {"import_s": t_import, "grad": _grad2(dr.grad(p))}
