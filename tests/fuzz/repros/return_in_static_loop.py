"""`return` inside a `gk.static(...)` (unrolled) loop does not end the function or the thread: the later
unrolled trips run too. A @gk.func returns the last trip's value (2.0 instead of 0.0; the same over a
module-level tuple, gk.static(OFFS)); a kernel keeps accumulating (3.0 instead of 1.0). The same when
`@gk.kernel(max_unroll=8)` unrolls a plain `range(3)` loop that returns (7.0 instead of 1.0): unrolling
skips loops with break/continue but not with return. Every device."""
import gradkit as gk


@gk.func
def first(a: gk.float64) -> gk.float64:
    for k in gk.static(range(3)):
        return a + gk.float64(k)
    return a - 1.0


@gk.kernel
def in_func(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    out[i] = first(x[i])


@gk.kernel
def in_kernel(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    for j in gk.static(range(3)):
        out[i] += x[i]
        if x[i] > 0.0:
            return


@gk.kernel(max_unroll=8)
def unrolled(x: gk.array(dtype=gk.float64), out: gk.array(dtype=gk.float64)):
    for j in range(3):
        out[0] += x[j]
        if x[j] > 0.5:
            return


x = gk.array([0.0], dtype=gk.float64)
out = gk.zeros(1, dtype=gk.float64)
gk.launch(in_func, 1, inputs=[x], outputs=[out])
print("func:  ", out.numpy(), "expected [0.]")
x = gk.array([1.0], dtype=gk.float64)
out = gk.zeros(1, dtype=gk.float64)
gk.launch(in_kernel, 1, inputs=[x], outputs=[out])
print("kernel:", out.numpy(), "expected [1.]")
x = gk.array([1.0, 2.0, 4.0], dtype=gk.float64)
out = gk.zeros(1, dtype=gk.float64)
gk.launch(unrolled, 1, inputs=[x], outputs=[out])
print("max_unroll:", out.numpy(), "expected [1.]")
