"""The one error type for what a user can fix, and how an error names where it is.

``UserError`` is raised for bad input of any kind: a file, a line, a field, a flag. Its message
names where the problem is and what is allowed; the command line prints it as one line and
exits non-zero (a traceback only with ``--debug``). It subclasses ``ValueError``, so callers
of the library that catch ``ValueError`` keep working.

``decode_utf8`` names the line and column of bytes that are not UTF-8; reading and writing
files is ``aiayn.fileio``, the layer above this one. Standard library only, so that every
layer can use it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

_debug = False  # set by the command line's --debug


def debugging() -> bool:
    """True under ``--debug`` or ``AIAYN_DEBUG=1``: tracebacks, and other libraries' own
    warnings and progress bars, are shown."""
    return _debug or os.environ.get("AIAYN_DEBUG", "") not in ("", "0")


def set_debugging(on: bool) -> bool:
    """Turn ``debugging`` on or off; returns the previous setting."""
    global _debug
    previous, _debug = _debug, on
    return previous


def note(message: str) -> None:
    """One line on stderr about something done once on the user's behalf (a conversion
    cached, where it went)."""
    print(f"aiayn: {message}", file=sys.stderr, flush=True)


class UserError(ValueError):
    """Bad input the user can fix; the message names the file, line, field or flag."""


class OptionError(UserError):
    """A bad option of a call (``beam``, ``nbest``, ``sampling`` ...), named as the Python API
    spells it; ``options`` lists the names the message uses, so that a front end can show
    them in its own spelling (``renamed``: the command line's flags)."""

    def __init__(self, message: str, *options: str) -> None:
        super().__init__(message)
        self.message, self.options = message, options

    def renamed(self, names: dict[str, str]) -> str:
        """The message with each option named as ``names`` says (default ``--option-name``)."""
        text = self.message
        for option in self.options:
            flag = names.get(option, "--" + option.replace("_", "-"))
            text = re.sub(rf"(?<![\w-]){re.escape(option)}(?![\w-])", flag, text)
        return text


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by a signal after saving a checkpoint; the message says how to resume."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.signal_number = signal_number


def describe_os_error(error: OSError, path: Path | str | None = None) -> str:
    """``PATH: cause`` for an OSError, naming ``path`` when the error itself names none."""
    where = path if path is not None else error.filename
    cause = error.strerror or str(error) or type(error).__name__
    return f"{where}: {cause}" if where is not None else cause


def decode_utf8(
    data: bytes,
    where: Path | str,
    errors: str = "strict",
    fix: str = "convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8",
) -> str:
    """``data`` as UTF-8 text; invalid bytes are a ``UserError`` naming the line and column
    and saying how to ``fix`` them (unless ``errors`` is "replace" or "ignore")."""
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UserError(
            f"{where}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at column {column}); "
            f"{fix}"
        ) from None


__all__ = [
    "OptionError",
    "TrainingInterrupted",
    "UserError",
    "decode_utf8",
    "describe_os_error",
]
