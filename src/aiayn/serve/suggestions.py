"""Suggested translations (LibreTranslate's ``/suggest``), kept in SQLite for whoever improves
the models: each the text, the suggestion, and the languages; the file readable by its owner
only (``private_database``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from aiayn.serve.keys import private_database


class SuggestionStore:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_database(self.path, create=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS suggestions (q TEXT NOT NULL, s TEXT NOT NULL, "
                "source TEXT NOT NULL, target TEXT NOT NULL, created REAL NOT NULL)"
            )
            self._db.commit()
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{self.path}: not a suggestions database ({e})") from None
        self._lock = threading.Lock()

    def add(self, q: str, s: str, source: str, target: str) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO suggestions (q, s, source, target, created) VALUES (?, ?, ?, ?, ?)",
                (q, s, source, target, time.time()),
            )

    def all(self) -> list[tuple[str, str, str, str]]:
        with self._lock:
            return self._db.execute(
                "SELECT q, s, source, target FROM suggestions ORDER BY rowid"
            ).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
