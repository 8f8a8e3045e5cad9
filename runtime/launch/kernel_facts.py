"""`KernelFacts`: what the runtime derives from a kernel's lowered IR, as one typed object per kernel and
rules generation (a custom gradient rule attached, or gk.config.default_fp changed, makes a new one), each
fact computed on first use. It replaces caches written into the IR's attrs and a tuple read by index: the
tape, its checks, hazards, checkpoints and bundles all ask `kernel.facts()`."""

from __future__ import annotations

from functools import cached_property

from ...ad.accessed_rows import arg_positions, evaluate, leading_rows, user_index
from ...ad.checks import static_violations
from ...ad.read_order import read_before_write
from ...backends.analysis import written_params
from ...core.errors import CompileError
from ...core.ir import Function
from ...core.ops import WRITES, Op
from ...core.passes.scalarize import user_params


class KernelFacts:
    """Facts about one kernel's variants under one rules generation. Parameter positions are user-level
    (one per `kernel.params` entry, whatever scalarize split them into)."""

    def __init__(self, kernel, generation: int):
        self.kernel, self.generation = kernel, generation
        self._rows_memo: dict = {}

    def rows(self, table: dict, j: int, args: list, missing):
        """`evaluate(table[j], args)` (ad/accessed_rows.py), `missing` without an entry; remembered per the
        integer arguments the expressions read (a time-stepped program asks again for each step index at
        every backward pass). The set returned is shared: callers must not modify it."""
        exprs = table.get(j)
        if exprs is None:
            return missing
        memo = self._rows_memo
        used = memo.get(id(exprs))
        if used is None:
            used = memo[id(exprs)] = (exprs, arg_positions(exprs))
        if used[1] is None:
            return None
        values = [args[k] for k in used[1]]
        if not all(hasattr(v, "__index__") for v in values):
            return evaluate(exprs, args)
        key = (id(exprs), *map(int, values))
        got = memo.get(key, memo)
        if got is memo:
            got = evaluate(exprs, args)
            if len(memo) >= 65536:
                memo.clear()
                memo[id(exprs)] = used
            memo[key] = got
        return got

    # forward ---------------------------------------------------------------------------------------------
    @cached_property
    def written(self) -> tuple[int, ...]:
        """The arrays the forward pass writes (stores, atomics, native code it passes them to)."""
        fwd = self.kernel.lowered("forward")
        user = user_params(fwd)
        return tuple(sorted({user[k] for k in written_params(fwd)}))

    @cached_property
    def written_rows(self) -> dict[int, list]:
        """Array parameter -> the leading-index expressions of its writes (ad/accessed_rows.py)."""
        return leading_rows(self.kernel.lowered("forward"), WRITES)

    @cached_property
    def read(self) -> tuple[int, ...]:
        """The arrays the forward pass reads (loads or atomics)."""
        return self._accessing((Op.LOAD, Op.ATOMIC))

    @cached_property
    def loaded(self) -> tuple[int, ...]:
        """The arrays the forward pass loads (atomics not counted)."""
        return self._accessing((Op.LOAD,))

    def _accessing(self, ops: tuple) -> tuple[int, ...]:
        fwd = self.kernel.lowered("forward")
        user = user_params(fwd)
        ids = {p.value.id: k for k, p in enumerate(fwd.params)}
        return tuple(sorted({user[ids[ins.args[0].id]] for ins in fwd.walk()
                             if ins.op in ops and ins.args[0].id in ids and ids[ins.args[0].id] < len(user)}))

    # adjoint ---------------------------------------------------------------------------------------------
    @cached_property
    def adjoint(self) -> Function | None:
        """The pipeline's adjoint IR; None for a kernel without one (enable_backward=False, or a native
        snippet without an adjoint: backward says so when it needs it)."""
        if not self.kernel.enable_backward:
            return None
        try:
            return self.kernel.lowered("adjoint")
        except CompileError:
            return None

    @cached_property
    def adjoint_reads(self) -> tuple[int, ...]:
        """The arrays whose recorded values the adjoint loads."""
        return _primal_reads(self.adjoint, None)

    @cached_property
    def adjoint_load_rows(self) -> dict[int, list]:
        """Primal array parameter -> the leading-index expressions of the adjoint's loads from it."""
        n = len(user_params(self.kernel.lowered("forward")))
        return leading_rows(self.kernel.lowered("adjoint"), ("load",), range(n))

    @cached_property
    def reads_after(self) -> tuple[int, ...]:
        """The arrays whose values after the launch the adjoint loads (atomic_min/max's winner test, marked
        `final` by reverse mode)."""
        return _primal_reads(self.adjoint, True)

    @cached_property
    def _read_order(self) -> tuple[set, set]:
        """(arrays the kernel reads before overwriting them, arrays whose earlier values it then loses)."""
        fwd = self.kernel.lowered("forward_ad")
        users = user_index(fwd)
        return tuple({users[v] for v in ids} for ids in read_before_write(fwd))

    @cached_property
    def copies(self) -> tuple[tuple[int, int], ...]:
        """(j, j) for each array the adjoint reads from before the launch and the kernel overwrites: the tape
        keeps a copy taken before the launch (when the two are one array: runtime/tape/version_check.py)."""
        copy = self._read_order[0]
        return tuple((j, j) for j in self.adjoint_reads
                     if j in copy and j in self.written and j not in self.reads_after)

    @cached_property
    def read_write_pairs(self) -> tuple[tuple[int, int], ...]:
        """(j, w): an array the adjoint reads and another the kernel writes, which must not be one array."""
        return tuple((j, w) for j in self.adjoint_reads for w in self.written if j != w)

    @cached_property
    def lost(self) -> tuple[int, ...]:
        """Arrays the kernel reads, overwrites and reads again: no copy serves the adjoint's reads."""
        lost = self._read_order[1]
        return tuple(j for j in self.adjoint_reads if j in lost and j not in self.reads_after)

    @cached_property
    def consumable(self) -> tuple[int, ...]:
        """Arrays whose gradient the adjoint reads at an overwriting store but does not reset (ad/consume.py):
        on a tape whose earlier launches used that memory, the consuming adjoint runs."""
        adj = self.kernel.lowered("adjoint")
        user = user_params(adj)
        return tuple(sorted({user[k] for k in adj.attrs["consumable"]}))

    @cached_property
    def rule_violations(self) -> list:
        """Gradient-rule violations certain from the source (core/verify.py's static rules), a read-then-
        modify kept only where the pipeline's adjoint needs the value read."""
        if self.adjoint is None:
            return []
        fwd = self.kernel.lowered("forward_ad")
        found = static_violations(fwd)
        if any(v.rule == 1 for v in found):
            adj = self.adjoint
            needed = {adj.params[k].name for k in range(len(fwd.params))
                      if any(i.op == Op.LOAD and i.args[0] is adj.params[k].value for i in adj.walk())}
            found = [v for v in found if v.rule != 1 or v.array in needed]
        return found


def _primal_reads(adj: Function | None, final: bool | None) -> tuple[int, ...]:
    if adj is None:
        return ()
    users = user_index(adj)
    return tuple(sorted({users[i.args[0].id] for i in adj.walk()
                         if i.op == Op.LOAD and i.args[0].id in users
                         and (final is None or bool(i.attrs.get("final")) == final)}))
