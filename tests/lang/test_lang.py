"""The language tier's cells: every construct × mode (forward, reverse, forward mode) × device.
A construct marked not differentiable has only its forward cell (n/a in docs/coverage.md)."""

import pytest

from .constructs import CONSTRUCTS
from .harness import CHECKS

CELLS = [pytest.param(case, mode, id=f"{case.name}-{mode}") for case in CONSTRUCTS for mode in case.modes()]


@pytest.mark.parametrize("case,mode", CELLS)
def test_cell(case, mode, device, rng):
    CHECKS[mode](case, device, rng)
