"""Records the outcome of every language-tier cell (construct, mode, device) into a JSON file when the
environment variable GRADKIT_LANG_RESULTS names one; tests/lang/coverage.py turns it into docs/coverage.md.

Each cell item carries its (construct, mode, device) in `user_properties`, which pytest-xdist ships with
the reports, so the controller process (the only one that writes the file) sees every cell."""

from __future__ import annotations

import datetime
import json
import os
import warnings

RESULTS_ENV = "GRADKIT_LANG_RESULTS"
_RANK = {"passed": 0, "skipped": 1, "failed": 2}
_cells: dict[str, str] = {}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if {"case", "mode", "device"} <= params.keys() and hasattr(params["case"], "kernel"):
            cell = f"{params['case'].name}|{params['mode']}|{params['device']}"
            item.user_properties.append(("lang_cell", cell))


def pytest_runtest_logreport(report) -> None:
    if not os.environ.get(RESULTS_ENV):
        return
    cell = dict(report.user_properties).get("lang_cell")
    if cell is None or (report.when != "call" and report.passed):
        return
    outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
    if cell not in _cells or _RANK[outcome] > _RANK[_cells[cell]]:
        _cells[cell] = outcome


def pytest_sessionfinish(session) -> None:
    path = os.environ.get(RESULTS_ENV)
    if not path or hasattr(session.config, "workerinput"):
        return
    import gradkit as gk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        devices = {d.name: d.description for d in gk.get_devices()}
    ran = sorted({c.split("|")[2] for c in _cells})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"date": datetime.date.today().isoformat(), "devices": {d: devices.get(d, "") for d in ran},
                   "cells": _cells}, f, indent=1, sort_keys=True)
