"""Paths as the debugger shows them: relative to the folder the bundle sits in when inside it, else just the
file name, so rendered text never carries an absolute path such as /home/user/... from the machine that
recorded the bundle (or from this one)."""

from __future__ import annotations

import os
import pathlib

from ..viz.bundle import portable_path


def base_folder(bundle) -> pathlib.Path | None:
    """The folder holding the bundle (its parent folder, for a folder bundle and a .zip alike)."""
    path = getattr(bundle, "path", None)
    return pathlib.Path(os.path.abspath(path)).parent if path is not None else None


def shown_path(bundle, file: str | None) -> str | None:
    """`file` relative to the bundle's folder when inside it, else its last component (None stays None)."""
    return portable_path(file, base_folder(bundle)) if file else file


def redact(bundle, text: str | None) -> str | None:
    """`text` (an error message, a NaN report) with every kernel file the bundle names and the bundle's own
    folder replaced by their shown forms."""
    if not text:
        return text
    m = bundle.manifest
    files = {k.get("file") for k in m.get("kernels", {}).values()} | {(m.get("nan") or {}).get("file")}
    for file in sorted((f for f in files if f), key=len, reverse=True):
        text = text.replace(file, shown_path(bundle, file))
    base = base_folder(bundle)
    if base is not None and str(base) not in ("/", "."):
        text = text.replace(str(base) + os.sep, "")
    return text


def strip_folder(text: str, folder) -> str:
    """`text` with the absolute `folder` prefix removed from the paths it mentions (for load errors, shown
    before any bundle is open)."""
    base = os.path.abspath(folder)
    return text.replace(base + os.sep, "") if base not in ("/", ".") else text
