"""Counter-based random numbers (Warp's names): `state = gk.rand_init(seed[, offset])`, then
`gk.randf(state[, lo, hi])`, `gk.randi(state[, lo, hi])` and `gk.randn(state)`, each advancing `state`.

The state is a uint32 run through the PCG hash of Jarzynski and Olano ("Hash Functions for GPU
Rendering", 2020) at every draw. Written once as macros from integer primitives (wrapping uint32 `*`,
`+`, `^`, `>>`), so the same seed and offset give bit-identical states and integers on every backend
(floats within their rounding). Draws are not differentiated: they carry no gradient."""

from __future__ import annotations

import math

from .. import types as T
from ..frontend.macros import Advance
from .macros import macro

U = T.uint32


def _hash(E, s):
    """PCG-RXS-M-XS: one round of the 32-bit permuted congruential generator as a hash."""
    b = s * E.const(747796405, U) + E.const(2891336453, U)
    c = ((b >> ((b >> 28) + 4)) ^ b) * E.const(277803737, U)
    return (c >> 22) ^ c


def _state(E, x, what: str):
    t = E.type_of(x)
    if not (t.is_scalar and t.is_int):
        E.fail(f"{what} must be an integer, got {t.name}")
    return E.cast(x, U)


@macro("rand_init", "a random state (uint32) for `seed`, and for stream `offset` of it (e.g. the thread "
                    "index): rand_init(seed) or rand_init(seed, offset)")
def rand_init(E, seed, offset=None):
    s = _state(E, seed, "seed")
    if offset is None:
        return E.out(_hash(E, s))
    return E.out(_hash(E, s + _hash(E, _state(E, offset, "offset"))))


def _next(E, state):
    t = E.type_of(state)
    if t is not U:
        E.fail(f"state must be a uint32 random state from gk.rand_init, got {t.name}")
    return _hash(E, E.cast(state, U))


def _uniform(E, s):
    """[0, 1) from the top 24 bits of s (exact in float32)."""
    return E.cast(s >> 8, T.float32) * (1.0 / 16777216.0)


@macro("randf", "a uniform float32 in [0, 1), or in [lo, hi); advances `state`", advances_state=True)
def randf(E, state, lo=None, hi=None):
    s = _next(E, state)
    f = _uniform(E, s)
    if (lo is None) != (hi is None):
        E.fail("give both lo and hi, or neither")
    if lo is None:
        return Advance(f, s)
    t = E.type_of(f)            # the bounds as values of the draw's type: literals, or a kernel's own floats
    lo, hi = E.scalar(lo, t), E.scalar(hi, t)
    return Advance(lo + (hi - lo) * f, s)


@macro("randi", "a random int32 (all 32 bits), or one in [lo, hi); advances `state`", advances_state=True)
def randi(E, state, lo=None, hi=None):
    s = _next(E, state)
    if lo is None and hi is None:
        return Advance(E.cast(s, T.int32), s)
    if lo is None or hi is None:
        E.fail("give both lo and hi, or neither")
    span = E.cast(_int(E, hi, "hi") - _int(E, lo, "lo"), U)
    return Advance(E.cast(s % span, T.int32) + lo, s)


def _int(E, x, what):
    t = E.type_of(x)
    if not (t.is_scalar and t.is_int):
        E.fail(f"{what} must be an integer, got {t.name}")
    return E.cast(x, T.int32)


@macro("randn", "a standard normal float32 (Box-Muller from two uniform draws); advances `state`",
       advances_state=True)
def randn(E, state):
    s1 = _next(E, state)
    s2 = _hash(E, s1)
    u1 = 1.0 - _uniform(E, s1)                  # (0, 1]: log stays finite
    u2 = _uniform(E, s2)
    return Advance(E.sqrt(E.log(u1) * -2.0) * E.cos(u2 * (2.0 * math.pi)), s2)
