"""Shared (core/passes/shifts.py without_exclusive_adds): reverse mode adds into adj_a[i] and adj_b[i], the
thread's own elements, as plain adds (`exclusive=True`); adjoint_shared, launched when two written arrays
share memory, makes both atomic again (the attribute goes: `atomic[kind=add, comp=0]`) and changes nothing
else, in the consuming adjoint (its resets of adj_y[i], adj_z[i] kept) and under forward mode (the *_tangent
forms) too."""
import gradkit as gk

STAGES = ("adjoint", "adjoint_shared", "adjoint_shared_tangent", "adjoint_consume_shared",
          "adjoint_consume_shared_tangent")


@gk.kernel
def product_sum(a: gk.array(dtype=float), b: gk.array(dtype=float), y: gk.array(dtype=float),
                z: gk.array(dtype=float)):
    i = gk.tid()
    y[i] = a[i] * b[i]
    z[i] = a[i] + 2.0 * b[i]
