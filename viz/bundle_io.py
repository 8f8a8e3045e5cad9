"""Reading a debug bundle's files without trusting them: regular files only, symbolic links that stay inside
the bundle, caps on declared and actual sizes and on the compression ratio, and `.npy` members parsed
from their headers (numeric dtypes only, never pickled). Every refusal is a `BundleError` naming the file.

A bundle is data someone may have sent you: nothing here executes, imports or unpickles what it reads.
"""

from __future__ import annotations

import io
import os
import pathlib
import stat
import zipfile
from dataclasses import dataclass

import numpy as np

MANIFEST, ARRAYS = "manifest.json", "arrays.npz"
_CHUNK = 1 << 20
_COMPRESSIONS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_DTYPE_KINDS = "biufc"          # bool, signed, unsigned, float, complex: nothing that holds objects
_MAX_NDIM = 32


class BundleError(ValueError):
    """A debug bundle is missing, truncated, malformed or over a cap; the message names the file or field."""


@dataclass(frozen=True)
class BundleLimits:
    """Caps `load_bundle` enforces before (declared sizes) and while (actual sizes) reading a bundle.

    A zip member may inflate to at most `ratio` times its compressed size once it is larger than
    `ratio_floor`: small, highly compressible arrays (all-zero gradients) stay legal, a zip bomb does not.
    """

    manifest_bytes: int = 64 << 20       # manifest.json
    arrays_bytes: int = 2 << 30          # arrays.npz: its file, and the total uncompressed size of its arrays
    ratio: float = 200.0                 # uncompressed : compressed, per zip member
    ratio_floor: int = 64 << 20          # members up to this size are exempt from the ratio cap
    members: int = 100_000               # entries in arrays.npz


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISLNK, "symbolic link")):
        if test(mode):
            return name
    return "special file"


def _open_regular(path: pathlib.Path, shown: str) -> int:
    """A file descriptor of `path` when it is a regular file. O_NONBLOCK: opening a FIFO does not wait for
    a writer; O_NOFOLLOW: a link swapped in after the caller's checks is refused; fstat decides."""
    flags = os.O_RDONLY
    for extra in ("O_NONBLOCK", "O_NOFOLLOW", "O_CLOEXEC"):
        flags |= getattr(os, extra, 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BundleError(f"{shown}: cannot open it ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BundleError(f"{shown}: is a {_kind(mode)}, not a regular file")
    return fd


def _read_fd(fd: int, cap: int, shown: str, what: str) -> bytes:
    """All bytes of an open regular file, refusing (before and while reading) more than `cap`."""
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > cap:
            raise BundleError(f"{shown}: {size} bytes, over the {cap}-byte cap on {what}")
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise BundleError(f"{shown}: grew past the {cap}-byte cap on {what} while being read")
    return data


def member_path(root: pathlib.Path, name: str) -> pathlib.Path:
    """`root/name` when it is a regular file or a symbolic link to one inside the bundle (checked with
    lstat before anything is opened); BundleError otherwise."""
    path = root / name
    shown = f"{root}/{name}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise BundleError(f"{shown}: missing (a bundle folder holds {MANIFEST} and {ARRAYS})") from None
    except OSError as exc:
        raise BundleError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        target = pathlib.Path(os.path.realpath(path))
        inside = pathlib.Path(os.path.realpath(root))
        if inside not in target.parents:
            raise BundleError(f"{shown}: is a symbolic link leaving the bundle (to {target}); refused")
        try:
            st = os.stat(target)
        except OSError as exc:
            raise BundleError(f"{shown}: is a broken symbolic link ({exc.strerror or exc})") from None
        path = target
    if not stat.S_ISREG(st.st_mode):
        raise BundleError(f"{shown}: is a {_kind(st.st_mode)}, not a regular file")
    return path


def read_folder(root: pathlib.Path, limits: BundleLimits) -> tuple[bytes, bytes]:
    """(manifest bytes, arrays.npz bytes) of a bundle folder."""
    out = []
    for name, cap, what in ((MANIFEST, limits.manifest_bytes, "manifest.json"),
                            (ARRAYS, limits.arrays_bytes, "arrays.npz")):
        path = member_path(root, name)
        out.append(_read_fd(_open_regular(path, f"{root}/{name}"), cap, f"{root}/{name}", what))
    return out[0], out[1]


def read_zip(path: pathlib.Path, limits: BundleLimits) -> tuple[bytes, bytes]:
    """(manifest bytes, arrays.npz bytes) of a .zip bundle: the zip must be a regular file and each member
    passes the declared-size and ratio caps before it is inflated."""
    fd = _open_regular(path, str(path))
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        cap = limits.manifest_bytes + limits.arrays_bytes
        if size > cap:
            raise BundleError(f"{path}: {size} bytes, over the {cap}-byte cap on a bundle")
        try:
            with zipfile.ZipFile(fh) as z:
                if len(z.infolist()) > limits.members:
                    raise BundleError(f"{path}: {len(z.infolist())} zip entries, over the cap of "
                                      f"{limits.members}")
                out = []
                for name, member_cap in ((MANIFEST, limits.manifest_bytes), (ARRAYS, limits.arrays_bytes)):
                    try:
                        info = z.getinfo(name)
                    except KeyError:
                        raise BundleError(f"{path}: the zip holds no {name}") from None
                    check_member(info, member_cap, limits, f"{path}:{name}")
                    out.append(read_member(z, info, f"{path}:{name}"))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError) as exc:
            raise BundleError(f"{path}: cannot read the bundle: {exc}") from None
    return out[0], out[1]


def check_member(info: zipfile.ZipInfo, cap: int, limits: BundleLimits, shown: str) -> None:
    """Refuse a zip member by what its central-directory entry declares, before reading a byte of it."""
    if info.compress_type not in _COMPRESSIONS:
        raise BundleError(f"{shown}: compression method {info.compress_type} is not allowed "
                          f"(only {' and '.join(_COMPRESSIONS.values())})")
    if info.flag_bits & 0x1:
        raise BundleError(f"{shown}: is encrypted")
    if info.file_size > cap:
        raise BundleError(f"{shown}: declares {info.file_size} bytes uncompressed, over the {cap}-byte cap")
    packed = max(info.compress_size, 1)
    if info.file_size > limits.ratio_floor and info.file_size / packed > limits.ratio:
        raise BundleError(f"{shown}: inflates {info.compress_size} bytes to {info.file_size} "
                          f"({info.file_size / packed:.0f}:1), over the {limits.ratio:g}:1 "
                          "compression-ratio cap")


def read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str) -> bytes:
    """A member's bytes, read in chunks and never past its declared size (a member that inflates further
    fails zipfile's CRC/size check)."""
    buf = io.BytesIO()
    with z.open(info) as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            buf.write(chunk)
            if buf.tell() > info.file_size:
                raise BundleError(f"{shown}: inflates past its declared {info.file_size} bytes")
    return buf.getvalue()


def load_arrays(npz: bytes, limits: BundleLimits, shown: str) -> dict[str, np.ndarray]:
    """The arrays of an `.npz` (name -> array): member sizes and ratios checked from the central directory,
    each `.npy` header checked (numeric dtype, size consistent with the member) before its data is read."""
    try:
        z = zipfile.ZipFile(io.BytesIO(npz))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise BundleError(f"{shown}: arrays.npz is damaged ({exc})") from None
    with z:
        infos = z.infolist()
        if len(infos) > limits.members:
            raise BundleError(f"{shown}: arrays.npz has {len(infos)} entries, over the cap of "
                              f"{limits.members}")
        total = sum(i.file_size for i in infos)
        if total > limits.arrays_bytes:
            raise BundleError(f"{shown}: arrays.npz declares {total} bytes of arrays, over the "
                              f"{limits.arrays_bytes}-byte cap")
        arrays = {}
        for info in infos:
            where = f"{shown}: arrays.npz member '{info.filename}'"
            if not info.filename.endswith(".npy") or info.filename[:-4] in arrays:
                raise BundleError(f"{where}: not a uniquely named .npy array")
            check_member(info, limits.arrays_bytes, limits, where)
            try:
                arrays[info.filename[:-4]] = _read_npy(z, info, where)
            except (zipfile.BadZipFile, EOFError, OSError, RuntimeError, ValueError) as exc:
                if isinstance(exc, BundleError):
                    raise
                raise BundleError(f"{where}: damaged ({exc})") from None
    return arrays


def _read_npy(z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> np.ndarray:
    fmt = np.lib.format
    with z.open(info) as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise BundleError(f"{where}: unsupported .npy version {version}")
        if dtype.kind not in _DTYPE_KINDS or dtype.hasobject or dtype.fields is not None or dtype.subdtype:
            raise BundleError(f"{where}: dtype {dtype} is not a plain numeric dtype")
        if len(shape) > _MAX_NDIM or any(not isinstance(n, int) or n < 0 for n in shape):
            raise BundleError(f"{where}: bad shape {shape}")
        count = int(np.prod(shape, dtype=object))
        nbytes = count * dtype.itemsize
        if nbytes != info.file_size - f.tell():
            raise BundleError(f"{where}: its header declares {nbytes} bytes of data, the member holds "
                              f"{info.file_size - f.tell()}")
        out = np.empty(count, dtype)
        view = out.view(np.uint8)
        got = 0
        while got < nbytes:
            chunk = f.read(min(_CHUNK, nbytes - got))
            if not chunk:
                raise BundleError(f"{where}: truncated ({got} of {nbytes} bytes)")
            view[got:got + len(chunk)] = np.frombuffer(chunk, np.uint8)
            got += len(chunk)
    return out.reshape(shape, order="F" if fortran else "C")
