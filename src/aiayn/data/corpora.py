"""Offline, reproducible German-English corpora built from Debian packages.

Both corpora come from the Debian archive, so they can be rebuilt byte for byte
with nothing but ``apt-get download`` and ``dpkg-deb``:

* ``ding-de-en``: the example sentences of the Ding German-English dictionary
  (Frank Richter, TU Chemnitz; package ``trans-de-en``, GPL-2+), plus an optional
  ``phrases`` set made of its word and phrase entries.
* ``libreoffice-help-de-en``: LibreOffice help paragraphs aligned by (page, paragraph
  id) between ``libreoffice-help-de`` and ``libreoffice-help-en-us`` (MPL-2.0).

A corpus directory holds ``{train,valid,test}.{de,en}.gz`` (UTF-8, one sentence per
line, gzip with mtime=0 so equal inputs give equal bytes) and ``stats.json``.

Ding rules, applied to every dictionary line ``de :: en``:

1. Both sides are split on ``|``; German sub-entry i is paired with English
   sub-entry i (lines whose counts differ are dropped as ``part_count_mismatch``).
2. Annotations are removed: ``{m}`` ``{pl}`` ``{vt}``, ``[ugs.]`` ``[Br.]``,
   ``<variant spellings>``, ``/ABBR/`` and parenthesised optional or explanatory
   text ``(...)``; whitespace is collapsed.
3. Each sub-entry is split on ``;`` into alternatives. Equal numbers of alternatives
   are paired in order; otherwise only the first alternative of each side is kept.
4. A pair is a sentence when both sides start with a capital letter (or digit) and
   end in ``.``, ``!`` or ``?``. A capitalised side that merely lacks the final mark
   gets its partner's. If only one side is a sentence, the pair is a ``fragment``
   (dropped); if neither is, it is a phrase.
5. Sentences are dropped for a proverb tag (``[Sprw.]``: equivalents, not
   translations), a placeholder (``etw.``, ``jdm.``, ``sth.``, ``sb.``, ``etc.``,
   ``...``), a slash alternative (``kept/lost``, scope unknowable), leftover brackets,
   fewer than 3 or more than 60 words on a side, or a word-count ratio above 3.
6. Pairs are deduplicated. Pairs sharing a normalised German *or* English side form
   one group; whole groups go to test, valid, then train after a
   ``random.Random(seed)`` shuffle of the sorted groups, so no German source (and no
   English reference) is in two splits.
7. Phrases (deduplicated, without slash alternatives or brackets, at most 60 words,
   and without any side equal to a valid/test sentence) keep dictionary order.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import subprocess
import tempfile
import unicodedata
import warnings
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

DING_PACKAGE = "trans-de-en"
DING_PATH = Path("/usr/share/trans/de-en")
DING_FILE_IN_PACKAGE = "usr/share/trans/de-en"
LO_PACKAGES = {"de": "libreoffice-help-de", "en": "libreoffice-help-en-us"}
LO_HELP_DIRS = {"de": "usr/share/libreoffice/help/de", "en": "usr/share/libreoffice/help/en-US"}
SPLITS = ("train", "valid", "test")
TEST_PAIRS = 1000  # test gets at least this many pairs (whole groups are added)
VALID_PAIRS = 1000
MIN_SENTENCE_WORDS = 3
MAX_WORDS = 60
MAX_WORD_RATIO = 3.0
MAX_MISMATCH_LINES_SHOWN = 5
Pair = tuple[str, str]  # (German, English) or (source, target)

_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|(?<!\S)/[^\s/]+/(?!\S)")
_PARENTHESES = re.compile(r"\([^()]*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_SENTENCE = re.compile(r"^[\"'„“‚‘»«]?[A-ZÄÖÜ0-9].*[.!?][\"'“”‘’»«]?$")
_PLACEHOLDER = re.compile(r"\b(?:etw|jdm|jdn|jds|jd|sth|sb|etc|usw)\b|\.\.\.|…")
_SLASH_ALTERNATIVE = re.compile(r"[^\W\d]\s*/|/\s*[^\W\d]")
_BRACKETS = re.compile(r"[(){}\[\]<>]")
_PARAGRAPH_ID = re.compile(r"^(?:par|hd)_id")
_PROVERB = re.compile(r"\[(?:Sprw|prov)\.\]")
_UNFINISHED = re.compile(r"^[\"'„“‚‘»«]?[A-ZÄÖÜ0-9].*[\w\"'“”‘’»«]$")


def clean_text(text: str) -> str:
    """Remove Ding annotations and parenthesised text; collapse whitespace."""
    text = _ANNOTATION.sub(" ", unicodedata.normalize("NFC", text))
    previous = None
    while previous != text:  # innermost parentheses first, for nested ones
        previous, text = text, _PARENTHESES.sub(" ", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(text.split()))
    return text.strip(" ,;:")


def align_alternatives(de: str, en: str) -> tuple[list[Pair], int]:
    """Pair the ``;`` alternatives of two cleaned sub-entries (see module rule 3).

    Returns the pairs and the number of alternatives left unpaired.
    """
    de_alts = [a.strip() for a in de.split(";") if a.strip()]
    en_alts = [a.strip() for a in en.split(";") if a.strip()]
    if not de_alts or not en_alts:
        return [], 0
    if len(de_alts) == len(en_alts):
        return list(zip(de_alts, en_alts, strict=True)), 0
    return [(de_alts[0], en_alts[0])], len(de_alts) + len(en_alts) - 2


def is_sentence(text: str) -> bool:
    """A capitalised text ending in sentence punctuation (before filtering)."""
    return bool(_SENTENCE.match(text))


def repair_final_punctuation(de: str, en: str) -> Pair:
    """Copy the final ``.!?`` of a sentence to a capitalised partner that lacks one."""
    de_sentence, en_sentence = is_sentence(de), is_sentence(en)
    if de_sentence and not en_sentence and _UNFINISHED.match(en):
        en += re.findall(r"[.!?]", de)[-1]
    elif en_sentence and not de_sentence and _UNFINISHED.match(de):
        de += re.findall(r"[.!?]", en)[-1]
    return de, en


def sentence_drop_reason(de: str, en: str) -> str | None:
    """Why a sentence pair is unusable, or None if it is kept (module rule 5)."""
    if _PLACEHOLDER.search(de) or _PLACEHOLDER.search(en):
        return "placeholder"
    if _SLASH_ALTERNATIVE.search(de) or _SLASH_ALTERNATIVE.search(en):
        return "slash_alternative"
    if _BRACKETS.search(de) or _BRACKETS.search(en):
        return "leftover_brackets"
    n_de, n_en = len(de.split()), len(en.split())
    if min(n_de, n_en) < MIN_SENTENCE_WORDS:
        return "too_short"
    if max(n_de, n_en) > MAX_WORDS:
        return "too_long"
    if max(n_de, n_en) / min(n_de, n_en) > MAX_WORD_RATIO:
        return "length_ratio"
    return None


def normalize_key(text: str) -> str:
    """Case- and punctuation-insensitive key used for grouping and leakage checks."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def parse_ding(lines) -> tuple[list[Pair], list[Pair], Counter]:
    """Split Ding dictionary lines into (sentence pairs, phrase pairs, counters).

    Both lists keep first-seen order and may hold duplicates; counters count raw and
    comment lines and every dropped pair by reason.
    """
    sentences, phrases, counts = [], [], Counter()
    for line in lines:
        counts["raw_lines"] += 1
        line = line.rstrip("\r\n")
        if not line.strip() or line.startswith("#"):
            counts["comment_or_blank_lines"] += 1
            continue
        sides = line.split(" :: ")
        if len(sides) != 2:
            counts["drop:malformed_line"] += 1
            continue
        de_parts, en_parts = sides[0].split("|"), sides[1].split("|")
        if len(de_parts) != len(en_parts):
            counts["drop:part_count_mismatch"] += 1
            continue
        for de_part, en_part in zip(de_parts, en_parts, strict=True):
            proverb = _PROVERB.search(de_part + en_part)
            pairs, unpaired = align_alternatives(clean_text(de_part), clean_text(en_part))
            counts["drop:alternative_unpaired"] += unpaired
            for de, en in pairs:
                de, en = repair_final_punctuation(de, en)
                de_sentence, en_sentence = is_sentence(de), is_sentence(en)
                if de_sentence and en_sentence:
                    reason = "proverb" if proverb else sentence_drop_reason(de, en)
                    if reason:
                        counts["drop:" + reason] += 1
                    else:
                        sentences.append((de, en))
                elif de_sentence or en_sentence:
                    counts["drop:fragment"] += 1
                elif len(de.split()) > MAX_WORDS or len(en.split()) > MAX_WORDS:
                    counts["drop_phrase:too_long"] += 1
                elif _SLASH_ALTERNATIVE.search(de + " " + en) or _BRACKETS.search(de + en):
                    counts["drop_phrase:slash_or_brackets"] += 1
                else:
                    phrases.append((de, en))
    return sentences, phrases, counts


def dedupe(pairs: list[Pair]) -> list[Pair]:
    """Unique pairs in first-seen order."""
    return list(dict.fromkeys(pairs))


def group_pairs(pairs: list[Pair]) -> list[list[Pair]]:
    """Connected components of pairs linked by a shared normalised side, sorted."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for de, en in pairs:
        a, b = find("de:" + normalize_key(de)), find("en:" + normalize_key(en))
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(find("de:" + normalize_key(pair[0])), []).append(pair)
    return sorted(sorted(group) for group in groups.values())


def split_pairs(
    pairs: list[Pair], seed: int, test_pairs: int = TEST_PAIRS, valid_pairs: int = VALID_PAIRS
) -> dict[str, list[Pair]]:
    """Deterministic group-wise train/valid/test split (module rule 6)."""
    groups = group_pairs(pairs)
    random.Random(seed).shuffle(groups)
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for group in groups:
        if len(splits["test"]) < test_pairs:
            splits["test"].extend(group)
        elif len(splits["valid"]) < valid_pairs:
            splits["valid"].extend(group)
        else:
            splits["train"].extend(group)
    check_no_leakage(splits)
    return splits


def check_no_leakage(splits: dict[str, list[Pair]]) -> None:
    """Raise AssertionError if a normalised German source is in two splits."""
    seen: dict[str, str] = {}
    for name, pairs in splits.items():
        for de, _ in pairs:
            other = seen.setdefault(normalize_key(de), name)
            if other != name:
                raise AssertionError(f"German source {de!r} is in both {other} and {name}")


def write_gz_lines(path: Path, lines: list[str]) -> None:
    """Write UTF-8 lines to a gzip file whose bytes depend only on the lines."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz:
        gz.write("".join(line + "\n" for line in lines).encode("utf-8"))


def write_parallel(
    out_dir: Path, name: str, pairs: list[Pair], src_lang: str = "de", tgt_lang: str = "en"
) -> None:
    """Write ``name.{src_lang}.gz`` and ``name.{tgt_lang}.gz``."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_gz_lines(out_dir / f"{name}.{src_lang}.gz", [src for src, _ in pairs])
    write_gz_lines(out_dir / f"{name}.{tgt_lang}.gz", [tgt for _, tgt in pairs])


def run_command(command: list[str], cwd: Path, hint: str) -> str:
    try:
        done = subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        raise RuntimeError(f"`{' '.join(command)}` failed: {detail.strip()}\n{hint}") from error
    return done.stdout


def fetch_debian_package(package: str, workdir: Path) -> tuple[Path, str]:
    """``apt-get download`` a package and ``dpkg-deb -x`` it; return (root, version)."""
    hint = f"Run `apt-get update` first, or install {package} and point the source at it."
    run_command(["apt-get", "download", package], workdir, hint)
    debs = sorted(workdir.glob(f"{package}_*.deb"))
    if not debs:
        raise RuntimeError(f"`apt-get download {package}` produced no .deb in {workdir}")
    root = workdir / package
    run_command(["dpkg-deb", "-x", str(debs[-1]), str(root)], workdir, hint)
    version = run_command(["dpkg-deb", "-f", str(debs[-1]), "Version"], workdir, hint).strip()
    return root, version


def installed_version(package: str) -> str | None:
    """Version of an installed Debian package, or None."""
    try:
        return run_command(["dpkg-query", "-W", "-f=${Version}", package], Path.cwd(), "").strip()
    except RuntimeError:
        return None


def _write_corpus(out_dir: Path, splits: dict, stats: dict) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        write_parallel(out_dir, name, splits[name])
    stats["pairs"] = {name: len(splits[name]) for name in SPLITS}
    text = json.dumps(stats, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    (out_dir / "stats.json").write_text(text, encoding="utf-8")
    return stats


def prepare_ding(
    out_dir: Path,
    source: Path | None = None,
    seed: int = 1,
    *,
    test_pairs: int = TEST_PAIRS,
    valid_pairs: int = VALID_PAIRS,
) -> dict:
    """Build corpus ``ding-de-en`` (plus ``phrases.{de,en}.gz``) in ``out_dir``.

    ``source`` is a Ding ``de-en`` file; by default the installed
    /usr/share/trans/de-en, else one downloaded with apt-get. Returns the stats.
    """
    out_dir = Path(out_dir)
    version = None
    with tempfile.TemporaryDirectory() as tmp:
        if source is None and DING_PATH.exists():
            source, version = DING_PATH, installed_version(DING_PACKAGE)
        elif source is None:
            root, version = fetch_debian_package(DING_PACKAGE, Path(tmp))
            source = root / DING_FILE_IN_PACKAGE
        data = Path(source).read_bytes()
    lines = data.decode("utf-8").splitlines()
    header = next((ln for ln in lines if ln.startswith("# Version ::")), "")
    sentences, phrases, counts = parse_ding(lines)
    unique = dedupe(sentences)
    counts["drop:duplicate"] = len(sentences) - len(unique)
    splits = split_pairs(unique, seed, test_pairs, valid_pairs)

    held_out = {
        normalize_key(t) for name in ("valid", "test") for pair in splits[name] for t in pair
    }
    unique_phrases = dedupe(phrases)
    counts["drop_phrase:duplicate"] = len(phrases) - len(unique_phrases)
    phrase_pairs = [
        p for p in unique_phrases if not {normalize_key(p[0]), normalize_key(p[1])} & held_out
    ]
    counts["drop_phrase:in_valid_or_test"] = len(unique_phrases) - len(phrase_pairs)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_parallel(out_dir, "phrases", phrase_pairs)

    stats = {
        "corpus": "ding-de-en",
        "seed": seed,
        "source": {
            "package": DING_PACKAGE,
            "package_version": version,
            "dictionary_version": header.partition("::")[2].strip() or None,
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        "raw_lines": counts.pop("raw_lines", 0),
        "comment_or_blank_lines": counts.pop("comment_or_blank_lines", 0),
        "dropped": {k[5:]: v for k, v in sorted(counts.items()) if k.startswith("drop:")},
        "dropped_phrases": {
            k[12:]: v for k, v in sorted(counts.items()) if k.startswith("drop_phrase:")
        },
        "phrases": len(phrase_pairs),
    }
    return _write_corpus(out_dir, splits, stats)


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
    return _write_corpus(out_dir, split_pairs(unique, seed), stats)


def _read_lines(path: Path) -> list[str]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        return [line.rstrip("\r\n") for line in handle]


def _drop_empty(pairs: list[Pair], numbers: list[int], where: str) -> list:
    kept = [(s, t) for s, t in pairs if s and t]
    empty = [n for (s, t), n in zip(pairs, numbers, strict=True) if not (s and t)]
    if empty:
        shown = ", ".join(map(str, empty[:MAX_MISMATCH_LINES_SHOWN]))
        more = ", ..." if len(empty) > MAX_MISMATCH_LINES_SHOWN else ""
        warnings.warn(
            f"dropped {len(empty)} line(s) with an empty side in {where} (line {shown}{more})",
            stacklevel=3,
        )
    return kept


def read_parallel(src_path: Path, tgt_path: Path) -> list[Pair]:
    """Read aligned source/target files (plain or .gz), one sentence per line.

    Raises ValueError if the line counts differ; drops pairs with an empty side
    with a warning that gives their (1-based) line numbers.
    """
    src, tgt = _read_lines(src_path), _read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}"
        )
    pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt, strict=True)]
    return _drop_empty(pairs, list(range(1, len(pairs) + 1)), f"{src_path} / {tgt_path}")


def read_tsv(path: Path) -> list[Pair]:
    """Read ``source<TAB>target`` lines (plain or .gz).

    A non-blank line without exactly one tab raises ValueError naming the file and
    line; blank lines and pairs with an empty side are dropped with a warning.
    """
    pairs, numbers = [], []
    for number, line in enumerate(_read_lines(path), start=1):
        if line.strip() and line.count("\t") != 1:
            raise ValueError(
                f"{path}, line {number}: expected exactly one tab, found {line.count(chr(9))}"
            )
        src, _, tgt = line.partition("\t")
        pairs.append((src.strip(), tgt.strip()))
        numbers.append(number)
    return _drop_empty(pairs, numbers, str(path))


def read_jsonl(path: Path, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Read JSON lines in the layout of Hugging Face translation datasets (plain or .gz).

    Each line is ``{"translation": {"de": ..., "en": ...}}`` (WMT, IWSLT, ``Dataset.to_json``)
    or ``{"de": ..., "en": ...}`` (e.g. Multi30k); other fields are ignored. A line that is not
    JSON, or lacks a language, raises ValueError naming the file, the line and the fields it
    has; blank lines and pairs with an empty side are dropped with a warning.
    """
    pairs, numbers = [], []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            pairs.append(("", ""))
            numbers.append(number)
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {number}: not JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: expected a JSON object")
        fields = record.get("translation", record)
        if not isinstance(fields, dict):
            raise ValueError(f"{path}, line {number}: 'translation' is not an object")
        for lang in (src_lang, tgt_lang):
            if not isinstance(fields.get(lang), str):
                raise ValueError(
                    f"{path}, line {number}: no text for language {lang!r} "
                    f"(fields: {', '.join(sorted(fields)) or 'none'})"
                )
        pairs.append((fields[src_lang].strip(), fields[tgt_lang].strip()))
        numbers.append(number)
    return _drop_empty(pairs, numbers, str(path))


def load_split(
    corpus_dir: Path, split: str, src_lang: str = "de", tgt_lang: str = "en"
) -> list[Pair]:
    """Load ``corpus_dir/{split}.{src_lang,tgt_lang}.gz`` as (source, target) pairs."""
    corpus_dir = Path(corpus_dir)
    paths = [corpus_dir / f"{split}.{lang}.gz" for lang in (src_lang, tgt_lang)]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found; build the corpus with `aiayn prepare {corpus_dir.name}` "
                f"(or `python scripts/prepare_corpora.py {corpus_dir.name} --out {corpus_dir}`)"
            )
    return read_parallel(*paths)
