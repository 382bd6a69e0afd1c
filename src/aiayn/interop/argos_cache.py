"""Where served Argos Translate packages are kept: archives extracted, packages imported.

Serving a package needs its folder (CTranslate2 reads ``model/`` in place) and, for what only
aiayn's model does (glossary terms, alignments, sampling, scores), the package imported as an
aiayn model directory. Both are made once and kept:

* ``extracted_package``: an ``.argosmodel`` archive, checked and extracted as
  ``read_package`` does it, into ``ROOT/packages/KEY/`` (KEY: the archive's SHA-256);
* ``imported_model``: a package (installed, or extracted above) or a CTranslate2 model
  imported (``aiayn.interop.foreign.ForeignModel.import_into``) into ``ROOT/imports/KEY/``
  (KEY: a digest of its files and of the import's format, ``IMPORT_FORMAT``).

ROOT is ``cache_dir``, else ``$AIAYN_CACHE_DIR``, else ``$XDG_CACHE_HOME/aiayn`` (by default
``~/.cache/aiayn``), followed by ``argos``: never the packages directory, which is Argos
Translate's. As with CTranslate2 conversions (``aiayn.interop.ctranslate2.cache``), an entry's
stamp records what it was made from and the size and SHA-256 of each of its files; it is
checked before each use, made again (with a warning naming the problem) when damaged, and
made beside its place and renamed into it under a lock, so that processes making it at once
leave one entry and a reader never sees half of one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from aiayn.errors import UserError, note
from aiayn.fileio import file_sha256, fsync_directory, write_json
from aiayn.interop.argos_package import ArgosPackage, read_package
from aiayn.interop.ctranslate2.cache import (
    CACHE_ENV,
    damage,
    file_digests,
    inputs_digest,
    user_cache_dir,
)
from aiayn.interop.ctranslate2.conversion import STAMP

IMPORT_FORMAT = 1  # the import's format: an import of another is made anew
CACHE_FOLDER = "argos"


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """Where extracted and imported packages are kept: ``cache_dir``, ``$AIAYN_CACHE_DIR``
    or ``$XDG_CACHE_HOME/aiayn`` (``~/.cache/aiayn``), then ``argos``."""
    if cache_dir is not None:
        base = Path(cache_dir)
    elif os.environ.get(CACHE_ENV):
        base = Path(os.environ[CACHE_ENV])
    else:
        base = user_cache_dir()
    return base / CACHE_FOLDER


def cached_entry(
    root: Path, key: str, inputs: dict, make: Callable[[Path], None], what: str
) -> Path:
    """The entry ``root/key``, made by ``make(folder)`` (which fills an empty folder) where it
    is absent or damaged (``damage``: a file missing or changed, other ``inputs``)."""
    target = root / key
    if not damage(target, inputs):
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f".{key}.lock", "a")  # noqa: SIM115 (held until made)
    except OSError as e:
        raise UserError(
            f"{root}: cannot keep the {what} there ({e.strerror or e}); give a writable cache "
            f"directory (--cache-dir, cache_dir=, or ${CACHE_ENV})"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be making the same entry
        problem = damage(target, inputs)
        if not problem:  # the other process's
            return target
        if target.exists():
            warnings.warn(
                f"{target}: the {what} is damaged ({problem}); making it again", stacklevel=2
            )
        start = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix=".making-", dir=root))
        try:
            made = work / "entry"
            made.mkdir()
            make(made)
            write_json(made / STAMP, {"inputs": inputs, "files": file_digests(made)})
            if target.exists():
                os.replace(target, work / "damaged")
            os.replace(made, target)
            fsync_directory(root)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        note(f"made the {what} in {time.perf_counter() - start:.1f} s: {target}")
    return target


def extracted_package(archive: Path | str, cache_dir: Path | str | None = None) -> ArgosPackage:
    """The package of the ``.argosmodel`` ``archive``, extracted once (checked as
    ``read_package`` checks an archive) and kept in the cache (see the module)."""
    archive = Path(archive)
    try:
        digest = file_sha256(archive)
    except OSError as e:
        raise UserError(f"{archive}: cannot read it ({e.strerror or e})") from None
    inputs = {"archive_sha256": digest}
    root = cache_root(cache_dir) / "packages"

    def make(folder: Path) -> None:
        read_package(archive, folder)

    entry = cached_entry(root, digest[:16], inputs, make, f"extracted package of {archive.name}")
    folders = [p for p in entry.iterdir() if p.is_dir()]
    if len(folders) != 1:
        raise UserError(f"{entry}: holds {len(folders)} package folders, not one")
    return read_package(folders[0])


def source_inputs(source_dir: Path, name: str) -> dict:
    """What an import of the model in ``source_dir`` depends on: the digests of its files
    (every one, a package's README and sentence splitter included: they are small beside its
    model; hidden folders, such as caches, left out), its name and the import's format."""
    files = {
        p.relative_to(source_dir).as_posix(): file_sha256(p)
        for p in sorted(source_dir.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(source_dir).parts)
    }
    return {"import": IMPORT_FORMAT, "name": name, "files": files}


def imported_model(
    source_dir: Path,
    name: str,
    make: Callable[[Path], None],
    cache_dir: Path | str | None = None,
) -> Path:
    """The aiayn model directory that ``make(folder)`` imports the model in ``source_dir``
    (called ``name``) into, imported once and kept in the cache (see the module)."""
    inputs = source_inputs(Path(source_dir), name)
    root = cache_root(cache_dir) / "imports"
    return cached_entry(
        root, inputs_digest(inputs), inputs, make, f"aiayn model imported from {name}"
    )
