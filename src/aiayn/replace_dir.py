"""Writing a whole directory (import, export, quantize, average) in one step.

``replace_directory`` writes into a new temporary sibling, which then takes the place of the
old directory in one rename, so the result holds exactly the new model's files (none left over
from the model it replaces) and an interrupted write leaves the old directory as it was. A
write that fails (a read-only file system, no permission, no space) is a ``UserError`` naming
the directory asked for and the cause, never the temporary sibling.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from torch import nn

from aiayn.errors import UserError, fsync_directory
from aiayn.modeldir import CONFIG_FILE, WEIGHTS_FILE, save_model_dir

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
    if not (out / CONFIG_FILE).is_file():
        raise UserError(
            f"--out {out} holds no model (no {CONFIG_FILE}): --force replaces a model directory "
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


def save_quantized(src: Path, out: Path, model: nn.Module, force: bool = False) -> None:
    """Write the quantized ``model`` of the model directory ``src`` to ``out`` (replaced whole,
    ``replace_directory``), with every other file of ``src`` (tokenizer, run.json, ...)."""
    src = Path(src)
    with replace_directory(out, force, keep=[src]) as new:
        for item in sorted(src.iterdir()):  # everything but the weights and their config
            if item.is_file() and item.name not in (CONFIG_FILE, WEIGHTS_FILE):
                shutil.copy2(item, new / item.name)
        save_model_dir(new, model)
