"""CONSTRUCTS: every construct of the language tier, family by family (the rows of docs/coverage.md)."""

from . import (cases_arrays, cases_builtins, cases_control, cases_quat, cases_random, cases_scalar, cases_stores,
               cases_structs, cases_vecmat)
from . import cases_decompositions

CONSTRUCTS = [*cases_scalar.CASES, *cases_control.CASES, *cases_vecmat.CASES, *cases_builtins.CASES,
              *cases_arrays.CASES, *cases_stores.CASES, *cases_structs.CASES,
              *cases_quat.CASES, *cases_random.CASES, *cases_decompositions.CASES]
BY_NAME = {c.name: c for c in CONSTRUCTS}
assert len(BY_NAME) == len(CONSTRUCTS), "construct names must be unique"
