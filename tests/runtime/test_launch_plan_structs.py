"""Pre-bound launches of kernels with struct parameters (runtime/launch/plan.py: a geometry id binds a
32-field handle): a repeated launch skips binding, yet every field is read again, so a scalar field set in
place, an array field or nested struct replaced, a refit mesh, a mesh given new points, another mesh's id
and a freed mesh's id all act as on the general path (values against float64 NumPy and brute force, on
every device); double-buffered struct arguments, taped launches' gradients, no array kept alive; NumPy
scalars of a parameter's own type bind as they are, others are still checked."""

# (no `from __future__ import annotations`: Warp reads the kernels' annotations from their closures)

import gc
import weakref

import numpy as np
import pytest

import gradkit as gk
import gradkit.warp as wp
from gradkit.runtime.launch.bind import bind_args
from tests.geometry.test_mesh import closest_on_triangles, sphere


@gk.struct
class Inner:
    w: gk.array(dtype=gk.float64)
    b: gk.float64


@gk.struct
class Params:
    a: gk.array(dtype=gk.float64)
    inner: Inner
    k: gk.int32
    s: gk.float32


@gk.kernel
def apply(p: Params, x: gk.array(dtype=gk.float64), c: gk.float64, y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = p.a[i] * x[i] + p.inner.w[i] * p.inner.b + gk.float64(p.k) * gk.float64(p.s) + c


@gk.kernel
def accumulate(p: Params, x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = y[i] + p.a[i] * gk.sin(x[i]) * p.inner.b


def _expected(p, x, c):
    return (p.a.numpy() * x + p.inner.w.numpy() * float(p.inner.b) + int(p.k) * float(np.float32(p.s)) + c)


def _params(rng, n, device):
    return Params(a=gk.array(rng.normal(size=n), dtype=gk.float64, device=device),
                  inner=Inner(w=gk.array(rng.normal(size=n), dtype=gk.float64, device=device), b=0.5), k=2, s=0.25)


def test_fields_set_between_planned_launches_are_read_again(device, rng):
    n = 12
    p = _params(rng, n, device)
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device)
    y = gk.zeros(n, dtype=gk.float64, device=device)
    gk.launch(apply, n, inputs=[p, x, 1.0], outputs=[y], device=device)
    gk.launch(apply, n, inputs=[p, x, 1.0], outputs=[y], device=device)
    plan = apply._plan
    assert plan is not None and plan.structs is not None
    gk.launch(apply, n, inputs=[p, x, 1.0], outputs=[y], device=device)
    assert apply._plan is plan                  # the planned path ran (the general one plans anew)
    np.testing.assert_allclose(y.numpy(), _expected(p, x.numpy(), 1.0), rtol=1e-14)
    for step in range(8):
        c = float(rng.normal())
        p.inner.b = float(rng.normal())         # scalar fields in place, at every depth
        p.k = int(rng.integers(-5, 5))
        p.s = float(rng.normal())
        if step % 3 == 1:
            p.a = gk.array(rng.normal(size=n), dtype=gk.float64, device=device)      # an array field replaced
        if step % 3 == 2:
            p.inner = Inner(w=gk.array(rng.normal(size=n), dtype=gk.float64, device=device), b=-2.0)
        gk.launch(apply, n, inputs=[p, x, c], outputs=[y], device=device)
        np.testing.assert_allclose(y.numpy(), _expected(p, x.numpy(), c), rtol=1e-14)


def test_alternating_struct_arguments_and_errors_on_the_planned_path(device, rng):
    n = 10
    ps = [_params(rng, n, device) for _ in range(2)]
    ps[1].k = 3
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device)
    ys = [gk.zeros(n, dtype=gk.float64, device=device) for _ in range(2)]
    for step in range(7):       # double-buffered: two plans alternate, the same scalar objects in both
        j = step % 2
        gk.launch(apply, n, inputs=[ps[j], x, 0.75], outputs=[ys[j]], device=device)
        np.testing.assert_allclose(ys[j].numpy(), _expected(ps[j], x.numpy(), 0.75), rtol=1e-14)
    with pytest.raises(TypeError, match="Params"):
        gk.launch(apply, n, inputs=[x, x, 0.75], outputs=[ys[0]], device=device)
    with pytest.raises(TypeError):
        gk.launch(apply, n, inputs=[ps[0], x, "0.75"], outputs=[ys[0]], device=device)
    short = _params(rng, n - 1, device)
    with pytest.raises(IndexError):
        gk.launch(apply, n, inputs=[short, x, 0.75], outputs=[ys[0]], device=device)
    gk.launch(apply, n, inputs=[ps[0], x, 0.75], outputs=[ys[0]], device=device)
    np.testing.assert_allclose(ys[0].numpy(), _expected(ps[0], x.numpy(), 0.75), rtol=1e-14)


def test_a_struct_plan_keeps_no_array_alive(device, rng):
    n = 8
    p = _params(rng, n, device)
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device)
    y = gk.zeros(n, dtype=gk.float64, device=device)
    for _ in range(3):
        gk.launch(apply, n, inputs=[p, x, 1.0], outputs=[y], device=device)
    refs = [weakref.ref(a) for a in (p.a, p.inner.w, x, y)]
    del p, x, y
    gc.collect()
    assert all(r() is None for r in refs)


def test_taped_struct_launches_give_the_gradient(device, rng):
    n, steps = 9, 5
    p = _params(rng, n, device)
    p.a = gk.array(rng.normal(size=n), dtype=gk.float64, device=device, requires_grad=True)
    x = gk.array(rng.normal(size=n), dtype=gk.float64, device=device, requires_grad=True)
    y = gk.zeros(n, dtype=gk.float64, device=device, requires_grad=True)
    bs = rng.normal(size=steps)
    tape = gk.Tape()
    with tape:
        for b in bs:
            p.inner.b = float(b)
            gk.launch(accumulate, n, inputs=[p, x], outputs=[y], device=device)
    tape.backward(grads={y: gk.ones_like(y)})
    a, xs = p.a.numpy(), x.numpy()
    np.testing.assert_allclose(y.numpy(), bs.sum() * a * np.sin(xs), rtol=1e-12)
    np.testing.assert_allclose(p.a.grad.numpy(), bs.sum() * np.sin(xs), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), bs.sum() * a * np.cos(xs), rtol=1e-12)


@wp.kernel
def closest(mesh: wp.uint64, x: wp.array(dtype=wp.vec3), dist: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, x[i], 100.0)
    dist[i] = -1.0
    if q.result:
        dist[i] = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - x[i])


def _brute(points, tris, x):
    p = points.astype(np.float64)
    d = np.linalg.norm(closest_on_triangles(p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]], x) - x[:, None], axis=-1)
    return d.min(1)


def test_mesh_ids_on_the_planned_path_follow_refits_new_points_other_meshes_and_frees(device, rng):
    pts, tris = sphere(6, 0.1, rng)
    pts = pts.astype(np.float32)
    n = 24
    xs = rng.uniform(-1.5, 1.5, (n, 3)).astype(np.float32)
    x = wp.array(xs, dtype=wp.vec3, device=device)
    dist = wp.zeros(n, dtype=float, device=device)
    points = wp.array(pts, dtype=wp.vec3, device=device)
    mesh = wp.Mesh(points=points, indices=wp.array(tris.reshape(-1), dtype=wp.int32, device=device))

    def check(at):
        wp.launch(closest, n, inputs=[mesh_id, x, dist], device=device)
        np.testing.assert_allclose(dist.numpy(), _brute(at, tris, xs.astype(np.float64)), rtol=2e-5, atol=2e-6)

    mesh_id = mesh.id
    check(pts)
    check(pts)
    plan = closest._plan
    assert plan is not None and plan.structs is not None
    for scale in (1.3, 0.6, 0.9):           # refit: the same arrays, new bounds (and edge length, in place)
        moved = pts * np.float32(scale)
        wp.copy(points, wp.array(moved, dtype=wp.vec3, device=device))
        mesh.refit()
        check(moved)
    assert closest._plan is plan            # every launch took the plan
    fresh = (pts * np.float32(0.8) + np.float32(0.2)).astype(np.float32)
    mesh.points = wp.array(fresh, dtype=wp.vec3, device=device)     # new points: a new handle
    check(fresh)
    other_pts = (pts * np.float32(1.7)).astype(np.float32)
    other = wp.Mesh(points=wp.array(other_pts, dtype=wp.vec3, device=device),
                    indices=wp.array(tris.reshape(-1), dtype=wp.int32, device=device))
    for _ in range(2):
        mesh_id = other.id                  # another mesh's id, then back
        check(other_pts)
        mesh_id = mesh.id
        check(fresh)
    freed = mesh.id
    del mesh
    gc.collect()
    with pytest.raises(ValueError, match="no geometry object"):
        wp.launch(closest, n, inputs=[freed, x, dist], device=device)
    mesh_id = other.id
    check(other_pts)


def test_numpy_scalars_of_the_parameters_type_bind_as_they_are(device):
    params = [("f", gk.float32), ("d", gk.float64), ("i", gk.int32), ("b", gk.bool)]
    values = [np.float32(1.5), np.float64(-2.25), np.int32(-7), np.bool_(True)]
    out = bind_args("k", params, values, device)
    assert all(o is v for o, v in zip(out, values))
    out = bind_args("k", params, [np.float64(1.5), np.float32(0.5), np.int64(3), True], device)
    assert [type(o) for o in out] == [np.float32, np.float64, np.int32, np.bool_]
    assert [float(o) for o in out] == [1.5, 0.5, 3.0, 1.0]
    with pytest.raises(ValueError, match="'f'"):
        bind_args("k", params, [np.float64(1e300), *values[1:]], device)
    with pytest.raises(ValueError, match="'i'"):
        bind_args("k", params, [values[0], values[1], np.int64(2**40), values[3]], device)
    with pytest.raises(TypeError, match="'i'"):
        bind_args("k", params, [values[0], values[1], np.float32(1.0), values[3]], device)
    with pytest.raises(TypeError, match="'b'"):
        bind_args("k", params, [*values[:3], np.float32(1.0)], device)
