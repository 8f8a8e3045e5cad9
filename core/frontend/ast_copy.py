"""`copy_tree`: a deep copy of a Python AST, for the lowerings that each take their own tree (a stored
SourceInfo's, a `@ti.func` body inlined at every call). It gives what `copy.deepcopy` gives — every node,
list and non-atomic value copied, a node reached twice copied once — several times faster, as a first
launch copies thousands of nodes."""

from __future__ import annotations

import ast
import copy

# values copy.deepcopy returns as they are
_ATOMS = frozenset({str, int, float, complex, bool, bytes, type(None), type(...), type, range})


def copy_tree(tree):
    """A deep copy of `tree` (an AST node, or a list of them)."""
    return _copy(tree, {})


def _copy(x, memo: dict):
    c = x.__class__
    if c in _ATOMS:
        return x
    got = memo.get(id(x))
    if got is not None:
        return got
    if c is list:
        out = memo[id(x)] = []
        out.extend([_copy(v, memo) for v in x])
        return out
    if isinstance(x, ast.AST):
        out = memo[id(x)] = c.__new__(c)
        d = out.__dict__
        for k, v in x.__dict__.items():
            d[k] = v if v.__class__ in _ATOMS else _copy(v, memo)
        return out
    return copy.deepcopy(x, memo)       # anything else in a tree (tuples, objects a dialect stored)
