"""Loop sums (`acc += e` in a for loop) may be reassociated by a backend so it can vectorise them; the
analysis picks exactly those adds, and the results still match float64 references on every device."""

import re

import numpy as np
import pytest

import gradkit as gk
from gradkit.backends.analysis import loop_sum_chains
from tests.backends.nbody_helpers import check_pair_sum, pair_sum


@gk.kernel
def not_sums(x: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    growth = 1.0
    back = 0.0
    twice = 0.0
    kahan_c = 0.0
    total = 0.0
    running = 0.0
    peek = 0.0
    for j in range(x.shape[0]):
        peek = peek * 0.5 + running             # reads the running sum each iteration: running is no loop sum
        running = running + x[j]
        growth = growth + growth * x[j]          # acc on both sides: a product, not a sum
        back = x[j] - back                       # acc subtracted from something
        twice = twice + twice                    # both operands are acc
        y = x[j] - kahan_c                       # Kahan summation: order matters
        t = total + y
        kahan_c = (t - total) - y
        total = t
    out[0] = growth
    out[1] = back
    out[2] = twice
    out[3] = total
    out[4] = peek


@gk.kernel
def sums(x: gk.array(dtype=float), out: gk.array(dtype=float)):
    i = gk.tid()
    s = 0.0
    d = 0.0
    for j in range(x.shape[0]):
        s += x[j] * x[j]
        s += 1.0
        d -= gk.sin(x[j])
    out[i] = s + d


def _for_loop(kernel):
    fn = kernel.lowered("forward")
    return next(ins for ins in fn.body.walk() if ins.op == "for")


def _chain_names(kernel) -> list[str]:
    loop = _for_loop(kernel)
    region = loop.regions[0]
    ids = loop_sum_chains(region, region.params[1:])
    return sorted(ins.attrs["name"] for ins in region.walk() if ins.results and ins.results[0].id in ids)


def test_only_accumulations_are_loop_sums():
    assert _chain_names(not_sums) == []
    assert _chain_names(sums) == ["add", "add", "sub"]
    assert _chain_names(pair_sum) == ["add"] or _chain_names(pair_sum) == ["sub"]


@pytest.mark.skipif("cpu" not in [d.name for d in gk.get_devices()], reason="cpu backend unavailable")
def test_cpu_vectorises_loop_sums_and_keeps_other_arithmetic_in_order():
    text = pair_sum.source("cpu")
    assert re.search(r"f(add|sub) reassoc nsz <\d+ x float>", text)        # a vectorised partial sum
    kahan = not_sums.source("cpu")
    assert "reassoc" not in kahan


def test_loop_sums_match_float64(device, rng):
    check_pair_sum(device, rng.uniform(-1, 1, (1000, 2)).astype(np.float32), rtol=1e-5, grad_rtol=2e-4)


def test_kahan_summation_keeps_its_compensation(device):
    # 1 + 1e-8 * n in float32: naive summation loses every small term, Kahan's keeps them
    vals = np.full(4097, 1e-8, np.float32)
    vals[0] = 1.0
    x = gk.array(vals, device=device)
    out = gk.zeros(5, device=device)
    gk.launch(not_sums, 1, inputs=[x], outputs=[out], device=device)
    back, growth = np.float32(0.0), np.float32(1.0)
    for v in vals:
        back = v - back                              # float32, in order
        growth = growth + growth * v
    got_growth, got_back, twice, total = out.numpy()[:4]
    assert got_back == back and twice == 0.0 and got_growth == pytest.approx(growth, rel=1e-6)
    assert total == pytest.approx(1.0 + 4096e-8, rel=1e-7, abs=0)    # a plain float32 sum stays at 1.0
