"""The one error type for what a user can fix, and the file helpers that name the file.

``UserError`` is raised for bad input of any kind: a file, a line, a field, a flag. Its message
names where the problem is and what is allowed; the command line prints it as one line and
exits non-zero (a traceback only with ``--debug``). It subclasses ``ValueError``, so callers
of the library that catch ``ValueError`` keep working.

Reading: ``read_text`` / ``decode_utf8`` / ``read_json`` name the file, line and column of
bytes that are not UTF-8 or JSON. Writing: ``atomic_write`` replaces a file all or nothing and
names the path and the cause (no space, no permission, a read-only disk) when it cannot.
Standard library only, so that every layer can use it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

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
        kinds = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}
        got = kinds.get(type(data), "a number")
        raise UserError(f"{path}: expected a JSON object {{...}}, got {got}")
    return data


def fsync_directory(directory: Path) -> None:
    """Make the renames inside ``directory`` durable (fsync of the directory itself)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)``, fsync, then rename over ``path``: all or nothing.

    A failure (no space, no permission, a read-only disk, ...) removes the temporary file and
    raises ``UserError`` naming ``path`` and the cause; ``path`` keeps its previous content.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        write(Path(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        fsync_directory(path.parent)
    except OSError as e:
        raise UserError(f"cannot write {path}: {_cause(e)}") from e
    except RuntimeError as e:  # torch.save reports a failed write as RuntimeError
        raise UserError(f"cannot write {path}: {_cause(e, path.parent)}") from e
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _cause(error: BaseException, directory: Path | None = None) -> str:
    """What went wrong in a write, in words: the OS's reason, found also when a library
    wrapped it (torch.save's "file write failed"), or the free space left."""
    seen = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    if directory is not None:
        try:
            stat = os.statvfs(directory)
            if stat.f_bavail * stat.f_frsize < 1 << 20:
                return "No space left on device"
        except OSError:
            pass
    line = (str(error).strip().splitlines() or [type(error).__name__])[-1]
    return line[:200]


__all__ = [
    "OptionError",
    "TrainingInterrupted",
    "atomic_write",
    "UserError",
    "decode_utf8",
    "describe_os_error",
    "read_json",
    "read_json_object",
    "read_text",
]
