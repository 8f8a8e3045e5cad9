"""The conformance tests (run through gradkit.conformance). Each takes the `device` fixture and names no
backend; gradkit's own test suite collects them too (tests/conformance/)."""
