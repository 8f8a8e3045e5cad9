"""The debugger's URL parameters (?bundle=NAME&view=SLUG&launch=N&other=NAME), checked before they are used.

Anyone can send a user a link: a value that names nothing here is a `BundleError` saying which parameter it
was and what it accepts, which the page shows (never a traceback) before going on with the default."""

from __future__ import annotations

import re

from ..viz.bundle import BundleError

_NUMBER = re.compile(r"0|[1-9][0-9]{0,8}")     # ASCII digits only: '²' and '٣' are digits to str.isdigit
_SHOWN = 40                                    # characters of a bad value quoted back
_LISTED = 8                                    # options named in a message


def _quoted(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def launch_index(value: str | None, count: int) -> int | None:
    """The launch row `?launch=` names, None when the URL names none; BundleError unless it is a decimal
    number (ASCII digits, no sign) below `count`."""
    if value is None:
        return None
    if not _NUMBER.fullmatch(value) or int(value) >= count:
        span = f"from 0 to {count - 1}" if count else "none: this bundle records no launches"
        raise BundleError(f"URL parameter launch={_quoted(value)} is not a launch of this bundle "
                          f"(expected a launch number {span})")
    return int(value)


def choice(key: str, value: str | None, options: list[str], what: str) -> str | None:
    """`value` when it is one of `options` (None when the URL names none); BundleError naming the parameter
    and some of the options otherwise (`what`: what an option is, e.g. "view")."""
    if value is None or value in options:
        return value
    listed = ", ".join(options[:_LISTED]) + (f" and {len(options) - _LISTED} more" if len(options) > _LISTED
                                            else "")
    raise BundleError(f"URL parameter {key}={_quoted(value)} names no {what} here (one of: {listed})")
