"""The one error type for what a user can fix, and the helpers that name the file it concerns.

``UserError`` is raised for bad input of any kind: a file, a line, a field, a flag. Its message
names where the problem is and what is allowed; the command line prints it as one line and
exits non-zero (a traceback only with ``--debug``). It subclasses ``ValueError``, so callers
of the library that catch ``ValueError`` keep working.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class UserError(ValueError):
    """Bad input the user can fix; the message names the file, line, field or flag."""


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


def read_text(path: Path, what: str = "file") -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-UTF-8 file is a ``UserError``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    return decode_utf8(data, path)


def decode_utf8(data: bytes, where: Path | str) -> str:
    """``data`` as UTF-8 text; invalid bytes are a ``UserError`` naming the line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UserError(
            f"{where}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at column {column}); "
            "convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None


def read_json(path: Path, what: str = "JSON file") -> Any:
    """The JSON value in ``path``; a missing or malformed file is a ``UserError`` naming it."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None


def read_json_object(path: Path, what: str = "JSON file") -> dict:
    """Like ``read_json``, for a file that must hold a JSON object."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


__all__ = [
    "TrainingInterrupted",
    "UserError",
    "decode_utf8",
    "describe_os_error",
    "read_json",
    "read_json_object",
    "read_text",
]
