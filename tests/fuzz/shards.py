"""What both fuzz tiers (random kernels, random taped programs) do per shard: run its programs, each from a
seed of its own, collect failures by kind, record the counters, and open the failure report."""

from __future__ import annotations


def run_shard(prefix: str, size: int, generate, check, kind_of) -> dict[str, list]:
    """{failure kind: [(seed, program, exception), ...]} for programs `prefix/0` .. `prefix/size-1`."""
    failures: dict[str, list] = {}
    for k in range(size):
        seed = f"{prefix}/{k}"
        prog = generate(seed)
        try:
            check(prog)
        except Exception as e:                   # every exception is a failure (a tier passes refusals itself)
            failures.setdefault(kind_of(e), []).append((seed, prog, e))
    return failures


def record_counts(record_property, counts, prefix: str) -> None:
    for key, value in sorted(counts.items()):
        record_property(f"{prefix}_{key}", value)


def report_head(failures: dict, size: int, what: str) -> list[str]:
    """The first lines of a failing shard's report: how many failed, and each kind with its first seed."""
    lines = [f"{sum(map(len, failures.values()))} of {size} {what} failed:"]
    lines += [f"  {len(v):4d} x {kind}   (first: {v[0][0]})" for kind, v in failures.items()]
    return lines
