"""Per-launch snapshots in debug bundles (values before/after each forward launch, gradients before/after
each adjoint launch), the size cap, and `gk.viz.Capture` keeping the NaN/Inf origin of a script."""

import io
import json
import zipfile

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def square_into(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[i] * x[i] + 1.0


@gk.kernel
def scale_in_place_free(y: gk.array(dtype=float), s: float, z: gk.array(dtype=float)):
    i = gk.tid()
    z[i] = s * y[i]


@gk.kernel
def sum_into(z: gk.array(dtype=float), loss: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(loss, 0, z[i])


@gk.kernel
def sqrt_into(x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = gk.sqrt(x[i])


def _record(device, rng, n=16, snapshots=True):
    x0 = rng.standard_normal(n).astype(np.float32)
    x = gk.array(x0, device=device, requires_grad=True, label="x")
    y = gk.zeros(n, device=device, requires_grad=True, label="y")
    z = gk.array(rng.standard_normal(n).astype(np.float32), device=device, requires_grad=True, label="z")
    loss = gk.zeros(1, device=device, requires_grad=True, label="loss")
    tape = gk.Tape(snapshots=snapshots)
    with tape:
        gk.launch(square_into, n, inputs=[x], outputs=[y], device=device)
        gk.launch(scale_in_place_free, n, inputs=[y, 3.0], outputs=[z], device=device)
        gk.launch(sum_into, n, inputs=[z], outputs=[loss], device=device)
    tape.backward(loss=loss)
    return tape, x0, (x, y, z, loss)


def test_stats_match_numpy(rng):
    from gradkit.runtime.tape.snapshots import array_stats
    data = rng.standard_normal(1000)
    data[[3, 7]] = [np.nan, np.inf]
    good = np.delete(data, [3, 7])
    stats = array_stats(data)
    assert stats["nonfinite"] == 2 and stats["size"] == 1000
    np.testing.assert_allclose([stats["min"], stats["max"], stats["mean"], stats["norm"]],
                               [good.min(), good.max(), good.mean(), np.linalg.norm(good)], rtol=1e-12)


def test_snapshots_before_after_and_gradients(tmp_path, device, rng):
    tape, x0, (x, y, z, loss) = _record(device, rng)
    z_before = tape.launches[1].snapshots.before["z"].data
    tape.save(tmp_path / "b.zip")
    bundle = gk.viz.load_bundle(tmp_path / "b.zip")
    first, second = bundle.launches[0], bundle.launches[1]
    y_id, z_id = first["arrays"][1], second["arrays"][2]
    np.testing.assert_array_equal(bundle.snapshot(0, y_id, "before"), np.zeros(16, np.float32))
    expected_y = x0.astype(np.float64) ** 2 + 1.0
    np.testing.assert_allclose(bundle.snapshot(0, y_id, "after"), expected_y, rtol=1e-6)
    np.testing.assert_array_equal(bundle.snapshot(1, z_id, "before"), z_before)   # the random initial z
    np.testing.assert_allclose(bundle.snapshot(1, z_id, "after"), 3.0 * expected_y, rtol=1e-6)
    assert second["stats"]["after"]["z"]["max"] == pytest.approx(3.0 * expected_y.max(), rel=1e-6)
    # backward: adjoints run in reverse order; the last one (of square_into) leaves dloss/dx = 6x
    assert [b["kernel"] for b in bundle.backward] == ["sum_into", "scale_in_place_free", "square_into"]
    last = bundle.backward[-1]
    assert last["record"] == 0
    x_id = first["arrays"][0]
    np.testing.assert_array_equal(bundle.grad_snapshot(2, x_id, "before"), np.zeros(16, np.float32))
    np.testing.assert_allclose(bundle.grad_snapshot(2, x_id, "after"), 6.0 * x0.astype(np.float64), rtol=1e-5)
    assert bundle.manifest["grad_norms"][x_id] == pytest.approx(np.linalg.norm(6.0 * x0), rel=1e-5)
    assert bundle.manifest["loss_history"] == [pytest.approx(float(np.sum(3.0 * expected_y)), rel=1e-5)]
    assert "fillcolor" in bundle.manifest["graph_gradients"]


def test_no_snapshots_by_default(tmp_path, device, rng):
    tape, *_ = _record(device, rng, snapshots=None)
    assert all(r.snapshots is None for r in tape.launches) and tape.backward_records == []
    tape.save(tmp_path / "b")
    bundle = gk.viz.load_bundle(tmp_path / "b")
    assert "stats" not in bundle.launches[0] and bundle.backward == []


def test_cap_keeps_statistics_only(tmp_path, device, rng):
    tape, *_ = _record(device, rng, n=64)
    from gradkit.viz.bundle import save_bundle
    save_bundle(tape, tmp_path / "b", max_bytes=32)     # 64 float32 = 256 bytes: over the cap
    bundle = gk.viz.load_bundle(tmp_path / "b")
    y_id = bundle.launches[0]["arrays"][1]
    assert bundle.snapshot(0, y_id, "after") is None
    assert bundle.launches[0]["stats"]["after"]["y"]["size"] == 64
    assert any("statistics only" in note for note in bundle.manifest["notes"])


def test_snapshot_key_for_missing_launch_is_rejected(tmp_path, device, rng):
    tape, *_ = _record(device, rng)
    tape.save(tmp_path / "b.zip")
    with zipfile.ZipFile(tmp_path / "b.zip") as z:
        manifest = json.loads(z.read("manifest.json"))
    buf = io.BytesIO()
    np.savez(buf, **{"after/7/" + manifest["arrays"][0]["id"]: np.zeros(16, np.float32)})
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("arrays.npz", buf.getvalue())
    with pytest.raises(gk.viz.bundle.BundleError, match="no such launch"):
        gk.viz.load_bundle(tmp_path / "bad.zip")


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_capture_keeps_nan_origin(tmp_path, device, direction):
    values = [1.0, 2.0, -1.0] if direction == "forward" else [1.0, 2.0, 0.0]
    before = gk.config.check_nan, gk.config.snapshot_launches
    with gk.viz.Capture() as cap:
        x = gk.array(np.array(values, np.float32), device=device, requires_grad=True, label="x")
        y = gk.zeros(3, device=device, requires_grad=True, label="y")
        loss = gk.zeros(1, device=device, requires_grad=True, label="loss")
        with gk.Tape() as tape:
            gk.launch(sqrt_into, 3, inputs=[x], outputs=[y], device=device)
            gk.launch(sum_into, 3, inputs=[y], outputs=[loss], device=device)
        tape.backward(loss=loss)
        raise AssertionError("the NaN check should have stopped the block")
    assert (gk.config.check_nan, gk.config.snapshot_launches) == before     # settings restored
    assert isinstance(cap.error, gk.NaNError)
    bundle = gk.viz.load_bundle(cap.save(tmp_path / "nan"))
    nan = bundle.nan
    assert nan["direction"] == direction and nan["index"] == [2]
    assert nan["kernel"] == "sqrt_into"
    assert nan["array"] == ("y" if direction == "forward" else "x.grad")
    assert nan["line"] == sqrt_into.pyfunc.__code__.co_firstlineno + 3     # y[i] = gk.sqrt(x[i])
    if direction == "forward":
        assert nan["launch"] == 0 and np.isnan(nan["value"])
        assert bundle.launches[0]["stats"]["after"]["y"]["nonfinite"] == 1
    else:
        assert bundle.backward[nan["launch"]]["kernel"] == "sqrt_into" and np.isinf(nan["value"])
        assert bundle.backward[nan["launch"]]["stats"]["after"]["x"]["nonfinite"] == 1


def test_capture_without_launches_says_so(tmp_path):
    with gk.viz.Capture() as cap:
        pass
    with pytest.raises(ValueError, match="recorded no launches"):
        cap.save(tmp_path / "b")


@gk.kernel
def gather_into(idx: gk.array(dtype=int), x: gk.array(dtype=float), y: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = x[idx[i]]


def test_capture_checks_every_index(device, rng):
    """`gradkit debug` runs scripts with per-access bounds checks (gk.config.debug) on: a data-dependent
    index outside its array is an IndexError naming it, not a value read from outside; settings restored."""
    x_np = rng.uniform(-1, 1, 4).astype(np.float32)
    x, y = gk.array(x_np, device=device), gk.zeros(4, device=device)
    before = gk.config.debug
    with pytest.raises(IndexError, match="index 7 out of range for axis 0 of array 'x' with extent 4"):
        with gk.viz.Capture():
            assert gk.config.debug
            gk.launch(gather_into, 4, inputs=[gk.array(np.array([0, 7, 1, 2], np.int32), device=device), x, y],
                      device=device)
    assert gk.config.debug == before
    with gk.viz.Capture(bounds_checks=False):                   # off when asked: as the script set it
        assert gk.config.debug == before
