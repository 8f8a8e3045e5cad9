"""Fuzzing: random kernel programs (generate.generate) on every device, checked by checker.check_program
against an independent float64 reference (the same source run by np_gk) and finite differences.

Sized for CI (about 3 minutes under `pytest -n 2` with cold caches): 10 shards of SHARD_SIZE programs on
cpu and numpy, 3 half-size shards on OpenCL (PoCL compiles slowly), 2150 programs on this machine's three
devices; shards are small so that pytest-xdist balances them. Program k of a shard comes from the seed
"SEED/device/shard/k": fixed in CI, a new SEED per `make fuzz` campaign (GRADKIT_FUZZ_SEED repeats one;
GRADKIT_FUZZ_EXAMPLES sets programs per shard, GRADKIT_FUZZ_SIZE scales program size). A shard runs all its
programs, then fails listing every kind of failure (program source included);
`python -m tests.fuzz.replay SEED DEVICE --reduce` re-runs one and minimises it.
"""

import os
import pathlib
import re
import tempfile
import traceback

import pytest

import gradkit as gk
from tests.conftest import DEVICES
from tests.fuzz.checker import STATS, check_program
from tests.fuzz.generate import generate
from tests.fuzz.shards import record_counts, report_head, run_shard

SHARD_SIZE = int(os.environ.get("GRADKIT_FUZZ_EXAMPLES", "100"))
SEED = os.environ.get("GRADKIT_FUZZ_SEED", "20261123")     # CI: fixed; `make fuzz`: new programs each run
SHARDS = {"opencl": (3, 0.5)}    # per backend: shards, and programs per shard as a share of SHARD_SIZE
DEFAULT_SHARDS = (10, 1.0)       # (PoCL compiles ~1 s per program; the cpu backend ~0.1 s, numpy ~0.05 s)
PLAN = {d: SHARDS.get(gk.get_device(d).backend, DEFAULT_SHARDS) for d in DEVICES}
CASES = [(d, k) for d in DEVICES for k in range(PLAN[d][0])]
FOLDER = pathlib.Path(tempfile.mkdtemp(prefix="gradkit-fuzz-"))
MAX_DISCARD = 0.25               # a generator that throws away more than this has drifted: fail
SHOWN = 3                        # failing programs printed in full per shard (one per kind of failure)


def _kind(e: BaseException) -> str:
    """A failure's kind: exception type and first message line without paths, numbers or names."""
    first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
    first = re.sub(r"\S*fuzz_case_\S*|'[A-Za-z_]\w*'|-?\d[\d.e+-]*", "_", first)
    return f"{type(e).__name__}: {first[:120]}"


@pytest.mark.parametrize(("device", "shard"), CASES, ids=[f"{d}-{k}" for d, k in CASES])
def test_random_programs(device, shard, record_property):
    """One shard: SHARD_SIZE programs, each from a seed of its own."""
    before = STATS.copy()
    size = max(1, round(SHARD_SIZE * PLAN[device][1]))
    failures = run_shard(f"{SEED}/{device}/{shard}", size, generate,
                         lambda p: check_program(p, device, FOLDER), _kind)
    counts = STATS - before
    record_counts(record_property, counts, "fuzz")
    if failures:
        lines = report_head(failures, size, f"programs on {device}")
        for kind, v in list(failures.items())[:SHOWN]:
            seed, prog, e = v[0]
            tb = "".join(traceback.format_exception(e)[-3:])
            replay = f"python -m tests.fuzz.replay '{seed}' {device} --reduce"
            lines += ["", f"--- {kind}", replay, repr(prog), tb]
        pytest.fail("\n".join(lines), pytrace=False)
    discarded = counts["discard_value"] + counts["discard_kink"]
    if counts["programs"] >= 50:
        assert discarded <= MAX_DISCARD * counts["programs"], f"too many programs discarded: {dict(counts)}"
