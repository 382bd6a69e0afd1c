"""LibreTranslate's API key database, read for ``aiayn keys import``.

LibreTranslate (``libretranslate/api_keys.py``) keeps its keys in plain text in SQLite:
table ``api_keys`` with columns ``api_key`` (TEXT, the primary key), ``req_limit`` (INTEGER
NOT NULL: requests per minute) and, since 1.5.5, ``char_limit`` (INTEGER, NULL: the server's
``--char-limit``); older files lack that column. The file is opened read-only and every row
is checked before anything is written elsewhere: a row aiayn cannot take stops the import,
named by its position and its key's id (never the key).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from aiayn.serve.keys import ID_LENGTH, digest

SHOWN_PROBLEMS = 5  # rows named in the error; the rest counted


@dataclass(frozen=True)
class LibreTranslateKey:
    """One key of LibreTranslate's database, its limits as aiayn reads them."""

    key: str
    req_limit: int  # requests per minute
    char_limit: int | None  # characters per text (None: the server's)


def read_libretranslate_keys(path: str | Path) -> list[LibreTranslateKey]:
    """The keys of LibreTranslate's key database at ``path``, in the file's order;
    ``ValueError`` naming the file where it is no such database or a row cannot be taken
    (a ``req_limit`` below 1, a ``char_limit`` of 0 or below -1, a key that is no text)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (LibreTranslate keeps its keys in db/api_keys.db)")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise ValueError(f"{path}: cannot open it ({e})") from None
    try:
        try:
            columns = [row[1] for row in db.execute("PRAGMA table_info(api_keys)")]
            if not columns:
                tables = [
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                ]
        except sqlite3.DatabaseError as e:  # "file is not a database"
            raise ValueError(f"{path}: not a LibreTranslate key database ({e})") from None
        if not columns:
            held = f"its tables: {', '.join(tables)}" if tables else "it holds no table"
            raise ValueError(
                f"{path}: not a LibreTranslate key database (no table api_keys; {held})"
            )
        if "digest" in columns:
            raise ValueError(
                f"{path}: aiayn's own key database (digests, not keys); serve it with "
                "--api-keys-db, there is nothing to import"
            )
        missing = [c for c in ("api_key", "req_limit") if c not in columns]
        if missing:
            raise ValueError(
                f"{path}: not a LibreTranslate key database (its table api_keys lacks "
                f"{', '.join(missing)}; it has {', '.join(columns)})"
            )
        char_limit = "char_limit" if "char_limit" in columns else "NULL"  # before 1.5.5: none
        try:
            rows = db.execute(f"SELECT api_key, req_limit, {char_limit} FROM api_keys").fetchall()
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{path}: cannot read its keys ({e})") from None
    finally:
        db.close()
    return _checked(path, rows)


def _checked(path: Path, rows: list[tuple]) -> list[LibreTranslateKey]:
    keys: dict[str, LibreTranslateKey] = {}
    first_row: dict[str, int] = {}
    problems = []
    for number, (key, req_limit, char_limit) in enumerate(rows, 1):
        where = f"row {number}"
        if not isinstance(key, str) or not key:
            what = "empty" if key == "" else f"not text ({type(key).__name__})"
            problems.append(f"{where}: api_key {what}")
            continue
        where += f" (key id {digest(key)[:ID_LENGTH]})"
        if isinstance(req_limit, bool) or not isinstance(req_limit, int) or req_limit < 1:
            problems.append(
                f"{where}: req_limit {req_limit!r}; aiayn takes a whole number of requests "
                "per minute of at least 1"
            )
            continue
        if char_limit == -1:  # LibreTranslate's "no limit": the server's --char-limit
            char_limit = None
        if char_limit is not None and (not isinstance(char_limit, int) or char_limit < 1):
            problems.append(
                f"{where}: char_limit {char_limit!r}; aiayn takes a whole number of at least "
                "1, -1 or null (the server's)"
            )
            continue
        entry = LibreTranslateKey(key, req_limit, char_limit)
        if key in keys and keys[key] != entry:
            problems.append(f"{where}: the key of row {first_row[key]} again, with other limits")
            continue
        keys.setdefault(key, entry)
        first_row.setdefault(key, number)
    if problems:
        more = len(problems) - SHOWN_PROBLEMS
        shown = "; ".join(problems[:SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
        raise ValueError(
            f"{path}: {len(problems)} of {len(rows)} rows cannot be imported, so none was: {shown}"
        )
    return list(keys.values())
