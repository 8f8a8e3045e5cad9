"""Serving the Streamlit debugger for the command line: a free or given port on this machine, the app's
command, its health check, and stopping it on Ctrl-C or SIGTERM."""

from __future__ import annotations

import importlib.util
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import webbrowser

from .console import _console, _text

APP_MAIN = pathlib.Path(__file__).with_name("main.py")


# --------------------------------------------------------------------------------------------
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
