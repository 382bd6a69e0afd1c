"""API keys in SQLite (the standard library's ``sqlite3``), as ``aiayn keys`` manages them and
``aiayn serve --api-keys`` reads them.

A key is shown once, when it is made; the database keeps its SHA-256 digest only (a key made
here is random and long, so a plain digest is enough: nothing to brute-force), with its own
limits: requests per minute and characters per text (None: the server's), and the characters it
may translate a month on DeepL's routes (``char_quota``; None: no limit; counted in the same
file by ``aiayn.serve.usage``). A key's ``id`` is the first 12 hex digits of its digest: what
``aiayn keys list`` shows and ``remove`` accepts. A given key is taken whatever its length, as
LibreTranslate takes it (``key_warnings`` says what is weak about it); LibreTranslate's own
database, which keeps keys in plain text, is read by ``aiayn.serve.libretranslate_keys``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DB = "aiayn-keys.db"  # in the directory the server (or ``aiayn keys``) runs in
ID_LENGTH = 12
MIN_KEY_LENGTH = 16  # a given key shorter than this is taken with a warning (guessable)
COLUMNS = ("digest", "name", "req_limit", "char_limit", "created", "char_quota")

_SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
    digest TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    req_limit INTEGER,
    char_limit INTEGER,
    created REAL NOT NULL,
    char_quota INTEGER
)"""
_COLUMNS = ", ".join(COLUMNS)


@dataclass(frozen=True)
class ApiKey:
    """A stored key: never the key itself, its digest (``id``: the digest's start)."""

    digest: str
    name: str
    req_limit: int | None  # requests per minute (None: the server's --req-limit)
    char_limit: int | None  # characters per text (None: the server's --max-chars)
    created: float
    char_quota: int | None = None  # characters a month on DeepL's routes (None: no limit)

    @property
    def id(self) -> str:
        return self.digest[:ID_LENGTH]


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A random key: 32 bytes from ``secrets``, URL-safe (43 characters), not beginning with
    "-" (a shell command's argument that did, ``aiayn keys remove -Fo9...``, reads as an
    option)."""
    while (key := secrets.token_urlsafe(32)).startswith("-"):
        pass
    return key


def check_key(key: object) -> str:
    """``key`` if it is one a client can send (any text but the empty one, as LibreTranslate
    takes any); ``ValueError`` otherwise."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key: {'empty' if key == '' else type(key).__name__}; give some text")
    return key


def key_warnings(key: str) -> list[str]:
    """What makes a given key weak or hard to send: short (guessable), spaces at either end
    or control characters (a client must send them exactly)."""
    found = []
    if len(key) < MIN_KEY_LENGTH:
        found.append(
            f"{len(key)} characters: shorter than {MIN_KEY_LENGTH}, it can be guessed (taken, as "
            "LibreTranslate takes it; `aiayn keys add` without --key makes a random 43)"
        )
    if key.strip() != key:
        found.append("spaces at either end: a client must send them too")
    if not key.isprintable():
        found.append("control characters: a client must send them too")
    return found


def _positive_or_none(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name}: {value!r}; give a whole number of at least 1 (or none)")
    return value


SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")  # the files SQLite keeps beside a database


def private_database(path: Path, create: bool = False) -> None:
    """Make the SQLite file ``path`` (created empty first where ``create``) and the journal
    files beside it readable and writable by their owner only (0600), whatever mode they had
    (a file made by hand, or by an older version, may be 0644: readable by every user of
    the host). SQLite gives the journal files it makes the database's mode. A file of
    another user, which this one may not change, keeps the mode its owner gave it."""
    if create:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    for file in (path, *(path.with_name(path.name + end) for end in SQLITE_COMPANIONS)):
        try:
            if os.stat(file).st_mode & 0o777 != 0o600:
                os.chmod(file, 0o600)
        except (FileNotFoundError, PermissionError):  # none, or not ours
            continue


class KeyStoreUnavailable(Exception):
    """The key database cannot be read now (locked past the wait, damaged, or gone): a key
    cannot be checked, so no request needing one is served."""


class KeyStore:
    """The keys of one SQLite file, created (with its directory) on first use, made readable
    by its owner only whenever it is opened (``private_database``). Safe to share between
    threads; another process (``aiayn keys add``) may write while a server reads. A file put
    in its place (removed and made again, or a backup moved in) is opened anew at the next
    lookup, so that keys it no longer holds stop working at once. ``timeout``: seconds a
    lookup waits for another process's lock."""

    def __init__(self, path: str | Path, create: bool = True, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        if not create and not self.path.is_file():
            raise FileNotFoundError(
                f"{self.path}: no API key database; make one with `aiayn keys add --db {self.path}`"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if create:
            private_database(self.path, create=True)
        self._lock = threading.Lock()
        try:
            self._db, self._file = self._open()
            self._db.execute(_SCHEMA)
            self._db.commit()
            columns = [row[1] for row in self._db.execute("PRAGMA table_info(api_keys)")]
            if set(COLUMNS[:-1]) <= set(columns) and "char_quota" not in columns:
                # a database made before keys had quotas (never another program's table)
                self._db.execute("ALTER TABLE api_keys ADD COLUMN char_quota INTEGER")
                self._db.commit()
                columns.append("char_quota")
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{self.path}: not an API key database ({e})") from None
        if not set(COLUMNS) <= set(columns):
            self._db.close()
            if "api_key" in columns:  # LibreTranslate's: the keys in plain text
                raise ValueError(
                    f"{self.path}: LibreTranslate's key database (keys in plain text), not "
                    f"aiayn's; import its keys with `aiayn keys import {self.path} --db "
                    f"{DEFAULT_DB}` and serve with --api-keys-db {DEFAULT_DB}"
                )
            raise ValueError(
                f"{self.path}: not an API key database (its table api_keys has columns "
                f"{', '.join(columns)}; aiayn's has {', '.join(COLUMNS)})"
            )

    def _open(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        """A connection to the file now at ``path`` (never creating one), and which file; the
        file (digests only, but a given key may be weak) made readable by its owner only."""
        private_database(self.path)
        uri = f"{self.path.resolve().as_uri()}?mode=rw"
        db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=self.timeout)
        stat = os.stat(self.path)
        return db, (stat.st_dev, stat.st_ino)

    def _current(self) -> sqlite3.Connection:
        """The connection, opened anew if another file took ``path``'s place (under
        ``_lock``)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            raise KeyStoreUnavailable(f"{self.path}: no such file (removed?)") from None
        if (stat.st_dev, stat.st_ino) != self._file:
            try:
                db, file = self._open()
            except sqlite3.Error as e:
                raise KeyStoreUnavailable(f"{self.path}: cannot open ({e})") from None
            self._db.close()
            self._db, self._file = db, file
        return self._db

    def add(
        self,
        key: str | None = None,
        *,
        name: str = "",
        req_limit: int | None = None,
        char_limit: int | None = None,
        char_quota: int | None = None,
    ) -> tuple[str, ApiKey]:
        """Store ``key`` (a new random one when None): (the key, its record). The key itself
        is returned here only; a key stored before is replaced (with the new limits)."""
        key = new_key() if key is None else check_key(key)
        record = ApiKey(
            digest(key),
            name,
            _positive_or_none("req_limit", req_limit),
            _positive_or_none("char_limit", char_limit),
            time.time(),
            _positive_or_none("char_quota", char_quota),
        )
        with self._lock, self._db:
            self._db.execute(
                f"INSERT OR REPLACE INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.digest, record.name, record.req_limit, record.char_limit,
                    record.created, record.char_quota,
                ),
            )  # fmt: skip
        return key, record

    def add_many(
        self, entries: list[tuple[str, int | None, int | None]], *, name: str = ""
    ) -> dict[str, list[ApiKey]]:
        """Store every (key, req_limit, char_limit) of ``entries`` in one transaction (all or
        none): {"new": records added, "updated": keys stored before whose limits changed
        (their name kept), "unchanged": keys stored before with these limits}. Storing the
        same entries again changes nothing."""
        for key, req_limit, char_limit in entries:  # every entry checked before any is written
            check_key(key)
            _positive_or_none("req_limit", req_limit)
            _positive_or_none("char_limit", char_limit)
        done: dict[str, list[ApiKey]] = {"new": [], "updated": [], "unchanged": []}
        with self._lock, self._db:
            for key, req_limit, char_limit in entries:
                row = self._db.execute(
                    f"SELECT {_COLUMNS} FROM api_keys WHERE digest = ?", (digest(key),)
                ).fetchone()
                if row is None:
                    record = ApiKey(digest(key), name, req_limit, char_limit, time.time())
                    self._db.execute(
                        f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                        (record.digest, name, req_limit, char_limit, record.created, None),
                    )
                    done["new"].append(record)
                    continue
                record = ApiKey(*row)
                if (record.req_limit, record.char_limit) == (req_limit, char_limit):
                    done["unchanged"].append(record)
                    continue
                self._db.execute(
                    "UPDATE api_keys SET req_limit = ?, char_limit = ? WHERE digest = ?",
                    (req_limit, char_limit, record.digest),
                )
                done["updated"].append(
                    dataclasses.replace(record, req_limit=req_limit, char_limit=char_limit)
                )
        return done

    def remove(self, key_or_id: str) -> ApiKey:
        """Remove a key, given whole or by its id; ``KeyError`` if none matches."""
        record = self.lookup(key_or_id) or self._by_id(key_or_id)
        if record is None:
            shown = (
                key_or_id
                if len(key_or_id) == ID_LENGTH
                else f"(id {digest(key_or_id)[:ID_LENGTH]})"
            )
            raise KeyError(f"no API key {shown} in {self.path} (see `aiayn keys list`)")
        with self._lock, self._db:
            self._db.execute("DELETE FROM api_keys WHERE digest = ?", (record.digest,))
        return record

    def lookup(self, key: str) -> ApiKey | None:
        """The record of ``key``, or None: found by its digest, then the digests compared in
        constant time (``hmac.compare_digest``); ``KeyStoreUnavailable`` if the database
        cannot be read now."""
        wanted = digest(key)
        with self._lock:
            try:
                row = (
                    self._current()
                    .execute(f"SELECT {_COLUMNS} FROM api_keys WHERE digest = ?", (wanted,))
                    .fetchone()
                )
            except sqlite3.Error as e:  # locked past the wait, damaged, not a key database
                raise KeyStoreUnavailable(f"{self.path}: {e}") from None
        if row is None or not hmac.compare_digest(row[0], wanted):
            return None
        return ApiKey(*row)

    def all(self) -> list[ApiKey]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created").fetchall()
        return [ApiKey(*row) for row in rows]

    def _by_id(self, key_id: str) -> ApiKey | None:
        if len(key_id) != ID_LENGTH or any(c not in "0123456789abcdef" for c in key_id):
            return None
        matches = [k for k in self.all() if k.id == key_id]
        return matches[0] if len(matches) == 1 else None

    def close(self) -> None:
        with self._lock:
            self._db.close()
