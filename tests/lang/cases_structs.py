"""`@gk.struct` in the language: struct locals (constructed, fields and components written, carried
through a loop, merged across a branch) and structs passed to and returned from @gk.func, with nested
structs and an array field. Struct *kernel parameters* take host instances, which the table's argument
specs do not describe: tests/core/test_structs.py checks them in every mode on every device."""

import numpy as np

import gradkit as gk

from .harness import Case, In, Out, collect

A1 = gk.array(dtype=gk.float64)
V3 = gk.array(dtype=gk.vec3d)


@gk.struct
class Particle:
    pos: gk.vec3d
    w: gk.float64


@gk.struct
class Pair:
    a: Particle
    b: Particle
    scale: gk.float64


@gk.kernel
def struct_local(x: V3, s: A1, y: V3):
    i = gk.tid()
    p = Particle(x[i], s[i])
    p.pos.y = p.pos.y * 2.0
    for k in range(3):
        p.pos = p.pos * 0.5 + gk.vec3d(p.w, 0.0, 0.0)
        p.w += p.pos.z
    if s[i] > 0.0:
        p.w = p.w * 3.0
    y[i] = p.pos * p.w


def _local_ref(x, s, y):
    pos, w = x.copy(), s.copy()
    pos[:, 1] *= 2
    for _ in range(3):
        pos = pos * 0.5 + np.stack([w, 0 * w, 0 * w], 1)
        w = w + pos[:, 2]
    w = np.where(s > 0, 3 * w, w)
    return pos * w[:, None]


@gk.func
def midpoint(q: Pair) -> Particle:
    return Particle((q.a.pos + q.b.pos) * 0.5 * q.scale, q.a.w * q.b.w)


@gk.func
def swapped(q: Pair) -> Pair:
    out = q
    out.a = q.b
    out.b = q.a
    out.b.w += 1.0
    return out


@gk.kernel
def struct_funcs(x: V3, s: A1, y: A1):
    i = gk.tid()
    j = (i + 1) % len(s)
    q = Pair(Particle(x[i], s[i]), Particle(x[j], s[j]), 2.0)
    m = midpoint(swapped(q))
    y[i] = gk.dot(m.pos, m.pos) + m.w


def _funcs_ref(x, s, y):
    xj, sj = np.roll(x, -1, 0), np.roll(s, -1)
    pos = (x + xj) * 0.5 * 2.0
    return (pos * pos).sum(1) + sj * (s + 1)


CASES = collect("structs", [
    Case("struct_local", "a @gk.struct local: constructed, a field and a component written, carried through "
         "a loop and merged across a branch", struct_local, 5,
         [In((5, 3), gk.vec3d), In((5,)), Out((5, 3), gk.vec3d)], _local_ref),
    Case("struct_func", "nested @gk.struct values passed to and returned from @gk.func (fields swapped, "
         "written, combined)", struct_funcs, 5, [In((5, 3), gk.vec3d), In((5,)), Out((5,))], _funcs_ref),
])
