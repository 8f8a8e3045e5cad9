"""What a tape must know about a kernel before recording it: which parameters its adjoint reads (and whether
from before or after the launch), which it writes, which reads need a copy kept, and the gradient rules a
launch breaks (an array read and written as two parameters, reads no copy can serve, writes into arrays an
earlier launch's backward pass still needs). Cached on the kernel and its IR."""

from __future__ import annotations

from ..ad.accessed_rows import user_index
from ..backends.analysis import shares_memory
from ..ad.read_order import read_before_write
from ..core.errors import CompileError, GradientRuleError
from ..core.ops import Op
from ..core.passes.scalarize import user_params


def written_user_params(kernel) -> list[int]:
    """User-level parameter indices of the arrays a kernel's forward pass writes (cached on the IR)."""
    from ..backends.analysis import written_params
    fwd = kernel.lowered("forward")
    cached = fwd.attrs.get("_written_user")
    if cached is None:
        user = user_params(fwd)
        cached = fwd.attrs["_written_user"] = sorted({user[k] for k in written_params(fwd)})
    return cached


def read_user_params(kernel) -> list[int]:
    """User-level parameter indices of the arrays a kernel's forward pass reads (loads or atomics)."""
    return _accessing_user_params(kernel, (Op.LOAD, Op.ATOMIC), "_read_user")


def loaded_user_params(kernel) -> list[int]:
    """User-level parameter indices of the arrays a kernel's forward pass loads (atomics not counted)."""
    return _accessing_user_params(kernel, (Op.LOAD,), "_loaded_user")


def _accessing_user_params(kernel, ops: tuple, key: str) -> list[int]:
    fwd = kernel.lowered("forward")
    cached = fwd.attrs.get(key)
    if cached is None:
        user = user_params(fwd)
        ids = {p.value.id: k for k, p in enumerate(fwd.params)}
        cached = fwd.attrs[key] = sorted(
            {user[ids[ins.args[0].id]] for ins in fwd.walk()
             if ins.op in ops and ins.args[0].id in ids and ids[ins.args[0].id] < len(user)})
    return cached


def tape_info(kernel) -> tuple:
    """(the adjoint IR it was made from, parameters whose recorded values the adjoint reads, [(j, j)] for
    those the kernel reads before overwriting them (the tape keeps a copy from before the launch),
    [(j, w)] pairs of a read and another, written parameter, which must not be one array), cached."""
    info = kernel._tape_info
    if info is not None and info[0] is kernel._lowered.get("adjoint"):
        return info
    try:
        adj = kernel.lowered("adjoint") if kernel.enable_backward else None
    except CompileError:
        adj = None                      # no adjoint (a native snippet without one): backward will say so
    if adj is None:
        kernel._tape_info = (None, (), (), (), ())
        return kernel._tape_info
    reads, written = primal_reads(adj, kernel), written_user_params(kernel)
    after = primal_reads(adj, kernel, True)
    fwd = kernel.lowered("forward_ad")
    users = user_index(fwd)
    copy, lost = ({users[v] for v in ids} for ids in read_before_write(fwd))
    info = kernel._tape_info = (adj, reads, [(j, j) for j in reads if j in copy and j in written
                                             and j not in after],
                                [(j, w) for j in reads for w in written if j != w],
                                [j for j in reads if j in lost and j not in after])
    return info


def check_recoverable(kernel) -> None:
    """An array the kernel reads and then overwrites (in a loop, or at possibly equal indices) while also
    reading its own writes: neither the values before nor after the launch are what each read saw."""
    lost = tape_info(kernel)[4]
    if lost:
        names = [n for n, _ in kernel.params]
        raise GradientRuleError(
            f"kernel '{kernel.key}' reads elements of '{names[lost[0]]}' that it overwrites later (in a loop, or "
            "at an index that may be the same element), while other reads see what it wrote: its backward pass "
            "cannot recover the values each read saw. Keep the running value in a local variable (locals, "
            "loop-carried ones too, are differentiable) or write into a separate array.")


def check_aliasing(kernel, args) -> None:
    """One array (or two sharing memory: views) passed both as a parameter whose values the adjoint reads
    and as another parameter the launch writes (`y = x * x` into x): the two parameters' gradients would be one array too, which the
    adjoint cannot tell apart. Raise before the launch under checks, and at backward always."""
    written = written_user_params(kernel)
    if not written:
        return
    names = [n for n, _ in kernel.params]
    for j in tape_info(kernel)[1]:
        for w in written:
            if w != j and shares_memory(args[w], args[j]):
                label = getattr(args[j], "label", None) or names[j]
                raise GradientRuleError(
                    f"kernel '{kernel.key}' reads array '{label}' as parameter '{names[j]}' and writes the same "
                    f"array as parameter '{names[w]}'; its backward pass needs the values from before the launch. "
                    "Write the result into a separate array.")


def primal_reads(adj_fn, kernel, final: bool | None = None) -> list[int]:
    """User-level parameter indices of arrays whose primal values the adjoint loads; `final=False` only
    loads of the values from before the launch, `final=True` only loads of its results (atomic_min/max's
    winner test, marked `final` by reverse mode)."""
    key = f"_primal_reads_{final}"
    cached = adj_fn.attrs.get(key)
    if cached is not None:
        return cached
    users = user_index(adj_fn)
    reads = sorted({users[i.args[0].id] for i in adj_fn.walk()
                    if i.op == Op.LOAD and i.args[0].id in users
                    and (final is None or bool(i.attrs.get("final")) == final)})
    adj_fn.attrs[key] = reads
    return reads


def check_launch(launches, kernel, bound) -> None:
    """With checks on, before a launch: in-kernel rule violations, aliasing, unrecoverable reads, and writes into
    arrays the backward pass of an earlier launch (`launches`, LaunchRecords) reads."""
    kernel.lowered("forward_ad")
    names = [n for n, _ in kernel.params]
    for w in written_user_params(kernel):
        a = bound[w]
        for rec in launches:
            reads = primal_reads(rec.kernel_obj.lowered("adjoint"), rec.kernel_obj)
            for j in reads:
                if shares_memory(rec.args[j], a):
                    label = getattr(a, "label", None) or names[w]
                    raise GradientRuleError(
                        f"kernel '{kernel.key}' writes array '{label}', whose values the backward pass of the "
                        f"earlier launch of '{rec.kernel}' (parameter '{[n for n, _ in rec.kernel_obj.params][j]}')"
                        f" needs; write into a new array instead of overwriting it")
    if kernel.rule_violations:
        raise GradientRuleError("\n".join(v.describe(kernel.key) for v in kernel.rule_violations))
    check_aliasing(kernel, bound)
    check_recoverable(kernel)
