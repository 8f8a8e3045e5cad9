"""Hostile-input limits (issue 18, first part): oversized grids and invalid settings get named errors
before anything runs; nothing is changed by a refused call."""

import numpy as np
import pytest

import gradkit as gk


@gk.kernel
def guarded(x: gk.array(dtype=float), n: int):
    i = gk.tid()
    if i < n:
        x[i] = 1.0


@pytest.mark.parametrize("dim", [2**31, 2**31 + 4, 2**40, (2**16, 2**16), (65536, 32768, 2)])
def test_grids_past_32_bit_thread_ids_are_refused(device, dim):
    x = gk.zeros(4, device=device)
    with pytest.raises(ValueError, match=r"2\*\*31 - 1"):
        gk.launch(guarded, dim, inputs=[x, 4], device=device)
    np.testing.assert_array_equal(x.numpy(), 0.0)


def test_largest_1d_grid_is_accepted_by_validation():
    assert gk.runtime.launch.normalize_dim(2**31 - 1) == (2**31 - 1,)


@pytest.mark.parametrize("name, value, error", [
    ("adjoint_stack_size", -1, ValueError), ("adjoint_stack_size", 0, ValueError),
    ("adjoint_stack_size", 2.5, TypeError), ("adjoint_stack_size", True, TypeError),
    ("snapshot_max_bytes", -5, ValueError), ("debug", "yes", TypeError), ("check_nan", 2, TypeError),
    ("no_such_setting", 1, AttributeError),
])
def test_config_settings_are_validated(name, value, error):
    before = repr(gk.config)
    with pytest.raises(error, match=name):
        setattr(gk.config, name, value)
    assert repr(gk.config) == before
