"""The language table: one construct of the kernel language per case (cases_*.py: a small kernel, its
arguments and a float64 NumPy reference) and the harness that checks each forward, in reverse and in
forward mode on a device (harness.py). docs/coverage.md is generated from gradkit's own run of it."""
