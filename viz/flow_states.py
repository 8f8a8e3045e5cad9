"""What became of an array's gradient in a backward pass: one vocabulary, with colours and explanations, for
`tape.visualize(show_gradients=True)`, the debugger's tape graph and its gradient-flow view.

An intermediate array (one a recorded launch wrote) has its gradient read and cleared by the adjoint of the
launch that wrote it: after backward it holds zeros, which says nothing about the flow. Its state is taken
from the gradient that arrived before it was consumed when that is known (snapshots), else it is just
"consumed"; "zero" is kept for gradients that were truly zero.
"""

from __future__ import annotations

import math

OK = "ok"
CONSUMED = "consumed"
ZERO = "zero"
VANISHING = "vanishing"
EXPLODING = "exploding"
NONFINITE = "NaN/Inf"
NOT_REACHED = "not reached"
CUT_OFF = "cut off"
NOT_DIFFERENTIABLE = "not differentiable"
NO_BACKWARD = "no backward"
NOT_STORED = "not stored"
UNUSED = "unused output"
PARTIAL = "partial"
CONVERGING = "converging"

COLORS = {OK: "#4c78a8", CONSUMED: "#72b7b2", ZERO: "#f2b701", VANISHING: "#e45756", EXPLODING: "#b279a2",
          NONFINITE: "#d62728", NOT_REACHED: "#9d755d", CUT_OFF: "#ff9da6", NOT_DIFFERENTIABLE: "#bab0ac",
          NO_BACKWARD: "#bab0ac", NOT_STORED: "#bab0ac", UNUSED: "#d8d8d8", PARTIAL: "#c7b9a8",
          CONVERGING: "#88c77b"}
# graph node fills (lighter, so labels stay readable)
FILLS = {OK: "#cfe8ff", CONSUMED: "#d4efec", ZERO: "#ffe9a8", VANISHING: "#f8c9c9", EXPLODING: "#ead7f0",
         NONFINITE: "#ff6b6b", NOT_REACHED: "#e8dccf", CUT_OFF: "#ffd6d6", NOT_DIFFERENTIABLE: "#eeeeee",
         NO_BACKWARD: "#eeeeee", NOT_STORED: "#eeeeee", UNUSED: "#f4f4f4", PARTIAL: "#efe8df",
         CONVERGING: "#dcf0d5"}
ALARMS = (NONFINITE, EXPLODING, VANISHING, ZERO)      # states worth a red flag

EXPLAIN = {
    OK: "a finite, non-zero gradient reached this array",
    CONSUMED: "an intermediate: the gradient that reached it was passed on to the arrays it was computed from "
              "and cleared, as backward does (the norm shown is the one that arrived, when snapshots tell it)",
    ZERO: "the gradient is exactly zero: the loss does not depend on this array along any recorded path "
          "(or a branch/clamp blocks it)",
    VANISHING: "the gradient norm is below the vanishing threshold: updates through it are negligible",
    EXPLODING: "the gradient norm is above the exploding threshold",
    NONFINITE: "the gradient holds NaN or Inf entries (see NaN/Inf origin)",
    NOT_REACHED: "backward stopped (an error, e.g. a NaN check) before it reached the launches that use this "
                 "array: its gradient was never computed",
    CUT_OFF: "created without requires_grad=True: no gradient is computed for it and none flows back "
             "through it",
    NOT_DIFFERENTIABLE: "an integer or boolean array: it has no gradient",
    NO_BACKWARD: "no backward pass ran on this tape",
    NOT_STORED: "the gradient was over the snapshot size cap and was not stored",
    UNUSED: "written by a launch, but no later launch reads it and no seed was set on it: no gradient can "
            "reach it (expected for an output the loss does not use)",
    PARTIAL: "backward stopped before every gradient arrived: a zero or small gradient here may be only the "
             "part that arrived, so no vanishing or zero alarm is raised",
    CONVERGING: "the gradient is below the vanishing threshold now, but it was above it earlier in this run and "
                "shrank as the loss fell: the training is converging, not losing its gradient",
}


def classify(*, differentiable: bool, requires_grad: bool, ran_backward: bool, reached: bool = True,
             consumed: bool = False, norm: float | None = None, nonfinite: int = 0,
             vanishing: float = 1e-8, exploding: float = 1e6, unused: bool = False, partial: bool = False) -> str:
    """The state of one array's gradient. `norm` is the gradient that arrived (for a consumed intermediate,
    the one before it was cleared; None when unknown); `nonfinite` counts its NaN/Inf entries; `unused` marks
    an output no later launch reads (a zero gradient there is expected, not an alarm); `partial`: backward
    stopped midway, so a zero or vanishing norm is no evidence (PARTIAL instead of an alarm)."""
    if not differentiable:
        return NOT_DIFFERENTIABLE
    if not requires_grad:
        return CUT_OFF
    if not ran_backward:
        return NO_BACKWARD
    if not reached:
        return NOT_REACHED
    if nonfinite or (norm is not None and not math.isfinite(norm)):
        return NONFINITE
    if norm is None:
        return CONSUMED if consumed else NOT_STORED
    if partial and norm < vanishing:
        return PARTIAL
    if norm == 0.0:
        return UNUSED if unused else ZERO
    if norm < vanishing:
        return VANISHING
    if norm > exploding:
        return EXPLODING
    return CONSUMED if consumed else OK


def differentiable_dtype(name: str) -> bool:
    """A float scalar, vector, matrix, quaternion or transform dtype name (what can carry a gradient)."""
    return not name.startswith(("int", "uint", "bool")) and not (name.startswith("vec") and name.endswith("i"))
