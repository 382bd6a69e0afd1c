"""Tests for corpus ding-de-en: Ding parsing, splitting and writing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from aiayn.data.corpora.common import normalize_key
from aiayn.data.corpora.ding import clean_text, parse_ding, prepare_ding
from aiayn.data.files import load_split

REPO_ROOT = Path(__file__).resolve().parents[3]
DING_DIR = REPO_ROOT / "data" / "ding-de-en"

SAMPLE_LINES = [
    "# Version :: test 2024-01-01",
    "# License :: GPL Version 2 or later",
    "Haus {n} | Häuser {pl} | Das Haus ist sehr alt. :: house | houses | The house is very old.",
    "spät {adv} | Sie kam (gestern) spät nach Hause. [ugs.] :: late | She came home late (yesterday). [coll.]",
    "Es regnet stark.; Es schüttet heftig. :: It is raining heavily.; It is pouring down.",
    "Ich habe es satt!; Mir reicht es jetzt! [ugs.] :: I am fed up with it!; I have had enough! [Br.]; Enough!",
    "Er kam spät. :: he came late",
    "Wir haben den Zug verpasst :: We missed the train.",
    "Ich gebe jdm. etw. zurück. :: I give sth. back to sb.",
    "Er liebt seinen Vater. :: He adores/idolizes his father.",
    "Es regnet. :: It rains.",
    "Morgenstund hat Gold im Mund. [Sprw.] :: The early bird catches the worm. [prov.]",
    "Aalsuppe {f} [cook.] <Aalsupe> | Aalsuppen {pl} :: eel soup /ES/ | eel soups",
    "Haus {n} | Häuser {pl} | Das Haus ist sehr alt. :: house | houses | The house is very old.",
    "Das ist gut. :: That is good.",
    "Das ist gut! :: This is fine!",
    "gut {adj} :: good",
]
SAMPLE_LINES += [
    f"Satz Nummer {i} steht hier. | Nummer {i} :: Sentence number {i} is here. | number {i}"
    for i in range(40)
]
SAMPLE_LINES += [  # pairs of entries whose German sides differ only in punctuation
    f"Das Wetter in Ort {i} ist gut{mark} :: The weather in place {i} is {word}{mark}"
    for i in range(8)
    for mark, word in ((".", "good"), ("!", "fine"))
]


@pytest.fixture
def ding_file(tmp_path):
    path = tmp_path / "de-en"
    path.write_text("\n".join(SAMPLE_LINES) + "\n", encoding="utf-8")
    return path


def _read_gz(path):
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_clean_text_removes_annotations():
    text = "Aal {m} (auf der Speisekarte) [cook.] <Ahl>  blau /AB/ ;"
    assert clean_text(text) == "Aal blau"
    assert clean_text("She came home late (yesterday). [coll.]") == "She came home late."


def test_parse_aligns_parts_and_alternatives():
    sentences, phrases, counts = parse_ding(SAMPLE_LINES)
    assert ("Das Haus ist sehr alt.", "The house is very old.") in sentences
    assert ("Sie kam spät nach Hause.", "She came home late.") in sentences
    # equal numbers of ";" alternatives are paired in order ...
    assert ("Es regnet stark.", "It is raining heavily.") in sentences
    assert ("Es schüttet heftig.", "It is pouring down.") in sentences
    # ... unequal numbers keep only the first alternative of each side
    assert ("Ich habe es satt!", "I am fed up with it!") in sentences
    assert not any(de == "Mir reicht es jetzt!" for de, _ in sentences)
    # a missing final mark is copied from the partner sentence
    assert ("Wir haben den Zug verpasst.", "We missed the train.") in sentences
    assert ("Haus", "house") in phrases and ("Häuser", "houses") in phrases
    assert ("Aalsuppe", "eel soup") in phrases
    assert ("Nummer 3", "number 3") in phrases
    assert counts["raw_lines"] == len(SAMPLE_LINES)
    assert counts["comment_or_blank_lines"] == 2


def test_parse_drops_fragments_placeholders_and_short():
    sentences, _, counts = parse_ding(SAMPLE_LINES)
    german = {de for de, _ in sentences}
    assert "Er kam spät." not in german  # English side is a fragment
    assert "Ich gebe jdm. etw. zurück." not in german
    assert "Er liebt seinen Vater." not in german  # slash alternative
    assert "Es regnet." not in german  # too short
    assert "Morgenstund hat Gold im Mund." not in german  # proverb equivalent
    assert counts["drop:fragment"] == 1
    assert counts["drop:placeholder"] == 1
    assert counts["drop:slash_alternative"] == 1
    assert counts["drop:too_short"] == 1
    assert counts["drop:proverb"] == 1


def test_prepare_ding_dedupes_splits_without_leakage(ding_file, tmp_path):
    stats = prepare_ding(tmp_path / "out", source=ding_file, seed=3, test_pairs=5, valid_pairs=5)
    out = tmp_path / "out"
    splits = {name: load_split(out, name) for name in ("train", "valid", "test")}
    assert {name: len(pairs) for name, pairs in splits.items()} == stats["pairs"]
    assert stats["dropped"]["duplicate"] == 1
    everything = [pair for pairs in splits.values() for pair in pairs]
    assert len(everything) == len(set(everything)) == 64
    assert len(splits["test"]) >= 5 and len(splits["valid"]) >= 5
    for name, pairs in splits.items():
        german = {normalize_key(de) for de, _ in pairs}
        for other, other_pairs in splits.items():
            if other != name:
                assert german.isdisjoint(normalize_key(de) for de, _ in other_pairs)
    # "Das ist gut." and "Das ist gut!" normalise alike, so they share a split
    where = {de: name for name, pairs in splits.items() for de, _ in pairs}
    assert where["Das ist gut."] == where["Das ist gut!"]
    for i in range(8):
        assert where[f"Das Wetter in Ort {i} ist gut."] == where[f"Das Wetter in Ort {i} ist gut!"]
    assert json.loads((out / "stats.json").read_text())["seed"] == 3
    phrases = list(
        zip(_read_gz(out / "phrases.de.gz"), _read_gz(out / "phrases.en.gz"), strict=False)
    )
    assert ("gut", "good") in phrases and ("Haus", "house") in phrases
    assert len(phrases) == len(set(phrases))


def test_prepare_ding_is_byte_reproducible(ding_file, tmp_path):
    files = [
        f"{s}.{lang}.gz" for s in ("train", "valid", "test", "phrases") for lang in ("de", "en")
    ]
    runs = {}
    for run, seed in (("a", 1), ("b", 1), ("c", 2)):
        prepare_ding(tmp_path / run, source=ding_file, seed=seed, test_pairs=5, valid_pairs=5)
        runs[run] = [(tmp_path / run / name).read_bytes() for name in files + ["stats.json"]]
    assert runs["a"] == runs["b"]
    header = runs["a"][0][:10]
    assert header[3] == 0 and header[4:8] == bytes(4)  # no file name, mtime 0
    assert runs["a"][:6] != runs["c"][:6]  # another seed gives another split


def test_committed_ding_corpus_has_clean_held_out_test():
    test = load_split(DING_DIR, "test")
    train = load_split(DING_DIR, "train")
    valid = load_split(DING_DIR, "valid")
    assert len(test) >= 1000 and len(valid) >= 1000 and len(train) > 10_000
    train_sources = {normalize_key(de) for de, _ in train}
    leaked = [de for de, _ in test + valid if normalize_key(de) in train_sources]
    assert leaked == []
    stats = json.loads((DING_DIR / "stats.json").read_text(encoding="utf-8"))
    assert stats["pairs"] == {"train": len(train), "valid": len(valid), "test": len(test)}
