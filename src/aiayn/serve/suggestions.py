"""Suggested translations (LibreTranslate's ``/suggest``), kept in SQLite for whoever improves
the models: each the text, the suggestion, and the languages; at most ``max_rows`` of them,
the oldest removed first (each row is bounded by the route: texts within ``--max-chars``,
languages the server serves); the file readable by its owner only (``private_database``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from aiayn.serve.keys import private_database


class SuggestionStore:
    def __init__(self, path: str | Path, max_rows: int = 10_000) -> None:
        self.path, self.max_rows = Path(path), max_rows
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
        """Store a suggestion and remove the oldest beyond ``max_rows``, in one transaction.
        SQLite gives a new row the largest rowid yet plus one, and rows go oldest first, so
        the newest ``max_rows`` are those within ``max_rows`` of the new one."""
        with self._lock, self._db:
            row = self._db.execute(
                "INSERT INTO suggestions (q, s, source, target, created) VALUES (?, ?, ?, ?, ?)",
                (q, s, source, target, time.time()),
            ).lastrowid
            self._db.execute("DELETE FROM suggestions WHERE rowid <= ?", (row - self.max_rows,))

    def all(self) -> list[tuple[str, str, str, str]]:
        with self._lock:
            return self._db.execute(
                "SELECT q, s, source, target FROM suggestions ORDER BY rowid"
            ).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
