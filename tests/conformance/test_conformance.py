"""The shipped backend conformance suite (gradkit/conformance/suite/) on every device of gradkit's own
test run: builtins op by op, faults, grids and reductions, memory, native snippets, concurrent launches.
Its language cells are collected in tests/lang/test_lang.py, whose results feed docs/coverage.md."""

from gradkit.conformance.suite.test_builtins import *  # noqa: F401,F403
from gradkit.conformance.suite.test_faults import *  # noqa: F401,F403
from gradkit.conformance.suite.test_grids_and_reductions import *  # noqa: F401,F403
from gradkit.conformance.suite.test_memory import *  # noqa: F401,F403
from gradkit.conformance.suite.test_native import *  # noqa: F401,F403
from gradkit.conformance.suite.test_threads import *  # noqa: F401,F403
