"""The language tier: one table of constructs (gradkit/conformance/lang/cases_*.py), each checked forward, in reverse
and in forward mode on every device; docs/coverage.md is generated from its results (coverage.py)."""
