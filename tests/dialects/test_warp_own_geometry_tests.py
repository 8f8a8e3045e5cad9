"""Warp 1.19's own geometry tests (warp/tests/geometry/: test_hash_grid.py, test_mesh_query_point.py,
test_mesh_query_ray.py, test_mesh_query_aabb.py, test_bvh.py, test_mesh.py), loaded from the installed
package at test time with only their imports pointed at gradkit.warp (tests/dialects/warp_own_tests.py),
each test function run on every gradkit device. They check query results against brute force and
gradients against finite differences themselves.

A test that does not pass is in NOT_RUNNING with the Warp feature gradkit lacks (or the gradkit defect)
and the error gradkit raises for it, which this test asserts: an entry that starts passing fails here
too, so the table stays true."""

from __future__ import annotations

import pathlib
import unittest

import pytest

pytest.importorskip("warp")

from gradkit.core.errors import CompileError  # noqa: E402
from gradkit.warp import WarpFeatureMissing  # noqa: E402
from tests.conftest import DEVICES  # noqa: E402
from tests.dialects import warp_own_tests as own  # noqa: E402

MODULES = ("geometry/test_hash_grid.py", "geometry/test_mesh_query_point.py", "geometry/test_mesh_query_ray.py",
           "geometry/test_mesh_query_aabb.py", "geometry/test_bvh.py", "geometry/test_mesh.py")

_LOADED = {rel: own.load(rel) for rel in MODULES if (own.warp_tests_dir() / rel).is_file()}
_CASES = {rel: own.cases(module) for rel, module in _LOADED.items()}
PARAMS = [(rel, name) for rel, cases in _CASES.items() for name in cases]

# Why a test does not pass, once per cause: the Warp feature gradkit lacks (or the difference), and where the
# fix belongs
_HALF = "float16 (wp.float16, wp.vec3h): gradkit has no half-precision type (core/types.py)"
_GROUPED = ("grouped geometry (HashGrid.build(groups=), Bvh / Mesh(groups=), a root per group id): not in "
            "gradkit's geometry (geometry/hash_grid.py, geometry/bvh.py, core/library/bvh.py)")
_TILES = "tiles (wp.launch_tiled, tile_*, *_tiled queries): not in gradkit"
_NEW_DEL = ("Warp's destructor of a native handle called on an uninitialised object: gradkit's geometry owns no "
            "native handle and has no __del__")
_NATIVE = "mocks Warp's native library (wp._src, runtime.core): gradkit has none"

# (module file, test) -> (error gradkit raises, pattern its message matches, why). Asserted: an entry that starts
# passing, or fails otherwise, fails this test.
NOT_RUNNING: dict[tuple[str, str], tuple[type, str, str]] = {
    ("test_hash_grid.py", "test_hashgrid_inputs"): (
        TypeError, r"gk\.copy: dst must be a gk\.array, got ndarray",
        "strided array views (a[::2]): gradkit's arrays are contiguous and a stepped slice reads the values to the "
        "host (runtime/arrays)"),
    ("test_hash_grid.py", "test_hashgrid_extreme_coordinates"): (
        AttributeError, r"'ScalarType' object has no attribute '__name__'",
        "wp.float32.__name__: gradkit's scalar types are objects without a __name__ (core/types.py); past it "
        "the test needs generic kernels and float16 too"),
    **{("test_hash_grid.py", t): (TypeError, r"unsupported dtype .*vec3h", _HALF)
       for t in ("test_hashgrid_multiprecision", "test_hashgrid_query_func_annotations",
                 "TestHashGrid.test_hashgrid_graph_first_build_all_precisions")},
    **{("test_hash_grid.py", t): (TypeError, r"unsupported dtype <gradkit builtin float16>", _HALF)
       for t in ("test_hashgrid_dtype_validation", "test_hashgrid_nan_coordinates")},
    **{("test_hash_grid.py", t): (WarpFeatureMissing, r"HashGrid\.build\(groups=\)", _GROUPED)
       for t in ("test_hashgrid_grouped_query", "test_hashgrid_grouped_query_rebuild_after_in_place_groups",
                 "test_hashgrid_grouped_query_extreme_group_ids", "test_hashgrid_grouped_many_groups",
                 "test_hashgrid_grouped_graph_capture_changing_group_ids",
                 "test_hashgrid_grouped_graph_capture_after_reserve", "test_hashgrid_device_validation",
                 "TestHashGrid.test_hashgrid_grouped_graph_first_build", "TestHashGrid.test_hashgrid_graph_empty_build",
                 "TestHashGrid.test_hashgrid_graph_multidimensional_inputs")},
    ("test_hash_grid.py", "test_hashgrid_saveable_capture_unsupported"): (
        AssertionError, r"NotImplementedError not raised",
        "saveable graph capture (wp.ScopedCapture(apic=True)) is not in gradkit: a capture is replayed from Python "
        "and never serialized, so a HashGrid.build inside one is recorded, not refused"),
    ("test_hash_grid.py", "TestHashGrid.test_hashgrid_graph_rebuilds_current_points"): (
        TypeError, r"HashGrid\.build: points must be a gk\.array of vec3, got ndarray",
        "strided array views (a[::2]): gradkit's arrays are contiguous and a stepped slice reads the values to the "
        "host (runtime/arrays)"),
    ("test_hash_grid.py", "TestHashGrid.test_hashgrid_query_public_type_surface"): (
        AttributeError, r"has no attribute '_src'", "reads Warp's internals (wp._src.types, wp._src.context)"),
    ("test_mesh_query_ray.py", "test_mesh_query_ray_and_groups"): (WarpFeatureMissing, r"Mesh\(groups=\)",
                                                                   _GROUPED),
    **{("test_mesh_query_aabb.py", t): (WarpFeatureMissing, r"wp\.launch_tiled", _TILES)
       for t in ("test_tile_mesh_query_aabb", "test_tile_mesh_query_aabb_large", "test_mesh_query_aabb_tiled",
                 "test_tile_mesh_query_aabb_cpu_blocks", "test_tile_mesh_query_aabb_large_cpu_blocks",
                 "test_mesh_query_aabb_tiled_cpu_blocks")},
    **{("test_bvh.py", t): (WarpFeatureMissing, r"wp\.launch_tiled", _TILES)
       for t in ("test_tile_bvh_query_aabb", "test_tile_bvh_query_ray", "test_bvh_query_aabb_tiled",
                 "test_bvh_query_ray_tiled", "test_tile_bvh_query_aabb_cpu_blocks",
                 "test_tile_bvh_query_ray_cpu_blocks", "test_bvh_query_aabb_tiled_cpu_blocks",
                 "test_bvh_query_ray_tiled_cpu_blocks")},
    ("test_bvh.py", "test_bvh_cubql_constructor"): (
        unittest.SkipTest, r"cuBQL is not available",
        "cuBQL (CUDA's BVH builder): wp.is_cubql_available() is False in gradkit; Warp skips the test itself "
        "where cuBQL is missing"),
    ("test_mesh.py", "test_grouped_mesh_query_ray"): (
        CompileError, r"mesh_query_ray\(\) takes the query's arguments, or those and the local variables",
        "grouped meshes: Warp's mesh_query_ray takes a group id after the out-arguments (not in gradkit's geometry)"),
    ("test_mesh.py", "test_mesh_exceptions"): (
        AssertionError, r"RuntimeError not raised",
        "gradkit's Mesh accepts vec3d points, which Warp 1.19 refuses (kept: gradkit's float64 meshes). A CUDA-only "
        "test in Warp: on the cpu device its first case (cpu points, device indices) is no error either"),
    **{(m, t): (AttributeError, r"has no attribute '__del__'", _NEW_DEL)
       for m, t in (("test_hash_grid.py", "TestHashGrid.test_hashgrid_new_del"),
                    ("test_bvh.py", "TestBvh.test_bvh_new_del"), ("test_mesh.py", "TestMesh.test_mesh_new_del"))},
    ("test_mesh.py", "TestMesh.test_mesh_create_raises_on_native_failure"): (AttributeError, r"has no attribute '_src'",
                                                                             _NATIVE),
    ("test_mesh.py", "TestMesh.test_mesh_refit_raises_on_native_device_failure"): (
        AttributeError, r"'Mesh' object has no attribute 'dtype'", _NATIVE),
    ("test_mesh.py", "TestMesh.test_mesh_points_setter_raises_on_native_device_failure"): (
        AttributeError, r"'Mesh' object has no attribute 'dtype'", _NATIVE),
}

# Not run in this process: (module file, test) -> (text the Warp test's source must contain, why). It would crash
# the interpreter, so what is asserted is that the reason holds: the test does what the entry says.
NEVER_RUN: dict[tuple[str, str], tuple[str, str]] = {
    ("test_bvh.py", "TestBvh.test_sah_depth_fits_query_stack"): (
        "_host_bvh_depth(bvh", "reads Warp's native host BVH through ctypes at the address bvh.id "
        "(_host_bvh_depth: ctypes.cast(bvh.id, ...)); gradkit's id is a registry number, so the read segfaults"),
}

# Heavy: run on the cpu device only (seconds there, tens of seconds on the numpy interpreter)
CPU_ONLY: dict[tuple[str, str], str] = {
    ("test_mesh_query_point.py", "test_mesh_query_furthest_point"): "brute-force furthest points checked per query "
                                                                    "point: 33 s on the numpy device (the query is "
                                                                    "tested on every device in "
                                                                    "tests/geometry/test_mesh_more_queries.py)",
    ("test_mesh_query_point.py", "test_mesh_query_point"): "spiky.usd's points queried by five signs (parity by "
                                                           "sampled rays over the whole mesh) at 6-9 BVH builds "
                                                           "and checked by brute force: 20 s on cpu, 30 s on c, "
                                                           "61 s on opencl:0, over 13 min on numpy (stopped)",
    ("test_mesh_query_point.py", "test_set_mesh_points"): "a 2,300-triangle mesh's points queried against brute "
                                                           "force per point: 27 s on the numpy device",
    ("test_mesh_query_ray.py", "test_mesh_query_ray_count_intersections"): "5,000 rays against the torus by BVH "
                                                                           "and brute force: 10 s on numpy",
    ("test_bvh.py", "test_capture_bvh_rebuild"): "100,000 boxes rebuilt on the host at 11 replays: 8 s on numpy",
    ("test_hash_grid.py", "test_hashgrid_query"): "its brute-force reference launch (67 million threads) runs "
                                                  "before the failing kernel: 10 s on numpy",
}


def _id(param) -> str:
    return f"{pathlib.Path(param[0]).stem}::{param[1]}"


def test_every_warp_module_loaded():
    """The six modules are there (a Warp without one of them is not the Warp these tests follow), and
    every table entry names a test that exists."""
    assert set(_LOADED) == set(MODULES)
    known = {(pathlib.Path(rel).name, name) for rel, name in PARAMS}
    for table in (NOT_RUNNING, NEVER_RUN, CPU_ONLY):
        assert set(table) <= known, sorted(set(table) - known)


def _devices(param) -> list[str]:
    key = (pathlib.Path(param[0]).name, param[1])
    if key in NEVER_RUN:
        return ["none"]
    return [d for d in DEVICES if d == "cpu"] if key in CPU_ONLY else DEVICES


_RUNS = [(param, device) for param in PARAMS for device in _devices(param)]


@pytest.mark.parametrize("param, device", _RUNS, ids=[f"{d}-{_id(p)}" for p, d in _RUNS])
def test_warp_own_geometry_test(param, device):
    rel, name = param
    key = (pathlib.Path(rel).name, name)
    case = _CASES[rel][name]
    if key in NEVER_RUN:
        text, _why = NEVER_RUN[key]
        assert text in own.source_of(case)
        return
    expected = NOT_RUNNING.get(key)
    if expected is None:
        own.run_case(case, device)
        return
    error, pattern, _why = expected
    with pytest.raises(error, match=pattern):
        own.run_case(case, device)
