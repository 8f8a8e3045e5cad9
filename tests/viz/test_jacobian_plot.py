"""`gk.autograd.jacobian_plot`: one image per (output, input) pair holding exactly the Jacobian's values,
unevaluated (NaN) entries masked, names from the kernel or function, and the options Warp documents."""

import numpy as np
import pytest

import gradkit as gk

pytest.importorskip("matplotlib", reason="jacobian_plot needs matplotlib: pip install 'gradkit[plot]'")

F64 = gk.float64


@gk.kernel
def affine(x: gk.array(dtype=F64), w: gk.array(dtype=F64), y: gk.array(dtype=F64), z: gk.array(dtype=F64)):
    i = gk.tid()
    y[i] = w[i] * x[i] - x[(i + 1) % 4]
    z[i] = x[i] * x[i]


def _arrays(device, rng):
    x = gk.array(rng.normal(size=4), dtype=F64, device=device, requires_grad=True)
    w = gk.array(rng.normal(size=4), dtype=F64, device=device, requires_grad=True)
    y = gk.zeros(4, dtype=F64, device=device, requires_grad=True)
    z = gk.zeros(4, dtype=F64, device=device, requires_grad=True)
    return x, w, y, z


def _image(ax):
    return ax.images[0].get_array()


def test_one_image_per_pair_with_the_values(device, rng):
    x, w, y, z = _arrays(device, rng)
    jac = gk.autograd.jacobian(affine, 4, [x, w], [y, z], max_outputs_per_var=3, device=device)
    fig = gk.autograd.jacobian_plot(jac, affine, inputs=[x, w], show_plot=False, title="affine")
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 4                                   # 2 outputs x 2 inputs
    titles = {ax.get_title(): ax for ax in drawn}
    assert set(titles) == {"d y / d x", "d y / d w", "d z / d x", "d z / d w"}
    for (o, i), name in [((0, 0), "d y / d x"), ((0, 1), "d y / d w"), ((1, 0), "d z / d x"), ((1, 1), "d z / d w")]:
        image = _image(titles[name])
        np.testing.assert_array_equal(np.ma.getmaskarray(image), np.isnan(jac[(o, i)]))
        np.testing.assert_allclose(image.filled(0.0), np.nan_to_num(jac[(o, i)]))
        assert np.ma.getmaskarray(image)[3].all() and not np.ma.getmaskarray(image)[:3].any()
    assert fig._suptitle.get_text() == "affine"
    # one shared colour scale, symmetric about zero, spanning the largest magnitude
    top = np.nanmax(np.abs(np.concatenate([m.ravel() for m in jac.values()])))
    for ax in drawn:
        assert ax.images[0].norm.vmin == pytest.approx(-top) and ax.images[0].norm.vmax == pytest.approx(top)


def test_options_and_saving(tmp_path, device, rng):
    x, w, y, z = _arrays(device, rng)
    jac = gk.autograd.jacobian_fd(affine, 4, [x, w], [y, z], input_output_mask=[("x", "z")], device=device)
    path = tmp_path / "jac.png"
    fig = gk.autograd.jacobian_plot(jac, affine, inputs=[x, w], show_plot=False, scale_colors_per_submatrix=True,
                                    log_scale=True, colormap="viridis", filename=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = [ax for ax in fig.axes if ax.images]
    assert ax.get_title() == "d z / d x"
    top = np.abs(jac[(1, 0)]).max()
    assert type(ax.images[0].norm).__name__ == "SymLogNorm" and ax.images[0].norm.vmax == pytest.approx(top)
    assert ax.images[0].cmap.name.startswith("viridis")
    assert len(fig.axes) == 2                                # the image and its own colour bar


def test_plot_jacobians_flag_and_function_names(device, rng, monkeypatch):
    from matplotlib import pyplot
    monkeypatch.setattr(pyplot, "show", lambda *a, **k: None)
    x, w, y, z = _arrays(device, rng)

    def residual(weights, points):
        out = gk.zeros(4, dtype=F64, device=points.device, requires_grad=True)
        sq = gk.zeros(4, dtype=F64, device=points.device, requires_grad=True)
        gk.launch(affine, 4, inputs=[points, weights], outputs=[out, sq], device=points.device)
        return out

    before = len(pyplot.get_fignums())
    jac = gk.autograd.jacobian(residual, inputs=[w, x], plot_jacobians=True, device=device)
    fig = pyplot.figure(pyplot.get_fignums()[-1])
    assert len(pyplot.get_fignums()) == before + 1
    assert {ax.get_title() for ax in fig.axes if ax.images} == {"d output 0 / d weights", "d output 0 / d points"}
    np.testing.assert_allclose(jac[(0, 0)], np.diag(x.numpy()))
    pyplot.close(fig)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="non-empty dict"):
        gk.autograd.jacobian_plot({}, show_plot=False)
    with pytest.raises(ValueError, match=r"pair \(0, 0\) must be a matrix"):
        gk.autograd.jacobian_plot({(0, 0): np.zeros(3)}, show_plot=False)
