"""Which language a text is in, among the languages a server translates: LibreTranslate's
``/detect`` and ``source: "auto"``.

Each text is detected on its own (LibreTranslate gives a batch one detection for all its
texts), among the candidate languages only, by lingua (``lingua-language-detector``: n-gram
models of 75 languages, its high-accuracy mode); a text under 20 characters is looked up in
lexilang's word lists first (as LibreTranslate does), whose answer is taken where they name
one candidate alone. Of the detectors on PyPI that keep to given languages, this gave the
most right answers on short texts and as many as any but py3langid on long ones
(``bench/detect.py``, docs/performance.md: against LibreTranslate's langdetect and lexilang,
and each detector alone; py3langid, 1.7 points ahead on long interface messages, needs numpy
2, above aiayn's floor). Both are deterministic: a text gets the same answer in any batch.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

from aiayn.serve.inputs import has_words

SHORT = 20  # characters: a shorter text is looked up in word lists first (as LibreTranslate)
WORD_LIST_CONFIDENCE = 90.0  # what LibreTranslate reports for lexilang's single answer
# codes a server may use that the detectors know by another name (Argos Translate's pb, zt)
ALIASES = {"pb": "pt", "zt": "zh"}

_lock = threading.Lock()  # lexilang reads its word lists on first use, into a global


def detect(texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str, float]]:
    """Each text's language among ``candidates`` (language codes, as a server names them)
    and the confidence of that answer, 0-100 as LibreTranslate gives it. A text with no
    words (an emoji, a number, a URL), or one the detectors cannot place, is the first
    candidate with confidence 0; a sole candidate is every text's language (confidence 100).
    Two candidates the detectors know as one language (``pt`` and Argos Translate's ``pb``)
    are answered as the first of them; a code they do not know is never answered, but as
    the first candidate."""
    codes = list(dict.fromkeys(c.lower() for c in candidates))
    if not codes:
        raise ValueError("detect: no candidate languages")
    unknown = (codes[0], 0.0)
    if len(codes) == 1:
        return [(codes[0], 100.0) if has_words(t) else unknown for t in texts]
    out = []
    for text in texts:
        found = None
        if has_words(text):
            found = (len(text) < SHORT and _word_lists(text, codes)) or _lingua(text, codes)
        out.append(found or unknown)
    return out


def _named(codes: Sequence[str]) -> dict[str, str]:
    """{the detectors' name of a language: the first of ``codes`` that is it}."""
    names: dict[str, str] = {}
    for code in codes:
        names.setdefault(ALIASES.get(code, code), code)
    return names


def _word_lists(text: str, codes: list[str]) -> tuple[str, float] | None:
    """The candidate lexilang's word lists name alone for ``text`` (more of its words in
    that language's list than in any other's), or None."""
    from lexilang.detector import detect as lexilang

    names = _named(codes)
    with _lock:  # its first call loads the lists
        found, confidence = lexilang(text, list(names))
    if confidence < 0.9:  # none, or a tie between languages
        return None
    return names[found], WORD_LIST_CONFIDENCE


def _lingua(text: str, codes: list[str]) -> tuple[str, float] | None:
    """lingua's most confident candidate for ``text``, or None (it has no confidence in
    any, or knows fewer than two of the candidates)."""
    names = _named(codes)
    detector = _lingua_detector(tuple(names))
    if detector is None:
        return None
    values = detector.compute_language_confidence_values(text)
    if not values or values[0].value <= 0:
        return None
    return names[values[0].language.iso_code_639_1.name.lower()], _percent(values[0].value)


@functools.lru_cache(maxsize=16)
def _lingua_detector(names: tuple[str, ...]):
    """lingua's detector among the languages of ``names`` it knows (None: fewer than two),
    built once per set; its models load on first use."""
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = []
    for name in names:
        try:
            languages.append(Language.from_iso_code_639_1(IsoCode639_1.from_str(name)))
        except ValueError:  # a language lingua has no model for
            continue
    if len(languages) < 2:
        return None
    return LanguageDetectorBuilder.from_languages(*languages).build()


def _percent(probability: float) -> float:
    """A probability as LibreTranslate's confidence: a whole percentage."""
    return float(round(100 * probability))


def ranked(texts: Sequence[str], found: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """The languages ``found`` for ``texts`` (``detect``'s answers) ranked by how many of the
    texts' characters are in each, most first, each with its texts' confidence (their mean,
    weighted by their lengths): LibreTranslate's one answer for a batch, and a document's
    language. A text found with confidence 0 counts for nothing; none found: the first
    answer alone."""
    chars: dict[str, int] = {}
    weighted: dict[str, float] = {}
    for text, (code, confidence) in zip(texts, found, strict=True):
        if confidence > 0:
            chars[code] = chars.get(code, 0) + len(text)
            weighted[code] = weighted.get(code, 0.0) + confidence * len(text)
    if not chars:
        return list(found[:1])
    order = sorted(chars, key=lambda code: -chars[code])  # ties: the first found first
    return [(code, float(round(weighted[code] / chars[code]))) for code in order]
