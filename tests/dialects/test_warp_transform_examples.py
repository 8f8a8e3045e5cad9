"""Warp's examples that need transforms and triangle tests besides wp.Mesh, taken from the installed warp package
at test time and run by Warp 1.19 as written and by gradkit with only the import lines changed
(tests/dialects/warp_examples.py), rendering off: core/example_mesh_intersect.py (wp.transform,
transform_point, mesh_query_aabb, intersect_tri_tri, an early `return` from a query loop) and
optim/example_diffray.py (a differentiable ray caster: structs holding a mesh id, transform_inverse /
point / vector, mesh_query_ray, a texture lookup, warp.optim.SGD on the mesh rotation).

OpenUSD is not installed: a stand-in `pxr` (the same in both runs) gives a cube and a jittered sphere for
cube.usd / sphere.usd and a smaller sphere for bunny.usd. example_diffray needs one edit besides the imports,
`rays_width / num_samples` -> `//` (gradkit's `/` of two ints is a true division; Warp's truncates).

Warp 1.19's reverse mode loses the gradient through `color = lambert * color` after the dynamic loop that
accumulates `lambert` (shown in test_warp_drops_gradients_through_a_loop_accumulated_local), so in the
example's texture mode its texture, texture-coordinate and rotation gradients are wrong; there gradkit's are
checked against central differences, and against Warp's in the normal-map mode, which has no such loop."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from gradkit.warp.examples import KNOWN_EDITS
from tests.dialects.test_warp_mesh_examples import _fake_pxr
from tests.dialects.warp_examples import close, load, quiet
from tests.geometry.test_mesh import sphere

warp = pytest.importorskip("warp")
warp.config.quiet = True
warp.init()

DIFFRAY_EDITS = KNOWN_EDITS.get("optim/example_diffray.py", ())      # none: only the import changes
OFFSET_ROT = [0.0, (math.sqrt(3) - 1) / (2.0 * math.sqrt(2.0)), 0.0, (math.sqrt(3) + 1) / (2.0 * math.sqrt(2.0))]


def _cube():
    p = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float32) * 0.5
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),
             (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    return p, np.array(faces, np.int32)


@pytest.fixture
def stand_in_assets(monkeypatch):
    rng = np.random.default_rng(7)
    sp, st = sphere(16, 0.05, rng)
    bunny = (sp * 0.5 + np.array([0.0, 0.5, 0.0])).astype(np.float32)
    prims = {"/root/cube": _cube(), "/root/sphere": (sp.astype(np.float32), st)}
    monkeypatch.setitem(sys.modules, "pxr", _fake_pxr(bunny, st.reshape(-1), prims))


def test_mesh_intersect_matches_warp(stand_in_assets):
    """1,024 random rigid transforms of the cube against the sphere: the same pairs intersect."""
    result = {}
    for gk in (False, True):
        e = load("core/example_mesh_intersect.py", gradkit=gk).Example(stage_path=None)
        quiet(e.step)
        result[gk] = e.array_result.numpy()
    assert 50 < result[False].sum() < 1000            # both outcomes occur
    np.testing.assert_array_equal(result[True], result[False])


def _diffray(gk: bool, mode=None, height=24):
    """The example's target image and its offset-rotation Example; one taped forward and backward as its
    step() records it; then two optimiser steps. Returns the example and what was measured."""
    mod = load("optim/example_diffray.py", gradkit=gk, edits=DIFFRAY_EDITS if gk else ())
    ref = mod.Example(height=height, train_iters=2)
    if mode is not None:
        ref.render_mode = mode
    ref.ray_cast()
    e = mod.Example(height=height, train_iters=2, rot_array=OFFSET_ROT)
    if mode is not None:
        e.render_mode = mode
    mod.wp.copy(e.target_pixels, ref.pixels)
    e.tape = mod.wp.Tape()
    with e.tape:
        e.forward()
    e.tape.backward(e.loss)
    rm = e.render_mesh
    got = dict(target=ref.pixels.numpy().copy(), pixels=e.pixels.numpy().copy(), loss=e.loss.numpy().copy(),
               rot=rm.rot.grad.numpy().copy(), pos=rm.pos.grad.numpy().copy(),
               normals=rm.vertex_normals.grad.numpy().copy(), verts=rm.vertices.grad.numpy().copy(),
               texture=e.texture.grad.numpy().copy(), intensities=e.lights.intensities.grad.numpy().copy())
    e.tape.zero()
    e.loss.zero_()
    for _ in range(2):
        quiet(e.step)
    got["rot_after"] = rm.rot.numpy().copy()
    return e, got


def test_diffray_matches_warp_in_results_and_gradients(stand_in_assets):
    """Texture mode as written: images, loss and the SGD steps agree with Warp. Normal-map mode (set on the
    Example from outside): the rotation, translation and vertex-normal gradients agree with Warp's; Warp has
    no gradient for the mesh points through a ray query, gradkit does (docs/porting/warp.md)."""
    wp_e, want = _diffray(False)
    _, got = _diffray(True)
    close(got["target"], want["target"], atol=1e-5)
    close(got["pixels"], want["pixels"], atol=1e-5)
    close(got["loss"], want["loss"], rtol=1e-4)
    assert want["loss"][0] > 0.1
    close(got["rot_after"], want["rot_after"], rtol=1e-5, atol=1e-6)
    _, want = _diffray(False, mode=2)
    _, got = _diffray(True, mode=2)
    close(got["pixels"], want["pixels"], atol=1e-5)
    for k in ("rot", "pos", "normals"):
        assert np.abs(want[k]).max() > 1e-3, k
        close(got[k], want[k], rtol=2e-3, atol=2e-4)
    assert not np.any(want["verts"]) and np.any(got["verts"])


def test_diffray_texture_mode_gradients_against_central_differences(stand_in_assets):
    """Where Warp's texture-mode gradients are wrong (texture: all zero), gradkit's match central differences
    of the loss (linear in the texture and the light intensities away from the clamps)."""
    _, want = _diffray(False)
    e, got = _diffray(True)
    assert not np.any(want["texture"])
    e.render_mesh.rot.assign(np.array([OFFSET_ROT], np.float32))

    def loss_with(arr, flat_index, h):
        a = arr.numpy().copy()
        a.reshape(-1)[flat_index] += h
        arr.assign(a)
        e.loss.zero_()
        e.forward()
        a.reshape(-1)[flat_index] -= h
        arr.assign(a)
        return float(e.loss.numpy()[0])

    tex = got["texture"].reshape(-1)
    for arr, g, picks in ((e.texture, tex, np.argsort(-np.abs(tex))[:3]),
                          (e.lights.intensities, got["intensities"], [0, 1])):
        for k in picks:
            h = 1e-2
            fd = (loss_with(arr, k, h) - loss_with(arr, k, -h)) / (2 * h)
            assert abs(fd) > 1e-3
            np.testing.assert_allclose(g[k], fd, rtol=2e-2, atol=1e-4)


def test_warp_drops_gradients_through_a_loop_accumulated_local(device):
    """The pattern in example_diffray's draw_kernel, alone: `lambert` summed in a dynamic loop, then
    `color = lambert * color`. d out / d texture is lambert (3.0 here) per texel read; Warp 1.19 gives 0,
    gradkit the analytic value on every device."""
    import gradkit.warp as gwp

    def run(wp, device):
        @wp.kernel
        def k(texture: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3), n: int):
            i = wp.tid()
            color = texture[i]
            lambert = float(0.0)
            for j in range(n):
                lambert = lambert + 1.5
            color = lambert * color
            out[i] = color

        tex = wp.array(np.random.default_rng(0).random((4, 3)).astype(np.float32), dtype=wp.vec3,
                       device=device, requires_grad=True)
        out = wp.zeros(4, dtype=wp.vec3, device=device, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(k, 4, inputs=[tex, out, 2], device=device)
        tape.backward(grads={out: wp.array(np.ones((4, 3), np.float32), dtype=wp.vec3, device=device)})
        return tex.grad.numpy()

    assert not np.any(run(warp, "cpu"))
    np.testing.assert_allclose(run(gwp, device), 3.0, rtol=1e-6)
