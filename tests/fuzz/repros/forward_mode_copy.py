"""gk.copy(dst, src) and dst.assign(src) inside gk.ForwardMode do not carry the tangent: dst.dual stays zero
(or None), so a JVP through a pipeline with a host copy is lost; on a Tape the same copy is differentiated."""
import gradkit as gk


@gk.kernel
def square(x: gk.array(dtype=gk.float64), y: gk.array(dtype=gk.float64)):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def double(c: gk.array(dtype=gk.float64), z: gk.array(dtype=gk.float64)):
    i = gk.tid()
    z[i] = 2.0 * c[i]


x = gk.array([1.0, 3.0], dtype=gk.float64)
y, c, z = (gk.zeros(2, dtype=gk.float64) for _ in range(3))
with gk.ForwardMode(seeds={x: gk.array([1.0, 1.0], dtype=gk.float64)}):
    gk.launch(square, 2, inputs=[x], outputs=[y])
    gk.copy(c, y)                                  # or c.assign(y)
    gk.launch(double, 2, inputs=[c], outputs=[z])
print("y.dual", None if y.dual is None else y.dual.numpy(), "expected [2. 6.]")
print("c.dual", None if c.dual is None else c.dual.numpy(), "expected [2. 6.]")
print("z.dual", None if z.dual is None else z.dual.numpy(), "expected [4. 12.]")
