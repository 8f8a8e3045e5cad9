"""Folding for `tape.visualize(simplify_graph=True)`: a run of launches that repeats back to back (a time
step of one kernel, or of several, launched 100 times) is drawn once with its count, and the arrays of
the folded repetitions are drawn as the arrays of the first repetition at the same argument slot."""

from __future__ import annotations

from dataclasses import dataclass

MAX_PERIOD = 32     # the longest repeated block of launches looked for


@dataclass(frozen=True)
class Repeat:
    """Launches start .. start + period - 1, repeated `count` times back to back."""
    start: int
    period: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.period * self.count


def find_repeats(signatures: list) -> list[Repeat]:
    """Greedy left-to-right: at each launch, the block (period <= MAX_PERIOD) whose back-to-back repeats
    cover the most launches (the shortest such block on a tie), when it repeats at least twice."""
    repeats, k, n = [], 0, len(signatures)
    while k < n:
        best = None
        for period in range(1, min(MAX_PERIOD, (n - k) // 2) + 1):
            block = signatures[k:k + period]
            count = 1
            while signatures[k + count * period:k + (count + 1) * period] == block:
                count += 1
            if count >= 2 and (best is None or period * count > best.period * best.count):
                best = Repeat(k, period, count)
        if best is None:
            k += 1
        else:
            repeats.append(best)
            k = best.end
    return repeats


def fold(args: list, signatures: list) -> tuple[dict[int, Repeat], dict[int, int], dict]:
    """(repeat by first-repetition launch index, representative launch index of every folded launch,
    representative array key of every array seen only in folded launches). `args[k]` lists launch k's
    argument keys (None for a scalar)."""
    repeats = find_repeats(signatures)
    first: dict[int, Repeat] = {}
    launch_rep: dict[int, int] = {}
    for rep in repeats:
        for k in range(rep.start, rep.start + rep.period):
            first[k] = rep
        for k in range(rep.start + rep.period, rep.end):
            launch_rep[k] = rep.start + (k - rep.start) % rep.period
    drawn = {a for k, keys in enumerate(args) if k not in launch_rep for a in keys if a is not None}
    array_rep: dict = {}
    for k, r in launch_rep.items():
        for a, rep_a in zip(args[k], args[r]):
            if a is not None and a not in drawn and a not in array_rep:
                array_rep[a] = rep_a
    return first, launch_rep, array_rep
