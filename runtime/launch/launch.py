"""`gk.launch`: validate arguments, pick the compiled specialisation, run it, record it on a tape.

This is the launch hot path: it does only what every launch needs and leaves
the rest (compilation, binder construction) to cached per-kernel objects.
"""

from __future__ import annotations

from time import perf_counter as _now

from ...ad.variants import FORWARD
from ...backends.analysis import shared_writes
from ...core import config as _settings     # the module: its rules_generation counter
from ...core.config import config
from ..state import current as state
from ..arrays.array_input import _as_shape
from .bounds import check as check_bounds
from .adjoint_args import adjoint_arguments, given_adjoints, tangent_arguments
from .device import get_device
from .kernel import Kernel
from .nan_check import check_after_launch, snapshot
from .plan import flat_arguments, make_plan
from .settings import plain_launch_key, unchanged
from ..tape.tape_consume import consumes_in_context
from .struct_args import flatten_struct_args
from .variants import choose_variant

MAX_THREADS = 2**31 - 1    # thread ids are 32-bit in generated code: a larger grid would wrap them


def normalize_dim(dim) -> tuple[int, ...]:
    """`dim` as a tuple of 1-4 non-negative ints with at most MAX_THREADS threads in all: an int, a NumPy
    integer or a tuple/list of them, by `gk.array`'s shape rule (bools, floats and strings refused: a
    TypeError/ValueError naming `dim`)."""
    if type(dim) is int:
        if not 0 <= dim <= MAX_THREADS:
            raise ValueError(f"launch dim must be between 0 and {MAX_THREADS} (2**31 - 1 threads), got {dim}")
        return (dim,)
    dims = _as_shape(dim, "launch dim")
    total = 1
    for d in dims:
        total *= d
    if total > MAX_THREADS:
        raise ValueError(f"launch dim {dims} has {total} threads; the limit is {MAX_THREADS} (2**31 - 1)")
    return dims


def _pick_device(device, args):
    if device is not None:
        return get_device(device)
    for a in args:
        buf = getattr(a, "buffer", None)
        if buf is not None:
            return a.device
    return get_device(None)


def _flatten(spec, bound):
    if not spec.has_split:
        return bound
    out = []
    for value, (_, n) in zip(bound, spec.split):
        if n == 1:
            out.append(value)
        else:
            out.extend(value)
    return out


def launch(kernel, dim, inputs=(), outputs=(), device=None, adjoint: bool = False, adj_inputs=None,
           adj_outputs=None, record_tape: bool = True, tangent: bool = False, consume: bool = False):
    """Run `kernel` over the grid `dim` with `inputs` then `outputs` matched to its parameters in order.
    Inside a recording `gk.Tape` the launch is recorded (its adjoint runs at `tape.backward`); inside
    `gk.ForwardMode` it runs the tangent kernel. Wrong argument counts, dtypes, devices or shapes raise
    `TypeError`/`ValueError` naming the parameter, before anything runs.

    Args:
        kernel: a `@gk.kernel`.
        dim: the number of threads: an int, or a tuple of up to 4 ints (then `gk.tid()` returns a tuple).
        inputs: the first arguments, in parameter order: gk.arrays for array parameters (not NumPy arrays),
            Python or NumPy scalars (converted to the parameter's type), vectors/matrices, structs.
        outputs: the remaining arguments, usually the arrays the kernel writes (inputs and outputs are
            only told apart for the tape's records and the debugger).
        device: where to run; None: the arrays' device (all must be on one), else the current device.
        adjoint: run the kernel's reverse (adjoint) version instead, accumulating into gradient arrays.
        adj_inputs: with `adjoint`, the gradient of each input (arrays for array parameters, None for
            scalars); None: each array's `.grad`.
        adj_outputs: with `adjoint`, the gradient of each output; None: each array's `.grad`.
        record_tape: record the launch on the active tape (False: run it unrecorded, like `gk.no_grad`).
        tangent: run the tangent (forward-mode) kernel, reading and writing the arrays' `.dual`; implied
            inside `gk.ForwardMode`.
        consume: (a tape's backward pass sets it) the adjoint resets the gradient of every element it
            overwrote, also where the kernel alone would not need it (ad/consume.py)."""
    # The hot path of every launch (W5: ~1 µs in all on cpu): a launch like the kernel's last forward launch
    # (same grid, device and arrays: runtime/launch/plan.py) skips binding and lookups, and every check
    # still holds or runs (scalars converted; the bounds proven at launch do not depend on them).
    if kernel.__class__ is not Kernel and not getattr(kernel, "_gk_kernel", False):
        raise TypeError(f"gk.launch needs a @gk.kernel, got {type(kernel).__name__}")
    plan = kernel._plan
    bound = again = None
    if plan is not None and (device is plan.device or device == plan.device) and not (adjoint or tangent) and \
            (dim == plan.dim if dim.__class__ is int else _same_kind(dim, plan.dim)):
        args = [*inputs, *outputs]
        if len(args) == plan.n_args:
            for k, ref in plan.refs:
                if ref() is not args[k]:
                    break
            else:
                c = config      # the settings the plan was made under (settings.plain_launch_key), inline
                if (c.debug, c.adjoint_stack_size, c.fast_math, _settings.rules_generation, c.default_fp,
                        c.check_nan) == plan.settings and state.forward_mode is None:
                    for k, convert in plan.scalars:
                        args[k] = convert(args[k], plan.dev)
                    if kernel._plan_misses:
                        kernel._plan_misses = 0
                    again = plan.again
                    if not c.check_nan:
                        if not record_tape or state.tape is None or not kernel.recorded:
                            try:
                                if again is None:
                                    if plan.n:
                                        plan.launch(plan.compiled, plan.dims, args)
                                elif plan.changed:
                                    plan.launch(plan.compiled, plan.dims, args, again, plan.changed)
                                elif not plan.relaunch(plan.compiled, again):
                                    plan.launch(plan.compiled, plan.dims, args, again)
                            finally:     # a launch stopped by a fault or Ctrl-C may have written part of its outputs
                                for k in plan.written:
                                    a = args[k]
                                    if a._family is None:
                                        a.version += 1
                                    else:
                                        a._bump()
                            return None
                        tape = state.tape           # recorded: the tape's hooks around the same launch
                        prepared = tape.before_launch(kernel, args)
                        t0 = _now()
                        _run_planned(plan, args)
                        tape.record_launch(kernel, plan.dims, plan.dev, args, len(inputs), FORWARD,
                                           (_now() - t0) * 1e3, prepared)
                        return None
                    bound = call_args = args
                    dims, n, dev, spec, variant = plan.dims, plan.n, plan.dev, plan.spec, FORWARD
    if bound is None:
        if kernel.struct_params and not (adjoint or tangent) and \
                _launch_struct_planned(kernel, dim, device, inputs, outputs, record_tape):
            return None
        other = kernel._plan_other
        if other is not None and not (adjoint or tangent):
            # the plan before the last (state arrays swapped each step alternate between two plans)
            args = [*inputs, *outputs]
            if _matches(other, dim, device, args):
                kernel._plan, kernel._plan_other = other, kernel._plan
                _launch_planned(kernel, other, args, len(inputs), record_tape)
                return None
        if dim.__class__ is int and 0 <= dim <= MAX_THREADS:
            dims, n = (dim,), dim
        else:
            dims = normalize_dim(dim)
            n = 1
            for d in dims:
                n *= d
        binder = kernel._binder or kernel.binder()
        if kernel.struct_params:
            inputs, outputs, adj_inputs, adj_outputs = flatten_struct_args(
                kernel.struct_params, len(kernel.params), inputs, outputs, adj_inputs, adj_outputs)
        args = [*inputs, *outputs]
        dev = get_device(device) if device is not None else _pick_device(None, args)
        bound = binder(args, dev)
        given = given_adjoints(kernel, len(args), len(inputs), adj_inputs, adj_outputs) if adjoint else None
        if adjoint or tangent or state.forward_mode is not None:
            tangent = tangent or state.forward_mode is not None
            if adjoint and not consume and state.consume_seen is not None:
                consume = consumes_in_context(kernel, bound)     # kernel.grad() in a @gk.grad_for function
            variant = choose_variant(kernel, bound, dims, dev, adjoint=adjoint, tangent=tangent, consume=consume,
                                     given=given)
        else:
            variant = FORWARD
        spec = kernel.specialization(dev, variant)
        if spec.tid_ndim != len(dims) and spec.tid_ndim > 1:
            _check_tid(kernel, spec, dims)
        call_args = _call_arguments(kernel, spec, variant, bound, given, adjoint, dev)
        if adjoint and spec.exclusive and shared_writes(call_args, spec.written):
            # the adjoint adds into its own elements without atomics, which another gradient sharing that
            # memory would race with: the adjoint with atomics there instead
            variant = choose_variant(kernel, bound, dims, dev, adjoint=True, tangent=tangent, consume=consume,
                                     shared=True, given=given)
            spec = kernel.specialization(dev, variant)
            call_args = _call_arguments(kernel, spec, variant, bound, given, adjoint, dev)
        if adjoint:
            state.adjoint_variant = variant    # what ran, for the tape's backward records (runtime/tape/snapshots.py)
        if spec.bounds_fast is not None and n:      # forward launches only (runtime/launch/bounds.py)
            _check_bounds(kernel, spec, dims, n, call_args)
        if variant is FORWARD and (device is not None or kernel._array_args):
            _plan_next(kernel, dim, device, args, bound, dims, n, dev, spec)
    tape = state.tape if record_tape and not adjoint and kernel.recorded else None
    if tape is None and not config.check_nan:
        try:
            if n:
                spec.launch(spec.compiled, dims, call_args)
        finally:         # a launch stopped by a fault or Ctrl-C may have written part of its outputs
            for k in spec.written:
                call_args[k]._bump()
        return None
    prepared = tape.before_launch(kernel, bound) if tape is not None else None
    t0 = _now() if tape is not None else 0.0
    if config.check_nan:
        before = snapshot(spec, call_args)
    if again is not None:           # a pre-bound launch (runtime/launch/plan.py), under NaN checks
        _run_planned(plan, call_args)
    else:
        try:
            if n:
                spec.launch(spec.compiled, dims, call_args)
        finally:         # a launch stopped by a fault or Ctrl-C may have written part of its outputs
            for k in spec.written:
                call_args[k]._bump()
    if tape is not None:
        tape.record_launch(kernel, dims, dev, bound, len(inputs), variant, (_now() - t0) * 1e3, prepared)
    if config.check_nan:
        check_after_launch(kernel, spec, call_args, variant, before, dims)
    return None


def _matches(plan, dim, device, args: list) -> bool:
    """Whether a forward launch with these values takes `plan` (the pre-bound path's conditions, as `launch`
    tests them inline for the kernel's last plan), with NaN checks off."""
    return len(args) == plan.n_args and _holds(plan, dim, device, args)


def _holds(plan, dim, device, args: list) -> bool:
    """`_matches` but for the argument count (flat arguments: a struct plan's are counted by its user's)."""
    if not (device is plan.device or device == plan.device):
        return False
    if not (dim == plan.dim if dim.__class__ is int else _same_kind(dim, plan.dim)):
        return False
    for k, ref in plan.refs:
        if ref() is not args[k]:
            return False
    c = config
    return (c.debug, c.adjoint_stack_size, c.fast_math, _settings.rules_generation, c.default_fp,
            c.check_nan) == plan.settings and not c.check_nan and state.forward_mode is None


def _launch_struct_planned(kernel, dim, device, inputs, outputs, record_tape: bool) -> bool:
    """Run a forward launch of a kernel with struct parameters by its last or other plan when the struct
    arguments' fields are the plan's arrays (runtime/launch/plan.py); False when neither plan holds."""
    for plan in (kernel._plan, kernel._plan_other):
        if plan is None or plan.structs is None:
            continue
        got = flat_arguments(plan, inputs, outputs)
        if got is None or not _holds(plan, dim, device, got[0]):
            continue
        if plan is not kernel._plan:
            kernel._plan, kernel._plan_other = plan, kernel._plan
        _launch_planned(kernel, plan, got[0], got[1], record_tape)
        return True
    return False


def _launch_planned(kernel, plan, args: list, n_inputs: int, record_tape: bool) -> None:
    """A forward launch that `_matches` `plan`: its scalars converted, run, recorded on the tape (what the
    pre-bound path in `launch` does inline)."""
    for k, convert in plan.scalars:
        args[k] = convert(args[k], plan.dev)
    kernel._plan_misses = 0
    tape = state.tape if record_tape and kernel.recorded else None
    if tape is None:
        _run_planned(plan, args)
        return
    prepared = tape.before_launch(kernel, args)
    t0 = _now()
    _run_planned(plan, args)
    tape.record_launch(kernel, plan.dims, plan.dev, args, n_inputs, FORWARD, (_now() - t0) * 1e3, prepared)


def _run_planned(plan, args) -> None:
    """Run a pre-bound launch (as packed when the plan has a backend token and the backend still holds it),
    then bump the versions of what it wrote (also when stopped midway: it may have written part)."""
    again = plan.again
    try:
        if again is None:
            if plan.n:
                plan.launch(plan.compiled, plan.dims, args)
        elif plan.changed:
            plan.launch(plan.compiled, plan.dims, args, again, plan.changed)
        elif not plan.relaunch(plan.compiled, again):
            plan.launch(plan.compiled, plan.dims, args, again)
    finally:
        for k in plan.written:
            args[k]._bump()


def _same_kind(dim, planned) -> bool:
    """`dim` equals the planned grid and is made of the same kinds of values (True == 1, but a bool grid
    is refused by the full path; a planned grid is an int or a tuple of ints, runtime/launch/plan.py)."""
    if dim.__class__ is int:
        return planned.__class__ is int and dim == planned
    return dim.__class__ is planned.__class__ and all(d.__class__ is int for d in dim) and dim == planned


def _check_bounds(kernel, spec, dims, n, call_args) -> None:
    """Prove the forward kernel's affine accesses in bounds for this grid and these arguments."""
    grid = dims if spec.tid_ndim == len(dims) else (n,)     # a 1-D gk.tid() counts every thread
    for p, d, axis, extra in spec.bounds_fast:     # `x[i + c]`: extent >= grid + c
        if call_args[p].shape[d] < grid[axis] + extra:
            check_bounds(kernel.key, spec.fn, spec.bounds, grid, call_args)
    if spec.bounds_rest:
        check_bounds(kernel.key, spec.fn, spec.bounds_rest, grid, call_args, spec.bounds)


def _plan_next(kernel, dim, device, args, bound, dims, n, dev, spec) -> None:
    """Keep a plan of this forward launch for the next one (runtime/launch/plan.py); after repeated misses
    (a kernel launched on other arrays each time) only now and then, so that planning stays cheap."""
    misses = kernel._plan_misses = kernel._plan_misses + 1
    if misses > 2 and misses & (misses - 1):
        return
    if dim.__class__ is not int and not (dim.__class__ is tuple and _same_kind(dim, dim)):
        return                       # a list or NumPy grid: compared by value it could change in place
    plan = make_plan(kernel, dim, device, args, bound, dims, n, dev, spec, plain_launch_key())
    if plan is not None:
        kernel._plan_other, kernel._plan = kernel._plan, plan


def _call_arguments(kernel, spec, variant, bound, given, adjoint: bool, dev) -> list:
    """The arguments `spec` is called with: the bound ones, then adjoint arrays, then tangent arrays."""
    call_args = _flatten(spec, bound) if spec.has_split else bound
    if adjoint:
        call_args = call_args + adjoint_arguments(kernel, spec, bound, given)
    if variant.tangent:
        call_args = call_args + tangent_arguments(kernel, spec, call_args, dev)
    return call_args


class PreparedAdjoint:
    """A recorded launch's adjoint, bound once and replayed by later backward passes while its gradient
    arrays stay the same objects and the settings it was compiled for hold (Tape.backward's fast path:
    no argument parsing, no specialisation lookup per launch)."""

    __slots__ = ("key", "spec", "dims", "call_args", "grads", "sources", "folded", "threads", "again", "changed")

    def __init__(self, key, spec, dims, call_args, grads, sources, again=None, changed=None):
        self.key, self.spec, self.dims, self.call_args = key, spec, dims, call_args
        self.grads, self.sources = grads, sources
        self.threads = 0 not in dims
        self.folded = None        # (seeds, PreparedAdjoint | None): the last `seeded` answer
        # the backend's token for these arrays (holds none; a revived recipe passes its own, shared with the
        # recipes of the same arrays: Specialization.relaunch, runtime/launch/plan.py) and the positions of
        # the scalars, which may differ between the runs with one token
        self.again = object() if again is None else again
        self.changed = tuple(k for k, x in enumerate(call_args) if not hasattr(x, "buffer")) \
            if changed is None else changed

    def valid(self) -> bool:
        c = config
        if c.check_nan or state.forward_mode:
            return False          # NaN checks and forward-over-reverse take `launch`
        if (c.debug, c.adjoint_stack_size, c.fast_math, _settings.rules_generation, c.default_fp) != self.key and \
                not unchanged(self.key):
            return False          # other settings (the tuple is codegen_key()'s fields: settings.py)
        for a, g in zip(self.sources, self.grads):
            if a.grad is not g:
                return False
        return True

    def seeded(self, kernel, seeds: tuple) -> PreparedAdjoint | None:
        """This adjoint of `kernel` with the gradients at `seeds` ((index in `grads`, value) pairs) passed as one value
        each (ad/uniform.py), or None where the adjoint writes such a gradient or needs it as an array."""
        folded = self.folded
        if folded is not None and folded[0] == seeds:
            return folded[1]
        out = None
        spec, call_args = self.spec, self.call_args
        first = len(call_args) - len(self.grads)
        # a gradient the adjoint writes (adds into, resets), at that position or another, stays an array
        written = {id(call_args[p]) for p in spec.written}
        kept = [(first + m, value) for m, value in seeds if id(call_args[first + m]) not in written]
        positions = tuple(p for p, _ in kept)
        if positions and len(spec.fn.params) == len(call_args):
            variant = kernel.seeded(spec.variant, positions)
            if variant is not spec.variant:
                folded_spec = kernel.specialization(spec.device, variant)
                args = list(call_args)
                for p, value in kept:
                    args[p] = folded_spec.fn.params[p].type.np_dtype.type(value)
                out = PreparedAdjoint(self.key, folded_spec, self.dims, args, self.grads, self.sources)
        self.folded = (seeds, out)
        return out

    def run(self) -> None:
        spec, call_args = self.spec, self.call_args
        if self.threads:
            if spec.relaunch is None:
                spec.launch(spec.compiled, self.dims, call_args)
            elif self.changed:          # the arrays as packed for this token last, the scalars written anew
                spec.launch(spec.compiled, self.dims, call_args, self.again, self.changed)
            elif not spec.relaunch(spec.compiled, self.again):
                spec.launch(spec.compiled, self.dims, call_args, self.again)
        for k in spec.written:
            a = call_args[k]
            if a._family is None:
                a.version += 1
            else:
                a._bump()


def prepare_adjoint(kernel, dims, inputs, outputs, device, originals=None, consume: bool = False
                    ) -> PreparedAdjoint | None:
    """Bind the adjoint launch of a recorded launch; None when an array lacks `.grad` (its adjoint is a
    scratch array that must start at zero each time, so the launch goes through `launch`). `originals`:
    the recorded arguments whose gradients to use when saved copies stand in for some inputs; `consume`
    as for `launch`."""
    dev = get_device(device)
    bound = kernel.binder()([*inputs, *outputs], dev)
    for shared in (False, True):
        spec = kernel.specialization(dev, choose_variant(kernel, bound, tuple(dims), dev, adjoint=True,
                                                         consume=consume, shared=shared))
        sources = [(bound if originals is None else originals)[j] for j in spec.adjoint_sources]
        grads = [a.grad for a in sources]
        if any(g is None for g in grads):
            return None
        call_args = list(_flatten(spec, bound)) + grads
        if not (spec.exclusive and shared_writes(call_args, spec.written)):     # as in `launch`
            break
    return PreparedAdjoint(config.codegen_key(), spec, tuple(dims), call_args, grads, sources)


def _check_tid(kernel, spec, dims) -> None:
    want = spec.fn.attrs.get("tid_ndim", 1)
    if want != len(dims) and want > 1:
        raise ValueError(f"kernel '{kernel.key}' unpacks gk.tid() into {want} indices but was launched with "
                         f"dim={dims} ({len(dims)} dimensions)")
