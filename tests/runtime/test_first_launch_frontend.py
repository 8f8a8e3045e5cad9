"""The frontend's first-launch shortcuts give what the plain walks give: `copy_tree` (core/frontend/
ast_copy.py) against `copy.deepcopy`, `_exits` (the memoised may_exit of core/frontend/stmts.py) against
`_contains`, on every function of gradkit's own sources and on trees built to be awkward; and a kernel whose
exits sit in nested loops and branches against NumPy float64."""

import ast
import copy
import pathlib

import numpy as np

import gradkit as gk
from gradkit.core.frontend.ast_copy import copy_tree
from gradkit.core.frontend.stmts import _contains, _exits

ROOT = pathlib.Path(gk.__file__).resolve().parent


def _trees(limit=120):
    out = []
    for path in sorted(ROOT.glob("core/**/*.py"))[:limit]:
        out.append(ast.parse(path.read_text()))
    return out


def _same(a, b):
    assert ast.dump(a, include_attributes=True) == ast.dump(b, include_attributes=True)
    for x, y in zip(ast.walk(a), ast.walk(b), strict=True):
        assert x.__class__ is y.__class__ and x.__dict__.keys() == y.__dict__.keys()


def test_copy_tree_is_deepcopy_on_real_sources():
    for tree in _trees():
        mine, ref = copy_tree(tree), copy.deepcopy(tree)
        _same(mine, ref)
        originals = {id(n) for n in ast.walk(tree)}
        assert not any(id(n) in originals for n in ast.walk(mine))      # nothing shared with the original


def test_copy_tree_keeps_sharing_and_copies_foreign_values():
    fn = ast.parse("def f(a):\n    b = a + [1, 2]\n    return b\n").body[0]
    shared = fn.body[0].value.left
    fn.body.insert(1, ast.Expr(value=shared))            # one node reached twice
    extra = [1, {"k": (2, [3])}]
    fn.body[0].value.right.extra = extra                 # a value a dialect stored on a node
    fn.body[-1].value.extra = extra
    out = copy_tree(fn)
    _same(out, copy.deepcopy(fn))
    assert out.body[1].value is out.body[0].value.left and out.body[1].value is not shared
    assert out.body[0].value.right.extra == extra and out.body[0].value.right.extra is not extra
    assert out.body[0].value.right.extra is out.body[-1].value.extra
    assert out.body[0].value.right.extra[1]["k"][1] is not extra[1]["k"][1]
    lst = [fn.body[0], fn.body[0]]
    got = copy_tree(lst)
    assert got[0] is got[1] and got[0] is not fn.body[0]


def test_exits_match_contains_on_real_sources():
    extra = ast.parse(
        "def g(xs):\n"
        "    for x in xs:\n"
        "        if x:\n            break\n"
        "    else:\n        continue\n"
        "    while xs:\n        for y in xs:\n            return y\n        continue\n"
        "    else:\n        while 1:\n            break\n"
        "    lambda: 0\n")
    checked = 0
    for tree in [*_trees(), extra]:
        memo = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                got = _exits(node, memo)
                want = (_contains([node], (ast.Break, ast.Continue), True), _contains([node], (ast.Return,), False))
                assert got == want, ast.dump(node)[:200]
                checked += 1
    assert checked > 1000


@gk.kernel
def _exits_kernel(x: gk.array(dtype=gk.float64, ndim=2), out: gk.array(dtype=gk.float64)):
    i = gk.tid()
    acc = float(0.0)
    for j in range(x.shape[1]):
        v = x[i, j]
        if v > 1.5:
            break
        if v < -1.0:
            continue
        for k in range(3):
            if float(k) * v > 1.0:
                break
            acc += v * float(k + 1)
        if acc > 4.0:
            out[i] = acc
            return
    out[i] = -acc


def _exits_reference(x):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        acc, done = 0.0, False
        for j in range(x.shape[1]):
            v = x[i, j]
            if v > 1.5:
                break
            if v < -1.0:
                continue
            for k in range(3):
                if k * v > 1.0:
                    break
                acc += v * (k + 1)
            if acc > 4.0:
                out[i], done = acc, True
                break
        if not done:
            out[i] = -acc
    return out


def test_kernel_with_nested_exits_matches_numpy(device, rng):
    xn = rng.normal(size=(64, 9)) * 1.2
    x = gk.array(xn, dtype=gk.float64, device=device)
    out = gk.zeros(64, dtype=gk.float64, device=device)
    gk.launch(_exits_kernel, 64, inputs=[x], outputs=[out], device=device)
    np.testing.assert_allclose(out.numpy(), _exits_reference(xn), rtol=1e-13, atol=1e-13)
