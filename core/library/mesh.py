"""Triangle-mesh queries in kernels (Warp's): `gk.mesh_query_point` (and `_no_sign`, `_sign_normal`,
`_sign_winding_number`, `_sign_parity`), `gk.mesh_query_furthest_point_no_sign`, `gk.mesh_query_ray`,
`gk.mesh_query_ray_anyhit`, `gk.mesh_query_aabb` / `gk.mesh_query_sphere` with `mesh_query_next` (alias
`mesh_query_aabb_next`), `gk.mesh_eval_position`, `gk.mesh_eval_velocity`, `gk.mesh_get` and
`gk.mesh_get_bvh` (the mesh's BVH over its triangles, for the bvh_query_* functions).

A kernel receives a mesh as the struct `MeshData` (float32 points, Warp's) or `MeshData64` (float64):
its points, velocities, triangle indices and a BVH over the triangles' bounds (core/library/bvh.py,
built by geometry/mesh.py). Each query runs in two parts, both library `@gk.func` code:

1. a discrete search: a stack traversal of the BVH that finds the face (closest to a point, first hit by
   a ray). It only selects; its result is an integer, with no derivative (as in Warp).
2. the continuous outputs, computed again from that face's vertices read from `points` after the search:
   the closest point's barycentric (u, v) by region (Ericson's), the ray's t, u, v (Moller-Trumbore),
   the normal. AD differentiates this part as plain code, so u, v, t and the distances built from them
   have gradients with respect to the query point or ray and to the mesh's points, in both modes.
   (Warp 1.19 differentiates u, v and t with respect to the query only: its adjoints drop the mesh
   points' share, and mesh_eval_position has none; gradkit's include them.)

u weights the face's first vertex and v its second: the point is u * p0 + v * p1 + (1 - u - v) * p2.
The structs and the library functions live in core/library/mesh_device.py (the furthest point, any hit and
the AABB / sphere query in mesh_more.py); this module is the language side: the macros a kernel calls,
which check their arguments and call those functions."""

from .. import types as T
from ..frontend.macros import Advance
from ..lang import NAMES, LangFunction
from .bvh import AABB as _BVH_AABB
from .bvh import SPHERE as _BVH_SPHERE
from .bvh import BvhQuery, as_radius, as_vec3, kernel_only
from .bvh import _start as _bvh_start
from .mesh_device import (MESH_STRUCTS, MeshData, MeshData64, MeshQueryPoint, MeshQueryPoint64,  # noqa: F401
                          MeshQueryRay, MeshQueryRay64, lib_for)
from .mesh_more import AABB, QUERY_STRUCTS, SPHERE, MeshQuery, MeshQuery64, more_for
from .mesh_parity import parity_for

I32 = T.int32


# --------------------------------------------------------------------------- the language functions

def mesh_arg(E, mesh, what: str = "id"):
    """(the MeshData a kernel argument stands for, its scalar type): a `gk.Mesh` parameter, or a geometry
    handle (Warp's `wp.uint64`) holding one."""
    t = getattr(mesh, "type", None)
    if t in MESH_STRUCTS:
        return mesh, MESH_STRUCTS[t]
    if t is not None and t.is_struct and t.fields.get("mesh") in MESH_STRUCTS:
        return mesh.fields["mesh"], MESH_STRUCTS[t.fields["mesh"]]
    E.fail(f"{what} must be a mesh (a kernel parameter annotated gk.Mesh, or wp.uint64, given a gk.Mesh or "
           f"its .id at launch), got {getattr(t, 'name', type(mesh).__name__)}")


def _vec(E, x, s, what):
    t = E.type_of(x)
    if not (t.is_vector and t.length == 3 and t.scalar.is_float):
        E.fail(f"{what} must be a 3-vector, got {t.name}")
    if t.scalar is s:
        return x
    return E.make(T.vector(3, s), [E.cast(c, s) for c in E.comps(x)])


def _point_query(how: int):
    def query(E, id, point, max_dist):
        mesh, s = mesh_arg(E, id)
        return E.call(lib_for(s).point, mesh, _vec(E, point, s, "point"), E.scalar(max_dist, s), E.const(how, I32),
                      E.const(0.5, s))
    return query


def _outs(E, name: str, q, fields: tuple, first: int, given: tuple):
    """Warp's out-argument form of a query (`mesh_query_point(id, p, d, inside, face, u, v) -> bool`):
    the result flag, the query's `fields` assigned to the locals at argument positions first, first + 1, ..."""
    if len(given) != len(fields):
        E.fail(f"{name}() takes the query's arguments, or those and the local variables {', '.join(fields)} "
               f"it assigns")
    return Advance(q.fields["result"], None, {first + k: q.fields[f] for k, f in enumerate(fields)})


_POINT_OUTS = ("sign", "face", "u", "v")


def mesh_query_point(E, id, point, max_dist, *outs):
    q = _point_query(1)(E, id, point, max_dist)
    return _outs(E, "mesh_query_point", q, _POINT_OUTS, 3, outs) if outs else q


def mesh_query_point_no_sign(E, id, point, max_dist, *outs):
    q = _point_query(0)(E, id, point, max_dist)
    return _outs(E, "mesh_query_point_no_sign", q, _POINT_OUTS[1:], 3, outs) if outs else q


def mesh_query_point_sign_normal(E, id, point, max_dist, *rest):
    # (id, point, max_dist[, epsilon]) or Warp's (id, point, max_dist, inside, face, u, v[, epsilon])
    q = _point_query(2)(E, id, point, max_dist)
    if len(rest) <= 1:
        return q
    return _outs(E, "mesh_query_point_sign_normal", q, _POINT_OUTS, 3, rest[:4])


def mesh_query_point_sign_winding_number(E, id, point, max_dist, *rest):
    # (id, point, max_dist[, accuracy[, threshold]]) or (id, point, max_dist, inside, face, u, v[, accuracy[, threshold]])
    outs, options = (rest[:4], rest[4:]) if len(rest) >= 4 else ((), rest)
    if len(options) > 2:
        E.fail("mesh_query_point_sign_winding_number() takes at most accuracy and threshold after its other arguments")
    threshold = options[1] if len(options) == 2 else 0.5
    mesh, s = mesh_arg(E, id)
    q = E.call(lib_for(s).point, mesh, _vec(E, point, s, "point"), E.scalar(max_dist, s), E.const(3, I32),
               E.scalar(threshold, s))
    return _outs(E, "mesh_query_point_sign_winding_number", q, _POINT_OUTS, 3, outs) if outs else q


def mesh_query_point_sign_parity(E, id, point, max_dist, *rest, n_sample=None, perturbation_scale=None):
    # (id, point, max_dist[, n_sample[, perturbation_scale]]) or
    # Warp's (id, point, max_dist, inside, face, u, v[, n_sample[, perturbation_scale]]); both by keyword too
    outs, options = (rest[:4], rest[4:]) if len(rest) >= 4 else ((), rest)
    options = list(options) + [None] * (2 - len(options))
    if len(options) > 2:
        E.fail("mesh_query_point_sign_parity() takes at most n_sample and perturbation_scale after its other "
               "arguments")
    n_sample = n_sample if n_sample is not None else (options[0] if options[0] is not None else 1)
    scale = perturbation_scale if perturbation_scale is not None else (options[1] if options[1] is not None else 0.1)
    mesh, s = mesh_arg(E, id)
    q = E.call(parity_for(s).point, mesh, _vec(E, point, s, "point"), E.scalar(max_dist, s),
               E.scalar(n_sample, I32), E.scalar(scale, T.float32))
    return _outs(E, "mesh_query_point_sign_parity", q, _POINT_OUTS, 3, outs) if outs else q


def mesh_query_ray(E, id, start, dir, max_t, *outs):
    mesh, s = mesh_arg(E, id)
    q = E.call(lib_for(s).ray, mesh, _vec(E, start, s, "start"), _vec(E, dir, s, "dir"), E.scalar(max_t, s))
    return _outs(E, "mesh_query_ray", q, ("t", "u", "v", "sign", "normal", "face"), 4, outs) if outs else q


def mesh_query_furthest_point_no_sign(E, id, point, min_dist, *outs):
    mesh, s = mesh_arg(E, id)
    q = E.call(more_for(s).furthest, mesh, _vec(E, point, s, "point"), E.scalar(min_dist, s))
    return _outs(E, "mesh_query_furthest_point_no_sign", q, _POINT_OUTS[1:], 3, outs) if outs else q


def _no_root(E, name, root):
    if not (isinstance(root, int) and root == -1):
        E.fail(f"{name}(): root= selects a group's BVH root; gradkit's meshes are not grouped (only -1)")


def mesh_query_ray_anyhit(E, id, start, dir, max_t, root=-1):
    _no_root(E, "mesh_query_ray_anyhit", root)
    mesh, s = mesh_arg(E, id)
    return E.call(more_for(s).anyhit, mesh, _vec(E, start, s, "start"), _vec(E, dir, s, "dir"), E.scalar(max_t, s))


def _mesh_query(E, id, kind, low, high, center, radius):
    """The MeshQuery of a mesh: its BVH query over the triangles' bounds (float32, as the BVH) and, for a
    sphere, the center and squared radius at the mesh's precision for the narrow phase."""
    mesh, s = mesh_arg(E, id)
    r32 = as_radius(E, radius)
    q = E.call(_bvh_start, mesh.fields["bvh"], low, high, E.const(_BVH_SPHERE if kind == SPHERE else _BVH_AABB, I32),
               r32 * r32)
    r = E.scalar(radius, s)
    r = E.where(E.gt(r, E.const(0.0, s)), r, E.const(0.0, s))
    return E.call(more_for(s).start, mesh, q, _vec(E, center, s, "center"), r * r, E.const(kind, I32))


def mesh_query_aabb(E, id, low, high):
    lo, hi = as_vec3(E, low, "low"), as_vec3(E, high, "high")
    return _mesh_query(E, id, AABB, lo, hi, lo, 0.0)


def mesh_query_sphere(E, id, center, radius):
    c = as_vec3(E, center, "center")
    return _mesh_query(E, id, SPHERE, c, c, center, radius)


def mesh_query_next(E, query, index):
    t = getattr(query, "type", None)
    if t is BvhQuery._gk_struct:
        return NAMES["bvh_query_next"].macro(E, query, index)
    if t not in QUERY_STRUCTS:
        E.fail("query must be the result of gk.mesh_query_aabb(id, low, high) or gk.mesh_query_sphere(id, center, "
               "radius)")
    q = E.call(more_for(QUERY_STRUCTS[t]).next, query)
    return Advance(E.gt(q.fields["found"], E.const(0, I32)), q, outs={1: q.fields["current"]})


def mesh_query_aabb_next(E, query, index):
    return mesh_query_next(E, query, index)


def mesh_eval_position(E, id, face, u, v):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).eval_position, mesh, E.scalar(face, I32), E.scalar(u, s), E.scalar(v, s))


def mesh_eval_velocity(E, id, face, u, v):
    mesh, s = mesh_arg(E, id)
    return E.call(lib_for(s).eval_velocity, mesh, E.scalar(face, I32), E.scalar(u, s), E.scalar(v, s))


def mesh_get(E, id):
    return mesh_arg(E, id)[0]


def mesh_get_bvh(E, id):
    return mesh_arg(E, id)[0].fields["bvh"]


DOCS = {
    "mesh_query_point": "mesh_query_point(mesh, point, max_dist) -> the closest point on the mesh within max_dist "
                        "(.result, .face, .u, .v) and whether point is inside (.sign -1) or outside (+1) by ray "
                        "parity (Warp's); Warp's form mesh_query_point(mesh, point, max_dist, inside, face, u, v) "
                        "-> bool assigns those locals (the other point queries and mesh_query_ray(mesh, start, "
                        "dir, max_t, t, u, v, sign, normal, face) have that form too)",
    "mesh_query_point_no_sign": "mesh_query_point_no_sign(mesh, point, max_dist) -> the closest point within "
                                "max_dist (.result, .face, .u, .v); .sign is 0",
    "mesh_query_point_sign_normal": "mesh_query_point_sign_normal(mesh, point, max_dist) -> as mesh_query_point, "
                                    "the sign from the angle-weighted normal at the closest point (watertight "
                                    "meshes)",
    "mesh_query_point_sign_winding_number": "mesh_query_point_sign_winding_number(mesh, point, max_dist, accuracy=2, "
                                            "threshold=0.5) -> as mesh_query_point, inside where the winding "
                                            "number exceeds threshold (summed over every triangle: accuracy is "
                                            "not used)",
    "mesh_query_point_sign_parity": "mesh_query_point_sign_parity(mesh, point, max_dist, n_sample=1, "
                                    "perturbation_scale=0.1) -> as mesh_query_point, inside where at least half "
                                    "of n_sample rays along (1, 1, 1) perturbed by Warp's seeded draws cross an "
                                    "odd number of faces (core/library/mesh_parity.py)",
    "mesh_query_ray": "mesh_query_ray(mesh, start, dir, max_t) -> the first hit at 0 <= t < max_t (.result, .face, "
                      ".t, .u, .v, .normal, .sign: Warp's determinant, negative from behind the face)",
    "mesh_query_furthest_point_no_sign": "mesh_query_furthest_point_no_sign(mesh, point, min_dist) -> the point of "
                                         "the mesh farthest from point, farther than min_dist (.result, .face, "
                                         ".u, .v: a corner of the face); Warp's form (mesh, point, min_dist, "
                                         "face, u, v) -> bool assigns those locals",
    "mesh_query_ray_anyhit": "mesh_query_ray_anyhit(mesh, start, dir, max_t) -> bool: whether the ray hits a face "
                             "at 0 <= t < max_t (t in multiples of |dir|)",
    "mesh_query_aabb": "mesh_query_aabb(mesh, low, high) -> a query over the triangles whose bounds overlap "
                       "[low, high]; iterate with mesh_query_next(query, index) or `for index in query:`",
    "mesh_query_sphere": "mesh_query_sphere(mesh, center, radius) -> a query over the triangles whose closest point "
                         "to center lies within radius (a negative radius counts as 0); iterate it as "
                         "mesh_query_aabb's",
    "mesh_query_next": "mesh_query_next(query, index) -> bool: assigns the next triangle of a mesh_query_aabb or "
                       "mesh_query_sphere query to `index`",
    "mesh_query_aabb_next": "mesh_query_aabb_next(query, index) -> bool: mesh_query_next (Warp's older name)",
    "mesh_eval_position": "mesh_eval_position(mesh, face, u, v) -> u * p0 + v * p1 + (1 - u - v) * p2 of the face",
    "mesh_eval_velocity": "mesh_eval_velocity(mesh, face, u, v) -> the velocities interpolated as positions (0 if "
                          "the mesh has none)",
    "mesh_get": "mesh_get(id) -> the mesh's struct: .points, .velocities, .indices, .num_tris, .num_points",
    "mesh_get_bvh": "mesh_get_bvh(id) -> the BVH over the mesh's triangles' bounds, for bvh_query_aabb / ray / "
                    "sphere / capsule (the items are the faces)",
}

# the argument positions Warp's out-argument forms assign (present only when those forms are used)
for _fn, _assigns in ((mesh_query_point, (3, 4, 5, 6)), (mesh_query_point_no_sign, (3, 4, 5)),
                      (mesh_query_point_sign_normal, (3, 4, 5, 6)), (mesh_query_point_sign_winding_number, (3, 4, 5, 6)),
                      (mesh_query_point_sign_parity, (3, 4, 5, 6)),
                      (mesh_query_furthest_point_no_sign, (3, 4, 5)), (mesh_query_ray, (4, 5, 6, 7, 8, 9)),
                      (mesh_query_ray_anyhit, ()), (mesh_query_aabb, ()), (mesh_query_sphere, ()),
                      (mesh_query_next, (0, 1)), (mesh_query_aabb_next, (0, 1)), (mesh_eval_position, ()),
                      (mesh_eval_velocity, ()), (mesh_get, ()), (mesh_get_bvh, ())):
    _fn.__doc__ = DOCS[_fn.__name__]
    _fn.assigns = _assigns
    LangFunction(_fn.__name__, "macro", macro=_fn, host=kernel_only(_fn.__name__)).define()

for _q in (MeshQuery, MeshQuery64):
    _q._gk_iter_next = NAMES["mesh_query_next"]      # `for index in query:` (core/frontend/loops.py)
