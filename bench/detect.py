"""Language detection among a server's languages: accuracy on short texts (under 20
characters, where LibreTranslate switches detectors) and long ones, and time per text, of
the detectors on PyPI that keep to given languages, against LibreTranslate's choice
(langdetect, with lexilang's word lists first for a text under 20 characters).

    python bench/detect.py [--per-language 150] [--seed 0]

(the bench extra: langdetect, py3langid and Django; the serve extra: lingua and lexilang; and
polib, of the documents extra.) Texts, all shipped offline:
- Django's translations of its messages (the ``django`` package's locale catalogues, read
  with polib; the English are their message ids): ten languages, candidates all ten;
- the test splits of the repository's corpora data/ding-de-en (dictionary example sentences)
  and data/libreoffice-help-de-en (help paragraphs and headings), with candidates German
  and English, as the shipped de-en server detects.

Placeholders (``%(name)s``, ``{0}``), markup and accelerators (``_Save``) are taken out of
the messages; a message its translators left in English is dropped; texts repeat in no
corpus. Each detector runs in a process of its own, asked text by text, restricted to the
candidates: its first call (loading its data) timed apart, each corpus's first 20 texts
detected once before the timing (models a detector loads on first use), and the memory the
process grew by. "aiayn" is ``aiayn.serve.detect.detect``, what the server runs: lingua, and
for a text under 20 characters lexilang's word lists first, where they name one candidate
alone. Prints a table and appends a record to bench/results/detect.jsonl;
docs/performance.md shows it (bench/report.py).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, write_result  # noqa: E402

LANGUAGES = ("de", "en", "fr", "es", "it", "pt", "nl", "pl", "sv", "da")
SHORT = 20  # characters: LibreTranslate's switch to lexilang, and this benchmark's split
_PLACEHOLDER = re.compile(r"%\(\w+\)[sdifr]|%[sdifr]|\{\w*\}|<[^>]+>|&\w+;")


def clean(text: str) -> str:
    """A message as a person reads it: placeholders and markup out, spaces collapsed."""
    text = _PLACEHOLDER.sub(" ", text).replace("_", "")
    return " ".join(text.split()).strip(" :")


def django_messages(languages) -> dict[str, list[str]]:
    """Each language's translated messages in Django's catalogues (English: the ids)."""
    import django
    import polib

    root = Path(django.__file__).parent
    out: dict[str, set[str]] = {code: set() for code in languages}
    for code in languages:
        for po in root.glob(f"**/locale/{code if code != 'en' else 'fr'}/LC_MESSAGES/*.po"):
            for entry in polib.pofile(str(po)):
                if entry.obsolete or "fuzzy" in entry.flags:
                    continue
                if code == "en":
                    texts = [entry.msgid, entry.msgid_plural]
                else:
                    translated = [entry.msgstr, *entry.msgstr_plural.values()]
                    english = {clean(entry.msgid), clean(entry.msgid_plural)}
                    texts = [t for t in translated if clean(t) not in english]
                out[code].update(clean(t) for t in texts if t)
    return {
        code: sorted(t for t in texts if any(c.isalpha() for c in t)) for code, texts in out.items()
    }


def corpus_tests(name: str) -> dict[str, list[str]]:
    """The test split of data/NAME (German and English)."""
    out = {}
    for code in ("de", "en"):
        with gzip.open(ROOT / "data" / name / f"test.{code}.gz", "rt", encoding="utf-8") as f:
            out[code] = sorted({line.strip() for line in f if line.strip()})
    return out


def sample(texts: dict[str, list[str]], per_language: int, seed: int) -> dict:
    """Up to ``per_language`` short and long texts of each language, drawn with ``seed``."""
    rng = random.Random(seed)
    out: dict[str, list[tuple[str, str]]] = {"short": [], "long": []}
    for code, items in texts.items():
        for bucket in out:
            pool = [t for t in items if (len(t) < SHORT) == (bucket == "short")]
            out[bucket] += [(code, t) for t in rng.sample(pool, min(per_language, len(pool)))]
    return out


# --- the detectors, each: (texts, candidates) -> one language code a text


def langdetect_codes(text: str, candidates) -> str | None:
    """langdetect's most probable candidate (None: none of its guesses is one)."""
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0
    try:
        guesses = detect_langs(text)
    except LangDetectException:
        return None
    return next((g.lang for g in guesses if g.lang in candidates), None)


def libretranslate(texts: list[str], candidates) -> list[str]:
    """LibreTranslate's rule: under 20 characters lexilang's word lists where they know a
    word, else langdetect; English where neither answers."""
    from lexilang.detector import detect as lexilang

    out = []
    for text in texts:
        if len(text) < SHORT:
            code, confidence = lexilang(text, list(candidates))
            if confidence > 0:
                out.append(code)
                continue
        out.append(langdetect_codes(text, candidates) or "en")
    return out


def langdetect_alone(texts: list[str], candidates) -> list[str]:
    return [langdetect_codes(t, candidates) or "en" for t in texts]


@functools.cache
def _lingua(candidates: tuple[str, ...], low_accuracy: bool):
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, c.upper())) for c in candidates]
    builder = LanguageDetectorBuilder.from_languages(*languages)
    return (builder.with_low_accuracy_mode() if low_accuracy else builder).build()


def lingua_detector(low_accuracy: bool) -> Callable:
    def detect(texts: list[str], candidates) -> list[str]:
        detector = _lingua(tuple(candidates), low_accuracy)
        found = [detector.detect_language_of(t) for t in texts]
        return [f.iso_code_639_1.name.lower() if f else "en" for f in found]

    return detect


@functools.cache
def _py3langid(candidates: tuple[str, ...]):
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(candidates))
    return identifier


def py3langid(texts: list[str], candidates) -> list[str]:
    identifier = _py3langid(tuple(candidates))
    return [identifier.classify(t)[0] for t in texts]


def aiayn(texts: list[str], candidates) -> list[str]:
    from aiayn.serve.detect import detect

    return [code for code, _ in detect(texts, candidates)]


DETECTORS = {  # name: (label, detect)
    "libretranslate": ("langdetect + lexilang (LibreTranslate)", libretranslate),
    "langdetect": ("langdetect", langdetect_alone),
    "lingua": ("lingua", lingua_detector(low_accuracy=False)),
    "lingua-low": ("lingua, low accuracy mode", lingua_detector(low_accuracy=True)),
    "py3langid": ("py3langid", py3langid),
    "aiayn": ("aiayn: lingua, lexilang's word lists first under 20 characters", aiayn),
}


def corpora(per_language: int, seed: int) -> dict:
    """{(corpus, length): (texts drawn as (language, text), candidates)}."""
    sources = {
        "Django messages": (django_messages(LANGUAGES), LANGUAGES),
        "Ding test (de, en)": (corpus_tests("ding-de-en"), ("de", "en")),
        "LibreOffice help test (de, en)": (corpus_tests("libreoffice-help-de-en"), ("de", "en")),
    }
    out = {}
    for corpus, (texts, candidates) in sources.items():
        for length, items in sample(texts, per_language, seed).items():
            if items:
                out[(corpus, length)] = (items, candidates)
    return out


def run_one(name: str, per_language: int, seed: int) -> dict:
    """One detector over every corpus, in this process alone: its first call (loading its
    data) timed apart, then accuracy and time a text, and the memory the process grew by."""
    import resource

    detect = DETECTORS[name][1]
    drawn = corpora(per_language, seed)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    items, candidates = next(iter(drawn.values()))
    start = time.perf_counter()
    detect([items[0][1]], candidates)
    first = time.perf_counter() - start
    runs = []
    for (corpus, length), (items, candidates) in drawn.items():
        detect([t for _, t in items[:20]], candidates)  # models for these candidates loaded
        start = time.perf_counter()
        found = detect([t for _, t in items], candidates)
        seconds = time.perf_counter() - start
        right = [code == got for (code, _), got in zip(items, found, strict=True)]
        by_language: dict[str, list[bool]] = {}
        for (code, _), ok in zip(items, right, strict=True):
            by_language.setdefault(code, []).append(ok)
        runs.append(
            {
                "corpus": corpus,
                "length": length,
                "texts": len(items),
                "candidates": list(candidates),
                "accuracy": sum(right) / len(right),
                "accuracy_by_language": {c: sum(v) / len(v) for c, v in by_language.items()},
                "ms_per_text": 1000 * seconds / len(items),
            }
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"first_call_s": first, "peak_rss_added_mb": peak - rss_before, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--per-language", type=int, default=150, help="texts drawn a language and length"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", choices=DETECTORS, help=argparse.SUPPRESS)  # a child's run
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.per_language, args.seed)))
        return
    detectors = {}
    for name, (label, _) in DETECTORS.items():  # each in a process of its own
        child = subprocess.run(
            [sys.executable, __file__, "--one", name, "--per-language", str(args.per_language),
             "--seed", str(args.seed)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        detectors[name] = {"label": label, **json.loads(child.stdout)}
        for run in detectors[name]["runs"]:
            print(
                f"{run['corpus']:32} {run['length']:5} {run['texts']:5} {label[:40]:40} "
                f"{100 * run['accuracy']:5.1f}% {run['ms_per_text']:7.3f} ms/text",
                flush=True,
            )
    packages = ("langdetect", "lexilang", "lingua-language-detector", "py3langid", "django")
    write_result(
        "detect",
        {
            "languages": list(LANGUAGES),
            "short_below_chars": SHORT,
            "per_language": args.per_language,
            "seed": args.seed,
            "versions": {p: version(p) for p in packages},
            "detectors": detectors,
        },
    )


if __name__ == "__main__":
    main()
