"""Golden IR tests (xDSL/FileCheck style): each small kernel in tests/passes/cases/ is paired with the
printed IR expected after each stage it exercises, in tests/passes/golden/<stage>/<case>.ir.

A golden file is a spec, reviewed by hand, not a snapshot: when a pass changes on purpose, regenerate
and read the diff before committing it.

    GRADKIT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/passes/test_golden_ir.py   # rewrite them

Without GRADKIT_UPDATE_GOLDEN a mismatch fails with a unified diff (expected → actual) and a missing
golden file fails (it is never created silently). An environment variable rather than a command-line
option because a subdirectory conftest cannot add pytest options reliably.

The stages are not listed here by hand: `declared_stages()` reads them from the declared pipeline, so a
pass or variant added there is a stage here, and test_every_declared_stage_has_a_golden_case fails until a
case exercises it. The IR is printed with `format_function`, source lines included (`# line N`); lines
are those of the case file, which holds one kernel, so they do not depend on the checkout.

    frontend      kernel.typed_ir                                     (ast → typed core IR)
    <pass>        one stage per pass of LOWER (core/passes: inline, scalarize, simplify, promote), each
                  that one pass run on the previous stage's output; LOWER's last pass gives `lower`
    <variant>     every ad/pipeline.py VARIANTS entry, built from its source variant's stage by its passes
                  (`build_variant`); forward_ad's stage is called `lower` and forward_tangent's `tangent`
                  (their golden folders' names): lower, forward, adjoint, adjoint_gather, adjoint_shared,
                  tangent, adjoint_tangent, adjoint_consume, ... (the `*_tangent` forms too)
    expand        the backend stage's first pass alone on `lower` (core/passes/expand.py)
    backend       for_backend(<lower>): what a backend compiles (`backend_passes()`: expand, simplify)
    uniform       the seeded adjoint `<base>@u<k>`: seeded_variant(<base>, (k,)) (ad/uniform.py, then
                  simplify); the case names base and positions in `UNIFORM = ("adjoint", (k,))`
    widen         Kernel.widened().typed_ir: every float32 type made float64 (core/passes/widen.py)

Each stage's golden differs from its source stage's by exactly what its passes did. Checks beyond the
golden text: test_every_declared_stage_has_a_golden_case (each stage above has a case in which it changes
the IR: a conditional variant whose `when` is false for every case, or a pass that never does anything in
the cases, fails), test_every_declared_pass_changes_some_case (the same per pass name),
test_pipeline_matches_chained_passes (the one-pass-at-a-time chain is `lower`'s own `pass_log`),
test_kernel_builds_the_golden_variant (`Kernel.lowered` / `pass_log` / `seeded` give the IR of the stage,
verified) and test_no_orphan_golden_files (a golden file no case asks for; update mode never deletes).

Adding a case: write cases/<name>.py (a docstring saying what it pins down, `STAGES`, one @gk.kernel and
the @gk.func it calls), run once with GRADKIT_UPDATE_GOLDEN=1, then read every new .ir file as a spec.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import os
import pathlib
from dataclasses import dataclass

import pytest

from gradkit.ad.pipeline import VARIANTS, backend_passes, build_variant, for_backend, seeded_variant
from gradkit.core.ir import Function, format_function, verify
from gradkit.core.passes import LOWER, lower, run_passes
from gradkit.runtime.launch.kernel import Kernel

HERE = pathlib.Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
GOLDEN_DIR = HERE / "golden"
UPDATE = os.environ.get("GRADKIT_UPDATE_GOLDEN", "") not in ("", "0")

# The golden folders of two variants predate their declared names; every other variant's stage is its name.
VARIANT_STAGE = {"forward_ad": "lower", "forward_tangent": "tangent"}
# What a consuming adjoint adds is its difference from the plain adjoint built from the same source (both
# are reverse mode, ad/consume.py): a consume stage "changes the IR" only where it differs from that twin.
CHANGE_AGAINST = {"adjoint_consume": "adjoint"}
# Transforms outside VARIANTS, named by hand because the pipeline exposes no Pass object for them:
# seeded_variant builds its "uniform" pass inline (ad/pipeline.py), and widen is Kernel.widened's
# function (core/passes/widen.py), not a Pass.
UNIFORM_PASS, WIDEN_PASS = "uniform", "widen"


@dataclass(frozen=True)
class Stage:
    """A stage: how its IR is built from its `source` stage (None: the kernel's typed IR). `kind` says which
    declared object builds it: "frontend", "pass" (`passes[0]` alone), "variant" (VARIANTS[`variant`]),
    "backend" (for_backend), "uniform" or "widen"."""

    kind: str
    source: str | None
    passes: tuple = ()
    variant: str | None = None


def stage_of(variant: str) -> str:
    return VARIANT_STAGE.get(variant, variant)


def declared_stages() -> dict[str, Stage]:
    """Every stage, from the declared tables: LOWER, VARIANTS, backend_passes(), the seeded and widened
    forms."""
    stages = {"frontend": Stage("frontend", None)}
    prev = "frontend"
    for k, p in enumerate(LOWER[:-1]):        # LOWER's last pass completes `lower`, the forward_ad stage
        name = p.name if p.name not in stages else f"{p.name}{k}"
        stages[name] = Stage("pass", prev, (p,))
        prev = name
    for name, v in VARIANTS.items():
        source = "frontend" if v.source is None else stage_of(v.source)
        stages[stage_of(name)] = Stage("variant", source, v.passes, name)
    backend = backend_passes()
    stages[backend[0].name] = Stage("pass", "lower", backend[:1])
    stages["backend"] = Stage("backend", "lower", backend)
    stages["uniform"] = Stage("uniform", None)        # its source is the case's UNIFORM base variant
    stages["widen"] = Stage("widen", "frontend")
    return stages


STAGES = declared_stages()
STAGE_ORDER = tuple(STAGES)


# --------------------------------------------------------------------------- cases

@functools.cache
def _case_module(name: str):
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
    uniform = getattr(module, "UNIFORM", None)
    assert ("uniform" in stages) == (uniform is not None), \
        f"{path.name}: the uniform stage needs UNIFORM = (<adjoint variant>, (<adjoint param index>, ...))"
    return kernels[0], stages, uniform


def load_case(name: str):
    """(kernel, STAGES) of case `name` (tests/passes/test_ops.py and test_verify.py read the kernels too)."""
    return _case_module(name)[:2]


def case_uniform(name: str) -> tuple[str, tuple[int, ...]]:
    """The case's UNIFORM: the adjoint variant its uniform stage seeds, and the seeded parameter indices."""
    return _case_module(name)[2]


CASE_NAMES = sorted(p.stem for p in CASES_DIR.glob("*.py") if not p.name.startswith("_"))
PAIRS = [(c, s) for c in CASE_NAMES for s in STAGE_ORDER if s in load_case(c)[1]]


def source_of(case: str, stage: str) -> str | None:
    if stage == "uniform":
        return stage_of(case_uniform(case)[0])
    return STAGES[stage].source


@functools.cache
def stage_function(case: str, stage: str) -> Function:
    kernel = load_case(case)[0]
    st = STAGES[stage]
    if st.kind == "frontend":
        return kernel.typed_ir
    if st.kind == "widen":
        return kernel.widened().typed_ir
    src = stage_function(case, source_of(case, stage))
    if st.kind == "pass":
        return run_passes(src, st.passes)
    if st.kind == "variant":
        return build_variant(st.variant, src)
    if st.kind == "backend":
        return for_backend(src)
    if st.kind == "uniform":
        return seeded_variant(src, tuple(case_uniform(case)[1]))
    raise KeyError(stage)


@functools.cache
def stage_text(case: str, stage: str) -> str:
    return format_function(stage_function(case, stage))


@functools.cache
def stage_steps(case: str, stage: str) -> tuple[tuple[str, bool], ...]:
    """(pass name, whether it changed the IR) for each pass the stage ran in this case; () when it ran none
    (a variant whose `when` is false, a backend stage with nothing to expand)."""
    st = STAGES[stage]
    if st.kind == "frontend":
        return ()
    source = source_of(case, stage)
    before = stage_text(case, CHANGE_AGAINST.get(st.variant, source))
    if st.kind in ("uniform", "widen"):
        name = UNIFORM_PASS if st.kind == "uniform" else WIDEN_PASS
        return ((name, stage_text(case, stage) != before),)
    fn = stage_function(case, source)
    if st.kind == "variant":
        when = VARIANTS[st.variant].when
        if when is not None and not when(fn):
            return ()
    if st.kind == "backend" and stage_function(case, stage) is fn:
        return ()
    steps = []
    for p in st.passes:
        fn = run_passes(fn, (p,))
        text = format_function(fn)
        steps.append((p.name, text != before))
        before = text
    return tuple(steps)


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


def test_every_declared_stage_has_a_golden_case() -> None:
    """Each stage the declared pipeline has (a LOWER pass, a VARIANTS entry, the backend stage, the seeded
    and widened forms) is listed by some case in which it changes the IR: a new variant or pass, or a
    conditional one no case triggers, fails here until a case exercises it."""
    missing = []
    for stage in STAGE_ORDER:
        if stage == "frontend":
            continue
        cases = [c for c, s in PAIRS if s == stage]
        if not any(changed for c in cases for _, changed in stage_steps(c, stage)):
            why = "no case lists it" if not cases else f"it leaves the IR as it was in {cases}"
            missing.append(f"{stage} ({why})")
    assert not missing, ("declared stages without a golden case that exercises them (add a case under "
                         f"tests/passes/cases/, see this module's docstring): {missing}")


def test_every_declared_pass_changes_some_case() -> None:
    """Every pass name the pipeline declares (LOWER, each variant's passes, the backend passes, uniform and
    widen) changes the IR in some stage some case lists."""
    declared = {p.name for p in LOWER} | {p.name for v in VARIANTS.values() for p in v.passes} | \
        {p.name for p in backend_passes()} | {UNIFORM_PASS, WIDEN_PASS}
    exercised = {name for c, s in PAIRS for name, changed in stage_steps(c, s) if changed}
    assert not declared - exercised, \
        f"passes no golden case sees change the IR: {sorted(declared - exercised)}"


@pytest.mark.parametrize("case", CASE_NAMES)
def test_pipeline_matches_chained_passes(case: str) -> None:
    """The pass stages run LOWER one pass at a time; `lower`'s own log must match them step by step."""
    kernel = load_case(case)[0]
    log = lower(kernel.typed_ir, keep_log=True).attrs["pass_log"]
    chain = [s for s in STAGE_ORDER if STAGES[s].kind == "pass" and STAGES[s].passes[0] in LOWER]
    chained = ["frontend", *chain, "lower"]
    assert [name for name, _ in log] == ["input"] + [p.name for p in LOWER]
    for (name, text), stage in zip(log, chained):
        assert text == stage_text(case, stage), f"lower's '{name}' step differs from the '{stage}' stage"


VARIANT_PAIRS = [(c, s) for c, s in PAIRS if STAGES[s].kind in ("variant", "uniform")]


@pytest.mark.parametrize(("case", "stage"), VARIANT_PAIRS, ids=[f"{c}-{s}" for c, s in VARIANT_PAIRS])
def test_kernel_builds_the_golden_variant(case: str, stage: str) -> None:
    """The kernel's own variants are the stages: `Kernel.lowered(name)` prints as the golden stage and
    verifies as scalar IR; its `pass_log` runs LOWER, then the variant chain's passes, and ends with it."""
    kernel = load_case(case)[0]
    if stage == "uniform":
        uniform = case_uniform(case)
        variant = kernel.seeded(uniform[0], tuple(uniform[1]))
        assert format_function(kernel.lowered(variant)) == stage_text(case, stage), \
            f"Kernel.seeded{uniform} did not fold the seeds as seeded_variant does"
        verify(kernel.lowered(variant), scalar_only=True)
        return
    variant = STAGES[stage].variant
    assert format_function(kernel.lowered(variant)) == stage_text(case, stage)
    verify(kernel.lowered(variant), scalar_only=True)
    log = kernel.pass_log(variant)
    assert [name for name, _ in log][: len(LOWER) + 1] == ["input"] + [p.name for p in LOWER]
    ran = [name for name, _ in stage_steps(case, stage)]
    if ran:
        assert [name for name, _ in log[-len(ran):]] == ran
    assert log[-1][1] == stage_text(case, stage)


def test_no_orphan_golden_files() -> None:
    """Every golden file belongs to a (case, stage) pair, so a renamed case leaves nothing stale behind."""
    wanted = {golden_path(c, s) for c, s in PAIRS}
    orphans = sorted(str(p.relative_to(HERE)) for p in GOLDEN_DIR.rglob("*")
                     if p.is_file() and p not in wanted)
    assert not orphans, f"golden files with no case/stage (delete them): {orphans}"
