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

A kernel with struct parameters (a geometry id binds a 32-field handle) has plans too (`structs`): each launch
resolves its struct arguments again (an id looked up, so a freed one still raises), reads their fields in one
`operator.attrgetter` call and compares the arrays among them with the plan's by identity (a refit or swap that
replaced an array takes the general path); the scalar fields are converted again, as any scalar. The handle
itself is not compared: its fields are what a launch binds (a struct instance takes no weak reference).
"""

from __future__ import annotations

import operator
import weakref

from ...core.struct import instance


class LaunchPlan:
    """The last forward launch of a kernel, bound (see the module docstring)."""

    __slots__ = ("dim", "device", "n_args", "refs", "scalars", "dev", "dims", "n", "spec", "settings",
                 "again", "changed", "launch", "relaunch", "compiled", "written", "structs", "n_user")

    def __init__(self, dim, device, args, bound, dims, n, dev, spec, settings, converters, structs=None):
        self.dim, self.device, self.n_args = dim, device, len(args)
        # a kernel with struct parameters: per user argument None or its StructFields; n_args -1, so that the
        # paths comparing flat arguments (launch.py's inline one, `_matches`) never take this plan
        self.structs, self.n_user = structs, len(structs) if structs is not None else -1
        if structs is not None:
            self.n_args = -1
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


class StructFields:
    """How a launch reads one struct parameter's flat field values (StructType.flat order) from an instance."""

    __slots__ = ("stype", "cls", "get", "nested", "classes")

    def __init__(self, stype):
        self.stype, self.cls = stype, stype.cls
        paths = [path[1:] for path, _ in stype.flat("")]
        get = operator.attrgetter(*paths)
        self.get = get if len(paths) > 1 else (lambda v: (get(v),))
        # the struct-typed fields at every depth: their classes are checked, as `core.struct.flatten` does
        inner = _struct_fields(stype, "")
        self.nested = operator.attrgetter(*(p for p, _ in inner)) if len(inner) > 1 else \
            (lambda v, g=operator.attrgetter(inner[0][0]): (g(v),)) if inner else None
        self.classes = tuple(c for _, c in inner)

    def values(self, value):
        """The field values of argument `value` (an instance, or an id or object standing for one), or None
        when it is not one of this struct (the general path then names the error)."""
        inst = instance(value, self.stype)      # an id is looked up again: a freed one raises, as at binding
        if inst.__class__ is not self.cls:
            return None
        if self.nested is not None:
            for v, c in zip(self.nested(inst), self.classes):
                if v.__class__ is not c:
                    return None
        return self.get(inst)


def _struct_fields(stype, prefix: str) -> list:
    """(dotted path, class) of every struct-typed field of `stype`, at every depth."""
    out = []
    for name, t in stype.fields.items():
        if t.is_struct:
            path = f"{prefix}{name}"
            out += [(path, t.cls), *_struct_fields(t, path + ".")]
    return out


_layouts: dict = {}         # (struct_params, flat argument count) -> per user argument None or StructFields


def struct_layout(struct_params, n_flat: int):
    """Per user argument of a kernel with these struct parameters (and `n_flat` flat ones): None (passed as
    is) or its StructFields; None for arrays of structs (no plan)."""
    key = (struct_params, n_flat)
    got = _layouts.get(key)
    if got is None and key not in _layouts:
        at = {k: t for k, _, t in struct_params}
        if not any(t.is_array for t in at.values()):
            n_user = n_flat - sum(len(t.flat("")) - 1 for t in at.values())
            got = tuple(StructFields(at[j]) if j in at else None for j in range(n_user))
        _layouts[key] = got
    return got


def flat_arguments(plan, inputs, outputs) -> tuple[list, int] | None:
    """(the flat arguments, how many of them are inputs) of a launch of a struct plan's kernel with these user
    arguments, or None when their count or a struct argument differs from the plan's."""
    structs = plan.structs
    if len(inputs) + len(outputs) != len(structs):
        return None
    out = []
    n_in = 0
    for j, v in enumerate((*inputs, *outputs)):
        if j == len(inputs):
            n_in = len(out)
        fields = structs[j]
        if fields is None:
            out.append(v)
        else:
            got = fields.values(v)
            if got is None:
                return None
            out += got
    return out, (n_in if outputs else len(out))


def make_plan(kernel, dim, device, args, bound, dims, n, dev, spec, settings) -> LaunchPlan | None:
    """A plan for this launch (None when an argument takes no weak reference or is an array of structs)."""
    if spec.has_split:
        return None
    converters = getattr(kernel._binder, "converters", None)
    if converters is None or len(converters) != len(bound):
        return None
    structs = None
    if kernel.struct_params:
        structs = struct_layout(kernel.struct_params, len(bound))
        if structs is None:
            return None
    try:
        return LaunchPlan(dim, device, args, bound, dims, n, dev, spec, settings, converters, structs)
    except TypeError:
        return None
