"""Reading a debug bundle (a folder or .zip written by bundle.py's `save_bundle`) as untrusted data: files
through bundle_io.py's caps, the manifest through bundle_schema.py, each stored array checked against the
manifest; `Bundle` is what the debugger's views read."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat

from .bundle_io import BundleError, BundleLimits, load_arrays, read_folder, read_zip
from .bundle_schema import ARRAY_ID, check_manifest

SNAPSHOT_KINDS = ("before", "after", "grad_before", "grad_after")
# An arrays.npz entry's name: "value/<id>", "grad/<id>" or "<snapshot kind>/<launch>/<id>", the launch in
# ASCII decimal without leading zeros (str.isdigit would take '²', which int() refuses, and '٣')
_MEMBER = re.compile(rf"(?:(?P<kind>{'|'.join(SNAPSHOT_KINDS)})/(?P<number>0|[1-9][0-9]{{0,8}})/"
                     rf"|value/|grad/)(?P<id>{ARRAY_ID.pattern})")


class Bundle:
    """A loaded debug bundle: `manifest` (dict), `arrays` (name -> NumPy array) and `path` (where it was
    read from, or None)."""

    def __init__(self, manifest: dict, arrays: dict, path: pathlib.Path | None = None):
        self.manifest, self.arrays, self.path = manifest, arrays, path
    @property
    def launches(self) -> list:
        return self.manifest["launches"]

    def value(self, array_id: str):
        return self.arrays.get(f"value/{array_id}")

    def grad(self, array_id: str):
        return self.arrays.get(f"grad/{array_id}")

    @property
    def steps(self) -> list:
        """The Python steps on the tape (a solve, record_func), each with its position among the launches."""
        return self.manifest.get("steps", [])

    @property
    def backward(self) -> list:
        return self.manifest.get("backward", [])

    @property
    def nan(self) -> dict | None:
        return self.manifest.get("nan")

    def snapshot(self, launch: int, array_id: str, when: str = "before"):
        """The array's values before/after forward launch `launch` (None when not stored)."""
        return self.arrays.get(f"{when}/{launch}/{array_id}")

    def grad_snapshot(self, backward: int, array_id: str, when: str = "after"):
        """The array's gradient before/after backward launch `backward` (None when not stored)."""
        return self.arrays.get(f"grad_{when}/{backward}/{array_id}")


def load_bundle(path, limits: BundleLimits | None = None) -> Bundle:
    """Read and validate a bundle folder or zip: its files (regular, inside the bundle, under `limits`), every
    manifest field, and each stored array against the manifest. Nothing read is executed or unpickled.

    Args:
        path: the bundle's folder or `.zip` file (as `tape.save` or `gradkit debug` wrote it).
        limits: a `BundleLimits` (viz/bundle_io.py) capping file counts, sizes and zip inflation; None: the
            defaults, sized for untrusted bundles."""
    path = pathlib.Path(path)
    limits = limits or BundleLimits()
    try:
        mode = os.stat(path).st_mode          # the path the user gave may itself be a link: follow it
    except OSError as exc:
        raise BundleError(f"{path}: cannot read the bundle: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        text, npz = read_folder(path, limits)
    elif stat.S_ISREG(mode):
        text, npz = read_zip(path, limits)
    else:
        raise BundleError(f"{path}: not a gradkit debug bundle (expected a folder or .zip)")
    try:
        manifest = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"{path}: manifest.json is not valid JSON ({type(exc).__name__}: {exc})") from None
    check_manifest(manifest, str(path))
    arrays = load_arrays(npz, limits, str(path))
    _check_arrays(arrays, manifest, str(path))
    return Bundle(manifest, arrays, path)


def _check_arrays(arrays: dict, manifest: dict, where: str) -> None:
    """Each stored array names a listed array (and, for snapshots, an existing launch) and has its shape."""
    meta = {a["id"]: a for a in manifest["arrays"]}
    n_fwd, n_bwd = len(manifest["launches"]), len(manifest.get("backward", []))
    counts = {"before": n_fwd, "after": n_fwd, "grad_before": n_bwd, "grad_after": n_bwd}
    for key, data in arrays.items():
        named = _MEMBER.fullmatch(key)
        if named is None:
            raise BundleError(f"{where}: arrays.npz member {key + '.npy'!r} is not a bundle entry (expected "
                              "value/<id>, grad/<id> or {before,after,grad_before,grad_after}/<launch>/<id>, "
                              "<launch> a decimal number, <id> an array id)")
        kind, number, aid = named.group("kind", "number", "id")
        if number is not None and int(number) >= counts[kind]:
            raise BundleError(f"{where}: arrays.npz holds '{key}' but the manifest has no such launch")
        if aid not in meta:
            raise BundleError(f"{where}: arrays.npz holds '{key}' but the manifest lists no array '{aid}'")
        shape = tuple(meta[aid]["shape"])
        if tuple(data.shape[:len(shape)]) != shape:
            raise BundleError(f"{where}: arrays.npz '{key}' has shape {data.shape}, "
                              f"the manifest says {shape}")
