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
import re
import runpy
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
import webbrowser
from dataclasses import dataclass

APP_MAIN = pathlib.Path(__file__).with_name("main.py")
PACKAGE = pathlib.Path(__file__).resolve().parents[1]      # gradkit's root (in a checkout, the repository's)
USER_FOLDERS = ("tests", "examples", "benchmarks", "docs")  # under PACKAGE, yet the user's code, not gradkit's


# Output: rich when installed, plain prints otherwise ----------------------------------------------------
# A message is a sequence of parts. A string part is this module's own markup: fixed words and the style tags
# it writes ([red], [bold red], [/yellow], [/]); it never holds a value. Everything else (file names,
# messages, tracebacks, names from a bundle) is a `_text` part, printed as the characters it holds: never read
# as markup, so it can neither style the terminal nor make a link, and `x[i]` stays `x[i]`.
# Without rich, the style tags are removed (only style words are matched: text such as `[16]` stays).
_STYLE_WORDS = "bold|dim|italic|underline|red|green|yellow|blue|cyan|magenta|white"
_MARKUP = re.compile(rf"\[(?:/|/?(?:{_STYLE_WORDS})(?: (?:{_STYLE_WORDS}))*)\]")


def plain_text(text: str) -> str:
    """`text` with this module's rich style tags removed (what is printed when rich is not installed)."""
    return _MARKUP.sub("", text)


def _text(value, style: str = "") -> tuple[str, str]:
    """A message part printed as the text of `value` (in `style`), never read as markup."""
    return str(value), style


def _plain_parts(parts) -> str:
    return "".join(plain_text(p) if isinstance(p, str) else p[0] for p in parts)


class _Plain:
    def print(self, *parts) -> None:
        print(_plain_parts(parts), file=sys.stderr)

    @contextlib.contextmanager
    def status(self, *parts):
        print(_plain_parts(parts), file=sys.stderr)
        yield


class _Rich:
    """rich's console on stderr: markup parts rendered, `_text` parts kept as text."""

    def __init__(self):
        from rich.console import Console
        self.console = Console(stderr=True, highlight=False)

    @staticmethod
    def text(parts):
        from rich.text import Text
        return Text.assemble(*(Text.from_markup(p, emoji=False) if isinstance(p, str) else p for p in parts))

    def print(self, *parts) -> None:
        self.console.print(self.text(parts))

    def status(self, *parts):
        return self.console.status(self.text(parts))


def _console(quiet: bool = False):
    if quiet:
        return _Quiet()
    try:
        return _Rich()
    except ImportError:
        return _Plain()


class _Quiet(_Plain):
    def print(self, *parts) -> None:
        pass

    @contextlib.contextmanager
    def status(self, *parts):
        yield


# Capturing scripts ----------------------------------------------------------------------------------------
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


# Serving the app --------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on (or holds) `port` at `host`: binding it fails."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def app_command(target, port: int, extra=(), host: str = "127.0.0.1") -> list[str]:
    """The command line that starts the debugger on a bundle or folder of bundles (`extra`: more
    Streamlit options, e.g. ("--server.fileWatcherType", "none")). It listens on `host` only: this
    machine by default (Streamlit's own default is every interface)."""
    return [sys.executable, "-m", "streamlit", "run", str(APP_MAIN), "--server.headless", "true",
            "--server.address", host, "--server.port", str(port), "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "minimal", *extra, "--", str(target)]


def wait_for_health(port: int, proc=None, timeout: float = 60.0) -> bool:
    """Poll Streamlit's health endpoint until it answers ok (False on timeout or when `proc` exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


MISSING_APP = ("the debugger app needs Streamlit, which is not installed: pip install 'gradkit[app]' "
               "(--bundle-only writes the bundles without it)")


def app_missing(console) -> bool:
    """True (after saying which extra to install) when the Streamlit app cannot start here."""
    if importlib.util.find_spec("streamlit") is not None:
        return False
    console.print(_text(MISSING_APP, "red"))
    return True


def serve(target, port: int | None = None, open_browser: bool = True, console=None,
          host: str = "127.0.0.1") -> int:
    """Run the debugger on `target` until interrupted (listening on `host`); returns Streamlit's exit code."""
    console = console or _console()
    if app_missing(console):
        return 1
    if port and port_in_use(port, host):
        console.print(_text(f"port {port} on {host} is already in use (another gradkit debugger, or another "
                            "program, listens there): pass another --port, or leave --port out to pick a "
                            "free one", "red"))
        return 2
    port = port or free_port()
    proc = subprocess.Popen(app_command(target, port, host=host))
    # SIGTERM (e.g. a test stopping us) must still stop the app: turn it into SystemExit so `finally` runs.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with console.status(_text(f"starting the debugger on port {port}...")):
            ready = wait_for_health(port, proc)
        url = f"http://localhost:{port}"
        if ready:
            console.print("[bold]gradkit debugger[/bold] ", _text(f"at {url}  (Ctrl-C stops it)"))
            if open_browser:
                webbrowser.open(url)
        elif proc.poll() is not None:
            console.print(_text(f"the debugger app exited (code {proc.returncode}) before it answered on port "
                                f"{port}: its messages are above", "red"))
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


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
    import importlib.util
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
