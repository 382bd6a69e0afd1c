"""Tests for reading the user's own files and prepared corpus splits."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest

from aiayn.data.corpora.common import write_gz_text
from aiayn.data.files import load_split, read_jsonl, read_labelled, read_parallel, read_tsv


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
