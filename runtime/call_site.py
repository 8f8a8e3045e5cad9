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
