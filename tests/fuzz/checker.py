"""Check one generated program on one device: forward values against the float64 reference, reverse
gradients (`Tape.backward(grads=...)` with random output weights) and forward-mode JVPs (`gk.ForwardMode`)
against central finite differences of the reference along a random direction per input array.

Finite differences are one-sided too: where the two one-sided slopes differ, the program has a kink or a
jump near the sample (a branch, min/max, floor switching within the step, or a branch on rounding noise),
and the program is discarded and counted, as is one whose reference overflows. Any exception is a
failure, except the documented refusals in REFUSALS.
"""

from __future__ import annotations

import collections
import os
import re
import warnings
import zlib

import numpy as np

import gradkit as gk
from tests.fuzz.program import Program, build, initial, random_inputs, reference

H = 1e-6                      # finite-difference step (inputs are O(1))
HUGE = 1e8                    # references beyond this are discarded (overflow-prone programs)
STATS = collections.Counter()  # programs / discard_value / discard_kink / reverse / jvp, per process
DTYPES = {"f": gk.float64, "i": gk.int32, "v2": gk.vec2d, "v3": gk.vec3d, "v4": gk.vec4d, "m2": gk.mat22d,
          "m3": gk.mat33d, "m4": gk.mat44d}


def _loss(outs: dict, weights: dict) -> float:
    return float(sum(np.sum(weights[k] * v) for k, v in outs.items()))


def _arrays(prog: Program, inputs: dict, device: str, grad: bool) -> dict:
    """gradkit arrays with their starting values; float arrays get gradients when `grad`."""
    arrs = {}
    for name, a in prog.arrays.items():
        arrs[name] = gk.array(initial(a, inputs), dtype=DTYPES[a.kind], device=device,
                              requires_grad=grad and a.kind != "i")
    return arrs


def run_steps(prog: Program, mod, arrs: dict, device: str) -> None:
    """Launch the chain's kernels and run its host ops (program.reference does the same in NumPy)."""
    for step in prog.steps:
        if step[0] == "launch":
            ks = prog.kernels[step[1]]
            ins = [prog.ints[a] if a in prog.ints else arrs[a] for a in ks.reads]
            outs = [arrs[a] for a in ks.writes]
            gk.launch(getattr(mod, ks.name), prog.dim, inputs=ins, outputs=outs, device=device)
        elif step[0] == "copy":
            gk.copy(arrs[step[1]], arrs[step[2]], *step[3:])     # (dest_offset, src_offset, count)
        elif step[0] == "assign":
            arrs[step[1]].assign(arrs[step[2]])
        elif step[0] == "clone":
            arrs[step[1]] = arrs[step[2]].copy()
        elif step[2]:
            arrs[step[1]].fill_(step[2])
        else:
            arrs[step[1]].zero_()


def _close(got: float, want: float, slack: float, scale: float) -> bool:
    return abs(got - want) <= 1e-5 * abs(want) + 1e-8 * scale + slack


# Campaign aid, off by default: `|`-separated message fragments of known defects (FOUND.md) that a campaign
# counts instead of failing on, to look past them for new ones. CI never sets it.
TOLERATE = [t for t in os.environ.get("GRADKIT_FUZZ_TOLERATE", "").split("|") if t]


def check_program(prog: Program, device: str, folder) -> None:
    """Raise AssertionError (or whatever gradkit raised) when gradkit disagrees with the reference."""
    STATS["programs"] += 1
    try:
        _check(prog, device, folder)
    except Exception as e:
        if any(t in str(e) for t in TOLERATE):
            STATS["tolerated"] += 1
            return
        e.add_note(f"device {device}; fwd_only={prog.fwd_only}")
        raise


# Documented refusals (docs/errors.md): a construct the program uses, the phase, the error and a fragment
# of its message. They count as "refused", not as failures, and the rest of the program is still checked
# where it can be; once gradkit supports the construct the same programs are checked in full.
REFUSALS = [
    ("atomic_minmax", "jvp", gk.CompileError, "forward mode cannot differentiate atomic_m"),
    ("mul_alias", "backward", gk.GradientRuleError, "that it overwrites later"),  # *=: indices may coincide
    ("static_jump", None, gk.CompileError, "break/continue are not supported in unrolled"),
]


def _refused(prog: Program, phase: str, e: Exception) -> bool:
    for feature, when, kind, fragment in REFUSALS:
        if feature in prog.features and when in (None, phase) and isinstance(e, kind) and fragment in str(e):
            STATS[f"refused_{feature}"] += 1
            return True
    return False


def _check(prog: Program, device: str, folder) -> None:
    mod, ref = build(prog, folder)
    rng = np.random.default_rng(zlib.crc32(prog.body().encode()))
    inputs = random_inputs(prog, rng)
    try:    # an overflow or invalid operation anywhere (even if later divided away): degenerate program
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            want = reference(prog, ref, inputs)
    except FloatingPointError:
        want = None
    if want is None or not all(np.all(np.isfinite(v)) and np.all(np.abs(v) < HUGE) for v in want.values()):
        STATS["discard_value"] += 1
        return
    weights = {k: rng.uniform(0.5, 1.5, v.shape) for k, v in want.items()}
    read = {a for ks in prog.kernels for a in ks.reads}
    dirs = {a.name: rng.normal(0.0, 1.0, a.np_shape) for a in prog.inputs()
            if a.kind != "i" and a.name in read}
    fd = _finite_differences(prog, ref, inputs, want, weights, dirs)
    if fd is None:            # a branch switches within H of the sample: not smooth (values may round apart)
        STATS["discard_kink"] += 1
        return
    scale = 1.0 + sum(np.sum(np.abs(weights[k] * v)) for k, v in want.items())

    arrs = _arrays(prog, inputs, device, grad=not prog.fwd_only)
    tape = gk.Tape()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if prog.fwd_only:
                run_steps(prog, mod, arrs, device)
            else:
                with tape:
                    run_steps(prog, mod, arrs, device)
        except gk.GradkitError as e:
            if _refused(prog, "forward", e):
                return
            raise
    for k, v in want.items():
        try:
            np.testing.assert_allclose(arrs[k].numpy(), v, rtol=1e-9, atol=1e-9 * (1 + np.abs(v).max()))
        except AssertionError as e:
            raise AssertionError(f"forward value of '{k}' on {device} differs from the reference{e}") \
                from None
    # rule 1 on arrays updated by `*=` is expected (documented: the tape keeps a copy); any other is not
    rule = [str(w.message) for w in caught if issubclass(w.category, gk.GradientRuleWarning)
            and not re.search(r"array 'prod\d+'", str(w.message))]
    assert prog.fwd_only or not rule, f"GradientRuleWarning on a program that follows the rules: {rule}"
    if not prog.fwd_only:
        _check_reverse(prog, device, arrs, tape, weights, dirs, fd, scale)
    _check_jvp(prog, device, mod, inputs, weights, dirs, fd, scale)


def _finite_differences(prog, ref, inputs, want, weights, dirs):
    """{input: (central difference, slack)} along each direction, or None where the one-sided slopes
    disagree (a kink or jump within H of the sample). The slack (half their gap, about H * curvature)
    widens the tolerance of smooth programs by a negligible amount."""
    l0, fd = _loss(want, weights), {}
    with np.errstate(all="ignore"):
        for name, d in dirs.items():
            hi, lo = dict(inputs), dict(inputs)
            hi[name], lo[name] = inputs[name] + H * d, inputs[name] - H * d
            lp, lm = _loss(reference(prog, ref, hi), weights), _loss(reference(prog, ref, lo), weights)
            central, fwd, bwd = (lp - lm) / (2 * H), (lp - l0) / H, (l0 - lm) / H
            smooth = abs(fwd - bwd) <= 0.1 * (1 + abs(central))
            if not (np.isfinite(central) and abs(central) < HUGE and smooth):
                return None
            fd[name] = (central, abs(fwd - bwd) / 2)
    return fd


def _check_reverse(prog, device, arrs, tape, weights, dirs, fd, scale) -> None:
    try:
        tape.backward(grads={arrs[k]: gk.array(w, dtype=arrs[k].dtype, device=device)
                             for k, w in weights.items()})
    except gk.GradkitError as e:
        if _refused(prog, "backward", e):
            return
        raise
    for name, (central, slack) in fd.items():
        g = arrs[name].grad
        got = float(np.sum(g.numpy() * dirs[name])) if g is not None else 0.0
        assert _close(got, central, slack, scale), \
            f"reverse gradient of '{name}' on {device}: <grad, dir> = {got!r}, finite differences {central!r}"
    STATS["reverse"] += 1


def _check_jvp(prog, device, mod, inputs, weights, dirs, fd, scale) -> None:
    arrs = _arrays(prog, inputs, device, grad=False)
    seeds = {arrs[k]: gk.array(d, dtype=arrs[k].dtype, device=device) for k, d in dirs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with gk.ForwardMode(seeds=seeds):
                run_steps(prog, mod, arrs, device)
        except gk.GradkitError as e:
            if _refused(prog, "jvp", e):
                return
            raise
    got = 0.0
    for k, w in weights.items():
        dual = arrs[k].dual
        # a launch output must get a dual; a host-op target only through what it copied (0 elements: none)
        assert dual is not None or not dirs or prog.arrays[k].owner == -1, \
            f"output '{k}' has no .dual after gk.ForwardMode on {device}"
        got += float(np.sum(w * dual.numpy())) if dual is not None else 0.0
    want = sum(c for c, _ in fd.values())
    host = [f"{s[0]}({', '.join(map(str, s[1:]))})" for s in prog.steps if s[0] != "launch"]
    assert _close(got, want, sum(s for _, s in fd.values()), scale), \
        f"forward-mode JVP on {device}: {got!r}, finite differences {want!r}" + \
        (f" (host ops in the chain: {', '.join(host)})" if host else "")
    STATS["jvp"] += 1
