"""Kernel-cache trust (issue 37): cache entries are object code gradkit links into the process, so an entry
someone else could have written must never run. Each case plants a hostile entry — the object code of a
kernel that writes 666, filed under the key of `double` with a recomputed checksum — and runs `double` in
a child process (with a timeout) under a cache folder that is writable by others, owned by someone else, a
symbolic link, or holds the entry as a link, a FIFO, a foreign or a writable file: the kernel must return
2 * x, with one `gk.CacheTrustWarning` naming the folder or file and why. Also: folders are made 0700 and
entries 0600 under `umask 000`, the opt-in uses a world-writable folder again, and a trusted cache still
compiles nothing on a warm start. docs/security.md states the rule."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from tests.reliability.hostile import run_child

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and modes")
NOBODY = 65534
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="making a folder or file another user's needs root")

# `plant FOLDER`: fill FOLDER with `double` and `evil`, then overwrite `double`'s entry with `evil`'s code
# renamed to `double`'s symbol (a valid entry: key, lengths and SHA-256 recomputed); prints its file name.
# `run [umask] [trust|trust-env]`: launch `double` on [0, 1, 2, 3] under $GRADKIT_CACHE_DIR and print the
# result, how many modules were compiled (jit.optimize calls) and the warnings, as JSON.
# `fork`: fork while the cache's lock is held, and launch `double` in the child.
CHILD = """
    import hashlib, json, os, re, struct, sys, warnings
    if "umask" in sys.argv:
        os.umask(0)
    import numpy as np
    import gradkit as gk
    from gradkit.backends.cpu import jit

    @gk.kernel
    def double(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = 2.0 * x[i]

    @gk.kernel
    def evil(x: gk.array(dtype=float), y: gk.array(dtype=float)):
        i = gk.tid()
        y[i] = 666.0 + 0.0 * x[i]

    HEADER = struct.Struct("<4s32sIQ")

    def launch(kernel):
        x, y = gk.array(np.arange(4, dtype=np.float32)), gk.zeros(4)
        gk.launch(kernel, 4, inputs=[x], outputs=[y], device="cpu")
        return y.numpy().tolist()

    if sys.argv[1] == "plant":
        folder = sys.argv[2]
        os.environ["GRADKIT_CACHE_DIR"] = folder
        launch(double), launch(evil)
        entries = {}
        for name in os.listdir(folder):
            blob = open(os.path.join(folder, name), "rb").read()
            _, _, key_len, _ = HEADER.unpack_from(blob)
            key = blob[HEADER.size:HEADER.size + key_len]
            payload = blob[HEADER.size + key_len:]
            text_len = int.from_bytes(payload[:8], "little")
            text = payload[8:8 + text_len].decode()
            kind = "double" if "gk_double_" in text else "evil"
            entries[kind] = name, key, text
        name, key, text = entries["double"]
        victim = re.search(r"gk_double_[0-9a-f]{16}", text).group(0)
        _, _, evil_text = entries["evil"]
        evil_text = re.sub(r"gk_evil_[0-9a-f]{16}", victim, evil_text)
        obj, _ = jit.optimize(evil_text, quick=True)
        raw = evil_text.encode()
        payload = len(raw).to_bytes(8, "little") + raw + obj
        blob = HEADER.pack(b"GKC1", hashlib.sha256(payload).digest(), len(key), len(payload)) + key + payload
        with open(os.path.join(folder, name), "wb") as f:
            f.write(blob)
        print(name)
    elif sys.argv[1] == "fork":
        from gradkit.runtime.launch.cache import default_cache
        default_cache()._lock.acquire()           # as if another thread were checking the folder
        pid = os.fork()
        if pid == 0:
            os._exit(0 if launch(double) == [0.0, 2.0, 4.0, 6.0] else 3)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    else:
        if "trust" in sys.argv:
            gk.config.trust_cache_dir = True
        trusted = getattr(gk.config, "trust_cache_dir", None)   # GRADKIT_TRUST_CACHE_DIR=1 for "trust-env"
        compiled = [0]
        optimize = jit.optimize
        def counting(*args, **kwargs):
            compiled[0] += 1
            return optimize(*args, **kwargs)
        jit.optimize = counting
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = launch(double)
        print(json.dumps({"y": y, "compiled": compiled[0], "trusted": trusted,
                          "warnings": [[w.category.__name__, str(w.message)] for w in caught
                                       if w.category.__name__ == "CacheTrustWarning"
                                       or issubclass(w.category, RuntimeWarning)]}))
"""

RIGHT, PLANTED = [0.0, 2.0, 4.0, 6.0], [666.0] * 4


def run(tmp_path, folder, *args, env=None):
    """Run `double` in a child with its kernel cache at `folder`; its JSON report."""
    proc = run_child(CHILD, tmp_path, "run", *args, timeout=120,
                     env={"GRADKIT_CACHE_DIR": str(folder), "GRADKIT_TRUST_CACHE_DIR": "0", **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A cache folder whose entry for `double` is the planted one; (folder, that entry's file name)."""
    base = tmp_path_factory.mktemp("planted")
    folder = base / "cache"
    proc = run_child(CHILD, base, "plant", str(folder), timeout=180,
                     env={"GRADKIT_CACHE_DIR": str(folder), "GRADKIT_TRUST_CACHE_DIR": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder, proc.stdout.split()[-1]


def copy_of(planted, dst):
    """A private (0700, yours) copy of the planted cache at `dst`; the planted entry's path in it."""
    folder, name = planted
    shutil.copytree(folder, dst)
    os.chmod(dst, 0o700)
    return dst / name


def snapshot(folder):
    """Every file of `folder` with its bytes, mode and owner (to show that nothing was written there)."""
    out = {}
    for name in sorted(os.listdir(folder)):
        st = os.lstat(folder / name)
        out[name] = (folder.joinpath(name).read_bytes() if stat.S_ISREG(st.st_mode) else None,
                     st.st_mode, st.st_uid)
    return out


def trust_warnings(report):
    return [msg for cat, msg in report["warnings"] if cat == "CacheTrustWarning"]


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o707, 0o1777], ids=lambda m: f"{m:04o}")
def test_planted_entry_in_a_folder_others_can_write_is_not_run(planted, tmp_path, mode):
    cache = copy_of(planted, tmp_path / "cache").parent
    os.chmod(cache, mode)
    before = snapshot(cache)
    report = run(tmp_path, cache)
    assert report["y"] == RIGHT, "the planted entry ran"
    assert report["compiled"] >= 1
    (msg,) = trust_warnings(report)
    assert str(cache) in msg and "writable by" in msg and f"(mode {mode:04o})" in msg, msg
    assert snapshot(cache) == before, "gradkit wrote to a folder it does not trust"


@as_root
def test_folder_owned_by_another_user_is_not_used(planted, tmp_path):
    cache = copy_of(planted, tmp_path / "cache").parent
    os.chown(cache, NOBODY, NOBODY)               # 0700, but not yours
    before = snapshot(cache)
    report = run(tmp_path, cache)
    assert report["y"] == RIGHT, "the planted entry ran"
    (msg,) = trust_warnings(report)
    assert str(cache) in msg and f"uid {NOBODY}" in msg and f"uid {os.geteuid()}" in msg, msg
    assert snapshot(cache) == before


def test_symlinked_folder_is_not_followed(planted, tmp_path):
    real = copy_of(planted, tmp_path / "real").parent
    link = tmp_path / "cache"
    link.symlink_to(real, target_is_directory=True)
    before = snapshot(real)
    report = run(tmp_path, link)
    assert report["y"] == RIGHT, "the planted entry ran through a symlinked folder"
    (msg,) = trust_warnings(report)
    assert str(link) in msg and "symbolic link" in msg, msg
    assert snapshot(real) == before


@pytest.mark.parametrize("how", ["symlink", "hardlink", "writable", "fifo",
                                 pytest.param("foreign", marks=as_root)])
def test_untrusted_entry_in_a_private_folder_is_not_run(planted, tmp_path, how):
    entry = copy_of(planted, tmp_path / "cache")
    outside = tmp_path / "outside.gkc"
    if how in ("symlink", "hardlink"):
        os.replace(entry, outside)
        (entry.symlink_to if how == "symlink" else entry.hardlink_to)(outside)
    elif how == "writable":
        os.chmod(entry, 0o666)
    elif how == "fifo":                           # opening one for reading used to wait for a writer
        os.replace(entry, outside)
        os.mkfifo(entry, 0o600)
    else:
        os.chown(entry, NOBODY, NOBODY)
    planted_bytes = (outside if how in ("symlink", "hardlink", "fifo") else entry).read_bytes()
    report = run(tmp_path, entry.parent)
    assert report["y"] == RIGHT, f"the planted entry ran ({how})"
    (msg,) = trust_warnings(report)
    why = {"symlink": "symbolic link", "hardlink": "2 hard links", "writable": "writable by group and others",
           "fifo": "not a regular file", "foreign": f"uid {NOBODY}"}[how]
    assert str(entry) in msg and why in msg, msg
    if how in ("symlink", "hardlink"):
        assert outside.read_bytes() == planted_bytes, "the rebuilt entry was written through the link"


def test_umask_000_still_gives_private_folders_and_entries(tmp_path):
    top = tmp_path / "made"
    cache = top / "by" / "gradkit"
    report = run(tmp_path, cache, "umask")
    assert report["y"] == RIGHT and not report["warnings"], report
    for folder in (top, top / "by", cache):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    names = os.listdir(cache)
    assert names and not [n for n in names if n.startswith(".tmp-")]
    for name in names:
        assert stat.S_IMODE(os.lstat(cache / name).st_mode) == 0o600, name
    again = run(tmp_path, cache, "umask")         # and what was written is used
    assert again["y"] == RIGHT and again["compiled"] == 0 and not again["warnings"], again


def test_trusted_cache_hits_warm_and_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    cold = run(tmp_path, cache)
    assert cold["y"] == RIGHT and cold["compiled"] >= 1 and not cold["warnings"], cold
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    warm = run(tmp_path, cache)
    assert warm["y"] == RIGHT and warm["compiled"] == 0 and not warm["warnings"], warm


@pytest.mark.parametrize("how", ["config", "env"])
def test_opt_in_uses_a_world_writable_folder_again(tmp_path, how):
    cache = tmp_path / "cache"
    assert run(tmp_path, cache)["compiled"] >= 1          # a legitimate entry, then the folder opened up
    os.chmod(cache, 0o777)
    refused = run(tmp_path, cache)
    assert refused["compiled"] >= 1 and len(trust_warnings(refused)) == 1, refused
    args, env = (("trust",), None) if how == "config" else (("trust-env",), {"GRADKIT_TRUST_CACHE_DIR": "1"})
    report = run(tmp_path, cache, *args, env=env)
    assert report["trusted"] is True
    assert report["y"] == RIGHT and report["compiled"] == 0 and not report["warnings"], report


def test_fork_while_the_folder_is_checked_does_not_hang_the_child(tmp_path):
    # The folder check runs under a lock; a child forked while another thread holds it gets a fresh one.
    proc = run_child(CHILD, tmp_path, "fork", timeout=60, env={"GRADKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "0", proc.stdout
