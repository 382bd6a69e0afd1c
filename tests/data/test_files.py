"""Tests for reading the user's own files and prepared corpus splits."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.data.corpora.common import write_gz_text
from aiayn.data.files import load_split, read_jsonl, read_labelled, read_parallel, read_tsv
from aiayn.errors import UserError


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
    with pytest.raises(
        ValueError, match=r"test\.tsv\.gz, line 1: not UTF-8 \(byte 0xe9 at column 7"
    ):
        read_labelled(tmp_path, "test")
    corrupt = bytearray(gzip.compress(b"fresh\tgood text here " * 50))
    corrupt[20:30] = b"\xff" * 10  # a damaged deflate stream: zlib.error
    (tmp_path / "test.tsv.gz").write_bytes(bytes(corrupt))
    with pytest.raises(ValueError, match=r"test\.tsv\.gz: not a UTF-8 gzip file"):
        read_labelled(tmp_path, "test")


# --------------------------------------------------------------------------- any bytes at all

BYTES = st.one_of(
    st.binary(max_size=120),
    st.lists(
        st.one_of(
            st.text(max_size=15), st.sampled_from(["\r", "\t", "\ufeff", "{}", '{"de": "a"}'])
        ),
        max_size=10,
    ).map(lambda parts: "\n".join(parts).encode("utf-8")),
)


@settings(max_examples=150, deadline=None)
@given(BYTES, BYTES, st.booleans())
def test_the_readers_give_pairs_or_name_the_file(tmp_path_factory, a, b, gzipped):
    d = tmp_path_factory.mktemp("any")
    suffix = ".gz" if gzipped else ""
    src, tgt = d / f"a.de{suffix}", d / f"a.en{suffix}"
    for path, data in ((src, a), (tgt, b)):
        path.write_bytes(gzip.compress(data) if gzipped and data[:1] != b"x" else data)
    (d / "x.tsv.gz").write_bytes(a)  # not gzip at all, mostly
    readers = [
        lambda: read_parallel(src, tgt),
        lambda: read_tsv(src),
        lambda: read_jsonl(src, "de", "en"),
        lambda: read_labelled(d, "x"),
    ]
    for read in readers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = read()
            except UserError as e:
                assert any(str(p) in str(e) for p in (src, tgt, d / "x.tsv.gz"))
                continue
        for pair in result:
            assert all(isinstance(x, str) and x and "\n" not in x and "\r" not in x for x in pair)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=8))
def test_written_pairs_read_back_aligned(tmp_path_factory, pairs):
    from aiayn.data.corpora.common import write_parallel

    d = tmp_path_factory.mktemp("rt")
    one_line = [(s.replace("\n", " "), t.replace("\n", " ")) for s, t in pairs]
    write_parallel(d, "train", one_line)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = load_split(d, "train")

    def clean(text: str, first: bool) -> str:  # what a file's reader makes of one line
        text = text.removeprefix("\ufeff") if first else text
        return text.replace("\r", " ").strip()

    wanted = [(clean(s, i == 0), clean(t, i == 0)) for i, (s, t) in enumerate(one_line)]
    assert back == [(s, t) for s, t in wanted if s and t]


def test_a_lone_carriage_return_does_not_shift_the_pairs(tmp_path):
    (tmp_path / "a.de").write_bytes(b"Eins\rzwei.\nDrei.\nVier.\n")
    (tmp_path / "a.en").write_bytes(b"One two.\r\nThree.\r\nFo\rur.\r\n")
    with pytest.warns(UserWarning, match=r"a.de: 1 line\(s\) hold a carriage return .*line 1\)"):
        pairs = read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    assert pairs == [("Eins zwei.", "One two."), ("Drei.", "Three."), ("Vier.", "Fo ur.")]
    (tmp_path / "mac.de").write_bytes(b"Eins.\rZwei.\r")  # classic Mac OS line endings
    (tmp_path / "mac.en").write_bytes(b"One.\nTwo.\n")
    assert read_parallel(tmp_path / "mac.de", tmp_path / "mac.en") == [
        ("Eins.", "One."),
        ("Zwei.", "Two."),
    ]


def test_a_byte_order_mark_is_dropped_and_bad_bytes_are_named(tmp_path):
    (tmp_path / "a.de").write_bytes("\ufeffJa.\n".encode())
    (tmp_path / "a.en").write_bytes(b"Yes.\n")
    assert read_parallel(tmp_path / "a.de", tmp_path / "a.en") == [("Ja.", "Yes.")]
    (tmp_path / "b.de").write_bytes("Ja.\nGrüße.\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"b\.de, line 2: not UTF-8 \(byte 0xfc at column 3\)"):
        read_parallel(tmp_path / "b.de", tmp_path / "a.en")
    (tmp_path / "c.de.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(UserError, match=r"c\.de\.gz: not a UTF-8 gzip file, or a damaged one"):
        read_parallel(tmp_path / "c.de.gz", tmp_path / "a.en")


def test_a_line_break_inside_a_json_text_stays_in_its_pair(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"de": "Eins\\nzwei.", "en": "One two."}\n{"de": "Drei.", "en": "Three."}\n')
    with pytest.warns(UserWarning, match="1 text.s. hold a line break"):
        assert read_jsonl(path, "de", "en") == [("Eins zwei.", "One two."), ("Drei.", "Three.")]
