"""A vectorised interpreter of lowered gradkit IR: every thread of a launch at once, in NumPy.

Each SSA value is a NumPy array with one entry per thread of the launch, or a 0-d NumPy
scalar when it is the same for every thread (constants, scalar parameters, array extents and
whatever is computed only from those). Computation stays in the IR's own dtypes, so float32
kernels round like the compiled backends do.

Control flow runs under a *mask* (a bool array over the threads, or None for all of them):
  * `if` runs each region for the threads that take it (a region nobody takes is skipped; a
    uniform condition runs one region) and merges the yielded values with `np.where`;
  * `for` / `while` iterate while any thread is still looping; a thread whose loop ended keeps
    its carried values (`np.where`) and is masked out of the loop body;
  * only load/store/atomic/push/pop look at the mask: threads outside it neither touch memory
    nor fault. Pure ops compute on every entry (masked-out entries are never observed), with
    NumPy's floating-point warnings silenced, since kernels do not warn.

Instructions run in lock-step: instruction k runs for every thread before instruction k+1, so a
thread's load sees every other thread's earlier stores. Races between threads are undefined
behaviour on real devices; here stores and atomics resolve them in thread-id order (memory.py).

Primitive semantics are the builtins table's own (`BUILTINS[name].eval`); the only additions are
those backends/base.py asks of every backend: integer `//` and `%` by zero give 0.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from gradkit.backends.analysis import reduction_sites
from gradkit.backends.base import CompileOptions, bounds_sites
from gradkit.core.builtins import BUILTINS
from gradkit.core.ir import Function, Instr, Region
from gradkit.core.ops import Op

from . import memory, native

Value = object   # a NumPy array over the threads, or a 0-d NumPy scalar (uniform)


def _uniform(v) -> bool:
    return np.ndim(v) == 0


def _where(mask: np.ndarray, a, b, dtype: np.dtype):
    out = np.where(mask, a, b)
    return out if out.dtype == dtype else out.astype(dtype)


def _and(mask: np.ndarray | None, cond) -> np.ndarray:
    """mask ∧ cond as a fresh bool array over the threads (cond is a thread array)."""
    cond = np.asarray(cond, dtype=bool)
    return cond.copy() if mask is None else mask & cond


def _eval_kwargs(fn_eval, attrs: dict) -> dict:
    """The instruction attributes `fn_eval` takes as keywords (e.g. `to` for cast)."""
    attrs = {k: v for k, v in attrs.items() if k != "name"}
    if not attrs or isinstance(fn_eval, np.ufunc):    # ufuncs take the operands positionally only
        return {}
    try:
        params = inspect.signature(fn_eval).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return attrs
    positional_only = inspect.Parameter.POSITIONAL_ONLY
    return {k: v for k, v in attrs.items() if k in params and params[k].kind is not positional_only}


class Plan:
    """Per-function facts computed once at compile time.

    `drops[id(region)]` lists, per instruction of the region, the values defined in that region
    whose last use it is (freed right after it runs), plus the values to free once the region's
    yields were read: the interpreter holds only live values, so big launches stay small."""

    def __init__(self, fn: Function):
        self.sites = {id(ins): k for k, ins in enumerate(bounds_sites(fn))}
        # atomic adds onto one element whose old value nobody reads: summed as accurately as the other
        # backends' partial sums (float32 in float64), not as a float32 running sum (backends/README.md)
        self.reductions = set(reduction_sites(fn))
        # prim instruction -> (eval, keyword attrs it takes, is integer // or %)
        self.prims: dict[int, tuple] = {}
        for ins in fn.walk():
            if ins.op == Op.PRIM:
                name = ins.attrs["name"]
                fn_eval = BUILTINS[name].eval
                int_div = name in ("floordiv", "mod") and not ins.args[1].type.is_float
                self.prims[id(ins)] = (fn_eval, _eval_kwargs(fn_eval, ins.attrs), int_div)
        self.drops: dict[int, tuple[list[list[int]], list[int]]] = {}
        self._plan(fn.body)

    def _plan(self, region: Region) -> set[int]:
        """Plan `region` (and nested ones); return every value id it or its nested regions use."""
        defined = {p.id: -1 for p in region.params}
        last: dict[int, int] = {}
        used_here: set[int] = set()
        for k, ins in enumerate(region.body):
            uses = {a.id for a in ins.args}
            for sub in ins.regions:
                uses |= self._plan(sub)
            for vid in uses:
                last[vid] = k
            used_here |= uses
            for r in ins.results:
                defined[r.id] = k
        yielded = {y.id for y in region.yields}
        drops: list[list[int]] = [[] for _ in region.body]
        at_end: list[int] = []
        for vid, k in defined.items():
            if vid in yielded or (vid not in last and k < 0):
                at_end.append(vid)
            else:
                drops[last.get(vid, k)].append(vid)
        self.drops[id(region)] = (drops, at_end)
        return used_here | yielded


class Run:
    """One launch: the environment of live values, the threads, memory arguments and faults."""

    def __init__(self, fn: Function, plan: Plan, options: CompileOptions, dim: tuple[int, ...], args: list):
        self.fn, self.plan, self.options, self.dim = fn, plan, options, tuple(int(d) for d in dim)
        self.n = math.prod(self.dim)
        self.faults = memory.Faults()
        self.cache: dict = {}
        self.env: dict[int, Value] = {}
        self.arrays: dict[int, memory.ArrayArg] = {}
        self._stack: memory.ValueStack | None = None
        if len(args) != len(fn.params):
            raise TypeError(f"kernel '{fn.name}' takes {len(fn.params)} arguments, got {len(args)}")
        for p, a in zip(fn.params, args):
            if p.type.is_array:
                self.arrays[p.value.id] = memory.bind_array(p, a)
            else:
                self.env[p.value.id] = p.type.np_dtype.type(a)

    @property
    def stack(self) -> memory.ValueStack:
        if self._stack is None:
            self._stack = memory.ValueStack(self.n, self.options.stack_size, self.faults, self.cache)
        return self._stack

    def execute(self) -> None:
        if self.n == 0:
            return
        with np.errstate(all="ignore"):
            self.region(self.fn.body, [], None)

    # Regions ------------------------------------------------------------------
    def region(self, region: Region, params: list[Value], mask: np.ndarray | None) -> list[Value]:
        """Run `region` for the threads in `mask` with its parameters bound; return its yields."""
        env = self.env
        for p, v in zip(region.params, params):
            env[p.id] = v
        drops, at_end = self.plan.drops[id(region)]
        for ins, dead in zip(region.body, drops):
            OPS[ins.op](self, ins, mask)
            for vid in dead:
                env.pop(vid, None)
        out = [env[y.id] for y in region.yields]
        for vid in at_end:
            env.pop(vid, None)
        return out

    def args(self, ins: Instr) -> list[Value]:
        return [self.env[a.id] for a in ins.args]

    def set(self, ins: Instr, value: Value) -> None:
        dt = ins.result.type.np_dtype
        value = np.asarray(value) if not isinstance(value, (np.ndarray, np.generic)) else value
        self.env[ins.result.id] = value if value.dtype == dt else value.astype(dt)

    # Control flow ---------------------------------------------------------------
    def op_if(self, ins: Instr, mask) -> None:
        (cond,) = self.args(ins)
        then, other = ins.regions
        if _uniform(cond):
            ys = self.region(then if cond else other, [], mask)
        else:
            m_then, m_else = _and(mask, cond), _and(mask, ~np.asarray(cond, dtype=bool))
            run_then, run_else = bool(m_then.any()), bool(m_else.any())
            if run_then and run_else:
                yt, ye = self.region(then, [], m_then), self.region(other, [], m_else)
                ys = [_where(cond, a, b, r.type.np_dtype) for a, b, r in zip(yt, ye, ins.results)]
            else:
                ys = self.region(then, [], m_then) if run_then else self.region(other, [], m_else)
        for r, v in zip(ins.results, ys):
            self.env[r.id] = v

    def op_for(self, ins: Instr, mask) -> None:
        start, stop, step, *carried = self.args(ins)
        (body,) = ins.regions
        iv_type = body.params[0].type.np_dtype
        if _uniform(start) and _uniform(stop) and _uniform(step):
            # Every thread runs the same trips: the induction variable stays uniform, no merging.
            trips = range(int(start), int(stop), int(step)) if int(step) != 0 else range(0)
            for iv in trips:
                carried = self.region(body, [iv_type.type(iv), *carried], mask)
        else:
            iv = np.broadcast_to(np.asarray(start, dtype=iv_type), (self.n,))
            up = np.asarray(step) > 0
            down = np.asarray(step) < 0   # step 0 would never end: such threads run no trips

            def going(i):
                return (up & (i < stop)) | (down & (i > stop))

            active = _and(mask, going(iv))
            while active.any():
                new = self.region(body, [iv, *carried], active)
                carried = [_where(active, y, old, r.type.np_dtype)
                           for y, old, r in zip(new, carried, ins.results)]
                iv = (iv + step).astype(iv_type, copy=False)
                active &= going(iv)
        for r, v in zip(ins.results, carried):
            self.env[r.id] = v

    def op_while(self, ins: Instr, mask) -> None:
        carried = self.args(ins)
        cond_region, body = ins.regions
        active, narrowed = mask, False
        while True:
            (c,) = self.region(cond_region, carried, active)
            if _uniform(c):
                if not c:
                    break
            else:
                active, narrowed = _and(active, c), True
                if not active.any():
                    break
            new = self.region(body, carried, active)
            if narrowed:   # threads whose loop ended keep their values
                new = [_where(active, y, old, r.type.np_dtype)
                       for y, old, r in zip(new, carried, ins.results)]
            carried = new
        for r, v in zip(ins.results, carried):
            self.env[r.id] = v

    # Values ------------------------------------------------------------------------
    def op_const(self, ins: Instr, mask) -> None:
        self.env[ins.result.id] = ins.result.type.np_dtype.type(ins.attrs["value"])

    def op_prim(self, ins: Instr, mask) -> None:
        fn_eval, kwargs, int_div = self.plan.prims[id(ins)]
        args = self.args(ins)
        if int_div:
            # base.py: integer // and % by zero give 0 (NumPy would warn and give 0 anyway; be explicit).
            a, b = args
            zero = b == 0
            safe_b = np.where(zero, b.dtype.type(1), b).astype(b.dtype, copy=False)
            out = np.where(zero, b.dtype.type(0), fn_eval(a, safe_b))
        else:
            out = fn_eval(*args, **kwargs)
        self.set(ins, out)

    def op_tid(self, ins: Instr, mask) -> None:
        axis, ndim = ins.attrs["axis"], ins.attrs.get("ndim", 1)
        key = ("tid", axis, ndim)
        v = self.cache.get(key)
        if v is None:
            if ndim == 1:     # one index in a launch of any rank: the linear (row-major) thread id
                v = np.arange(self.n, dtype=np.int32)
            elif ndim == len(self.dim):
                v = np.unravel_index(np.arange(self.n), self.dim)[axis].astype(np.int32)
            else:
                raise ValueError(f"kernel '{self.fn.name}' unpacks gk.tid() into {ndim} indices but was "
                                 f"launched with dim={self.dim}")
            self.cache[key] = v
        self.env[ins.result.id] = v

    def op_shape(self, ins: Instr, mask) -> None:
        arr = self.arrays[ins.args[0].id]
        self.env[ins.result.id] = ins.result.type.np_dtype.type(arr.shape[ins.attrs["axis"]])

    # Memory -------------------------------------------------------------------------
    def _locate(self, ins: Instr, mask, nidx: int):
        arr = self.arrays[ins.args[0].id]
        idx = [self.env[a.id] for a in ins.args[1:1 + nidx]]
        lanes, pos, clean = memory.locate(arr, idx, ins.attrs["comp"], memory.lanes_of(mask), self.n,
                                          self.plan.sites[id(ins)], self.faults, self.cache)
        return arr, lanes, pos, clean

    def op_load(self, ins: Instr, mask) -> None:
        arr, lanes, pos, clean = self._locate(ins, mask, len(ins.args) - 1)
        self.env[ins.result.id] = memory.load(arr, lanes, pos, clean, self.n, ins.result.type.np_dtype)

    def op_store(self, ins: Instr, mask) -> None:
        arr, lanes, pos, _ = self._locate(ins, mask, len(ins.args) - 2)
        memory.store(arr, lanes, pos, self.env[ins.args[-1].id])

    def op_atomic(self, ins: Instr, mask) -> None:
        arr, lanes, pos, _ = self._locate(ins, mask, len(ins.args) - 2)
        self.env[ins.result.id] = memory.atomic(arr, lanes, pos, self.env[ins.args[-1].id], ins.attrs["kind"],
                                                self.n, ins.result.type.np_dtype,
                                                wide_sum=id(ins) in self.plan.reductions)

    def op_push(self, ins: Instr, mask) -> None:
        self.stack.push(ins, self.env[ins.args[0].id], memory.lanes_of(mask))

    def op_pop(self, ins: Instr, mask) -> None:
        self.env[ins.result.id] = self.stack.pop(ins.result.type.np_dtype, memory.lanes_of(mask))

    def op_native(self, ins: Instr, mask) -> None:
        native.call(self, ins, memory.lanes_of(mask))


OPS = {name[3:]: fn for name, fn in vars(Run).items() if name.startswith("op_")}
