"""Every construct of the language coverage table × mode (forward, reverse through gk.Tape, forward mode)
on the device: outputs against float64 NumPy references, derivatives against central differences. A mode
marked `refuses` must fail with its documented, clear error instead."""

import pytest

import gradkit as gk
from gradkit.conformance.lang.constructs import CONSTRUCTS
from gradkit.conformance.lang.harness import CHECKS

CELLS = [pytest.param(case, mode, id=f"{case.name}-{mode}") for case in CONSTRUCTS for mode in case.modes()]


@pytest.mark.parametrize("case,mode", CELLS)
def test_cell(case, mode, device, rng):
    refusal = (case.refuses or {}).get(mode)
    if refusal is None:
        CHECKS[mode](case, device, rng)
        return
    with pytest.raises((gk.CompileError, gk.GradientRuleError), match=refusal):    # documented, said clearly
        CHECKS[mode](case, device, rng)
