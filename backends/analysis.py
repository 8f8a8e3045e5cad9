"""Analyses of lowered IR that backends share: which atomics are reductions onto one element, and which
arrays a kernel only ever scatter-adds into. Both let a backend replace contended atomics — which is right
only while no other parameter of the launch writes the same memory (`shared_writes`)."""

from __future__ import annotations

from ..core.ir import Function, Region, used_ids
from ..core.ops import LOOPS, MEMORY, WRITES, Op
from ..core.passes.shifts import shifted_adds


def written_params(fn: Function) -> list[int]:
    """Indices of array parameters the function stores or atomically updates."""
    index = {p.value.id: k for k, p in enumerate(fn.params)}
    out = set()
    for ins in fn.walk():
        if ins.op in WRITES and ins.args[0].id in index:
            out.add(index[ins.args[0].id])
        elif ins.op == Op.NATIVE:       # native code may write any array it is passed
            out.update(index[a.id] for a in ins.args if a.id in index and a.type.is_array)
    return sorted(out)


def shares_memory(a, b) -> bool:
    """True when arrays `a` and `b` may overlap: one buffer (an array passed twice, views of one array) or,
    for host buffers, overlapping address ranges (arrays adopted from overlapping NumPy or torch memory)."""
    ba, bb = a.buffer, b.buffer
    if ba is bb:
        return True
    pa, pb = getattr(ba, "ptr", None), getattr(bb, "ptr", None)
    if type(pa) is int and type(pb) is int:
        return pa < pb + bb.nbytes and pb < pa + ba.nbytes and ba.nbytes > 0 and bb.nbytes > 0
    return False


def shared_writes(args, written) -> bool:
    """True when two of the arrays at the `written` positions of a launch's arguments may overlap: adds
    that skip atomics because no other thread of this kernel writes their element (own-element adds,
    per-worker scatter buffers) would then race with, or reorder, the other parameter's writes."""
    arrays = [args[k] for k in written]
    return any(shares_memory(arrays[x], arrays[y]) for x in range(len(arrays)) for y in range(x))


def local_scatters(fn: Function) -> dict[int, list[tuple]]:
    """{parameter index: shifts} of the arrays a kernel only scatter-adds into at its thread index plus a
    constant (core/passes/shifts.py; a stencil's adjoint), with some add shared between threads: two threads
    meet on an element only when their linear ids are within the largest shift's linear offset, so a chunk
    of threads run by one worker needs atomics only near its ends. Kernels with native code are left out."""
    if any(ins.op == Op.NATIVE for ins in fn.walk()):
        return {}
    index = {p.value.id: k for k, p in enumerate(fn.params)}
    out = {}
    for arr, sites in shifted_adds(fn).items():
        if arr in index and any(not ins.attrs.get("exclusive") for ins in sites):
            out[index[arr]] = sorted(set(sites.values()))
    return out


def local_margin(shifts, dims) -> int:
    """Threads at each end of a chunk that need atomics: twice the largest linear offset of a shift on the
    row-major launch grid `dims` (a thread t adds to t + offset; others adding there lie within it)."""
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    strides.reverse()
    reach = max((abs(sum(s * st for s, st in zip(shift, strides))) for shift in shifts), default=0)
    return 2 * reach


def scatter_arrays(fn: Function) -> set:
    """Float arrays a kernel only ever scatter-adds into (atomic add/sub, old value unused, no other
    access): each worker thread adds into its own buffer without atomics, summed after the launch (arrays
    `local_scatters` handles are left to it)."""
    local = set(local_scatters(fn))
    used = used_ids(fn)
    index = {p.value.id: k for k, p in enumerate(fn.params)}
    ok, bad = set(), set()
    scatter = False
    for ins in fn.walk():
        if ins.op == Op.NATIVE:          # opaque code: its arrays are not privatised
            bad.update(index[a.id] for a in ins.args if a.id in index)
            continue
        if ins.op not in MEMORY or ins.args[0].id not in index:
            continue
        k = index[ins.args[0].id]
        fine = (ins.op == Op.ATOMIC and ins.attrs["kind"] in ("add", "sub")
                and ins.args[0].type.scalar.is_float and ins.result.id not in used
                and not all(i.const_value is not None for i in ins.args[1:1 + ins.args[0].type.ndim]))
        (ok if fine else bad).add(k)
        scatter |= fine and not ins.attrs.get("exclusive")
    return (ok - bad - local) if scatter else set()


def reduction_sites(fn: Function) -> dict:
    """Atomic adds/subs whose element is fixed (constant indices) and whose old value is unused: they
    become partial sums (float32 summed in float64) plus one atomic per chunk of threads.

    Only arrays the kernel touches in no other way qualify: then no thread can observe that its
    contribution is deferred to the end of its chunk (`atomic_add(loss, 0, v); seen[i] = loss[0]` must
    see its own add), and summing per chunk only reassociates a sum whose order atomics leave open.
    Returns id(instruction) -> (array value id, constant index, component)."""
    used = used_ids(fn)
    params = {p.value.id for p in fn.params}
    out = {}
    for ins in fn.walk():
        if ins.op != Op.ATOMIC or ins.attrs["kind"] not in ("add", "sub") or ins.attrs.get("exclusive"):
            continue
        arr = ins.args[0]
        idx = ins.args[1:1 + arr.type.ndim]
        if arr.id not in params or ins.result.id in used or any(i.const_value is None for i in idx):
            continue
        out[id(ins)] = (arr.id, tuple(i.const_value for i in idx), ins.attrs["comp"])
    touched_otherwise = {ins.args[0].id for ins in fn.walk()
                         if ins.op in MEMORY and id(ins) not in out}
    touched_otherwise.update(a.id for ins in fn.walk() if ins.op == Op.NATIVE for a in ins.args)
    return {k: key for k, key in out.items() if key[0] not in touched_otherwise}


def loop_sum_chains(region: Region, carried: list) -> set[int]:
    """Ids of the float add/sub results in a loop body that only accumulate into a loop-carried value
    (`acc = acc + e`, `acc = acc - e`, several in a row, `e` independent of `acc`, `acc` read nowhere else
    in the body, so no intermediate value of the sum is observed). A backend may
    reassociate these, which lets it vectorise the loop with partial sums (as NumPy's pairwise sums and
    Taichi's fast math do); every other float operation keeps its order."""
    producers = {r.id: ins for ins in region.body for r in ins.results}
    uses: dict[int, int] = {}
    for ins in region.walk():
        for a in ins.args:
            uses[a.id] = uses.get(a.id, 0) + 1
    for y in region.yields:
        uses[y.id] = uses.get(y.id, 0) + 1
    chains: set[int] = set()
    for p, y in zip(carried, region.yields):
        if uses.get(p.id) != 1:
            continue
        depends = _depends_on(p, producers)
        link, chain = y, []
        while link.id != p.id:
            ins = producers.get(link.id)
            if (ins is None or ins.op != Op.PRIM or ins.attrs.get("name") not in ("add", "sub")
                    or not (link.type.is_scalar and link.type.is_float) or uses.get(link.id) != 1):
                chain = []
                break
            a, c = ins.args
            if depends(a) == depends(c) or (ins.attrs["name"] == "sub" and not depends(a)):
                chain = []     # both sides (or neither) involve acc, or acc is subtracted: not a sum
                break
            chain.append(link.id)
            link = a if depends(a) else c
        chains.update(chain)
    return chains


def _depends_on(p, producers):
    """A memoised test: does a value of the region depend on `p` (through any instruction)?"""
    memo: dict[int, bool] = {p.id: True}

    def depends(v) -> bool:
        if v.id not in memo:
            ins = producers.get(v.id)
            memo[v.id] = False
            if ins is not None:
                args = list(ins.args) + [a for r in ins.regions for i in r.walk() for a in i.args] + \
                    [y for r in ins.regions for y in r.yields]
                memo[v.id] = any(depends(a) for a in args)
        return memo[v.id]
    return depends


def streamed_outputs(fn: Function) -> set[int]:
    """Parameters of a 1-D kernel that it only stores to, each store at [tid] and outside any loop, with
    4- or 8-byte elements: every thread writes its own element once and nothing reads it back, so on a
    grid larger than the cache those stores may bypass it (non-temporal: no read of the line first)."""
    if fn.attrs.get("tid_ndim", 1) != 1:
        return set()
    index = {p.value.id: k for k, p in enumerate(fn.params)}
    tids = {ins.result.id for ins in fn.walk() if ins.op == Op.TID}
    ok, bad = set(), set()

    def visit(region: Region, in_loop: bool) -> None:
        for ins in region.body:
            if ins.op == Op.NATIVE:
                bad.update(index[a.id] for a in ins.args if a.id in index)
            elif ins.op in MEMORY and ins.args[0].id in index:
                k, t = index[ins.args[0].id], ins.args[0].type
                fine = (ins.op == Op.STORE and not in_loop and t.ndim == 1 and ins.args[1].id in tids
                        and t.scalar.np_dtype.itemsize in (4, 8))
                (ok if fine else bad).add(k)
            for r in ins.regions:
                visit(r, in_loop or ins.op in LOOPS)
    visit(fn.body, False)
    return ok - bad
