"""Prepared adjoints shared between records and kept from one tape to the next.

A backward pass binds each recorded launch's adjoint once (`prepare_adjoint`: argument binding, variant
choice, specialisation lookup; tens of µs). Time-stepped programs record the same few kernels thousands
of times on the same arrays with a step index, and record a new tape every iteration (Taichi's
`with ti.ad.Tape(loss)`), so the same bindings come back: records of one kernel with the same arrays (by
identity) and the same scalar values share one binding within a pass, and a binding is kept on the kernel
for later tapes as a recipe holding only weak references, revived while every array it names is alive,
each array's `.grad` is still the one bound and the code-generation settings are those it was made under
(`PreparedAdjoint.valid`). Records whose adjoint reads copies saved before the launch are bound afresh.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..arrays.array import array as _array
from ...core.config import config
from .device import get_device
from .launch import PreparedAdjoint, _flatten, prepare_adjoint as _prepare_afresh

MAX_RECIPES = 8192      # per kernel: a bound on what launches on since-freed arrays leave behind


def _value_key(v):
    """A scalar by type and bits (0.0 and -0.0, equal as numbers, are different arguments)."""
    if v.__class__ is float:
        return float, v.hex()
    to_bytes = getattr(v, "tobytes", None)
    return (v.__class__, to_bytes()) if to_bytes is not None else (v.__class__, v)


# integer and bool scalars compare exactly by value (floats do not: 0.0 == -0.0), so they key as themselves
_EXACT = frozenset({int, bool, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                    np.uint64})


def _arg_key(x):
    """Arrays by identity, values (NumPy scalars, tuples of them for vectors) by type and bits."""
    c = x.__class__
    if c is _array:
        return id(x)
    if c in _EXACT:
        return c, x
    if hasattr(x, "buffer"):
        return id(x)
    if x.__class__ is tuple:
        return (tuple, *map(_value_key, x))
    return _value_key(x)


class AdjointRecipe:
    """A PreparedAdjoint without strong references to its arrays. Its revivals share a backend token with
    every recipe of the kernel on the same arrays, grid and specialisation (`tokens`: the step records of a
    time-stepped tape differ only in a step number), so a run after one of them writes only the scalars
    into what the backend packed then, or runs it as packed when nothing differs."""

    __slots__ = ("key", "spec", "dims", "template", "refs", "sources", "again", "changed")

    def __init__(self, prepared: PreparedAdjoint, tokens: dict):
        self.key, self.spec, self.dims = prepared.key, prepared.spec, prepared.dims
        args = prepared.call_args
        self.template = [None if hasattr(x, "buffer") else x for x in args]
        self.refs = [(k, weakref.ref(x)) for k, x in enumerate(args) if hasattr(x, "buffer")]
        self.sources = [weakref.ref(a) for a in prepared.sources]
        self.changed = prepared.changed
        # the weak references themselves are one object per live array (CPython hands out the same one), kept
        # alive by `tokens`' entry, so their ids name these arrays for as long as the entry exists
        refs = tuple(r for _, r in self.refs)
        key = (id(self.spec), self.dims, *map(id, refs))
        entry = tokens.get(key)
        if entry is None:
            if len(tokens) >= MAX_RECIPES:
                tokens.clear()
            entry = tokens[key] = (refs, prepared.again)
        self.again = entry[1]

    @classmethod
    def like(cls, sibling: AdjointRecipe, prepared: PreparedAdjoint, tokens: dict, key: tuple) -> AdjointRecipe:
        """The recipe of `prepared`, a binding of `sibling`'s arrays with other scalars (`_sibling_binding`): its
        weak references and token taken from `sibling` instead of made again (`key`: `sibling`'s in `tokens`)."""
        self = cls.__new__(cls)
        self.key, self.spec, self.dims = prepared.key, prepared.spec, prepared.dims
        args, template = prepared.call_args, sibling.template.copy()
        for k in prepared.changed:
            template[k] = args[k]
        self.template, self.refs, self.sources, self.changed = template, sibling.refs, sibling.sources, prepared.changed
        entry = tokens.get(key)
        if entry is None:
            if len(tokens) >= MAX_RECIPES:
                tokens.clear()
            entry = tokens[key] = (tuple(r for _, r in self.refs), prepared.again)
        self.again = entry[1]
        return self

    def revive(self) -> PreparedAdjoint | None:
        """The PreparedAdjoint again, or None when an array is gone or no longer valid for it."""
        call_args = self.template.copy()
        for k, ref in self.refs:
            x = ref()
            if x is None:
                return None
            call_args[k] = x
        sources = []
        for ref in self.sources:
            a = ref()
            if a is None:
                return None
            sources.append(a)
        grads = call_args[len(call_args) - len(sources):] if sources else []   # prepare_adjoint appends them
        prepared = PreparedAdjoint(self.key, self.spec, self.dims, call_args, grads, sources, self.again, self.changed)
        return prepared if prepared.valid() else None


def adjoint_for(rec, ins, outs, shared: dict) -> PreparedAdjoint | None:
    """The prepared adjoint of record `rec` (its adjoint arguments `ins`, `outs`), from `shared` (this
    pass's bindings), the kernel's recipes from earlier tapes, or `prepare_adjoint`; None when its adjoint
    needs scratch gradient arrays (then it takes `launch`)."""
    kernel = rec.kernel_obj
    head = (id(kernel), rec.device, rec.dim, rec.consume)
    keep = rec.saved is None                # saved copies are new arrays each time: nothing to keep
    if keep and len(kernel._array_args) == len(rec.args):      # arrays only: by identity
        key = (*head, *map(id, rec.args))
    else:
        key = (*head, *map(_arg_key, rec.args if keep else [*ins, *outs]))
    try:
        prepared = shared.get(key)
    except TypeError:                       # an unhashable value: share by identity within this pass only
        key, keep = (*head, *map(id, ins), *map(id, outs)), False
        prepared = shared.get(key)
    if prepared is not None and prepared.valid():
        return prepared
    recipes = kernel.__dict__.get("_adjoint_recipes") if keep else None
    recipe = recipes.get(key) if recipes is not None else None
    prepared = recipe.revive() if recipe is not None else None
    if prepared is None:
        near_key = near = None
        if keep and len(kernel._array_args) != len(rec.args):
            # a step record: one of this pass on the same arrays (other step numbers) gives all but the scalars
            args = rec.args
            near_key = (_NEAR, *head, *[id(args[i]) for i in kernel._array_args])
            near = shared.get(near_key)
        prepared = prepare_adjoint(kernel, rec.dim, ins, outs, rec.device, rec.args, rec.consume, near)
        if near is not None and (prepared is None or prepared.again is not near[0].again):
            near = None                     # bound afresh: this binding becomes the records' sibling
        if prepared is not None and keep:
            try:
                tokens = kernel.__dict__.get("_adjoint_tokens")
                if tokens is None:
                    tokens = kernel._adjoint_tokens = {}
                recipe = AdjointRecipe(prepared, tokens) if near is None or near[2] is None else \
                    AdjointRecipe.like(near[2], prepared, tokens, near[3])
            except TypeError:               # an array that takes no weak reference
                recipe = None
            if near_key is not None and near is None:
                changed = prepared.changed
                arrays = tuple(k for k in range(len(prepared.call_args)) if k not in changed)
                token_key = None if recipe is None else \
                    (id(recipe.spec), recipe.dims, *[id(r) for _, r in recipe.refs])
                # binding the recorded (already bound) arguments again gives them back unchanged, by type and
                # bits: the step records' adjoints skip the binder
                given = [*ins, *outs]
                again = kernel.binder()(given, get_device(rec.device))
                same = all(_arg_key(a) == _arg_key(b) for a, b in zip(given, again, strict=True))
                shared[near_key] = (prepared, arrays, recipe, token_key, same)
            if recipe is not None:
                if recipes is None:
                    recipes = kernel._adjoint_recipes = {}
                elif len(recipes) >= MAX_RECIPES:
                    recipes.clear()
                recipes[key] = recipe
    shared[key] = prepared
    return prepared


_NEAR = object()        # heads the `shared` keys of step records' siblings (same arrays, any scalars)


def prepare_adjoint(kernel, dim, ins, outs, device, originals, consume, near=None) -> PreparedAdjoint | None:
    """launch.prepare_adjoint, or the binding `_sibling_binding` makes from `near` where it can."""
    if near is not None:
        prepared = _sibling_binding(kernel, device, ins, outs, near)
        if prepared is not None:
            return prepared
    return _prepare_afresh(kernel, dim, ins, outs, device, originals, consume)


def _sibling_binding(kernel, device, ins, outs, near) -> PreparedAdjoint | None:
    """A record's prepared adjoint made from `near` = (a record's prepared adjoint of this pass on the same arrays
    (by identity), grid, device and consume, its array positions, its recipe, that recipe's key in the kernel's
    tokens, whether binding gave the recorded arguments back unchanged): the arguments bound afresh (or taken
    as recorded), the rest — variant, specialisation, gradients, the shared-writes check, the backend token — is what
    `prepare_adjoint` finds for the same arrays, as none of it depends on scalar values. None when `near` is
    no longer valid or the binding's arrays are not its arrays (then `prepare_adjoint`)."""
    sib, arrays = near[0], near[1]
    if not sib.valid():
        return None
    spec = sib.spec
    bound = [*ins, *outs] if near[4] else kernel.binder()([*ins, *outs], get_device(device))
    call_args = [*_flatten(spec, bound), *sib.grads]
    sib_args = sib.call_args
    if len(call_args) != len(sib_args):
        return None
    for k in arrays:
        if call_args[k] is not sib_args[k]:
            return None
    return PreparedAdjoint(config.codegen_key(), spec, sib.dims, call_args, sib.grads, sib.sources, sib.again,
                           sib.changed)
