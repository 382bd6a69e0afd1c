"""Characters each API key translated on DeepL's routes, counted a calendar month (UTC) at a
time in the keys' own SQLite file (``aiayn.serve.keys``), so that every server sharing the
file counts one key's characters together; a key's ``char_quota`` bounds them (DeepL's 456).

A request's characters are charged before it is translated, in one statement that adds them
only while the month's count stays within the quota (two servers charging at once cannot pass
it together), and refunded if the translation then fails.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

from aiayn.serve.keys import ApiKey, KeyStoreUnavailable

# the limit /v2/usage names for a key without a quota: DeepL's own for an account without one
UNLIMITED = 10**12

_SCHEMA = """CREATE TABLE IF NOT EXISTS character_usage (
    digest TEXT NOT NULL,
    period TEXT NOT NULL,
    characters INTEGER NOT NULL,
    PRIMARY KEY (digest, period)
)"""


def period(now: dt.datetime | None = None) -> tuple[str, dt.datetime, dt.datetime]:
    """The counting period ``now`` (default: this moment) falls in: its name ("2026-03"),
    start and end (the calendar month, UTC)."""
    now = now or dt.datetime.now(dt.UTC)
    start = dt.datetime(now.year, now.month, 1, tzinfo=dt.UTC)
    end = dt.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=dt.UTC)
    return f"{now.year:04d}-{now.month:02d}", start, end


class CharacterUsage:
    """The character counts in the key database at ``path`` (its table made on first use).
    Each call opens the file anew (a file put in its place is read at once) and waits up to
    ``timeout`` seconds for another process's lock; ``KeyStoreUnavailable`` if it cannot."""

    def __init__(self, path: str | Path, timeout: float = 2.0) -> None:
        self.path, self.timeout = Path(path), timeout

    def _run(self, sql: str, args: tuple) -> tuple[int, tuple | None]:
        """Run one statement in its own transaction: (rows changed, the first row)."""
        try:
            uri = f"{self.path.resolve().as_uri()}?mode=rw"
            db = sqlite3.connect(uri, uri=True, timeout=self.timeout)
        except sqlite3.Error as e:
            raise KeyStoreUnavailable(f"{self.path}: cannot open ({e})") from None
        try:
            with db:
                db.execute(_SCHEMA)
                cursor = db.execute(sql, args)
                return cursor.rowcount, cursor.fetchone()
        except sqlite3.Error as e:  # locked past the wait, damaged, gone
            raise KeyStoreUnavailable(f"{self.path}: {e}") from None
        finally:
            db.close()

    def charge(self, key: ApiKey, characters: int) -> bool:
        """Add ``characters`` to ``key``'s count this month, unless that would pass its quota:
        whether they were added."""
        quota = key.char_quota
        if quota is not None and characters > quota:
            return False
        within = "" if quota is None else " WHERE characters + excluded.characters <= ?"
        changed, _ = self._run(
            "INSERT INTO character_usage (digest, period, characters) VALUES (?, ?, ?) "
            "ON CONFLICT (digest, period) DO UPDATE SET "
            "characters = characters + excluded.characters" + within,
            (key.digest, period()[0], characters) + (() if quota is None else (quota,)),
        )
        return changed == 1

    def refund(self, key: ApiKey, characters: int) -> None:
        """Take back ``characters`` charged this month (a translation that failed)."""
        self._run(
            "UPDATE character_usage SET characters = MAX(0, characters - ?) "
            "WHERE digest = ? AND period = ?",
            (characters, key.digest, period()[0]),
        )

    def used(self, key: ApiKey) -> int:
        """``key``'s characters this month."""
        _, row = self._run(
            "SELECT characters FROM character_usage WHERE digest = ? AND period = ?",
            (key.digest, period()[0]),
        )
        return row[0] if row else 0
