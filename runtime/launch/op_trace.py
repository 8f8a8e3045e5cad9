"""Naming the operation that made a NaN or Inf: one thread of a launch re-run in Python, every value kept.

When a launch wrote a non-finite value (gk.config.check_nan, `gradkit debug`), `find_origin` interprets the
lowered IR the backend ran (the same `Function`) for single threads over host copies of the arguments as they
were before the launch, until it finds a thread that writes a non-finite value into the offending element.
In that thread's run the first primitive whose result is non-finite while its operands are finite is the
origin (`sqrt(-1.0) = nan`, `div(1.0, 0.0) = inf`); in an adjoint kernel it is also tied to the forward
operation whose gradient it computes (same source location), with that operation's operands. When no
primitive made it, the origin is the first non-finite value the thread read (from an array or a scalar
argument): the NaN came from earlier.

Semantics are the builtins' own `eval` in the IR's dtypes (float32 stays float32), integer `//` and `%` by
zero give 0 as backends/base.py asks. The search is bounded (threads and seconds): a launch of millions of
threads is searched near the offending element's own thread first.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...core.builtins import BUILTINS
from ...core.ir import Function, Instr, Region
from ...core.ops import Op

MAX_THREADS = 4096        # threads tried per search
MAX_SECONDS = 2.0         # and wall time
MAX_STEPS = 2_000_000     # instructions per thread (a runaway while loop ends the thread's trace)


@dataclass
class OpOrigin:
    """The first operation of one thread that produced a non-finite value (or read one)."""

    op: str                          # builtin name ('sqrt', 'div', ...), or 'load' / 'argument' for a read
    operands: list                   # its operand values (floats, ints, or lists for vectors)
    result: object                   # the non-finite value
    file: str | None
    line: int | None
    col: int | None
    text: str                        # the source line
    thread: tuple                    # the thread's coordinates in the launch grid
    loops: list = field(default_factory=list)     # [(loop line, iteration)] outermost first
    grad_of: str | None = None       # adjoint launches: the forward op whose gradient this computes
    primal_operands: list | None = None
    primal_result: object = None
    array: str | None = None         # for op 'load': the array parameter read, and the element
    index: list | None = None
    step: int = 0                    # instructions the thread had run when it happened

    def call(self) -> str:
        """'sqrt(0.0) = 0.0'-style text of the op itself."""
        if self.op == "load":
            return f"{self.array}[{', '.join(map(str, self.index or []))}] = {_fmt(self.result)}"
        if self.op == "argument":
            return f"{self.array} = {_fmt(self.result)}"
        return f"{self.op}({', '.join(_fmt(v) for v in self.operands)}) = {_fmt(self.result)}"

    def describe(self) -> str:
        """One sentence: what produced the value, where, in which thread and loop iteration."""
        where = f"{self.file}:{self.line}" if self.line is not None else "an unknown line"
        if self.text:
            where += f" (`{self.text.strip()}`)"
        loops = "".join(f", iteration {it} of the loop at line {ln}" for ln, it in self.loops)
        thread = self.thread[0] if len(self.thread) == 1 else self.thread
        if self.op in ("load", "argument"):
            return (f"thread {thread} read the non-finite value {self.call()} at {where}{loops}: it was "
                    "already there before this launch")
        text = f"{self.call()} at {where}, thread {thread}{loops}"
        if self.grad_of:
            primal = (f"; the forward {self.grad_of}({', '.join(_fmt(v) for v in self.primal_operands)}) = "
                      f"{_fmt(self.primal_result)}" if self.primal_operands is not None else "")
            return f"the gradient of `{self.grad_of}` computed {text}{primal}"
        return f"`{self.op}` computed {text}"

    def as_dict(self) -> dict:
        """Plain data (JSON-ready) for debug bundles."""
        out = {k: getattr(self, k) for k in ("op", "file", "line", "col", "text", "grad_of", "array")}
        out.update(operands=[_plain(v) for v in self.operands], result=_plain(self.result),
                   thread=list(self.thread), loops=[list(x) for x in self.loops],
                   primal_operands=None if self.primal_operands is None else [_plain(v) for v in self.primal_operands],
                   primal_result=_plain(self.primal_result), index=self.index, call=self.call(),
                   description=self.describe())
        return out


def _plain(v):
    if v is None:
        return None
    a = np.asarray(v)
    if a.ndim:
        return [_plain(x) for x in a.tolist()]
    x = a.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)             # JSON has no NaN / Infinity literals
    return x


def _fmt(v) -> str:
    a = np.asarray(v)
    if a.ndim:
        return "(" + ", ".join(_fmt(x) for x in a.reshape(-1)) + ")"
    x = a.item()
    return repr(float(x)) if isinstance(x, float) else str(x)


def _nonfinite(v) -> bool:
    a = np.asarray(v)
    return a.dtype.kind == "f" and not np.isfinite(a).all()


class _Stop(Exception):
    """Ends one thread's trace (a fault, a native snippet, too many steps)."""


class _Memory:
    """The launch's arrays as flat host copies; a thread's writes go to an overlay so every thread tried
    starts from the memory as it was before the launch."""

    def __init__(self, fn: Function, args: list):
        self.flat, self.shapes, self.ncomp, self.names, self.scalars = {}, {}, {}, {}, {}
        for p, a in zip(fn.params, args):
            if p.type.is_array:
                data = np.asarray(a)
                ncomp = max(1, getattr(p.type.dtype, "ncomp", 1) or 1)
                shape = tuple(data.shape[:p.type.ndim])
                self.flat[p.value.id] = data.reshape(-1)
                self.shapes[p.value.id], self.ncomp[p.value.id] = shape, ncomp
                self.names[p.value.id] = p.name
            else:
                self.scalars[p.value.id] = p.type.np_dtype.type(a)
                self.names[p.value.id] = p.name
        self.overlay: dict = {}

    def position(self, arr: int, idx: list, comp) -> int:
        shape = self.shapes[arr]
        if len(idx) != len(shape) or any(not 0 <= int(i) < n for i, n in zip(idx, shape)):
            raise _Stop(f"index {[int(i) for i in idx]} out of bounds of {self.names[arr]}{list(shape)}")
        pos = 0
        for i, n in zip(idx, shape):
            pos = pos * n + int(i)
        return pos * self.ncomp[arr] + (int(comp) if comp is not None else 0)

    def read(self, arr: int, pos: int, width: int):
        if width == 1:
            return self.overlay.get((arr, pos), self.flat[arr][pos])
        return np.array([self.read(arr, pos + c, 1) for c in range(width)])

    def write(self, arr: int, pos: int, value, width: int) -> None:
        if width == 1:
            self.overlay[(arr, pos)] = value
        else:
            for c in range(width):
                self.overlay[(arr, pos + c)] = np.asarray(value).reshape(-1)[c]


class _Thread:
    """One thread's run of `fn`: the value environment, the origin found so far, whether it hit the target."""

    def __init__(self, fn: Function, memory: _Memory, dims: tuple, thread: int, target: tuple | None,
                 primal_ops: dict):
        self.fn, self.mem, self.dims, self.linear = fn, memory, dims, thread
        self.coords = tuple(int(c) for c in np.unravel_index(thread, dims)) if dims else (thread,)
        self.target, self.primal_ops = target, primal_ops
        self.env: dict = dict(memory.scalars)
        self.stacks: dict = {}
        self.loops: list = []
        self.origin: OpOrigin | None = None
        self.first_read: OpOrigin | None = None
        self.hit = False
        self.steps = 0
        self.history: list = []           # (loc key, name, operands, result) of every primitive run

    def run(self) -> None:
        memory = self.mem
        memory.overlay = {}
        for vid, v in memory.scalars.items():
            if _nonfinite(v) and self.first_read is None:
                self.first_read = self._origin("argument", [], v, None, array=memory.names[vid])
        with np.errstate(all="ignore"):
            self.region(self.fn.body, [])

    def region(self, region: Region, params: list) -> list:
        env = self.env
        for p, v in zip(region.params, params):
            env[p.id] = v
        for ins in region.body:
            self.steps += 1
            if self.steps > MAX_STEPS:
                raise _Stop("too many steps")
            getattr(self, "op_" + ins.op)(ins)
        return [env[y.id] for y in region.yields]

    def args(self, ins: Instr) -> list:
        return [self.env[a.id] for a in ins.args]

    def _origin(self, op, operands, result, ins, **extra) -> OpOrigin:
        loc = ins.loc if ins is not None else None
        return OpOrigin(op=op, operands=list(operands), result=result, file=getattr(loc, "file", None),
                        line=getattr(loc, "line", None), col=getattr(loc, "col", None),
                        text=getattr(loc, "text", "") or "", thread=self.coords,
                        loops=[tuple(x) for x in self.loops], step=self.steps, **extra)

    # control flow
    def op_if(self, ins: Instr) -> None:
        (cond,) = self.args(ins)
        ys = self.region(ins.regions[0] if cond else ins.regions[1], [])
        for r, v in zip(ins.results, ys):
            self.env[r.id] = v

    def op_for(self, ins: Instr) -> None:
        start, stop, step, *carried = self.args(ins)
        (body,) = ins.regions
        iv_type = body.params[0].type.np_dtype.type
        line = ins.loc.line if ins.loc is not None else None
        start, stop, step = int(start), int(stop), int(step)
        self.loops.append([line, 0])
        for k, iv in enumerate(range(start, stop, step) if step else ()):
            self.loops[-1][1] = k
            carried = self.region(body, [iv_type(iv), *carried])
        self.loops.pop()
        for r, v in zip(ins.results, carried):
            self.env[r.id] = v

    def op_while(self, ins: Instr) -> None:
        carried = self.args(ins)
        cond, body = ins.regions
        self.loops.append([ins.loc.line if ins.loc is not None else None, 0])
        k = 0
        while True:
            (c,) = self.region(cond, carried)
            if not c:
                break
            self.loops[-1][1] = k
            carried = self.region(body, carried)
            k += 1
        self.loops.pop()
        for r, v in zip(ins.results, carried):
            self.env[r.id] = v

    # values
    def op_const(self, ins: Instr) -> None:
        self.env[ins.result.id] = ins.result.type.np_dtype.type(ins.attrs["value"])

    def op_prim(self, ins: Instr) -> None:
        name = ins.attrs["name"]
        fn_eval = BUILTINS[name].eval
        args = self.args(ins)
        kwargs = {k: v for k, v in ins.attrs.items() if k != "name"}
        if name in ("floordiv", "mod") and not ins.args[1].type.is_float and args[1] == 0:
            out = ins.result.type.np_dtype.type(0)
        else:
            try:
                out = fn_eval(*args, **kwargs)
            except TypeError:
                out = fn_eval(*args)
        dtype = getattr(ins.result.type, "np_dtype", None)
        if dtype is not None:
            out = np.asarray(out).astype(dtype)[()]
        self.env[ins.result.id] = out
        key = (ins.loc.line, ins.loc.col) if ins.loc is not None else None
        self.history.append((key, name, args, out))
        if self.origin is None and _nonfinite(out) and not any(_nonfinite(a) for a in args):
            self.origin = self._origin(name, args, out, ins)
            self._tie_to_primal(key)

    def _tie_to_primal(self, key) -> None:
        """In an adjoint kernel: the forward op at the origin's source location, with the operands this
        thread's replay of the forward pass gave it."""
        names = self.primal_ops.get(key)
        if not names:
            return
        for k, name, args, out in reversed(self.history[:-1]):
            if k == key and name in names:
                self.origin.grad_of, self.origin.primal_operands, self.origin.primal_result = name, args, out
                return
        self.origin.grad_of = sorted(names)[0] if len(names) == 1 else None

    def op_tid(self, ins: Instr) -> None:
        axis, ndim = ins.attrs["axis"], ins.attrs.get("ndim", 1)
        self.env[ins.result.id] = np.int32(self.linear if ndim == 1 else self.coords[axis])

    def op_shape(self, ins: Instr) -> None:
        self.env[ins.result.id] = ins.result.type.np_dtype.type(self.mem.shapes[ins.args[0].id][ins.attrs["axis"]])

    # memory
    def _access(self, ins: Instr, nidx: int):
        arr = ins.args[0].id
        idx = [self.env[a.id] for a in ins.args[1:1 + nidx]]
        comp = ins.attrs.get("comp")
        width = self.mem.ncomp[arr] if comp is None else 1
        return arr, idx, self.mem.position(arr, idx, comp), width

    def op_load(self, ins: Instr) -> None:
        arr, idx, pos, width = self._access(ins, len(ins.args) - 1)
        value = self.mem.read(arr, pos, width)
        self.env[ins.result.id] = value
        if self.first_read is None and _nonfinite(value):
            self.first_read = self._origin("load", [], value, ins, array=self.mem.names[arr],
                                           index=[int(i) for i in idx])

    def _wrote(self, arr: int, idx: list, new) -> None:
        if self.target is not None and arr == self.target[0] and _nonfinite(new) and \
                tuple(int(i) for i in idx) == self.target[1]:
            self.hit = True

    def op_store(self, ins: Instr) -> None:
        arr, idx, pos, width = self._access(ins, len(ins.args) - 2)
        value = self.env[ins.args[-1].id]
        self.mem.write(arr, pos, value, width)
        self._wrote(arr, idx, value)

    def op_atomic(self, ins: Instr) -> None:
        arr, idx, pos, width = self._access(ins, len(ins.args) - 2)
        value = self.env[ins.args[-1].id]
        old = self.mem.read(arr, pos, width)
        kind = ins.attrs["kind"]
        new = {"add": lambda: old + value, "sub": lambda: old - value, "min": lambda: np.minimum(old, value),
               "max": lambda: np.maximum(old, value), "xchg": lambda: value}[kind]()
        new = np.asarray(new).astype(np.asarray(old).dtype)[()]
        self.mem.write(arr, pos, new, width)
        self.env[ins.result.id] = old
        if self.origin is None and _nonfinite(new) and not _nonfinite(old) and not _nonfinite(value):
            self.origin = self._origin(f"atomic_{kind}", [old, value], new, ins)
        self._wrote(arr, idx, new)

    def op_push(self, ins: Instr) -> None:
        self.stacks.setdefault(ins.attrs.get("stack"), []).append(self.env[ins.args[0].id])

    def op_pop(self, ins: Instr) -> None:
        stack = self.stacks.get(ins.attrs.get("stack"))
        if not stack:
            raise _Stop("value stack empty")
        self.env[ins.result.id] = stack.pop()

    def op_native(self, ins: Instr) -> None:
        raise _Stop("a @gk.func_native snippet cannot be traced")

    def op_call(self, ins: Instr) -> None:
        raise _Stop("an un-inlined call cannot be traced")


def primal_ops(fn: Function | None) -> dict:
    """{(line, col): {prim names}} of a forward function: what an adjoint op at that location differentiates."""
    out: dict = {}
    if fn is not None:
        for ins in fn.walk():
            if ins.op == Op.PRIM and ins.loc is not None and ins.result.type.is_float:
                out.setdefault((ins.loc.line, ins.loc.col), set()).add(ins.attrs["name"])
    return out


def _candidates(n: int, dims: tuple, shape: tuple, index: tuple):
    """Thread ids to try: the offending element's own thread (same coordinates, then same linear id), then
    its neighbours, then every thread in order."""
    tried = set()
    first = []
    if len(index) == len(dims) and all(0 <= i < d for i, d in zip(index, dims)):
        first.append(int(np.ravel_multi_index(index, dims)))
    if shape and all(0 <= i < s for i, s in zip(index, shape)):
        lin = int(np.ravel_multi_index(index, shape))
        first.append(lin)
    for t in first:
        if 0 <= t < n and t not in tried:
            tried.add(t)
            yield t
    for t in range(n):
        if t not in tried:
            yield t


def find_origin(fn: Function, dims: tuple, args: list, target_param: int, index: tuple,
                forward: Function | None = None) -> OpOrigin | None:
    """The origin of the non-finite value the launch of `fn` over `dims` wrote into element `index` of
    parameter `target_param`, given `args`: host NumPy arrays (shaped (*shape, ...) as before the launch)
    and scalars in `fn.params` order. `forward` is the kernel's forward function when `fn` is its adjoint.
    None when no thread tried (within the bounds) writes a non-finite value there."""
    memory = _Memory(fn, args)
    target_id = fn.params[target_param].value.id
    target = (target_id, tuple(int(i) for i in index))
    prims = primal_ops(forward)
    n = math.prod(dims) if dims else 0
    deadline = time.perf_counter() + MAX_SECONDS
    for tried, t in enumerate(_candidates(n, tuple(dims), memory.shapes[target_id], target[1])):
        if tried >= MAX_THREADS or time.perf_counter() > deadline:
            return None
        th = _Thread(fn, memory, tuple(dims), t, target, prims)
        try:
            th.run()
        except _Stop:
            pass
        if th.hit:
            found = [o for o in (th.origin, th.first_read) if o is not None]
            return min(found, key=lambda o: o.step) if found else None
    return None
