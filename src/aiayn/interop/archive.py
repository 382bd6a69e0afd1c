"""A zip archive of one folder (an Argos Translate ``.argosmodel``), extracted as hostile input.

Before anything is written, every member is checked: its name must stay inside the folder
(no ``..``, no absolute path or drive, no backslash or NUL), it must be a plain file or a
folder (a symbolic link or a device is refused), no name may appear twice, none may be
encrypted, and all must sit under one top folder whose name is plain (letters, digits,
``.``, ``_``, ``-``), and the sizes the members declare must stay within
``ArchiveLimits.max_bytes``. The members are then inflated in bounded chunks, counting the
bytes that really come out, and extraction stops at that limit whatever the headers say
(``zipfile`` itself stops a member at its declared size and then fails its checksum; a
member that declares more than it holds ends as truncated). Everything is
written into a new temporary folder inside the destination, which the caller renames into
place once it has checked what came out; on any failure the temporary folder is removed.
Every refusal is a ``UserError`` naming the archive, the member and the problem.
"""

from __future__ import annotations

import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import UserError

CHUNK = 1 << 20
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class ArchiveLimits:
    """``max_bytes``: the most bytes the whole archive may inflate to; ``max_members``: the
    most members it may hold."""

    max_bytes: int = 8 << 30  # the largest Argos Translate packages are a few hundred MB
    max_members: int = 10_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_members"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ArchiveLimits.{name} must be a positive integer, got {value!r}")


def _unsafe_name(name: str) -> str | None:
    """Why member ``name`` would leave the folder it is extracted in (None: it would not)."""
    if "\0" in name:
        return "holds a NUL character"
    if "\\" in name:
        return "holds a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "climbs out with '..'"
    if any(part in ("", ".") for part in parts):
        return "has an empty or '.' part"
    if any(len(part.encode()) > 255 for part in parts) or len(name) > 4096:
        return "is too long"
    return None


def _kind(info: zipfile.ZipInfo) -> str | None:
    """What a member is besides a file or a folder ("a symbolic link", ...), from the Unix
    mode a zip written on Unix keeps (None: a file or a folder)."""
    mode = info.external_attr >> 16
    if not mode or info.create_system != 3:  # not written on Unix: no file type recorded
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: permissions alone
        return None
    return "not a plain file (a device, a pipe or a socket)"


def check_archive(
    path: Path, what: str, limits: ArchiveLimits
) -> tuple[str, list[zipfile.ZipInfo]]:
    """The top folder of the zip archive ``path`` (``what``: what it should be, for the
    messages) and its members, each checked as the module says; nothing is written."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise UserError(f"{path}: not a zip archive (an {what} is one)") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror or e})") from None
    except (ValueError, EOFError) as e:  # a truncated or garbled central directory
        raise UserError(f"{path}: a damaged zip archive ({type(e).__name__}: {e})") from None
    with archive:
        infos = archive.infolist()
    if not infos:
        raise UserError(f"{path}: an empty zip archive (an {what} holds one folder)")
    if len(infos) > limits.max_members:
        raise UserError(f"{path}: {len(infos)} archive members; at most {limits.max_members}")
    seen: set[str] = set()
    tops: set[str] = set()
    declared = 0
    for info in infos:
        where = f"{path}: member {info.filename!r}"
        why = _unsafe_name(info.filename)
        if why:
            raise UserError(f"{where}: refused: its name {why}")
        kind = _kind(info)
        if kind:
            raise UserError(f"{where}: refused: {kind}")
        name = info.filename.rstrip("/")
        if name in seen:
            raise UserError(f"{where}: refused: the name appears twice in the archive")
        seen.add(name)
        if info.flag_bits & 0x1:
            raise UserError(f"{where}: encrypted; an {what} is not")
        tops.add(name.split("/")[0])
        if "/" not in name and not info.is_dir():
            raise UserError(
                f"{where}: a file outside the package's folder (an {what} holds one folder)"
            )
        declared += info.file_size
    if len(tops) > 1:
        shown = ", ".join(sorted(tops)[:5]) + (" ..." if len(tops) > 5 else "")
        raise UserError(f"{path}: {len(tops)} top folders ({shown}); an {what} holds one")
    [top] = tops
    if not PLAIN_NAME.fullmatch(top):
        raise UserError(
            f"{path}: its folder {top!r} is not a plain name (letters, digits, '.', '_', '-')"
        )
    if declared > limits.max_bytes:
        raise UserError(f"{path}: its members declare {declared} bytes; at most {limits.max_bytes}")
    return top, infos


@contextmanager
def extracted(path: Path, into: Path, what: str, limits: ArchiveLimits) -> Iterator[Path]:
    """Check the archive ``path``, then extract it into a new temporary folder inside
    ``into``; yields the extracted top folder. The temporary folder is removed when the
    block ends, so the block moves what it keeps out of it (a rename: same file system)."""
    top, infos = check_archive(path, what, limits)
    work = Path(tempfile.mkdtemp(prefix=".aiayn-extract-", dir=into))
    try:
        with zipfile.ZipFile(path) as archive:
            total = 0
            for info in infos:
                target = work.joinpath(*info.filename.rstrip("/").split("/"))
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                total = _inflate(
                    archive, info, target, total, f"{path}: member {info.filename!r}", limits
                )
        yield work / top
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _inflate(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    target: Path,
    total: int,
    where: str,
    limits: ArchiveLimits,
) -> int:
    """Write member ``info`` to ``target`` in bounded chunks; the archive's running total of
    inflated bytes after it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(info) as stream, open(target, "xb") as out:
            while chunk := stream.read(CHUNK):
                total += len(chunk)
                if total > limits.max_bytes:
                    raise UserError(
                        f"{where}: the archive inflates past {limits.max_bytes} bytes (a zip "
                        "bomb, or a package larger than allowed)"
                    )
                out.write(chunk)
    except UserError:
        raise
    except NotImplementedError as e:  # a compression method zipfile cannot read
        raise UserError(f"{where}: {e}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise UserError(f"{where}: damaged or truncated ({type(e).__name__}: {e})") from None
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        raise UserError(f"{where}: refused: it clashes with another member's path") from None
    except OSError as e:
        raise UserError(f"{where}: cannot extract it ({e.strerror or e})") from None
    return total
