"""Tests for the offline corpora: Ding parsing, splitting, writing and the readers."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

from aiayn.data.corpora import (
    clean_text,
    help_paragraphs,
    load_split,
    normalize_key,
    parse_ding,
    prepare_ding,
    read_jsonl,
    read_parallel,
    read_tsv,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
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


def test_read_parallel_mismatch_names_files_and_counts(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "b.en.gz"
    src.write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    tgt.write_bytes(gzip.compress(b"one\ntwo\n"))
    with pytest.raises(ValueError) as error:
        read_parallel(src, tgt)
    message = str(error.value)
    assert str(src) in message and str(tgt) in message
    assert "3 lines" in message and "has 2" in message


def test_read_parallel_warns_about_empty_lines(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("eins\n\ndrei\nvier\n", encoding="utf-8")
    tgt.write_text("one\ntwo\nthree\n \n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"dropped 2 line\(s\).*line 2, 4\)"):
        pairs = read_parallel(src, tgt)
    assert pairs == [("eins", "one"), ("drei", "three")]


def test_read_tsv(tmp_path):
    good = tmp_path / "good.tsv"
    good.write_text("Hallo\tHello\nJa\tYes\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_tsv(good) == [("Hallo", "Hello"), ("Ja", "Yes")]
    bad = tmp_path / "bad.tsv"
    bad.write_text("Hallo\tHello\nJa\tYes\nNein No\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv, line 3: expected exactly one tab, found 0"):
        read_tsv(bad)


def test_read_jsonl_takes_hugging_face_translation_records(tmp_path):
    path = tmp_path / "wmt.jsonl.gz"
    lines = [
        {"translation": {"de": "Hallo.", "en": "Hello."}, "id": 0},  # WMT / IWSLT layout
        {"de": " Ja. ", "en": "Yes.", "image": "1.jpg"},  # Multi30k layout
        {"translation": {"de": "", "en": "Empty."}},
    ]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in lines) + "\n\n"
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.warns(UserWarning, match=r"dropped 2 line\(s\).*line 3, 4\)"):
        assert read_jsonl(path, "de", "en") == [("Hallo.", "Hello."), ("Ja.", "Yes.")]
    with pytest.warns(UserWarning):
        assert read_jsonl(path, "en", "de")[0] == ("Hello.", "Hallo.")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"translation": {"de": "a", "en": "b"}}\n{"translation": {"de": "a"}}\n')
    with pytest.raises(
        ValueError, match=r"bad\.jsonl, line 2: no text for language 'en' \(fields: de\)"
    ):
        read_jsonl(bad, "de", "en")
    bad.write_text('{"de": "a", "en": "b"}\n{"de": "a", "en": \n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: not JSON"):
        read_jsonl(bad, "de", "en")


def test_load_split_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"valid\.de\.gz not found.*aiayn prepare"):
        load_split(tmp_path / "ding-de-en", "valid")


def test_help_paragraphs_align_ids_and_skip_mac_variants(tmp_path):
    page = tmp_path / "text" / "page.html"
    page.parent.mkdir()
    page.write_text(
        '<body><h1 id="hd_id1">Title <b>bold</b></h1><p id="other">x</p>'
        '<p id="par_id2" class="paragraph">Choose <span class="switchinline">'
        '<span hidden="true" id="MACx"><span>Preferences</span></span>'
        '<span hidden="true" id="defaultx">Tools - Options</span></span>.<br>Done</p></body>',
        encoding="utf-8",
    )
    assert help_paragraphs(tmp_path) == {
        ("text/page.html", "hd_id1"): "Title bold",
        ("text/page.html", "par_id2"): "Choose Tools - Options. Done",
    }


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
