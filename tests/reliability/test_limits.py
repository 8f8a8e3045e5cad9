"""Hostile-input limits (issue 18, first part): oversized grids and invalid settings get named errors
before anything runs; nothing is changed by a refused call."""

import pytest

import gradkit as gk

from tests.reliability.hostile import run_child


GRIDS = [2**31, 2**31 + 4, 2**40, (2**16, 2**16), (65536, 32768, 2)]

GRID_CHILD = """
    import sys
    import gradkit as gk

    @gk.kernel
    def guarded(x: gk.array(dtype=float), n: int):
        i = gk.tid()
        if i < n:
            x[i] = 1.0

    device = sys.argv[1]
    for dim in eval(sys.argv[2]):          # the test's own list of grids
        x = gk.zeros(4, device=device)
        try:
            gk.launch(guarded, dim, inputs=[x, 4], device=device)
            print("ran", dim)
        except ValueError as exc:
            print(type(exc).__name__, "2**31 - 1" in str(exc), x.numpy().tolist())
"""


def test_grids_past_32_bit_thread_ids_are_refused(device, tmp_path):
    """Each grid gets a ValueError naming the limit before anything runs (2**40 used to hang, 2**31 + 4 to
    write at negative indices): in a child process, so a regression cannot hang the session."""
    proc = run_child(GRID_CHILD, tmp_path, device, repr(GRIDS), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["ValueError True [0.0, 0.0, 0.0, 0.0]"] * len(GRIDS)


def test_largest_1d_grid_is_accepted_by_validation():
    assert gk.runtime.launch.launch.normalize_dim(2**31 - 1) == (2**31 - 1,)


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
