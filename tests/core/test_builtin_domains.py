"""Builtins carry their sampling domain (issue 38 item 4): the tests' table, the conformance suite and the
fuzz grammar read or cover every public math builtin from the declared table, so a builtin added with one
table entry is tested everywhere or a test here names what is missing."""

import re

import numpy as np
import pytest

from gradkit.conformance.lang import cases_builtins
from gradkit.core.builtins import BUILTINS
from tests import builtin_table
from tests.fuzz import exprs

# public float functions of one or two arguments, differentiable: each needs a domain and coverage
MATH = sorted(n for n, b in BUILTINS.items() if b.public and b.differentiable and b.arity in (1, 2)
              and b.partials is not None)


@pytest.mark.parametrize("name", MATH)
def test_every_public_math_builtin_declares_where_to_sample(name):
    b = BUILTINS[name]
    assert b.domain is not None and len(b.domain) == b.arity, f"{name}: declare domain=((lo, hi),) per argument"
    assert all(lo < hi for lo, hi in b.domain)
    grid = np.meshgrid(*[np.linspace(lo, hi, 101) for lo, hi in b.domain])
    assert np.isfinite(b.eval(*grid)).all(), f"{name} is not finite on its declared domain"


def test_the_tables_cover_every_math_builtin():
    tables = {"tests/builtin_table.py": set(builtin_table.UNARY) | set(builtin_table.BINARY),
              "conformance/lang/cases_builtins.py": set(cases_builtins.UNARY) | {"atan2", "pow", "min", "max"},
              "tests/fuzz/exprs.py": {m for s in exprs.UNARY + exprs.BINARY for m in re.findall(r"gk\.(\w+)\(", s)}}
    missing = {where: sorted(set(MATH) - names) for where, names in tables.items() if set(MATH) - names}
    assert not missing, f"math builtins without a row: {missing}"


def test_the_tables_sample_the_declared_domains():
    for name, row in builtin_table.UNARY.items():
        assert row[-1] == BUILTINS[name].domain[0], name
    for name, row in builtin_table.BINARY.items():
        assert row[-1] == BUILTINS[name].domain, name
    for name, (ref, dom) in cases_builtins.UNARY.items():
        assert ref is BUILTINS[name].eval and dom == BUILTINS[name].domain[0], name
