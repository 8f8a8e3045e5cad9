"""What a block of launches (a `gk.checkpoint` function) read and wrote, learned by running it on a scratch
tape, so that its recompute in the backward pass can be checked and cleaned up after:

- an array the block read before writing it must hold the same values at recompute, else the recompute
  would differentiate at other values: GradientRuleError naming it (arrays the block itself overwrites
  after reading them are refused when the block runs: no value to recompute from is left);
- the recompute writes the block's outputs again, with their values from when the block ran; what later
  launches wrote into them since is put back afterwards.

Arrays are held weakly: temporaries the block allocated die with it (the point of checkpointing). A view
the block made of an array that outlives it stands for that array (views share memory and versions).
"""

from __future__ import annotations

import contextlib
import weakref

from ...core.errors import GradientRuleError
from ..state import current as state
from ..arrays.views import family


def _label(a, fallback: str) -> str:
    return getattr(a, "label", None) or fallback


def _refs(a) -> list:
    """Weak references to `a` and every array sharing its memory (views), `a` first."""
    return [weakref.ref(m) for m in [a, *(m for m in family(a) if m is not a)]]


def _alive(refs: list):
    """The first array of `refs` still alive (None when all died)."""
    return next((a for a in (r() for r in refs) if a is not None), None)


class Block:
    """The arrays a block read first (with the version it read) and the arrays it wrote, held weakly."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[tuple[list, int, str]] = []    # (refs to the array and its views, version, who read it)
        self.outputs: list[list] = []

    @classmethod
    def run(cls, fn, args, kwargs) -> tuple:
        """Run fn(*args, **kwargs) recording on a scratch tape; (its result, the Block)."""
        from .tape import Tape
        block = cls(getattr(fn, "__name__", "fn"))
        scratch = Tape(snapshots=False)
        outer, state.tape = state.tape, scratch
        try:
            result = fn(*args, **kwargs)
        finally:
            state.tape = outer
        block._learn(scratch.records)
        return result, block

    def _learn(self, records) -> None:
        from ...backends.analysis import shares_memory
        written: list = []

        def was_written(a) -> bool:
            return any(shares_memory(a, w) for w in written)

        for rec in records:
            if rec.kind == "launch":
                kernel, args = rec.kernel_obj, rec.args
                # an atomic add into an array is a write here: a temporary the block accumulates into
                # starts at zero in the recompute too
                facts = kernel.facts()
                reads = [(args[j], rec.versions[j], f"kernel '{rec.kernel}'") for j in facts.loaded]
                writes = [args[w] for w in facts.written]
            else:
                reads = [(a, a.version, rec.name) for a in rec.arrays if not any(a is w for w in rec.writes)]
                writes = list(rec.writes)
            for a, version, who in reads:
                if not was_written(a) and not any(refs[0]() is a for refs, _, _ in self.inputs):
                    self.inputs.append((_refs(a), version, who))
            for a in writes:
                if not any(a is w for w in written):
                    written.append(a)
        for a in written:
            for refs, _, who in self.inputs:
                b = refs[0]()
                if b is not None and shares_memory(a, b):
                    raise GradientRuleError(
                        f"gk.checkpoint: '{self.name}' reads array '{_label(b, 'an input')}' ({who}) and then "
                        "overwrites it, so no values are left to recompute the block from in the backward "
                        "pass. Write the block's results into other arrays than its inputs.")
        self.outputs = [_refs(a) for a in written]

    def arrays(self, given: list) -> list:
        """The arrays the block used that are still alive, and `given` (the checkpoint's arguments)."""
        out = list(given)
        for a in [_alive(refs) for refs, _, _ in self.inputs] + self.written():
            if a is not None and not any(a is b for b in out):
                out.append(a)
        return out

    def written(self) -> list:
        return [a for a in (_alive(refs) for refs in self.outputs) if a is not None]

    def check_inputs(self) -> None:
        """Before the recompute: every input still alive holds the values the block read."""
        for refs, version, who in self.inputs:
            a = _alive(refs)
            if a is not None and a.modified_since(version):
                raise GradientRuleError(
                    f"gk.checkpoint: array '{_label(a, 'an input')}', which '{self.name}' read ({who}), was "
                    "modified after the block ran; recomputing the block now would differentiate it at other "
                    "values. Write the later values into a fresh array, or keep the block's launches on the "
                    "tape instead of checkpointing them.")

    @contextlib.contextmanager
    def outputs_kept(self):
        """Put back, after the recompute, what the block's outputs hold now (later launches' writes)."""
        kept = [(a, a._saved_copy()) for a in self.written()]
        try:
            yield
        finally:
            for a, copy in kept:
                if a.nbytes:
                    a.device.impl.copy(a.device.info, a.buffer, copy.buffer, a.nbytes)
                a._bump()
