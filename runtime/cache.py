"""On-disk kernel cache: bytes (compiled code, generated source) stored under string keys.

Backends build the key (IR fingerprint + backend + device + gradkit version + options) and call
`get`/`put` through `CompileOptions.cache`. Each entry is one file named by the SHA-256 of its key:

    b"GKC1" | sha256(payload) (32 bytes) | key length (u32 LE) | payload length (u64 LE) | key | payload

Writes go to a temporary file in the same folder and are moved into place with `os.replace`, so a
reader sees a whole entry or none (also across processes, e.g. pytest-xdist workers). A truncated or
corrupt entry is detected by the checksum: `get` deletes it and returns None so the kernel is rebuilt
(warning once per cache). Failing to write (read-only or full disk) only warns: the cache is optional.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading
import warnings
from pathlib import Path

from ..core.config import config

_MAGIC = b"GKC1"
_HEADER = struct.Struct("<4s32sIQ")
_SUFFIX = ".gkc"


class KernelCache:
    """A folder of checksummed cache entries (`get(key) -> bytes | None`, `put(key, data)`, `clear()`)."""

    def __init__(self, root) -> None:
        self.root = Path(root)
        self._warned: set[str] = set()

    def path(self, key: str) -> Path:
        """The file that holds `key`'s entry."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.root / (digest[:40] + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        """The bytes stored under `key`, or None if absent or corrupt (a corrupt entry is deleted)."""
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            self._warn_once("read", f"gradkit: cannot read kernel cache entry {path}: {exc}")
            return None
        data = self._decode(blob, key)
        if data is None:
            self._warn_once("corrupt", f"gradkit: kernel cache entry {path} is corrupt or truncated; "
                                       "deleted it, the kernel will be rebuilt")
            try:
                path.unlink()
            except OSError:
                pass
        return data

    @staticmethod
    def _decode(blob: bytes, key: str) -> bytes | None:
        if len(blob) < _HEADER.size:
            return None
        magic, checksum, key_len, data_len = _HEADER.unpack_from(blob)
        start = _HEADER.size + key_len
        if magic != _MAGIC or len(blob) != start + data_len:
            return None
        if blob[_HEADER.size:start] != key.encode("utf-8"):
            return None
        data = blob[start:]
        return data if hashlib.sha256(data).digest() == checksum else None

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key` atomically (a concurrent reader sees the old entry or the new one)."""
        data = bytes(data)
        kb = key.encode("utf-8")
        blob = _HEADER.pack(_MAGIC, hashlib.sha256(data).digest(), len(kb), len(data)) + kb + data
        path = self.path(key)
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=_SUFFIX)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            self._warn_once("write", f"gradkit: cannot write the kernel cache in {self.root}: {exc} "
                                     "(set GRADKIT_CACHE_DIR or gk.config.cache = False)")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def clear(self) -> int:
        """Delete every entry (and left-over temporary file); returns how many files were removed."""
        removed = 0
        if not self.root.is_dir():
            return 0
        for p in self.root.iterdir():
            if p.suffix == _SUFFIX and p.is_file():
                try:
                    p.unlink()
                    removed += 1
                except OSError:
                    pass
        return removed

    def __len__(self) -> int:
        return sum(1 for p in self.root.glob("*" + _SUFFIX) if not p.name.startswith(".tmp-")) \
            if self.root.is_dir() else 0

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def __repr__(self) -> str:
        return f"KernelCache({str(self.root)!r})"


_lock = threading.Lock()
_caches: dict[str, KernelCache] = {}


def cache_dir() -> Path:
    """Where the default cache lives: $GRADKIT_CACHE_DIR, else the user cache dir (platformdirs)."""
    env = os.environ.get("GRADKIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs
        return Path(platformdirs.user_cache_dir("gradkit"))
    except ImportError:    # platformdirs is a dependency; fall back rather than fail
        return Path.home() / ".cache" / "gradkit"


def default_cache() -> KernelCache | None:
    """The process's kernel cache, or None when `gk.config.cache` is False."""
    if not config.cache:
        return None
    root = str(cache_dir())
    cache = _caches.get(root)
    if cache is None:
        with _lock:
            cache = _caches.setdefault(root, KernelCache(root))
    return cache
