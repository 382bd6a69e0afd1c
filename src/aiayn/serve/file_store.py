"""``FileStore``: translated files kept for download in a bounded store (generated names,
an expiry, a byte budget, a directory locked as one process's), as ``aiayn.serve.files``
serves them."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from aiayn.errors import UserError
from aiayn.serve.errors import ServeError

STORED = re.compile(r"[0-9a-f]{32}\.[a-z]{2,4}")  # the names the store generates
LOCK = ".aiayn-files.lock"  # in a --files-dir: held by the process whose store it is


@dataclass
class Stored:
    path: Path
    download_name: str
    media_type: str
    size: int
    expires: float


class FileStore:
    """Translated files in ``directory`` (a private temporary one by default, removed by
    ``close``), each under a generated name, expiring ``expiry`` seconds after it is written;
    at most ``max_bytes`` in all (the oldest removed to make room). A given directory is
    this store's alone while it is open (``LOCK``, locked; another store on it is refused):
    its files are known to this process only, and it removes the files a previous one left."""

    def __init__(self, directory: str | Path | None, expiry: float, max_bytes: int) -> None:
        self._owned = not directory
        self.directory = Path(directory or tempfile.mkdtemp(prefix="aiayn-files-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self._held = None if self._owned else _hold(self.directory)
        self.expiry, self.max_bytes = expiry, max_bytes
        self._files: dict[str, Stored] = {}
        self._lock = threading.Lock()
        for old in self.directory.iterdir():  # a previous server's files: never served again
            if STORED.fullmatch(old.name) and old.is_file():
                old.unlink(missing_ok=True)

    @property
    def size(self) -> int:
        return sum(f.size for f in self._files.values())

    def put(self, data: bytes, suffix: str, download_name: str, media_type: str) -> str:
        """Store ``data``; its generated name (32 hex digits and ``suffix``)."""
        if len(data) > self.max_bytes:
            raise ServeError(
                413,
                f"the translated file has {len(data)} bytes; the store holds at most "
                f"{self.max_bytes} (--files-store-bytes)",
            )
        name = secrets.token_hex(16) + suffix
        path = self.directory / name
        # written before the lock is taken (up to --max-body-bytes): ``get`` and ``purge`` run
        # on the event loop and take it; the file is served only once registered below
        try:
            self._write(path, data)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        with self._lock:
            self._purge(time.monotonic())
            while self._files and self.size + len(data) > self.max_bytes:
                oldest = min(self._files, key=lambda k: self._files[k].expires)
                self._remove(oldest)
            expires = time.monotonic() + self.expiry
            self._files[name] = Stored(path, download_name, media_type, len(data), expires)
        return name

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def get(self, name: str) -> Stored | None:
        with self._lock:
            self._purge(time.monotonic())
            return self._files.get(name)

    def open(self, name: str) -> tuple[Stored, BinaryIO] | None:
        """The file ``name`` and a handle open on it (the caller closes it); None where it
        is not stored (never was, expired, or removed for room). Opened under the lock that
        removing a file takes, so no expiry or eviction comes between finding the file and
        opening it; once open, the handle reads the whole file even if it is removed."""
        with self._lock:
            self._purge(time.monotonic())
            stored = self._files.get(name)
            if stored is None:
                return None
            try:
                return stored, open(stored.path, "rb")  # noqa: SIM115 - the caller closes it
            except FileNotFoundError:  # removed from the directory by someone else
                self._files.pop(name)
                return None

    def purge(self) -> None:
        """Remove the files whose time is up."""
        with self._lock:
            self._purge(time.monotonic())

    def _purge(self, now: float) -> None:
        for name in [k for k, f in self._files.items() if f.expires <= now]:
            self._remove(name)

    def _remove(self, name: str) -> None:
        stored = self._files.pop(name)
        stored.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Remove every stored file (and the directory, when the store made it)."""
        with self._lock:
            for name in list(self._files):
                self._remove(name)
            if self._owned:
                shutil.rmtree(self.directory, ignore_errors=True)
            elif self._held is not None:
                (self.directory / LOCK).unlink(missing_ok=True)  # still held: no one took it
                os.close(self._held)
                self._held = None


def _hold(directory: Path) -> int:
    """Lock ``directory`` for this process's store (the descriptor holding ``LOCK``)."""
    import fcntl

    path = directory / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise UserError(
            f"--files-dir {directory}: cannot create {path}: {e.strerror or e}"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        why = (
            "in use by another aiayn serve process"
            if isinstance(e, BlockingIOError)
            else f"cannot lock {path} ({e.strerror or e})"
        )
        raise UserError(
            f"--files-dir {directory}: {why}; give each process its own --files-dir (a "
            "process serves only the files it translated, so a download must reach the "
            "process that translated it)"
        ) from None
    return fd
