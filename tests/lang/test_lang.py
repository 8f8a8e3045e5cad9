"""The language tier's cells: every construct × mode (forward, reverse, forward mode) × device — the
conformance suite's language test (gradkit/conformance/suite/test_language.py), collected here so that its
results feed docs/coverage.md. A construct marked not differentiable has only its forward cell (n/a in the
table); a cell in `refuses` checks the documented error ("refused")."""

from gradkit.conformance.suite.test_language import test_cell  # noqa: F401  (collected by pytest here)
