"""What a backend implements, declared against a versioned contract, and the lowering of the rest.

`CONTRACT_VERSION` is the contract this gradkit speaks. A plugin names the version it was written against
(`Backend.contract_version`) and may list what it implements (`Backend.capabilities`: primitives, atomic
kinds, features). Without a list it implicitly declares what existed at its version (`HISTORY`, worked out
from gradkit's history); `capabilities_of` merges both. `target_of` hands the result to the capability
pass (core/passes/lower_capabilities.py) as data, and `attach` makes every `compile` of a plugin run that
pass first, so a plugin written against version N keeps working when later versions add primitives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.builtins import BUILTINS
from ..core.passes.lower_capabilities import Target, lower_capabilities, needs_lowering
from .contract import CONTRACT_VERSION


@dataclass(frozen=True)
class Change:
    """What one contract version added: primitives, atomic kinds and features, and a line saying why."""

    version: int
    date: str
    prims: frozenset = frozenset()
    atomics: frozenset = frozenset()
    features: frozenset = frozenset()
    note: str = ""


# Primitives that reach a backend at version 1 (gradkit's first commit, 52b1233): every scalar builtin of
# its table, the ones later versions expand (floordiv, mod, clamp, sign, integer abs) included.
_V1_PRIMS = frozenset("""
    abs acos add and asin atan atan2 cast ceil clamp cos cosh div eq exp floor floordiv ge gt le log log10
    log2 lt max min mod mul ne neg not or pow round sign sin sinh sqrt sub tan tanh where""".split())

HISTORY: tuple[Change, ...] = (
    Change(1, "2026-11-22", _V1_PRIMS, frozenset({"add", "sub", "min", "max"}),
           frozenset({"bounds", "stack"}),
           "lowered scalar IR; atomics add/sub/min/max; debug bounds faults and the value stack"),
    Change(2, "2026-11-24", frozenset({"erf", "idiv", "irem", "rsqrt", "bit_and", "bit_or", "bit_xor",
                                       "bit_not", "shl", "shr", "rem", "stop_gradient"}),
           frozenset({"xchg"}), frozenset({"native", "cas"}),
           "atomic xchg (6ecf3b8, atomic min/max adjoints), erf/idiv/irem and the expand pass (d0796c4: "
           "floored // and %, clamp, sign, integer abs arrive written in idiv/irem unless native), rsqrt "
           "(29d72db), bit operations and shifts (6333b68), rem (ae18b77: float rem reaches a backend as "
           "fmod), native snippets, compare-and-swap"),
    Change(3, "2026-11-27", features=frozenset({"threads"}),
           note="capabilities declared; launch may be called from several threads at once; the suite "
                "checks native snippets in every variant and concurrent launches"),
)


@dataclass(frozen=True)
class Capabilities:
    """A backend's declaration: primitive names, atomic kinds, features (names as in `HISTORY`)."""

    primitives: frozenset = frozenset()
    atomics: frozenset = frozenset()
    features: frozenset = frozenset()
    extra: dict = field(default_factory=dict, compare=False)

    def declares(self, feature: str) -> bool:
        """Whether `feature` ("erf", "atomic_xchg", "native", ...) is declared."""
        if feature.startswith("atomic_"):
            return feature[len("atomic_"):] in self.atomics
        return feature in self.primitives or feature in self.features

    def names(self) -> list[str]:
        """Every declared name, atomics as atomic_<kind>, sorted."""
        return sorted(self.primitives | self.features | {f"atomic_{k}" for k in self.atomics})


def defaults(version: int) -> Capabilities:
    """What a plugin naming contract `version` implicitly declares: everything added up to it."""
    prims, atomics, features = set(), set(), set()
    for change in HISTORY:
        if change.version <= version:
            prims |= change.prims
            atomics |= change.atomics
            features |= change.features
    return Capabilities(frozenset(prims), frozenset(atomics), frozenset(features))


def everything() -> Capabilities:
    """The current contract in full: what `CONTRACT_VERSION` declares."""
    return defaults(CONTRACT_VERSION)


def capabilities_of(backend) -> Capabilities:
    """A plugin's capabilities: its `capabilities` (a Capabilities, or a dict with any of primitives /
    atomics / features) over the defaults of its `contract_version` (1 when it names none: a plugin older
    than the versioned contract)."""
    version = int(getattr(backend, "contract_version", None) or 1)
    base = defaults(min(version, CONTRACT_VERSION))
    declared = getattr(backend, "capabilities", None)
    if declared is None:
        return base
    if isinstance(declared, Capabilities):
        return declared
    return Capabilities(frozenset(declared.get("primitives", base.primitives)),
                        frozenset(declared.get("atomics", base.atomics)),
                        frozenset(declared.get("features", base.features)))


def target_of(backend) -> Target:
    """The capability pass's view of `backend`: prims it implements (its `native_prims` count too)."""
    caps = capabilities_of(backend)
    prims = caps.primitives | frozenset(getattr(backend, "native_prims", ()))
    return Target(getattr(backend, "name", "?"), prims, caps.atomics, caps.features)


def backend_primitives() -> list[str]:
    """Every primitive name that can reach a backend, generated from the builtins table: the scalar
    builtins (those whose type rule takes scalars), less those the expand pass always writes in others."""
    from ..core import types as T
    out = []
    for name, entry in BUILTINS.items():
        if entry.arity is None and name != "where":
            continue
        if not _takes_scalars(name, entry, T) or (entry.expand is not None and not _expand_keeps(name, T)):
            continue
        out.append(name)
    return sorted(out)


def _takes_scalars(name, entry, T) -> bool:
    kinds = (T.float32, T.int32, T.bool_)
    for t in kinds:
        types = [T.bool_, t, t] if name == "where" else [t] * (entry.arity or 1)
        try:
            rtype = entry.result_type(types, {"to": T.float32} if name == "cast" else {})
        except Exception:
            continue
        if getattr(rtype, "is_scalar", False):
            return True
    return False


def _expand_keeps(name: str, T) -> bool:
    """Whether `expand` keeps the call for some scalar type (float `abs` -> fabs, float `rem` -> fmod)."""
    from ..core.ir import Builder, Region, Value
    entry = BUILTINS[name]
    for t in (T.float32, T.float64, T.int32):
        args = [Value(t) for _ in range(entry.arity or 1)]
        try:
            entry.result_type([a.type for a in args], {})
            if entry.expand(Builder(Region()), args, {}) is None:
                return True
        except Exception:
            continue
    return False


def lower_for(backend, fn):
    """`fn` with what `backend` lacks written in what it has (the same object when nothing is missing)."""
    target = target_of(backend)
    if not needs_lowering(fn, target):
        return fn
    from ..core.ir import copy_function, verify
    out = lower_capabilities(copy_function(fn), target)
    verify(out, scalar_only=True)
    return out


def attach(backend) -> None:
    """Make `backend.compile` run the capability pass first (the registry calls this on every plugin it
    constructs). A backend declaring the whole contract is left as it is."""
    if getattr(backend, "_gk_lowering", False):
        return
    caps, full = capabilities_of(backend), everything()
    if caps.primitives >= full.primitives and caps.atomics >= full.atomics and "native" in caps.features:
        return
    inner = backend.compile

    def compile(device, fn, options):
        return inner(device, lower_for(backend, fn), options)

    compile.__doc__ = inner.__doc__
    try:
        backend.compile = compile
        backend._gk_lowering = True
    except (AttributeError, TypeError):     # a slotted or frozen object: it gets the IR as it is
        import warnings
        warnings.warn(f"gradkit: backend '{getattr(backend, 'name', '?')}' does not declare the whole contract "
                      "and its compile cannot be wrapped: gradkit cannot lower what it lacks", RuntimeWarning,
                      stacklevel=3)


def since(name: str, kind: str = "prims") -> int | None:
    """The contract version that added primitive (or, with kind="atomics"/"features", atomic kind or
    feature) `name`."""
    for change in HISTORY:
        if name in getattr(change, kind):
            return change.version
    return None


def primitives_markdown() -> str:
    """The table of primitives a backend sees, as backends/README.md shows it (a test keeps them equal)."""
    from ..core.passes.lower_capabilities import FALLBACKS
    rows = ["| primitive | C math function | since | without it |", "|---|---|---|---|"]
    for name in backend_primitives():
        entry = BUILTINS[name]
        fallback = "lowered by gradkit" if name in FALLBACKS else "skipped: not declared"
        if since(name) == 1:
            fallback = "- (every contract has it)"
        rows.append(f"| `{name}` | {f'`{entry.cmath}`' if entry.cmath else ''} | {since(name) or ''} | "
                    f"{fallback} |")
    return "\n".join(rows)
