"""The content check of a token store: each file's digest, and every id within the vocabulary.

A store is trusted for days by several processes, so its size is not enough: a flipped bit
keeps the size and trains a different model. The writer records each file's SHA-256 in
``meta.json`` (taken over the bytes as it wrote them), and the SHA-256 of ``meta.json``'s
own content; every open reads each file once, in blocks (memory stays flat whatever the
store's size), and compares. The same pass takes the largest id of each block of an ids
file, so an id outside the vocabulary is found by name (file, field, examples) before a
batch reaches the embedding.

Why SHA-256: it is in the standard library (no new dependency), the digest the rest of
aiayn already records (corpus files, weights, conversions), and the fastest hashlib digest
on CPUs with the SHA extensions (x86 since Ice Lake / Zen, Arm v8.2): 1.8 GB/s on one core of
the 2-core Xeon the benchmarks run on, where blake2b does 0.93 GB/s and md5 0.75 GB/s
(xxhash's xxh3_128 does 22 GB/s, but is a dependency that this check does not need). The
files are checked on one thread each (hashlib and numpy leave the GIL), so a store's two ids
files take one file's time on two cores: the 4.5M-pair WMT14-sized store (740 MB) is
checked in 0.26 s from the page cache with both cores free (2.9 GB/s; 0.49 s on one thread),
0.61 s in bench/scale.py's record with the cores shared (``store.check_s`` in
bench/results/scale.jsonl). That is small beside the time to the first step (about 5 s), so
the whole store is checked when it is opened rather than each file before its first use.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.errors import UserError

DIGESTS = "sha256"  # meta.json: {file name: SHA-256 of its bytes}
SELF = "meta_sha256"  # meta.json: SHA-256 of the rest of meta.json (``meta_digest``)
BLOCK = 1 << 20  # bytes read at a time: 1 MB stays in a core's cache (16 MB halves the rate)


def meta_digest(meta: dict) -> str:
    """SHA-256 of ``meta`` without its own digest, as canonical JSON."""
    rest = {k: v for k, v in meta.items() if k != SELF}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Scan:
    """One file read through: its SHA-256 and, for an ids file checked against a vocabulary,
    the token positions of the first and last id outside it, how many there are, the
    largest."""

    sha256: str
    first_bad: int = -1
    last_bad: int = -1
    n_bad: int = 0
    largest: int = 0


def scan(path: Path, dtype: np.dtype | None = None, vocab_size: int | None = None) -> Scan:
    """Read ``path`` in blocks: its SHA-256, and (``dtype``, ``vocab_size``) its ids that are
    ``vocab_size`` or more. One block's buffer is all the memory it takes."""
    digest = hashlib.sha256()
    buffer = bytearray(BLOCK)
    view = memoryview(buffer)
    first = last = -1
    n_bad = largest = 0
    position = 0  # ids before this block
    with open(path, "rb") as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
            if vocab_size is None or dtype is None:
                continue
            ids = np.frombuffer(buffer, dtype, count=n // dtype.itemsize)
            top = int(ids.max()) if ids.size else 0
            if top >= vocab_size:  # rare: only then is each bad position looked for
                bad = np.flatnonzero(ids >= vocab_size)
                first = position + int(bad[0]) if first < 0 else first
                last, n_bad = position + int(bad[-1]), n_bad + len(bad)
                largest = max(largest, top)
            position += ids.size
    return Scan(digest.hexdigest(), first, last, n_bad, largest)


def damage(directory: Path, meta: dict, vocab_size: int | None = None) -> str:
    """What differs between the store in ``directory`` and its ``meta.json`` ("" when
    nothing): meta.json's own digest, or a file of other bytes (their sizes are checked
    before, by ``store.examine``). With
    ``vocab_size``, an ids file holding an id outside the vocabulary, in a store whose bytes
    are those written, is a ``UserError`` naming the file and the examples."""
    directory = Path(directory)
    if meta.get(SELF) != meta_digest(meta):
        return "meta.json does not match the SHA-256 it records of itself"
    recorded = meta.get(DIGESTS)
    files = meta.get("files", {})
    if not isinstance(recorded, dict) or set(recorded) != set(files):
        return "meta.json records no SHA-256 for some files"
    ids_of = {f"{f}.ids": (f, np.dtype(spec["dtype"])) for f, spec in meta["fields"].items()}
    names = sorted(files, key=lambda n: -files[n])  # the largest first, one thread each

    def read(name: str) -> Scan:
        field, dtype = ids_of.get(name, (None, None))
        return scan(directory / name, dtype, vocab_size if field else None)

    workers = max(1, min(len(names), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="aiayn-store-check") as pool:
        scans = dict(zip(names, pool.map(read, names), strict=True))
    for name in names:
        if scans[name].sha256 != recorded[name]:
            return f"{name} does not match the SHA-256 recorded in meta.json"
    for name, (field, _) in ids_of.items():
        if scans[name].n_bad:
            raise out_of_range(directory, meta, field, scans[name], vocab_size)
    return ""


def out_of_range(directory: Path, meta: dict, field: str, found: Scan, vocab_size) -> UserError:
    """The error for ids of ``field`` outside the vocabulary: the file, the examples."""
    spec = meta["fields"][field]
    offsets = np.memmap(directory / f"{field}.offsets", dtype=np.dtype(spec["offsets"]), mode="r")
    first, last = (
        int(np.searchsorted(offsets, p, side="right")) - 1
        for p in (found.first_bad, found.last_bad)
    )
    examples = f"example {first}" if first == last else f"examples {first} to {last}"
    return UserError(
        f"{directory / f'{field}.ids'}: {found.n_bad} {field} token id(s) outside the "
        f"vocabulary of {vocab_size} (the largest {found.largest}), in {examples} of "
        f"{meta['examples']} (counted from 0, in the order of the split's files): this store was "
        "not encoded with the run's tokenizer; delete "
        f"{directory} and start again to encode the split from the corpus"
    )
