"""core/passes/shifts.py: which arrays a kernel only scatter-adds into at its thread index plus a constant."""

from __future__ import annotations

import gradkit as gk
from gradkit.core.passes.shifts import shifted_adds


@gk.kernel
def spread(x: gk.array(dtype=float), a: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(a, i + 1, x[i])
    gk.atomic_sub(a, i - 2, x[i])
    gk.atomic_add(a, i, 1.0)


@gk.kernel
def spread_and_read(x: gk.array(dtype=float), a: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(a, i + 1, x[i])
    out[i] = a[i]


@gk.kernel
def spread_by_data(x: gk.array(dtype=float), idx: gk.array(dtype=int), a: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(a, idx[i], x[i])


@gk.kernel
def counter(x: gk.array(dtype=float), a: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = gk.atomic_add(a, i + 1, x[i])         # the old value is read


def _shifts(kernel) -> dict:
    fn = kernel.lowered("forward")
    names = {p.value.id: p.name for p in fn.params}
    return {names[a]: sorted(set(s.values())) for a, s in shifted_adds(fn).items()}


def test_shifted_adds():
    assert _shifts(spread) == {"a": [(-2,), (0,), (1,)]}
    assert _shifts(spread_and_read) == {}            # also loaded: its adds must land in program order
    assert _shifts(spread_by_data) == {}             # index from data
    assert _shifts(counter) == {}                    # the old value is used
