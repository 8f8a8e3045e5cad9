"""The tape-level fuzz tier (issue 36, item 5): random taped programs (tape_programs.generate: 2-8 launches
and host ops over 1-3 time steps, reused buffers, time-indexed arrays, partial overwrites, stencils,
atomics into shared elements, views, `gk.copy`, `copy()`, checkpoint blocks) on every device, each
program's gradient with respect to every element of every input parameter against central differences of
the same program run in float64 without a tape; a fifth of them forward-over-reverse too.

Sized for CI: 1150 programs on this machine's three devices (cpu 7 x 100, numpy 3 x 100, OpenCL 2 x 75),
about 45 s under `pytest -n 2` with cold kernel caches (35 s of CPU); shards are small so that
pytest-xdist balances them, fewer and smaller on OpenCL (PoCL compiles each kernel variant in about a
second) and numpy (an interpreter). Defects found: TAPE_FOUND.md. Program k of a shard comes from the seed "SEED/device/shard/k": fixed
in CI, a new SEED per `make fuzz` campaign (GRADKIT_FUZZ_SEED; GRADKIT_FUZZ_EXAMPLES sets programs per
shard). A shard runs all its programs, then fails listing every kind of failure with its first program's
source (and, for the first few kinds, that program reduced);
`python -m tests.fuzz.tape_replay SEED DEVICE --reduce` re-runs one and minimises it.

A program refused with `gk.GradientRuleError` (an op overwrote values an earlier backward needs) counts
as refused, not failed; the generator keeps such programs rare (tape_programs.HAZARD_KEEP), and a shard
that refuses more than MAX_REFUSED of its programs fails: the generator or gradkit's checks drifted.
"""

import os
import time
import traceback

import pytest

import gradkit as gk
from tests.conftest import DEVICES
from tests.fuzz.tape_check import STATS, check_program, kind_of
from tests.fuzz.tape_generate import generate
from tests.fuzz.shards import record_counts, report_head, run_shard
from tests.fuzz.tape_replay import outcome, reduce

SHARD_SIZE = int(os.environ.get("GRADKIT_FUZZ_EXAMPLES", "100"))
SEED = os.environ.get("GRADKIT_FUZZ_SEED", "20261201")
SHARDS = {"opencl": (2, 0.75), "numpy": (3, 1.0)}    # per backend: shards, programs per shard / SHARD_SIZE
DEFAULT_SHARDS = (7, 1.0)        # (the cpu backend: ~30 ms a program; numpy's interpreter ~80; PoCL ~100)
PLAN = {d: SHARDS.get(gk.get_device(d).backend, DEFAULT_SHARDS) for d in DEVICES}
CASES = [(d, k) for d in DEVICES for k in range(PLAN[d][0])]
MAX_REFUSED = 0.25
REDUCED = int(os.environ.get("GRADKIT_TAPE_FUZZ_REDUCE", "3"))   # kinds shown reduced too
REDUCE_BUDGET_S = 20.0       # at most this long reducing, per shard


@pytest.mark.parametrize(("device", "shard"), CASES, ids=[f"{d}-{k}" for d, k in CASES])
def test_tape_programs(device, shard, record_property):
    """One shard: its programs, each from a seed of its own; every failure kind listed at the end."""
    before = STATS.copy()
    size = max(1, round(SHARD_SIZE * PLAN[device][1]))
    # check_program raises for a wrong gradient or any exception but the refusal
    failures = run_shard(f"{SEED}/{device}/{shard}", size, generate, lambda p: check_program(p, device), kind_of)
    counts = STATS - before
    record_counts(record_property, counts, "tape")
    if failures:
        lines = report_head(failures, size, f"taped programs on {device}")
        deadline = time.monotonic() + REDUCE_BUDGET_S
        for n, (kind, v) in enumerate(failures.items()):
            seed, prog, e = v[0]
            detail = str(e) if kind.startswith(("reverse", "forward")) else \
                "".join(traceback.format_exception(e)[-3:])
            lines += ["", f"--- {kind}", f"python -m tests.fuzz.tape_replay '{seed}' {device} --reduce",
                      prog.source(), detail]
            if n < REDUCED and time.monotonic() < deadline:
                first = outcome(prog, device)
                if first is not None:
                    small = reduce(prog, device, lambda q: time.monotonic() < deadline and
                                   (o := outcome(q, device)) is not None and o[0] == first[0])
                    lines += ["reduced:", small.source()]
        pytest.fail("\n".join(lines), pytrace=False)
    if counts["programs"] >= 50:
        assert counts["refused"] <= MAX_REFUSED * counts["programs"], \
            f"too many programs refused with gk.GradientRuleError: {dict(counts)}"
