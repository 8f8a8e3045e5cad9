"""The command line's output: rich when installed, plain prints otherwise, with values always printed as the
characters they hold (never read as markup)."""

from __future__ import annotations

import contextlib
import re
import sys

# Output: rich when installed, plain prints otherwise ----------------------------------------------------
# A message is a sequence of parts. A string part is this module's own markup: fixed words and the style tags
# it writes ([red], [bold red], [/yellow], [/]); it never holds a value. Everything else (file names,
# messages, tracebacks, names from a bundle) is a `_text` part, printed as the characters it holds: never read
# as markup, so it can neither style the terminal nor make a link, and `x[i]` stays `x[i]`.
# Without rich, the style tags are removed (only style words are matched: text such as `[16]` stays).
_STYLE_WORDS = "bold|dim|italic|underline|red|green|yellow|blue|cyan|magenta|white"
_MARKUP = re.compile(rf"\[(?:/|/?(?:{_STYLE_WORDS})(?: (?:{_STYLE_WORDS}))*)\]")


def plain_text(text: str) -> str:
    """`text` with this module's rich style tags removed (what is printed when rich is not installed)."""
    return _MARKUP.sub("", text)


def _text(value, style: str = "") -> tuple[str, str]:
    """A message part printed as the text of `value` (in `style`), never read as markup."""
    return str(value), style


def _plain_parts(parts) -> str:
    return "".join(plain_text(p) if isinstance(p, str) else p[0] for p in parts)


class _Plain:
    def print(self, *parts) -> None:
        print(_plain_parts(parts), file=sys.stderr)

    @contextlib.contextmanager
    def status(self, *parts):
        print(_plain_parts(parts), file=sys.stderr)
        yield


class _Rich:
    """rich's console on stderr: markup parts rendered, `_text` parts kept as text."""

    def __init__(self):
        from rich.console import Console
        self.console = Console(stderr=True, highlight=False)

    @staticmethod
    def text(parts):
        from rich.text import Text
        return Text.assemble(*(Text.from_markup(p, emoji=False) if isinstance(p, str) else p for p in parts))

    def print(self, *parts) -> None:
        self.console.print(self.text(parts))

    def status(self, *parts):
        return self.console.status(self.text(parts))


def _console(quiet: bool = False):
    if quiet:
        return _Quiet()
    try:
        return _Rich()
    except ImportError:
        return _Plain()


class _Quiet(_Plain):
    def print(self, *parts) -> None:
        pass

    @contextlib.contextmanager
    def status(self, *parts):
        yield


# Capturing scripts ----------------------------------------------------------------------------------------
