"""Fuzz summary: programs run, checked and discarded per device, added to pytest's terminal summary
(collected from each shard's recorded properties, so it works under pytest-xdist too)."""

import collections


def _tape_summary(terminalreporter) -> None:
    """The tape-level tier (test_tape_fuzz.py): programs, refusals, discards per device."""
    per_device: dict = collections.defaultdict(collections.Counter)
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        if report.when != "call" or "test_tape_programs" not in report.nodeid:
            continue
        device = report.nodeid.rsplit("[", 1)[-1].rsplit("-", 1)[0]
        for key, value in report.user_properties:
            if key.startswith("tape_"):
                per_device[device][key[5:]] += value
    if not per_device:
        return
    terminalreporter.section("gradkit tape fuzz")
    for device, c in sorted(per_device.items()):
        n = max(c["programs"], 1)
        terminalreporter.write_line(
            f"{device}: {c['programs']} taped programs, {c['reverse']} reverse-checked, {c['hvp']} "
            f"forward-over-reverse-checked; refused (gk.GradientRuleError) {c['refused']} "
            f"({100 * c['refused'] / n:.1f}%; {c['refused_unpredicted']} where the generator saw no hazard); "
            f"{c['discarded']} discarded (huge values)")


def pytest_terminal_summary(terminalreporter) -> None:
    _tape_summary(terminalreporter)
    per_device: dict = collections.defaultdict(collections.Counter)
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        if report.when != "call" or "test_random_programs" not in report.nodeid:
            continue
        device = report.nodeid.rsplit("[", 1)[-1].rsplit("-", 1)[0]
        for key, value in report.user_properties:
            if key.startswith("fuzz_"):
                per_device[device][key[5:]] += value
    if not per_device:
        return
    terminalreporter.section("gradkit fuzz")
    for device, c in sorted(per_device.items()):
        discarded = c["discard_value"] + c["discard_kink"]
        refused = ", ".join(f"{k[8:]} {v}" for k, v in sorted(c.items()) if k.startswith("refused_"))
        terminalreporter.write_line(
            f"{device}: {c['programs']} programs, {c['reverse']} reverse-checked, {c['jvp']} JVP-checked, "
            f"{discarded} discarded ({c['discard_value']} huge/non-finite reference, "
            f"{c['discard_kink']} kink at the sample; {100 * discarded / max(c['programs'], 1):.1f}%)"
            + (f"; documented refusals: {refused}" if refused else "")
            + (f"; {c['tolerated']} failures tolerated (GRADKIT_FUZZ_TOLERATE)" if c["tolerated"] else ""))
