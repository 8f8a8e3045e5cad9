"""The IR's op vocabulary and its trait groups: every pass and backend asks "is this a loop / a write /
free of effects" through these sets instead of re-listing op names (core/ir.py documents each op).

`Op`'s members are plain strings (an Enum's member lookup costs 60 ns on Python 3.11, six times a class
attribute, on the compiler's hottest comparisons), so IR prints unchanged; a misspelt `Op.LAOD` is an
AttributeError where a misspelt string compared false. `ALL` is the vocabulary `verify` checks ops against.
"""

from __future__ import annotations


class Op:
    """The IR's instruction kinds."""

    CONST = "const"
    PRIM = "prim"
    TID = "tid"
    SHAPE = "shape"
    LOAD = "load"
    STORE = "store"
    ATOMIC = "atomic"
    IF = "if"
    FOR = "for"
    WHILE = "while"
    CALL = "call"
    PUSH = "push"
    POP = "pop"
    NATIVE = "native"


ALL = frozenset(v for k, v in vars(Op).items() if k.isupper())

# Values only: no memory, no effect (the frontend folds and hoists these).
VALUE = frozenset({Op.CONST, Op.PRIM, Op.TID, Op.SHAPE})
# Array element accesses, each `arr, *idx[, value]` (bounds sites, alias analysis, scalarize's `comp`).
MEMORY = frozenset({Op.LOAD, Op.STORE, Op.ATOMIC})
# Writes to an array element.
WRITES = frozenset({Op.STORE, Op.ATOMIC})
# The reverse pass's value stack.
STACK = frozenset({Op.PUSH, Op.POP})
# Effects a pass must keep in order (a native snippet may write any array it is passed).
EFFECTS = WRITES | STACK | {Op.NATIVE}
# Loops: their regions run any number of times.
LOOPS = frozenset({Op.FOR, Op.WHILE})
# Instructions with regions.
STRUCTURED = LOOPS | {Op.IF}
# Calls into other code whose body the pass cannot see (a gk.func before inlining, a native snippet).
OPAQUE = frozenset({Op.CALL, Op.NATIVE})
