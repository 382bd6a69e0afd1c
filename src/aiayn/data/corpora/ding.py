"""Corpus ``ding-de-en``: German-English example sentences of the Ding dictionary.

Source: the Ding German-English dictionary (Frank Richter, TU Chemnitz), file
``/usr/share/trans/de-en`` of the Debian package ``trans-de-en``: the installed copy when
there is one, else one fetched with ``apt-get download`` and unpacked with ``dpkg-deb``, so
the corpus rebuilds byte for byte from the Debian archive.

License: GPL-2+, like its source (see ``data/ding-de-en/README.md``).

Output: ``{train,valid,test}.{de,en}.gz`` (one sentence per line) and ``stats.json``, plus
an optional ``phrases.{de,en}.gz`` set made of the dictionary's word and phrase entries.

Rules, applied to every dictionary line ``de :: en``:

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

Split:

6. Pairs are deduplicated. Pairs sharing a normalised German *or* English side form
   one group; whole groups go to test (at least 1,000 pairs), valid (at least 1,000),
   then train after a ``random.Random(seed)`` shuffle of the sorted groups, so no German
   source (and no English reference) is in two splits (``common.split_pairs``).
7. Phrases (deduplicated, without slash alternatives or brackets, at most 60 words,
   and without any side equal to a valid/test sentence) keep dictionary order.
"""

from __future__ import annotations

import re
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path

from aiayn.data.corpora.common import (
    MAX_WORD_RATIO,
    MAX_WORDS,
    TEST_PAIRS,
    VALID_PAIRS,
    Pair,
    dedupe,
    fetch_debian_package,
    installed_version,
    normalize_key,
    sha256_hex,
    split_pairs,
    write_parallel,
    write_parallel_corpus,
)
from aiayn.errors import decode_utf8

DING_PACKAGE = "trans-de-en"
DING_PATH = Path("/usr/share/trans/de-en")
DING_FILE_IN_PACKAGE = "usr/share/trans/de-en"
MIN_SENTENCE_WORDS = 3

_ANNOTATION = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|<[^<>]*>|(?<!\S)/[^\s/]+/(?!\S)")
_PARENTHESES = re.compile(r"\([^()]*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_SENTENCE = re.compile(r"^[\"'„“‚‘»«]?[A-ZÄÖÜ0-9].*[.!?][\"'“”‘’»«]?$")
_PLACEHOLDER = re.compile(r"\b(?:etw|jdm|jdn|jds|jd|sth|sb|etc|usw)\b|\.\.\.|…")
_SLASH_ALTERNATIVE = re.compile(r"[^\W\d]\s*/|/\s*[^\W\d]")
_BRACKETS = re.compile(r"[(){}\[\]<>]")
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
    lines = decode_utf8(data, source).splitlines()
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
            "sha256": sha256_hex(data),
        },
        "raw_lines": counts.pop("raw_lines", 0),
        "comment_or_blank_lines": counts.pop("comment_or_blank_lines", 0),
        "dropped": {k[5:]: v for k, v in sorted(counts.items()) if k.startswith("drop:")},
        "dropped_phrases": {
            k[12:]: v for k, v in sorted(counts.items()) if k.startswith("drop_phrase:")
        },
        "phrases": len(phrase_pairs),
    }
    return write_parallel_corpus(out_dir, splits, stats)
