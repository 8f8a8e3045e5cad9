"""`@gk.struct` in the language: struct locals (constructed, fields and components written, carried
through a loop, merged across a branch), structs passed to and returned from @gk.func, with nested
structs and an array field, struct kernel parameters (host instances with array, scalar and vector
fields; gradients in the array fields) and arrays of structs (`gk.array(dtype=Struct)`: whole elements,
fields of elements and field arrays read; gradients in the field arrays)."""

import numpy as np

import gradkit as gk

from .harness import Case, In, Out, Scalar, StructIn, collect

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


@gk.struct
class Cloud:
    pos: V3
    w: A1
    scale: gk.float64
    offset: gk.vec3d


@gk.kernel
def struct_param(c: Cloud, y: V3, total: A1):
    i = gk.tid()
    acc = gk.float64(0.0)
    for k in range(len(c.w)):
        acc += c.w[k] * c.pos[k].x
    y[i] = c.pos[i] * (c.w[i] * c.scale) + c.offset * acc
    gk.atomic_add(total, 0, gk.dot(c.pos[i], c.pos[i]) * c.w[i])


def _param_ref(c, y, total):
    acc = (c["w"] * c["pos"][:, 0]).sum()
    y = c["pos"] * (c["w"] * c["scale"])[:, None] + np.asarray(c["offset"]) * acc
    return y, np.array([((c["pos"] ** 2).sum(1) * c["w"]).sum()])


@gk.struct
class Body:
    p: Particle
    vel: gk.vec3d


@gk.kernel
def struct_array(bs: gk.array(dtype=Body), dt: gk.float64, pos: V3, vel: V3, e: A1):
    i = gk.tid()
    b = bs[i]                                    # a whole element
    b.p.pos = b.p.pos + b.vel * dt
    b.vel = b.vel * bs[i].p.w                    # a field of an element
    pos[i] = b.p.pos
    vel[i] = b.vel
    e[i] = gk.dot(bs.vel[i], bs.p.pos[i]) + bs[(i + 1) % len(bs)].p.w   # field arrays, another element


def _array_ref(bs, dt, pos, vel, e):
    return (bs["p.pos"] + bs["vel"] * dt, bs["vel"] * bs["p.w"][:, None],
            (bs["vel"] * bs["p.pos"]).sum(1) + np.roll(bs["p.w"], -1))


CASES = collect("structs", [
    Case("struct_local", "a @gk.struct local: constructed, a field and a component written, carried through "
         "a loop and merged across a branch", struct_local, 5,
         [In((5, 3), gk.vec3d), In((5,)), Out((5, 3), gk.vec3d)], _local_ref),
    Case("struct_func", "nested @gk.struct values passed to and returned from @gk.func (fields swapped, "
         "written, combined)", struct_funcs, 5, [In((5, 3), gk.vec3d), In((5,)), Out((5,))], _funcs_ref),
    Case("struct_param", "a @gk.struct kernel parameter: array fields indexed, looped over (`len`) and "
         "differentiated (gradients in the fields' `.grad`), scalar and vector fields", struct_param, 4,
         [StructIn(Cloud, {"pos": In((4, 3), gk.vec3d), "w": In((4,)), "scale": Scalar(1.5),
                           "offset": Scalar((0.5, -1.0, 2.0))}),
          Out((4, 3), gk.vec3d), Out((1,))], _param_ref),
    Case("struct_array", "`gk.array(dtype=Struct)` (nested struct fields): whole elements `bs[i]`, fields of "
         "elements `bs[i].p.w`, field arrays `bs.p.pos[i]`, `len(bs)`; gradients in the field arrays",
         struct_array, 5,
         [StructIn(Body, {"p.pos": In((5, 3), gk.vec3d), "p.w": In((5,)), "vel": In((5, 3), gk.vec3d)}, n=5),
          Scalar(0.1), Out((5, 3), gk.vec3d), Out((5, 3), gk.vec3d), Out((5,))], _array_ref),
])
