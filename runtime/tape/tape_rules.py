"""What a tape must know about a kernel before recording it: which parameters its adjoint reads (and whether
from before or after the launch), which it writes, which reads need a copy kept, and the gradient rules a
launch breaks (an array read and written as two parameters, reads no copy can serve, writes into arrays an
earlier launch's backward pass still needs). The facts themselves are the kernel's (runtime/launch/kernel_facts.py)."""

from __future__ import annotations

from ...backends.analysis import shares_memory
from ...core.errors import GradientRuleError


def check_recoverable(kernel) -> None:
    """An array the kernel reads and then overwrites (in a loop, or at possibly equal indices) while also
    reading its own writes: neither the values before nor after the launch are what each read saw."""
    lost = kernel.facts().lost
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
    facts = kernel.facts()
    written = facts.written
    if not written:
        return
    names = [n for n, _ in kernel.params]
    for j in facts.adjoint_reads:
        for w in written:
            if w != j and shares_memory(args[w], args[j]):
                label = getattr(args[j], "label", None) or names[j]
                raise GradientRuleError(
                    f"kernel '{kernel.key}' reads array '{label}' as parameter '{names[j]}' and writes the same "
                    f"array as parameter '{names[w]}'; its backward pass needs the values from before the launch. "
                    "Write the result into a separate array.")


def check_launch(launches, kernel, bound) -> None:
    """With checks on, before a launch: in-kernel rule violations, aliasing, unrecoverable reads, and writes into
    arrays the backward pass of an earlier launch (`launches`, LaunchRecords) reads."""
    facts = kernel.facts()
    names = [n for n, _ in kernel.params]
    for w in facts.written:
        a = bound[w]
        for rec in launches:
            for j in rec.kernel_obj.facts().adjoint_reads:
                if shares_memory(rec.args[j], a):
                    label = getattr(a, "label", None) or names[w]
                    raise GradientRuleError(
                        f"kernel '{kernel.key}' writes array '{label}', whose values the backward pass of the "
                        f"earlier launch of '{rec.kernel}' (parameter '{[n for n, _ in rec.kernel_obj.params][j]}')"
                        f" needs; write into a new array instead of overwriting it")
    if facts.rule_violations:
        raise GradientRuleError("\n".join(v.describe(kernel.key) for v in facts.rule_violations))
    check_aliasing(kernel, bound)
    check_recoverable(kernel)
