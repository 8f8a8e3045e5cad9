"""Golden IR tests (xDSL/FileCheck style): each small kernel in tests/passes/cases/ is paired with the
printed IR expected after each pass it exercises, in tests/passes/golden/<stage>/<case>.ir.

A golden file is a spec, reviewed by hand, not a snapshot: when a pass changes on purpose, regenerate
and read the diff before committing it.

    GRADKIT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/passes     # rewrite the golden files

Without GRADKIT_UPDATE_GOLDEN a mismatch fails with a unified diff (expected → actual) and a missing
golden file fails (it is never created silently). An environment variable rather than a command-line
option because a subdirectory conftest cannot add pytest options reliably.

Stages (STAGE_ORDER): the IR is printed with `format_function`, source lines included (`# line N`);
lines are those of the case file, which holds one kernel, so they do not depend on the checkout.

    frontend   kernel.typed_ir                                    (ast → typed core IR)
    inline     run_passes(<frontend>, [INLINE])
    scalarize  run_passes(<inline>,   [SCALARIZE])
    simplify   run_passes(<scalarize>, [SIMPLIFY])
    promote    run_passes(<simplify>, [PROMOTE])
    lower      lower(kernel.typed_ir): the whole pipeline, promote's output simplified again
    expand     run_passes(<lower>, [EXPAND])   (core/passes/expand.py: floored //, %, clamp, sign, abs)
    forward    kernel.lowered("forward"): calls kept for custom gradients inlined (inline_kept, simplify)
    backend    for_backend(<lower>): what a backend compiles (expand, then simplify)
    adjoint    kernel.ir(adjoint=True)   (ad/reverse.py adjoint_function of the lowered kernel)
    tangent    kernel.ir(tangent=True)   (ad/forward.py tangent_function of the lowered kernel)

Each pass stage runs that one pass on the previous stage's output (so a pass's golden differs from
the previous stage's golden by exactly what the pass did); test_pipeline_matches_chained_passes checks
that this chain is the library's own `lower` pipeline (its `pass_log`). A case file sets `STAGES`, the
stages it has golden files for; the intermediate stages are still computed. test_ad_passes_are_logged_pipeline_steps
checks that reverse and forward mode are logged, verified steps of the declared pipeline; test_no_orphan_golden_files fails on a
golden file no case asks for (update mode never deletes: remove it by hand).

Adding a case: write cases/<name>.py (a docstring saying what it pins down, `STAGES`, one @gk.kernel and
the @gk.func it calls), run once with GRADKIT_UPDATE_GOLDEN=1, then read every new .ir file as a spec.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import os
import pathlib

import pytest

from gradkit.ad.pipeline import for_backend
from gradkit.core.ir import Function, format_function, verify
from gradkit.core.passes import EXPAND, INLINE, LOWER, PROMOTE, SCALARIZE, SIMPLIFY, lower, run_passes
from gradkit.runtime.kernel import Kernel

HERE = pathlib.Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
GOLDEN_DIR = HERE / "golden"
UPDATE = os.environ.get("GRADKIT_UPDATE_GOLDEN", "") not in ("", "0")

STAGE_ORDER = ("frontend", "inline", "scalarize", "simplify", "promote", "lower", "forward", "expand", "backend",
               "adjoint", "tangent")
# the pass stages, each applied alone to the previous stage's output
PASS_STAGES = {"inline": ("frontend", INLINE), "scalarize": ("inline", SCALARIZE),
               "simplify": ("scalarize", SIMPLIFY), "promote": ("simplify", PROMOTE), "expand": ("lower", EXPAND)}


# --------------------------------------------------------------------------- cases

@functools.cache
def load_case(name: str):
    """Import cases/<name>.py as its own module (not a package: the checkout root is gradkit itself)."""
    path = CASES_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gradkit_golden_case_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernels = [v for v in vars(module).values() if isinstance(v, Kernel)]
    assert len(kernels) == 1, f"{path.name}: a case holds exactly one @gk.kernel, found {len(kernels)}"
    stages = tuple(getattr(module, "STAGES", ()))
    assert stages and set(stages) <= set(STAGE_ORDER), \
        f"{path.name}: STAGES must name stages of {STAGE_ORDER}"
    return kernels[0], stages


CASE_NAMES = sorted(p.stem for p in CASES_DIR.glob("*.py") if not p.name.startswith("_"))
PAIRS = [(c, s) for c in CASE_NAMES for s in STAGE_ORDER if s in load_case(c)[1]]


@functools.cache
def stage_function(case: str, stage: str) -> Function:
    kernel, _ = load_case(case)
    if stage == "frontend":
        return kernel.typed_ir
    if stage in PASS_STAGES:
        prev, p = PASS_STAGES[stage]
        return run_passes(stage_function(case, prev), [p])
    if stage == "lower":
        return lower(kernel.typed_ir)
    if stage == "backend":
        return for_backend(stage_function(case, "lower"))
    if stage == "forward":
        return kernel.lowered("forward")
    raise KeyError(stage)


@functools.cache
def stage_text(case: str, stage: str) -> str:
    kernel, _ = load_case(case)
    if stage == "adjoint":
        return kernel.ir(adjoint=True)
    if stage == "tangent":
        return kernel.ir(tangent=True)
    return format_function(stage_function(case, stage))


def golden_path(case: str, stage: str) -> pathlib.Path:
    return GOLDEN_DIR / stage / f"{case}.ir"


# --------------------------------------------------------------------------- tests

@pytest.mark.parametrize(("case", "stage"), PAIRS, ids=[f"{c}-{s}" for c, s in PAIRS])
def test_golden_ir(case: str, stage: str) -> None:
    actual = stage_text(case, stage)
    # the printer shows `line N` only, never a file: guard against a path creeping in
    assert str(HERE) not in actual and "cases/" not in actual, "printed IR names a file path"
    path = golden_path(case, stage)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != actual:
            path.write_text(actual)
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path.relative_to(HERE)}; review this IR and create it with "
                    f"GRADKIT_UPDATE_GOLDEN=1:\n{actual}", pytrace=False)
    expected = path.read_text()
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True),
                                            actual.splitlines(keepends=True),
                                            f"golden/{stage}/{case}.ir", f"actual {stage} IR of {case}"))
        pytest.fail(f"IR after '{stage}' differs from its golden file (GRADKIT_UPDATE_GOLDEN=1 rewrites it; "
                    f"review the diff first):\n{diff}", pytrace=False)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_pipeline_matches_chained_passes(case: str) -> None:
    """The stages above run the passes one at a time; `lower`'s own log must match them step by step."""
    kernel, _ = load_case(case)
    assert [p.name for p in LOWER] == ["inline", "scalarize", "simplify", "promote", "simplify"], \
        "the lowering pipeline changed: update PASS_STAGES and the stage list in this module's docstring"
    log = lower(kernel.typed_ir, keep_log=True).attrs["pass_log"]
    chained = [("input", "frontend"), ("inline", "inline"), ("scalarize", "scalarize"),
               ("simplify", "simplify"), ("promote", "promote"), ("simplify", "lower")]
    assert [name for name, _ in log] == [name for name, _ in chained]
    for (name, text), (_, stage) in zip(log, chained):
        assert text == stage_text(case, stage), f"lower's '{name}' step differs from the '{stage}' stage"


@pytest.mark.parametrize(("case", "stage"), [(c, s) for c, s in PAIRS if s in ("adjoint", "tangent")],
                         ids=[f"{c}-{s}" for c, s in PAIRS if s in ("adjoint", "tangent")])
def test_ad_passes_are_logged_pipeline_steps(case: str, stage: str) -> None:
    """Reverse and forward mode are passes of the declared pipeline (ad/pipeline.py): the variant's pass log
    runs the lowering passes, then `reverse` / `tangent`, and its last entry is the kernel's AD IR (run_passes
    verified it, types included, on the way)."""
    kernel, _ = load_case(case)
    variant = "adjoint" if stage == "adjoint" else "forward_tangent"
    log = kernel.pass_log(variant)
    names = [name for name, _ in log]
    assert names[: len(LOWER) + 1] == ["input"] + [p.name for p in LOWER]
    assert names[-1] == ("reverse" if stage == "adjoint" else "tangent")
    assert log[-1][1] == stage_text(case, stage)
    verify(kernel.lowered(variant), scalar_only=True)


def test_no_orphan_golden_files() -> None:
    """Every golden file belongs to a (case, stage) pair, so a renamed case leaves nothing stale behind."""
    wanted = {golden_path(c, s) for c, s in PAIRS}
    orphans = sorted(str(p.relative_to(HERE)) for p in GOLDEN_DIR.rglob("*")
                     if p.is_file() and p not in wanted)
    assert not orphans, f"golden files with no case/stage (delete them): {orphans}"
