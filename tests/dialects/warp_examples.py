"""Load one of Warp's own example scripts from the installed `warp` package twice: as written (real Warp,
the reference) and with only its `import warp...` lines pointed at gradkit (`import warp as wp` ->
`import gradkit.warp as wp`, `import warp.optim` -> gradkit.warp.optim, ...; rendering off)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import types

import numpy as np
import pytest

from gradkit.warp.examples import load_example


def example_path(rel: str) -> pathlib.Path:
    spec = importlib.util.find_spec("warp")
    if spec is None:
        pytest.skip("warp-lang (the reference) is not installed")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "examples" / rel
    if not path.is_file():
        pytest.skip(f"this Warp has no {rel}")
    return path


def load(rel: str, gradkit: bool, edits: tuple = ()) -> types.ModuleType:
    """The example as a module (not __main__: its command-line part does not run), by gradkit.warp's
    `load_example`. `edits`: (old, new) source replacements gradkit still needs besides the imports
    (docs/porting/warp.md lists them)."""
    example_path(rel)
    return load_example(rel, gradkit=gradkit, edits=edits if gradkit else ())


def quiet(fn):
    """`fn()` with the example's prints swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn()


def close(got, want, rtol=1e-4, atol=1e-5):
    """gradkit's result against Warp's: `atol` relative to Warp's largest magnitude."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(np.abs(want).max(), 1e-30)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale)


def run_both(rel: str, edits: tuple = (), setup=None, steps: int = 2) -> dict:
    """{False: Warp's Example, True: gradkit.warp's} of example `rel` (gradkit's with `edits`), each set up
    by `setup(example)` and stepped `steps` times."""
    out = {}
    for gk in (False, True):
        e = load(rel, gradkit=gk, edits=edits if gk else ()).Example()
        if setup is not None:
            setup(e)
        for _ in range(steps):
            quiet(e.step)
        out[gk] = e
    return out
