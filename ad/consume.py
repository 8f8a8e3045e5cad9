"""The "consume" pass: reverse mode in which every overwriting store resets the gradient it read.

Reverse mode leaves out the reset after the adjoint of a store into an array the kernel writes once per
thread and never reads (ad/reverse_facts.py `sole_writes`; `attrs["consumable"]` lists those parameters): within
one launch nothing else can take that gradient, the array keeps the gradient that reached it (as in Taichi)
and the adjoint saves a store per element. On a tape where an earlier launch (or host write) also wrote or
read that memory, the value this launch overwrote must get none of it: the tape launches this variant
instead (runtime/tape/tape_consume.py decides where).
"""

from __future__ import annotations

from ..core.ir import Function
from .reverse import adjoint_function


def consuming_adjoint(fwd: Function) -> Function:
    """The adjoint of lowered kernel `fwd` with a reset after every overwriting store's gradient read."""
    return adjoint_function(fwd, consume=True)
