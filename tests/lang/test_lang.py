"""The language tier's cells: every construct × mode (forward, reverse, forward mode) × device.
A construct marked not differentiable has only its forward cell (n/a in docs/coverage.md); a cell in
`refuses` checks that the mode fails with the documented, clear CompileError or GradientRuleError
("refused" in the table)."""

import pytest

import gradkit as gk

from .constructs import CONSTRUCTS
from .harness import CHECKS

CELLS = [pytest.param(case, mode, id=f"{case.name}-{mode}") for case in CONSTRUCTS for mode in case.modes()]


@pytest.mark.parametrize("case,mode", CELLS)
def test_cell(case, mode, device, rng):
    refusal = (case.refuses or {}).get(mode)
    if refusal is None:
        CHECKS[mode](case, device, rng)
        return
    with pytest.raises((gk.CompileError, gk.GradientRuleError), match=refusal):    # documented, said clearly
        CHECKS[mode](case, device, rng)
