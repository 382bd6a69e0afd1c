"""A token store: a corpus split encoded once, then read memory-mapped.

The layout follows the flat id arrays of nanoGPT's ``train.bin`` and the offsets of
fairseq's memory-mapped indexed datasets, with plain numpy files so that anything can read
them. A split's directory holds::

    meta.json           format version, the key (tokenizer and input files), the fields,
                        the example count, the length buckets, each file's size and SHA-256,
                        and the SHA-256 of the rest of meta.json itself
    FIELD.ids           every example's token ids, concatenated, no specials
                        (uint16 when the vocabulary fits, else uint32; little-endian)
    FIELD.offsets       examples + 1 entries: example i is ids[offsets[i]:offsets[i + 1]]
                        (uint32 when the field has fewer than 2**32 tokens, else int64)
    order.idx           the examples sorted by length, stably (int32, or int64 past 2**31):
                        the bucket of length L is one slice of it, listed in meta.json

A parallel corpus has the fields ``src`` and ``tgt``, and an example's length is its longest
side plus the eos / bos ``collate`` adds; running text has ``text``, one example a line.

Writing streams: examples arrive in chunks, their ids are appended to the files, and only
the lengths (4 bytes an example) stay in memory to sort at the end. The files go into a
temporary sibling directory, ``meta.json`` last, fsynced, then renamed into place, so a write
killed at any point leaves nothing that loads (``open_store`` needs ``meta.json`` and every
file at its recorded size). The key names the tokenizer's SHA-256 and each input file's size
and SHA-256; ``open_store`` refuses a store whose key differs, so a changed tokenizer or
corpus is encoded again, never silently reused.

The content is checked too, at every open (``aiayn.data.store_check``): each file's SHA-256,
taken as it was written, against the bytes on disk, and every id against the vocabulary. A
store that differs is derived data gone bad: ``open_or_write`` says which file and encodes
the split again from the corpus, as it does for a changed key.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from aiayn.data import store_check
from aiayn.errors import UserError, note
from aiayn.fileio import fsync_directory

FORMAT = "aiayn-token-store"
VERSION = 1
META = "meta.json"
ORDER = "order.idx"
TMP_MARK = ".tmp-"


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 where every id fits (a vocabulary of at most 65,536), else uint32."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def input_key(paths: Iterable[Path], tokenizer_sha256: str, **extra) -> dict:
    """What a store was made from: the tokenizer and each input file (name, size, SHA-256)."""
    files = [
        {"name": Path(p).name, "size": Path(p).stat().st_size, "sha256": file_sha256(Path(p))}
        for p in paths
    ]
    return {"tokenizer_sha256": tokenizer_sha256, "files": files, **extra}


@dataclass(frozen=True)
class Chunk:
    """Encoded examples: per field, one id list an example."""

    fields: dict[str, list[list[int]]]


def _flat(seqs: list[list[int]], vocab_size: int, dtype: np.dtype):
    """The ids of ``seqs`` in one array of ``dtype``, and each sequence's length."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    flat = np.fromiter(chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
    if flat.size and not 0 <= int(flat.min()) <= int(flat.max()) < vocab_size:
        bad = int(flat.max()) if int(flat.max()) >= vocab_size else int(flat.min())
        raise ValueError(f"token id {bad} is outside the vocabulary (0..{vocab_size - 1})")
    return flat.astype(dtype), lengths


class StoreWriter:
    """Appends chunks to a new store in a temporary directory; ``commit`` puts it in place."""

    def __init__(self, directory: Path, key: dict, fields: tuple[str, ...], vocab_size: int):
        self.directory = Path(directory)
        self.key, self.fields, self.dtype = key, fields, id_dtype(vocab_size)
        self.vocab_size = vocab_size
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.directory.parent / f".{self.directory.name}{TMP_MARK}{os.getpid()}"
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()
        self.files = {f: open(self.tmp / f"{f}.ids", "wb") for f in fields}
        self.offset_files = {f: open(self.tmp / f"{f}.offsets", "wb") for f in fields}
        # each file's SHA-256 over the bytes as they are written, not as they read back
        self.digests = {
            name: hashlib.sha256() for f in fields for name in (f"{f}.ids", f"{f}.offsets")
        }
        self.tokens = dict.fromkeys(fields, 0)
        for f in fields:
            self._write(self.offset_files[f], f"{f}.offsets", np.zeros(1, np.int64).tobytes())
        self.lengths: list[np.ndarray] = []  # the sort key of each chunk's examples
        self.n = 0

    def append(self, chunk: Chunk) -> None:
        key = None
        for name in self.fields:
            flat, lengths = _flat(chunk.fields[name], self.vocab_size, self.dtype)
            self._write(self.files[name], f"{name}.ids", flat.tobytes())
            ends = self.tokens[name] + np.cumsum(lengths)
            self._write(self.offset_files[name], f"{name}.offsets", ends.astype("<i8").tobytes())
            self.tokens[name] += int(flat.size)
            key = lengths if key is None else np.maximum(key, lengths)
        self.lengths.append(np.minimum(key + 1, np.iinfo(np.uint32).max).astype(np.uint32))
        self.n += len(key)

    def _write(self, file, name: str, data: bytes) -> None:
        file.write(data)
        self.digests[name].update(data)

    def commit(self) -> Path:
        """Sort by length, write ``meta.json``, fsync, and rename the store into place."""
        for f in (*self.files.values(), *self.offset_files.values()):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        offset_dtypes = {f: self._narrow_offsets(f) for f in self.fields}
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.uint32)
        order = np.argsort(lengths, kind="stable")  # a radix sort on integers
        order = order.astype(np.int32 if self.n < 2**31 else np.int64)
        self.digests[ORDER] = hashlib.sha256()
        with open(self.tmp / ORDER, "wb") as f:
            self._write(f, ORDER, order.tobytes())
            os.fsync(f.fileno())
        values, counts = np.unique(lengths, return_counts=True)
        files = {p.name: p.stat().st_size for p in sorted(self.tmp.iterdir())}
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "key": self.key,
            "examples": self.n,
            "fields": {
                f: {"dtype": self.dtype.str, "offsets": offset_dtypes[f], "tokens": self.tokens[f]}
                for f in self.fields
            },
            "order_dtype": order.dtype.str,
            "buckets": [[int(v), int(c)] for v, c in zip(values, counts, strict=True)],
            "files": files,
            store_check.DIGESTS: {name: self.digests[name].hexdigest() for name in files},
        }
        meta[store_check.SELF] = store_check.meta_digest(meta)
        with open(self.tmp / META, "w") as f:
            json.dump(meta, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        old = self.directory.parent / f".{self.directory.name}.old-{os.getpid()}"
        if self.directory.exists():
            os.replace(self.directory, old)
        os.replace(self.tmp, self.directory)
        fsync_directory(self.directory.parent)
        shutil.rmtree(old, ignore_errors=True)
        return self.directory

    def _narrow_offsets(self, field: str, block: int = 1 << 22) -> str:
        """Rewrite the field's int64 offsets as uint32 where its tokens fit (4 bytes an
        example less on disk), a block at a time; returns the dtype kept."""
        if self.tokens[field] >= 1 << 32:
            return "<i8"
        wide = self.tmp / f"{field}.offsets"
        narrow = self.tmp / f"{field}.offsets.u4"
        self.digests[wide.name] = hashlib.sha256()  # of the narrow bytes that replace them
        with open(wide, "rb") as src, open(narrow, "wb") as dst:
            while data := src.read(block * 8):
                self._write(dst, wide.name, np.frombuffer(data, "<i8").astype("<u4").tobytes())
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(narrow, wide)
        return "<u4"

    def abort(self) -> None:
        for f in (*self.files.values(), *self.offset_files.values()):
            if not f.closed:
                f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_store(
    directory: Path, key: dict, fields: tuple[str, ...], vocab_size: int, chunks: Iterable[Chunk]
) -> Path:
    """Write the store of ``chunks`` to ``directory`` (all or nothing)."""
    writer = StoreWriter(directory, key, fields, vocab_size)
    try:
        for chunk in chunks:
            writer.append(chunk)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def remove_partial_writes(parent: Path) -> None:
    """Delete the temporary directories that killed writes left in ``parent``."""
    if Path(parent).is_dir():
        for p in Path(parent).iterdir():
            if p.name.startswith(".") and (TMP_MARK in p.name or ".old-" in p.name):
                shutil.rmtree(p, ignore_errors=True)


class TokenStore:
    """A store opened read-only: each field's ids and offsets as memory maps.

    ``release()`` drops the pages this process has read from its resident set (they stay in
    the page cache): a long epoch touches the whole store, and without it the process's RSS
    would grow to the store's size.
    """

    def __init__(self, directory: Path, meta: dict) -> None:
        self.directory, self.meta = Path(directory), meta
        self.n = int(meta["examples"])
        self._maps: list[mmap.mmap] = []
        self.ids = {f: self._map(f"{f}.ids", spec["dtype"]) for f, spec in meta["fields"].items()}
        self.offsets = {
            f: self._map(f"{f}.offsets", spec.get("offsets", "<i8"))
            for f, spec in meta["fields"].items()
        }
        self.order = self._map(ORDER, meta["order_dtype"])
        buckets = np.asarray(meta["buckets"], dtype=np.int64).reshape(-1, 2)
        self.bucket_lengths, self.bucket_counts = buckets[:, 0], buckets[:, 1]
        self.bucket_starts = np.concatenate([[0], np.cumsum(self.bucket_counts)[:-1]])

    def _map(self, name: str, dtype: str) -> np.ndarray:
        path = self.directory / name
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=np.dtype(dtype))
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._maps.append(mm)
        return np.frombuffer(mm, dtype=np.dtype(dtype))

    def lengths(self, field: str, index: np.ndarray) -> np.ndarray:
        off = self.offsets[field]
        return off[index + 1].astype(np.int64) - off[index]

    def sequences(self, field: str, index: np.ndarray) -> list[np.ndarray]:
        off, ids = self.offsets[field], self.ids[field]
        return [ids[off[i] : off[i + 1]] for i in index]

    def release(self) -> None:
        for mm in self._maps:
            if hasattr(mmap, "MADV_DONTNEED"):
                mm.madvise(mmap.MADV_DONTNEED)

    @property
    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.iterdir())


def read_meta(directory: Path) -> dict | None:
    """The store's meta.json if the store is whole (every file at its recorded size)."""
    meta, problem = _whole(Path(directory))
    return meta if not problem else None


ABSENT = "absent"
OUTDATED = "made from other inputs"  # another key, format or version: encoded again quietly
OLDER = "written by an earlier aiayn, which recorded no SHA-256 of its files to check it by"


def _whole(directory: Path) -> tuple[dict | None, str]:
    """(meta.json, "") of a store whose files all have their recorded size; else (None, why)."""
    try:
        text = (directory / META).read_text()
    except FileNotFoundError:
        return None, ABSENT
    except OSError as e:
        return None, f"{META} cannot be read ({e.strerror or e})"
    try:
        meta = json.loads(text)
    except ValueError:
        return None, f"{META} is not JSON"
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return None, f"{META} is not a token store's"
    if meta.get("version") != VERSION:
        return None, OUTDATED
    for name, size in meta.get("files", {}).items():
        path = directory / name
        if not path.is_file():
            return None, f"{name} is missing"
        if path.stat().st_size != size:
            return None, f"{name} has {path.stat().st_size} bytes, not the {size} recorded"
    return meta, ""


def examine(directory: Path, key: dict, vocab_size: int | None = None) -> tuple[dict | None, str]:
    """(meta.json, "") of the store in ``directory`` if it is whole, was made from ``key`` and
    holds the bytes it was written with; else (None, why): ``ABSENT``, ``OUTDATED``,
    ``OLDER``, or what is damaged. With ``vocab_size``, an id outside the vocabulary is a
    ``UserError`` naming the file and the examples (``store_check.damage``)."""
    directory = Path(directory)
    meta, problem = _whole(directory)
    if meta is None:
        return None, problem
    if meta.get("key") != key:
        return None, OUTDATED
    if store_check.DIGESTS not in meta:
        return None, OLDER
    problem = store_check.damage(directory, meta, vocab_size)
    return (None, problem) if problem else (meta, "")


def open_store(directory: Path, key: dict, vocab_size: int | None = None) -> TokenStore | None:
    """The store in ``directory`` if it is whole, was made from ``key`` and has the content it
    was written with (``examine``); else None."""
    meta, _ = examine(directory, key, vocab_size)
    return None if meta is None else TokenStore(directory, meta)


def _stamp(directory: Path) -> tuple | None:
    """What changes when a store is written into ``directory`` (meta.json's inode and time)."""
    try:
        st = (Path(directory) / META).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def open_or_write(
    directory: Path, key: dict, write, writer: bool, vocab_size: int | None = None
) -> TokenStore:
    """The store in ``directory`` made from ``key``, its content checked (``examine``). When
    it is missing, outdated or damaged, the ``writer`` process writes it
    (``write(directory)``; a damaged one is named on stderr first) and the others wait for
    it, checking it again only once something new is in place."""
    directory = Path(directory)
    if writer:
        meta, problem = examine(directory, key, vocab_size)
        if meta is None:
            if problem not in (ABSENT, OUTDATED):
                note(f"token store {directory}: {problem}; encoding the split again")
            write(directory)
            meta, problem = examine(directory, key, vocab_size)
            if meta is None:
                raise UserError(
                    f"token store {directory}: just written, and already {problem}: the disk "
                    "or the memory of this machine is failing; check it, or write the run "
                    "directory elsewhere"
                )
        return TokenStore(directory, meta)
    checked = None  # the stamp of the last store found missing, outdated or damaged
    while True:
        stamp = _stamp(directory)
        if stamp is not None and stamp != checked:
            store = open_store(directory, key, vocab_size)
            if store is not None:
                return store
            checked = stamp
        time.sleep(0.5)  # the writer process is writing it
