"""What a tape records: one LaunchRecord per recorded launch (public: `tape.launches`) and one FuncRecord
per Python step (`record_func`, host writes, checkpoint blocks)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)      # slots: a record per launch is made in the W5 hot path (no __dict__ to build)
class LaunchRecord:
    """One recorded launch (public: what `tape.launches` lists). Few objects the garbage collector tracks per
    record (this one and its argument list): a tape of many launches in a process holding much else would
    otherwise pay for full collections while recording. Made by the tape, read by users and the debugger.

    Attributes:
        kernel: the kernel's name.
        dim: the launch grid, a tuple of ints.
        device: the device's name.
        args: the arguments, inputs then outputs (`inputs` and `outputs` split them).
        n_inputs: how many of `args` were inputs.
        scope: the names of the tape scopes open at the launch, outermost first.
        ms: the launch's wall time in milliseconds.
        kernel_obj: the `gk.Kernel` itself.
        versions: each argument's version right after the launch (None: not an array).
        kind: "launch" (other record kinds are Python steps on the tape).
        snapshots: copies of the arguments when the tape takes snapshots (debug bundles), else None.
        prepared: the adjoint launch prepared by a backward pass (internal).
        saved: parameter index -> copy of an argument taken before the launch (an overwritten input).
        site: (file, line) of the `gk.launch` call, when snapshotting.
        crcs: id(array) -> checksum at record, for arrays with a NumPy view out (writes through a view bump
            no version).
        consume: the adjoint resets the gradient of what the launch overwrote (set by backward).
        variant: the variant of the kernel that ran ("forward", "tangent", ...).
        adjoint_variant: the adjoint variant the last backward pass ran, or None."""

    # Tape.record_launch passes the fields up to `versions` by position: keep their order
    kernel: str
    dim: tuple
    device: str
    args: list                                                 # the arguments, inputs then outputs
    n_inputs: int
    scope: tuple = ()
    ms: float = 0.0
    kernel_obj: object = field(default=None, repr=False)
    versions: tuple = field(default=(), repr=False)   # each argument's version right after the launch (None:
                                                      # not an array)
    kind: str = "launch"
    snapshots: object = field(default=None, repr=False)        # LaunchSnapshots when the tape takes them
    prepared: object = field(default=None, repr=False)         # launch.PreparedAdjoint, made by backward
    saved: dict | None = field(default=None, repr=False)       # parameter index -> copy taken before the launch
    site: tuple | None = field(default=None, repr=False)       # (file, line) of the gk.launch call (snapshotting)
    crcs: dict | None = field(default=None, repr=False)        # id(array) -> checksum at record, for arrays
                                                               # with a NumPy view out (writes bump no version)
    consume: bool = field(default=False, repr=False)           # the adjoint must reset what it overwrote
                                                               # (set by backward: runtime/tape/tape_consume.py)
    variant: str = "forward"                                   # the variant that ran (VariantKey.name)
    adjoint_variant: str | None = None                         # the adjoint variant the last backward ran

    @property
    def inputs(self) -> list:
        return self.args[:self.n_inputs]

    @property
    def outputs(self) -> list:
        return self.args[self.n_inputs:]

    def version_of(self, a) -> int:
        """The version array `a` (one of the arguments) had right after the launch."""
        return next(v for x, v in zip(self.args, self.versions) if x is a)

    def adjoint_arguments(self) -> tuple[list, list]:
        """(inputs, outputs) for the adjoint launch: the copies saved before the launch in place of the
        arrays it overwrote (their gradients stay those of the arrays themselves)."""
        if self.saved is None:
            args, n = self.args, self.n_inputs
            return args[:n], args[n:]
        args = [self.saved.get(j, a) for j, a in enumerate(self.args)]
        n = self.n_inputs
        return args[:n], args[n:]

    def adjoint_grads(self) -> tuple[list, list] | tuple[None, None]:
        """Explicit adjoints for `launch(adjoint=True)` when copies stand in for arrays (else None, None)."""
        if self.saved is None:
            return None, None
        grads = [getattr(a, "grad", None) for a in self.args]
        n = self.n_inputs
        return grads[:n], grads[n:]


@dataclass
class FuncRecord:
    """A Python callable recorded with `record_func`, run at its place in the backward pass."""

    backward: object
    arrays: list
    scope: tuple = ()
    kind: str = "func"
    name: str = "record_func"
    writes: list = field(default_factory=list)   # arrays it overwrote (host writes: assign, copy, fill_)
    site: tuple | None = None                    # (file, line) of a host write's call
    whole: bool = True                           # a host write covers all of its destination
    seen_before: object = None                   # memory the records before it used (runtime/tape/tape_consume.py)
    meta: dict | None = None                     # plain facts the debugger shows (a solve's iterations, residual)
    array_names: list | None = None              # names of `arrays` for the debugger (a solve's x, b, A.values)
