"""A linear solve on a tape is one node of the tape graph (issue 45 item 3): labelled with its method,
iteration count and residual, with edges from the right-hand side and the matrix values it reads to the
solution it writes, placed among the launches as recorded; the same in a debug bundle's `steps`.

The numbers in the label are checked against the solve's own result and a float64 NumPy residual."""

import re

import numpy as np
import pytest

import gradkit as gk
from gradkit.viz.bundle import load_bundle
from gradkit.viz.bundle_steps import plain_meta, step_label


@gk.kernel
def square_sum(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    gk.atomic_add(out, 0, x[i] * x[i])


def _spd(rng, n: int) -> np.ndarray:
    """A random sparse symmetric positive definite matrix (a diagonally dominant band)."""
    a = np.zeros((n, n))
    for k in range(n - 1):
        w = rng.uniform(0.2, 1.0)
        a[k, k + 1] = a[k + 1, k] = -w
    a += np.diag(np.abs(a).sum(1) + rng.uniform(0.5, 1.5, n))
    return a


def _problem(rng, device, n: int = 12):
    dense = _spd(rng, n)
    rows, cols = np.nonzero(dense)
    A = gk.sparse.bsr_from_triplets(n, n, rows, cols, dense[rows, cols], device=device)
    A.values.requires_grad = True
    b = gk.array(rng.normal(size=n), device=device, requires_grad=True, label="rhs")
    x = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True, label="solution")
    return dense, A, b, x


def _edges(dot: str) -> set:
    return set(re.findall(r"^\s*(\S+) -> (\S+?);", dot, re.M))


@pytest.mark.parametrize("method", ["cg", "bicgstab", "gmres"])
def test_solve_is_one_node_with_iterations_residual_and_edges(device, rng, method):
    dense, A, b, x = _problem(rng, device)
    out = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        iters, res = getattr(gk.linalg, method)(A, b, x, tol=1e-10)
        gk.launch(square_sum, x.shape[0], inputs=[x], outputs=[out], device=device)
    true_res = np.linalg.norm(b.numpy() - dense @ x.numpy())              # float64 NumPy
    assert iters > 0 and res <= 1e-10 * np.linalg.norm(b.numpy()) * 1.01
    assert true_res == pytest.approx(res, rel=0.5, abs=1e-12)
    dot = tape.visualize()
    nodes = re.findall(r'^\s*(f\d+) \[label="([^"]*)"', dot, re.M)
    assert nodes == [("f0", f"{method}: {iters} iterations, residual {res:.3g}")]
    a = lambda arr: f"a{id(arr)}"
    edges = _edges(dot)
    assert {(a(b), "f0"), (a(A.values), "f0"), ("f0", a(x))} <= edges           # reads in, writes out
    assert (a(x), "l0:p0") in edges and ("l0:p1", a(out)) in edges             # then the launch reading x
    assert not any("f0" in e and a(out) in e for e in edges)
    assert dot.index("f0 [") < dot.index("l0 [")                               # drawn in tape order


def test_repeated_solves_fold_with_their_launches(device, rng):
    """Three time steps of (solve, launch): folded, one solve node and one launch box remain, marked x3."""
    dense, A, b, x = _problem(rng, device, n=6)
    out = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True)
    tape = gk.Tape()
    counts = []
    with tape:
        for _ in range(3):
            x = gk.zeros(6, dtype=gk.float64, device=device, requires_grad=True)
            counts.append(gk.linalg.cg(A, b, x, tol=1e-10)[0])
            gk.launch(square_sum, 6, inputs=[x], outputs=[out], device=device)
    plain = tape.visualize()
    assert len(re.findall(r"^\s*f\d+ \[", plain, re.M)) == 3
    assert [int(n) for n in re.findall(r"cg: (\d+) iterations", plain)] == counts
    folded = tape.visualize(simplify_graph=True)
    assert len(re.findall(r"^\s*f\d+ \[", folded, re.M)) == 1
    assert "repeated x3" in folded
    assert re.search(r"^\s*l\d+ \[shape=plaintext", folded, re.M)


def test_bundle_keeps_the_step_and_the_arrays_it_uses(device, rng, tmp_path):
    dense, A, b, x = _problem(rng, device)
    out = gk.zeros(1, dtype=gk.float64, device=device, requires_grad=True, label="loss")
    tape = gk.Tape()
    with tape:
        gk.launch(square_sum, x.shape[0], inputs=[b], outputs=[out], device=device)
        iters, res = gk.linalg.cg(A, b, x, tol=1e-10)
        gk.launch(square_sum, x.shape[0], inputs=[x], outputs=[out], device=device)
    tape.backward(loss=out)
    tape.save(tmp_path / "solve")
    bundle = load_bundle(tmp_path / "solve")
    (step,) = bundle.steps
    ids = {a["label"]: a["id"] for a in bundle.manifest["arrays"]}
    assert step["position"] == 1 and step["kind"] == "func"                   # between launch 0 and 1
    assert step["reads"] == [ids["rhs"], f"a{id(A.values)}"] and step["writes"] == [ids["solution"]]
    assert step["meta"]["iterations"] == iters and step["meta"]["residual"] == res
    assert step_label(step) == f"cg: {iters} iterations, residual {res:.3g}"
    # the gradient that reached b through the solve is stored: d loss / d b = 2 b + A^-T 2 x (float64)
    expect = 2 * b.numpy() + np.linalg.solve(dense.T, 2 * np.linalg.solve(dense, b.numpy()))
    np.testing.assert_allclose(bundle.grad(ids["rhs"]), expect, rtol=1e-6)
    assert "cg: " in bundle.manifest["graph"] and "f0 -> a" in bundle.manifest["graph"]


def test_meta_is_kept_as_plain_json_scalars():
    meta = plain_meta({"iterations": np.int64(7), "residual": np.float32(0.5), "ok": True, "note": None,
                       "shape": (3, 4), "bad key": 1, 5: "x", "method": "cg" * 600})
    assert meta == {"iterations": 7, "residual": 0.5, "ok": True, "note": None, "shape": "(3, 4)",
                    "method": ("cg" * 600)[:1000]}
    assert all(type(v) in (int, float, bool, str, type(None)) for v in meta.values())
