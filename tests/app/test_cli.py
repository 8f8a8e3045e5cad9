"""`gradkit` command line: --help, `debug` (script run as __main__ with its argv under Capture, a bundle
written), `open` on a non-bundle, and `examples` capturing a folder of scripts into a folder of bundles."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from gradkit.app import cli, data

HERE = pathlib.Path(__file__).resolve().parent


def test_help(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert all(cmd in out for cmd in ("debug", "open", "examples"))
    assert cli.main([]) == 2                                   # no command: help, non-zero


def test_console_script_help():
    """The `gradkit` entry point's module runs (python -m gradkit.app.cli --help)."""
    out = subprocess.run([sys.executable, "-m", "gradkit.app.cli", "debug", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--bundle-only" in out and "--no-browser" in out and "--port" in out


def test_debug_writes_a_bundle_with_the_script_argv(tmp_path, capsys):
    out = tmp_path / "b"
    script = str(HERE / "sample_train.py")
    assert cli.main(["debug", "--bundle-only", "-q", "--out", str(out), script, "2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    b = data.open_bundle(out)
    assert len(b.manifest["loss_history"]) == 2                 # the script read sys.argv[1] == "2"
    assert b.manifest["kernels"]["predict"]["file"] == "sample_train.py"    # outside the bundle's folder: its name
    assert b.launches[0]["stats"]                               # snapshots were on


def test_debug_keeps_the_nan_error(tmp_path):
    report = cli.capture_script(HERE / "sample_nan.py", [], tmp_path / "b")
    assert report.nan and "log_energy" in report.nan and report.error is None
    assert data.open_bundle(report.bundle).nan["kernel"] == "log_energy"


def test_debug_script_errors(tmp_path):
    raising = tmp_path / "raising.py"
    raising.write_text((HERE / "sample_sqrt.py").read_text().replace("    tape.backward(loss=loss)\n",
                                                                      "    raise RuntimeError('boom')\n"))
    report = cli.capture_script(raising, [], tmp_path / "b")
    assert "RuntimeError: boom" in report.error and report.bundle is not None and report.launches == 2
    empty = tmp_path / "empty.py"
    empty.write_text("import sys\nprint('nothing here')\nsys.exit(3)\n")
    report = cli.capture_script(empty, [], tmp_path / "e")
    assert report.bundle is None and report.exit_code == 3
    assert cli.main(["debug", "--bundle-only", "-q", "--out", str(tmp_path / "e"), str(empty)]) == 1
    assert cli.main(["debug", "--bundle-only", "-q", str(tmp_path / "missing.py")]) == 2


def test_open_rejects_a_non_bundle(tmp_path):
    assert cli.main(["open", "-q", "--no-browser", str(tmp_path / "nothing")]) == 2
    assert cli.main(["open", "-q", "--no-browser", str(tmp_path)]) == 2       # a folder without bundles


def test_examples_capture_a_folder(tmp_path, capsys):
    scripts = tmp_path / "examples"
    scripts.mkdir()
    for name in ("sample_nan.py", "sample_sqrt.py"):
        (scripts / name).write_text((HERE / name).read_text())
    (scripts / "no_tape.py").write_text("print('no launches')\n")
    (scripts / "needs_more.py").write_text("import gradkit_missing_extra\nimport numpy\n")
    out = tmp_path / "bundles"
    assert cli.main(["examples", "--dir", str(scripts), "--out", str(out), "--bundle-only", "-q"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == str(out)
    assert [p.name for p in data.find_bundles(out)] == ["sample_nan", "sample_sqrt"]
    assert (out / "no_tape.log").read_text().count("no launches") == 1
    # a script whose imports are not installed is skipped with what it needs, never run (issue 41 item 6)
    assert cli.missing_modules(scripts / "needs_more.py") == ["gradkit_missing_extra"]
    assert not (out / "needs_more.log").exists()
    # imports a function needs when it runs count; those of `render` (the --image picture) do not
    (scripts / "draws.py").write_text("import numpy\n\ndef run():\n    import gradkit_missing_in_run\n\n"
                                      "def render(out, path):\n    import gradkit_missing_in_render\n")
    assert cli.missing_modules(scripts / "draws.py") == ["gradkit_missing_in_run"]
    (status,) = [st for name, st in cli._run_examples([scripts / "needs_more.py"], tmp_path / "o", 60,
                                                      cli._console(True))]
    assert status.startswith("skipped: needs gradkit_missing_extra")


def test_app_command():
    cmd = cli.app_command("/x/bundle", 8123)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and pathlib.Path(cmd[4]) == cli.APP_MAIN
    assert cmd[cmd.index("--server.port") + 1] == "8123" and cmd[-2:] == ["--", "/x/bundle"]
    assert cli.examples_dir() is None or cli.examples_dir().name == "examples"


def test_debugger_listens_on_this_machine_by_default():
    """Streamlit listens on every interface unless told otherwise: the debugger asks for 127.0.0.1."""
    from gradkit.app.cli import app_command, build_parser
    cmd = app_command("bundle", 8599)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert build_parser().parse_args(["open", "b"]).host == "127.0.0.1"
    ns = build_parser().parse_args(["open", "b", "--host", "0.0.0.0"])
    cmd = app_command("bundle", 8599, host=ns.host)
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"


def test_the_bundle_folder_is_private_whatever_the_umask(tmp_path, monkeypatch):
    """`gradkit debug` writes bundles (the user's data) under the user cache folder, beside the kernel
    cache: every level it creates is 0700 even under umask 000 (common in containers)."""
    import os
    import stat
    from gradkit.app.cli import cache_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = os.umask(0)
    try:
        path = cache_dir()
    finally:
        os.umask(old)
    for p in (path, path.parent, path.parent.parent):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p


def test_a_busy_port_is_said_plainly(tmp_path, capsys, record_plain):
    """Issue 41 item 6: `gradkit open --port P` with P taken says so in one line (and how to pick another)
    and exits 2, without starting Streamlit."""
    import socket
    import time
    bundle = record_plain(tmp_path / "plain")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.perf_counter()
        assert cli.main(["open", "--no-browser", "--port", str(port), str(bundle)]) == 2
        assert time.perf_counter() - start < 5.0
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is already in use" in err and "--port" in err
    assert "Traceback" not in err


def test_compile_errors_drop_gradkit_frames(tmp_path):
    """Issue 41 item 6: a kernel that does not compile under `gradkit debug` is reported with the script's
    own lines and the CompileError's file:line:col and caret; gradkit's frontend and runpy frames are left
    out (and counted). An exception that is not gradkit's keeps its whole traceback."""
    script = tmp_path / "broken.py"
    script.write_text("import gradkit as gk\n\n\n@gk.kernel\ndef broken(x: gk.array(dtype=float)):\n"
                      "    i = gk.tid()\n    x[i] = undefined_name * 2.0\n\n\n"
                      "x = gk.zeros(4, requires_grad=True)\nwith gk.Tape():\n"
                      "    gk.launch(broken, 4, inputs=[x])\n")
    report = cli.capture_script(script, [], tmp_path / "b")
    err = report.error
    assert f'File "{script}", line 12, in <module>' in err and "gk.launch(broken, 4, inputs=[x])" in err
    assert f"CompileError: {script}:7:12: in kernel 'broken': unknown name 'undefined_name'" in err
    assert "x[i] = undefined_name * 2.0\n           ^" in err
    assert "frontend" not in err and "<frozen runpy>" not in err and "app/cli.py" not in err
    assert "frames of gradkit and runpy not shown" in err
    assert err.count('File "') == 1
    raising = tmp_path / "raising.py"
    raising.write_text("def f():\n    raise KeyError('boom')\n\n\nf()\n")
    report = cli.capture_script(raising, [], tmp_path / "r")
    assert "KeyError: 'boom'" in report.error and "runpy" in report.error       # not gradkit's: untouched
