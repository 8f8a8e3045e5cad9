"""Pre-bound forward launches: a kernel launched again on the same grid, device and arrays (issue 43, W5).

Time-stepped programs launch one kernel thousands of times with the same arguments, or the same arrays
and a new step number, or two sets of arrays swapped every step. `gk.launch` keeps, per kernel, the plans
of its last two forward launches (Kernel._plan, _plan_other): the grid, the device, the arrays (weak
references, compared by identity; the plan holds no array), the specialisation and the code-generation
settings. A launch that matches one (launch.py tests the last inline, the other on the general path's
entry) skips binding, device lookup, grid normalisation, variant choice and the specialisation lookup;
every check those did still holds, because an array's dtype, shape and device never change, the grid and
device are the same values and the settings are compared. A backend with `relaunch` (the CPU backend)
then runs the arguments it packed for the plan's last launch again, or rewrites only the scalars' slots,
unless another launch of the kernel packed since. Scalars are converted (checked) again by their
parameter's converter on every launch; the bounds proven at launch (runtime/launch/bounds.py) involve
thread ids and constants only, so a new scalar value needs no new proof. Plans are immutable once made, so
threads may share them.
"""

from __future__ import annotations

import weakref


class LaunchPlan:
    """The last forward launch of a kernel, bound (see the module docstring)."""

    __slots__ = ("dim", "device", "n_args", "refs", "scalars", "dev", "dims", "n", "spec", "settings",
                 "again", "changed", "launch", "relaunch", "compiled", "written")

    def __init__(self, dim, device, args, bound, dims, n, dev, spec, settings, converters):
        self.dim, self.device, self.n_args = dim, device, len(args)
        self.dev, self.dims, self.n, self.spec = dev, dims, n, spec
        self.settings = settings        # settings.plain_launch_key() when planned: the settings it holds for
        self.launch, self.compiled, self.written = spec.launch, spec.compiled, spec.written
        # (position, weak reference) per array argument; (position, converter) per scalar
        self.refs = tuple((k, weakref.ref(a)) for k, a in enumerate(bound) if hasattr(a, "buffer"))
        self.scalars = tuple((k, converters[k]) for k in range(len(bound)) if not hasattr(bound[k], "buffer"))
        # bounds proven against these arrays on this grid hold again, whatever the scalars: the accesses proven
        # at launch are affine in thread ids and constants only (bounds.Access), never in a scalar argument.
        # Every launch passes the same arrays, and arrays only the same values: a backend that keeps the
        # arguments it packed last runs them again (the CPU backend's `relaunch`: -0.5 µs a launch), or writes
        # only the scalars' slots (`launch(..., again=token, changed=positions)`)
        self.relaunch = spec.relaunch if n else None
        self.again = object() if self.relaunch is not None else None     # the backend's token (holds nothing)
        self.changed = tuple(k for k, _ in self.scalars)


def make_plan(kernel, dim, device, args, bound, dims, n, dev, spec, settings) -> LaunchPlan | None:
    """A plan for this launch (None when an argument takes no weak reference or is a struct)."""
    if kernel.struct_params or spec.has_split:
        return None
    converters = getattr(kernel._binder, "converters", None)
    if converters is None or len(converters) != len(bound):
        return None
    try:
        return LaunchPlan(dim, device, args, bound, dims, n, dev, spec, settings, converters)
    except TypeError:
        return None
