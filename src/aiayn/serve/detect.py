"""Which language a text is in, among the languages a server translates: LibreTranslate's
``/detect`` and ``source: "auto"``.

Each text is detected on its own (LibreTranslate gives a batch one detection for all its
texts), among the candidate languages only. A text under 20 characters is looked up in
lexilang's word lists first (as LibreTranslate does), whose answer is taken where they name
one candidate alone, and otherwise goes to lingua (``lingua-language-detector``, its
high-accuracy n-gram models); a longer text goes to py3langid (langid.py's naive Bayes
model). Of the detectors on PyPI that keep to given languages, these gave the most right
answers each on its own lengths (``bench/detect.py``, docs/performance.md: against
LibreTranslate's langdetect and lexilang, and each detector alone). All three are
deterministic: a text gets the same answer in any batch.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Sequence

from aiayn.serve.inputs import has_words

SHORT = 20  # characters: a shorter text is a short one (LibreTranslate's limit too)
WORD_LIST_CONFIDENCE = 90.0  # what LibreTranslate reports for lexilang's single answer
# codes a server may use that a detector knows by another name (Argos Translate's pb and zt)
ALIASES = {
    "lexilang": {"pb": "pt", "zt": "zh"},
    "lingua": {"pb": "pt", "zt": "zh"},
    "py3langid": {"pb": "pt", "zt": "zh", "nb": "no"},
}

_lock = threading.Lock()  # lexilang reads its word lists on first use, into a global


def detect(texts: Sequence[str], candidates: Sequence[str]) -> list[tuple[str, float]]:
    """Each text's language among ``candidates`` (language codes, as a server names them)
    and the confidence of that answer, 0-100 as LibreTranslate gives it. A text with no
    words (an emoji, a number, a URL), or one no detector can place, is the first candidate
    with confidence 0; a sole candidate is every text's language (confidence 100). Two
    candidates a detector knows as one language (``pt`` and Argos Translate's ``pb``) are
    answered as the first of them; a code no detector knows is never answered, but as the
    first candidate."""
    codes = list(dict.fromkeys(c.lower() for c in candidates))
    if not codes:
        raise ValueError("detect: no candidate languages")
    unknown = (codes[0], 0.0)
    if len(codes) == 1:
        return [(codes[0], 100.0) if has_words(t) else unknown for t in texts]
    out = []
    for text in texts:
        found = None
        if not has_words(text):
            pass
        elif len(text) < SHORT:
            found = _word_lists(text, codes) or _lingua(text, codes) or _langid(text, codes)
        else:
            found = _langid(text, codes) or _lingua(text, codes)
        out.append(found or unknown)
    return out


def _named(library: str, codes: Sequence[str]) -> dict[str, str]:
    """{the library's name of a language: the first of ``codes`` that is it}."""
    names: dict[str, str] = {}
    for code in codes:
        names.setdefault(ALIASES[library].get(code, code), code)
    return names


def _word_lists(text: str, codes: list[str]) -> tuple[str, float] | None:
    """The candidate lexilang's word lists name alone for ``text`` (more of its words in
    that language's list than in any other's), or None."""
    from lexilang.detector import detect as lexilang

    names = _named("lexilang", codes)
    with _lock:  # its first call loads the lists
        found, confidence = lexilang(text, list(names))
    if confidence < 0.9:  # none, or a tie between languages
        return None
    return names[found], WORD_LIST_CONFIDENCE


def _lingua(text: str, codes: list[str]) -> tuple[str, float] | None:
    """lingua's most confident candidate for ``text``, or None (it has no confidence in
    any, or knows fewer than two of the candidates)."""
    names = _named("lingua", codes)
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


def _langid(text: str, codes: list[str]) -> tuple[str, float] | None:
    """py3langid's most probable candidate for ``text``, or None (it knows fewer than two
    of the candidates)."""
    names = _named("py3langid", codes)
    identifier = _langid_identifier(tuple(names))
    if identifier is None:
        return None
    found, probability = identifier.classify(text)
    return names[found], _percent(probability)


@functools.lru_cache(maxsize=16)
def _langid_identifier(names: tuple[str, ...]):
    """py3langid's model restricted to the languages of ``names`` it knows (None: fewer than
    two), probabilities normalised over them; made once per set, over one loaded model."""
    model = _langid_model()
    known = [name for name in names if name in set(model.nb_classes)]
    if len(known) < 2:
        return None
    identifier = copy.copy(model)  # the full model's arrays shared, the restriction its own
    identifier.set_languages(known)
    return identifier


@functools.cache
def _langid_model():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


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
