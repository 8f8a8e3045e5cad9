"""`gradkit` command line: run scripts under the debugger's Capture and open the Streamlit debugger.

    gradkit debug [options] script.py [args]   run it (snapshots, NaN and bounds checks on), write a bundle, open it
    gradkit open [options] BUNDLE_OR_FOLDER    open a bundle, or a folder of bundles
    gradkit examples [options]                 capture every examples/*.py into one folder and open it

Options go before the script (what follows it is the script's own argv). Bundles go to the user cache
folder (platformdirs) unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import pathlib
import runpy
import subprocess
import sys
import traceback
from dataclasses import dataclass

PACKAGE = pathlib.Path(__file__).resolve().parents[1]      # gradkit's root (in a checkout, the repository's)
USER_FOLDERS = ("tests", "examples", "benchmarks", "docs")  # under PACKAGE, yet the user's code, not gradkit's


# Output (console.py) and serving the app (server.py) live in their own modules; their names stay here too
from .console import _MARKUP, _Plain, _Quiet, _Rich, _console, _plain_parts, _text, plain_text  # noqa: E402,F401
from .server import (APP_MAIN, MISSING_APP, app_command, app_missing, free_port, port_in_use, serve,  # noqa: E402,F401
                     wait_for_health)


@dataclass
class CaptureReport:
    script: pathlib.Path
    bundle: pathlib.Path | None      # None when the script recorded no launches on a tape
    launches: int
    tapes: int
    exit_code: int | str | None      # the script's SystemExit code (None: ran to the end)
    error: str | None                # traceback of an exception the script raised (not a NaNError)
    nan: str | None                  # the gk.NaNError message, when one stopped the script


def cache_dir() -> pathlib.Path:
    """Where `gradkit debug` and `gradkit examples` write bundles by default: made 0700 at every level it
    creates, whatever the umask (bundles hold the user's data; the kernel cache lives beside it)."""
    import os
    import platformdirs
    path = pathlib.Path(platformdirs.user_cache_dir("gradkit")) / "debug"
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        p.mkdir(mode=0o700, exist_ok=True)
        os.chmod(p, 0o700)
    return path


def _stamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def capture_script(script, args=(), out=None) -> CaptureReport:
    """Run `script` as __main__ with sys.argv = [script, *args] under gk.viz.Capture and save its bundle."""
    from ..viz.capture import Capture
    script = pathlib.Path(script).resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    out = pathlib.Path(out) if out else cache_dir() / f"{script.stem}-{_stamp()}"
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *map(str, args)]
    sys.path.insert(0, str(script.parent))
    exit_code, error = None, None
    cap = Capture()
    try:
        with cap:
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        exit_code = exc.code
    except Exception as exc:
        error = user_traceback(exc, script)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    tape = cap.tape
    launches = len(tape.launches) if tape is not None else 0
    bundle = cap.save(out) if launches else None
    return CaptureReport(script, bundle, launches, cap.tapes_seen, exit_code, error,
                         str(cap.error) if cap.error is not None else None)


def _internal(filename: str, script: pathlib.Path) -> bool:
    """A frame of gradkit itself or of runpy (how the script was started), not of the user's code."""
    if filename.startswith("<frozen runpy") or pathlib.Path(filename).name == "runpy.py":
        return True
    try:
        path = pathlib.Path(filename).resolve()
        rel = path.relative_to(PACKAGE)
    except (OSError, ValueError):
        return False
    return path != script and rel.parts[:1] not in [(f,) for f in USER_FOLDERS]


def user_traceback(exc: BaseException, script) -> str:
    """The traceback of an exception the script raised. For gradkit's own errors about the user's code
    (GradkitError: a CompileError names the kernel's file:line:col with a caret) gradkit's and runpy's
    frames are left out, leaving the user's lines (the gk.launch that compiled the kernel) and a count of
    what was dropped; any other exception keeps its whole traceback (it may be a bug in gradkit)."""
    from ..core.errors import GradkitError
    if not isinstance(exc, GradkitError):
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    script = pathlib.Path(script).resolve()
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [f for f in frames if not _internal(f.filename, script)]
    text = "Traceback (most recent call last):\n" if kept else ""
    text += "".join(traceback.format_list(kept)) + "".join(traceback.format_exception_only(type(exc), exc))
    hidden = len(frames) - len(kept)
    if hidden:
        text += f"({hidden} frames of gradkit and runpy not shown)\n"
    return text


def _report(console, rep: CaptureReport) -> None:
    if rep.error:
        console.print(_text(f"{rep.script.name} raised an exception:", "red"), _text(f"\n{rep.error}"))
    if rep.exit_code not in (None, 0):
        console.print(_text(f"{rep.script.name} exited with code {rep.exit_code}", "yellow"))
    if rep.nan:
        console.print("[bold red]NaN/Inf:[/bold red] ", _text(rep.nan))
    if rep.bundle is None:
        console.print(_text(f"{rep.script.name} recorded no launches on a gk.Tape: nothing to debug (the "
                            "debugger shows what a Tape records)", "yellow"))
    else:
        tapes = f"{rep.tapes} tape{'s' if rep.tapes != 1 else ''}"
        console.print("[green]bundle[/green] ", _text(f"{rep.bundle}  ({rep.launches} launches, {tapes} seen)"))


# Commands ------------------------------------------------------------------------------------------------
def cmd_debug(ns) -> int:
    console = _console(ns.quiet)
    if not ns.bundle_only and app_missing(console):
        return 1
    with console.status(_text(f"running {ns.script} under the gradkit debugger (snapshots, NaN and "
                              "bounds checks on)...")):
        try:
            rep = capture_script(ns.script, ns.args, ns.out)
        except FileNotFoundError as exc:
            console.print(_text(exc, "red"))
            return 2
    _report(console, rep)
    if rep.bundle is None:
        return 1
    print(rep.bundle)
    if ns.bundle_only:
        return 0
    return serve(rep.bundle, ns.port, not ns.no_browser, console, ns.host)


def cmd_open(ns) -> int:
    from ..viz.bundle import BundleError, load_bundle
    from .data import find_bundles, is_bundle
    console = _console(ns.quiet)
    if app_missing(console):
        return 1
    try:
        found = find_bundles(ns.bundle)
        if is_bundle(ns.bundle):
            load_bundle(ns.bundle)        # one bundle: refuse a malformed or hostile one here, in one line
    except BundleError as exc:
        console.print(_text(exc, "red"))                 # names from the bundle: printed as text
        return 2
    if not found:
        console.print(_text(f"{ns.bundle} holds no debug bundles", "red"))
        return 2
    return serve(pathlib.Path(ns.bundle).resolve(), ns.port, not ns.no_browser, console, ns.host)


def examples_dir() -> pathlib.Path | None:
    """The example scripts: `gradkit/examples` inside the package (an installed wheel ships them; in a
    source checkout the package is the repository root, so this is its examples/), else ./examples."""
    import gradkit
    here = pathlib.Path(gradkit.__file__).resolve().parent
    for candidate in (here / "examples", pathlib.Path.cwd() / "examples"):
        if candidate.is_dir():
            return candidate
    return None


def cmd_examples(ns) -> int:
    console = _console(ns.quiet)
    if not ns.bundle_only and app_missing(console):
        return 1
    # absolute: each script runs with its own folder as the working directory (relative paths would break)
    folder = pathlib.Path(ns.dir).resolve() if ns.dir else examples_dir()
    scripts = sorted(folder.glob("*.py")) if folder is not None and folder.is_dir() else []
    if not scripts:
        console.print(_text(f"no example scripts found in {folder or 'examples/'} (give --dir)", "red"))
        return 2
    out = pathlib.Path(ns.out).resolve() if ns.out else cache_dir() / f"examples-{_stamp()}"
    out.mkdir(parents=True, exist_ok=True)
    results = _run_examples(scripts, out, ns.timeout, console)
    written = [name for name, status in results if status == "ok"]
    for name, status in results:
        colour = "green" if status == "ok" else "cyan" if status.startswith("skipped") else "yellow"
        console.print(_text(name, colour), _text(f": {status}"))
    if not written:
        console.print("[red]no example recorded launches on a tape[/red]")
        return 1
    print(out)
    if ns.bundle_only:
        return 0
    return serve(out, ns.port, not ns.no_browser, console, ns.host)


def missing_modules(script: pathlib.Path) -> list[str]:
    """Top-level modules `script` imports that are not installed here (read from its source, never run):
    `gradkit examples` skips such a script and says what it needs instead of reporting a failure. Imports
    inside a function named `render` do not count: by the examples' convention it draws the `--image`
    picture for the docs gallery (matplotlib), which a capture never asks for."""
    import ast
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    names = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        todo.extend(child for child in ast.iter_child_nodes(node)
                    if not (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == "render"))
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    missing = []
    for name in sorted(names):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _run_examples(scripts, out: pathlib.Path, timeout: float, console) -> list[tuple[str, str]]:
    """Capture each script in its own process (`gradkit debug --bundle-only`); a log per script in `out`."""
    results = []
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        progress = None if isinstance(console, _Plain) else Progress(
            TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console.console)
    except ImportError:
        progress = None
    with progress or contextlib.nullcontext():
        task = progress.add_task("capturing examples", total=len(scripts)) if progress else None
        for script in scripts:
            if progress:
                progress.update(task, description=f"capturing {script.name}")
            else:
                console.print(_text(f"capturing {script.name}"))
            missing = missing_modules(script)
            if missing:
                results.append((script.name, f"skipped: needs {', '.join(missing)} (not installed here; "
                                             f"pip install {' '.join(missing)})"))
                if progress:
                    progress.advance(task)
                continue
            cmd = [sys.executable, "-m", "gradkit.app.cli", "debug", "--bundle-only", "--quiet", "--out",
                   str(out / script.stem), str(script)]
            log = out / f"{script.stem}.log"
            try:
                with open(log, "w") as fh:
                    rc = subprocess.run(cmd, check=False, stdout=fh, stderr=subprocess.STDOUT,
                                        timeout=timeout, cwd=script.parent).returncode
                status = "ok" if (out / script.stem).exists() else f"no bundle (exit {rc}, see {log})"
            except subprocess.TimeoutExpired:
                status = f"timed out after {timeout:g} s (see {log})"
            results.append((script.name, status))
            if progress:
                progress.advance(task)
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradkit", description="gradkit gradient debugger: capture scripts "
                                     "into debug bundles and inspect them in a Streamlit app.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def serving(p, bundle_only: bool = True):
        p.add_argument("--port", type=int, default=None, help="port for the app (default: a free one)")
        p.add_argument("--host", default="127.0.0.1",
                       help="address the app listens on (default 127.0.0.1: this machine only; 0.0.0.0 for all)")
        p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
        if bundle_only:
            p.add_argument("--bundle-only", action="store_true",
                           help="write the bundle(s), do not start the app")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    p = sub.add_parser("debug", help="run a script with snapshots, NaN and bounds checks, then open the debugger",
                       description="Run SCRIPT as __main__ (sys.argv = [SCRIPT, *ARGS]) with "
                                   "per-launch snapshots, NaN/Inf checks and array bounds checks, save the tape it recorded as a "
                                   "bundle and open the debugger. Options go before SCRIPT.")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    p.add_argument("-o", "--out", help="bundle path (a folder, or a .zip); default: the user cache folder")
    serving(p)
    p.set_defaults(func=cmd_debug)

    p = sub.add_parser("open", help="open a debug bundle (or a folder of bundles) in the debugger")
    p.add_argument("bundle", help="a bundle folder or .zip, or a folder of bundles")
    serving(p, bundle_only=False)
    p.set_defaults(func=cmd_open)

    p = sub.add_parser("examples", help="capture every shipped example script into one folder of bundles and "
                       "open it")
    p.add_argument("--dir", help="folder of example scripts (default: the examples shipped with gradkit)")
    p.add_argument("-o", "--out", help="folder for the bundles (default: the user cache folder)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per script (default 600)")
    serving(p)
    p.set_defaults(func=cmd_examples)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return 2
    return ns.func(ns)


if __name__ == "__main__":
    sys.exit(main())
