"""File primitives every layer writes and reads through; below data/, model/ and the model
directory, above ``aiayn.errors`` only (standard library otherwise).

Reading: ``read_text`` / ``read_json`` / ``read_json_object`` name the file, line and column of
bytes that are not UTF-8 or JSON. Writing: ``atomic_write`` (and ``write_json`` /
``write_text`` over it) replaces a file all or nothing and names the path and the cause (no
space, no permission, a read-only disk) when it cannot; ``file_sha256`` digests a file in 1 MB
blocks.

A whole directory (import, export, quantize, average) is written with ``replace_directory``:
into a new temporary sibling, which then takes the place of the old directory in one rename,
so the result holds exactly the new files (none left over from what it replaces) and an
interrupted write leaves the old directory as it was. A write that fails (a read-only file
system, no permission, no space) is a ``UserError`` naming the directory asked for and the
cause, never the temporary sibling. Every directory aiayn writes whole holds a
``config.json`` (``REPLACEABLE_MARKER``): ``--force`` replaces only such a directory.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiayn.errors import UserError, decode_utf8

REPLACEABLE_MARKER = "config.json"  # what a directory aiayn wrote whole holds


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


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, lambda p: p.write_text(json.dumps(data, indent=2) + "\n"))


def write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


NEW_SUFFIX, OLD_SUFFIX = ".new-aiayn", ".old-aiayn"  # temporary siblings of a directory
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}  # what only a write meets


def check_replaceable(out: Path, force: bool, keep: Iterable[Path] = ()) -> None:
    """Refuse to write the directory ``out`` unless it is absent or empty, or ``force`` is
    given and it holds a model (a config.json); never replace a directory in ``keep`` (a
    source of the write) or one holding it."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a directory; choose another")
    for source in keep:
        source = Path(source).resolve()
        if out.resolve() == source or out.resolve() in source.parents:
            raise UserError(
                f"--out {out} holds {source}, which is read to write it; choose another"
            )
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise UserError(f"--out {out} exists and is not empty; choose another or add --force")
    if not (out / REPLACEABLE_MARKER).is_file():
        raise UserError(
            f"--out {out} holds no model (no {REPLACEABLE_MARKER}): --force replaces a model directory "
            "whole, so it will not replace this one; choose another or empty it yourself"
        )


@contextmanager
def replace_directory(out: Path, force: bool = False, keep: Iterable[Path] = ()) -> Iterator[Path]:
    """Write a whole directory: yields a new empty temporary sibling of ``out`` to write into.

    When the block succeeds, the sibling takes the place of ``out`` (which then holds exactly
    what the block wrote, nothing of what it held before) in one atomic rename where the
    system has one (Linux ``renameat2`` ``RENAME_EXCHANGE``), else in two; when it fails, the
    sibling is removed and ``out`` is untouched. A write that fails (the sibling cannot be
    made, a file in it cannot be written) is a ``UserError`` naming ``out`` and the OS's
    reason. ``force`` and ``keep``: ``check_replaceable``.
    """
    out = Path(out)
    if out.is_symlink():
        out = out.resolve()  # replace the directory the link names, keep the link
    keep = list(keep)
    check_replaceable(out, force, keep)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _clean_siblings(out)
        new = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=NEW_SUFFIX, dir=out.parent))
    except OSError as e:  # a read-only file system, no permission, no space ...
        raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(new, 0o777 & ~umask)  # mkdtemp makes 0700; give the directory the usual mode
        try:
            yield new
        except (OSError, UserError) as e:
            named = _named_for(e, new, out)
            if named is None:
                raise
            raise named from e
        check_replaceable(out, force, keep)  # the block may have taken long: check again
        try:
            _swap_in(new, out)
        except OSError as e:
            raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    finally:
        if new.exists():  # the block failed, or new holds the old directory now
            shutil.rmtree(new, ignore_errors=True)


def _named_for(error: OSError | UserError, new: Path, out: Path) -> UserError | None:
    """A failed write into the temporary ``new`` as a ``UserError`` naming the path under
    ``out`` (what the user asked for) and the cause; None for an error about anything else
    (a source that cannot be read keeps its own message). An OSError naming no file (a
    library's write to a file object) is about ``out`` when its cause is one of a write."""
    if isinstance(error, OSError):
        if error.filename is None and error.errno in _WRITE_ERRORS:
            return UserError(f"cannot write {out}: {error.strerror or error}")
        if not isinstance(error.filename, str | bytes | os.PathLike):
            return None
        path = Path(os.fsdecode(error.filename))
        if path != new and new not in path.parents:
            return None
        return UserError(f"cannot write {out / path.relative_to(new)}: {error.strerror or error}")
    if type(error) is UserError and str(new) in str(error):  # atomic_write's message
        return UserError(str(error).replace(str(new), str(out)))
    return None


def _swap_in(new: Path, out: Path) -> None:
    if not out.exists():
        os.rename(new, out)
    elif not _exchange(new, out):
        old = new.with_name(new.name[: -len(NEW_SUFFIX)] + OLD_SUFFIX)
        os.rename(out, old)
        os.rename(new, out)
        shutil.rmtree(old, ignore_errors=True)
    fsync_directory(out.parent)


def _clean_siblings(out: Path) -> None:
    """Remove what an interrupted ``replace_directory`` left beside ``out``: an unfinished new
    directory, or (killed between its two renames) the old one, which goes back in place."""
    for path in out.parent.glob(f".{out.name}.*"):
        if path.name.endswith(NEW_SUFFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.endswith(OLD_SUFFIX):
            if out.exists():
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.rename(path, out)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic rename (Linux renameat2); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:  # C library before glibc 2.28
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system cannot
        return False
    raise OSError(code, os.strerror(code), str(b))
