"""Corpus ``libreoffice-help-de-en``: LibreOffice help paragraphs, German and English.

Source: the rendered help pages of the Debian packages ``libreoffice-help-de`` and
``libreoffice-help-en-us`` (``usr/share/libreoffice/help/{de,en-US}``), fetched with
``apt-get download`` and unpacked with ``dpkg-deb``, so the corpus rebuilds byte for byte
from the Debian archive.

License: MPL-2.0, like its source (see ``data/libreoffice-help-de-en/README.md``).

Alignment: each page's ``par_id...``/``hd_id...`` elements are read (hidden platform
variants skipped, the ``default...`` one kept) and a German paragraph is paired with the
English one of the same (page path, paragraph id). Pairs with an empty side, an
untranslated (equal) side, more than 60 words on a side or a word-count ratio above 3 are
dropped, then duplicates.

Split: as Ding's (``common.split_pairs``): groups of pairs sharing a normalised side are
shuffled with ``random.Random(seed)`` and whole groups go to test (at least 1,000 pairs),
valid (at least 1,000), then train. Output: ``{train,valid,test}.{de,en}.gz`` and
``stats.json``.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

from aiayn.data.corpora.common import (
    MAX_WORD_RATIO,
    MAX_WORDS,
    Pair,
    dedupe,
    fetch_debian_package,
    split_pairs,
    write_parallel_corpus,
)

LO_PACKAGES = {"de": "libreoffice-help-de", "en": "libreoffice-help-en-us"}
LO_HELP_DIRS = {"de": "usr/share/libreoffice/help/de", "en": "usr/share/libreoffice/help/en-US"}

_PARAGRAPH_ID = re.compile(r"^(?:par|hd)_id")


class _HelpPageParser(HTMLParser):
    """Text of each ``par_id``/``hd_id`` element of one rendered LibreOffice help page.

    Hidden platform variants (``MAC...``) are skipped; the ``default...`` one is kept.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, str] = {}
        self._stack: list[Pair] = []  # (tag, role) with role in id/skip/other
        self._id: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "input", "meta", "link", "hr"):
            self._text.append(" ")
            return
        attrs = dict(attrs)
        element_id = attrs.get("id") or ""
        if self._id is None and _PARAGRAPH_ID.match(element_id):
            self._id, self._text, role = element_id, [], "id"
        elif "hidden" in attrs and not element_id.startswith("default"):
            role = "skip"
        else:
            role = "other"
        self._stack.append((tag, role))

    def handle_endtag(self, tag):
        while self._stack:
            open_tag, role = self._stack.pop()
            if role == "id":
                text = " ".join("".join(self._text).split())
                self.paragraphs.setdefault(self._id, text)
                self._id = None
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self._id is not None and not any(role == "skip" for _, role in self._stack):
            self._text.append(data)


def help_paragraphs(help_dir: Path) -> dict[tuple[str, str], str]:
    """Map (page path relative to ``help_dir``, paragraph id) to its text."""
    found = {}
    for page in sorted(help_dir.rglob("*.html")):
        parser = _HelpPageParser()
        parser.feed(page.read_text(encoding="utf-8"))
        relative = page.relative_to(help_dir).as_posix()
        found.update({(relative, pid): text for pid, text in parser.paragraphs.items()})
    return found


def prepare_libreoffice_help(out_dir: Path, seed: int = 1) -> dict:
    """Build corpus ``libreoffice-help-de-en`` from the Debian help packages."""
    out_dir, counts, versions = Path(out_dir), Counter(), {}
    with tempfile.TemporaryDirectory() as tmp:
        texts = {}
        for lang, package in LO_PACKAGES.items():
            root, versions[package] = fetch_debian_package(package, Path(tmp))
            texts[lang] = help_paragraphs(root / LO_HELP_DIRS[lang])
    pairs = []
    for key in sorted(texts["de"].keys() & texts["en"].keys()):
        de, en = texts["de"][key], texts["en"][key]
        n_de, n_en = len(de.split()), len(en.split())
        if not de or not en:
            counts["empty"] += 1
        elif de == en:
            counts["untranslated"] += 1
        elif max(n_de, n_en) > MAX_WORDS:
            counts["too_long"] += 1
        elif max(n_de, n_en) / min(n_de, n_en) > MAX_WORD_RATIO:
            counts["length_ratio"] += 1
        else:
            pairs.append((de, en))
    unique = dedupe(pairs)
    counts["duplicate"] = len(pairs) - len(unique)
    stats = {
        "corpus": "libreoffice-help-de-en",
        "seed": seed,
        "source": {"packages": versions},
        "paragraphs": {lang: len(found) for lang, found in texts.items()},
        "aligned_paragraphs": len(texts["de"].keys() & texts["en"].keys()),
        "dropped": dict(sorted(counts.items())),
    }
    return write_parallel_corpus(out_dir, split_pairs(unique, seed), stats)
