"""The on-disk kernel cache: round trips, corruption detection (delete + warn once), atomic writes,
clear(), and the default cache's location and on/off switch."""

import os
import threading
import warnings

import pytest

import gradkit as gk
from gradkit.runtime.launch import cache as cache_mod
from gradkit.runtime.launch.cache import KernelCache, default_cache


def test_round_trip(tmp_path, rng):
    c = KernelCache(tmp_path / "kc")
    assert c.get("missing") is None
    blobs = {f"key {k} / ü:{'x' * k}": rng.bytes(int(rng.integers(0, 5000))) for k in range(20)}
    for key, data in blobs.items():
        c.put(key, data)
    for key, data in blobs.items():
        assert c.get(key) == data
    assert len(c) == 20
    c.put("key 0 / ü:", b"replaced")
    assert c.get("key 0 / ü:") == b"replaced"
    c.put("empty", b"")
    assert c.get("empty") == b""
    assert not [p for p in (tmp_path / "kc").iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "magic", "extra"])
def test_corrupt_entry_is_deleted_and_warned_once(tmp_path, damage, rng):
    c = KernelCache(tmp_path)
    data = rng.bytes(1000)
    c.put("k", data)
    c.put("k2", data)
    for key in ("k", "k2"):
        path = c.path(key)
        blob = bytearray(path.read_bytes())
        if damage == "truncate":
            blob = blob[:-10]
        elif damage == "flip":
            blob[-1] ^= 0xFF
        elif damage == "empty":
            blob = b""
        elif damage == "magic":
            blob[:4] = b"XXXX"
        else:
            blob += b"junk"
        path.write_bytes(bytes(blob))
    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert c.get("k") is None
    assert not c.path("k").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # the second corrupt entry is not warned again
        assert c.get("k2") is None
    assert not c.path("k2").exists()
    c.put("k", data)                              # rebuilt entry works again
    assert c.get("k") == data


def test_key_is_verified(tmp_path):
    c = KernelCache(tmp_path)
    c.put("a", b"payload-a")
    os.replace(c.path("a"), c.path("b"))          # an entry filed under the wrong name is a miss
    with pytest.warns(RuntimeWarning):
        assert c.get("b") is None


def test_clear(tmp_path):
    c = KernelCache(tmp_path)
    for k in range(5):
        c.put(str(k), b"x" * k)
    (tmp_path / "unrelated.txt").write_text("keep me")
    assert c.clear() == 5
    assert len(c) == 0 and c.get("3") is None
    assert (tmp_path / "unrelated.txt").exists()
    assert KernelCache(tmp_path / "never-created").clear() == 0


def test_concurrent_writers_leave_whole_entries(tmp_path):
    c = KernelCache(tmp_path)
    payloads = [bytes([k]) * 200_000 for k in range(8)]
    errors = []

    def writer(k):
        try:
            for _ in range(5):
                c.put("shared", payloads[k])
                got = c.get("shared")
                assert got in payloads
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert c.get("shared") in payloads


def test_unwritable_root_only_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = KernelCache(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="cannot write"):
        c.put("k", b"data")
    assert c.get("k") is None


def test_default_cache_location_and_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADKIT_CACHE_DIR", str(tmp_path / "env-cache"))
    monkeypatch.setattr(gk.config, "cache", True)
    c = default_cache()
    assert isinstance(c, KernelCache) and c.root == tmp_path / "env-cache"
    assert default_cache() is c
    c.put("k", b"v")
    assert (tmp_path / "env-cache").is_dir()
    monkeypatch.setattr(gk.config, "cache", False)
    assert default_cache() is None
    monkeypatch.setattr(gk.config, "cache", True)
    monkeypatch.delenv("GRADKIT_CACHE_DIR")
    import platformdirs
    assert cache_mod.cache_dir() == cache_mod.Path(platformdirs.user_cache_dir("gradkit"))
