"""Frontend: whole-vector loads/stores, a component read and a component write (`comp`)."""
import gradkit as gk

STAGES = ("frontend", "scalarize")


@gk.kernel
def vec_access(p: gk.array(dtype=gk.vec3), out: gk.array(dtype=gk.vec3), s: gk.array(dtype=float)):
    i = gk.tid()
    v = p[i]
    s[i] = v[1]
    out[i] = v
    out[i][2] = 0.5
