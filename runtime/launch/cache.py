"""On-disk kernel cache: bytes (compiled code, generated source) stored under string keys.

Backends build the key (IR fingerprint + backend + device + gradkit version + options) and call
`get`/`put` through `CompileOptions.cache`. Each entry is one file named by the SHA-256 of its key:

    b"GKC1" | sha256(payload) (32 bytes) | key length (u32 LE) | payload length (u64 LE) | key | payload

Entries are object code that gets linked into the process, so the cache is used only when nobody else
could have written it (docs/security.md, "The kernel cache"). The folder is opened once per process,
without following a symbolic link, and checked on that open descriptor: owned by you and writable by
nobody else. Every entry is then opened through that descriptor (so renaming folders around it changes
nothing), without following a link, and checked with one `fstat`: a regular file of yours, writable by
nobody else, with no second hard link. A folder or entry that fails is not used (one `CacheTrustWarning`
naming it and why) and the kernel is compiled in memory; `gk.config.trust_cache_dir` (or
GRADKIT_TRUST_CACHE_DIR=1) turns the checks off. Folders gradkit creates are 0700 and entries 0600,
whatever the umask.

Writes go to a temporary file in the same folder and are moved into place with `os.replace`, so a
reader sees a whole entry or none (also across processes, e.g. pytest-xdist workers). A truncated or
corrupt entry is detected by the checksum: `get` deletes it and returns None so the kernel is rebuilt
(warning once per cache). Failing to write (read-only or full disk) only warns: the cache is optional.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
import threading
import warnings
import weakref
from pathlib import Path

from ...core.config import config
from ...core.errors import CacheTrustWarning

_MAGIC = b"GKC1"
_HEADER = struct.Struct("<4s32sIQ")
_SUFFIX = ".gkc"

_O = {name: getattr(os, name, 0)
      for name in ("O_CLOEXEC", "O_NOFOLLOW", "O_NONBLOCK", "O_DIRECTORY", "O_BINARY")}
# O_NONBLOCK: a FIFO planted as an entry must not block the open; the fstat below then refuses it.
_READ = os.O_RDONLY | _O["O_CLOEXEC"] | _O["O_NONBLOCK"] | _O["O_BINARY"]
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O["O_CLOEXEC"] | _O["O_NOFOLLOW"] | _O["O_BINARY"]
_DIR = os.O_RDONLY | _O["O_DIRECTORY"] | _O["O_CLOEXEC"]
_NOFOLLOW = _O["O_NOFOLLOW"]
# Entries are reached through the folder's descriptor where the OS allows it (POSIX); elsewhere by path.
_AT = {os.open, os.rename, os.unlink} <= os.supports_dir_fd and bool(_O["O_DIRECTORY"])
# Ownership and mode bits mean something on POSIX only (Windows: the user folder's ACL protects it).
_CHECKS = hasattr(os, "geteuid")

_UNCHECKED, _ABSENT, _TRUSTED, _REFUSED = "unchecked", "absent", "trusted", "refused"
_instances: weakref.WeakSet = weakref.WeakSet()   # every KernelCache, for the fork handler below


def distrust(st: os.stat_result, uid: int, entry: bool = False) -> str | None:
    """Why a cache folder (or, with `entry`, an entry file) with status `st` must not be used by user
    `uid`, or None: it must be yours, writable by nobody else, and an entry a regular file with at most
    one link."""
    if entry and not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != uid:
        return f"it is owned by uid {st.st_uid}, not by you (uid {uid})"
    if st.st_mode & 0o022:
        who = {0o020: "group", 0o002: "others", 0o022: "group and others"}[st.st_mode & 0o022]
        return f"it is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    if entry and st.st_nlink > 1:     # (0: a writer replaced it since it was opened; what was read is whole)
        return f"it has {st.st_nlink} hard links"     # the same file may be reachable from a folder not yours
    return None


class KernelCache:
    """A folder of checksummed cache entries (`get(key) -> bytes | None`, `put(key, data)`, `clear()`),
    used only while nobody else could have written it (see the module docstring)."""

    def __init__(self, root) -> None:
        self.root = Path(root)
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        _instances.add(self)
        self._state = _UNCHECKED
        self._dfd: int | None = None   # the folder's descriptor (entries are opened relative to it)
        self._fds: list[int] = []      # every descriptor opened; closed with the cache, never before
        self._trusting = False         # the gk.config.trust_cache_dir the verdict was made under
        self._uid = -1

    def path(self, key: str) -> Path:
        """The file that holds `key`'s entry."""
        return self.root / self._name(key)

    @staticmethod
    def _name(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:40] + _SUFFIX

    def _at(self, name: str) -> str:
        """`name` as the file functions take it: relative to the folder's descriptor, or a whole path."""
        return name if self._dfd is not None else os.path.join(self.root, name)

    # -- trust ---------------------------------------------------------------------------------------------

    def _usable(self, create: bool = False) -> bool:
        """Whether the folder may be read and written (checked once, unless the opt-in changes); with
        `create`, a missing folder is made (0700 at every level made)."""
        if self._state is _TRUSTED and self._trusting is config.trust_cache_dir:
            return True
        with self._lock:
            trusting = config.trust_cache_dir
            if self._trusting is trusting and self._state in (_TRUSTED, _REFUSED):
                return self._state is _TRUSTED
            return self._open_folder(trusting, create)

    def _open_folder(self, trusting: bool, create: bool) -> bool:
        try:
            dfd, st = self._open_root(trusting)
        except FileNotFoundError:
            if not create:
                self._state = _ABSENT
                return False
            try:
                self._make_root()
                dfd, st = self._open_root(trusting)
            except OSError as exc:
                self._state = _ABSENT
                self._cannot_write(exc)
                return False
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(self.root):
                # O_NOFOLLOW | O_DIRECTORY on a link fails with ENOTDIR (Linux) or ELOOP
                return self._refuse(trusting, "it is a symbolic link (not followed)")
            self._state = _ABSENT
            if create:
                self._cannot_write(exc)
            return False
        if _CHECKS:
            self._uid = os.geteuid()
            why = None if trusting else distrust(st, self._uid)
            if why is not None:
                if dfd is not None:
                    os.close(dfd)
                return self._refuse(trusting, why)
        if dfd is not None:
            self._fds.append(dfd)     # kept open: another thread may still read through an older one
        self._dfd, self._trusting, self._state = dfd, trusting, _TRUSTED
        return True

    def _open_root(self, trusting: bool) -> tuple[int | None, os.stat_result]:
        """The folder's descriptor (None where entries are reached by path) and its status; a symbolic
        link in place of the folder is not followed (ENOTDIR or ELOOP) unless the user trusts the cache."""
        if _AT:
            dfd = os.open(self.root, _DIR | (0 if trusting else _NOFOLLOW))
            try:
                return dfd, os.fstat(dfd)
            except OSError:
                os.close(dfd)
                raise
        st = os.stat(self.root, follow_symlinks=trusting)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link", str(self.root))
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(self.root))
        return None, st

    def _make_root(self) -> None:
        """Create the folder and any missing parent, each 0700 whatever the umask (folders that already
        exist are left as they are)."""
        missing, p = [], self.root
        while not os.path.lexists(p) and p.parent != p:
            missing.append(p)
            p = p.parent
        for p in reversed(missing):
            try:
                os.mkdir(p, 0o700)          # the umask can only take bits away: never more than 0700
            except FileExistsError:
                continue                    # made meanwhile (another process): checked when opened
            if _AT and hasattr(os, "fchmod"):
                fd = os.open(p, _DIR | _NOFOLLOW)
                try:
                    os.fchmod(fd, 0o700)    # exactly 0700 even under a umask that removes the owner's bits
                finally:
                    os.close(fd)

    def _refuse(self, trusting: bool, why: str) -> bool:
        self._trusting, self._state = trusting, _REFUSED
        self._warn_once("trust", f"gradkit: not using the kernel cache folder {self.root}: {why}; kernels "
                                 "are compiled in memory instead (nothing is read from or written to it). "
                                 "Use a folder only you can write (yours, mode 0700; GRADKIT_CACHE_DIR "
                                 "chooses it), or trust this one with GRADKIT_TRUST_CACHE_DIR=1 "
                                 "(gk.config.trust_cache_dir = True)", CacheTrustWarning)
        return False

    def _cannot_write(self, exc: OSError) -> None:
        self._warn_once("write", f"gradkit: cannot write the kernel cache in {self.root}: {exc} "
                                 "(set GRADKIT_CACHE_DIR or gk.config.cache = False)")

    # -- entries -------------------------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The bytes stored under `key`, or None if absent, untrusted or corrupt (a corrupt entry is
        deleted)."""
        if not self._usable():
            return None
        name = self._name(key)
        trusting = self._trusting
        try:
            fd = os.open(self._at(name), _READ | (0 if trusting else _NOFOLLOW), dir_fd=self._dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK) and not trusting:   # EMLINK: BSDs' O_NOFOLLOW
                self._refuse_entry(name, "it is a symbolic link (not followed)")
            else:
                self._warn_once("read", f"gradkit: cannot read kernel cache entry {self.root / name}: {exc}")
            return None
        try:
            st = os.fstat(fd)        # the one check per entry, on the file actually read
            why = None if trusting or not _CHECKS else distrust(st, self._uid, entry=True)
            if why is None and not stat.S_ISREG(st.st_mode):
                why = "it is not a regular file"
            if why is not None:
                self._refuse_entry(name, why)
                return None
            blob = _read(fd, st.st_size)
        except OSError as exc:
            self._warn_once("read", f"gradkit: cannot read kernel cache entry {self.root / name}: {exc}")
            return None
        finally:
            os.close(fd)
        data = self._decode(blob, key)
        if data is None:
            self._warn_once("corrupt", f"gradkit: kernel cache entry {self.root / name} is corrupt or "
                                       "truncated; deleted it, the kernel will be rebuilt")
            try:
                os.unlink(self._at(name), dir_fd=self._dfd)
            except OSError:
                pass
        return data

    def _refuse_entry(self, name: str, why: str) -> None:
        self._warn_once("trust-entry", f"gradkit: not using the kernel cache entry {self.root / name}: "
                                       f"{why}; the kernel is compiled in memory (and the entry replaced). "
                                       "Later entries refused in this cache are not reported",
                        CacheTrustWarning)

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
        """Store `data` under `key` atomically (a concurrent reader sees the old entry or the new one), as a
        0600 file; nothing is written to a folder that is not trusted."""
        if not self._usable(create=True):
            return
        data = bytes(data)
        kb = key.encode("utf-8")
        blob = _HEADER.pack(_MAGIC, hashlib.sha256(data).digest(), len(kb), len(data)) + kb + data
        tmp = self._at(f".tmp-{os.getpid()}-{os.urandom(8).hex()}{_SUFFIX}")
        tmp_exists = False
        try:
            fd = os.open(tmp, _WRITE, 0o600, dir_fd=self._dfd)
            tmp_exists = True
            with os.fdopen(fd, "wb") as f:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, 0o600)    # the umask may have taken the owner's bits: exactly 0600
                f.write(blob)
            os.replace(tmp, self._at(self._name(key)), src_dir_fd=self._dfd, dst_dir_fd=self._dfd)
            tmp_exists = False
        except OSError as exc:
            self._cannot_write(exc)
        finally:
            if tmp_exists:
                try:
                    os.unlink(tmp, dir_fd=self._dfd)
                except OSError:
                    pass

    def _names(self) -> list[str]:
        try:
            return os.listdir(self._dfd if self._dfd is not None else self.root)
        except OSError:
            return []

    def clear(self) -> int:
        """Delete every entry (and left-over temporary file) of a trusted folder; returns how many files
        were removed."""
        if not self._usable():
            return 0
        removed = 0
        for name in self._names():
            if name.endswith(_SUFFIX):
                try:
                    os.unlink(self._at(name), dir_fd=self._dfd)
                    removed += 1
                except OSError:
                    pass
        return removed

    def __len__(self) -> int:
        if not self._usable():
            return 0
        return sum(1 for name in self._names() if name.endswith(_SUFFIX) and not name.startswith(".tmp-"))

    def _warn_once(self, kind: str, message: str, category=RuntimeWarning) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, category, stacklevel=4)

    def __del__(self) -> None:
        for fd in getattr(self, "_fds", ()):
            try:
                os.close(fd)
            except Exception:  # noqa: BLE001 - at interpreter exit `os` may already be gone
                pass

    def __repr__(self) -> str:
        return f"KernelCache({str(self.root)!r})"


def _read(fd: int, size: int) -> bytes:
    """The file's bytes: `size` of them unless it ends first."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_lock = threading.Lock()
_caches: dict[str, KernelCache] = {}


def _after_fork_in_child() -> None:
    # A fork while another thread checked a folder would leave its lock held for ever in the child; the
    # verdicts and descriptors themselves stay valid there (a half-made verdict is simply made again).
    global _lock
    _lock = threading.Lock()
    for cache in list(_instances):
        cache._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
