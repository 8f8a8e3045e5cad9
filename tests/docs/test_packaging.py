"""Packaging without building anything: every subpackage of the source tree is listed in pyproject.toml
(a missing one only shows up in an installed wheel: gradkit.core.library once did), the version has one
source, and the `gradkit` command's plain output (no rich) carries no markup."""

from __future__ import annotations

import importlib.metadata as md
import pathlib

import pytest

import gradkit
from gradkit.app import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "benchmarks", "docs", ".venv", "build", "dist"}


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_subpackage_is_listed():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {"gradkit"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts and (rel.parts[0] in NOT_SHIPPED or rel.parts[0].startswith(".")
                          or rel.parts[0] == "examples"):
            continue
        if rel.parts:
            found.add(".".join(("gradkit", *rel.parts)))
    assert found - listed == set(), "subpackages missing from pyproject.toml's packages"
    assert "gradkit.examples" in listed                     # `gradkit examples` from a wheel


def test_one_version_number():
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gradkit.__version__"}
    assert md.version("gradkit") == gradkit.__version__
    assert f"## [{gradkit.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_examples_dir_is_the_shipped_one():
    folder = cli.examples_dir()
    assert folder is not None and (folder / "quickstart.py").is_file()
    assert folder == pathlib.Path(gradkit.__file__).resolve().parent / "examples"


@pytest.mark.parametrize("markup, plain", [
    ("[red]no example scripts found in examples/ (give --dir)[/red]",
     "no example scripts found in examples/ (give --dir)"),
    ("[bold red]NaN/Inf:[/bold red] e[i] = log(y[i]) at [16]", "NaN/Inf: e[i] = log(y[i]) at [16]"),
    ("[green]quickstart.py[/green]: ok [/]", "quickstart.py: ok "),
])
def test_plain_output_has_no_markup(markup, plain, capsys):
    cli._Plain().print(markup)
    assert capsys.readouterr().err == plain + "\n"


def test_missing_app_names_the_extra_before_any_work(monkeypatch, capsys, tmp_path):
    """Without Streamlit, `examples`, `debug` and `open` say which extra to install, at once."""
    real = cli.importlib.util.find_spec
    monkeypatch.setattr(cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == "streamlit" else real(name, *a))
    monkeypatch.setattr(cli, "_console", lambda quiet=False: cli._Plain())
    monkeypatch.setattr(cli, "_run_examples", lambda *a: pytest.fail("captured before checking the app"))
    for argv in (["examples", "--no-browser"], ["debug", "--no-browser", str(tmp_path / "s.py")],
                 ["open", "--no-browser", str(tmp_path)]):
        assert cli.main(argv) == 1
        err = capsys.readouterr().err
        assert "pip install 'gradkit[app]'" in err and "[red]" not in err and "--bundle-only" in err
