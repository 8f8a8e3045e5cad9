"""Load one of Warp's own example scripts from the installed `warp` package twice: as written (real Warp,
the reference) and with only its `import warp...` lines pointed at gradkit (`import warp as wp` ->
`import gradkit.warp as wp`, `import warp.optim` -> gradkit.warp.optim, ...; rendering off)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import pathlib
import re
import sys
import types

import numpy as np
import pytest

_IMPORT = re.compile(r"^(\s*)import warp(\.[\w.]+)?( as wp)?\s*$", re.M)
_FROM = re.compile(r"^(\s*)from warp(\.[\w.]+)? import ", re.M)
_count = itertools.count()


def example_path(rel: str) -> pathlib.Path:
    spec = importlib.util.find_spec("warp")
    if spec is None:
        pytest.skip("warp-lang (the reference) is not installed")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "examples" / rel
    if not path.is_file():
        pytest.skip(f"this Warp has no {rel}")
    return path


def _gradkit_imports(source: str) -> tuple[str, int]:
    """Only the import lines change; `warp.<sub>` then names gradkit.warp's submodule, and
    `from warp.<sub> import X` imports from gradkit.warp.<sub>."""
    def repl(m):
        indent, sub, alias = m.group(1), m.group(2) or "", m.group(3)
        if alias and not sub:
            return f"{indent}import gradkit.warp as wp"
        return f"{indent}import gradkit.warp{sub}; from gradkit import warp"
    source, n = _IMPORT.subn(repl, source)
    source, m = _FROM.subn(lambda m: f"{m.group(1)}from gradkit.warp{m.group(2) or ''} import ", source)
    return source, n + m


def load(rel: str, gradkit: bool, edits: tuple = ()) -> types.ModuleType:
    """The example as a module (not __main__: its command-line part does not run). `edits`: (old, new)
    source replacements gradkit still needs besides the imports (docs/porting/warp.md lists them)."""
    path = example_path(rel)
    source = path.read_text()
    if gradkit:
        for old, new in edits:
            assert source.count(old) == 1, f"{rel}: the edit's text {old!r} is not there once"
            source = source.replace(old, new)
        source, n = _gradkit_imports(source)
        assert n >= 1, f"{rel}: no `import warp` line found"
    name = f"_warp_example_{path.stem}_{'gk' if gradkit else 'wp'}_{next(_count)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)       # kernels read their source from it (the text compiled is `source`)
    sys.modules[name] = module        # @wp.struct / dataclasses look their module up
    code = compile(source, str(path), "exec")
    if gradkit:
        # gradkit reads a kernel's source from its file; give it the rewritten text under the same name
        import linecache
        linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
    exec(code, module.__dict__)
    return module


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
