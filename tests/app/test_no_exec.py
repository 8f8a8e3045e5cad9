"""Bundles are data only: the debugger (app/) and the bundle reader (viz/) never execute, import or unpickle
anything. A token scan (comments and strings, docstrings included, are not code) fails on any use of the
names that run code, except the one reviewed place: `gradkit debug script.py` runs the script the user
names on the command line (never a file a bundle names)."""

from __future__ import annotations

import io
import pathlib
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = {"runpy", "run_path", "run_module", "exec", "eval", "compile", "pickle", "cPickle", "marshal",
             "importlib", "__import__", "import_module", "spec_from_file_location", "exec_module", "shelve",
             "dill", "cloudpickle", "joblib"}
ALLOWED = {("app/cli.py", "runpy"), ("app/cli.py", "run_path"),    # capture_script: the user's own script
           ("app/cli.py", "importlib"),                             # find_spec: loads nothing
           ("app/server.py", "importlib")}                          # find_spec("streamlit"): loads nothing


def code_names(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, name) of every NAME token of a Python file, and of `np.load` calls (spelled load after np)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    out = []
    for k, tok in enumerate(tokens):
        if tok.type != tokenize.NAME:
            continue
        after = tokens[k - 2].string if k >= 2 and tokens[k - 1].string == "." else None
        if (after, tok.string) != ("re", "compile"):          # a regular expression is not code
            out.append((tok.start[0], tok.string))
        if tok.string == "load" and after in ("np", "numpy"):
            out.append((tok.start[0], "np.load"))
    return out


def offending(folders=("app", "viz")) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, name in code_names(path):
                if (name in FORBIDDEN or name == "np.load") and (rel, name) not in ALLOWED:
                    found.append(f"{rel}:{line}: {name}")
    return found


def test_app_and_viz_never_execute_or_unpickle():
    assert offending() == []


def test_the_scan_finds_what_it_looks_for(tmp_path, monkeypatch):
    """The scan is not vacuous: code using each kind of name is found, the same words in comments and
    docstrings are not."""
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "bad.py").write_text('"""runpy, exec( and pickle in a docstring are fine."""\n'
                                   "import runpy  # exec( in a comment is fine\n"
                                   "x = eval('1')\n"
                                   "import numpy as np\n"
                                   "y = np.load('a.npz')\n"
                                   "from importlib import import_module\n"
                                   "import re\nr = re.compile('x')\nc = compile('1', 'f', 'eval')\n")
    monkeypatch.setattr(__import__("sys").modules[__name__], "ROOT", tmp_path)
    assert offending(("app",)) == ["app/bad.py:2: runpy", "app/bad.py:3: eval", "app/bad.py:5: np.load",
                                   "app/bad.py:6: importlib", "app/bad.py:6: import_module",
                                   "app/bad.py:9: compile"]
