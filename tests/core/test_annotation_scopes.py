"""Annotations resolve in the scope that defines the kernel, as Python's own scoping would — also under
`from __future__ import annotations`, where they are strings and never become closure cells."""

from __future__ import annotations

import numpy as np

import gradkit as gk


def _make_kernel(dtype):
    Arr = gk.array(dtype=dtype)
    Scalar = dtype

    @gk.func
    def square(v: Scalar) -> Scalar:
        return v * v

    @gk.kernel
    def apply(x: Arr, y: Arr):
        i = gk.tid()
        y[i] = square(x[i])

    return apply


def test_local_array_types_in_annotations(device, rng):
    x_np = rng.uniform(-1, 1, 5)
    for dtype in (gk.float32, gk.float64):
        k = _make_kernel(dtype)
        x = gk.array(x_np, dtype=dtype, device=device, requires_grad=True)
        y = gk.zeros(5, dtype=dtype, device=device, requires_grad=True)
        tape = gk.Tape()
        with tape:
            gk.launch(k, 5, inputs=[x, y], device=device)
        tape.backward(grads={y: gk.array(np.ones(5), dtype=dtype, device=device)})
        tol = 1e-6 if dtype is gk.float32 else 1e-12
        np.testing.assert_allclose(y.numpy(), x_np ** 2, rtol=tol)
        np.testing.assert_allclose(x.grad.numpy(), 2 * x_np, rtol=tol)



def test_a_kernel_finds_its_scope_when_gradkit_is_imported_through_a_symlink(tmp_path):
    """gradkit imported through a symlinked folder (frames carry the unresolved path): a kernel defined in
    a function, its annotation naming a local of that function, still compiles (its scope was looked up in
    gradkit's own frames: "cannot evaluate annotation")."""
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(gk.__file__).resolve().parent
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "gradkit").symlink_to(root)
    script = tmp_path / "user_script.py"
    script.write_text(
        "import numpy as np\n"
        "import gradkit as gk\n"
        "assert 'pkg' in gk.__file__\n"
        "def build():\n"
        "    A = gk.array(dtype=gk.float64)\n"
        "    @gk.kernel\n"
        "    def double(x: A, y: A):\n"
        "        i = gk.tid()\n"
        "        y[i] = 2.0 * x[i]\n"
        "    return double\n"
        "x = gk.array(np.arange(3.0), dtype=gk.float64)\n"
        "y = gk.zeros(3, dtype=gk.float64)\n"
        "gk.launch(build(), 3, inputs=[x], outputs=[y])\n"
        "print(y.numpy().tolist())\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path / "pkg")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0.0, 2.0, 4.0]"
