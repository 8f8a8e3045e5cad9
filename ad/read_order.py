"""Which arrays a kernel reads before overwriting them (so its adjoint needs their values from before
the launch), and which it reads after writing them (so its adjoint needs what the launch left).

Program order over the lowered forward IR decides: a load with a store to the same element (same index
values and component) after it, and no store to that element before it, reads the launch's input; a
load with any store to the array before it, or in a loop around it, may read the launch's own output.
A tape keeps a copy of an array from before the launch only when every read is of the first kind
(`y[i] *= x[i]`, Taichi's rule-1 programs); otherwise its adjoint reads the array as the launch left it.
"""

from __future__ import annotations

import weakref

from ..core.ir import Function, Instr, Region, access_index, different_elements, index_key
from ..core.ops import LOOPS, MEMORY, Op


# fn -> its answer. Beside the function, not in fn.attrs: copy_function copies attrs into functions with
# other value ids (the next pass's output, the adjoint), where the cached ids would name nothing.
_CACHE: weakref.WeakKeyDictionary[Function, tuple[set[int], set[int]]] = weakref.WeakKeyDictionary()


def _accesses(region: Region, loops: tuple, out: list) -> None:
    for ins in region.body:
        if ins.op in MEMORY:
            out.append((ins, loops))
        for r in ins.regions:
            _accesses(r, loops + (id(ins),) if ins.op in LOOPS else loops, out)


def _key(ins: Instr) -> tuple:
    return ins.args[0].id, ins.attrs.get("comp"), index_key(access_index(ins))


def _distinct(a: tuple, b: tuple) -> bool:
    """Provably different elements for one thread: another component of the same index, or different
    constants at some index position."""
    return a[1] != b[1] if a[2] == b[2] else different_elements(a[2], b[2])


def read_before_write(fn: Function) -> tuple[set[int], set[int]]:
    """(ids of array parameters whose loads all read values from before the launch, at least one of them
    an element the launch then overwrites; ids of those with a load of an element the launch overwrites
    later while other loads need what it wrote — `y[i, k % 2] *= v` in a loop — which no single copy
    serves: their adjoint cannot be right)."""
    cached = _CACHE.get(fn)
    if cached is not None:
        return cached
    seq: list = []
    _accesses(fn.body, (), seq)
    pre, post, overwritten = set(), set(), set()
    for k, (load, loops) in enumerate(seq):
        if load.op != Op.LOAD:
            continue
        arr = load.args[0].id
        # writes that may touch the loaded element: not another component of the same element
        key = _key(load)
        writes = [(j, w, wl) for j, (w, wl) in enumerate(seq) if w.op != Op.LOAD and w.args[0].id == arr
                  and not _distinct(_key(w), key)]
        if any((j > k or set(wl) & set(loops)) and _key(w) == key for j, w, wl in writes):
            overwritten.add(arr)
        if any(j < k or set(wl) & set(loops) for j, w, wl in writes):
            post.add(arr)
        elif any(j > k and _key(w) == key for j, w, wl in writes):
            pre.add(arr)
    _CACHE[fn] = out = (pre - post, overwritten & post)
    return out
