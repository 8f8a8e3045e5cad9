"""gk.length / gk.normalize of an all-constant vector: constant folding passes the `subgrad` attribute to
NumPy's sqrt. TypeError (not a gk.GradkitError) at the first launch, every device."""
import gradkit as gk


@gk.kernel
def k(out: gk.array(dtype=gk.float64)):
    out[0] = gk.length(gk.vec2d(3.0, 4.0))


out = gk.zeros(1, dtype=gk.float64)
gk.launch(k, 1, outputs=[out])     # TypeError: sqrt() got an unexpected keyword argument 'subgrad'
print(out.numpy(), "expected [5.]")
