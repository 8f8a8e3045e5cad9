"""`VariantKey`: which variant of a kernel a launch runs, as one frozen value instead of a spelled string.

A variant is the forward kernel or its adjoint, with traits the passes of ad/pipeline.py add: `tangent`
(forward mode over it), `gather` (a stencil adjoint gathering instead of scattering), `store` (a gathering
or plain adjoint storing its own-element adds into gradients known to be zero: ad/fresh_store.py), `shared` (own-element
adds atomic again), `consume` (every overwriting store resets the gradient it read) and `seeds` (adjoint
parameters whose gradient is one number, ad/uniform.py). Keys are interned: equal keys are the same object,
so the launch path compares them with `is`. `.name` is the declared pipeline's name for logs, bundles and
the compiled-variant caches ("adjoint_consume_shared", "adjoint@u3,4").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

SEEDED = "@u"      # the name's separator before the seeded positions: "<adjoint variant>@u<k>,<k>"


@dataclass(frozen=True)
class VariantKey:
    """One kernel variant. Build keys with `variant_key(...)` (interned) or `VariantKey.parse(name)`."""

    adjoint: bool = False
    tangent: bool = False
    gather: bool = False
    shared: bool = False
    consume: bool = False
    seeds: tuple[int, ...] = ()
    store: bool = False

    def __post_init__(self) -> None:
        if not self.adjoint and (self.gather or self.shared or self.consume or self.seeds):
            raise ValueError(f"{self!r}: gather, shared, consume and seeds are traits of an adjoint")
        if self.store and (not self.adjoint or self.shared or self.consume or self.tangent):
            raise ValueError(f"{self!r}: only a plain or gathering adjoint stores its own-element adds")
        if self.gather and (self.consume or self.shared or self.tangent):
            # a consuming adjoint's resets would race with the neighbours' gathers of the same gradient
            raise ValueError(f"{self!r}: a gathering adjoint is neither consuming, shared nor differentiated")
        if self.seeds and self.tangent:
            raise ValueError(f"{self!r}: seeded gradients fold into the plain adjoint only")

    @functools.cached_property
    def name(self) -> str:
        """The declared name (ad/pipeline.py VARIANTS), with the seeded positions after SEEDED."""
        if not self.adjoint:
            base = "forward_tangent" if self.tangent else "forward"
        elif self.gather:
            base = "adjoint_gather" + "_store" * self.store
        else:
            base = "adjoint" + "_consume" * self.consume + "_shared" * self.shared + "_tangent" * self.tangent + \
                "_store" * self.store
        return base + (SEEDED + ",".join(map(str, self.seeds)) if self.seeds else "")

    def interned(self) -> VariantKey:
        """The one key equal to this one (keys made by calling VariantKey directly are copies)."""
        if id(self) in _INTERNED_IDS:
            return self
        return variant_key(self.adjoint, self.tangent, self.gather, self.shared, self.consume, self.seeds,
                           self.store)

    @property
    def unseeded(self) -> VariantKey:
        """This variant with every gradient an array (the variant a seeded one is folded from)."""
        return variant_key(self.adjoint, self.tangent, self.gather, self.shared, self.consume, (), self.store)

    def seeded(self, positions: tuple[int, ...]) -> VariantKey:
        return variant_key(self.adjoint, self.tangent, self.gather, self.shared, self.consume, tuple(positions),
                           self.store)

    @property
    def storing(self) -> VariantKey:
        """This adjoint (seeded or not) storing its own-element adds (ad/fresh_store.py)."""
        return variant_key(self.adjoint, self.tangent, self.gather, self.shared, self.consume, self.seeds, True)

    @staticmethod
    def parse(name: str) -> VariantKey:
        """The key of a declared variant name; ValueError naming the known traits for anything else."""
        return _parse(name)

    def __repr__(self) -> str:
        return f"VariantKey({self.name!r})" if "name" in self.__dict__ else super().__repr__()


_INTERNED: dict[tuple, VariantKey] = {}
_INTERNED_IDS: set[int] = set()          # the interned keys live as long as the process: ids stay theirs


def variant_key(adjoint: bool = False, tangent: bool = False, gather: bool = False, shared: bool = False,
                consume: bool = False, seeds: tuple[int, ...] = (), store: bool = False) -> VariantKey:
    """The one VariantKey with these traits (however they are passed: equal keys are one object)."""
    traits = (bool(adjoint), bool(tangent), bool(gather), bool(shared), bool(consume), tuple(seeds), bool(store))
    key = _INTERNED.get(traits)
    if key is None:
        key = VariantKey(*traits)
        key.name                  # computed once, while the key is made
        key = _INTERNED.setdefault(traits, key)
        _INTERNED_IDS.add(id(key))
    return key


@functools.lru_cache(maxsize=256)      # names from bundles too: bounded
def _parse(name: str) -> VariantKey:
    base, _, positions = name.partition(SEEDED)
    parts = base.split("_")
    if parts[0] not in ("forward", "adjoint") or len(set(parts[1:])) != len(parts) - 1 or \
            not set(parts[1:]) <= {"tangent", "gather", "shared", "consume", "store"}:
        raise ValueError(f"unknown kernel variant {name!r}: 'forward' or 'adjoint', then any of _consume, "
                         f"_shared, _tangent, _store (or adjoint_gather, adjoint_gather_store), and for an adjoint "
                         f"'{SEEDED}<k>,<k>'")
    traits = set(parts[1:])
    try:
        seeds = tuple(int(k) for k in positions.split(",")) if positions else ()
    except ValueError:
        raise ValueError(f"unknown kernel variant {name!r}: seeded positions are integers") from None
    key = variant_key(parts[0] == "adjoint", "tangent" in traits, "gather" in traits, "shared" in traits,
                      "consume" in traits, seeds, "store" in traits)
    if key.name != name:        # traits spelled in another order than the declared name
        raise ValueError(f"unknown kernel variant {name!r}; did you mean {key.name!r}?")
    return key


FORWARD = variant_key()
FORWARD_TANGENT = variant_key(tangent=True)
ADJOINT = variant_key(adjoint=True)
