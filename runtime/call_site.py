"""Where in the user's program a launch or a backward pass was called from: the innermost frame outside
gradkit (told by the module's name, since the examples live under the package folder)."""

from __future__ import annotations

import sys


def user_site(depth: int = 1) -> tuple[str, int] | None:
    """(file, line) of the nearest caller frame whose module is not part of gradkit; None when there is
    none (a launch made by gradkit itself with no user code on the stack)."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != "gradkit" and not name.startswith("gradkit."):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def traceback_site(tb) -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside gradkit in traceback `tb` (where an error left user code)."""
    site = None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name != "gradkit" and not name.startswith("gradkit."):
            site = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return site


def name_arrays(arrays, depth: int = 1) -> None:
    """Give each array of `arrays` without one the name the user's code holds it under in the nearest user
    frame (`x`, or `xs[3]` for an element of a list), for the debugger (`gradkit debug` only: called while a
    Capture records). The name goes into the array's `_origin` [file, line, name]."""
    frame = sys._getframe(depth)
    while frame is not None and (frame.f_globals.get("__name__", "") == "gradkit"
                                 or frame.f_globals.get("__name__", "").startswith("gradkit.")):
        frame = frame.f_back
    if frame is None:
        return
    names: dict[int, str] = {}
    for key, value in frame.f_locals.items():
        if key.startswith("__"):
            continue
        if isinstance(value, (list, tuple)) and len(value) <= 10_000:
            for k, item in enumerate(value):
                names.setdefault(id(item), f"{key}[{k}]")
        else:
            names.setdefault(id(value), key)
    for a in arrays:
        origin = getattr(a, "_origin", None)
        name = names.get(id(a))
        if name is None or (origin is not None and origin[2] is not None):
            continue
        if origin is None:
            a._origin = [None, None, name]
        else:
            origin[2] = name
