"""Glossaries made through DeepL's API, each API key's own, in SQLite (the standard library's
``sqlite3``) beside the keys: ``aiayn-keys-glossaries.db`` next to ``aiayn-keys.db`` (made
readable by its owner only), so that every server sharing the keys shares them; in memory
without ``--api-keys`` (this process's, gone at its end).

A glossary has a name and one dictionary per language pair (DeepL's ``/v3/glossaries``; one
made through ``/v2/glossaries`` has one), each an ordered list of (source term, target term)
entries, read from TSV or CSV as DeepL reads them (``read_entries``) and checked as aiayn's
terms are (``aiayn.data.terminology``): a term a translation can hold, and a source term
(ignoring case) with one target. A request's glossary is applied at decode time, as a
request's own terms are (``aiayn.serve.terminology``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiayn.data.terminology import GlossaryError, term_table

MAX_GLOSSARIES = 1000  # per API key (DeepL's limit for an account)
MAX_ENTRIES = 100_000  # per dictionary (a translation matches every term in one expression)
MAX_NAME = 1024  # characters of a glossary's name
FORMATS = ("tsv", "csv")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS glossaries (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        created REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS glossaries_owner ON glossaries (owner)",
    """CREATE TABLE IF NOT EXISTS dictionaries (
        glossary TEXT NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        entries TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (glossary, source, target)
    )""",
)


@dataclass(frozen=True)
class Dictionary:
    """A glossary's terms for one language pair (lower-case codes: "de", "en")."""

    source: str
    target: str
    count: int


@dataclass(frozen=True)
class GlossaryInfo:
    id: str
    name: str
    created: float  # seconds since the epoch
    dictionaries: tuple[Dictionary, ...]

    def dictionary(self, source: str, target: str) -> Dictionary | None:
        return next(
            (d for d in self.dictionaries if (d.source, d.target) == (source, target)), None
        )


Entries = list[tuple[str, str]]


def read_entries(text: str, entries_format: str, where: str = "entries") -> Entries:
    """The (source, target) entries of ``text`` in ``entries_format``: TSV (a term, a tab and
    its target on each line) or CSV (source, target and optionally the two languages on each
    row), blank lines skipped, each term's surrounding white space dropped; a line without two
    terms, a source term given twice (ignoring case, with two targets) or one that no
    translation can hold is a ``GlossaryError`` naming its line."""
    if entries_format not in FORMATS:
        raise GlossaryError(f"entries_format: {entries_format!r}; give one of {', '.join(FORMATS)}")
    text = text.removeprefix("\ufeff")
    if entries_format == "tsv":
        rows = [line.split("\t") for line in text.splitlines()]
    else:
        try:
            rows = list(csv.reader(io.StringIO(text)))
        except csv.Error as e:
            raise GlossaryError(f"{where}: not CSV ({e})") from None
    out: Entries = []
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, 1):
        if not any(cell.strip() for cell in row):
            continue
        if entries_format == "tsv" and len(row) != 2:
            why = "no tab between two terms" if len(row) < 2 else "more than one tab"
            raise GlossaryError(f"{where}: line {number}: {why}")
        if entries_format == "csv" and len(row) not in (2, 4):
            raise GlossaryError(
                f"{where}: row {number}: {len(row)} fields; give source,target (and "
                "optionally source_lang,target_lang)"
            )
        source, target = row[0].strip(), row[1].strip()
        if source in seen:
            raise GlossaryError(
                f"{where}: line {number}: the source term {source!r} is on line "
                f"{seen[source]} already"
            )
        seen[source] = number
        out.append((source, target))
    if not out:
        raise GlossaryError(f"{where}: no entries")
    if len(out) > MAX_ENTRIES:
        raise GlossaryError(f"{where}: {len(out)} entries; at most {MAX_ENTRIES}")
    term_table(dict(out), where)  # terms a translation can hold, one target each
    return out


def entries_tsv(entries: Entries) -> str:
    """``entries`` as DeepL gives them back: a line each, source and target between a tab."""
    return "\n".join(f"{source}\t{target}" for source, target in entries)


class GlossaryStore:
    """The glossaries in the SQLite file at ``path`` (made with its directory, readable by
    its owner only), or in memory when ``path`` is None. Safe to share between threads; every
    method takes the ``owner`` (an API key's digest; "" without keys) whose glossaries it
    sees: another key's glossary is as absent as one never made."""

    def __init__(self, path: str | Path | None, timeout: float = 10.0) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        if self.path is None:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:  # terms of a key's users: not for other users of the machine to read
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=timeout)
        try:
            with self._db:
                for statement in _SCHEMA:
                    self._db.execute(statement)
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{self.path}: not a glossary database ({e})") from None

    def create(
        self, owner: str, name: str, dictionaries: list[tuple[str, str, Entries]]
    ) -> GlossaryInfo:
        """A new glossary of ``dictionaries`` ((source, target, entries) each, one per pair);
        ``ValueError`` naming the limit when the owner has ``MAX_GLOSSARIES`` already."""
        glossary = str(uuid.uuid4())
        with self._lock, self._db:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM glossaries WHERE owner = ?", (owner,)
            ).fetchone()
            if count >= MAX_GLOSSARIES:
                raise ValueError(
                    f"{count} glossaries already; at most {MAX_GLOSSARIES} per API key: delete one"
                )
            self._db.execute(
                "INSERT INTO glossaries (id, owner, name, created) VALUES (?, ?, ?, ?)",
                (glossary, owner, name, time.time()),
            )
            for source, target, entries in dictionaries:
                self._put(glossary, source, target, entries)
        return self.get(owner, glossary)

    def _put(self, glossary: str, source: str, target: str, entries: Entries) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO dictionaries (glossary, source, target, entries, count) "
            "VALUES (?, ?, ?, ?, ?)",
            (glossary, source, target, json.dumps(entries, ensure_ascii=False), len(entries)),
        )

    def all(self, owner: str) -> list[GlossaryInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM glossaries WHERE owner = ? ORDER BY created", (owner,)
            ).fetchall()
        return [info for (glossary,) in rows if (info := self.get(owner, glossary)) is not None]

    def get(self, owner: str, glossary: str) -> GlossaryInfo | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, name, created FROM glossaries WHERE id = ? AND owner = ?",
                (glossary, owner),
            ).fetchone()
            if row is None:
                return None
            pairs = self._db.execute(
                "SELECT source, target, count FROM dictionaries WHERE glossary = ? ORDER BY rowid",
                (glossary,),
            ).fetchall()
        return GlossaryInfo(*row, tuple(Dictionary(*pair) for pair in pairs))

    def entries(self, owner: str, glossary: str, source: str, target: str) -> Entries | None:
        """The entries of ``glossary``'s dictionary for the pair (None: no such glossary of
        ``owner``'s, or no such dictionary in it)."""
        with self._lock:
            row = self._db.execute(
                "SELECT d.entries FROM dictionaries d JOIN glossaries g ON g.id = d.glossary "
                "WHERE g.id = ? AND g.owner = ? AND d.source = ? AND d.target = ?",
                (glossary, owner, source, target),
            ).fetchone()
        return None if row is None else [tuple(pair) for pair in json.loads(row[0])]

    def rename(self, owner: str, glossary: str, name: str) -> bool:
        with self._lock, self._db:
            changed = self._db.execute(
                "UPDATE glossaries SET name = ? WHERE id = ? AND owner = ?",
                (name, glossary, owner),
            ).rowcount
        return changed == 1

    def _owns(self, owner: str, glossary: str) -> bool:
        """Whether ``owner`` has ``glossary`` (under the lock)."""
        return (
            self._db.execute(
                "SELECT 1 FROM glossaries WHERE id = ? AND owner = ?", (glossary, owner)
            ).fetchone()
            is not None
        )

    def put(
        self, owner: str, glossary: str, source: str, target: str, entries: Entries, merge: bool
    ) -> bool:
        """Set ``glossary``'s dictionary for the pair to ``entries`` (``merge``: over the
        entries it has, each source term's target replaced or added); False if the owner has
        no such glossary."""
        with self._lock, self._db:
            if not self._owns(owner, glossary):
                return False
            if merge:
                row = self._db.execute(
                    "SELECT entries FROM dictionaries WHERE glossary = ? AND source = ? AND "
                    "target = ?",
                    (glossary, source, target),
                ).fetchone()
                merged = dict(tuple(pair) for pair in json.loads(row[0])) if row else {}
                merged.update(entries)
                entries = list(merged.items())
                if len(entries) > MAX_ENTRIES:
                    raise GlossaryError(f"entries: {len(entries)}; at most {MAX_ENTRIES}")
                term_table(merged, "entries")  # a term given anew in another case: refused
            self._put(glossary, source, target, entries)
        return True

    def delete(self, owner: str, glossary: str) -> bool:
        with self._lock, self._db:
            changed = self._db.execute(
                "DELETE FROM glossaries WHERE id = ? AND owner = ?", (glossary, owner)
            ).rowcount
            if changed:
                self._db.execute("DELETE FROM dictionaries WHERE glossary = ?", (glossary,))
        return changed == 1

    def delete_dictionary(self, owner: str, glossary: str, source: str, target: str) -> bool:
        with self._lock, self._db:
            if not self._owns(owner, glossary):
                return False
            changed = self._db.execute(
                "DELETE FROM dictionaries WHERE glossary = ? AND source = ? AND target = ?",
                (glossary, source, target),
            ).rowcount
        return changed == 1

    def close(self) -> None:
        with self._lock:
            self._db.close()


def store_path(keys_db: str | Path) -> Path:
    """Where the glossaries of the keys in ``keys_db`` live: beside it."""
    keys_db = Path(keys_db)
    return keys_db.with_name(keys_db.stem + "-glossaries.db")
